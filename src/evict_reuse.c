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
 *  - Bounded work: per demand prefetch, at most SMOE__REUSE_TRAIN training
 *    steps (a ten-term dot product, a log, an exp); per scanned slot, a few
 *    loads, and at most once per visit of its layer or weights snapshot a
 *    log and an exp (the score is cached in the slot).
 *  - Deterministic: the same sequence of calls from one thread makes the
 *    same choices; with one worker and one host thread the victims are
 *    those of `smoe sim --policy reuse` (tools/smoe/sim/sim_policy.c), which uses
 *    the same arithmetic.
 *
 * Visits. The simulator is given its layer steps; the ring finds them: a
 * demand prefetch of a layer other than the current one begins a visit of
 * that layer, unless the layer's latest visit began at most half a
 * cycle ago (an engine that prefetches layer l + 1 while still asking for
 * layer l then does not count extra visits of l). Claims, releases and
 * speculative or pre-warm prefetches never begin visits and teach nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "evict_reuse.h"
#include "internal.h"

#define HIST_BITS 8
#define RATE_EPS 0.01   /* inside the log: rare experts keep a finite logit */
#define WEIGHT_MAX 16.0 /* weights are clamped to +-this */
#define POW_N 4096      /* decay^n table; beyond it the count is 0 */
#define EPOCH 1024      /* training examples between two snapshots */
#define QV_SPAN 64.0    /* victims in the moving average of their q */
#define DECAY 0.98      /* count decay per visit of the expert's layer */
#define LAMBDA 1.0      /* weight of the distance, in victims' q */
#define RATE 0.003      /* learning rate */
#define TRAIN_MAX 4u    /* training examples per demand request, at most */

/* Where the weights start: what they learned on the first halves of the
 * two gpt-oss-20b traces, rounded (docs/eviction.md, "Parameters"). */
static const double w_start[SMOE__REUSE_W] = {0.1,  1.2,   1.05,  0.15, 0.25,
                                              0.05, -0.08, -0.16, 0.09, -0.01};

/* Score word: valid (1) | epoch (7) | visit (24) | q (float bits, 32). */
#define SCORE_VALID (1ull << 63)

