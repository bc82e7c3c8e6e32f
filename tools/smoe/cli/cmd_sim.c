/*
 * cmd_sim.c - `smoe sim`: replay routing traces through the eviction
 * policies of sim_policy.c and print their hit rates beside Belady's
 * optimum at the same cache size. Needs no vault: only traces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "sim.h"
#include "sim_policy.h"
#include "sim_rank.h"
#include "tool.h"
#include "trace.h"

#define MAX_SIZES 16

static int usage(void)
{
    fprintf(stderr,
        "usage: smoe sim [options] TRACE...\n"
        "Replay routing traces (docs/trace-format.md) through simulated eviction\n"
        "policies, one global cache of (layer, expert) entries, and print each hit\n"
        "rate and its fraction of Belady's optimum (docs/eviction.md).\n"
        "  --policy LIST       of lru, lfu, layer, reuse (default all four)\n"
        "  --size LIST         cache sizes: P%% of layers x experts, or entries\n"
        "                      (default 10%%,25%%,50%%)\n"
        "  --tokens A:B        replay tokens A to B-1 only (either may be empty)\n"
        "  --half 1|2          replay the first or the second half of each trace\n"
        "  --group N           N tokens per layer step, as prefill or batched decode\n"
        "                      ask (default 1: decode)\n"
        "  --shuffle-tokens S  replay the tokens in a random order (seed S > 0)\n"
        "  --shuffle-layers S  walk the layers of each step group in a random order\n"
        "  --one-shot N        after each step, N one-shot reads of random experts\n"
        "                      (as speculation or pre-warm): they take slots, are not\n"
        "                      counted and teach the policies nothing\n"
        "  --decay G           lfu and reuse: count decay per visit (default 0.98)\n"
        "  --lambda L          reuse: what a layer cycle of distance costs, in victims'\n"
        "                      chances of reuse (default 1)\n"
        "  --rate R            reuse: learning rate, 0 to keep the start weights\n"
        "                      (default 0.003)\n"
        "  --train N           reuse: training examples per request (default 4)\n"
        "  --no-history        reuse without its history bits\n"
        "  --no-current        reuse: idle keys of the current layer count as passed\n"
        "  --ceiling           also print what the best history ranking could hit:\n"
        "                      the C experts most likely next, held for free at every\n"
        "                      token (decode order only)\n"
        "  --stats             also print evictions, entries scanned and time per\n"
        "                      eviction, and reuse's final weights\n"
        "  --json FILE         write every figure as JSON\n");
    return 2;
}

typedef struct size_spec {
    double pct;      /* > 0: share of layers x experts */
    uint32_t slots;  /* else: entries */
} size_spec;

typedef struct sim_cfg {
    int policies[SIMP_N_POLICIES];
    int n_policies;
    size_spec sizes[MAX_SIZES];
    int n_sizes;
    simp_shape shape;
    int half;
    int tokens_set;
    simp_params over; /* decay, lambda, rate, train_max, flags given on the line */
    int set_decay, set_lambda, set_rate, set_train;
    int stats;
    int ceiling;
    const char *json_path;
} sim_cfg;

static int parse_policies(const char *s, sim_cfg *c)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    c->n_policies = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int p = simp_policy_from_name(tok);
        if (p < 0)
            return tool_error("sim", "--policy: unknown policy '%s' (expected lru, lfu, "
                              "layer or reuse)", tok);
        for (int i = 0; i < c->n_policies; i++)
            if (c->policies[i] == p)
                return tool_error("sim", "--policy: '%s' given twice", tok);
        c->policies[c->n_policies++] = p;
    }
    if (!c->n_policies)
        return tool_error("sim", "--policy: expected a comma list of policies");
    return 0;
}

static int parse_sizes(const char *s, sim_cfg *c)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    c->n_sizes = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (c->n_sizes == MAX_SIZES)
            return tool_error("sim", "--size: at most %d sizes", MAX_SIZES);
        size_spec *z = &c->sizes[c->n_sizes++];
        memset(z, 0, sizeof *z);
        size_t n = strlen(tok);
        if (n > 1 && tok[n - 1] == '%') {
            char *end;
            z->pct = strtod(tok, &end);
            if (end != tok + n - 1 || !(z->pct > 0 && z->pct <= 100))
                return tool_error("sim", "--size: '%s' is not a share in (0%%, 100%%]", tok);
        } else if (tool_parse_u32(tok, 1, UINT32_MAX, &z->slots)) {
            return tool_error("sim", "--size: '%s' is neither P%% nor an entry count >= 1",
                              tok);
        }
    }
    if (!c->n_sizes)
        return tool_error("sim", "--size: expected a comma list of sizes");
    return 0;
}

