/*
 * worker.c - the streamer's I/O threads.
 *
 * Each worker owns one descriptor of a packed vault (direct I/O is
 * serialised per descriptor on some systems; one each gives the drive its
 * full queue depth); an index vault's are per source file, opened in
 * smoe_open (source.c), and a chunk's read goes through extent.c. A blob
 * is read in chunks: arming a load queues one token per chunk, so a
 * demand blob spreads over every idle worker at once. Loop: pop a token from the demand queue, and only when it is empty from the
 * hinted speculative ones, highest probability band first (hint.h), then
 * the plain speculative one, so demand waits at most one chunk of lower-priority
 * work per worker; mark the slot STARTED (which also drops tokens of a
 * cancelled or stale load); take the next chunk of the load (each chunk of
 * an arming is handed out exactly once, in the size it was armed with,
 * whatever the number and age of the tokens); read it; count it down. The
 * worker that lands the last chunk verifies the blob if asked and
 * publishes READY or FAILED. Every one of those moves is slot.c's. A worker pops a token and then returns one unit of its queue's
 * room (prefetch.c reserves room before it queues, so a push never finds
 * a queue full and nobody waits for room).
 *
 * Parking: an idle worker registers in `idle`, reads work_seq, checks the
 * queues once more and futex-waits on work_seq. A producer pushes, bumps
 * work_seq and wakes one worker if any is idle. Both sides use seq_cst on
 * idle and work_seq, so either the producer sees the idle count or the
 * worker sees the new work_seq (and the kernel refuses to sleep on a
 * stale value): no lost wake-up, no mutex, no condition variable.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "platform/dio.h"
#include "error.h"
#include "extent.h"
#include "internal.h"
#include "platform/park.h"
#include "platform/thread.h"

/* Tell parked workers there is work (after a push). */
static void notify_workers(struct smoe_stream *s, int n)
{
    atomic_fetch_add(&s->work_seq, 1);
    if (atomic_load(&s->idle) > 0) {
        smoe__park_wake(&s->work_seq, n);
        SMOE__COUNT(s, c_worker_wakes, 1);
    }
}

void smoe__workers_enqueue(struct smoe_stream *s, smoe__mpmc *q, uint32_t v, uint32_t gen,
                           uint32_t n)
{
    const smoe__req rq = {v, gen};
    /* Cannot fail: the caller reserved room for n (mpmc.h, "Reservations") */
    for (uint32_t i = 0; i < n; i++)
        smoe__mpmc_push(q, rq);
    notify_workers(s, (int)n);
}

/* Offset in the blob of the first byte of its padding, data[size, padded),
 * that is not zero; UINT64_MAX when all are. */
static uint64_t padding_dirt(const uint8_t *data, uint64_t size, uint64_t padded)
{
    const uint8_t *t = data + size;
    const size_t n = (size_t)(padded - size);
    /* every byte equal to the next and the first zero: one memcmp */
    if (n == 0 || (t[0] == 0 && memcmp(t, t + 1, n - 1) == 0))
        return UINT64_MAX;
    size_t i = 0;
    while (t[i] == 0)
        i++;
    return size + i;
}

/* The last chunk landed: verify, record the latency, publish. */
static void load_done(struct smoe_stream *s, const smoe__worker *wk, uint32_t v, uint32_t key,
                      const smoe__vault_entry *e)
{
    int err = smoe__slot_load_error(s, v);
    if (err == 0 && s->verify) {
        const uint8_t *data = smoe__slot_data(&s->ring, v);
        uint64_t dirt;
        if (smoe__extent_hash(s, wk, key, data) != e->hash) {
            err = SMOE_ECHECKSUM;
            smoe__slot_note_fault(s, v, SMOE__FAULT_NONE, NULL);
        } else if (!s->src.n && (dirt = padding_dirt(data, e->size, e->padded)) != UINT64_MAX) {
            /* The format promises zero padding (`smoe verify` checks it
             * too): bytes there mean the blob is not what was written. */
            err = SMOE_ECHECKSUM;
            const smoe__io_fail at = {e->offset + dirt, 0, 0, 0, 0};
            smoe__slot_note_fault(s, v, SMOE__FAULT_PADDING, &at);
        }
    }
    SMOE__COUNT(s, c_reads_done, 1);
    if (err)
        SMOE__COUNT(s, c_reads_failed, 1);
    /* relaxed: latency statistics only */
    uint64_t t0 = atomic_load_explicit(&s->ring.t_queued[v], memory_order_relaxed);
    uint64_t w = smoe__slot_peek(&s->ring, v); /* the flags only classify the latency */
    smoe__lat_add((w & SMOE__W_SPEC) && smoe__w_pins(w) == 0 ? &s->lat_spec : &s->lat_demand,
                  smoe__now_ns() - t0);
    smoe__slot_publish(s, v, err);
}

