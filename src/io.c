/*
 * io.c - the OS implementation of smoe__io, and the full-read/full-write
 * loops every caller uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/fs.h> /* BLKGETSIZE64 */
#elif defined(__APPLE__)
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
#endif

#include "smoe/smoe.h"
#include "io.h"

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
    if (flags & SMOE__IO_TMPFILE) {
#if defined(O_TMPFILE)
        oflags |= O_TMPFILE | O_WRONLY;
#else
        return -EOPNOTSUPP;
#endif
    } else if (flags & SMOE__IO_WRONLY)
        oflags |= O_WRONLY | O_CREAT | O_TRUNC;
    else if (flags & SMOE__IO_RDWR)
        oflags |= O_RDWR | O_CREAT;
    else
        oflags |= O_RDONLY;
#if defined(O_DIRECT)
    if (flags & SMOE__IO_DIRECT)
        oflags |= O_DIRECT;
#endif
    if (flags & SMOE__IO_NONBLOCK)
        oflags |= O_NONBLOCK;
    int fd;
    do {
        fd = open(path, oflags, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
#if defined(__APPLE__)
    /* macOS has no O_DIRECT: F_NOCACHE makes reads bypass the unified buffer
     * cache, which with aligned buffers becomes a DMA into them. */
    if ((flags & SMOE__IO_DIRECT) && fcntl(fd, F_NOCACHE, 1) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
#endif
    int e = (flags & SMOE__IO_NONBLOCK) ? settle_nonblock(fd) : 0;
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
#if defined(__APPLE__) && defined(F_FULLFSYNC)
    /* fsync() on macOS does not flush the drive's cache; F_FULLFSYNC does. */
    if (fcntl(fd, F_FULLFSYNC) == 0)
        return 0;
#endif
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

/* A block device's st_size is 0: ask the device (a vault may be written
 * to a raw partition). */
static int blk_size(int fd, uint64_t *size)
{
#if defined(__linux__) && defined(BLKGETSIZE64)
    uint64_t n;
    if (ioctl(fd, BLKGETSIZE64, &n) < 0)
        return -errno;
    *size = n;
    return 0;
#elif defined(__APPLE__) && defined(DKIOCGETBLOCKCOUNT)
    uint64_t count;
    uint32_t bs;
    if (ioctl(fd, DKIOCGETBLOCKCOUNT, &count) < 0 || ioctl(fd, DKIOCGETBLOCKSIZE, &bs) < 0)
        return -errno;
    *size = count * bs;
    return 0;
#else
    (void)fd;
    *size = 0;
    return 0;
#endif
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
#if defined(__APPLE__)
    out->mtime_sec = (int64_t)st.st_mtimespec.tv_sec;
    out->mtime_nsec = (uint32_t)st.st_mtimespec.tv_nsec;
#else
    out->mtime_sec = (int64_t)st.st_mtim.tv_sec;
    out->mtime_nsec = (uint32_t)st.st_mtim.tv_nsec;
#endif
    mode_t m = st.st_mode;
    out->type = S_ISREG(m)    ? SMOE__IO_TYPE_REG
                : S_ISBLK(m)  ? SMOE__IO_TYPE_BLK
                : S_ISDIR(m)  ? SMOE__IO_TYPE_DIR
                : S_ISCHR(m)  ? SMOE__IO_TYPE_CHR
                : S_ISFIFO(m) ? SMOE__IO_TYPE_FIFO
                : S_ISSOCK(m) ? SMOE__IO_TYPE_SOCK
                              : SMOE__IO_TYPE_OTHER;
    return out->type == SMOE__IO_TYPE_BLK ? blk_size(fd, &out->size) : 0;
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
#if defined(__linux__)
    /* Through /proc, since linkat's AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH. */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
#else
    (void)fd;
    (void)path;
    return -EOPNOTSUPP;
#endif
}

static void os_drop_cache(const smoe__io *io, int fd, uint64_t off, uint64_t len)
{
    (void)io;
#if defined(POSIX_FADV_DONTNEED)
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
#else
    /* macOS has no fadvise; its unified buffer cache keeps the few pages
     * of a vault's header and tables (docs/portability.md). */
    (void)fd;
    (void)off;
    (void)len;
#endif
}

const smoe__io smoe__io_os = {
    os_open, os_close, os_pread, os_pwrite, os_fsync, os_rename, os_unlink, os_size, NULL,
    os_drop_cache, os_stat, os_link,
};

/* Set only by tests, before any stream or writer is opened. */
static const smoe__io *current_io = &smoe__io_os;

const smoe__io *smoe__io_get(void)
{
    return current_io;
}

void smoe__io_set(const smoe__io *io)
{
    current_io = io ? io : &smoe__io_os;
}

/* Interrupted calls are retried up to SMOE__IO_MAX_STALLS times in a row. */
static int interrupted(int r, int *tries)
{
    return r == -EINTR && ++*tries < SMOE__IO_MAX_STALLS;
}

int smoe__io_open(const smoe__io *io, const char *path, unsigned flags)
{
    int r, tries = 0;
    do
        r = io->open(io, path, flags);
    while (interrupted(r, &tries));
    return r;
}

int smoe__io_fsync(const smoe__io *io, int fd)
{
    int r, tries = 0;
    do
        r = io->fsync(io, fd);
    while (interrupted(r, &tries));
    return r;
}

int smoe__io_rename(const smoe__io *io, const char *from, const char *to)
{
    int r, tries = 0;
    do
        r = io->rename(io, from, to);
    while (interrupted(r, &tries));
    return r;
}

int smoe__io_unlink(const smoe__io *io, const char *path)
{
    int r, tries = 0;
    do
        r = io->unlink(io, path);
    while (interrupted(r, &tries));
    return r;
}

int smoe__io_size(const smoe__io *io, int fd, uint64_t *size)
{
    int r, tries = 0;
    do
        r = io->size(io, fd, size);
    while (interrupted(r, &tries));
    return r;
}

int smoe__io_fstat(const smoe__io *io, int fd, smoe__io_stat *st)
{
    if (!io->stat) {
        st->type = SMOE__IO_TYPE_REG;
        st->dev = st->ino = 0;
        st->mtime_sec = 0;
        st->mtime_nsec = 0;
        return smoe__io_size(io, fd, &st->size);
    }
    int r, tries = 0;
    do
        r = io->stat(io, fd, st);
    while (interrupted(r, &tries));
    return r;
}

int smoe__io_link(const smoe__io *io, int fd, const char *path)
{
    if (!io->link)
        return -EOPNOTSUPP;
    int r, tries = 0;
    do
        r = io->link(io, fd, path);
    while (interrupted(r, &tries));
    return r;
}

const char *smoe__io_type_name(int type)
{
    switch (type) {
    case SMOE__IO_TYPE_REG: return "a regular file";
    case SMOE__IO_TYPE_BLK: return "a block device";
    case SMOE__IO_TYPE_DIR: return "a directory";
    case SMOE__IO_TYPE_CHR: return "a character device";
    case SMOE__IO_TYPE_FIFO: return "a FIFO (named pipe)";
    case SMOE__IO_TYPE_SOCK: return "a socket";
    default: return "a file of an unknown type";
    }
}

int smoe__io_close(const smoe__io *io, int fd)
{
    int r = io->close(io, fd);
    return r == -EINTR ? 0 : r;
}

int smoe__io_read_full(const smoe__io *io, int fd, void *buf, size_t n,
                       uint64_t off, const atomic_int *stop, int *err_no)
{
    smoe__io_fail why = {0, 0, 0, 0, 0};
    int r = smoe__io_read_full_ex(io, fd, buf, n, off, 0, stop, &why);
    *err_no = why.eno;
    return r;
}

static int read_failed(smoe__io_fail *why, int rc, uint64_t off, size_t n, int eno,
                       int tries)
{
    *why = (smoe__io_fail){off, n, eno, (uint32_t)tries, 0};
    return rc;
}

int smoe__io_read_full_ex(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off,
                          uint32_t align, const atomic_int *stop, smoe__io_fail *why)
{
    unsigned char *p = buf;
    int stalls = 0;
    while (n > 0) {
        /* relaxed: a hint to stop early; the caller re-checks shutdown itself */
        if (stop && atomic_load_explicit(stop, memory_order_relaxed))
            return read_failed(why, SMOE_ESHUTDOWN, off, n, 0, stalls);
        ssize_t r = io->pread(io, fd, p, n, off);
        if (r > 0) {
            size_t got = (size_t)r;
            if (align && got < n && got % align) {
                /* Cut off a boundary: at the end of the file, or a partial
                 * read; only then is the file's size worth a call. */
                uint64_t size;
                if (smoe__io_size(io, fd, &size) == 0 && size <= off + got)
                    return read_failed(why, SMOE_ETRUNC, off + got, n - got, 0, 1);
                got -= got % align;
                if (got == 0) {
                    if (++stalls >= SMOE__IO_MAX_STALLS)
                        return read_failed(why, SMOE_EIO, off, n, 0, stalls);
                    continue;
                }
            }
            p += got;
            n -= got;
            off += got;
            stalls = 0;
            continue;
        }
        if (r == 0) /* end of file before n bytes */
            return read_failed(why, SMOE_ETRUNC, off, n, 0, 1);
        int retry = r == -EINTR || r == -EAGAIN;
        if (!retry || ++stalls >= SMOE__IO_MAX_STALLS)
            return read_failed(why, SMOE_EIO, off, n, (int)-r, retry ? stalls : stalls + 1);
    }
    return 0;
}

int smoe__io_write_full(const smoe__io *io, int fd, const void *buf, size_t n,
                        uint64_t off, int *err_no)
{
    const unsigned char *p = buf;
    int stalls = 0;
    *err_no = 0;
    while (n > 0) {
        ssize_t r = io->pwrite(io, fd, p, n, off);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            off += (uint64_t)r;
            stalls = 0;
            continue;
        }
        *err_no = r == 0 ? EIO : (int)-r;
        if ((r != 0 && r != -EINTR && r != -EAGAIN) || ++stalls >= SMOE__IO_MAX_STALLS)
            return SMOE_EIO;
    }
    return 0;
}
