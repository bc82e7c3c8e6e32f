/*
 * internal.h - the stream object shared by the library's subsystems.
 *
 * Hot path rule: smoe_prefetch, smoe_claim, smoe_release and the worker
 * loop take no lock and allocate nothing. Their only system calls are the
 * read itself and futex wake/wait on a parked worker or claimer (plus a
 * sched_yield in the rare race of two prefetches of one expert at the same
 * instant). They also read the clock (smoe__now_ns: clock_gettime with
 * CLOCK_MONOTONIC, when a load is queued, upgraded or lands, and in
 * smoe_claim_wait): on Linux the vDSO serves it without entering the
 * kernel, and on macOS the commpage does; test_hot_path's
 * item05_hot_path_system_calls runs the hot path with the clock's system
 * call forbidden. A direct read the kernel returns cut off an alignment
 * boundary (end of file, or a device that returns partial reads) also costs
 * one fstat (io.c). Everything they touch is allocated in smoe_open.
 */
#ifndef SMOE_INTERNAL_H
#define SMOE_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "smoe/smoe.h"
#include "budget.h"
#include "io.h"
#include "latency.h"
#include "mpmc.h"
#include "scheduler_state.h"
#include "slot.h"
#include "fill/freq_state.h"
#include "fill/topup_state.h"
#include "fill/trace_rec.h"
#include "fill/startup_state.h"
#include "policy/hint_state.h"
#include "vault/extent.h"
#include "vault/replica_state.h"
#include "vault/source_fds.h"
#include "vault/vault.h"

#define SMOE__ALIGN 16384u
#define SMOE__DEFAULT_WORKERS 16u
#define SMOE__DEFAULT_SPEC_PCT 25u
/* Read chunks (docs/benchmarks.md, "Chunked reads"): demand reads in large
 * chunks for throughput, speculative and pre-warm reads in small ones so
 * that demand waits at most a short chunk per worker behind them. */
#define SMOE__DEFAULT_CHUNK (4u << 20)
#define SMOE__DEFAULT_SPEC_CHUNK (512u << 10)
/* Eviction policy when opts.eviction is SMOE_EVICT_DEFAULT (docs/eviction.md) */
#define SMOE__DEFAULT_EVICTION SMOE_EVICT_REUSE
#define SMOE__MAX_WORKERS 256u
#define SMOE__MAX_SLOTS (1u << 20)

/* Statistics counters: relaxed increments, no ordering with anything. */
#define SMOE__COUNT(s, field, n) \
    atomic_fetch_add_explicit(&(s)->field, (uint64_t)(n), memory_order_relaxed)

/*
 * Test seams: a test may install a function that the library calls at
 * chosen points of the hot path, to pause a thread there or to run code
 * between two of its steps, which makes races deterministic
 * (tests/test_hot_path.c). Outside tests the pointer is NULL: each
 * point costs a relaxed load and a branch that is never taken. a and b
 * depend on the point.
 */
enum {
    SMOE__HOOK_CHUNK_CAS = 1,  /* worker, before its CAS on chunk_next: a = chunk_next
                                * seen, b = the chunk bytes it would read */
    SMOE__HOOK_CHUNK_READ,     /* worker, chunk taken, before the read: a = offset in
                                * the blob, b = length */
    SMOE__HOOK_REQUEST_DONE,   /* worker, after a token was handled */
    SMOE__HOOK_WAIT_ASKED,     /* smoe_claim_wait, its demand prefetch returned
                                * SMOE_RESIDENT or SMOE_QUEUED: a = that status */
    SMOE__HOOK_CLAIM_FAILED,   /* a claim saw FAILED, before it reads the error:
                                * a = the word */
    SMOE__HOOK_CLAIM_ERR,      /* a claim read a FAILED slot's error, before it
                                * reads the fault record: a = the word, b = err */
    SMOE__HOOK_SLOT_PICK       /* a prefetch holds its expert's map entry PENDING,
                                * before it picks a slot: a = the key */
};
struct smoe_stream;
typedef void (*smoe__hook_fn)(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                              uint64_t b);