/* A token of slot rq.slot's load: take a chunk of it, read it, count it
 * down; the worker that lands the last one finishes the load. */
static void run_request(smoe__worker *wk, smoe__req rq)
{
    struct smoe_stream *s = wk->s;
    uint32_t key;
    uint64_t off, len;
    if (!smoe__slot_start(s, rq.slot, rq.gen, &key))
        return; /* cancelled, evicted, done, or stale */
    const smoe__vault_entry *e = &s->vault.index[key];
    if (!smoe__slot_take_chunk(s, rq.slot, rq.gen, e->padded, &off, &len))
        return; /* not armed yet, or every chunk of this arming is taken */
    smoe__hook(s, SMOE__HOOK_CHUNK_READ, rq.slot, off, len);
    smoe__io_fail why;
    uint64_t got = 0;
    /* the chunk's part of the load: one read of a packed vault, the
     * segments of an index vault's sources in the range (extent.c) */
    int err = smoe__extent_read(s, wk, rq.slot, key, off, len, &got, &why);
    SMOE__COUNT(s, c_chunks, 1);
    if (err)
        smoe__slot_chunk_failed(s, rq.slot, err,
                                err == SMOE_ESHUTDOWN ? SMOE__FAULT_NONE : SMOE__FAULT_READ,
                                &why);
    else
        SMOE__COUNT(s, c_bytes_read, got);
    if (smoe__slot_chunk_landed(s, rq.slot))
        load_done(s, wk, rq.slot, key, e);
}

static int pop_request(struct smoe_stream *s, smoe__req *rq)
{
    /* Demand first, always; speculation only when demand is empty:
     * hinted reads by band, the most probable first, then plain ones (a
     * plain speculative prefetch carries no probability to rank it by).
     * The token's room goes back once it is off the queue. */
    smoe__mpmc *q = &s->demand_q;
    if (smoe__mpmc_pop(q, rq))
        goto got;
    for (unsigned b = SMOE__HINT_BANDS; b-- > 0;) {
        q = &s->hint_q[b];
        if (smoe__mpmc_pop(q, rq))
            goto got;
    }
    q = &s->spec_q;
    if (!smoe__mpmc_pop(q, rq))
        return 0;
got:
    smoe__mpmc_unreserve(q, 1);
    return 1;
}

static void set_thread_name(uint32_t id)
{
    char name[16];
    snprintf(name, sizeof name, "smoe-io-%u", id);
    smoe__thread_name(name);
}

static void *worker_main(void *arg)
{
    smoe__worker *wk = arg;
    struct smoe_stream *s = wk->s;
    smoe__req rq;
    set_thread_name(wk->id);
    while (!atomic_load(&s->stop)) {
        if (pop_request(s, &rq)) {
            run_request(wk, rq);
            smoe__hook(s, SMOE__HOOK_REQUEST_DONE, rq.slot, 0, 0);
            continue;
        }
        atomic_fetch_add(&s->idle, 1);
        uint32_t seq = atomic_load(&s->work_seq);
        if (pop_request(s, &rq)) {
            atomic_fetch_sub(&s->idle, 1);
            run_request(wk, rq);
            smoe__hook(s, SMOE__HOOK_REQUEST_DONE, rq.slot, 0, 0);
            continue;
        }
        if (!atomic_load(&s->stop)) {
            SMOE__COUNT(s, c_worker_parks, 1);
            smoe__park_wait(&s->work_seq, seq, UINT64_MAX);
        }
        atomic_fetch_sub(&s->idle, 1);
    }
    return NULL;
}

int smoe__workers_start(struct smoe_stream *s)
{
    for (uint32_t i = 0; i < s->nworkers; i++) {
        smoe__worker *wk = &s->workers[i];
        /* Where a direct read cut short may go on (smoe__io_read_full_ex):
         * a boundary both the file offset and the slot's memory may be cut
         * at; when unknown, 16 KiB, a multiple of every alignment smoe_open
         * accepts. */
        uint32_t mem_align, off_align;
        wk->align = 0;
        if (s->io_mode == SMOE_IO_DIRECT) {
            if (smoe__dio_align(wk->fd, &mem_align, &off_align) == 0 && off_align)
                wk->align = mem_align > off_align ? mem_align : off_align;
            else
                wk->align = SMOE__ALIGN;
        }
        int e = pthread_create(&wk->thread, NULL, worker_main, wk);
        if (e)
            return smoe__fail(SMOE_ESYS, "open: cannot start worker %u of %u: %s", i,
                              s->nworkers, strerror(e));
        wk->started = 1;
    }
    return 0;
}

void smoe__workers_join(struct smoe_stream *s)
{
    atomic_store(&s->stop, 1);
    atomic_fetch_add(&s->work_seq, 1);
    smoe__park_wake(&s->work_seq, INT_MAX);
    for (uint32_t i = 0; i < s->nworkers; i++) {
        if (s->workers[i].started) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].started = 0;
        }
    }
}
