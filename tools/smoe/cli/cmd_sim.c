/*
 * cmd_sim.c - `smoe sim`: replay routing traces through the eviction
 * policies of sim_policy.c and print their hit rates beside Belady's
 * optimum at the same cache size. Needs no vault: only traces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "args.h"
#include "sim.h"
#include "sim_policy.h"
#include "sim_rank.h"
#include "tool.h"
#include "trace.h"

#define MAX_SIZES 16

static void usage(FILE *f)
{
    fprintf(f,
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

static int add_policy(void *u, const char *tok)
{
    sim_cfg *c = u;
    int p = simp_policy_from_name(tok);
    if (p < 0)
        return tool_error("sim", "--policy: unknown policy '%s' (expected lru, lfu, layer or "
                          "reuse)", tok);
    for (int i = 0; i < c->n_policies; i++)
        if (c->policies[i] == p)
            return tool_error("sim", "--policy: '%s' given twice", tok);
    c->policies[c->n_policies++] = p;
    return 0;
}

static int parse_policies(const char *s, sim_cfg *c)
{
    c->n_policies = 0;
    if (tool_each_item(s, add_policy, c))
        return 1;
    if (!c->n_policies)
        return tool_error("sim", "--policy: expected a comma list of policies");
    return 0;
}

static int add_size(void *u, const char *tok)
{
    sim_cfg *c = u;
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
        return tool_error("sim", "--size: '%s' is neither P%% nor an entry count >= 1", tok);
    }
    return 0;
}

static int parse_sizes(const char *s, sim_cfg *c)
{
    c->n_sizes = 0;
    if (tool_each_item(s, add_size, c))
        return 1;
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

/* The trace at path cut into steps as c asks; 0, or 1 after saying why
 * (t is freed then). */
static int load_steps(const sim_cfg *c, const char *path, tool_trace *t, simp_shape *sh,
                      simp_steps *st)
{
    char err[1024];
    if (tool_trace_load(t, path, err, sizeof err)) {
        tool_trace_free(t);
        return tool_error("sim", "%s", err);
    }
    *sh = c->shape;
    if (c->half) {
        sh->tok_begin = c->half == 1 ? 0 : t->n_tokens / 2;
        sh->tok_end = c->half == 1 ? t->n_tokens / 2 : t->n_tokens;
    }
    int rc = 0;
    if (sh->tok_begin >= t->n_tokens || (sh->tok_end && sh->tok_end <= sh->tok_begin))
        rc = tool_error("sim", "%s: has %zu tokens, none in the range asked for", path,
                        t->n_tokens);
    else if (simp_steps_from_trace(t, sh, st))
        rc = tool_error("sim", "out of memory");
    if (rc)
        tool_trace_free(t);
    return rc;
}

/* The parameters of policy pi: its defaults, then what the line gave. */
static void policy_params(const sim_cfg *c, int pi, simp_params *p)
{
    simp_params_default(p, (simp_policy)c->policies[pi]);
    if (c->set_decay)
        p->decay = c->over.decay;
    if (c->set_lambda)
        p->lambda = c->over.lambda;
    if (c->set_rate)
        p->rate = c->over.rate;
    if (c->set_train)
        p->train_max = c->over.train_max;
    p->no_history = c->over.no_history;
    p->no_current = c->over.no_current;
}

static json_object *policy_json(const simp_params *p, double rate, double frac,
                                const simp_report *rep, uint64_t ns)
{
    json_object *jq = json_object_new_object();
    json_object_object_add(jq, "hit_rate", json_object_new_double(rate));
    json_object_object_add(jq, "of_belady", json_object_new_double(frac));
    json_object_object_add(jq, "evictions", json_object_new_uint64(rep->evictions));
    json_object_object_add(jq, "scanned", json_object_new_uint64(rep->scanned));
    json_object_object_add(jq, "scan_ns", json_object_new_uint64(rep->scan_ns));
    json_object_object_add(jq, "replay_ns", json_object_new_uint64(ns));
    if (p->policy == SIMP_REUSE) {
        json_object *jw = json_object_new_array();
        for (int i = 0; i < SIMP_REUSE_W; i++)
            json_object_array_add(jw, json_object_new_double(rep->weights[i]));
        json_object_object_add(jq, "weights", jw);
    }
    return jq;
}