typedef struct smoe__worker {
    struct smoe_stream *s;
    pthread_t thread;
    int fd;
    uint32_t id;
    int started;
    uint32_t align; /* fd's direct I/O offset alignment; 0: buffered (worker.c) */
} smoe__worker;

struct smoe_stream {
    smoe__vault vault;
    smoe__sources src;       /* an index vault's source files (source.h) */
    smoe__replicas rep;      /* copies of a packed vault reads spread over (replica.h) */
    const smoe__io *io;
    smoe__ring ring;
    _Atomic uint64_t *map;   /* layers * experts residency entries (slot.h) */
    smoe__sched sched;       /* every read's token queues, by class (scheduler.h) */
    smoe__worker *workers;
    smoe__trace_rec *trace;

    uint64_t id;             /* unique in the process: claims record it (claim.c) */

    /* resolved options */
    uint32_t nworkers;
    uint32_t flags;
    int verify;
    int io_mode;             /* SMOE_IO_DIRECT or SMOE_IO_BUFFERED */
    uint32_t spec_cap;       /* speculative reads in flight, at most */
    uint32_t chunk;          /* demand read chunk bytes, a multiple of 16 KiB */
    uint32_t spec_chunk;     /* speculative and pre-warm read chunk bytes */
    uint32_t eviction;       /* SMOE_EVICT_LRU or SMOE_EVICT_REUSE */
    struct smoe__reuse *reuse; /* the reuse policy's state (evict_reuse.h); NULL under LRU */
    smoe_log_fn log_fn;
    void *log_user;

    /* LRU clock: every use takes a fresh tick */
    alignas(64) _Atomic uint64_t clock;
    _Atomic uint32_t empty_hint; /* where the next victim scan starts */

    /* worker parking: producers bump work_seq, idle workers wait on it */
    alignas(64) _Atomic uint32_t work_seq;
    _Atomic uint32_t idle;

    alignas(64) atomic_int stop; /* smoe_shutdown called */
    atomic_int busy;             /* smoe_set_busy: the engine is in a request */
    _Atomic uint32_t spec_inflight;
    atomic_int hint_on;          /* a hint was ever given: eviction reads hints */

    /* hinted speculation (hint.c): per expert the hint's p (float bits, 0:
     * none); per layer SMOE__HINT_* */
    _Atomic uint32_t *hint;
    _Atomic uint32_t *hint_layer;

    /* counters written by prefetching threads */
    alignas(64) _Atomic uint64_t c_prefetch_demand, c_prefetch_spec, c_hits, c_joins,
        c_misses, c_spec_queued, c_spec_skipped, c_spec_upgraded, c_spec_cancelled,
        c_spec_wasted_bytes, c_full, c_evictions, c_worker_wakes, c_evict_scans,
        c_evict_scanned, c_prefetch_hint, c_hint_cancelled,
        c_push_full; /* pushes into reserved room that found the queue full (never
                      * expected: mpmc.h; counted and retried, worker.c) */
    /* counters written by claiming threads */
    alignas(64) _Atomic uint64_t c_claims, c_claim_hits, c_claim_waits, c_claim_wait_ns,
        c_releases, c_spec_used;
    /* counters written by workers */
    alignas(64) _Atomic uint64_t c_reads_done, c_reads_failed, c_bytes_read,
        c_worker_parks, c_chunks;
    /* time from prefetch to READY, per load, by kind */
    smoe__lat_hist lat_demand, lat_spec;

    /* ring sizing, popularity histogram, pre-warm thread */
    smoe__budget budget;
    alignas(64) smoe__freq freq;
    smoe__topup topup;

    /* Test seam (smoe__hook below): NULL except in tests. */
    _Atomic(smoe__hook_fn) hook;

