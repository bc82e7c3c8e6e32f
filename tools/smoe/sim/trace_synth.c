/* trace_synth.c - synthetic routing traces (trace_synth.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "smoe/smoe.h"
#include "synth.h"
#include "trace.h"
#include "trace_synth.h"

static double rng_unit(uint64_t *s)
{
    return (double)(synth_splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct gen {
    const trace_synth_opts *o;
    uint32_t layers, experts, k, spec;
    uint64_t rng;
    uint32_t *perm; /* layers x experts: popularity order per layer */
    double *cdf;    /* experts: cumulative Zipf weights by rank */
    uint32_t *prev; /* layers x (k + spec): previous token's picks */
    uint32_t *prev_n, *prev_spec_n;
    int have_prev;
    uint64_t shared, counted; /* adjacent-token overlap so far */
} gen;

static int contains(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* A popular expert of layer l not in excl[0..ne) (nor in excl2); retries,
 * then falls back to a uniform scan. */
static uint32_t draw_fresh(gen *g, uint32_t l, const uint32_t *excl, uint32_t ne,
                           const uint32_t *excl2, uint32_t ne2)
{
    for (int tries = 0; tries < 64; tries++) {
        double u = rng_unit(&g->rng) * g->cdf[g->experts - 1];
        uint32_t e = g->perm[(size_t)l * g->experts + synth_cdf_pick(g->cdf, g->experts, u)];
        if (!contains(excl, ne, e) && !contains(excl2, ne2, e))
            return e;
    }
    uint32_t start = (uint32_t)(synth_splitmix64(&g->rng) % g->experts);
    for (uint32_t i = 0; i < g->experts; i++) {
        uint32_t e = (start + i) % g->experts;
        if (!contains(excl, ne, e) && !contains(excl2, ne2, e))
            return e;
    }
    /* every expert excluded: the caller keeps k + spec <= experts */
    return UINT32_MAX;
}

/* Pick one element of v[0..n) not in taken[0..nt); UINT32_MAX if none. */
static uint32_t draw_from(gen *g, const uint32_t *v, uint32_t n, const uint32_t *taken,
                          uint32_t nt)
{
    uint32_t cand[TRACE_MAX_K + TRACE_MAX_SPEC], nc = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!contains(taken, nt, v[i]))
            cand[nc++] = v[i];
    return nc ? cand[synth_splitmix64(&g->rng) % nc] : UINT32_MAX;
}

static void gen_free(gen *g)
{
    free(g->perm);
    free(g->cdf);
    free(g->prev);
    free(g->prev_n);
    free(g->prev_spec_n);
}

/* Popularity: the Zipf weights by rank, and each layer's order. */
static int gen_init(gen *g, const trace_synth_opts *o)
{
    memset(g, 0, sizeof *g);
    g->o = o;
    g->layers = o->layers;
    g->experts = o->experts;
    g->k = o->k;
    g->spec = o->spec;
    g->rng = o->seed;
    g->perm = malloc((size_t)o->layers * o->experts * sizeof *g->perm);
    g->cdf = malloc((size_t)o->experts * sizeof *g->cdf);
    g->prev = malloc((size_t)o->layers * (o->k + o->spec) * sizeof *g->prev);
    g->prev_n = calloc(o->layers, sizeof *g->prev_n);
    g->prev_spec_n = calloc(o->layers, sizeof *g->prev_spec_n);
    if (!g->perm || !g->cdf || !g->prev || !g->prev_n || !g->prev_spec_n)
        return -1;
    double acc = 0.0;
    for (uint32_t r = 0; r < o->experts; r++) {
        acc += 1.0 / pow((double)r + 1.0, o->skew);
        g->cdf[r] = acc;
    }
    for (uint32_t l = 0; l < o->layers; l++) {
        uint32_t *p = &g->perm[(size_t)l * o->experts];
        for (uint32_t e = 0; e < o->experts; e++)
            p[e] = e;
        for (uint32_t e = o->experts - 1; e > 0; e--) {
            uint32_t j = (uint32_t)(synth_splitmix64(&g->rng) % (e + 1));
            uint32_t tmp = p[e];
            p[e] = p[j];
            p[j] = tmp;
        }
    }
    return 0;
}

/* The k ranked experts and spec speculative ranks of layer l for the next
 * token, into pick; the previous token's picks become these. */
