/*
 * startup.c - the start-up fill: smoe_warmup, smoe_warmup_wait,
 * smoe_warmup_cancel fill the ring's empty slots at the drive's speed.
 *
 * The choice: the experts neither resident nor in flight, by claim count
 * (most first), ties and unclaimed experts in layer order, as many as the
 * ring's empty slots (or opts.max_experts). The order they are read in is
 * the vault's (file offset; an index vault's blobs have none, so key
 * order), cut into one contiguous share of about equal bytes per worker.
 * The drive then sees one sequential stream per worker, each request a
 * whole chunk (opts.chunk_bytes at open), as `fio --rw=read` with one job
 * per region does: reading blobs in request order instead, one blob per
 * worker, gives it a single stream at the workers' depth, which reaches
 * less (docs/benchmarks.md, "Cold throughput").
 *
 * The workers do the reading, as the scheduler's lowest class: a worker
 * reads a chunk of its own share only when every queue of the scheduler
 * is empty (scheduler.h), so demand waits at most one chunk per worker. A
 * warm-up load is begun by the loads' one path (load.c, smoe__load_fill:
 * an EMPTY slot, armed in demand-sized chunks, no tokens), and its worker
 * reads the chunks itself, one after the other. Demand joining it
 * upgrades it as any speculative read (prefetch.c): the demand tokens
 * then spread its remaining chunks over idle workers.
 *
 * Invariants:
 *  - Only EMPTY slots are taken: the warm-up never evicts.
 *  - A share's cursor (startup.h) is moved only by its worker while the
 *    warm-up runs, and written by smoe_warmup only while none runs; the
 *    order, nshares and the cursors are written before the release store
 *    of RUNNING, and a worker reads them after an acquire load of state
 *    and of its cursor.
 *  - A load begun is finished by its worker (or by demand tokens), cancel
 *    or not: an armed slot is never left without a reader while the
 *    workers run.
 *  - `active` counts shares not FINISHED; the worker that finishes the
 *    last one ends the warm-up: state IDLE, done_seq bumped, waiters woken.
 *
 * Hot path: smoe__startup_next and smoe__startup_ran take no lock and
 * allocate nothing; when no warm-up runs they cost one load.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "sized.h"
#include "internal.h"
#include "scheduler.h"
#include "platform/park.h"
#include "fill/startup.h"
#include "load.h"

#define CUR_MASK 0x7fffffffull

static uint64_t cur_make(uint32_t next, uint32_t end)
{
    return ((uint64_t)next << 32) | end;
}

/* The warm-up has ended (its last share finished). */
static void end_warmup(struct smoe_stream *s)
{
    smoe__startup *wu = &s->startup;
    /* relaxed: statistics; the state store below publishes it */
    atomic_store_explicit(&wu->t_end, smoe__now_ns(), memory_order_relaxed);
    atomic_store(&wu->state, SMOE__STARTUP_IDLE);
    atomic_fetch_add(&wu->done_seq, 1);
    smoe__park_wake(&wu->done_seq, INT_MAX);
}

static void finish_share(struct smoe_stream *s, smoe__startup_share *sh, uint64_t c)
{
    /* release: pairs with smoe_warmup's acquire loads of the cursors
     * (through `active`), so a new warm-up sees this worker done with it */
    atomic_store_explicit(&sh->cur, c | SMOE__STARTUP_FINISHED, memory_order_release);
    if (atomic_fetch_sub(&s->startup.active, 1) == 1)
        end_warmup(s);
}