/* --stats: one line per policy, appended to buf[*used ..). */
static void stats_line(char *buf, size_t cap, size_t *used, const simp_params *p,
                       const simp_report *rep)
{
    size_t sl = *used;
    if (sl < cap)
        sl += (size_t)snprintf(buf + sl, cap - sl,
                               "    %-6s %llu evictions, each %.1f entries scanned in %.0f ns "
                               "(%.1f ns an entry)", simp_policy_name(p->policy),
                               (unsigned long long)rep->evictions,
                               ratio(rep->scanned, rep->evictions),
                               ratio(rep->scan_ns, rep->evictions),
                               ratio(rep->scan_ns, rep->scanned));
    if (p->policy == SIMP_REUSE && sl < cap) {
        sl += (size_t)snprintf(buf + sl, cap - sl, "; weights");
        for (int i = 0; i < SIMP_REUSE_W && sl < cap; i++)
            sl += (size_t)snprintf(buf + sl, cap - sl, " %.2f", rep->weights[i]);
    }
    if (sl < cap)
        sl += (size_t)snprintf(buf + sl, cap - sl, "\n");
    *used = sl;
}

/* One cache size of one trace: a row of the table, its JSON, its stats. */
typedef struct size_run {
    const sim_cfg *c;
    const simp_steps *st;
    uint32_t slots;
    sim_result opt;           /* Belady at this size */
    json_object *jpolicies;
    char stats[2048];
    size_t stats_len;
} size_run;

static int run_policy(size_run *z, int pi, totals *tot, int zi)
{
    simp_params p;
    policy_params(z->c, pi, &p);
    sim_result r;
    simp_report rep;
    uint64_t t0 = tool_now_ns();
    if (simp_run(z->st, z->slots, &p, &r, NULL, &rep))
        return tool_error("sim", "out of memory");
    uint64_t ns = tool_now_ns() - t0;
    double rate = ratio(r.hits, r.requests);
    double frac = z->opt.hits ? (double)r.hits / (double)z->opt.hits : 0.0;
    printf("  %6.3f (%.2f)", rate, frac);
    tot->frac[zi][pi] += frac;
    json_object_object_add(z->jpolicies, simp_policy_name(p.policy),
                           policy_json(&p, rate, frac, &rep, ns));
    if (z->c->stats)
        stats_line(z->stats, sizeof z->stats, &z->stats_len, &p, &rep);
    return 0;
}

/* Belady and every policy at size zi; its row goes to jrows. */
static int run_size(const sim_cfg *c, const char *path, const simp_steps *st, uint32_t n_keys,
                    int zi, const uint64_t *ceil_hits, uint64_t ceil_req, json_object *jrows,
                    totals *tot)
{
    size_run z = {c, st, slots_of(&c->sizes[zi], n_keys), {0}, NULL, "", 0};
    size_t n = simp_steps_requests(st);
    char zname[32];
    size_name(&c->sizes[zi], zname, sizeof zname);
    if (sim_opt_keys(st->keys, n, n_keys, z.slots, &z.opt))
        return tool_error("sim", "out of memory");
    double opt_rate = ratio(z.opt.hits, z.opt.requests);
    printf("%-38.38s %6s %7u  %6.3f", base_name(path), zname, z.slots, opt_rate);
    if (c->ceiling)
        printf("  %6.3f (%.2f)", ratio(ceil_hits[zi], ceil_req),
               z.opt.hits ? (double)ceil_hits[zi] / (double)z.opt.hits : 0.0);
    json_object *jr = json_object_new_object();
    json_object_object_add(jr, "trace", json_object_new_string(path));
    json_object_object_add(jr, "size", json_object_new_string(zname));
    json_object_object_add(jr, "slots", json_object_new_uint64(z.slots));
    json_object_object_add(jr, "requests", json_object_new_uint64(n));
    json_object_object_add(jr, "belady", json_object_new_double(opt_rate));
    if (c->ceiling)
        json_object_object_add(jr, "ceiling",
                               json_object_new_double(ratio(ceil_hits[zi], ceil_req)));
    z.jpolicies = json_object_new_object();
    int rc = 0;
    for (int pi = 0; pi < c->n_policies && !rc; pi++)
        rc = run_policy(&z, pi, tot, zi);
    if (rc) {
        json_object_put(z.jpolicies);
        json_object_put(jr);
        return rc;
    }
    printf("\n%s", z.stats);
    json_object_object_add(jr, "policies", z.jpolicies);
    json_object_array_add(jrows, jr);
    tot->n[zi]++;
    return 0;
}

