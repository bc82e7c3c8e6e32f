/*
 * evict_reuse.c - the `reuse` eviction policy: which idle slot a new load
 * takes, by the learned chance that its expert is asked for at the next
 * visit of its layer, less the part of a layer cycle it would sit idle
 * until then (docs/eviction.md, "reuse, precisely").
 *
 * Invariants:
 *  - It only ranks. smoe__evict_pick (evict.c) keeps every rule of the
 *    victim scan: lazy (one victim per load that needs a slot), EMPTY
 *    first, then the classes (FAILED, retained, unclaimed speculative,
 *    queued speculative for demand), never a slot with references, a read
 *    in flight or a demand pin; within the best class the lowest keep
 *    value wins, ties to the least recently used. The slot is then taken by
 *    one CAS from the word the scan saw, so a stale statistic here costs a
 *    worse choice, never a wrong one.
 *  - No lock, no allocation, no system call: everything is allocated at
 *    open; every access is a relaxed load or store of a 64-bit record (a
 *    racing update may be lost; nothing else can go wrong).
 *  - Bounded work: per demand prefetch, at most SMOE__REUSE_TRAIN_MAX training
 *    steps (a ten-term dot product, a log, an exp); per scanned slot, a few
 *    loads, and at most once per visit of its layer or weights snapshot a
 *    log and an exp (the score is cached in the slot).
 *  - Deterministic: the same sequence of calls from one thread makes the
 *    same choices; with one worker and one host thread the victims are
 *    those of `smoe sim --policy reuse` (tools/smoe/sim/sim_policy.c): both
 *    compute with evict_reuse_model.h.
 *
 * Visits. The simulator is given its layer steps; the ring finds them: a
 * demand prefetch of a layer other than the current one begins a visit of
 * that layer, unless the layer's latest visit began at most half a
 * cycle ago (an engine that prefetches layer l + 1 while still asking for
 * layer l then does not count extra visits of l). Claims, releases and
 * speculative or pre-warm prefetches never begin visits and teach nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "policy/evict_reuse.h"
#include "internal.h"

/* Score word: valid (1) | epoch (7) | visit (24) | q (float bits, 32). */
#define SCORE_VALID (1ull << 63)

/* relaxed throughout: statistics (see the top of evict_reuse.h) */
static double load_double(_Atomic uint64_t *p)
{
    uint64_t b = atomic_load_explicit(p, memory_order_relaxed);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static void store_double(_Atomic uint64_t *p, double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    atomic_store_explicit(p, b, memory_order_relaxed);
}

/* relaxed: statistics, paired with nothing (see the top of evict_reuse.h) */
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

/* The weights w (learning) or ws (the scans' snapshot) as doubles. */
static void load_weights(_Atomic uint64_t *w, double *out)
{
    for (int i = 0; i < SMOE__REUSE_W; i++)
        out[i] = load_double(&w[i]);
}

int smoe__reuse_init(struct smoe_stream *s)
{
    smoe__reuse *r = smoe__calloc(1, sizeof *r);
    if (!r)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the eviction state");
    r->layers = s->vault.layers;
    r->experts = s->vault.experts;
    r->nslots = s->ring.nslots;
    size_t nk = (size_t)r->layers * r->experts;
    r->f = smoe__calloc(nk ? nk : 1, sizeof *r->f);
    r->use = smoe__calloc(nk ? nk : 1, sizeof *r->use);
    r->visits = smoe__calloc(r->layers ? r->layers : 1, sizeof *r->visits);
    r->began = smoe__calloc(r->layers ? r->layers : 1, sizeof *r->began);
    r->score = smoe__calloc(r->nslots ? r->nslots : 1, sizeof *r->score);
    r->dpow = smoe__malloc(SMOE__REUSE_POW_N * sizeof *r->dpow);
    s->reuse = r;
    if (!r->f || !r->use || !r->visits || !r->began || !r->score || !r->dpow)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the eviction state "
                          "(%zu experts, %u slots)", nk, r->nslots);
    smoe__reuse_pow_fill(r->dpow, SMOE__REUSE_DECAY);
    for (int i = 0; i < SMOE__REUSE_W; i++) {
        store_double(&r->w[i], smoe__reuse_w_start()[i]);
        store_double(&r->ws[i], smoe__reuse_w_start()[i]);
    }
    store_double(&r->qv, SMOE__REUSE_QV_START);
    store_double(&r->period, r->layers ? r->layers : 1);
    STORE(r->cur, UINT32_MAX);
    return 0;
}

void smoe__reuse_free(smoe__reuse *r)
{
    if (!r)
        return;
    free(r->f);
    free(r->use);
    free(r->visits);
    free(r->began);
    free(r->score);
    free(r->dpow);
    free(r);
}

/* One example (smoe__reuse_learn_fn): a step of the weights, and every
 * SMOE__REUSE_EPOCH examples a snapshot of them for the scans. */
static void learn(void *u, unsigned h, double rate, int asked)
{
    smoe__reuse *r = u;
    double w[SMOE__REUSE_W];
    load_weights(r->w, w);
    smoe__reuse_learn(w, h, rate, asked, SMOE__REUSE_RATE);
    for (int i = 0; i < SMOE__REUSE_W; i++)
        store_double(&r->w[i], w[i]);
    /* relaxed: a count; the thread that completes an epoch snapshots */
    uint64_t n = atomic_fetch_add_explicit(&r->examples, 1, memory_order_relaxed) + 1;
    if (n % SMOE__REUSE_EPOCH == 0) {
        for (int i = 0; i < SMOE__REUSE_W; i++)
            STORE(r->ws[i], LOAD(r->w[i]));
        /* relaxed: a score tagged with the old epoch is recomputed */
        atomic_fetch_add_explicit(&r->epoch, 1, memory_order_relaxed);
    }
}