int smoe__startup_next(smoe__worker *wk, uint32_t *slot, uint32_t *gen)
{
    struct smoe_stream *s = wk->s;
    smoe__startup *wu = &s->startup;
    /* acquire: pairs with smoe_warmup's release store of RUNNING (order,
     * nshares, the cursors) */
    uint32_t st = atomic_load_explicit(&wu->state, memory_order_acquire);
    /* relaxed: ordered by the acquire load of state above */
    if (!(st & SMOE__STARTUP_RUNNING) ||
        wk->id >= atomic_load_explicit(&wu->nshares, memory_order_relaxed))
        return 0;
    smoe__startup_share *sh = &wu->share[wk->id];
    /* acquire: pairs with smoe_warmup's release store of this cursor */
    uint64_t c = atomic_load_explicit(&sh->cur, memory_order_acquire);
    if (c & SMOE__STARTUP_FINISHED)
        return 0;
    if (sh->have) {
        *slot = sh->slot;
        *gen = sh->gen;
        return 1;
    }
    uint32_t next = (uint32_t)(c >> 32) & CUR_MASK, end = (uint32_t)(c & CUR_MASK);
    if ((st & SMOE__STARTUP_CANCEL) || atomic_load(&s->stop))
        next = end;
    while (next < end) {
        uint32_t key = wu->order[next++];
        int r = smoe__load_fill(s, key, slot, gen);
        if (r > 0) {
            /* relaxed: this worker is the cursor's only writer while it runs */
            atomic_store_explicit(&sh->cur, cur_make(next, end), memory_order_relaxed);
            sh->slot = *slot;
            sh->gen = *gen;
            sh->key = key;
            sh->have = 1;
            return 1;
        }
        if (r < 0)
            next = end; /* the ring is full */
    }
    finish_share(s, sh, cur_make(end, end));
    return 0;
}

/* Count slot v's warm-up load of key (gen) by the state it ended in. */
static void count_load(struct smoe_stream *s, uint32_t v, uint32_t key, uint32_t gen)
{
    uint64_t w = smoe__slot_peek(&s->ring, v);
    if (smoe__w_key(w) != key || smoe__w_gen(w) != gen)
        return;
    switch (smoe__w_state(w)) {
    case SMOE__SLOT_FAILED:
        SMOE__COUNT(&s->startup, c_failed, 1);
        break;
    case SMOE__SLOT_READY:
    case SMOE__SLOT_CONSUMED:
    case SMOE__SLOT_LOADING: /* its last chunks are in demand's hands */
        SMOE__COUNT(&s->startup, c_loaded, 1);
        SMOE__COUNT(&s->startup, c_bytes, s->vault.index[key].padded);
        break;
    default:
        break;
    }
}

void smoe__startup_ran(smoe__worker *wk, int took, int landed)
{
    struct smoe_stream *s = wk->s;
    smoe__startup *wu = &s->startup;
    smoe__startup_share *sh = &wu->share[wk->id];
    if (took && !landed)
        return; /* chunks to go */
    sh->have = 0;
    if (landed == 2)
        return; /* smoe__startup_verify_end counts it */
    /* The load is over for this worker: landed here, ended by a demand
     * token's worker, or cancelled by a demand eviction before it began.
     * A poll to count: nothing is read through it. */
    count_load(s, sh->slot, sh->key, sh->gen);
}

/* Between two looks at the verify queue, a worker without a share parks
 * this long: a seventh of a 2 MiB read at 3 GB/s, so a landed blob waits
 * little for its hash, and the reading worker never pays for a wake-up
 * (on a virtual machine one cost it 50-100 us: docs/benchmarks.md, "Cold
 * throughput"). */
#define VERIFY_POLL_NS 100000ull

/* The warm-up runs (acquire: its memory is seen) and wk has no share of it
 * left to read. */
static int runs_without_share(const smoe__worker *wk)
{
    const smoe__startup *wu = &wk->s->startup;
    /* acquire: pairs with smoe_warmup's release store of RUNNING */
    if (!(atomic_load_explicit(&wu->state, memory_order_acquire) & SMOE__STARTUP_RUNNING))
        return 0;
    /* relaxed: ordered by the acquire load of state above */
    if (wk->id >= atomic_load_explicit(&wu->nshares, memory_order_relaxed))
        return 1;
    /* acquire: pairs with smoe_warmup's release store of this cursor */
    return (atomic_load_explicit(&wu->share[wk->id].cur, memory_order_acquire) &
            SMOE__STARTUP_FINISHED) != 0;
}

