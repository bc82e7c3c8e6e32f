/*
 * worker.c - the streamer's I/O threads.
 *
 * Each worker owns one descriptor of a packed vault (direct I/O is
 * serialised per descriptor on some systems; one each gives the drive its
 * full queue depth); an index vault's are per source file, opened in
 * smoe_open (source.c), and a chunk's read goes through extent.c. A blob is
 * read in chunks: arming a load queues one token per chunk, so a demand
 * blob spreads over every idle worker at once. Loop: pop a token from the
 * scheduler (scheduler.h: demand first, then the other classes in their
 * order), so demand waits at most one chunk of lower-priority work per
 * worker; mark
 * the slot STARTED (which also drops tokens of a cancelled or stale load);
 * take the next chunk of the load (each chunk of an arming is handed out
 * exactly once, in the size it was armed with, whatever the number and age
 * of the tokens); read it; count it down. The worker that lands the last
 * chunk verifies the blob if asked (blob_check.c) and publishes READY or
 * FAILED. Every one
 * of those moves is slot.c's. A worker pops a token and then returns one
 * unit of its queue's room (prefetch.c reserves room before it queues, so a
 * push never finds a queue full and nobody waits for room).
 *
 * Parking: an idle worker registers in `idle`, reads work_seq, checks the
 * queues once more and futex-waits on work_seq. A producer pushes, bumps
 * work_seq and wakes one worker if any is idle. Both sides use seq_cst on
 * idle and work_seq, so either the producer sees the idle count or the
 * worker sees the new work_seq (and the kernel refuses to sleep on a
 * stale value): no lost wake-up, no mutex, no condition variable. While
 * a warm-up with verification runs, a worker without a share parks for
 * 100 us at a time instead (smoe__startup_park_ns): the readers queue their
 * landed blobs' hashing without waking anyone.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "vault/blob_check.h"
#include "error.h"
#include "vault/chunk_read.h"
#include "vault/extent.h"
#include "internal.h"
#include "scheduler.h"
#include "vault/replica.h"
#include "platform/park.h"
#include "platform/thread.h"
#include "fill/startup.h"

/* Tell parked workers there is work (after a push). */
static void notify_workers(struct smoe_stream *s, int n)
{
    atomic_fetch_add(&s->work_seq, 1);
    if (atomic_load(&s->idle) > 0) {
        smoe__park_wake(&s->work_seq, n);
        SMOE__COUNT(s, c_worker_wakes, 1);
    }
}

/*
 * A push into room the caller reserved found the queue full. The
 * reservation's orders (mpmc.h) rule this out: the room is there, and a
 * push sees the consumer's freeing of its cell. Should it happen all the
 * same, a dropped token would leave the load LOADING for ever (its chunk
 * never taken, chunk_left never 0): so count it (c_push_full), wake the
 * workers for the tokens already queued, and push again until the cell is
 * seen free. Never reached in a correct build; a test (f3) forces it.
 */
static void push_reserved(struct smoe_stream *s, smoe__mpmc *q, smoe__req rq, uint32_t pushed)
{
    SMOE__COUNT(s, c_push_full, 1);
    notify_workers(s, pushed ? (int)pushed : 1);
    for (unsigned spins = 0; !smoe__mpmc_push(q, rq); spins++) {
        if (spins < 64)
            smoe__cpu_relax();
        else
            sched_yield();
    }
}

void smoe__workers_enqueue(struct smoe_stream *s, smoe__mpmc *q, uint32_t v, uint32_t gen,
                           uint32_t n)
{
    const smoe__req rq = {v, gen};
    for (uint32_t i = 0; i < n; i++)
        if (!smoe__mpmc_push(q, rq))
            push_reserved(s, q, rq, i);
    notify_workers(s, (int)n);
}

/* The last chunk landed: verify, record the latency, publish. Returns the
 * load's error (0: READY). */
static int load_done(struct smoe_stream *s, const smoe__worker *wk, uint32_t v, uint32_t key,
                     uint32_t arming, const smoe__vault_entry *e)
{
    int err = smoe__slot_load_error(s, v);
    if (err == 0 && s->verify)
        err = smoe__blob_check(s, wk, v, key, arming, e);
    SMOE__COUNT(s, c_reads_done, 1);
    if (err)
        SMOE__COUNT(s, c_reads_failed, 1);
    /* relaxed: latency statistics only */
    uint64_t t0 = atomic_load_explicit(&s->ring.t_queued[v], memory_order_relaxed);
    uint64_t w = smoe__slot_peek(&s->ring, v); /* the flags only classify the latency */
    smoe__lat_add((w & SMOE__W_SPEC) && smoe__w_pins(w) == 0 ? &s->lat_spec : &s->lat_demand,
                  smoe__now_ns() - t0);
    smoe__slot_publish(s, v, arming, err);
    return err;
}

/* The chunk's part of the load: a packed vault's from one of its copies,
 * the next on failure (replica_read.c); an index vault's from the segments
 * of its sources in the range (extent.c). */
static int read_chunk(struct smoe_stream *s, const smoe__worker *wk, uint32_t slot,
                      uint32_t key, uint64_t off, uint64_t len, int sequential,
                      uint64_t *got, smoe__io_fail *why)
{
    if (!s->src.n) {
        *got = len;
        return smoe__replica_read(s, wk, smoe__slot_data(&s->ring, slot) + off, len,
                                  s->vault.index[key].offset + off, sequential, why);
    }
    int err = smoe__chunk_read(s, wk, slot, key, off, len, got, why);
    if (err != SMOE_ESHUTDOWN)
        smoe__replica_count(s, *got, err != 0);
    return err;
}