static int run_trace(const sim_cfg *c, const char *path, json_object *jrows, totals *tot)
{
    tool_trace t;
    simp_shape sh;
    simp_steps st;
    int rc = load_steps(c, path, &t, &sh, &st);
    if (rc)
        return rc;
    uint32_t n_keys = t.layers * t.experts;
    uint64_t ceil_hits[MAX_SIZES] = {0}, ceil_req = 0;
    if (c->ceiling) {
        uint32_t sz[MAX_SIZES];
        for (int zi = 0; zi < c->n_sizes; zi++)
            sz[zi] = slots_of(&c->sizes[zi], n_keys);
        if (simp_rank_bound(&t, sh.tok_begin, sh.tok_end, sz, c->n_sizes, ceil_hits,
                            &ceil_req))
            rc = tool_error("sim", "out of memory");
    }
    for (int zi = 0; zi < c->n_sizes && !rc; zi++)
        rc = run_size(c, path, &st, n_keys, zi, ceil_hits, ceil_req, jrows, tot);
    simp_steps_free(&st);
    tool_trace_free(&t);
    return rc;
}

enum {
    OPT_POLICY = 1, OPT_SIZE, OPT_TOKENS, OPT_HALF, OPT_GROUP, OPT_SHUFFLE_TOKENS,
    OPT_SHUFFLE_LAYERS, OPT_ONE_SHOT, OPT_DECAY, OPT_LAMBDA, OPT_RATE, OPT_TRAIN
};

typedef struct sim_parse {
    sim_cfg *c;
    const char **traces;
    int n_traces;
} sim_parse;

/* A u32 option in [lo, hi]: 0, or 2 after saying what it expected. */
static int u32_opt(const char *v, uint32_t lo, uint32_t hi, uint32_t *out, const char *fmt,
                   const char *name)
{
    if (tool_parse_u32(v, lo, hi, out) == 0)
        return -1;
    tool_error("sim", fmt, name);
    return 2;
}

