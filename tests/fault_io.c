/* fault_io.c - see fault_io.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "fault_io.h"

/* Serialises the target's reads (target_serial). */
static pthread_mutex_t target_lock = PTHREAD_MUTEX_INITIALIZER;

static struct fault_io *F(const smoe__io *io)
{
    return (struct fault_io *)io->user;
}

/* Count a call of class c; 0: pass through, else the negative errno. */
static int fault(struct fault_io *f, enum fio_call c)
{
    uint64_t n = atomic_fetch_add(&f->count[c], 1) + 1;
    uint64_t t = atomic_fetch_add(&f->total, 1) + 1;
    int mode = atomic_load(&f->mode);
    int call = atomic_load(&f->call);
    if (mode == FIO_OFF || (call != (int)c && call != FIO_ANY))
        return 0;
    uint64_t k = call == FIO_ANY ? t : n, nth = atomic_load(&f->nth);
    switch (mode) {
    case FIO_FAIL_ONCE:
        if (k == nth) {
            atomic_fetch_add(&f->fired, 1);
            return -atomic_load(&f->err);
        }
        return 0;
    case FIO_FAIL_FROM:
        if (k >= nth) {
            atomic_fetch_add(&f->fired, 1);
            return -atomic_load(&f->err);
        }
        return 0;
    case FIO_FAIL_RANDOM: {
        /* splitmix64 over a shared counter: any thread, no lock */
        uint64_t z = atomic_fetch_add(&f->rng, 0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        if (z % 1000 < nth) {
            atomic_fetch_add(&f->fired, 1);
            return -atomic_load(&f->err);
        }
        return 0;
    }
    case FIO_KILL:
        if (k == nth)
            raise(SIGKILL);
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

/* Bytes a read or write of n bytes, the kth of its class, may move. */
static size_t shorten(struct fault_io *f, enum fio_call c, size_t n)
{
    int mode = atomic_load(&f->mode), call = atomic_load(&f->call);
    if ((mode != FIO_SHORT && mode != FIO_SHORT_ONCE) || (call != (int)c && call != FIO_ANY))
        return n;
    uint64_t k = call == FIO_ANY ? atomic_load(&f->total) : atomic_load(&f->count[c]);
    uint64_t nth = atomic_load(&f->nth), sb = atomic_load(&f->short_bytes);
    if ((mode == FIO_SHORT ? k >= nth : k == nth) && n > sb) {
        atomic_fetch_add(&f->fired, 1);
        return (size_t)sb;
    }
    return n;
}

static int f_open(const smoe__io *io, const char *path, unsigned flags)
{
    struct fault_io *f = F(io);
    if (f->on_open)
        f->on_open(f, path, flags);
    int e = fault(f, FIO_OPEN);
    if (e)
        return e;
    if (atomic_load(&f->refuse_direct) == 1 && (flags & SMOE__IO_DIRECT))
        return -EINVAL;
    if (atomic_load(&f->refuse_tmpfile) && (flags & SMOE__IO_TMPFILE))
        return -EOPNOTSUPP;
    unsigned os_flags = atomic_load(&f->fake_direct) ? flags & ~SMOE__IO_DIRECT : flags;
    int fd = smoe__io_os.open(&smoe__io_os, path, os_flags);
    if (fd >= 0 && fd < 1024) {
        atomic_store(&f->direct_fd[fd], !!(flags & SMOE__IO_DIRECT));
        atomic_store(&f->target_fd[fd], f->target && strcmp(path, f->target) == 0);
    }
    if (fd >= 0)
        atomic_fetch_add(&f->open_fds, 1);
    return fd;
}

static int f_close(const smoe__io *io, int fd)
{
    struct fault_io *f = F(io);
    int e = fault(f, FIO_CLOSE);
    int r = smoe__io_os.close(&smoe__io_os, fd); /* always close: no leaked fds */
    if (r == 0)
        atomic_fetch_sub(&f->open_fds, 1);
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
    if (fd >= 0 && fd < 1024 && atomic_load(&f->target_fd[fd])) {
        atomic_fetch_add(&f->target_reads, 1);
        uint32_t tus = atomic_load(&f->target_delay_us);
        int serial = atomic_load(&f->target_serial);
        if (serial)
            pthread_mutex_lock(&target_lock);
        if (tus) {
            struct timespec ts = {tus / 1000000, (long)(tus % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (serial)
            pthread_mutex_unlock(&target_lock);
        if (atomic_load(&f->target_fail)) {
            atomic_fetch_add(&f->target_fired, 1);
            return -EIO;
        }
    }
    uint32_t us = atomic_load(&f->delay_us);
    if (us) {
        struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&f->mode) == FIO_FAIL_OFFSET && atomic_load(&f->call) == FIO_PREAD &&
        off == atomic_load(&f->offset)) {
        atomic_fetch_add(&f->fired, 1);
        atomic_fetch_add(&f->count[FIO_PREAD], 1);
        atomic_fetch_add(&f->total, 1);
        return -atomic_load(&f->err);
    }
    int e = fault(f, FIO_PREAD);
    if (e)
        return e;
    if (atomic_load(&f->refuse_direct) == 2 && fd >= 0 && fd < 1024 &&
        atomic_load(&f->direct_fd[fd]))
        return -EINVAL;
    uint32_t a = atomic_load(&f->fake_direct);
    if (a && fd >= 0 && fd < 1024 && atomic_load(&f->direct_fd[fd]) &&
        (off % a || n % a || (uintptr_t)buf % a))
        return -EINVAL;
    n = shorten(f, FIO_PREAD, n);
    return smoe__io_os.pread(&smoe__io_os, fd, buf, n, off);
}

static ssize_t f_pwrite(const smoe__io *io, int fd, const void *buf, size_t n, uint64_t off)
{
    struct fault_io *f = F(io);
    int e = fault(f, FIO_PWRITE);
    if (e)
        return e;
    n = shorten(f, FIO_PWRITE, n);
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

static int f_stat(const smoe__io *io, int fd, smoe__io_stat *st)
{
    int e = fault(F(io), FIO_STAT);
    return e ? e : smoe__io_os.stat(&smoe__io_os, fd, st);
}

static int f_link(const smoe__io *io, int fd, const char *path)
{
    int e = fault(F(io), FIO_LINK);
    return e ? e : smoe__io_os.link(&smoe__io_os, fd, path);
}

void fault_io_install(struct fault_io *f)
{
    memset(f, 0, sizeof *f);
    f->io = (smoe__io){f_open, f_close, f_pread, f_pwrite, f_fsync, f_rename, f_unlink,
                       f_size, f, smoe__io_os.drop_cache, f_stat, f_link};
    smoe__io_set(&f->io);
}

void fault_io_remove(void)
{
    smoe__io_set(NULL);
}

void fault_io_arm(struct fault_io *f, enum fio_mode mode, enum fio_call call, uint64_t nth,
                  int err, uint64_t arg)
{
    atomic_store(&f->mode, FIO_OFF);
    for (int c = 0; c < FIO_NCALLS; c++)
        atomic_store(&f->count[c], 0);
    atomic_store(&f->total, 0);
    atomic_store(&f->fired, 0);
    atomic_store(&f->call, (int)call);
    atomic_store(&f->nth, nth);
    atomic_store(&f->err, err);
    atomic_store(&f->short_bytes, arg);
    atomic_store(&f->offset, arg);
    atomic_store(&f->mode, (int)mode);
}

void fault_io_disarm(struct fault_io *f)
{
    atomic_store(&f->mode, FIO_OFF);
}