/* A token of slot rq.slot's load: take a chunk of it, read it, count it
 * down; the worker that lands the last one finishes the load, or (defer,
 * with verification on) hands its hashing to another worker. 1 if a chunk
 * was taken (*landed: 0 if it was not the last; 1 if it was and the load
 * is published; 2 if its verification was handed off), 0 if none was. */
static int run_request(smoe__worker *wk, smoe__req rq, int defer, int *landed)
{
    struct smoe_stream *s = wk->s;
    uint32_t key;
    uint64_t off, len;
    uint32_t arming;
    *landed = 0;
    if (!smoe__slot_start(s, rq.slot, rq.gen, &key))
        return 0; /* cancelled, evicted, done, or stale */
    /* key is the word's at smoe__slot_start, before the chunk CAS: a worker
     * stalled across 2^20 loads of this slot (the gen wraps) could meet
     * another key's arming with an identical chunk_next and read with this
     * entry's offsets. Negligible, and noted rather than paid for. */
    const smoe__vault_entry *e = &s->vault.index[key];
    if (!smoe__slot_take_chunk(s, rq.slot, rq.gen, key, &off, &len, &arming))
        return 0; /* not armed yet, or every chunk of this arming is taken */
    smoe__hook(s, SMOE__HOOK_CHUNK_READ, rq.slot, off, len);
    smoe__io_fail why;
    uint64_t got = 0;
    int err = read_chunk(s, wk, rq.slot, key, off, len, defer, &got, &why);
    SMOE__COUNT(s, c_chunks, 1);
    if (err)
        smoe__slot_chunk_failed(s, rq.slot, arming, err,
                                err == SMOE_ESHUTDOWN ? SMOE__FAULT_NONE : SMOE__FAULT_READ,
                                &why);
    else
        SMOE__COUNT(s, c_bytes_read, got);
    if (smoe__slot_chunk_landed(s, rq.slot)) {
        /* A warm-up's stream reads on while another worker hashes. */
        if (defer && s->verify && !err && smoe__startup_hand_verify(s, rq.slot, rq.gen)) {
            *landed = 2;
            return 1;
        }
        (void)load_done(s, wk, rq.slot, key, arming, e);
        *landed = 1;
    }
    return 1;
}

/* A verify token (smoe__startup_hand_verify): every chunk of slot v's
 * warm-up load has landed and nobody else touches the slot (STARTED,
 * chunks all taken); hash it and publish. The queue's pop (acquire) pairs
 * with the handing worker's push (release): its read's bytes are seen. */
static void run_verify(smoe__worker *wk, uint32_t v)
{
    struct smoe_stream *s = wk->s;
    /* acquire: [K] (slot.c): the key of the load this token finishes */
    const uint32_t key = smoe__w_key(smoe__slot_word(&s->ring, v));
    int err = load_done(s, wk, v, key, smoe__slot_arming(s, v), &s->vault.index[key]);
    smoe__startup_verify_end(s, key, err);
}

/*
 * One unit of work, if there is any, from the scheduler (scheduler.h): the
 * first class in order with a token (demand; the verification hand-off,
 * for a worker without a start-up fill share; hinted speculation by band;
 * plain speculation; the idle top-up), else a chunk of this worker's own
 * start-up fill share (startup.c), which so yields to every queued class
 * at every chunk. 0 when there was none.
 */
static int work_once(smoe__worker *wk)
{
    struct smoe_stream *s = wk->s;
    smoe__req rq;
    int landed;
    unsigned cl = smoe__sched_pop(&s->sched, smoe__startup_may_verify(wk), &rq);
    if (cl == SMOE__CL_VERIFY) {
        run_verify(wk, rq.slot);
        smoe__hook(s, SMOE__HOOK_REQUEST_DONE, rq.slot, 0, 0);
        return 1;
    }
    if (cl != SMOE__CL_NONE) {
        (void)run_request(wk, rq, 0, &landed);
        smoe__hook(s, SMOE__HOOK_REQUEST_DONE, rq.slot, 0, 0);
        return 1;
    }
    if (smoe__startup_next(wk, &rq.slot, &rq.gen)) {
        int took = run_request(wk, rq, 1, &landed);
        smoe__startup_ran(wk, took, landed);
        return 1;
    }
    return 0;
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
    set_thread_name(wk->id);
    while (!atomic_load(&s->stop)) {
        if (work_once(wk))
            continue;
        atomic_fetch_add(&s->idle, 1);
        uint32_t seq = atomic_load(&s->work_seq);
        if (work_once(wk)) {
            atomic_fetch_sub(&s->idle, 1);
            continue;
        }
        if (!atomic_load(&s->stop)) {
            SMOE__COUNT(s, c_worker_parks, 1);
            smoe__park_wait(&s->work_seq, seq, smoe__startup_park_ns(wk));
        }
        atomic_fetch_sub(&s->idle, 1);
    }
    return NULL;
}

int smoe__workers_start(struct smoe_stream *s)
{
    for (uint32_t i = 0; i < s->nworkers; i++) {
        smoe__worker *wk = &s->workers[i];
        /* Where a direct read cut short may go on (smoe__io_read_full_ex) */
        wk->align = smoe__read_align(s, wk->fd);
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
