/*
 * io.c - which table of file calls is in use, and the loops every caller
 * makes its calls through: retries of interrupted calls, full reads and
 * writes. The table that calls the operating system is platform code
 * (platform/io_posix.c).
 */
#include <errno.h>
#include <string.h>

#include "smoe/smoe.h"
#include "error.h"
#include "io.h"

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

int smoe__io_open_file(const smoe__io *io, const char *path, unsigned flags, const char *what,
                       smoe__io_stat *st)
{
    int fd = smoe__io_open(io, path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK | flags);
    if (fd < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot open: %s", path, strerror(-fd));
    int r = smoe__io_fstat(io, fd, st);
    if (r < 0)
        r = smoe__fail(SMOE_ESYS, "%s: cannot examine it (fstat): %s", path, strerror(-r));
    else if (st->type != SMOE__IO_TYPE_REG && st->type != SMOE__IO_TYPE_BLK)
        r = smoe__fail(SMOE_EINVAL, "%s: %s%s%s%s, expected a regular file or a block "
                       "device", path, what ? "not " : "", what ? what : "", what ? ": " : "",
                       smoe__io_type_name(st->type));
    if (r < 0) {
        smoe__io_close(io, fd);
        return r;
    }
    return fd;
}

int smoe__io_close(const smoe__io *io, int fd)
{
    int r = io->close(io, fd);
    return r == -EINTR ? 0 : r;
}

int smoe__io_read_full(const smoe__io *io, int fd, void *buf, size_t n,
                       uint64_t off, const atomic_int *stop, int *err_no)
{
    smoe__io_fail why = {0, 0, 0, 0, 0, 0};
    int r = smoe__io_read_full_ex(io, fd, buf, n, off, 0, stop, &why);
    *err_no = why.eno;
    return r;
}

static int read_failed(smoe__io_fail *why, int rc, uint64_t off, size_t n, int eno,
                       int tries)
{
    *why = (smoe__io_fail){off, n, eno, (uint32_t)tries, 0, 0};
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
