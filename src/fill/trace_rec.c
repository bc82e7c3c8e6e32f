/*
 * trace_rec.c - record a live stream's demand prefetches as a routing
 * trace (docs/trace-format.md).
 *
 * Producers (any thread calling smoe_prefetch) append one 64-bit record to
 * a pre-allocated array used as a ring of `cap` positions (a power of two);
 * one background thread ("smoe-trace") drains it in position order, groups
 * the records into lines and writes them through the smoe__io table.
 *
 * Invariants:
 *  - head counts positions reserved, tail positions the flusher has
 *    consumed; tail <= head, head - tail <= cap. Both only grow and are
 *    compared by difference (64 bits never wrap in practice).
 *  - Position p lives in slots[p & mask]. A record is published by one
 *    release store of its whole word, which carries the stamp
 *    (p >> shift) + 1 (the lap plus one, never 0): the flusher accepts the
 *    word at p only when the stamp matches, so it never reads a half-written
 *    or stale record. The array starts zeroed, stamp 0.
 *  - A position is reserved only while head - tail < cap, that is while its
 *    slot's previous occupant (p - cap) has been consumed. Reservation is a
 *    compare-and-swap on head after checking the room, not a plain
 *    fetch_add: a fetch_add that found no room would leave a reserved
 *    position nobody fills, which the flusher cannot tell from a producer
 *    that is merely slow, and the drain would stop there for good. With the
 *    check-then-CAS every reserved position is written promptly, and a full
 *    buffer costs a producer one load and one counter increment (dropped).
 *  - Only the flusher reads slots and writes tail; only it touches the
 *    line state and the file (and smoe__trace_rec_close after joining it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smoe/smoe.h"
#include "alloc.h"
#include "error.h"
#include "io.h"
#include "platform/thread.h"
#include "fill/trace_rec.h"

#define REC_DEFAULT_CAP (1u << 20) /* records: 8 MiB */
#define REC_FLUSH_NS 50000000ll    /* 50 ms between drains */
#define REC_LINE_MAX 64            /* experts per line (the trace format's limit) */
#define REC_BUF_BYTES (1u << 16)   /* text buffered before a write */

struct smoe__trace_rec {
    _Alignas(64) atomic_uint_fast64_t head; /* producers: next position to reserve */
    _Alignas(64) atomic_uint_fast64_t tail; /* flusher: next position to consume */
    _Alignas(64) atomic_uint_fast64_t dropped;
    _Alignas(64) _Atomic uint64_t *slots;
    uint64_t cap, mask;
    unsigned shift;

    /* flusher only */
    const smoe__io *io;
    int fd;
    int failed;          /* a write failed: consume and count, write nothing */
    uint64_t off;        /* file offset of the next write */
    char *buf;
    size_t blen;
    uint64_t token;
    uint32_t line_layer, line_n, prev_layer;
    int have_line, have_prev;
    uint32_t line[REC_LINE_MAX];

    /* mu guards stop; the flusher sleeps on cv between drains */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    pthread_t thread;
};

static void put_bytes(smoe__trace_rec *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->blen + n > REC_BUF_BYTES) {
        int err_no;
        if (smoe__io_write_full(t->io, t->fd, t->buf, t->blen, t->off, &err_no) < 0)
            t->failed = 1;
        t->off += t->blen;
        t->blen = 0;
        if (t->failed)
            return;
    }
    memcpy(t->buf + t->blen, s, n);
    t->blen += n;
}

static void write_out(smoe__trace_rec *t)
{
    if (t->failed || !t->blen)
        return;
    int err_no;
    if (smoe__io_write_full(t->io, t->fd, t->buf, t->blen, t->off, &err_no) < 0)
        t->failed = 1;
    t->off += t->blen;
    t->blen = 0;
}