int smoe__startup_hand_verify(struct smoe_stream *s, uint32_t v, uint32_t gen)
{
    smoe__startup *wu = &s->startup;
    /* relaxed: set before RUNNING, which this worker has seen. A worker
     * without a share exists when there are more workers than shares, or
     * one is parked (its share done); it polls the queue (park_ns). */
    if (s->nworkers <= atomic_load_explicit(&wu->nshares, memory_order_relaxed) &&
        atomic_load(&s->idle) == 0)
        return 0;
    atomic_fetch_add(&wu->active, 1); /* this worker's share keeps it above 0 */
    /* The queue has a cell per slot and a slot has one load to verify at a
     * time: the push cannot find it full. Its release store of the cell
     * pairs with the pop's acquire, so the hasher sees the read's bytes. */
    if (!smoe__mpmc_push(smoe__sched_q(&s->sched, SMOE__CL_VERIFY), (smoe__req){v, gen})) {
        atomic_fetch_sub(&wu->active, 1);
        return 0;
    }
    return 1;
}

int smoe__startup_may_verify(const smoe__worker *wk)
{
    return runs_without_share(wk);
}

uint64_t smoe__startup_park_ns(const smoe__worker *wk)
{
    return wk->s->verify && runs_without_share(wk) ? VERIFY_POLL_NS : UINT64_MAX;
}

void smoe__startup_verify_end(struct smoe_stream *s, uint32_t key, int err)
{
    if (err) {
        SMOE__COUNT(&s->startup, c_failed, 1);
    } else {
        SMOE__COUNT(&s->startup, c_loaded, 1);
        SMOE__COUNT(&s->startup, c_bytes, s->vault.index[key].padded);
    }
    if (atomic_fetch_sub(&s->startup.active, 1) == 1)
        end_warmup(s);
}

/* ---- choosing and starting ------------------------------------------------ */

typedef struct wu_item {
    uint64_t by; /* claim count, or file offset */
    uint32_t key;
} wu_item;

static int by_count(const void *a, const void *b)
{
    const wu_item *x = a, *y = b;
    if (x->by != y->by)
        return x->by > y->by ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

static int by_offset(const void *a, const void *b)
{
    const wu_item *x = a, *y = b;
    if (x->by != y->by)
        return x->by < y->by ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

static uint32_t empty_slots(struct smoe_stream *s)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < s->ring.nslots; v++)
        n += smoe__w_state(smoe__slot_peek(&s->ring, v)) == SMOE__SLOT_EMPTY;
    return n;
}

/* Choose the experts into wu->order, in read order; returns how many. */
static uint32_t choose(struct smoe_stream *s, wu_item *it, uint32_t cap)
{
    const uint32_t nkeys = s->vault.layers * s->vault.experts;
    uint32_t n = 0;
    for (uint32_t k = 0; k < nkeys; k++) {
        if (!s->vault.index[k].present || smoe__map_lookup(s->map, k) != SMOE__MAP_NONE)
            continue;
        /* relaxed: statistics only (see smoe__freq_hit) */
        uint64_t c = s->freq.count ? atomic_load_explicit(&s->freq.count[k],
                                                          memory_order_relaxed) : 0;
        it[n++] = (wu_item){c, k};
    }
    qsort(it, n, sizeof *it, by_count);
    if (n > cap)
        n = cap;
    for (uint32_t i = 0; i < n; i++)
        it[i].by = s->vault.index[it[i].key].offset;
    qsort(it, n, sizeof *it, by_offset);
    for (uint32_t i = 0; i < n; i++)
        s->startup.order[i] = it[i].key;
    return n;
}

/* Cut order[0, n) into nshares runs of about equal bytes; returns the
 * shares with work. */
static uint32_t cut_shares(struct smoe_stream *s, uint32_t n, uint32_t nshares)
{
    smoe__startup *wu = &s->startup;
    uint64_t total = 0, acc = 0;
    for (uint32_t i = 0; i < n; i++)
        total += s->vault.index[wu->order[i]].padded;
    uint32_t begin = 0, i = 0, busy = 0;
    for (uint32_t j = 0; j < nshares; j++) {
        const uint64_t goal = j + 1 == nshares ? UINT64_MAX : total / nshares * (j + 1);
        while (i < n && acc < goal)
            acc += s->vault.index[wu->order[i++]].padded;
        uint64_t c = cur_make(begin, i);
        if (begin == i)
            c |= SMOE__STARTUP_FINISHED;
        else
            busy++;
        wu->share[j].have = 0;
        /* release: pairs with the worker's acquire load of its cursor */
        atomic_store_explicit(&wu->share[j].cur, c, memory_order_release);
        begin = i;
    }
    return busy;
}

