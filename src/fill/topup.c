/*
 * topup.c - the idle top-up, "pre-warm" (its thread: "smoe-prewarm"), and
 * smoe_set_busy.
 *
 * While the engine is idle (at open, before the first claim, and between
 * requests) the thread walks the experts by their claim count, hottest
 * first, and prefetches each as a pre-warm read (SMOE__W_SPEC |
 * SMOE__W_TOPUP: queued behind demand, not counted against the
 * speculative cap). It keeps at most one pre-warm read outstanding: after
 * queuing one it waits until the read has landed, then pauses
 * (prewarm_pause_us), so the drive's queue stays shallow however slow the
 * drive, and a request that starts finds at most one pre-warm read ahead.
 *
 * Invariants:
 *  - No pre-warm prefetch is issued while busy. The thread sets `issuing`,
 *    then reads `busy`; smoe_set_busy(1) stores `busy`, then waits while
 *    `issuing` is set. Both sides are seq_cst, so either the thread sees
 *    busy, or smoe_set_busy sees the prefetch in progress and returns only
 *    after it: once smoe_set_busy(s, 1) returns, no new pre-warm read is
 *    queued until the engine is idle again. smoe_shutdown does the same.
 *  - Headroom: pre-warm-owned slots (loading or READY with PREWARM, not
 *    claimed, not asked for by demand) never exceed cap = slots -
 *    max(128, slots / 4); a ring of 128 slots or fewer gets no pre-warm.
 *  - A pass takes victims only among slots whose LRU tick is older than
 *    the pass's start (the `floor`): nothing demand loaded or used since
 *    the pass began, and none of the pass's own loads; and only among
 *    experts with fewer claims than the one it loads
 *    (smoe__evict_pick_topup).
 *  - Every wait is a park on `seq` with a timeout, so smoe_set_busy,
 *    smoe_shutdown and close wake the thread at once; close joins it
 *    before the workers, so it never outlives the ring.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "internal.h"
#include "platform/park.h"
#include "platform/thread.h"
#include "prefetch.h"
#include "fill/topup.h"

static int stopped(struct smoe_stream *s)
{
    return atomic_load(&s->stop) || atomic_load(&s->topup.quit);
}

/* Pre-warm-owned slots right now: loading or READY for pre-warm, neither
 * claimed nor asked for by demand. */
static uint32_t owned_slots(struct smoe_stream *s)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < s->ring.nslots; v++) {
        /* a count to stop at; a stale word only moves it by one */
        uint64_t w = smoe__slot_peek(&s->ring, v);
        unsigned st = smoe__w_state(w);
        if ((w & SMOE__W_TOPUP) && smoe__w_pins(w) == 0 &&
            (st == SMOE__SLOT_READY || st == SMOE__SLOT_LOADING))
            n++;
    }
    return n;
}

