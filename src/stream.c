/*
 * stream.c - smoe_open, smoe_shutdown, smoe_close: everything the hot path
 * will touch is allocated and faulted in here, so prefetch, claim, release
 * and the workers never allocate.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "platform/dio.h"
#include "error.h"
#include "sized.h"
#include "internal.h"
#include "scheduler.h"
#include "log.h"
#include "fill/freq.h"
#include "fill/topup.h"
#include "fill/startup.h"
#include "policy/evict_reuse.h"
#include "policy/hint.h"
#include "vault/replica.h"
#include "vault/source.h"
#include "platform/park.h"

SMOE_API void smoe_open_opts_init(smoe_open_opts *opts)
{
    if (opts) {
        const smoe_open_opts d = SMOE_OPEN_OPTS_INIT;
        *opts = d;
    }
}

/*
 * Copy the caller's options: only the bytes it supplied (struct_size),
 * defaults for the rest. A larger struct from a newer header is accepted
 * when the fields this version does not know are zero.
 */
static int read_opts(const smoe_open_opts *in, smoe_open_opts *o)
{
    smoe_open_opts_init(o);
    if (!in)
        return 0;
    return smoe__sized_in(o, sizeof *o, in,
                          offsetof(smoe_open_opts, workers) + sizeof in->workers, "open",
                          "smoe_open_opts");
}

