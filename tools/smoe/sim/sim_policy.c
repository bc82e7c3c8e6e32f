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
 *          snapshot of the weights taken every SMOE__REUSE_EPOCH examples, so an
 *          entry's q can be kept in its slot until its layer is visited,
 *          the key is used, or the snapshot changes.
 *          Keys of the current layer that this step has not asked for yet
 *          may still be asked for: distance 0 and the history as it stood
 *          before the visit.
 *
 * Invariants: s_key[i] == k iff k_slot[k] == i; an entry pinned by the
 * current step is never a victim.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_policy.h"
#include "synth.h"
#include "tool.h"

#define NONE SIMP_NONE

static const char *const names[SIMP_N_POLICIES] = {"lru", "lfu", "layer", "reuse"};

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
    p->decay = SMOE__REUSE_DECAY;
    p->lambda = SMOE__REUSE_LAMBDA;
    p->rate = SMOE__REUSE_RATE;
    p->train_max = SMOE__REUSE_TRAIN_MAX;
}

/* ---- steps from a trace ---------------------------------------------- */

static void shuffle(size_t *v, size_t n, uint64_t *rng)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(synth_splitmix64(rng) % i);
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
            uint32_t k = (uint32_t)(synth_splitmix64(&rng) % nk);
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

/* Scratch of simp_steps_from_trace. */
typedef struct cutter {
    const tool_trace *t;
    size_t *order;     /* the tokens in replay order */
    size_t *lorder;    /* the layers in the order a group walks them */
    size_t *row_of;    /* per (token in the group, layer): its row, or SIZE_MAX */
    uint32_t *mark;    /* per key: the step that took it last */
    uint32_t stamp;
} cutter;

static void cutter_free(cutter *c)
{
    free(c->order);
    free(c->lorder);
    free(c->row_of);
    free(c->mark);
}

/* One group of gn tokens (from order[g0]): a step per layer it asks of,
 * the union of its tokens' experts, in the order the layers are walked. */
static void cut_group(cutter *c, size_t g0, size_t gn, uint64_t *lrng, simp_steps *out,
                      size_t *ns, size_t *nkeys)
{
    const tool_trace *t = c->t;
    for (size_t i = 0; i < gn * t->layers; i++)
        c->row_of[i] = SIZE_MAX;
    for (size_t g = 0; g < gn; g++) {
        size_t tok = c->order[g0 + g];
        for (size_t r = t->tok_row[tok]; r < t->tok_row[tok + 1]; r++)
            c->row_of[g * t->layers + t->row_layer[r]] = r;
    }
    for (uint32_t l = 0; l < t->layers; l++)
        c->lorder[l] = l;
    if (*lrng)
        shuffle(c->lorder, t->layers, lrng);
    for (uint32_t li = 0; li < t->layers; li++) {
        uint32_t l = (uint32_t)c->lorder[li];
        size_t start = *nkeys;
        c->stamp++;
        for (size_t g = 0; g < gn; g++) {
            size_t r = c->row_of[g * t->layers + l];
            if (r == SIZE_MAX)
                continue;
            for (uint32_t i = t->row_off[r]; i < t->row_off[r + 1]; i++) {
                uint32_t k = l * t->experts + t->ids[i];
                if (c->mark[k] != c->stamp) {
                    c->mark[k] = c->stamp;
                    out->keys[(*nkeys)++] = k;
                }
            }
        }
        if (*nkeys == start)
            continue;
        out->layer[*ns] = l;
        out->off[++*ns] = *nkeys;
    }
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
    size_t nt = e - b, nk = (size_t)t->layers * t->experts;
    uint32_t group = shape->group > 1 ? shape->group : 1;
    size_t max_steps = nt * t->layers;
    size_t max_keys = nt ? t->row_off[t->tok_row[e]] - t->row_off[t->tok_row[b]] : 0;
    size_t n_row_of = (size_t)group * t->layers;
    cutter c = {t, malloc((nt ? nt : 1) * sizeof *c.order),
                malloc((t->layers ? t->layers : 1) * sizeof *c.lorder),
                malloc((n_row_of ? n_row_of : 1) * sizeof *c.row_of),
                calloc(nk ? nk : 1, sizeof *c.mark), 0};
    out->layer = malloc((max_steps ? max_steps : 1) * sizeof *out->layer);
    out->off = malloc((max_steps + 1) * sizeof *out->off);
    out->keys = malloc((max_keys ? max_keys : 1) * sizeof *out->keys);
    if (!c.order || !c.lorder || !c.row_of || !c.mark || !out->layer || !out->off ||
        !out->keys) {
        cutter_free(&c);
        simp_steps_free(out);
        return -1;
    }
    for (size_t i = 0; i < nt; i++)
        c.order[i] = b + i;
    uint64_t trng = shape->shuffle_tokens, lrng = shape->shuffle_layers;
    if (trng)
        shuffle(c.order, nt, &trng);
    size_t ns = 0, nkeys = 0;
    out->off[0] = 0;
    for (size_t g0 = 0; g0 < nt; g0 += group)
        cut_group(&c, g0, nt - g0 < group ? nt - g0 : group, &lrng, out, &ns, &nkeys);
    out->n_steps = ns;
    cutter_free(&c);
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
    uint32_t used;           /* entries taken so far, in order */
    uint64_t tick, step;
    uint32_t cur;
    double period;
    double w[SMOE__REUSE_W];  /* learning */
    double ws[SMOE__REUSE_W]; /* scoring: snapshot of w */
    uint32_t epoch, trained; /* snapshots taken, examples since the last */
    double qv;               /* victims' q, moving average: the price of a cycle */
    double *dpow; /* decay^n, n < SMOE__REUSE_POW_N */
} eng;