void smoe__reuse_visit(smoe__reuse *r, uint32_t layer)
{
    uint32_t cur = LOAD(r->cur);
    if (cur == layer)
        return;
    /* relaxed: one winner per change of layer; losers were asking for the
     * same visit */
    if (!atomic_compare_exchange_strong_explicit(&r->cur, &cur, layer, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    uint64_t step = LOAD(r->vclock) + 1;
    uint32_t seen = LOAD(r->visits[layer]);
    if (seen) {
        double gap = (double)(step - LOAD(r->began[layer]));
        double period = load_double(&r->period);
        if (2 * gap <= period)
            return; /* back to a layer whose visit is still under way */
        store_double(&r->period, smoe__reuse_period_next(period, gap));
    }
    STORE(r->vclock, step);
    STORE(r->visits[layer], seen + 1);
    STORE(r->began[layer], step);
}

void smoe__reuse_use(smoe__reuse *r, uint32_t key, uint32_t layer)
{
    uint32_t v = LOAD(r->visits[layer]);
    uint64_t u = LOAD(r->use[key]);
    uint32_t last = (uint32_t)(u >> 8);
    unsigned hist = (unsigned)(u & 0xffu);
    uint32_t gap = v - last;
    if (gap == 0)
        return; /* asked for twice in one visit */
    double f = load_double(&r->f[key]);
    if (hist) /* the visits it sat out since its last use, then this one */
        smoe__reuse_examples(r->dpow, SMOE__REUSE_DECAY, f, hist, last, gap,
                             SMOE__REUSE_TRAIN_MAX, learn, r);
    store_double(&r->f[key], smoe__reuse_count_after(r->dpow, f, gap));
    STORE(r->use[key], (uint64_t)v << 8 | smoe__reuse_hist_after(hist, gap));
}

/* q of key from its record as it stands, for the visit after `at`. */
static float q_of(smoe__reuse *r, uint32_t key, uint64_t u, uint32_t at, uint32_t gap)
{
    double ws[SMOE__REUSE_W];
    load_weights(r->ws, ws);
    return (float)smoe__reuse_q(ws, r->dpow, SMOE__REUSE_DECAY, load_double(&r->f[key]),
                                (unsigned)(u & 0xffu), gap, at);
}

/* Where key stands: the visit its q is for (*at), the visits since its
 * last use as of then (*gap), and its distance d (the return value). */
static double place(smoe__reuse *r, uint32_t key, uint64_t u, uint32_t *at, uint32_t *gap)
{
    const uint32_t l = key / r->experts;
    *at = LOAD(r->visits[l]); /* q is for the visit after this one */
    *gap = *at - (uint32_t)(u >> 8);
    if (l == LOAD(r->cur)) {
        /* its layer's visit is under way and it may still be asked for in
         * it: no distance, scored as it stood before the visit */
        *gap = *gap > 0 ? *gap - 1 : 0;
        (*at)--;
        return 0;
    }
    return smoe__reuse_distance((double)(LOAD(r->vclock) - LOAD(r->began[l])),
                                load_double(&r->period));
}

double smoe__reuse_keep(smoe__reuse *r, uint32_t v, uint32_t key, float *q)
{
    uint64_t u = LOAD(r->use[key]);
    uint32_t at, gap;
    double d = place(r, key, u, &at, &gap);
    /* relaxed: see learn() */
    uint32_t epoch = atomic_load_explicit(&r->epoch, memory_order_relaxed);
    uint64_t tag = SCORE_VALID | (uint64_t)(epoch & 0x7fu) << 56 | (uint64_t)(at & 0xffffffu) << 32;
    uint64_t sc = LOAD(r->score[v]);
    float qf;
    if ((sc & ~0xffffffffull) == tag) {
        uint32_t b = (uint32_t)sc;
        memcpy(&qf, &b, sizeof qf);
    } else {
        qf = q_of(r, key, u, at, gap);
        uint32_t b;
        memcpy(&b, &qf, sizeof b);
        STORE(r->score[v], tag | b);
        /* relaxed: statistics */
        atomic_fetch_add_explicit(&r->c_rescored, 1, memory_order_relaxed);
    }
    *q = qf;
    return smoe__reuse_keep_value((double)qf, SMOE__REUSE_LAMBDA, load_double(&r->qv), d);
}

double smoe__reuse_keep_key(smoe__reuse *r, uint32_t key, float *q)
{
    uint64_t u = LOAD(r->use[key]);
    if ((u & 0xffu) == 0) {
        /* never asked for: nothing to judge it by (a cold stream, or an
         * engine whose predictor knows more than the history) */
        *q = 1.0f;
        return 0.0;
    }
    uint32_t at, gap;
    double d = place(r, key, u, &at, &gap);
    *q = q_of(r, key, u, at, gap);
    return smoe__reuse_keep_value((double)*q, SMOE__REUSE_LAMBDA, load_double(&r->qv), d);
}

double smoe__reuse_keep_q(smoe__reuse *r, uint32_t key, float q)
{
    uint32_t at, gap;
    double d = place(r, key, LOAD(r->use[key]), &at, &gap);
    return smoe__reuse_keep_value((double)q, SMOE__REUSE_LAMBDA, load_double(&r->qv), d);
}

void smoe__reuse_victim(smoe__reuse *r, float q)
{
    store_double(&r->qv, smoe__reuse_qv_next(load_double(&r->qv), (double)q));
}
