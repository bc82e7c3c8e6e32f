/*
 * trace_gen.c - `smoe trace-gen`: write a synthetic routing trace.
 *
 * Each layer has its own popularity order (a random permutation of its
 * experts) with Zipf weights 1/(rank+1)^skew. For every (token, layer) the
 * k ranked experts are drawn one by one: with probability `overlap` an
 * expert the previous token used at this layer is carried over, otherwise,
 * with probability `spec-hit`, one of the previous token's speculative
 * ranks, otherwise a fresh expert by popularity among those the previous
 * token did not use. So the achieved adjacent-token overlap tracks the
 * knob; the command prints what it achieved. The first token of each
 * request draws fresh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "smoe/smoe.h"
#include "tool.h"
#include "trace.h"

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct gen {
    uint32_t layers, experts, k, spec;
    double skew, overlap, spec_hit;
    uint64_t rng;
    uint32_t *perm; /* layers x experts: popularity order per layer */
    double *cdf;    /* experts: cumulative Zipf weights by rank */
    uint32_t *prev; /* layers x (k + spec): previous token's picks */
    uint32_t *prev_n, *prev_spec_n;
    int have_prev;
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
        uint32_t lo = 0, hi = g->experts - 1;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (g->cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        uint32_t e = g->perm[(size_t)l * g->experts + lo];
        if (!contains(excl, ne, e) && !contains(excl2, ne2, e))
            return e;
    }
    uint32_t start = (uint32_t)(rng_next(&g->rng) % g->experts);
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
    return nc ? cand[rng_next(&g->rng) % nc] : UINT32_MAX;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: smoe trace-gen -o FILE [--layers L] [--experts E] [--top-k K]\n"
            "                      [--tokens N] [--requests R] [--skew S] [--overlap P]\n"
            "                      [--spec M] [--spec-hit Q] [--seed X] [--model NAME]\n"
            "Write a synthetic routing trace (docs/trace-format.md); FILE.gz is gzipped.\n"
            "  --layers L      MoE layers (default 24)\n"
            "  --experts E     experts per layer (default 32)\n"
            "  --top-k K       experts per token and layer (default 4)\n"
            "  --tokens N      tokens in all (default 1000)\n"
            "  --requests R    split the tokens into R requests (default 1)\n"
            "  --skew S        Zipf exponent of expert popularity (default 0.8; 0: uniform)\n"
            "  --overlap P     chance each expert repeats from the previous token (default 0.4)\n"
            "  --spec M        also write the next M gate ranks after '|' (default 0)\n"
            "  --spec-hit Q    chance a non-repeated expert comes from the previous\n"
            "                  token's speculative ranks (default 0.5; needs --spec)\n"
            "  --seed X        random seed (default 1)\n");
    return 2;
}

static int parse_unit(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0.0 && v <= 1.0))
        return -1;
    *out = v;
    return 0;
}