    /* smoe_warmup (startup.c) */
    smoe__startup startup;
};

/* Call the test seam at `point`, if one is installed. */
static inline void smoe__hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                              uint64_t b)
{
    /* relaxed: a test installs the function before the calls it wants to
     * catch; the function synchronises through its own atomics */
    smoe__hook_fn f = atomic_load_explicit(&s->hook, memory_order_relaxed);
    if (f)
        f(s, point, slot, a, b);
}

/* ring.c */
int smoe__ring_init(smoe__ring *r, uint32_t nslots, uint64_t stride, int lock, int shareable);
void smoe__ring_free(smoe__ring *r);
static inline uint8_t *smoe__slot_data(const smoe__ring *r, uint32_t slot)
{
    return r->base + (uint64_t)slot * r->stride;
}

/* A fresh LRU tick for slot v. */
static inline void smoe__touch(struct smoe_stream *s, uint32_t v)
{
    /* relaxed: ticks only rank victims; a stale tick costs a worse choice,
     * never a wrong one (the victim CAS re-checks the slot word) */
    uint64_t t = atomic_fetch_add_explicit(&s->clock, 1, memory_order_relaxed);
    atomic_store_explicit(&s->ring.tick[v], t, memory_order_relaxed);
}

/* Return a speculation budget unit (see prefetch.c). */
static inline void smoe__spec_put(struct smoe_stream *s)
{
    /* relaxed: a budget count, no data depends on it */
    atomic_fetch_sub_explicit(&s->spec_inflight, 1, memory_order_relaxed);
}

/* The live hint of key (given, its layer's demand not yet arrived): 1 with
 * *p, else 0. A statistic: relaxed loads, a racing hint is seen or not. */
static inline int smoe__hint_live(const struct smoe_stream *s, uint32_t key, float *p)
{
    /* relaxed: see hint.h */
    if (!atomic_load_explicit(&s->hint_on, memory_order_relaxed))
        return 0;
    uint32_t b = atomic_load_explicit(&s->hint[key], memory_order_relaxed);
    if (!b || atomic_load_explicit(&s->hint_layer[key / s->vault.experts],
                                   memory_order_relaxed) != SMOE__HINT_GIVEN)
        return 0;
    memcpy(p, &b, sizeof *p);
    return 1;
}

/* evict.c: choose a slot for a new load; see the invariants there. */
enum { SMOE__PICK_DEMAND = 0, SMOE__PICK_SPEC = 1 };
int smoe__evict_pick(struct smoe_stream *s, unsigned kind, uint32_t key, uint32_t *slot,
                     uint64_t *word);
/* An EMPTY slot only, scanning from where the last pick left off (the
 * warm-up, which never evicts). */
int smoe__evict_pick_empty(struct smoe_stream *s, uint32_t *slot, uint64_t *word);
/* For a pre-warm load of key: only colder slots idle since the pass began. */
int smoe__evict_pick_topup(struct smoe_stream *s, uint32_t key, uint32_t *slot,
                             uint64_t *word);

/* Chunk tokens of a demand (or speculative and pre-warm) load of key: one
 * per chunk (smoe__extent_chunks). */
static inline uint32_t smoe__load_chunks(const struct smoe_stream *s, uint32_t key, int demand)
{
    return smoe__extent_chunks(&s->vault, key, demand ? s->chunk : s->spec_chunk);
}

/* worker.c */
/* Queue n chunk tokens of slot v's load (gen) on q (a class's queue,
 * scheduler.h), in room the caller has reserved (smoe__mpmc_reserve), and wake
 * up to n parked workers. */
void smoe__workers_enqueue(struct smoe_stream *s, smoe__mpmc *q, uint32_t v, uint32_t gen,
                           uint32_t n);
int smoe__workers_start(struct smoe_stream *s);
void smoe__workers_join(struct smoe_stream *s);

#endif