static int hotter(const void *a, const void *b)
{
    const smoe__topup_item *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Keys with a nonzero count, hottest first. */
static size_t rank_by_claims(struct smoe_stream *s)
{
    size_t n = 0;
    for (size_t k = 0; k < s->freq.n; k++) {
        /* relaxed: statistics only (see smoe__freq_hit) */
        uint64_t c = atomic_load_explicit(&s->freq.count[k], memory_order_relaxed);
        if (c && s->vault.index[k].present)
            s->topup.order[n++] = (smoe__topup_item){c, (uint32_t)k};
    }
    qsort(s->topup.order, n, sizeof *s->topup.order, hotter);
    return n;
}

/* Park until seq moves or ns pass; returns early on busy or stop. */
static void pause_for(struct smoe_stream *s, uint64_t ns)
{
    smoe__topup *pw = &s->topup;
    uint64_t end = smoe__now_ns() + ns;
    for (;;) {
        uint32_t q = atomic_load(&pw->seq);
        if (atomic_load(&s->busy) || stopped(s))
            return;
        uint64_t now = smoe__now_ns();
        if (now >= end)
            return;
        smoe__park_wait(&pw->seq, q, end - now);
        if (atomic_load(&pw->seq) != q)
            return; /* set_busy, shutdown or close */
    }
}

/*
 * Wait until the read just queued for key is no longer loading (landed,
 * failed, or evicted), or busy or stop. Polls every millisecond, parked on
 * seq so smoe_set_busy, smoe_shutdown and close end the wait at once.
 */
static void wait_landed(struct smoe_stream *s, uint32_t key)
{
    smoe__topup *pw = &s->topup;
    for (;;) {
        uint32_t q = atomic_load(&pw->seq);
        if (atomic_load(&s->busy) || stopped(s))
            return;
        if (!smoe__slot_loading(s, key))
            return;
        smoe__park_wait(&pw->seq, q, 1000000);
    }
}

/*
 * Issue one pre-warm prefetch unless busy or stopped: -1 then, else the
 * prefetch's result. See the invariants above for the handshake.
 */
static int issue(struct smoe_stream *s, uint32_t key)
{
    smoe__topup *pw = &s->topup;
    atomic_store(&pw->issuing, 1);
    int r = -1;
    if (!atomic_load(&s->busy) && !stopped(s)) {
        r = smoe__prefetch_key(s, key, SMOE__W_SPEC | SMOE__W_TOPUP);
        if (r == SMOE_QUEUED)
            /* relaxed: statistics only; counted before issuing drops, so a
             * smoe_set_busy(1) that returned sees it */
            atomic_fetch_add_explicit(&pw->c_reads, 1, memory_order_relaxed);
    }
    atomic_store(&pw->issuing, 0);
    return r;
}

/* One idle period: warm the hottest experts until done, busy or stopped. */
static void run_pass(struct smoe_stream *s)
{
    smoe__topup *pw = &s->topup;
    size_t n = rank_by_claims(s);
    /* relaxed: the clock only ranks; the floor is read back by this thread */
    atomic_store_explicit(&pw->floor, atomic_load_explicit(&s->clock, memory_order_relaxed),
                          memory_order_relaxed);
    uint32_t owned = owned_slots(s), skips = 0;
    for (size_t i = 0; i < n; i++) {
        if (owned >= pw->cap && (owned = owned_slots(s)) >= pw->cap)
            break;
        int r = issue(s, pw->order[i].key);
        if (r < 0)
            return; /* busy or stopped: not a completed pass */
        if (r == SMOE_QUEUED) {
            owned++;
            skips = 0;
            wait_landed(s, pw->order[i].key);
            pause_for(s, pw->pause_ns);
        } else if (r == SMOE_SKIPPED) {
            if (++skips >= SMOE__TOPUP_MAX_SKIPS)
                break; /* nothing older than the pass is left to evict */
        } else {
            skips = 0; /* resident or loading already */
        }
    }
    /* relaxed: statistics only */
    atomic_fetch_add_explicit(&pw->c_passes, 1, memory_order_relaxed);
}

static void *prewarm_main(void *arg)
{
    struct smoe_stream *s = arg;
    smoe__topup *pw = &s->topup;
    smoe__thread_name("smoe-prewarm");
    for (;;) {
        uint32_t q = atomic_load(&pw->seq);
        if (stopped(s))
            break;
        if (!atomic_load(&s->busy))
            run_pass(s);
        if (stopped(s))
            break;
        /* Until the engine changes busy (a new idle period) or close. */
        smoe__park_wait(&pw->seq, q, UINT64_MAX);
    }
    return NULL;
}

int smoe__topup_start(struct smoe_stream *s, const smoe_open_opts *o)
{
    smoe__topup *pw = &s->topup;
    uint32_t n = s->ring.nslots;
    uint32_t reserve = n / SMOE__TOPUP_RESERVE_DIV > SMOE__TOPUP_RESERVE_MIN
                           ? n / SMOE__TOPUP_RESERVE_DIV
                           : SMOE__TOPUP_RESERVE_MIN;
    uint32_t pause_us = o->prewarm_pause_us ? o->prewarm_pause_us : SMOE__TOPUP_PAUSE_US;
    pw->pause_ns = (uint64_t)pause_us * 1000;
    pw->cap = 0;
    if ((o->flags & SMOE_OPEN_NO_PREWARM) || n <= reserve)
        return 0;
    pw->order = smoe__malloc(s->freq.n * sizeof *pw->order);
    if (!pw->order)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the pre-warm list");
    pw->cap = n - reserve;
    int e = pthread_create(&pw->thread, NULL, prewarm_main, s);
    if (e) {
        pw->cap = 0;
        return smoe__fail(SMOE_ESYS, "open: cannot start the pre-warm thread: %s",
                          strerror(e));
    }
    pw->started = 1;
    return 0;
}

void smoe__topup_kick(struct smoe_stream *s, int wait_issuing)
{
    smoe__topup *pw = &s->topup;
    atomic_fetch_add(&pw->seq, 1);
    smoe__park_wake(&pw->seq, INT_MAX);
    /* seq_cst load: pairs with the thread's seq_cst store of issuing
     * (see the invariants at the top) */
    for (unsigned spins = 0; wait_issuing && atomic_load(&pw->issuing); spins++) {
        if (spins < 64)
            smoe__cpu_relax();
        else
            sched_yield(); /* a prefetch takes microseconds; the thread may be off-CPU */
    }
}

void smoe__topup_stop(struct smoe_stream *s)
{
    smoe__topup *pw = &s->topup;
    if (pw->started) {
        atomic_store(&pw->quit, 1);
        smoe__topup_kick(s, 0);
        pthread_join(pw->thread, NULL);
        pw->started = 0;
    }
    free(pw->order);
    pw->order = NULL;
}

SMOE_API int smoe_set_busy(smoe_stream *s, int busy)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "set_busy: NULL stream");
    /* seq_cst: against the pre-warm thread's store of issuing and its load
     * of busy (the handshake at the top of this file) */
    atomic_store(&s->busy, busy != 0);
    smoe__topup_kick(s, busy != 0);
    return 0;
}

void smoe__topup_stats(const struct smoe_stream *s, smoe_stats *st)
{
    const smoe__topup *pw = &s->topup;
    st->prewarm_slots = pw->started ? pw->cap : 0;
    /* relaxed: statistics only */
    st->prewarm_passes = atomic_load_explicit(&pw->c_passes, memory_order_relaxed);
    st->prewarm_reads = atomic_load_explicit(&pw->c_reads, memory_order_relaxed);
    st->prewarm_hits = atomic_load_explicit(&pw->c_hits, memory_order_relaxed);
}
