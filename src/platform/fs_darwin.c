/* fs_darwin.c - macOS's file calls (fs.h): F_NOCACHE for direct I/O,
 * F_FULLFSYNC, the disk ioctls; no unnamed files, no fadvise. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<sys/disk.h>)
#include <sys/disk.h> /* DKIOCGETBLOCKCOUNT, DKIOCGETBLOCKSIZE */
#endif
#endif
#if !defined(DKIOCGETBLOCKCOUNT)
/* <sys/disk.h>'s values, for SDKs without it (zig's cross headers) */
#define DKIOCGETBLOCKSIZE _IOR('d', 24, uint32_t)
#define DKIOCGETBLOCKCOUNT _IOR('d', 25, uint64_t)
#endif

#include "io.h"
#include "fs.h"

static int opened(int fd, unsigned flags)
{
    /* macOS has no O_DIRECT: F_NOCACHE makes reads bypass the unified buffer
     * cache, which with aligned buffers becomes a DMA into them. */
    if ((flags & SMOE__IO_DIRECT) && fcntl(fd, F_NOCACHE, 1) < 0)
        return -errno;
    return 0;
}

static int sync_media(int fd)
{
    /* fsync() on macOS does not flush the drive's cache; F_FULLFSYNC does. */
    if (fcntl(fd, F_FULLFSYNC) == 0)
        return 0;
    return fsync(fd) < 0 ? -errno : 0;
}

static int blkdev_size(int fd, uint64_t *size)
{
    uint64_t count;
    uint32_t bs;
    if (ioctl(fd, DKIOCGETBLOCKCOUNT, &count) < 0 || ioctl(fd, DKIOCGETBLOCKSIZE, &bs) < 0)
        return -errno;
    *size = count * bs;
    return 0;
}

/* No unnamed files, no link for them, and no fadvise: the unified buffer
 * cache keeps the few pages of a vault's header and tables
 * (docs/portability.md). */
const smoe__fs smoe__fs_os = {
    .opened = opened,
    .sync = sync_media,
    .blkdev_size = blkdev_size,
};
