/*
 * replica.c - opening the copies of a packed vault that reads are spread
 * over, and their counters (replica.h; the reads are replica_read.c's).
 *
 * A copy is accepted only when it is the vault's: a valid vault of its own
 * whose vault id (the checksum over the header, which declares the file's
 * size, and over every table, which holds each blob's offset, size and
 * hash) is the vault's. Its blobs are then checked as the vault's are, by
 * their hashes, when verification is on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "sized.h"
#include "internal.h"
#include "vault/replica.h"
#include "platform/dio.h"

uint32_t smoe__read_align(const struct smoe_stream *s, int fd)
{
    /* A boundary both the file offset and the slot's memory may be cut at;
     * when unknown, 16 KiB, a multiple of every alignment smoe_open accepts. */
    uint32_t mem_align, off_align;
    if (s->io_mode != SMOE_IO_DIRECT)
        return 0;
    if (smoe__dio_align(fd, &mem_align, &off_align) == 0 && off_align)
        return mem_align > off_align ? mem_align : off_align;
    return SMOE__ALIGN;
}

static int check_list(const struct smoe_stream *s, const smoe_open_opts *o)
{
    if (o->n_replicas == 0)
        return 0;
    if (o->n_replicas > SMOE__MAX_REPLICAS - 1)
        return smoe__fail(SMOE_EINVAL, "open: opts.n_replicas %u is over the maximum %u",
                          o->n_replicas, SMOE__MAX_REPLICAS - 1);
    if (!o->replicas)
        return smoe__fail(SMOE_EINVAL, "open: opts.n_replicas is %u but opts.replicas is NULL",
                          o->n_replicas);
    for (uint32_t i = 0; i < o->n_replicas; i++)
        if (!o->replicas[i] || !*o->replicas[i])
            return smoe__fail(SMOE_EINVAL, "open: opts.replicas[%u] is %s", i,
                              o->replicas[i] ? "empty" : "NULL");
    if (s->vault.version == SMOE__VAULT_VERSION_INDEX)
        return smoe__fail(SMOE_ENOTSUP, "open: %s is an index vault: its experts are read "
                          "from its source files, and replicas (opts.replicas, --replica) "
                          "are copies of a packed vault; pack it (smoe pack) to use "
                          "replicas (docs/replicas.md)", s->vault.path);
    return 0;
}

/* Copy i (1 ..) must be a vault, the same vault (same id), and not a file
 * already in the list (ids[j] for j < i: each copy's device and inode). */
static int check_copy(struct smoe_stream *s, uint32_t i, uint64_t ids[][2])
{
    const char *path = s->rep.r[i].path;
    smoe__vault c;
    int r = smoe__vault_load(&c, path, s->io);
    if (r < 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", smoe_last_error());
        return smoe__fail(r, "open: replica %u: %s", i, msg);
    }
    uint64_t id = c.vault_id;
    ids[i][0] = c.dev;
    ids[i][1] = c.ino;
    smoe__vault_free(&c);
    if (id != s->vault.vault_id)
        return smoe__fail(SMOE_EINVAL, "open: replica %u, %s, is not a copy of %s: its vault "
                          "id (header checksum, over the header with the file size and "
                          "every table) is %016llx, the vault's %016llx", i, path,
                          s->vault.path, (unsigned long long)id,
                          (unsigned long long)s->vault.vault_id);
    for (uint32_t j = 0; j < i; j++)
        if ((ids[i][0] || ids[i][1]) && ids[i][0] == ids[j][0] && ids[i][1] == ids[j][1])
            return smoe__fail(SMOE_EINVAL, "open: replica %u, %s, is the same file as %s: "
                              "a replica is a copy on another drive", i, path,
                              j ? s->rep.r[j].path : s->vault.path);
    return 0;
}

/* Copy i's descriptor for each worker, in the vault's I/O mode, each the
 * file that was checked (dev, ino). */
static int open_copy(struct smoe_stream *s, uint32_t i, const uint64_t id[2])
{
    smoe__replica *c = &s->rep.r[i];
    const unsigned flags = SMOE__IO_RDONLY | SMOE__IO_NONBLOCK |
                           (s->io_mode == SMOE_IO_DIRECT ? SMOE__IO_DIRECT : 0);
    for (uint32_t w = 0; w < s->nworkers; w++) {
        int fd = smoe__io_open(s->io, c->path, flags);
        if (fd == -EINVAL && (flags & SMOE__IO_DIRECT))
            return smoe__fail(SMOE_EDIRECTIO, "open: replica %u, %s: the file system refuses "
                              "direct I/O (O_DIRECT: EINVAL), which the vault is read with",
                              i, c->path);
        if (fd < 0)
            return smoe__fail(SMOE_ESYS, "open: replica %u, %s: %s", i, c->path,
                              strerror(-fd));
        c->fd[w] = fd;
        smoe__io_stat st;
        int r = smoe__io_fstat(s->io, fd, &st);
        if (r < 0)
            return smoe__fail(SMOE_ESYS, "open: replica %u, %s: %s", i, c->path, strerror(-r));
        if ((id[0] || id[1]) && (st.dev != id[0] || st.ino != id[1]))
            return smoe__fail(SMOE_ESYS, "open: replica %u, %s: the file was replaced while "
                              "it was being opened; open it again", i, c->path);
        c->align[w] = smoe__read_align(s, fd);
    }
    return 0;
}