static int read_wopts(const smoe_warmup_opts *in, smoe_warmup_opts *o)
{
    const smoe_warmup_opts def = SMOE_WARMUP_OPTS_INIT;
    *o = def;
    if (!in)
        return 0;
    int r = smoe__sized_in(o, sizeof *o, in, sizeof(size_t), "warmup", "smoe_warmup_opts");
    if (r < 0)
        return r;
    if (o->flags)
        return smoe__fail(SMOE_EINVAL, "warmup: unknown flags 0x%x in opts.flags "
                          "(none are defined)", o->flags);
    return 0;
}

/* The memory every warm-up of s uses, allocated by the first. */
static int ensure_memory(struct smoe_stream *s, wu_item **it)
{
    smoe__startup *wu = &s->startup;
    const size_t nkeys = (size_t)s->vault.layers * s->vault.experts;
    if (!wu->order)
        wu->order = smoe__malloc(nkeys * sizeof *wu->order);
    if (!wu->share) {
        wu->share = smoe__aligned_alloc(64, s->nworkers * sizeof *wu->share);
        if (wu->share)
            memset(wu->share, 0, s->nworkers * sizeof *wu->share);
    }
    *it = smoe__malloc(nkeys * sizeof **it);
    if (wu->order && wu->share && *it)
        return 0;
    free(*it);
    return smoe__fail(SMOE_ENOMEM, "warmup: out of memory for the list of %zu experts",
                      nkeys);
}

SMOE_API int smoe_warmup(smoe_stream *s, const smoe_warmup_opts *opts)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "warmup: NULL stream");
    smoe_warmup_opts o;
    int r = read_wopts(opts, &o);
    if (r < 0)
        return r;
    if (atomic_load(&s->stop))
        return smoe__fail(SMOE_ESHUTDOWN, "warmup: stream is shut down");
    smoe__startup *wu = &s->startup;
    uint32_t idle = SMOE__STARTUP_IDLE;
    /* seq_cst: one caller at a time gets past this */
    if (!atomic_compare_exchange_strong(&wu->state, &idle, SMOE__STARTUP_STARTING))
        return smoe__fail(SMOE_EBUSY, "warmup: a warm-up is running; wait for it "
                          "(smoe_warmup_wait) or cancel it (smoe_warmup_cancel)");
    wu_item *it;
    if ((r = ensure_memory(s, &it)) < 0) {
        atomic_store(&wu->state, SMOE__STARTUP_IDLE);
        return r;
    }
    uint32_t cap = empty_slots(s);
    if (o.max_experts && o.max_experts < cap)
        cap = o.max_experts;
    const uint32_t n = choose(s, it, cap);
    free(it);
    uint32_t nshares = o.workers && o.workers < s->nworkers ? o.workers : s->nworkers;
    if (nshares > n)
        nshares = n;
    /* relaxed: statistics; the state store below publishes them */
    atomic_store_explicit(&wu->c_experts, n, memory_order_relaxed);
    atomic_store_explicit(&wu->c_loaded, 0, memory_order_relaxed);
    atomic_store_explicit(&wu->c_failed, 0, memory_order_relaxed);
    atomic_store_explicit(&wu->c_bytes, 0, memory_order_relaxed);
    uint64_t now = smoe__now_ns();
    atomic_store_explicit(&wu->t_start, now, memory_order_relaxed);
    atomic_store_explicit(&wu->t_end, now, memory_order_relaxed);
    /* relaxed: published by the state store below */
    atomic_store_explicit(&wu->nshares, nshares, memory_order_relaxed);
    uint32_t busy = cut_shares(s, n, nshares);
    if (busy == 0) {
        atomic_store(&wu->state, SMOE__STARTUP_IDLE);
        return 0;
    }
    atomic_store_explicit(&wu->active, busy, memory_order_relaxed);
    /* seq_cst: the release the workers' acquire loads pair with, and
     * ordered before the work_seq bump for the parking handshake (worker.c) */
    atomic_store(&wu->state, SMOE__STARTUP_RUNNING);
    atomic_fetch_add(&s->work_seq, 1);
    if (atomic_load(&s->idle) > 0)
        smoe__park_wake(&s->work_seq, INT_MAX);
    return (int)n;
}

