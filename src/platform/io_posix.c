/*
 * io_posix.c - the table of file calls that calls the operating system
 * (smoe__io_os, io.h): POSIX open, pread, pwrite, fstat, rename, unlink,
 * with what differs between systems in fs.h (fs_linux.c, fs_darwin.c,
 * fs_generic.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* rename */
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "fs.h"

/* Clear O_NONBLOCK again on a regular file or block device: reads of the
 * file must wait for the disk as usual. Other kinds stay non-blocking, so a
 * read of a FIFO cannot hang either (the caller refuses them). */
static int settle_nonblock(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
        return 0;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

static int os_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    int oflags = O_CLOEXEC;
    if (flags & SMOE__IO_TMPFILE)
        oflags |= O_WRONLY;
    else if (flags & SMOE__IO_WRONLY)
        oflags |= O_WRONLY | O_CREAT | O_TRUNC;
    else if (flags & SMOE__IO_RDWR)
        oflags |= O_RDWR | O_CREAT;
    else
        oflags |= O_RDONLY;
    if (flags & SMOE__IO_NONBLOCK)
        oflags |= O_NONBLOCK;
    int e = smoe__fs_os.open_flags ? smoe__fs_os.open_flags(flags, &oflags)
                                    : (flags & SMOE__IO_TMPFILE) ? -EOPNOTSUPP : 0;
    if (e < 0)
        return e;
    int fd;
    do {
        fd = open(path, oflags, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    e = smoe__fs_os.opened ? smoe__fs_os.opened(fd, flags) : 0;
    if (e == 0 && (flags & SMOE__IO_NONBLOCK))
        e = settle_nonblock(fd);
    if (e < 0) {
        close(fd);
        return e;
    }
    return fd;
}

static int os_close(const smoe__io *io, int fd)
{
    (void)io;
    /* Never retry close on EINTR: the descriptor is gone either way. */
    return close(fd) < 0 && errno != EINTR ? -errno : 0;
}

static ssize_t os_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    (void)io;
    ssize_t r = pread(fd, buf, n, (off_t)off);
    return r < 0 ? -errno : r;
}

static ssize_t os_pwrite(const smoe__io *io, int fd, const void *buf, size_t n,
                         uint64_t off)
{
    (void)io;
    ssize_t r = pwrite(fd, buf, n, (off_t)off);
    return r < 0 ? -errno : r;
}

static int os_fsync(const smoe__io *io, int fd)
{
    (void)io;
    if (smoe__fs_os.sync)
        return smoe__fs_os.sync(fd);
    return fsync(fd) < 0 ? -errno : 0;
}

static int os_rename(const smoe__io *io, const char *from, const char *to)
{
    (void)io;
    return rename(from, to) < 0 ? -errno : 0;
}

static int os_unlink(const smoe__io *io, const char *path)
{
    (void)io;
    return unlink(path) < 0 ? -errno : 0;
}

static int os_stat(const smoe__io *io, int fd, smoe__io_stat *out)
{
    (void)io;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    out->dev = (uint64_t)st.st_dev;
    out->ino = (uint64_t)st.st_ino;
    out->size = (uint64_t)st.st_size;
    out->mtime_sec = (int64_t)SMOE__ST_MTIM(st).tv_sec;
    out->mtime_nsec = (uint32_t)SMOE__ST_MTIM(st).tv_nsec;
    mode_t m = st.st_mode;
    out->type = S_ISREG(m)    ? SMOE__IO_TYPE_REG
                : S_ISBLK(m)  ? SMOE__IO_TYPE_BLK
                : S_ISDIR(m)  ? SMOE__IO_TYPE_DIR
                : S_ISCHR(m)  ? SMOE__IO_TYPE_CHR
                : S_ISFIFO(m) ? SMOE__IO_TYPE_FIFO
                : S_ISSOCK(m) ? SMOE__IO_TYPE_SOCK
                              : SMOE__IO_TYPE_OTHER;
    /* A block device's st_size is 0: ask the device (a vault may be written
     * to a raw partition). */
    if (out->type != SMOE__IO_TYPE_BLK)
        return 0;
    out->size = 0;
    return smoe__fs_os.blkdev_size ? smoe__fs_os.blkdev_size(fd, &out->size) : 0;
}

static int os_size(const smoe__io *io, int fd, uint64_t *size)
{
    smoe__io_stat st = {0};
    int r = os_stat(io, fd, &st);
    if (r == 0)
        *size = st.size;
    return r;
}

static int os_link(const smoe__io *io, int fd, const char *path)
{
    (void)io;
    return smoe__fs_os.link ? smoe__fs_os.link(fd, path) : -EOPNOTSUPP;
}

static void os_drop_cache(const smoe__io *io, int fd, uint64_t off, uint64_t len)
{
    (void)io;
    if (smoe__fs_os.drop_cache)
        smoe__fs_os.drop_cache(fd, off, len);
}

const smoe__io smoe__io_os = {
    os_open, os_close, os_pread, os_pwrite, os_fsync, os_rename, os_unlink, os_size, NULL,
    os_drop_cache, os_stat, os_link,
};
