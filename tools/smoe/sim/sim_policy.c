/*
 * sim_policy.c - eviction policies replayed offline, layer step by step.
 *
 * State, in the shape the ring can keep (a slot word already holds its
 * key, hence layer and expert):
 *   per slot   key, tick (last use), pin (the step that asked for it)
 *   per key    count f (decayed per visit of its layer), last (the visit of
 *              its layer at its last use, 0: never), hist (bit i: used at
 *              the i-th visit before and including that last use)
 *   per layer  visits so far, the step its latest visit began
 *   global     tick, step, current layer, layer cycle length (EMA of the
 *              steps between two visits of a layer), REUSE's weights
 *
 * A visit is one step of a layer: in decode, one token at that layer.
 *
 * Policies (the victim is the unpinned entry with the lowest keep value;
 * ties go to the smallest tick, so the choice is unique and every policy
 * is deterministic):
 *   lru    keep = tick.
 *   lfu    keep = f decayed to now (decay per visit, 0.98): decayed
 *          popularity with admission, in the form a ring without bypass
 *          can run (a newcomer that is not stronger than the weakest
 *          retained entry is itself the next to go).
 *   layer  keep = -distance: the entry whose layer comes round last goes.
 *   reuse  keep = q - lambda * qv * distance, where q is a learned chance
 *          that the key is asked for at the next visit of its layer,
 *          distance in [0, 1] is how much of a layer cycle remains until
 *          that visit, and qv, the moving average of the victims' q, is
 *          what holding a slot for a cycle is worth at the margin (a
 *          Lagrange price: high in a tight cache or a loop, low in a
 *          roomy one); lambda scales it (1).
 *          q = 1 / (1 + exp(-z)), z = w . (1, ln(r + 0.01), h0 .. h7): r is
 *          the key's rate per visit (its decayed count times 1 - decay,
 *          over 1 - decay^visits while the layer is young) and h its
 *          history as it will stand at the next visit.
 *          The weights learn online by logistic regression: when a key is
 *          asked for after g visits, the first few of the g visits it sat
 *          out become examples (missed, missed, ..., asked), so nothing is
 *          done for keys that are not asked for. Scans score with a
 *          snapshot of the weights taken every EPOCH examples, so an
 *          entry's q can be kept in its slot until its layer is visited,
 *          the key is used, or the snapshot changes.
 *          Keys of the current layer that this step has not asked for yet
 *          may still be asked for: distance 0 and the history as it stood
 *          before the visit.
 *
 * Invariants: s_key[i] == k iff k_slot[k] == i; an entry pinned by the
 * current step is never a victim.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_policy.h"

#define NONE SIMP_NONE
#define HIST_BITS 8
#define RATE_EPS 0.01    /* inside the log: rare keys keep a finite logit */
#define WEIGHT_MAX 16.0  /* weights are clamped to +-this */
#define POW_N 4096       /* decay^n table; beyond it the count is 0 */
#define EPOCH 1024       /* training examples between two snapshots of the weights */
#define QV_SPAN 64.0     /* victims in the moving average of their q */

static const char *const names[SIMP_N_POLICIES] = {"lru", "lfu", "layer", "reuse"};

/* Where REUSE's weights start: rounded from what they learned on the first
 * halves of the two gpt-oss-20b traces (docs/eviction.md). */
static const double w_start[SIMP_REUSE_W] = {0.1,  1.2,   1.05,  0.15, 0.25,
                                              0.05, -0.08, -0.16, 0.09, -0.01};

const char *simp_policy_name(simp_policy policy)
{
    return (unsigned)policy < SIMP_N_POLICIES ? names[policy] : "?";
}

