/* fs_generic.c - the file calls of a POSIX system without its own file
 * here (fs.h): O_DIRECT and posix_fadvise where the headers have them,
 * plain fsync, no unnamed files, block device sizes unknown. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "io.h"
#include "fs.h"

int smoe__fs_open_flags(unsigned flags, int *oflags)
{
    if (flags & SMOE__IO_TMPFILE)
        return -EOPNOTSUPP;
#if defined(O_DIRECT)
    if (flags & SMOE__IO_DIRECT)
        *oflags |= O_DIRECT;
#endif
    return 0;
}

int smoe__fs_opened(int fd, unsigned flags)
{
    (void)fd;
    (void)flags;
    return 0;
}

int smoe__fs_sync(int fd)
{
    return fsync(fd) < 0 ? -errno : 0;
}

int smoe__fs_blkdev_size(int fd, uint64_t *size)
{
    (void)fd;
    *size = 0;
    return 0;
}

int smoe__fs_link(int fd, const char *path)
{
    (void)fd;
    (void)path;
    return -EOPNOTSUPP;
}

void smoe__fs_drop_cache(int fd, uint64_t off, uint64_t len)
{
#if defined(POSIX_FADV_DONTNEED)
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
#else
    (void)fd;
    (void)off;
    (void)len;
#endif
}