static int sim_opt(void *ctx, const tool_opt *o, const char *v)
{
    sim_parse *sp = ctx;
    sim_cfg *c = sp->c;
    uint32_t u = 0;
    int rc = -1;
    if (!o) {
        sp->traces[sp->n_traces++] = v;
        return -1;
    }
    switch (o->id) {
    case OPT_POLICY: return parse_policies(v, c) ? 2 : -1;
    case OPT_SIZE: return parse_sizes(v, c) ? 2 : -1;
    case OPT_TOKENS:
        c->tokens_set = 1;
        return parse_range(v, &c->shape) ? 2 : -1;
    case OPT_HALF:
        rc = u32_opt(v, 1, 2, &u, "%s: expected 1 or 2", o->name);
        c->half = (int)u;
        return rc;
    case OPT_GROUP:
        return u32_opt(v, 1, 1u << 20, &c->shape.group,
                       "%s: expected tokens per step, 1 .. 1048576", o->name);
    case OPT_SHUFFLE_TOKENS:
    case OPT_SHUFFLE_LAYERS:
        rc = u32_opt(v, 1, UINT32_MAX, &u, "%s: expected a seed >= 1", o->name);
        *(o->id == OPT_SHUFFLE_TOKENS ? &c->shape.shuffle_tokens : &c->shape.shuffle_layers) = u;
        return rc;
    case OPT_ONE_SHOT:
        return u32_opt(v, 0, 1u << 20, &c->shape.one_shot,
                       "%s: expected reads per step, 0 .. 1048576", o->name);
    case OPT_DECAY:
        c->set_decay = 1;
        return parse_double(o->name, v, 0.0, 1.0, &c->over.decay) ? 2 : -1;
    case OPT_LAMBDA:
        c->set_lambda = 1;
        return parse_double(o->name, v, 0.0, 1000.0, &c->over.lambda) ? 2 : -1;
    case OPT_RATE:
        c->set_rate = 1;
        return parse_double(o->name, v, 0.0, 1.0, &c->over.rate) ? 2 : -1;
    default: /* OPT_TRAIN */
        c->set_train = 1;
        return u32_opt(v, 1, 64, &c->over.train_max, "%s: expected 1 .. 64", o->name);
    }
}
/* The command line into c and traces: -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, sim_cfg *c, const char **traces, int *n_traces)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < SIMP_N_POLICIES; i++)
        c->policies[c->n_policies++] = i;
    static const double def_pct[] = {10, 25, 50};
    for (int i = 0; i < 3; i++)
        c->sizes[c->n_sizes++].pct = def_pct[i];
    const tool_opt opts[] = {
        TOOL_FLAG("--no-history", &c->over.no_history, 1),
        TOOL_FLAG("--no-current", &c->over.no_current, 1),
        TOOL_FLAG("--stats", &c->stats, 1),
        TOOL_FLAG("--ceiling", &c->ceiling, 1),
        TOOL_TEXT("--json", &c->json_path),
        TOOL_VALUE("--policy", OPT_POLICY),
        TOOL_VALUE("--size", OPT_SIZE),
        TOOL_VALUE("--tokens", OPT_TOKENS),
        TOOL_VALUE("--half", OPT_HALF),
        TOOL_VALUE("--group", OPT_GROUP),
        TOOL_VALUE("--shuffle-tokens", OPT_SHUFFLE_TOKENS),
        TOOL_VALUE("--shuffle-layers", OPT_SHUFFLE_LAYERS),
        TOOL_VALUE("--one-shot", OPT_ONE_SHOT),
        TOOL_VALUE("--decay", OPT_DECAY),
        TOOL_VALUE("--lambda", OPT_LAMBDA),
        TOOL_VALUE("--rate", OPT_RATE),
        TOOL_VALUE("--train", OPT_TRAIN),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = "sim", .usage = usage, .opts = opts, .max_operands = -1,
        .no_value = "%s: expected a value (see --help)",
        .unknown = "unknown option '%s' (see --help)",
    };
    sim_parse sp = {c, traces, 0};
    int rc = tool_args_parse(&cli, argc, argv, sim_opt, &sp);
    *n_traces = sp.n_traces;
    if (rc >= 0)
        return rc;
    if (c->ceiling && (c->shape.group > 1 || c->shape.shuffle_tokens ||
                       c->shape.shuffle_layers || c->shape.one_shot))
        return tool_error("sim", "--ceiling ranks tokens in their order: not with --group, "
                          "--shuffle-tokens, --shuffle-layers or --one-shot") + 1;
    if (!sp.n_traces || (c->half && c->tokens_set))
        return tool_error("sim", sp.n_traces ? "--half and --tokens exclude each other"
                                             : "expected at least one trace (see --help)") + 1;
    return -1;
}

static void print_head(const sim_cfg *c)
{
    printf("%-38s %6s %7s  %6s", "trace", "size", "slots", "belady");
    if (c->ceiling)
        printf("  %-13s", "ceiling");
    for (int pi = 0; pi < c->n_policies; pi++)
        printf("  %-13s", simp_policy_name((simp_policy)c->policies[pi]));
    printf("\n");
}

/* With several traces: each size's mean fraction of Belady per policy. */
static void print_means(const sim_cfg *c, const totals *tot)
{
    for (int zi = 0; zi < c->n_sizes; zi++) {
        char zname[32];
        size_name(&c->sizes[zi], zname, sizeof zname);
        printf("%-38s %6s %7s  %6s", "mean fraction of belady", zname, "", "");
        if (c->ceiling)
            printf("  %-13s", "");
        for (int pi = 0; pi < c->n_policies; pi++)
            printf("         (%.2f)", tot->n[zi] ? tot->frac[zi][pi] / tot->n[zi] : 0.0);
        printf("\n");
    }
}

static int write_json(const char *path, json_object *jrows)
{
    json_object *root = json_object_new_object();
    json_object_object_add(root, "rows", json_object_get(jrows));
    int rc = 0;
    if (json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY))
        rc = tool_error("sim", "%s: cannot write: %s", path, json_util_get_last_err());
    json_object_put(root);
    return rc;
}

int cmd_sim(int argc, char **argv)
{
    sim_cfg c;
    int n_traces = 0;
    const char **traces = calloc((size_t)argc, sizeof *traces);
    if (!traces)
        return tool_error("sim", "out of memory");
    int rc = parse_args(argc, argv, &c, traces, &n_traces);
    if (rc >= 0) {
        free(traces);
        return rc;
    }
    print_head(&c);
    json_object *jrows = json_object_new_array();
    totals tot;
    memset(&tot, 0, sizeof tot);
    rc = 0;
    for (int i = 0; i < n_traces && !rc; i++)
        rc = run_trace(&c, traces[i], jrows, &tot);
    free(traces);
    if (!rc && n_traces > 1)
        print_means(&c, &tot);
    if (!rc && c.json_path)
        rc = write_json(c.json_path, jrows);
    json_object_put(jrows);
    return rc;
}