static void end_line(smoe__trace_rec *t)
{
    if (!t->have_line)
        return;
    char s[32 + REC_LINE_MAX * 7];
    int n = snprintf(s, sizeof s, "%llu %u", (unsigned long long)t->token, t->line_layer);
    for (uint32_t i = 0; i < t->line_n; i++)
        n += snprintf(s + n, sizeof s - (size_t)n, " %u", t->line[i]);
    s[n++] = '\n';
    put_bytes(t, s, (size_t)n);
    t->prev_layer = t->line_layer;
    t->have_prev = 1;
    t->have_line = 0;
}

/* Group records into lines: one line per (token, layer); see the format doc. */
static void emit(smoe__trace_rec *t, uint32_t layer, uint32_t expert)
{
    if (t->have_line && layer == t->line_layer && t->line_n < REC_LINE_MAX) {
        int repeat = 0;
        for (uint32_t i = 0; i < t->line_n; i++)
            repeat |= t->line[i] == expert;
        if (!repeat) {
            t->line[t->line_n++] = expert;
            return;
        }
    }
    end_line(t);
    /* Back at the same or an earlier layer: the engine is on a new token. */
    if (t->have_prev && layer <= t->prev_layer)
        t->token++;
    t->have_line = 1;
    t->line_layer = layer;
    t->line[0] = expert;
    t->line_n = 1;
}

/* Consume every published record in order, up to the first unpublished. */
static void drain(smoe__trace_rec *t)
{
    /* relaxed: only this thread stores tail */
    uint64_t p = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t skipped = 0;
    for (;;) {
        /* acquire: pairs with the producer's release store of the record */
        uint64_t w = atomic_load_explicit(&t->slots[p & t->mask], memory_order_acquire);
        if ((uint32_t)(w >> 32) != (uint32_t)(p >> t->shift) + 1u)
            break;
        if (t->failed)
            skipped++;
        else
            emit(t, (uint32_t)(w >> 16) & 0xffffu, (uint32_t)w & 0xffffu);
        p++;
        if ((p & 1023u) == 0) /* release: our reads of slots < p precede their reuse */
            atomic_store_explicit(&t->tail, p, memory_order_release);
    }
    /* release: pairs with the producers' acquire load of tail before they
     * overwrite a slot this loop has read */
    atomic_store_explicit(&t->tail, p, memory_order_release);
    if (skipped) /* relaxed: a statistic */
        atomic_fetch_add_explicit(&t->dropped, skipped, memory_order_relaxed);
    write_out(t);
}

static void *flusher_main(void *arg)
{
    smoe__trace_rec *t = arg;
    smoe__thread_name("smoe-trace");
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        pthread_mutex_unlock(&t->mu);
        drain(t);
        pthread_mutex_lock(&t->mu);
        if (t->stop)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = (long long)ts.tv_nsec + REC_FLUSH_NS;
        ts.tv_sec += (time_t)(ns / 1000000000ll);
        ts.tv_nsec = (long)(ns % 1000000000ll);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    pthread_mutex_unlock(&t->mu);
    /* Every producer has returned by now (close's contract): drain it all. */
    drain(t);
    end_line(t);
    write_out(t);
    return NULL;
}

static void rec_free(smoe__trace_rec *t)
{
    if (t->fd >= 0)
        smoe__io_close(t->io, t->fd);
    free(t->buf);
    free((void *)t->slots);
    free(t);
}