static void draw_row(gen *g, uint32_t l, int counted, uint32_t *pick)
{
    const uint32_t k = g->k, spec = g->spec;
    uint32_t *pv = &g->prev[(size_t)l * (k + spec)];
    uint32_t pn = g->have_prev ? g->prev_n[l] : 0;
    uint32_t ps = g->have_prev ? g->prev_spec_n[l] : 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t e = UINT32_MAX;
        if (pn && rng_unit(&g->rng) < g->o->overlap)
            e = draw_from(g, pv, pn, pick, n);
        if (e == UINT32_MAX && ps && rng_unit(&g->rng) < g->o->spec_hit)
            e = draw_from(g, pv + pn, ps, pick, n);
        if (e == UINT32_MAX)
            e = draw_fresh(g, l, pick, n, pv, pn);
        if (e == UINT32_MAX)
            e = draw_fresh(g, l, pick, n, NULL, 0);
        pick[n++] = e;
    }
    for (uint32_t i = 0; i < spec; i++) {
        uint32_t e = draw_fresh(g, l, pick, n, NULL, 0);
        pick[n++] = e;
    }
    if (counted) { /* overlap counts every adjacent pair, as the bench does */
        for (uint32_t i = 0; i < k; i++)
            g->shared += (uint64_t)contains(pv, g->prev_n[l], pick[i]);
        g->counted += k;
    }
    memcpy(pv, pick, n * sizeof *pick);
    g->prev_n[l] = k;
    g->prev_spec_n[l] = spec;
}

static void write_row(gzFile gz, uint32_t t, uint32_t l, const uint32_t *pick, uint32_t k,
                      uint32_t spec)
{
    gzprintf(gz, "%u %u", t, l);
    for (uint32_t i = 0; i < k; i++)
        gzprintf(gz, " %u", pick[i]);
    if (spec) {
        gzputs(gz, " |");
        for (uint32_t i = k; i < k + spec; i++)
            gzprintf(gz, " %u", pick[i]);
    }
    gzputc(gz, '\n');
}

static void write_tokens(gen *g, gzFile gz)
{
    const trace_synth_opts *o = g->o;
    uint32_t pick[TRACE_MAX_K + TRACE_MAX_SPEC];
    for (uint32_t t = 0; t < o->tokens; t++) {
        /* request q covers tokens [q * tokens / requests, (q+1) * tokens / requests) */
        uint64_t q = ((uint64_t)t * o->requests) / o->tokens;
        if (t == 0 || ((uint64_t)(t - 1) * o->requests) / o->tokens != q) {
            gzprintf(gz, "# request %llu\n", (unsigned long long)q);
            g->have_prev = 0;
        }
        for (uint32_t l = 0; l < o->layers; l++) {
            draw_row(g, l, t > 0, pick);
            write_row(gz, t, l, pick, o->k, o->spec);
        }
        g->have_prev = 1;
    }
}

int trace_synth_write(const trace_synth_opts *o, double *overlap, char *err, size_t errlen)
{
    gen g;
    int rc = -1;
    gzFile gz = NULL;
    if (gen_init(&g, o) < 0) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    size_t olen = strlen(o->out);
    int gzip = olen > 3 && !strcmp(o->out + olen - 3, ".gz");
    if (!(gz = gzopen(o->out, gzip ? "wb6" : "wbT"))) {
        snprintf(err, errlen, "%s: cannot open for writing", o->out);
        goto done;
    }
    gzprintf(gz, "# source: smoe trace-gen %s seed=%llu skew=%g overlap_knob=%g spec_hit=%g\n",
             smoe_version_string(), (unsigned long long)o->seed, o->skew, o->overlap,
             o->spec_hit);
    gzprintf(gz, "# model=%s layers=%u experts=%u topk=%u requests=%u\n", o->model, o->layers,
             o->experts, o->k, o->requests);
    write_tokens(&g, gz);
    int closed = gzclose(gz);
    gz = NULL;
    if (closed != Z_OK) {
        snprintf(err, errlen, "%s: write failed", o->out);
        goto done;
    }
    *overlap = g.counted ? (double)g.shared / (double)g.counted : 0.0;
    rc = 0;
done:
    if (gz)
        gzclose(gz);
    gen_free(&g);
    return rc;
}
