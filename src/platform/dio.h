/* dio.h - direct I/O alignment query: statx on Linux (dio_linux.c), not
 * known elsewhere (dio_generic.c). */
#ifndef SMOE_DIO_H
#define SMOE_DIO_H

#include <stdint.h>

/* Alignment the file system requires of direct I/O buffers and offsets.
 * 0: known (*mem_align, *off_align set); 1: unknown (both 0). */
int smoe__dio_align(int fd, uint32_t *mem_align, uint32_t *off_align);

#endif
