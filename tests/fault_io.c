/* fault_io.c - see fault_io.h. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "fault_io.h"

static struct fault_io *F(const smoe__io *io)
{
    return (struct fault_io *)io->user;
}

/* 0: pass through; else the negative errno to return. */
static int fault(struct fault_io *f, enum fio_call c)
{
    uint64_t n = atomic_fetch_add(&f->count[c], 1) + 1;
    if (f->call != c)
        return 0;
    switch (f->mode) {
    case FIO_FAIL_ONCE:
        if (n == f->nth) {
            atomic_fetch_add(&f->fired, 1);
            return -f->err;
        }
        return 0;
    case FIO_FAIL_FROM:
        if (n >= f->nth) {
            atomic_fetch_add(&f->fired, 1);
            return -f->err;
        }
        return 0;
    case FIO_EINTR_ALL:
        if (n % 2 == 1) {
            atomic_fetch_add(&f->fired, 1);
            return -EINTR;
        }
        return 0;
    default:
        return 0;
    }
}

static int f_open(const smoe__io *io, const char *path, unsigned flags)
{
    struct fault_io *f = F(io);
    int e = fault(f, FIO_OPEN);
    if (e)
        return e;
    if (f->refuse_direct == 1 && (flags & SMOE__IO_DIRECT))
        return -EINVAL;
    int fd = smoe__io_os.open(&smoe__io_os, path, flags);
    if (fd >= 0 && fd < 1024)
        f->direct_fd[fd] = !!(flags & SMOE__IO_DIRECT);
    return fd;
}

static int f_close(const smoe__io *io, int fd)
{
    int e = fault(F(io), FIO_CLOSE);
    int r = smoe__io_os.close(&smoe__io_os, fd); /* always close: no leaked fds */
    return e ? e : r;
}

static ssize_t f_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    struct fault_io *f = F(io);
    uint32_t i = atomic_fetch_add(&f->nlog, 1);
    if (i < 4096) {
        atomic_store(&f->log[i], off);
        atomic_store(&f->log_thread[i], (uint64_t)pthread_self());
    }
    if (atomic_load(&f->hold)) {
        atomic_store(&f->holding, 1);
        while (atomic_load(&f->hold)) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        atomic_store(&f->holding, 0);
    }
    if (f->delay_us) {
        struct timespec ts = {f->delay_us / 1000000, (long)(f->delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    if (f->mode == FIO_FAIL_OFFSET && f->call == FIO_PREAD && off == f->offset) {
        atomic_fetch_add(&f->fired, 1);
        atomic_fetch_add(&f->count[FIO_PREAD], 1);
        return -f->err;
    }
    int e = fault(f, FIO_PREAD);
    if (e)
        return e;
    if (f->refuse_direct == 2 && fd >= 0 && fd < 1024 && f->direct_fd[fd])
        return -EINVAL;
    if (f->mode == FIO_SHORT && f->call == FIO_PREAD &&
        atomic_load(&f->count[FIO_PREAD]) >= f->nth && n > f->short_bytes) {
        atomic_fetch_add(&f->fired, 1);
        n = f->short_bytes;
    }
    return smoe__io_os.pread(&smoe__io_os, fd, buf, n, off);
}

static ssize_t f_pwrite(const smoe__io *io, int fd, const void *buf, size_t n, uint64_t off)
{
    struct fault_io *f = F(io);
    int e = fault(f, FIO_PWRITE);
    if (e)
        return e;
    if (f->mode == FIO_SHORT && f->call == FIO_PWRITE &&
        atomic_load(&f->count[FIO_PWRITE]) >= f->nth && n > f->short_bytes) {
        atomic_fetch_add(&f->fired, 1);
        n = f->short_bytes;
    }
    return smoe__io_os.pwrite(&smoe__io_os, fd, buf, n, off);
}

static int f_fsync(const smoe__io *io, int fd)
{
    int e = fault(F(io), FIO_FSYNC);
    return e ? e : smoe__io_os.fsync(&smoe__io_os, fd);
}

static int f_rename(const smoe__io *io, const char *a, const char *b)
{
    int e = fault(F(io), FIO_RENAME);
    return e ? e : smoe__io_os.rename(&smoe__io_os, a, b);
}

static int f_unlink(const smoe__io *io, const char *p)
{
    int e = fault(F(io), FIO_UNLINK);
    return e ? e : smoe__io_os.unlink(&smoe__io_os, p);
}

static int f_size(const smoe__io *io, int fd, uint64_t *size)
{
    int e = fault(F(io), FIO_SIZE);
    return e ? e : smoe__io_os.size(&smoe__io_os, fd, size);
}

void fault_io_install(struct fault_io *f)
{
    memset(f, 0, sizeof *f);
    f->io = (smoe__io){f_open, f_close, f_pread, f_pwrite, f_fsync, f_rename, f_unlink,
                       f_size, f};
    smoe__io_set(&f->io);
}

void fault_io_remove(void)
{
    smoe__io_set(NULL);
}