static int parse_double(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi))
        return tool_error("sim", "%s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
    *out = v;
    return 0;
}

static int parse_range(const char *s, simp_shape *sh)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return tool_error("sim", "--tokens: '%s' is not A:B", s);
    char a[32] = "", b[32] = "";
    size_t na = (size_t)(colon - s), nb = strlen(colon + 1);
    if (na >= sizeof a || nb >= sizeof b)
        return tool_error("sim", "--tokens: '%s' is not A:B", s);
    memcpy(a, s, na);
    memcpy(b, colon + 1, nb);
    uint32_t va = 0, vb = 0;
    if ((na && tool_parse_u32(a, 0, UINT32_MAX, &va)) ||
        (nb && tool_parse_u32(b, 1, UINT32_MAX, &vb)))
        return tool_error("sim", "--tokens: '%s' is not A:B with token numbers", s);
    if (nb && vb <= va)
        return tool_error("sim", "--tokens: '%s' is empty (B must exceed A)", s);
    sh->tok_begin = va;
    sh->tok_end = vb;
    return 0;
}

static uint32_t slots_of(const size_spec *z, uint32_t n_keys)
{
    if (z->pct > 0) {
        double v = (double)n_keys * z->pct / 100.0 + 0.5;
        return v < 1 ? 1 : (uint32_t)v;
    }
    return z->slots;
}