static int check_opts(const smoe_open_opts *o)
{
    const unsigned known = SMOE_OPEN_ALLOW_BUFFERED | SMOE_OPEN_BUFFERED | SMOE_OPEN_MLOCK |
                           SMOE_OPEN_FORCE_CLOSE | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ |
                           SMOE_OPEN_EXTENTS | SMOE_OPEN_SHAREABLE;
    if (o->flags & ~known)
        return smoe__fail(SMOE_EINVAL, "open: opts.flags has unknown bits 0x%x",
                          o->flags & ~known);
    if (o->workers > SMOE__MAX_WORKERS)
        return smoe__fail(SMOE_EINVAL, "open: opts.workers %u is over the maximum %u",
                          o->workers, SMOE__MAX_WORKERS);
    if (o->ring_slots > SMOE__MAX_SLOTS)
        return smoe__fail(SMOE_EINVAL, "open: opts.ring_slots %u is over the maximum %u",
                          o->ring_slots, SMOE__MAX_SLOTS);
    if (o->verify > SMOE_VERIFY_OFF)
        return smoe__fail(SMOE_EINVAL, "open: opts.verify %u is not a SMOE_VERIFY_* value",
                          o->verify);
    if (o->spec_share_pct > 100)
        return smoe__fail(SMOE_EINVAL, "open: opts.spec_share_pct %u is over 100",
                          o->spec_share_pct);
    if (o->eviction > SMOE_EVICT_REUSE)
        return smoe__fail(SMOE_EINVAL, "open: opts.eviction %u is not a SMOE_EVICT_* value",
                          o->eviction);
    if (o->chunk_bytes % SMOE__ALIGN)
        return smoe__fail(SMOE_EINVAL, "open: opts.chunk_bytes %u is not a multiple of %u",
                          o->chunk_bytes, SMOE__ALIGN);
    if (o->spec_chunk_bytes % SMOE__ALIGN)
        return smoe__fail(SMOE_EINVAL, "open: opts.spec_chunk_bytes %u is not a multiple of %u",
                          o->spec_chunk_bytes, SMOE__ALIGN);
    return 0;
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static void close_fds(struct smoe_stream *s)
{
    for (uint32_t i = 0; i < s->nworkers; i++) {
        if (s->workers[i].fd >= 0)
            smoe__io_close(s->io, s->workers[i].fd);
        s->workers[i].fd = -1;
    }
}

/* A worker's descriptor must be the file that was validated: a vault
 * renamed over the path since would be read through the other's tables. */
static int same_file(struct smoe_stream *s, int fd, uint32_t worker)
{
    const smoe__vault *v = &s->vault;
    smoe__io_stat st;
    int r = smoe__io_fstat(s->io, fd, &st);
    if (r < 0)
        return smoe__fail(SMOE_ESYS, "open: %s: %s", v->path, strerror(-r));
    if ((v->dev || v->ino) && (st.dev != v->dev || st.ino != v->ino))
        return smoe__fail(SMOE_ESYS, "open: %s: the file was replaced while it was being "
                          "opened (device %llu inode %llu validated, device %llu inode %llu "
                          "opened for worker %u); open it again", v->path,
                          (unsigned long long)v->dev, (unsigned long long)v->ino,
                          (unsigned long long)st.dev, (unsigned long long)st.ino, worker);
    return 0;
}

/* Open one descriptor per worker, direct unless refused and allowed. */
static int open_fds(struct smoe_stream *s)
{
    const char *path = s->vault.path;
    int direct = !(s->flags & SMOE_OPEN_BUFFERED);
    for (uint32_t i = 0; i < s->nworkers; i++) {
        /* Without blocking: the path may be a FIFO by now (same_file refuses it). */
        int fd = smoe__io_open(s->io, path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK |
                                                (direct ? SMOE__IO_DIRECT : 0));
        if (fd == -EINVAL && direct && i == 0) {
            if (!(s->flags & SMOE_OPEN_ALLOW_BUFFERED))
                return smoe__fail(SMOE_EDIRECTIO, "open: %s: the file system refuses "
                                  "direct I/O (O_DIRECT: EINVAL); set "
                                  "SMOE_OPEN_ALLOW_BUFFERED to fall back to buffered reads",
                                  path);
            direct = 0;
            i--;
            continue;
        }
        if (fd < 0)
            return smoe__fail(SMOE_ESYS, "open: %s: %s", path, strerror(-fd));
        s->workers[i].fd = fd;
        int same = same_file(s, fd, i);
        if (same < 0)
            return same;
        if (i == 0 && direct) {
            uint32_t mem_align, off_align;
            if (smoe__dio_align(fd, &mem_align, &off_align) == 0 &&
                (mem_align > SMOE__ALIGN || off_align > SMOE__ALIGN))
                return smoe__fail(SMOE_EDIRECTIO, "open: %s: direct I/O needs %u-byte "
                                  "buffers and %u-byte offsets, over the vault's %u", path,
                                  mem_align, off_align, SMOE__ALIGN);
            /* Some file systems accept O_DIRECT at open and refuse the
             * first read: probe one aligned block into slot 0. */
            ssize_t r;
            int tries = 0;
            do
                r = s->io->pread(s->io, fd, s->ring.base, SMOE__ALIGN, 0);
            while (r == -EINTR && ++tries < SMOE__IO_MAX_STALLS);
            if (r == -EINVAL) {
                smoe__io_close(s->io, fd);
                s->workers[0].fd = -1;
                if (!(s->flags & SMOE_OPEN_ALLOW_BUFFERED))
                    return smoe__fail(SMOE_EDIRECTIO, "open: %s: the file system refuses "
                                      "direct reads (EINVAL); set SMOE_OPEN_ALLOW_BUFFERED "
                                      "to fall back to buffered reads", path);
                direct = 0;
                i--;
                continue;
            }
        }
    }
    s->io_mode = direct ? SMOE_IO_DIRECT : SMOE_IO_BUFFERED;
    return 0;
}

/* Stream identities for descriptors (claim.c): never reused in a process. */
static _Atomic uint64_t stream_ids;

static void stream_free(struct smoe_stream *s)
{
    smoe__topup_stop(s); /* before the workers: it feeds their queues */
    if (s->workers) {
        smoe__workers_join(s);
        close_fds(s);
    }
    smoe__startup_free(s); /* after the workers: they read its shares */
    smoe__replicas_close(s);
    smoe__sources_close(s);
    smoe__trace_rec_close(s->trace);
    smoe__sched_free(&s->sched);
    smoe__hint_free(s);
    free(s->workers);
    free(s->map);
    smoe__ring_free(&s->ring);
    smoe__reuse_free(s->reuse);
    smoe__freq_free(&s->freq);
    smoe__vault_free(&s->vault);
    free(s);
}

/* A new stream with the options that need no file: its identity, I/O
 * table, flags, log and worker count. NULL: out of memory. */
static struct smoe_stream *stream_new(const smoe_open_opts *o)
{
    struct smoe_stream *s = smoe__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    /* relaxed: only a number no other stream of this process has */
    s->id = atomic_fetch_add_explicit(&stream_ids, 1, memory_order_relaxed) + 1;
    s->io = smoe__io_get();
    s->flags = o->flags;
    s->log_fn = o->log_fn;
    s->log_user = o->log_user;
    s->nworkers = o->workers ? o->workers : SMOE__DEFAULT_WORKERS;
    s->verify = o->verify != SMOE_VERIFY_OFF;
    return s;
}

/* The ring: slot size (the largest padded blob, or the caller's, 16
 * KiB-rounded), slot count (the caller's, or the memory budget's:
 * budget_open.c), the speculation cap and the read chunk sizes. */
static int ring_open(struct smoe_stream *s, const smoe_open_opts *o)
{
    uint64_t stride = round_up(s->vault.max_padded, SMOE__ALIGN);
    if (o->slot_bytes) {
        if (o->slot_bytes < s->vault.max_padded)
            return smoe__fail(SMOE_ESLOTSIZE, "open: slot size %llu bytes is smaller than "
                              "the largest blob of %s, %llu bytes",
                              (unsigned long long)o->slot_bytes, s->vault.path,
                              (unsigned long long)s->vault.max_padded);
        stride = round_up(o->slot_bytes, SMOE__ALIGN);
    }
    uint32_t nslots;
    int r;
    if ((r = smoe__budget_open(s, o, stride, &nslots)) < 0)
        return r;
    if ((r = smoe__ring_init(&s->ring, nslots, stride, !!(o->flags & SMOE_OPEN_MLOCK),
                             !!(o->flags & SMOE_OPEN_SHAREABLE))) < 0)
        return r;
    uint32_t pct = o->spec_share_pct ? o->spec_share_pct : SMOE__DEFAULT_SPEC_PCT;
    s->spec_cap = (uint32_t)((uint64_t)nslots * pct / 100);

    /* A blob never needs more than one slot's worth in one chunk. */
    uint64_t chunk = o->chunk_bytes ? o->chunk_bytes : SMOE__DEFAULT_CHUNK;
    uint64_t spec_chunk = o->spec_chunk_bytes ? o->spec_chunk_bytes : SMOE__DEFAULT_SPEC_CHUNK;
    s->chunk = (uint32_t)(chunk < stride ? chunk : stride);
    s->spec_chunk = (uint32_t)(spec_chunk < stride ? spec_chunk : stride);
    return 0;
}

/* The residency map, the workers' table and the two request queues. */
static int tables_open(struct smoe_stream *s)
{
    size_t nkeys = (size_t)s->vault.layers * s->vault.experts;
    s->map = smoe__calloc(nkeys, sizeof *s->map);
    s->workers = smoe__calloc(s->nworkers, sizeof *s->workers);
    /* At once: a failure below closes every fd >= 0 (calloc's 0 is stdin). */
    for (uint32_t i = 0; s->workers && i < s->nworkers; i++)
        s->workers[i].fd = -1;
    /*
     * Queue capacity. Every push is made in room reserved before the slot
     * word changes (mpmc.h, prefetch.c), so no push finds a queue full and
     * no prefetch waits for a worker; a request with no room is refused up
     * front. N below is one blob's most chunks at the smaller chunk size. The
     * tokens a queue holds, with their room, until a worker pops them:
     *  - demand: of each slot's current load, its arming's (a demand load
     *    or a retry: up to N) and one upgrade's (up to N); and leftovers:
     *    demand tokens whose chunks other tokens took (an upgraded load
     *    read from its speculative tokens, a retry's chunks taken by the
     *    tokens of the attempt before). Leftovers of a slot's earlier
     *    loads are popped before its next load can finish (the queue is
     *    FIFO, and speculative tokens are popped only when it is empty),
     *    so a slot has at most one load's worth, up to 2N, behind its
     *    current one. 4N per slot holds them all; only prefetching threads
     *    stalled between their slot CAS and their push can hold room
     *    beyond it, and then a demand prefetch fails with SMOE_EFULL
     *    rather than wait (an upgrade goes on at speculative priority).
     *  - speculative: each slot's current speculative or pre-warm load
     *    (up to N), and leftovers that nothing bounds: the tokens of
     *    upgraded, cancelled and evicted speculative loads stay queued
     *    until the workers reach this queue, which they do only when the
     *    demand queue is empty. Its capacity is a soft limit: a
     *    speculative or pre-warm prefetch that finds no room returns
     *    SMOE_SKIPPED before it takes a slot.
     */
    uint32_t min_chunk = s->chunk < s->spec_chunk ? s->chunk : s->spec_chunk;
    size_t qcap = (size_t)s->ring.nslots * smoe__extent_max_chunks(&s->vault, min_chunk) * 4 +
                  s->nworkers;
    if (!s->map || !s->workers || smoe__sched_init(&s->sched, qcap, s->ring.nslots))
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the residency map and queues");
    int r = smoe__hint_init(s);
    if (r < 0)
        return r;
    smoe__map_init(s->map, nkeys);
    for (uint32_t i = 0; i < s->nworkers; i++) {
        s->workers[i].s = s;
        s->workers[i].id = i;
    }
    return 0;
}

/* The workers' descriptors (an index vault's are per source, opened with
 * the sources), and the vault's header and tables dropped from the page
 * cache: with direct reads nothing else will want those pages. Buffered
 * reads go through the page cache anyway, so then nothing is dropped. (An
 * index vault's reader dropped its own.) */
static int files_open(struct smoe_stream *s)
{
    int r = s->src.n ? 0 : open_fds(s);
    if (r < 0)
        return r;
    if (s->io_mode == SMOE_IO_DIRECT && !s->src.n)
        smoe__vault_drop_read(&s->vault, s->io, s->workers[0].fd);
    return 0;
}

/* Everything after the vault is loaded, in order; the first failure's
 * code (its message set). */
static int stream_open(struct smoe_stream *s, const smoe_open_opts *o)
{
    int r;
    if ((r = ring_open(s, o)) < 0 || (r = tables_open(s)) < 0)
        return r;
    s->eviction = o->eviction ? o->eviction : SMOE__DEFAULT_EVICTION;
    if (s->eviction == SMOE_EVICT_REUSE && (r = smoe__reuse_init(s)) < 0)
        return r;
    if ((r = smoe__freq_open(s, o)) < 0 || (r = files_open(s)) < 0 ||
        (r = smoe__replicas_open(s, o)) < 0)
        return r;
    const char *trace_path = o->trace_path ? o->trace_path : getenv("SMOE_TRACE");
    if (trace_path && *trace_path &&
        (r = smoe__trace_rec_open(&s->trace, trace_path, s->vault.layers, s->vault.experts,
                                  s->vault.top_k, smoe__vault_meta(&s->vault, "model"))) < 0)
        return r;
    if ((r = smoe__workers_start(s)) < 0)
        return r;
    return smoe__topup_start(s, o);
}

SMOE_API int smoe_open(const char *vault_path, const smoe_open_opts *opts, smoe_stream **out)
{
    if (!out)
        return smoe__fail(SMOE_EINVAL, "open: NULL out");
    *out = NULL;
    if (!vault_path)
        return smoe__fail(SMOE_EINVAL, "open: NULL vault path");
    smoe_open_opts o;
    int r = read_opts(opts, &o);
    if (r < 0 || (r = check_opts(&o)) < 0)
        return r;
    struct smoe_stream *s = stream_new(&o);
    if (!s)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory");
    /* An index vault: its source files checked and opened, its slots
     * planned at their read alignment (source.c); nothing for a packed one. */
    if ((r = smoe__vault_load_ex(&s->vault, vault_path, s->io, SMOE__VAULT_KEEP_CACHE)) < 0 ||
        (r = smoe__sources_open(s)) < 0 || (r = stream_open(s, &o)) < 0) {
        /* Keep the first failure's message through the cleanup. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", smoe_last_error());
        stream_free(s);
        smoe__fail(r, "%s", msg);
        return r;
    }
    *out = s;
    return 0;
}

SMOE_API int smoe_shutdown(smoe_stream *s)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "shutdown: NULL stream");
    atomic_store(&s->stop, 1);
    /* Pre-warm: wake it, and return only once it is not issuing a read. */
    smoe__topup_kick(s, 1);
    /* Workers: a new work_seq makes any parked or parking worker return. */
    atomic_fetch_add(&s->work_seq, 1);
    smoe__park_wake(&s->work_seq, INT_MAX);
    /* Claimers: none stays parked on a slot; nor on the warm-up. */
    smoe__slots_shutdown(s);
    smoe__startup_kick(s);
    return 0;
}

SMOE_API int smoe_close(smoe_stream *s)
{
    if (!s)
        return 0;
    if (!(s->flags & SMOE_OPEN_FORCE_CLOSE)) {
        uint64_t held = smoe__slots_refs(s);
        if (held)
            return smoe__fail(SMOE_EBUSY, "close: %llu references are still held; release "
                              "them first (or open with SMOE_OPEN_FORCE_CLOSE)",
                              (unsigned long long)held);
    }
    smoe_shutdown(s);
    /* Claims have stopped: the counts are final. A failed save keeps the
     * previous file and does not fail the close. */
    if (s->freq.saving == SMOE_FREQ_SAVE_ON && smoe__freq_save(s, "close") < 0)
        smoe__log(s, SMOE_LOG_WARN, "popularity histogram not saved: %s", smoe_last_error());
    stream_free(s);
    return 0;
}
