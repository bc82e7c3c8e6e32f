/*
 * source.c - an index vault's source files (source.h): checking each
 * against the vault's record, and opening the workers' descriptors.
 *
 * Everything here runs in smoe_open (or a tool): it allocates and makes
 * system calls freely. The hot path reads s->src's arrays only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "alloc.h"
#include "platform/dio.h"
#include "platform/proc.h"
#include "error.h"
#include "vault/extent.h"
#include "internal.h"
#include "log.h"
#include "vault/model_hdr.h"
#include "vault/source.h"

/* The share of RLIMIT_NOFILE's soft limit the workers' descriptors may
 * take: the engine needs descriptors too (sockets, its own files, drivers). */
#define FD_SHARE 4u
/* The budget when the limit is unknown or unlimited. */
#define FD_BUDGET_DEFAULT 1024u

int smoe__source_path(const smoe__vault *v, uint32_t i, char *buf, size_t n)
{
    const char *slash = strrchr(v->path, '/');
    int k = slash ? snprintf(buf, n, "%.*s/%s", (int)(slash - v->path), v->path,
                             v->sources[i].name)
                  : snprintf(buf, n, "%s", v->sources[i].name);
    if (k < 0 || (size_t)k >= n)
        return smoe__fail(SMOE_EINVAL, "%s: source %" PRIu32 " '%s': the path is longer than "
                          "%zu bytes", v->path, i, v->sources[i].name, n - 1);
    return 0;
}

#define SRC_FMT "%s: source %" PRIu32 " '%s' (%s): "