int cmd_trace_gen(int argc, char **argv)
{
    const char *out = NULL, *model = "synthetic";
    uint32_t layers = 24, experts = 32, k = 4, tokens = 1000, requests = 1, spec = 0;
    double skew = 0.8, overlap = 0.4, spec_hit = 0.5;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(), 0;
        if (!v)
            return tool_error("trace-gen", "%s: expected a value (see --help)", a) + 1;
        i++;
        int bad = 0;
        if (!strcmp(a, "-o") || !strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--layers"))
            bad = tool_parse_u32(v, 1, TRACE_MAX_SHAPE, &layers);
        else if (!strcmp(a, "--experts"))
            bad = tool_parse_u32(v, 1, TRACE_MAX_SHAPE, &experts);
        else if (!strcmp(a, "--top-k"))
            bad = tool_parse_u32(v, 1, TRACE_MAX_K, &k);
        else if (!strcmp(a, "--tokens"))
            bad = tool_parse_u32(v, 1, UINT32_MAX - 1, &tokens);
        else if (!strcmp(a, "--requests"))
            bad = tool_parse_u32(v, 1, UINT32_MAX - 1, &requests);
        else if (!strcmp(a, "--spec"))
            bad = tool_parse_u32(v, 0, TRACE_MAX_SPEC, &spec);
        else if (!strcmp(a, "--overlap"))
            bad = parse_unit(v, &overlap);
        else if (!strcmp(a, "--spec-hit"))
            bad = parse_unit(v, &spec_hit);
        else if (!strcmp(a, "--skew")) {
            char *end;
            skew = strtod(v, &end);
            bad = end == v || *end || !(skew >= 0.0 && skew <= 10.0);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            seed = strtoull(v, &end, 10);
            bad = end == v || *end;
        } else if (!strcmp(a, "--model")) {
            model = v;
            bad = strpbrk(v, " \t\n") != NULL || !*v;
        } else
            return tool_error("trace-gen", "unknown option '%s' (see --help)", a) + 1;
        if (bad)
            return tool_error("trace-gen", "%s '%s': out of range or malformed", a, v) + 1;
    }
    if (!out)
        return tool_error("trace-gen", "-o FILE is required (see --help)") + 1;
    if (k + spec > experts)
        return tool_error("trace-gen", "--top-k %u plus --spec %u exceeds --experts %u", k, spec,
                          experts) + 1;
    if (requests > tokens)
        requests = tokens;

    gen g = {layers, experts, k, spec, skew, overlap, spec_hit, seed, NULL, NULL, NULL,
             NULL, NULL, 0};
    g.perm = malloc((size_t)layers * experts * sizeof *g.perm);
    g.cdf = malloc((size_t)experts * sizeof *g.cdf);
    g.prev = malloc((size_t)layers * (k + spec) * sizeof *g.prev);
    g.prev_n = calloc(layers, sizeof *g.prev_n);
    g.prev_spec_n = calloc(layers, sizeof *g.prev_spec_n);
    int rc = 1;
    gzFile gz = NULL;
    if (!g.perm || !g.cdf || !g.prev || !g.prev_n || !g.prev_spec_n) {
        tool_error("trace-gen", "out of memory");
        goto done;
    }
    double acc = 0.0;
    for (uint32_t r = 0; r < experts; r++) {
        acc += 1.0 / pow((double)r + 1.0, skew);
        g.cdf[r] = acc;
    }
    for (uint32_t l = 0; l < layers; l++) {
        uint32_t *p = &g.perm[(size_t)l * experts];
        for (uint32_t e = 0; e < experts; e++)
            p[e] = e;
        for (uint32_t e = experts - 1; e > 0; e--) {
            uint32_t j = (uint32_t)(rng_next(&g.rng) % (e + 1));
            uint32_t tmp = p[e];
            p[e] = p[j];
            p[j] = tmp;
        }
    }

    size_t olen = strlen(out);
    int gzip = olen > 3 && !strcmp(out + olen - 3, ".gz");
    gz = gzopen(out, gzip ? "wb6" : "wbT");
    if (!gz) {
        tool_error("trace-gen", "%s: cannot open for writing", out);
        goto done;
    }
    gzprintf(gz, "# source: smoe trace-gen %s seed=%llu skew=%g overlap_knob=%g spec_hit=%g\n",
             smoe_version_string(), (unsigned long long)seed, skew, overlap, spec_hit);
    gzprintf(gz, "# model=%s layers=%u experts=%u topk=%u requests=%u\n", model, layers,
             experts, k, requests);

    uint64_t shared = 0, counted = 0;
    uint32_t pick[TRACE_MAX_K + TRACE_MAX_SPEC];
    for (uint32_t t = 0; t < tokens; t++) {
        /* request q covers tokens [q * tokens / requests, (q+1) * tokens / requests) */
        uint64_t q = ((uint64_t)t * requests) / tokens;
        if (t == 0 || ((uint64_t)(t - 1) * requests) / tokens != q) {
            gzprintf(gz, "# request %llu\n", (unsigned long long)q);
            g.have_prev = 0;
        }
        for (uint32_t l = 0; l < layers; l++) {
            const uint32_t *pv = &g.prev[(size_t)l * (k + spec)];
            uint32_t pn = g.have_prev ? g.prev_n[l] : 0;
            uint32_t ps = g.have_prev ? g.prev_spec_n[l] : 0;
            uint32_t n = 0;
            for (uint32_t i = 0; i < k; i++) {
                uint32_t e = UINT32_MAX;
                if (pn && rng_unit(&g.rng) < overlap)
                    e = draw_from(&g, pv, pn, pick, n);
                if (e == UINT32_MAX && ps && rng_unit(&g.rng) < spec_hit)
                    e = draw_from(&g, pv + pn, ps, pick, n);
                if (e == UINT32_MAX)
                    e = draw_fresh(&g, l, pick, n, pv, pn);
                if (e == UINT32_MAX)
                    e = draw_fresh(&g, l, pick, n, NULL, 0);
                pick[n++] = e;
            }
            for (uint32_t i = 0; i < spec; i++) {
                uint32_t e = draw_fresh(&g, l, pick, n, NULL, 0);
                pick[n++] = e;
            }
            if (t > 0) { /* overlap counts every adjacent pair, as the bench does */
                for (uint32_t i = 0; i < k; i++)
                    shared += (uint64_t)contains(pv, g.prev_n[l], pick[i]);
                counted += k;
            }
            gzprintf(gz, "%u %u", t, l);
            for (uint32_t i = 0; i < k; i++)
                gzprintf(gz, " %u", pick[i]);
            if (spec) {
                gzputs(gz, " |");
                for (uint32_t i = k; i < n; i++)
                    gzprintf(gz, " %u", pick[i]);
            }
            gzputc(gz, '\n');
            memcpy(&g.prev[(size_t)l * (k + spec)], pick, n * sizeof *pick);
            g.prev_n[l] = k;
            g.prev_spec_n[l] = spec;
        }
        g.have_prev = 1;
    }
    if (gzclose(gz) != Z_OK) {
        gz = NULL;
        tool_error("trace-gen", "%s: write failed", out);
        goto done;
    }
    gz = NULL;
    printf("wrote %s: %u tokens x %u layers, %u of %u experts per layer, %u request%s\n"
           "adjacent-token overlap %.3f (knob %.3f), skew %g%s\n",
           out, tokens, layers, k, experts, requests, requests == 1 ? "" : "s",
           counted ? (double)shared / (double)counted : 0.0, overlap, skew,
           spec ? ", with speculative ranks" : "");
    rc = 0;
done:
    if (gz)
        gzclose(gz);
    free(g.perm);
    free(g.cdf);
    free(g.prev);
    free(g.prev_n);
    free(g.prev_spec_n);
    return rc;
}
