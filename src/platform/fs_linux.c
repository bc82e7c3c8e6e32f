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

static int open_flags(unsigned flags, int *oflags)
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

static int blkdev_size(int fd, uint64_t *size)
{
    uint64_t n;
    if (ioctl(fd, BLKGETSIZE64, &n) < 0)
        return -errno;
    *size = n;
    return 0;
}

static int link_unnamed(int fd, const char *path)
{
    /* Through /proc, since linkat's AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH. */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

static void drop_cache(int fd, uint64_t off, uint64_t len)
{
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

const smoe__fs smoe__fs_os = {
    .open_flags = open_flags,
    .blkdev_size = blkdev_size,
    .link = link_unnamed,
    .drop_cache = drop_cache,
};
