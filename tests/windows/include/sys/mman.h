/* sys/mman.h for the test programs on Windows (posix_shim.c): read-only
 * and anonymous mappings; mincore skips the calling test (no page cache
 * to ask). Test code only: the library maps its ring in region_win32.c. */
#ifndef SMOE_SHIM_SYS_MMAN_H
#define SMOE_SHIM_SYS_MMAN_H

#include <stddef.h>
#include <sys/types.h>

#define PROT_NONE 0
#define PROT_READ 1
#define PROT_WRITE 2
#define MAP_SHARED 1
#define MAP_PRIVATE 2
#define MAP_ANONYMOUS 0x20
#define MAP_FAILED ((void *)-1)

void *mmap(void *addr, size_t len, int prot, int flags, int fd, long long off);
int munmap(void *addr, size_t len);
int mincore(void *addr, size_t len, unsigned char *vec);

#endif