static double decay_pow(const eng *g, uint32_t n)
{
    return smoe__reuse_pow(g->dpow, n);
}

/* What REUSE sees of a history: none at all with --no-history. */
static unsigned hist_seen(const eng *g, unsigned h)
{
    return g->p->no_history ? 0u : h;
}

/* One example (smoe__reuse_learn_fn): a step of the weights, and every
 * SMOE__REUSE_EPOCH examples a snapshot of them for the scans. */
static void learn(void *u, unsigned h, double r, int asked)
{
    eng *g = u;
    smoe__reuse_learn(g->w, h, r, asked, g->p->rate);
    if (++g->trained >= SMOE__REUSE_EPOCH) {
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
    if (g->p->policy == SIMP_REUSE && g->p->rate > 0 && g->k_last[k] != 0)
        smoe__reuse_examples(g->dpow, g->p->decay, g->k_f[k], hist_seen(g, g->k_hist[k]),
                             g->k_last[k], gap, g->p->train_max, learn, g);
    g->k_f[k] = smoe__reuse_count_after(g->dpow, g->k_f[k], gap);
    g->k_hist[k] = (uint8_t)smoe__reuse_hist_after(g->k_hist[k], gap);
    g->k_last[k] = v;
}

/* How much of a layer cycle remains until layer l's next visit, in [0, 1].
 * The current layer is 0 (its step is under way). */
static double distance(const eng *g, uint32_t l)
{
    if (l == g->cur)
        return 0;
    return smoe__reuse_distance((double)(g->step - g->l_step[l]), g->period);
}

/* REUSE's keep value of the entry in slot i, holding key k of layer l. */
static double reuse_keep(eng *g, uint32_t i, uint32_t k, uint32_t l, uint32_t gap)
{
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
        g->s_q[i] = (float)smoe__reuse_q(g->ws, g->dpow, g->p->decay, g->k_f[k],
                                         hist_seen(g, g->k_hist[k]), gap, at);
        g->s_qv[i] = at;
        g->s_qe[i] = g->epoch;
    }
    return smoe__reuse_keep_value(g->s_q[i], g->p->lambda, g->qv, d);
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
    case SIMP_REUSE:
        return reuse_keep(g, i, k, l, gap);
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
        g->qv = smoe__reuse_qv_next(g->qv, g->s_q[best]);
    return best;
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

/* The state of a replay of st through `slots` entries under p. 0, or -1
 * when out of memory (g freed). */
static int eng_init(eng *g, const simp_steps *st, uint32_t slots, const simp_params *p)
{
    memset(g, 0, sizeof *g);
    g->p = p;
    g->E = st->experts;
    g->slots = slots;
    size_t ns = slots ? slots : 1, nk = (size_t)st->layers * st->experts;
    size_t nl = st->layers ? st->layers : 1;
    g->s_key = malloc(ns * sizeof *g->s_key);
    g->s_tick = calloc(ns, sizeof *g->s_tick);
    g->s_pin = calloc(ns, sizeof *g->s_pin);
    g->s_q = calloc(ns, sizeof *g->s_q);
    g->s_qv = calloc(ns, sizeof *g->s_qv);
    g->s_qe = calloc(ns, sizeof *g->s_qe);
    g->k_slot = malloc((nk ? nk : 1) * sizeof *g->k_slot);
    g->k_f = calloc(nk ? nk : 1, sizeof *g->k_f);
    g->k_last = calloc(nk ? nk : 1, sizeof *g->k_last);
    g->k_hist = calloc(nk ? nk : 1, 1);
    g->l_visits = calloc(nl, sizeof *g->l_visits);
    g->l_step = calloc(nl, sizeof *g->l_step);
    g->dpow = malloc(SMOE__REUSE_POW_N * sizeof *g->dpow);
    if (!g->s_key || !g->s_tick || !g->s_pin || !g->s_q || !g->s_qv || !g->s_qe ||
        !g->k_slot || !g->k_f || !g->k_last || !g->k_hist || !g->l_visits || !g->l_step ||
        !g->dpow) {
        eng_free(g);
        return -1;
    }
    for (size_t i = 0; i < nk; i++)
        g->k_slot[i] = NONE;
    for (uint32_t i = 0; i < slots; i++)
        g->s_qv[i] = NONE;
    smoe__reuse_pow_fill(g->dpow, p->decay);
    memcpy(g->w, p->weights ? p->weights : smoe__reuse_w_start(), sizeof g->w);
    memcpy(g->ws, g->w, sizeof g->ws);
    g->qv = SMOE__REUSE_QV_START;
    g->period = st->layers ? st->layers : 1;
    return 0;
}

/* An entry for key k, not cached: a free one, else the victim's (whose key
 * goes to *evicted). NONE when every entry is pinned. */
static uint32_t take_entry(eng *g, uint32_t k, simp_report *rep, uint32_t *evicted)
{
    uint32_t i;
    *evicted = NONE;
    if (g->used < g->slots) {
        i = g->used++;
    } else {
        uint64_t t0 = tool_now_ns();
        i = pick(g, &rep->scanned);
        rep->scan_ns += tool_now_ns() - t0;
        if (i == NONE)
            return NONE;
        rep->evictions++;
        *evicted = g->s_key[i];
        g->k_slot[*evicted] = NONE;
    }
    g->s_key[i] = k;
    g->k_slot[k] = i;
    return i;
}

/* Step s begins: a visit of its layer. */
static void begin_step(eng *g, const simp_steps *st, size_t s)
{
    uint32_t l = st->layer[s];
    g->step = s + 1; /* pins of 0 never match */
    if (g->l_visits[l])
        g->period = smoe__reuse_period_next(g->period, (double)(g->step - g->l_step[l]));
    g->l_visits[l]++;
    g->l_step[l] = g->step;
    g->cur = l;
}

/* A request for key k of the current layer; *evicted as take_entry. */
static void request(eng *g, uint32_t k, sim_result *out, simp_report *rep, uint32_t *evicted)
{
    uint32_t i = g->k_slot[k];
    out->requests++;
    *evicted = NONE;
    if (i != NONE) {
        out->hits++;
    } else {
        out->misses++;
        if ((i = take_entry(g, k, rep, evicted)) == NONE) {
            rep->no_victim++;
            note_use(g, k, g->cur);
            return;
        }
    }
    g->s_tick[i] = ++g->tick;
    g->s_pin[i] = g->step;
    g->s_qv[i] = NONE; /* its history changes: q is stale */
    note_use(g, k, g->cur);
}

/* A one-shot read of key k: an entry when not cached (the ring touches a
 * cached one), no pin, no count, nothing learned. */
static void one_shot(eng *g, uint32_t k, simp_report *rep)
{
    uint32_t i = g->k_slot[k], evicted;
    if (i == NONE) {
        if ((i = take_entry(g, k, rep, &evicted)) == NONE)
            return;
        g->s_qv[i] = NONE;
    }
    g->s_tick[i] = ++g->tick;
}

int simp_run(const simp_steps *st, uint32_t slots, const simp_params *p, sim_result *out,
             uint32_t *victims, simp_report *report)
{
    memset(out, 0, sizeof *out);
    simp_report rep;
    memset(&rep, 0, sizeof rep);
    eng g;
    if (eng_init(&g, st, slots, p) < 0)
        return -1;
    size_t r = 0;
    for (size_t s = 0; s < st->n_steps; s++) {
        begin_step(&g, st, s);
        for (size_t j = st->off[s]; j < st->off[s + 1]; j++, r++) {
            uint32_t evicted;
            request(&g, st->keys[j], out, &rep, &evicted);
            if (victims)
                victims[r] = evicted;
        }
        for (size_t j = st->one_off ? st->one_off[s] : 0;
             st->one_off && j < st->one_off[s + 1]; j++)
            one_shot(&g, st->one_keys[j], &rep);
    }
    memcpy(rep.weights, g.w, sizeof rep.weights);
    if (report)
        *report = rep;
    eng_free(&g);
    return 0;
}