/* relaxed throughout: statistics (see the top of evict_reuse.h) */
static double ld(_Atomic uint64_t *p)
{
    uint64_t b = atomic_load_explicit(p, memory_order_relaxed);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static void st(_Atomic uint64_t *p, double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    atomic_store_explicit(p, b, memory_order_relaxed);
}

/* relaxed: statistics, paired with nothing (see the top of evict_reuse.h) */
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

int smoe__reuse_init(struct smoe_stream *s)
{
    smoe__reuse *r = calloc(1, sizeof *r);
    if (!r)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the eviction state");
    r->layers = s->vault.layers;
    r->experts = s->vault.experts;
    r->nslots = s->ring.nslots;
    size_t nk = (size_t)r->layers * r->experts;
    r->f = calloc(nk ? nk : 1, sizeof *r->f);
    r->use = calloc(nk ? nk : 1, sizeof *r->use);
    r->visits = calloc(r->layers ? r->layers : 1, sizeof *r->visits);
    r->began = calloc(r->layers ? r->layers : 1, sizeof *r->began);
    r->score = calloc(r->nslots ? r->nslots : 1, sizeof *r->score);
    r->dpow = malloc(POW_N * sizeof *r->dpow);
    s->reuse = r;
    if (!r->f || !r->use || !r->visits || !r->began || !r->score || !r->dpow)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the eviction state "
                          "(%zu experts, %u slots)", nk, r->nslots);
    /* Repeated products, as the simulator builds its table. */
    r->dpow[0] = 1;
    for (size_t i = 1; i < POW_N; i++)
        r->dpow[i] = r->dpow[i - 1] * DECAY;
    for (int i = 0; i < SMOE__REUSE_W; i++) {
        st(&r->w[i], w_start[i]);
        st(&r->ws[i], w_start[i]);
    }
    st(&r->qv, 0.5);
    st(&r->period, r->layers ? r->layers : 1);
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

static double decay_pow(const smoe__reuse *r, uint32_t n)
{
    return n < POW_N ? r->dpow[n] : 0.0;
}

/* Logit of reuse under weights w (double bits) for history h, rate rt. */
static double logit(_Atomic uint64_t *w, unsigned h, double rt)
{
    double z = ld(&w[0]) + ld(&w[1]) * log(rt + RATE_EPS);
    for (int b = 0; b < HIST_BITS; b++)
        if (h & (1u << b))
            z += ld(&w[2 + b]);
    return z;
}

/* The count f as a rate per visit, corrected while the layer is young
 * (`visits` visits: a count cannot have built up yet). */
static double rate_of(const smoe__reuse *r, double f, uint32_t visits)
{
    double rt = f * (1 - DECAY);
    double fill = 1.0 - decay_pow(r, visits);
    return visits && fill > 0 ? rt / fill : rt;
}

/* One logistic-regression step: an expert with history h and rate rt was
 * (y 1) or was not (y 0) asked for at a visit of its layer. */
static void learn(smoe__reuse *r, unsigned h, double rt, int y)
{
    double z = logit(r->w, h, rt);
    double e = RATE * ((double)y - 1.0 / (1.0 + exp(-z)));
    double x[SMOE__REUSE_W];
    x[0] = 1;
    x[1] = log(rt + RATE_EPS);
    for (int b = 0; b < HIST_BITS; b++)
        x[2 + b] = (h & (1u << b)) ? 1 : 0;
    for (int i = 0; i < SMOE__REUSE_W; i++) {
        double v = ld(&r->w[i]) + e * x[i];
        st(&r->w[i], v > WEIGHT_MAX ? WEIGHT_MAX : v < -WEIGHT_MAX ? -WEIGHT_MAX : v);
    }
    /* relaxed: a count; the thread that completes an epoch snapshots */
    uint64_t n = atomic_fetch_add_explicit(&r->examples, 1, memory_order_relaxed) + 1;
    if (n % EPOCH == 0) {
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
        double period = ld(&r->period);
        if (2 * gap <= period)
            return; /* back to a layer whose visit is still under way */
        st(&r->period, period + (gap - period) / 16.0);
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
    double f = ld(&r->f[key]);
    if (hist) {
        /* the visits it sat out since its last use, then this one */
        unsigned h = hist;
        double ff = f;
        for (uint32_t j = 1; j <= gap && j <= TRAIN_MAX; j++) {
            /* visit last + j, as it stood before: j - 1 visits sat out */
            learn(r, h, rate_of(r, ff, last + j - 1), j == gap);
            h = (h << 1) & 0xffu;
            ff *= DECAY;
        }
    }
    st(&r->f[key], f * decay_pow(r, gap) + 1.0);
    unsigned nh = (gap >= HIST_BITS ? 0u : (hist << gap) & 0xffu) | 1u;
    STORE(r->use[key], (uint64_t)v << 8 | nh);
}

/* q of key from its record as it stands, for the visit after `at`. */
static float q_of(smoe__reuse *r, uint32_t key, uint64_t u, uint32_t at, uint32_t gap)
{
    unsigned h = gap >= HIST_BITS ? 0u : ((unsigned)(u & 0xffu) << gap) & 0xffu;
    double rt = rate_of(r, ld(&r->f[key]) * decay_pow(r, gap), at);
    return (float)(1.0 / (1.0 + exp(-logit(r->ws, h, rt))));
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
    double left = 1.0 - (double)(LOAD(r->vclock) - LOAD(r->began[l])) / ld(&r->period);
    return left < 0 ? 0 : left > 1 ? 1 : left;
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
    return (double)qf - LAMBDA * ld(&r->qv) * d;
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
    return (double)*q - LAMBDA * ld(&r->qv) * d;
}

void smoe__reuse_victim(smoe__reuse *r, float q)
{
    double qv = ld(&r->qv);
    st(&r->qv, qv + ((double)q - qv) / QV_SPAN);
}