static void size_name(const size_spec *z, char *buf, size_t n)
{
    if (z->pct > 0)
        snprintf(buf, n, "%g%%", z->pct);
    else
        snprintf(buf, n, "%u", z->slots);
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

/* Sums of fractions of Belady per (size, policy), for the mean row. */
typedef struct totals {
    double frac[MAX_SIZES][SIMP_N_POLICIES];
    int n[MAX_SIZES];
} totals;

static int run_trace(const sim_cfg *c, const char *path, json_object *jrows, totals *tot)
{
    char err[1024];
    tool_trace t;
    if (tool_trace_load(&t, path, err, sizeof err)) {
        tool_trace_free(&t);
        return tool_error("sim", "%s", err);
    }
    simp_shape sh = c->shape;
    if (c->half) {
        sh.tok_begin = c->half == 1 ? 0 : t.n_tokens / 2;
        sh.tok_end = c->half == 1 ? t.n_tokens / 2 : t.n_tokens;
    }
    if (sh.tok_begin >= t.n_tokens || (sh.tok_end && sh.tok_end <= sh.tok_begin)) {
        int rc = tool_error("sim", "%s: has %zu tokens, none in the range asked for", path,
                            t.n_tokens);
        tool_trace_free(&t);
        return rc;
    }
    simp_steps st;
    if (simp_steps_from_trace(&t, &sh, &st)) {
        tool_trace_free(&t);
        return tool_error("sim", "out of memory");
    }
    uint32_t n_keys = t.layers * t.experts;
    size_t n = simp_steps_requests(&st);
    int rc = 0;
    uint64_t ceil_hits[MAX_SIZES] = {0}, ceil_req = 0;
    if (c->ceiling) {
        uint32_t sz[MAX_SIZES];
        for (int zi = 0; zi < c->n_sizes; zi++)
            sz[zi] = slots_of(&c->sizes[zi], n_keys);
        if (simp_rank_bound(&t, sh.tok_begin, sh.tok_end, sz, c->n_sizes, ceil_hits,
                            &ceil_req))
            rc = tool_error("sim", "out of memory");
    }
    for (int zi = 0; zi < c->n_sizes && !rc; zi++) {
        uint32_t slots = slots_of(&c->sizes[zi], n_keys);
        char zname[32];
        size_name(&c->sizes[zi], zname, sizeof zname);
        sim_result opt;
        if (sim_opt_keys(st.keys, n, n_keys, slots, &opt)) {
            rc = tool_error("sim", "out of memory");
            break;
        }
        double opt_rate = ratio(opt.hits, opt.requests);
        printf("%-38.38s %6s %7u  %6.3f", base_name(path), zname, slots, opt_rate);
        if (c->ceiling)
            printf("  %6.3f (%.2f)", ratio(ceil_hits[zi], ceil_req),
                   opt.hits ? (double)ceil_hits[zi] / (double)opt.hits : 0.0);
        json_object *jr = json_object_new_object();
        json_object_object_add(jr, "trace", json_object_new_string(path));
        json_object_object_add(jr, "size", json_object_new_string(zname));
        json_object_object_add(jr, "slots", json_object_new_uint64(slots));
        json_object_object_add(jr, "requests", json_object_new_uint64(n));
        json_object_object_add(jr, "belady", json_object_new_double(opt_rate));
        if (c->ceiling)
            json_object_object_add(jr, "ceiling",
                                   json_object_new_double(ratio(ceil_hits[zi], ceil_req)));
        json_object *jp = json_object_new_object();
        char stats[2048] = "";
        size_t sl = 0;
        for (int pi = 0; pi < c->n_policies; pi++) {
            simp_params p;
            simp_params_default(&p, (simp_policy)c->policies[pi]);
            if (c->set_decay)
                p.decay = c->over.decay;
            if (c->set_lambda)
                p.lambda = c->over.lambda;
            if (c->set_rate)
                p.rate = c->over.rate;
            if (c->set_train)
                p.train_max = c->over.train_max;
            p.no_history = c->over.no_history;
            p.no_current = c->over.no_current;
            sim_result r;
            simp_report rep;
            uint64_t t0 = tool_now_ns();
            if (simp_run(&st, slots, &p, &r, NULL, &rep)) {
                rc = tool_error("sim", "out of memory");
                break;
            }
            uint64_t ns = tool_now_ns() - t0;
            double rate = ratio(r.hits, r.requests);
            double frac = opt.hits ? (double)r.hits / (double)opt.hits : 0.0;
            printf("  %6.3f (%.2f)", rate, frac);
            tot->frac[zi][pi] += frac;
            json_object *jq = json_object_new_object();
            json_object_object_add(jq, "hit_rate", json_object_new_double(rate));
            json_object_object_add(jq, "of_belady", json_object_new_double(frac));
            json_object_object_add(jq, "evictions", json_object_new_uint64(rep.evictions));
            json_object_object_add(jq, "scanned", json_object_new_uint64(rep.scanned));
            json_object_object_add(jq, "scan_ns", json_object_new_uint64(rep.scan_ns));
            json_object_object_add(jq, "replay_ns", json_object_new_uint64(ns));
            if (p.policy == SIMP_REUSE) {
                json_object *jw = json_object_new_array();
                for (int i = 0; i < SIMP_REUSE_W; i++)
                    json_object_array_add(jw, json_object_new_double(rep.weights[i]));
                json_object_object_add(jq, "weights", jw);
            }
            json_object_object_add(jp, simp_policy_name(p.policy), jq);
            if (c->stats && sl < sizeof stats) {
                sl += (size_t)snprintf(stats + sl, sizeof stats - sl,
                                       "    %-6s %llu evictions, each %.1f entries scanned "
                                       "in %.0f ns (%.1f ns an entry)",
                                       simp_policy_name(p.policy),
                                       (unsigned long long)rep.evictions,
                                       ratio(rep.scanned, rep.evictions),
                                       ratio(rep.scan_ns, rep.evictions),
                                       ratio(rep.scan_ns, rep.scanned));
                if (p.policy == SIMP_REUSE && sl < sizeof stats) {
                    sl += (size_t)snprintf(stats + sl, sizeof stats - sl, "; weights");
                    for (int i = 0; i < SIMP_REUSE_W && sl < sizeof stats; i++)
                        sl += (size_t)snprintf(stats + sl, sizeof stats - sl, " %.2f",
                                               rep.weights[i]);
                }
                if (sl < sizeof stats)
                    sl += (size_t)snprintf(stats + sl, sizeof stats - sl, "\n");
            }
        }
        printf("\n%s", stats);
        json_object_object_add(jr, "policies", jp);
        json_object_array_add(jrows, jr);
        tot->n[zi]++;
    }
    simp_steps_free(&st);
    tool_trace_free(&t);
    return rc;
}

int cmd_sim(int argc, char **argv)
{
    sim_cfg c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < SIMP_N_POLICIES; i++)
        c.policies[c.n_policies++] = i;
    static const double def_pct[] = {10, 25, 50};
    for (int i = 0; i < 3; i++)
        c.sizes[c.n_sizes++].pct = def_pct[i];
    const char **traces = calloc((size_t)argc, sizeof *traces);
    int n_traces = 0;
    if (!traces)
        return tool_error("sim", "out of memory");

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            free(traces);
            return usage(), 0;
        }
        if (!strcmp(a, "--no-history")) {
            c.over.no_history = 1;
            continue;
        }
        if (!strcmp(a, "--no-current")) {
            c.over.no_current = 1;
            continue;
        }
        if (!strcmp(a, "--stats")) {
            c.stats = 1;
            continue;
        }
        if (!strcmp(a, "--ceiling")) {
            c.ceiling = 1;
            continue;
        }
        if (a[0] != '-') {
            traces[n_traces++] = a;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            free(traces);
            return tool_error("sim", "%s: expected a value (see --help)", a) + 1;
        }
        i++;
        int bad;
        uint32_t u;
        if (!strcmp(a, "--policy")) {
            bad = parse_policies(v, &c);
        } else if (!strcmp(a, "--size")) {
            bad = parse_sizes(v, &c);
        } else if (!strcmp(a, "--tokens")) {
            bad = parse_range(v, &c.shape);
            c.tokens_set = 1;
        } else if (!strcmp(a, "--half")) {
            bad = tool_parse_u32(v, 1, 2, &u) ? tool_error("sim", "--half: expected 1 or 2")
                                              : 0;
            c.half = (int)u;
        } else if (!strcmp(a, "--group")) {
            bad = tool_parse_u32(v, 1, 1u << 20, &c.shape.group)
                      ? tool_error("sim", "--group: expected tokens per step, 1 .. 1048576")
                      : 0;
        } else if (!strcmp(a, "--shuffle-tokens") || !strcmp(a, "--shuffle-layers")) {
            bad = tool_parse_u32(v, 1, UINT32_MAX, &u)
                      ? tool_error("sim", "%s: expected a seed >= 1", a)
                      : 0;
            if (!strcmp(a, "--shuffle-tokens"))
                c.shape.shuffle_tokens = u;
            else
                c.shape.shuffle_layers = u;
        } else if (!strcmp(a, "--one-shot")) {
            bad = tool_parse_u32(v, 0, 1u << 20, &c.shape.one_shot)
                      ? tool_error("sim", "--one-shot: expected reads per step, 0 .. 1048576")
                      : 0;
        } else if (!strcmp(a, "--decay")) {
            bad = parse_double(a, v, 0.0, 1.0, &c.over.decay);
            c.set_decay = 1;
        } else if (!strcmp(a, "--lambda")) {
            bad = parse_double(a, v, 0.0, 1000.0, &c.over.lambda);
            c.set_lambda = 1;
        } else if (!strcmp(a, "--rate")) {
            bad = parse_double(a, v, 0.0, 1.0, &c.over.rate);
            c.set_rate = 1;
        } else if (!strcmp(a, "--train")) {
            bad = tool_parse_u32(v, 1, 64, &c.over.train_max)
                      ? tool_error("sim", "--train: expected 1 .. 64")
                      : 0;
            c.set_train = 1;
        } else if (!strcmp(a, "--json")) {
            c.json_path = v;
            bad = 0;
        } else {
            free(traces);
            return tool_error("sim", "unknown option '%s' (see --help)", a) + 1;
        }
        if (bad) {
            free(traces);
            return 2;
        }
    }
    if (c.ceiling && (c.shape.group > 1 || c.shape.shuffle_tokens || c.shape.shuffle_layers ||
                      c.shape.one_shot)) {
        free(traces);
        return tool_error("sim", "--ceiling ranks tokens in their order: not with --group, "
                          "--shuffle-tokens, --shuffle-layers or --one-shot") + 1;
    }
    if (!n_traces || (c.half && c.tokens_set)) {
        free(traces);
        return tool_error("sim", n_traces ? "--half and --tokens exclude each other"
                                          : "expected at least one trace (see --help)") + 1;
    }

    printf("%-38s %6s %7s  %6s", "trace", "size", "slots", "belady");
    if (c.ceiling)
        printf("  %-13s", "ceiling");
    for (int pi = 0; pi < c.n_policies; pi++)
        printf("  %-13s", simp_policy_name((simp_policy)c.policies[pi]));
    printf("\n");
    json_object *jrows = json_object_new_array();
    totals tot;
    memset(&tot, 0, sizeof tot);
    int rc = 0;
    for (int i = 0; i < n_traces && !rc; i++)
        rc = run_trace(&c, traces[i], jrows, &tot);
    free(traces);
    if (!rc && n_traces > 1) {
        for (int zi = 0; zi < c.n_sizes; zi++) {
            char zname[32];
            size_name(&c.sizes[zi], zname, sizeof zname);
            printf("%-38s %6s %7s  %6s", "mean fraction of belady", zname, "", "");
            if (c.ceiling)
                printf("  %-13s", "");
            for (int pi = 0; pi < c.n_policies; pi++)
                printf("         (%.2f)", tot.n[zi] ? tot.frac[zi][pi] / tot.n[zi] : 0.0);
            printf("\n");
        }
    }
    if (!rc && c.json_path) {
        json_object *root = json_object_new_object();
        json_object_object_add(root, "rows", json_object_get(jrows));
        if (json_object_to_file_ext(c.json_path, root, JSON_C_TO_STRING_PRETTY))
            rc = tool_error("sim", "%s: cannot write: %s", c.json_path,
                            json_util_get_last_err());
        json_object_put(root);
    }
    json_object_put(jrows);
    return rc;
}