int smoe__source_check(const smoe__vault *v, uint32_t i, const smoe__io *io,
                       smoe__source_state *st)
{
    memset(st, 0, sizeof *st);
    const smoe__vault_source *src = &v->sources[i];
    int rc = smoe__source_path(v, i, st->path, sizeof st->path);
    if (rc < 0)
        return rc;
    /* Without blocking: the name may be a FIFO by now. */
    int fd = smoe__io_open(io, st->path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
    if (fd == -ENOENT || fd == -ENOTDIR)
        return smoe__fail(SMOE_ESOURCE, SRC_FMT "missing: %s (the vault names its sources "
                          "relative to its own directory: move them together, or index "
                          "again)", v->path, i, src->name, st->path, strerror(-fd));
    if (fd < 0)
        return smoe__fail(SMOE_ESYS, SRC_FMT "cannot open: %s", v->path, i, src->name,
                          st->path, strerror(-fd));
    st->present = 1;
    smoe__io_stat fs;
    if ((rc = smoe__io_fstat(io, fd, &fs)) < 0) {
        rc = smoe__fail(SMOE_ESYS, SRC_FMT "cannot get its size: %s", v->path, i, src->name,
                        st->path, strerror(-rc));
        goto out;
    }
    st->size = fs.size;
    st->mtime_sec = fs.mtime_sec;
    st->mtime_nsec = fs.mtime_nsec;
    st->dev = fs.dev;
    st->ino = fs.ino;
    if (fs.type != SMOE__IO_TYPE_REG) {
        rc = smoe__fail(SMOE_EINVAL, SRC_FMT "%s, expected a regular file", v->path, i,
                        src->name, st->path, smoe__io_type_name(fs.type));
        goto out;
    }
    st->mtime_ok = fs.mtime_sec == src->mtime_sec && fs.mtime_nsec == src->mtime_nsec;
    st->size_ok = fs.size == src->size;
    if (!st->size_ok) {
        rc = smoe__fail(SMOE_ESOURCE, SRC_FMT "changed since it was indexed: its size is %"
                        PRIu64 " bytes, recorded %" PRIu64 " (index it again)", v->path, i,
                        src->name, st->path, fs.size, src->size);
        goto out;
    }
    /* Its kind, header and hash, then every extent in a tensor of it
     * (source_hdr.c). */
    smoe__model_hdr h;
    memset(&h, 0, sizeof h);
    if ((rc = smoe__source_header(v, i, io, fd, st, &h)) == 0)
        rc = smoe__source_extents(v, i, &h, st->path);
    st->extents_ok = rc == 0;
    smoe__model_hdr_free(&h);
out:
    smoe__io_close(io, fd);
    return rc;
}

uint32_t smoe__source_sets(uint32_t nworkers, uint32_t n, uint64_t budget)
{
    uint64_t sets = n ? budget / n : 1;
    if (sets < 1)
        sets = 1;
    return sets < nworkers ? (uint32_t)sets : (nworkers ? nworkers : 1);
}

static uint64_t fd_budget(void)
{
    uint64_t open_max = smoe__proc_open_max();
    return open_max == UINT64_MAX ? FD_BUDGET_DEFAULT : open_max / FD_SHARE;
}

void smoe__sources_close(struct smoe_stream *s)
{
    smoe__sources *src = &s->src;
    for (size_t i = 0; src->fds && i < (size_t)src->n * src->sets; i++)
        if (src->fds[i] >= 0)
            smoe__io_close(s->io, src->fds[i]);
    for (uint32_t w = 0; src->hash && w < src->n_hash; w++)
        if (src->hash[w])
            XXH3_freeState(src->hash[w]);
    free(src->fds);
    free(src->hash);
    memset(src, 0, sizeof *src);
}

/* Some file systems accept O_DIRECT at open and refuse the first read:
 * one aligned block of the first source. 0, 1 when refused, or an error. */
static int probe_direct(struct smoe_stream *s, int fd)
{
    void *buf = smoe__aligned_alloc(SMOE__ALIGN, SMOE__ALIGN);
    if (!buf)
        return smoe__fail(SMOE_ENOMEM, "open: no memory for the direct I/O probe");
    ssize_t r;
    int tries = 0;
    do
        r = s->io->pread(s->io, fd, buf, SMOE__ALIGN, 0);
    while (r == -EINTR && ++tries < SMOE__IO_MAX_STALLS);
    smoe__aligned_free(buf);
    return r == -EINVAL;
}

/* Every source's descriptors; each must be the file that was checked.
 * Returns 1 when direct I/O was refused (nothing left open). */
static int open_fds(struct smoe_stream *s, const uint64_t *dev_ino, int direct)
{
    const smoe__vault *v = &s->vault;
    smoe__sources *src = &s->src;
    char path[4096];
    for (uint32_t i = 0; i < src->n; i++) {
        int rc = smoe__source_path(v, i, path, sizeof path);
        if (rc < 0)
            return rc;
        for (uint32_t j = 0; j < src->sets; j++) {
            int fd = smoe__io_open(s->io, path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK |
                                                    (direct ? SMOE__IO_DIRECT : 0));
            if (fd == -EINVAL && direct)
                return 1;
            if (fd == -EMFILE || fd == -ENFILE)
                return smoe__fail(SMOE_ESYS, "open: %s: source %" PRIu32 " (%s): out of file "
                                  "descriptors after %zu (%" PRIu32 " sources x %" PRIu32
                                  " per source): %s; raise RLIMIT_NOFILE (ulimit -n)",
                                  v->path, i, path, (size_t)i * src->sets + j, src->n,
                                  src->sets, strerror(-fd));
            if (fd < 0)
                return smoe__fail(SMOE_ESYS, "open: %s: source %" PRIu32 " (%s): %s", v->path,
                                  i, path, strerror(-fd));
            src->fds[(size_t)i * src->sets + j] = fd;
            smoe__io_stat st;
            if ((rc = smoe__io_fstat(s->io, fd, &st)) < 0)
                return smoe__fail(SMOE_ESYS, "open: %s: %s", path, strerror(-rc));
            if ((dev_ino[2 * i] || dev_ino[2 * i + 1]) &&
                (st.dev != dev_ino[2 * i] || st.ino != dev_ino[2 * i + 1]))
                return smoe__fail(SMOE_ESYS, "open: %s: source %" PRIu32 " (%s) was replaced "
                                  "while it was being opened; open it again", v->path, i, path);
        }
    }
    if (direct && src->n) {
        int r = probe_direct(s, src->fds[0]);
        if (r != 0)
            return r;
    }
    return 0;
}

static void close_fds(struct smoe_stream *s)
{
    smoe__sources *src = &s->src;
    for (size_t i = 0; i < (size_t)src->n * src->sets; i++) {
        if (src->fds[i] >= 0)
            smoe__io_close(s->io, src->fds[i]);
        src->fds[i] = -1;
    }
}

/* The read alignment: what every source's direct I/O needs of offsets and
 * buffers, and at least a page: file systems report their logical block
 * (often 512 bytes) while disks and virtual disks read 4 KiB physical
 * blocks, so page-aligned reads are never split or widened below us; the
 * cost is at most two pages per extent. */
static int read_align(struct smoe_stream *s, uint32_t *align)
{
    const smoe__sources *src = &s->src;
    uint32_t a = SMOE__EXTENT_ALIGN;
    for (uint32_t i = 0; i < src->n; i++) {
        uint32_t mem, off, need = SMOE__EXTENT_ALIGN;
        if (s->io_mode == SMOE_IO_DIRECT &&
            smoe__dio_align(src->fds[(size_t)i * src->sets], &mem, &off) == 0 && off) {
            need = mem > off ? mem : off;
            if (need > SMOE__ALIGN || (need & (need - 1)))
                return smoe__fail(SMOE_EDIRECTIO, "open: %s: source %" PRIu32 " '%s': direct "
                                  "I/O needs %u-byte buffers and %u-byte offsets, over %u",
                                  s->vault.path, i, s->vault.sources[i].name, mem, off,
                                  SMOE__ALIGN);
        }
        if (need > a)
            a = need;
    }
    *align = a;
    return 0;
}

static int check_all(struct smoe_stream *s, uint64_t *dev_ino)
{
    const smoe__vault *v = &s->vault;
    smoe__source_state *st = smoe__malloc(sizeof *st);
    if (!st)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory");
    int rc = 0;
    for (uint32_t i = 0; i < v->n_sources && rc == 0; i++) {
        if ((rc = smoe__source_check(v, i, s->io, st)) < 0)
            break;
        dev_ino[2 * i] = st->dev;
        dev_ino[2 * i + 1] = st->ino;
        if (!st->mtime_ok)
            smoe__log(s, SMOE_LOG_WARN, "%s: source %u '%s' was modified (time %lld.%09u, "
                      "recorded %lld.%09u) but its size and header are as indexed; %s",
                      v->path, i, v->sources[i].name, (long long)st->mtime_sec,
                      st->mtime_nsec, (long long)v->sources[i].mtime_sec,
                      v->sources[i].mtime_nsec,
                      s->verify ? "each expert's checksum is checked as it loads"
                                : "verification is off: changed experts go unnoticed");
    }
    free(st);
    return rc;
}

static int hash_states(struct smoe_stream *s)
{
    smoe__sources *src = &s->src;
    src->hash = smoe__calloc(s->nworkers, sizeof *src->hash);
    if (!src->hash)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the hash states");
    src->n_hash = s->nworkers;
    for (uint32_t w = 0; w < s->nworkers; w++)
        if (smoe__alloc_refused() || !(src->hash[w] = XXH3_createState()))
            return smoe__fail(SMOE_ENOMEM, "open: out of memory for the hash states");
    return 0;
}

int smoe__sources_open(struct smoe_stream *s)
{
    smoe__vault *v = &s->vault;
    smoe__sources *src = &s->src;
    if (v->version != SMOE__VAULT_VERSION_INDEX)
        return 0;
    if (!(s->flags & SMOE_OPEN_EXTENTS))
        return smoe__fail(SMOE_ENOTSUP, "open: %s is an index vault (its experts lie in %"
                          PRIu32 " source files): its components are found with "
                          "smoe_blob_component(), not at layout offsets; open it with "
                          "SMOE_OPEN_EXTENTS (since 1.1)", v->path, v->n_sources);
    if (v->flags & SMOE__V2_NO_HASH)
        s->verify = 0; /* indexed with --no-hash: nothing to check against */
    uint64_t *dev_ino = smoe__calloc((size_t)v->n_sources * 2, sizeof *dev_ino);
    if (!dev_ino)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory");
    int rc = check_all(s, dev_ino);
    if (rc == 0) {
        src->n = v->n_sources;
        src->sets = smoe__source_sets(s->nworkers, src->n, fd_budget());
        src->fds = smoe__malloc((size_t)src->n * src->sets * sizeof *src->fds);
        if (!src->fds)
            rc = smoe__fail(SMOE_ENOMEM, "open: out of memory for %" PRIu32 " descriptors",
                            src->n * src->sets);
    }
    for (size_t i = 0; rc == 0 && i < (size_t)src->n * src->sets; i++)
        src->fds[i] = -1;
    int direct = !(s->flags & SMOE_OPEN_BUFFERED);
    if (rc == 0 && (rc = open_fds(s, dev_ino, direct)) == 1) {
        close_fds(s);
        if (!(s->flags & SMOE_OPEN_ALLOW_BUFFERED))
            rc = smoe__fail(SMOE_EDIRECTIO, "open: %s: the file system of its sources refuses "
                            "direct I/O (EINVAL); set SMOE_OPEN_ALLOW_BUFFERED to fall back "
                            "to buffered reads", v->path);
        else
            rc = open_fds(s, dev_ino, direct = 0);
    }
    free(dev_ino);
    if (rc < 0)
        return rc;
    s->io_mode = direct ? SMOE_IO_DIRECT : SMOE_IO_BUFFERED;
    if ((rc = read_align(s, &src->align)) < 0)
        return rc;
    if (src->align != v->plan_align && (rc = smoe__extent_plan(v, src->align)) < 0)
        return rc;
    return s->verify ? hash_states(s) : 0;
}
