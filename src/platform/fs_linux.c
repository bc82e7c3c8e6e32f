/* fs_linux.c - Linux's file calls (fs.h): O_DIRECT, O_TMPFILE, the block
 * device ioctl, linkat through /proc, posix_fadvise. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h> /* BLKGETSIZE64 */
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "io.h"
#include "fs.h"

int smoe__fs_open_flags(unsigned flags, int *oflags)
{
    if (flags & SMOE__IO_TMPFILE) {
#if defined(O_TMPFILE)
        *oflags |= O_TMPFILE;
#else
        return -EOPNOTSUPP;
#endif
    }
    if (flags & SMOE__IO_DIRECT)
        *oflags |= O_DIRECT;
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
    uint64_t n;
    if (ioctl(fd, BLKGETSIZE64, &n) < 0)
        return -errno;
    *size = n;
    return 0;
}

int smoe__fs_link(int fd, const char *path)
{
    /* Through /proc, since linkat's AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH. */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

void smoe__fs_drop_cache(int fd, uint64_t off, uint64_t len)
{
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}
