/*
 * bench_predict.c - the simulated, calibrated router lookahead
 * (bench_predict.h has the model).
 */
#include <math.h>
#include <stdlib.h>

#include "bench_predict.h"

/* splitmix64: one 64-bit state, good enough for a simulation. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double uniform(uint64_t *s)
{
    return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller; one of the pair is enough here). */
static double normal(uint64_t *s)
{
    double u = uniform(s), v = uniform(s);
    return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(6.283185307179586 * v);
}

int bench_pred_init(bench_pred *p, uint32_t layers, uint32_t experts, const uint64_t *counts,
                    double recall, uint64_t seed)
{
    p->layers = layers;
    p->experts = experts;
    p->recall = recall;
    p->rng = seed;
    p->cdf = malloc((size_t)layers * experts * sizeof *p->cdf + 1);
    if (!p->cdf)
        return -1;
    for (uint32_t l = 0; l < layers; l++) {
        const uint64_t *c = counts + (size_t)l * experts;
        double *cdf = p->cdf + (size_t)l * experts;
        double total = 0, run = 0;
        for (uint32_t e = 0; e < experts; e++)
            total += (double)c[e];
        for (uint32_t e = 0; e < experts; e++) {
            run += (double)c[e];
            cdf[e] = total > 0 ? run / total : 0.0;
        }
    }
    return 0;
}

void bench_pred_free(bench_pred *p)
{
    free(p->cdf);
    p->cdf = NULL;
}

static int in(const uint32_t *a, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i] == x)
            return 1;
    return 0;
}

/* An expert of the layer by popularity, neither true nor guessed yet;
 * UINT32_MAX when none with any popularity is left. */
static uint32_t decoy(bench_pred *p, uint32_t layer, const uint32_t *truth, uint32_t k,
                      const uint32_t *ids, uint32_t n)
{
    const double *cdf = p->cdf + (size_t)layer * p->experts;
    for (int tries = 0; tries < 64; tries++) {
        double u = uniform(&p->rng);
        uint32_t lo = 0, hi = p->experts - 1;
        while (lo < hi) { /* first e with cdf[e] > u */
            uint32_t mid = lo + (hi - lo) / 2;
            if (cdf[mid] > u)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (cdf[lo] > u && !in(truth, k, lo) && !in(ids, n, lo))
            return lo;
    }
    /* Rare: most of the mass is excluded. The most popular one left. */
    uint32_t best = UINT32_MAX;
    double best_w = 0;
    for (uint32_t e = 0; e < p->experts; e++) {
        double w = cdf[e] - (e ? cdf[e - 1] : 0.0);
        if (w > best_w && !in(truth, k, e) && !in(ids, n, e)) {
            best_w = w;
            best = e;
        }
    }
    return best;
}

/* The posterior of a guess with score s (see bench_predict.h). */
static float posterior(double recall, double s)
{
    if (recall <= 0)
        return 0.0f;
    if (recall >= 1)
        return 1.0f;
    const double sep = BENCH_PRED_SEP;
    return (float)(1.0 / (1.0 + (1.0 - recall) / recall * exp(-(sep * s - sep * sep / 2))));
}

uint32_t bench_pred_guess(bench_pred *p, uint32_t layer, const uint32_t *truth, uint32_t k,
                          uint32_t *ids, float *prob, uint8_t *is_true)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < k; i++) {
        int hit = uniform(&p->rng) < p->recall;
        uint32_t id = hit ? truth[i] : decoy(p, layer, truth, k, ids, n);
        if (id == UINT32_MAX)
            continue;
        double s = normal(&p->rng) + (hit ? BENCH_PRED_SEP : 0.0);
        ids[n] = id;
        prob[n] = posterior(p->recall, s);
        if (is_true)
            is_true[n] = (uint8_t)hit;
        n++;
    }
    return n;
}