static char *copy_str(const char *p)
{
    size_t n = strlen(p) + 1;
    char *c = smoe__malloc(n);
    return c ? memcpy(c, p, n) : NULL;
}

/* The table of copies, copy 0 the vault through the workers' descriptors. */
static int alloc_copies(struct smoe_stream *s, const smoe_open_opts *o)
{
    const uint32_t n = 1 + o->n_replicas, nw = s->nworkers;
    s->rep.r = smoe__aligned_alloc(64, n * sizeof *s->rep.r);
    if (!s->rep.r)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the replicas");
    memset(s->rep.r, 0, n * sizeof *s->rep.r);
    s->rep.n = n;
    s->rep.retry_ns = o->replica_retry_ms ? o->replica_retry_ms * 1000000ull
                                          : SMOE__REPLICA_RETRY_NS;
    for (uint32_t i = 0; i < n; i++) {
        smoe__replica *c = &s->rep.r[i];
        c->fd = smoe__malloc(nw * sizeof *c->fd);
        c->align = smoe__malloc(nw * sizeof *c->align);
        c->path = i ? copy_str(o->replicas[i - 1]) : NULL;
        if (!c->fd || !c->align || (i && !c->path))
            return smoe__fail(SMOE_ENOMEM, "open: out of memory for the replicas");
        for (uint32_t w = 0; w < nw; w++) {
            c->fd[w] = i ? -1 : s->workers[w].fd;
            c->align[w] = i ? 0 : smoe__read_align(s, s->workers[w].fd);
        }
    }
    return 0;
}

int smoe__replicas_open(struct smoe_stream *s, const smoe_open_opts *o)
{
    int r = check_list(s, o);
    if (r < 0)
        return r;
    if (s->vault.version == SMOE__VAULT_VERSION_INDEX) {
        /* one copy, its sources: counters only */
        s->rep.r = smoe__aligned_alloc(64, sizeof *s->rep.r);
        if (!s->rep.r)
            return smoe__fail(SMOE_ENOMEM, "open: out of memory for the replicas");
        memset(s->rep.r, 0, sizeof *s->rep.r);
        s->rep.n = 1;
        return 0;
    }
    if ((r = alloc_copies(s, o)) < 0)
        return r;
    uint64_t ids[SMOE__MAX_REPLICAS][2] = {{s->vault.dev, s->vault.ino}};
    for (uint32_t i = 1; i < s->rep.n; i++)
        if ((r = check_copy(s, i, ids)) < 0 || (r = open_copy(s, i, ids[i])) < 0)
            return r;
    return 0;
}

void smoe__replicas_close(struct smoe_stream *s)
{
    for (uint32_t i = 0; s->rep.r && i < s->rep.n; i++) {
        smoe__replica *c = &s->rep.r[i];
        for (uint32_t w = 0; i && c->fd && w < s->nworkers; w++)
            if (c->fd[w] >= 0)
                smoe__io_close(s->io, c->fd[w]);
        free(c->fd);
        free(c->align);
        free(c->path);
    }
    smoe__aligned_free(s->rep.r);
    s->rep.r = NULL;
    s->rep.n = 0;
}

/* relaxed: statistics only, no ordering with anything */
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

SMOE_API int smoe_get_replica_stats(smoe_stream *s, uint32_t i, smoe_replica_stats *st)
{
    if (!s || !st)
        return smoe__fail(SMOE_EINVAL, "get_replica_stats: NULL argument");
    if (i >= s->rep.n)
        return smoe__fail(SMOE_EINVAL, "get_replica_stats: copy %u: the stream has %u (the "
                          "vault and %u replicas)", i, s->rep.n, s->rep.n ? s->rep.n - 1 : 0);
    const smoe__replica *c = &s->rep.r[i];
    smoe_replica_stats f;
    memset(&f, 0, sizeof f);
    f.struct_size = sizeof f;
    f.path = i ? c->path : s->vault.path;
    f.reads = LOAD(c->reads);
    f.bytes = LOAD(c->bytes);
    f.failed = LOAD(c->failed);
    f.set_aside = LOAD(c->set_aside);
    f.in_use = LOAD(c->aside_until) == 0;
    uint64_t nspm = LOAD(c->ns_per_mib);
    f.rate = nspm ? (uint64_t)((double)(1u << 20) * 1e9 / (double)nspm) : 0;
    int r = smoe__sized_out(st, &f, sizeof f, offsetof(smoe_replica_stats, path) +
                            sizeof st->path, "get_replica_stats", "smoe_replica_stats");
    return r < 0 ? r : (int)s->rep.n;
}
