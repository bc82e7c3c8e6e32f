/*
 * dio_generic.c - the direct I/O alignment rule where the system does not
 * report it (dio.h): unknown. macOS uses this one too: its F_NOCACHE reads
 * need page-aligned buffers and offsets, which a vault's 16 KiB always are.
 */
#include <stdint.h>

#include "dio.h"

int smoe__dio_align(int fd, uint32_t *mem_align, uint32_t *off_align)
{
    (void)fd;
    *mem_align = *off_align = 0;
    return 1;
}
