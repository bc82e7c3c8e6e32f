/* memfile_linux.c - a memory file (memfile.h) from memfd_create. */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfile.h"

int smoe__memfile_open(uint64_t len)
{
    if (len > (uint64_t)INT64_MAX)
        return -EOVERFLOW;
    int fd = memfd_create("smoe_ring", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (ftruncate(fd, (off_t)len) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}