int simp_policy_from_name(const char *name)
{
    for (int i = 0; i < SIMP_N_POLICIES; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

void simp_params_default(simp_params *p, simp_policy policy)
{
    memset(p, 0, sizeof *p);
    p->policy = policy;
    p->decay = 0.98;
    p->lambda = 1.0;
    p->rate = 0.003;
    p->train_max = 4;
}

/* ---- steps from a trace ---------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void shuffle(size_t *v, size_t n, uint64_t *rng)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng_next(rng) % i);
        size_t x = v[i - 1];
        v[i - 1] = v[j];
        v[j] = x;
    }
}

void simp_steps_free(simp_steps *st)
{
    free(st->layer);
    free(st->off);
    free(st->keys);
    free(st->one_off);
    free(st->one_keys);
    memset(st, 0, sizeof *st);
}

/* n one-shot reads after each step: random keys, none of the step's own. */
static int add_one_shots(simp_steps *st, uint32_t n, uint64_t seed)
{
    size_t nk = (size_t)st->layers * st->experts;
    if (n > nk)
        n = (uint32_t)nk;
    st->one_off = malloc((st->n_steps + 1) * sizeof *st->one_off);
    size_t total = st->n_steps * n;
    st->one_keys = malloc((total ? total : 1) * sizeof *st->one_keys);
    if (!st->one_off || !st->one_keys) {
        simp_steps_free(st);
        return -1;
    }
    uint64_t rng = seed ? seed : 1;
    size_t m = 0;
    st->one_off[0] = 0;
    for (size_t s = 0; s < st->n_steps; s++) {
        uint32_t step_n = (uint32_t)(st->off[s + 1] - st->off[s]);
        uint32_t want = n < nk - step_n ? n : (uint32_t)(nk - step_n);
        for (uint32_t i = 0; i < want;) {
            uint32_t k = (uint32_t)(rng_next(&rng) % nk);
            int dup = 0;
            for (size_t j = st->off[s]; j < st->off[s + 1] && !dup; j++)
                dup = st->keys[j] == k;
            for (size_t j = st->one_off[s]; j < m && !dup; j++)
                dup = st->one_keys[j] == k;
            if (dup)
                continue;
            st->one_keys[m++] = k;
            i++;
        }
        st->one_off[s + 1] = m;
    }
    return 0;
}

int simp_steps_from_trace(const tool_trace *t, const simp_shape *shape, simp_steps *out)
{
    memset(out, 0, sizeof *out);
    out->layers = t->layers;
    out->experts = t->experts;
    size_t b = shape->tok_begin, e = shape->tok_end ? shape->tok_end : t->n_tokens;
    if (e > t->n_tokens)
        e = t->n_tokens;
    if (b > e)
        b = e;
    size_t nt = e - b;
    uint32_t group = shape->group > 1 ? shape->group : 1;
    size_t nk = (size_t)t->layers * t->experts;
    size_t max_steps = nt * t->layers;
    size_t max_keys = nt ? t->row_off[t->tok_row[e]] - t->row_off[t->tok_row[b]] : 0;
    size_t *order = malloc((nt ? nt : 1) * sizeof *order);
    size_t *lorder = malloc((t->layers ? t->layers : 1) * sizeof *lorder);
    /* per (token in the group, layer): its row, or SIZE_MAX */
    size_t n_row_of = (size_t)group * t->layers;
    size_t *row_of = malloc((n_row_of ? n_row_of : 1) * sizeof *row_of);
    uint32_t *mark = calloc(nk ? nk : 1, sizeof *mark);
    out->layer = malloc((max_steps ? max_steps : 1) * sizeof *out->layer);
    out->off = malloc((max_steps + 1) * sizeof *out->off);
    out->keys = malloc((max_keys ? max_keys : 1) * sizeof *out->keys);
    if (!order || !lorder || !row_of || !mark || !out->layer || !out->off || !out->keys) {
        free(order);
        free(lorder);
        free(row_of);
        free(mark);
        simp_steps_free(out);
        return -1;
    }
    for (size_t i = 0; i < nt; i++)
        order[i] = b + i;
    uint64_t trng = shape->shuffle_tokens, lrng = shape->shuffle_layers;
    if (trng)
        shuffle(order, nt, &trng);
    size_t ns = 0, nkeys = 0;
    uint32_t stamp = 0;
    out->off[0] = 0;
    for (size_t g0 = 0; g0 < nt; g0 += group) {
        size_t gn = nt - g0 < group ? nt - g0 : group;
        for (size_t i = 0; i < gn * t->layers; i++)
            row_of[i] = SIZE_MAX;
        for (size_t g = 0; g < gn; g++) {
            size_t tok = order[g0 + g];
            for (size_t r = t->tok_row[tok]; r < t->tok_row[tok + 1]; r++)
                row_of[g * t->layers + t->row_layer[r]] = r;
        }
        for (uint32_t l = 0; l < t->layers; l++)
            lorder[l] = l;
        if (lrng)
            shuffle(lorder, t->layers, &lrng);
        for (uint32_t li = 0; li < t->layers; li++) {
            uint32_t l = (uint32_t)lorder[li];
            size_t start = nkeys;
            stamp++;
            for (size_t g = 0; g < gn; g++) {
                size_t r = row_of[g * t->layers + l];
                if (r == SIZE_MAX)
                    continue;
                for (uint32_t i = t->row_off[r]; i < t->row_off[r + 1]; i++) {
                    uint32_t k = l * t->experts + t->ids[i];
                    if (mark[k] != stamp) {
                        mark[k] = stamp;
                        out->keys[nkeys++] = k;
                    }
                }
            }
            if (nkeys == start)
                continue;
            out->layer[ns] = l;
            out->off[++ns] = nkeys;
        }
    }
    out->n_steps = ns;
    free(order);
    free(lorder);
    free(row_of);
    free(mark);
    if (shape->one_shot && nk)
        return add_one_shots(out, shape->one_shot, shape->one_shot_seed);
    return 0;
}

/* ---- the replay ----------------------------------------------------- */

typedef struct eng {
    const simp_params *p;
    uint32_t E, slots;
    /* per slot */
    uint32_t *s_key;
    uint64_t *s_tick;
    uint64_t *s_pin;
    float *s_q;       /* REUSE: the entry's q, as computed for (s_qv, s_qe) */
    uint32_t *s_qv;   /* the layer visit it stands before (NONE: not computed) */
    uint32_t *s_qe;   /* the weights snapshot it was computed with */
    /* per key */
    uint32_t *k_slot;
    double *k_f;
    uint32_t *k_last;
    uint8_t *k_hist;
    /* per layer */
    uint32_t *l_visits;
    uint64_t *l_step;
    /* global */
    uint64_t tick, step;
    uint32_t cur;
    double period;
    double w[SIMP_REUSE_W];  /* learning */
    double ws[SIMP_REUSE_W]; /* scoring: snapshot of w */
    uint32_t epoch, trained; /* snapshots taken, examples since the last */
    double qv;               /* victims' q, moving average: the price of a cycle */
    double *dpow; /* decay^n, n < POW_N */
} eng;

static double decay_pow(const eng *g, uint32_t n)
{
    return n < POW_N ? g->dpow[n] : 0.0;
}

/* Logit of reuse under weights w for history h and per-visit rate r. */
static double reuse_logit(const eng *g, const double *w, unsigned h, double r)
{
    double z = w[0] + w[1] * log(r + RATE_EPS);
    if (!g->p->no_history)
        for (int b = 0; b < HIST_BITS; b++)
            if (h & (1u << b))
                z += w[2 + b];
    return z;
}

/* Rate per visit of a count f that has decayed over `visits` visits of its
 * layer: f (1 - decay), over 1 - decay^visits while that is short of 1
 * (a young layer's counts have not built up yet). */
static double rate_of(const eng *g, double f, uint32_t visits)
{
    double r = f * (1 - g->p->decay);
    double fill = 1.0 - decay_pow(g, visits);
    return visits && fill > 0 ? r / fill : r;
}

/* One logistic-regression step: the key with history h and rate r was
 * (y = 1) or was not (y = 0) asked for at a visit. */
static void learn(eng *g, unsigned h, double r, int y)
{
    double z = reuse_logit(g, g->w, h, r);
    double e = g->p->rate * ((double)y - 1.0 / (1.0 + exp(-z)));
    double x[SIMP_REUSE_W];
    x[0] = 1;
    x[1] = log(r + RATE_EPS);
    for (int b = 0; b < HIST_BITS; b++)
        x[2 + b] = !g->p->no_history && (h & (1u << b)) ? 1 : 0;
    for (int i = 0; i < SIMP_REUSE_W; i++) {
        double v = g->w[i] + e * x[i];
        g->w[i] = v > WEIGHT_MAX ? WEIGHT_MAX : v < -WEIGHT_MAX ? -WEIGHT_MAX : v;
    }
    if (++g->trained >= EPOCH) {
        memcpy(g->ws, g->w, sizeof g->ws);
        g->epoch++;
        g->trained = 0;
    }
}

/* Key k of layer l is asked for at its layer's current visit. */
static void note_use(eng *g, uint32_t k, uint32_t l)
{
    uint32_t v = g->l_visits[l];
    uint32_t gap = v - g->k_last[k];
    if (gap == 0)
        return; /* asked for twice in one visit */
    if (g->p->policy == SIMP_REUSE && g->p->rate > 0 && g->k_last[k] != 0) {
        /* the visits it sat out since its last use, then this one */
        unsigned h = g->k_hist[k];
        double f = g->k_f[k];
        for (uint32_t j = 1; j <= gap && j <= g->p->train_max; j++) {
            /* visit last + j, as it stood before: j - 1 visits sat out */
            learn(g, h, rate_of(g, f, g->k_last[k] + j - 1), j == gap);
            h = (h << 1) & 0xffu;
            f *= g->p->decay;
        }
    }
    g->k_f[k] = g->k_f[k] * decay_pow(g, gap) + 1.0;
    g->k_hist[k] = (uint8_t)((gap >= HIST_BITS ? 0u : (unsigned)g->k_hist[k] << gap) | 1u);
    g->k_last[k] = v;
}

/* How much of a layer cycle remains until layer l's next visit, in [0, 1].
 * The current layer is 0 (its step is under way). */
static double distance(const eng *g, uint32_t l)
{
    if (l == g->cur)
        return 0;
    double d = 1.0 - (double)(g->step - g->l_step[l]) / g->period;
    return d < 0 ? 0 : d > 1 ? 1 : d;
}

/* Keep value of the entry in slot i: the victim has the lowest. */
static double keep_value(eng *g, uint32_t i)
{
    uint32_t k = g->s_key[i], l = k / g->E;
    uint32_t gap = g->l_visits[l] - g->k_last[k];
    switch (g->p->policy) {
    case SIMP_LFU:
        return g->k_f[k] * decay_pow(g, gap);
    case SIMP_LAYER:
        return -distance(g, l);
    case SIMP_REUSE: {
        double d;
        uint32_t at = g->l_visits[l]; /* q is for the visit after this one */
        if (l == g->cur && !g->p->no_current) {
            /* not asked for yet in this step: as it stood before the visit */
            d = 0;
            gap = gap > 0 ? gap - 1 : 0;
            at--;
        } else {
            d = l == g->cur ? 1.0 : distance(g, l);
        }
        /* q changes only when the key is used, its layer visited or the
         * snapshot renewed: most scans read it from the slot. */
        if (g->s_qv[i] != at || g->s_qe[i] != g->epoch) {
            unsigned h = gap >= HIST_BITS ? 0u : ((unsigned)g->k_hist[k] << gap) & 0xffu;
            double r = rate_of(g, g->k_f[k] * decay_pow(g, gap), at);
            g->s_q[i] = (float)(1.0 / (1.0 + exp(-reuse_logit(g, g->ws, h, r))));
            g->s_qv[i] = at;
            g->s_qe[i] = g->epoch;
        }
        return g->s_q[i] - g->p->lambda * g->qv * d;
    }
    default:
        return (double)g->s_tick[i];
    }
}

/* The victim: one scan over the entries. NONE when all are pinned. */
static uint32_t pick(eng *g, uint64_t *scanned)
{
    uint32_t best = NONE;
    double bv = 0;
    uint64_t bt = 0;
    for (uint32_t i = 0; i < g->slots; i++) {
        if (g->s_pin[i] == g->step)
            continue;
        (*scanned)++;
        double v = keep_value(g, i);
        uint64_t t = g->s_tick[i];
        if (best == NONE || v < bv || (v == bv && t < bt)) {
            best = i;
            bv = v;
            bt = t;
        }
    }
    if (best != NONE && g->p->policy == SIMP_REUSE)
        g->qv += (g->s_q[best] - g->qv) / QV_SPAN;
    return best;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void eng_free(eng *g)
{
    free(g->s_key);
    free(g->s_tick);
    free(g->s_pin);
    free(g->s_q);
    free(g->s_qv);
    free(g->s_qe);
    free(g->k_slot);
    free(g->k_f);
    free(g->k_last);
    free(g->k_hist);
    free(g->l_visits);
    free(g->l_step);
    free(g->dpow);
}

int simp_run(const simp_steps *st, uint32_t slots, const simp_params *p, sim_result *out,
             uint32_t *victims, simp_report *report)
{
    memset(out, 0, sizeof *out);
    simp_report rep;
    memset(&rep, 0, sizeof rep);
    eng g;
    memset(&g, 0, sizeof g);
    g.p = p;
    g.E = st->experts;
    g.slots = slots;
    size_t nk = (size_t)st->layers * st->experts;
    g.s_key = malloc((slots ? slots : 1) * sizeof *g.s_key);
    g.s_tick = calloc(slots ? slots : 1, sizeof *g.s_tick);
    g.s_pin = calloc(slots ? slots : 1, sizeof *g.s_pin);
    g.s_q = calloc(slots ? slots : 1, sizeof *g.s_q);
    g.s_qv = calloc(slots ? slots : 1, sizeof *g.s_qv);
    g.s_qe = calloc(slots ? slots : 1, sizeof *g.s_qe);
    g.k_slot = malloc((nk ? nk : 1) * sizeof *g.k_slot);
    g.k_f = calloc(nk ? nk : 1, sizeof *g.k_f);
    g.k_last = calloc(nk ? nk : 1, sizeof *g.k_last);
    g.k_hist = calloc(nk ? nk : 1, 1);
    g.l_visits = calloc(st->layers ? st->layers : 1, sizeof *g.l_visits);
    g.l_step = calloc(st->layers ? st->layers : 1, sizeof *g.l_step);
    g.dpow = malloc(POW_N * sizeof *g.dpow);
    if (!g.s_key || !g.s_tick || !g.s_pin || !g.s_q || !g.s_qv || !g.s_qe || !g.k_slot ||
        !g.k_f || !g.k_last || !g.k_hist || !g.l_visits || !g.l_step || !g.dpow) {
        eng_free(&g);
        return -1;
    }
    for (size_t i = 0; i < nk; i++)
        g.k_slot[i] = NONE;
    for (uint32_t i = 0; i < slots; i++)
        g.s_qv[i] = NONE;
    g.dpow[0] = 1;
    for (size_t i = 1; i < POW_N; i++)
        g.dpow[i] = g.dpow[i - 1] * p->decay;
    memcpy(g.w, p->weights ? p->weights : w_start, sizeof g.w);
    memcpy(g.ws, g.w, sizeof g.ws);
    g.qv = 0.5;
    g.period = st->layers ? st->layers : 1;
    uint32_t used = 0;

    size_t r = 0;
    for (size_t s = 0; s < st->n_steps; s++) {
        uint32_t l = st->layer[s];
        g.step = s + 1; /* pins of 0 never match */
        if (g.l_visits[l])
            g.period += ((double)(g.step - g.l_step[l]) - g.period) / 16.0;
        g.l_visits[l]++;
        g.l_step[l] = g.step;
        g.cur = l;
        for (size_t j = st->off[s]; j < st->off[s + 1]; j++, r++) {
            uint32_t k = st->keys[j];
            uint32_t i = g.k_slot[k];
            out->requests++;
            if (victims)
                victims[r] = NONE;
            if (i != NONE) {
                out->hits++;
            } else {
                out->misses++;
                if (used < slots) {
                    i = used++;
                } else {
                    uint64_t t0 = now_ns();
                    i = pick(&g, &rep.scanned);
                    rep.scan_ns += now_ns() - t0;
                    if (i == NONE) {
                        rep.no_victim++;
                        note_use(&g, k, l);
                        continue;
                    }
                    rep.evictions++;
                    g.k_slot[g.s_key[i]] = NONE;
                    if (victims)
                        victims[r] = g.s_key[i];
                }
                g.s_key[i] = k;
                g.k_slot[k] = i;
            }
            g.s_tick[i] = ++g.tick;
            g.s_pin[i] = g.step;
            g.s_qv[i] = NONE; /* its history changes: q is stale */
            note_use(&g, k, l);
        }
        if (!st->one_off)
            continue;
        /* One-shot reads: a slot each when not cached (the ring touches a
         * cached one), no pin, no count, nothing learned. */
        for (size_t j = st->one_off[s]; j < st->one_off[s + 1]; j++) {
            uint32_t k = st->one_keys[j];
            uint32_t i = g.k_slot[k];
            if (i == NONE) {
                if (used < slots) {
                    i = used++;
                } else {
                    uint64_t t0 = now_ns();
                    i = pick(&g, &rep.scanned);
                    rep.scan_ns += now_ns() - t0;
                    if (i == NONE)
                        continue;
                    rep.evictions++;
                    g.k_slot[g.s_key[i]] = NONE;
                }
                g.s_key[i] = k;
                g.k_slot[k] = i;
                g.s_qv[i] = NONE;
            }
            g.s_tick[i] = ++g.tick;
        }
    }
    memcpy(rep.weights, g.w, sizeof rep.weights);
    if (report)
        *report = rep;
    eng_free(&g);
    return 0;
}