SMOE_API int smoe_warmup_wait(smoe_stream *s, uint64_t timeout_ns)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "warmup_wait: NULL stream");
    smoe__startup *wu = &s->startup;
    const uint64_t t0 = smoe__now_ns();
    for (;;) {
        uint32_t q = atomic_load(&wu->done_seq);
        if (!(atomic_load(&wu->state) & (SMOE__STARTUP_RUNNING | SMOE__STARTUP_STARTING)))
            return 0;
        if (atomic_load(&s->stop))
            return smoe__fail(SMOE_ESHUTDOWN, "warmup_wait: stream is shut down");
        uint64_t spent = smoe__now_ns() - t0;
        if (timeout_ns != UINT64_MAX && spent >= timeout_ns)
            return smoe__fail(SMOE_ETIMEDOUT, "warmup_wait: the warm-up still runs after "
                              "%llu ns", (unsigned long long)timeout_ns);
        uint64_t left = timeout_ns == UINT64_MAX ? UINT64_MAX : timeout_ns - spent;
        /* at most 100 ms: STARTING ends without a wake-up */
        smoe__park_wait(&wu->done_seq, q, left < 100000000ull ? left : 100000000ull);
    }
}

SMOE_API int smoe_warmup_cancel(smoe_stream *s)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "warmup_cancel: NULL stream");
    smoe__startup *wu = &s->startup;
    /* seq_cst: CANCEL lands only on a running warm-up */
    uint32_t st = atomic_load(&wu->state);
    while ((st & SMOE__STARTUP_RUNNING) &&
           !atomic_compare_exchange_weak(&wu->state, &st, st | SMOE__STARTUP_CANCEL))
        ;
    if (!(st & SMOE__STARTUP_RUNNING))
        return 0;
    /* Parked workers with a share left look again, see CANCEL, finish. */
    atomic_fetch_add(&s->work_seq, 1);
    smoe__park_wake(&s->work_seq, INT_MAX);
    int r = smoe_warmup_wait(s, UINT64_MAX);
    return r == SMOE_ESHUTDOWN ? 0 : r;
}

void smoe__startup_kick(struct smoe_stream *s)
{
    atomic_fetch_add(&s->startup.done_seq, 1);
    smoe__park_wake(&s->startup.done_seq, INT_MAX);
}

void smoe__startup_free(struct smoe_stream *s)
{
    free(s->startup.order);
    smoe__aligned_free(s->startup.share);
    s->startup.order = NULL;
    s->startup.share = NULL;
}

void smoe__startup_stats(const struct smoe_stream *s, smoe_stats *st)
{
    const smoe__startup *wu = &s->startup;
    /* seq_cst load of state; the counters relaxed: statistics only */
    const int running = (atomic_load(&wu->state) & SMOE__STARTUP_RUNNING) && !atomic_load(&s->stop);
    st->warmup_running = (uint64_t)running;
    st->warmup_experts = atomic_load_explicit(&wu->c_experts, memory_order_relaxed);
    st->warmup_loaded = atomic_load_explicit(&wu->c_loaded, memory_order_relaxed);
    st->warmup_failed = atomic_load_explicit(&wu->c_failed, memory_order_relaxed);
    st->warmup_bytes = atomic_load_explicit(&wu->c_bytes, memory_order_relaxed);
    uint64_t t0 = atomic_load_explicit(&wu->t_start, memory_order_relaxed);
    uint64_t t1 = running ? smoe__now_ns()
                          : atomic_load_explicit(&wu->t_end, memory_order_relaxed);
    st->warmup_ns = t1 > t0 ? t1 - t0 : 0;
    st->warmup_bytes_per_s =
        st->warmup_ns ? (uint64_t)((double)st->warmup_bytes * 1e9 / (double)st->warmup_ns) : 0;
}
