/*
 * dio_linux.c - the file system's direct I/O alignment rule (dio.h).
 *
 * Linux 6.1+ reports it through statx(STATX_DIOALIGN). This file includes
 * the kernel's struct statx, which glibc 2.36's headers lack the fields
 * of, so it stays apart from files that include <sys/stat.h>.
 */
#include <fcntl.h>
#include <linux/stat.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dio.h"

int smoe__dio_align(int fd, uint32_t *mem_align, uint32_t *off_align)
{
#if defined(STATX_DIOALIGN) && defined(SYS_statx)
    struct statx stx;
    memset(&stx, 0, sizeof stx);
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
        *mem_align = stx.stx_dio_mem_align;
        *off_align = stx.stx_dio_offset_align;
        return 0;
    }
#else
    (void)fd;
#endif
    *mem_align = *off_align = 0;
    return 1;
}