int smoe__trace_rec_open_cap(smoe__trace_rec **out, const char *path, uint32_t layers,
                             uint32_t experts, uint32_t top_k, const char *model,
                             uint32_t cap)
{
    *out = NULL;
    if (!path || !*path || cap == 0 || (cap & (cap - 1)) || layers == 0 ||
        layers > 65536 || experts == 0 || experts > 65536)
        return smoe__fail(SMOE_EINVAL, "trace recording: bad arguments (path '%s', shape "
                          "%u x %u, capacity %u)", path ? path : "(null)", layers, experts, cap);
    smoe__trace_rec *t = smoe__calloc(1, sizeof *t);
    if (!t)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the trace recorder", path);
    t->fd = -1;
    t->io = smoe__io_get();
    t->cap = cap;
    t->mask = cap - 1u;
    while ((1ull << t->shift) < cap)
        t->shift++;
    t->slots = smoe__calloc(cap, sizeof *t->slots);
    t->buf = smoe__malloc(REC_BUF_BYTES);
    if (!t->slots || !t->buf) {
        rec_free(t);
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the trace buffer (%u records)",
                          path, cap);
    }
    atomic_init(&t->head, 0);
    atomic_init(&t->tail, 0);
    atomic_init(&t->dropped, 0);
    int fd = smoe__io_open(t->io, path, SMOE__IO_WRONLY);
    if (fd < 0) {
        rec_free(t);
        return smoe__fail(SMOE_ESYS, "%s: cannot create the trace file: %s", path,
                          strerror(-fd));
    }
    t->fd = fd;

    /* The header: model names with blanks would split the key=value word. */
    char m[128];
    snprintf(m, sizeof m, "%s", model && *model ? model : "unknown");
    for (char *c = m; *c; c++)
        if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r')
            *c = '_';
    char hdr[400];
    int n = snprintf(hdr, sizeof hdr,
                     "# source: libsmoe_stream %s recording of demand prefetches\n"
                     "# model=%s layers=%u experts=%u", smoe_version_string(), m, layers,
                     experts);
    if (top_k)
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, " topk=%u", top_k);
    hdr[n++] = '\n';
    int err_no;
    if (smoe__io_write_full(t->io, fd, hdr, (size_t)n, 0, &err_no) < 0) {
        rec_free(t);
        return smoe__fail(SMOE_EIO, "%s: cannot write the trace header: %s", path,
                          strerror(err_no));
    }
    t->off = (uint64_t)n;

    if (pthread_mutex_init(&t->mu, NULL)) {
        rec_free(t);
        return smoe__fail(SMOE_ESYS, "%s: pthread_mutex_init failed", path);
    }
    if (pthread_cond_init(&t->cv, NULL)) {
        pthread_mutex_destroy(&t->mu);
        rec_free(t);
        return smoe__fail(SMOE_ESYS, "%s: pthread_cond_init failed", path);
    }
    int rc = pthread_create(&t->thread, NULL, flusher_main, t);
    if (rc) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        rec_free(t);
        return smoe__fail(SMOE_ESYS, "%s: cannot start the trace writer thread: %s", path,
                          strerror(rc));
    }
    *out = t;
    return 0;
}

int smoe__trace_rec_open(smoe__trace_rec **out, const char *path, uint32_t layers,
                         uint32_t experts, uint32_t top_k, const char *model)
{
    return smoe__trace_rec_open_cap(out, path, layers, experts, top_k, model,
                                    REC_DEFAULT_CAP);
}

void smoe__trace_rec_add(smoe__trace_rec *t, uint32_t layer, uint32_t expert)
{
    /* relaxed: the CAS below decides; a stale value only costs a retry */
    uint64_t h = atomic_load_explicit(&t->head, memory_order_relaxed);
    for (;;) {
        /* acquire: pairs with the flusher's release store of tail, so its
         * read of the slot we may reuse happens before our write to it */
        uint64_t tl = atomic_load_explicit(&t->tail, memory_order_acquire);
        if (h - tl >= t->cap) { /* relaxed: a statistic */
            atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
            return;
        }
        /* relaxed: the position is ours alone; publication is the store below */
        if (atomic_compare_exchange_weak_explicit(&t->head, &h, h + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
    }
    uint64_t w = ((uint64_t)((uint32_t)(h >> t->shift) + 1u) << 32) |
                 ((uint64_t)(layer & 0xffffu) << 16) | (uint64_t)(expert & 0xffffu);
    /* release: pairs with the flusher's acquire load in drain() */
    atomic_store_explicit(&t->slots[h & t->mask], w, memory_order_release);
}

void smoe__trace_rec_close(smoe__trace_rec *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    rec_free(t);
}

uint64_t smoe__trace_rec_dropped(const smoe__trace_rec *t)
{
    /* relaxed: a statistic */
    return t ? atomic_load_explicit(&((smoe__trace_rec *)t)->dropped, memory_order_relaxed)
             : 0;
}
