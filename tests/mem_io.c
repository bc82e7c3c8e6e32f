/*
 * mem_io.c - a read-only smoe__io table over a memory buffer (see
 * mem_io.h). No test framework: the fuzz targets use it too.
 */
#include <errno.h>
#include <string.h>

#include "mem_io.h"

#define TU_MEM_FD 7

static int mem_open(const smoe__io *io, const char *path, unsigned flags)
{
    tu_mem *m = io->user;
    (void)path;
    if (flags & (SMOE__IO_WRONLY | SMOE__IO_RDWR))
        return -EROFS;
    m->open_fds++;
    return TU_MEM_FD;
}

static int mem_close(const smoe__io *io, int fd)
{
    tu_mem *m = io->user;
    if (fd != TU_MEM_FD)
        return -EBADF;
    m->open_fds--;
    return 0;
}

static ssize_t mem_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    tu_mem *m = io->user;
    if (fd != TU_MEM_FD)
        return -EBADF;
    m->preads++;
    if (m->fail_at && m->preads == m->fail_at)
        return -(m->fail_errno ? m->fail_errno : EIO);
    if (m->eintr_every && m->preads % m->eintr_every == 0)
        return -EINTR;
    if (off >= m->size)
        return 0;
    if (n > m->size - off)
        n = (size_t)(m->size - off);
    if (m->max_chunk && n > m->max_chunk)
        n = m->max_chunk;
    if (!m->nsegs) {
        memcpy(buf, m->data + off, n);
        return (ssize_t)n;
    }
    /* Sparse: zeros, then the segments that overlap [off, off + n). */
    memset(buf, 0, n);
    for (int i = 0; i < m->nsegs; i++) {
        const tu_mem_seg *g = &m->segs[i];
        uint64_t lo = off > g->off ? off : g->off;
        uint64_t hi = off + n < g->off + g->len ? off + n : g->off + g->len;
        if (lo < hi)
            memcpy((unsigned char *)buf + (lo - off), g->data + (lo - g->off),
                   (size_t)(hi - lo));
    }
    return (ssize_t)n;
}

static ssize_t mem_pwrite(const smoe__io *io, int fd, const void *buf, size_t n, uint64_t off)
{
    (void)io, (void)fd, (void)buf, (void)n, (void)off;
    return -EROFS;
}

static int mem_fsync(const smoe__io *io, int fd)
{
    (void)io, (void)fd;
    return 0;
}

static int mem_rename(const smoe__io *io, const char *from, const char *to)
{
    (void)io, (void)from, (void)to;
    return -EROFS;
}

static int mem_unlink(const smoe__io *io, const char *path)
{
    (void)io, (void)path;
    return -EROFS;
}

static int mem_size(const smoe__io *io, int fd, uint64_t *size)
{
    tu_mem *m = io->user;
    if (fd != TU_MEM_FD)
        return -EBADF;
    *size = m->report_size ? m->report_size : m->size;
    return 0;
}

smoe__io tu_mem_io(tu_mem *m)
{
    smoe__io io = {mem_open, mem_close, mem_pread, mem_pwrite, mem_fsync,
                   mem_rename, mem_unlink, mem_size, m, NULL, NULL, NULL};
    return io;
}
