/*
 * io.c - the OS implementation of smoe__io, and the full-read/full-write
 * loops every caller uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smoe/smoe.h"
#include "io.h"

static int os_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    int oflags = O_CLOEXEC;
    if (flags & SMOE__IO_WRONLY)
        oflags |= O_WRONLY | O_CREAT | O_TRUNC;
    else if (flags & SMOE__IO_RDWR)
        oflags |= O_RDWR | O_CREAT;
    else
        oflags |= O_RDONLY;
#if defined(O_DIRECT)
    if (flags & SMOE__IO_DIRECT)
        oflags |= O_DIRECT;
#endif
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

static int os_size(const smoe__io *io, int fd, uint64_t *size)
{
    (void)io;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *size = (uint64_t)st.st_size;
    return 0;
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
    os_drop_cache,
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

int smoe__io_close(const smoe__io *io, int fd)
{
    int r = io->close(io, fd);
    return r == -EINTR ? 0 : r;
}

int smoe__io_read_full(const smoe__io *io, int fd, void *buf, size_t n,
                       uint64_t off, const atomic_int *stop, int *err_no)
{
    smoe__io_fail why = {0, 0, 0, 0};
    int r = smoe__io_read_full_ex(io, fd, buf, n, off, 0, stop, &why);
    *err_no = why.eno;
    return r;
}

static int read_failed(smoe__io_fail *why, int rc, uint64_t off, size_t n, int eno,
                       int tries)
{
    *why = (smoe__io_fail){off, n, eno, (uint32_t)tries};
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
