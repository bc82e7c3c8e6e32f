/*
 * cmd_trace_gen.c - `smoe trace-gen`: options for a synthetic routing trace
 * (sim/trace_synth.c writes it), and what it achieved.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "tool.h"
#include "trace.h"
#include "trace_synth.h"

static const char cmd[] = "trace-gen";

static void usage(FILE *f)
{
    fprintf(f,
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

enum {
    OPT_LAYERS = 1, OPT_EXPERTS, OPT_TOP_K, OPT_TOKENS, OPT_REQUESTS, OPT_SPEC, OPT_OVERLAP,
    OPT_SPEC_HIT, OPT_SKEW, OPT_SEED, OPT_MODEL
};

/* 0, or nonzero when v is out of range or malformed. */
static int convert(trace_synth_opts *o, int id, const char *v)
{
    char *end;
    switch (id) {
    case OPT_LAYERS: return tool_parse_u32(v, 1, TRACE_MAX_SHAPE, &o->layers);
    case OPT_EXPERTS: return tool_parse_u32(v, 1, TRACE_MAX_SHAPE, &o->experts);
    case OPT_TOP_K: return tool_parse_u32(v, 1, TRACE_MAX_K, &o->k);
    case OPT_TOKENS: return tool_parse_u32(v, 1, UINT32_MAX - 1, &o->tokens);
    case OPT_REQUESTS: return tool_parse_u32(v, 1, UINT32_MAX - 1, &o->requests);
    case OPT_SPEC: return tool_parse_u32(v, 0, TRACE_MAX_SPEC, &o->spec);
    case OPT_OVERLAP: return parse_unit(v, &o->overlap);
    case OPT_SPEC_HIT: return parse_unit(v, &o->spec_hit);
    case OPT_SKEW:
        o->skew = strtod(v, &end);
        return end == v || *end || !(o->skew >= 0.0 && o->skew <= 10.0);
    case OPT_SEED:
        o->seed = strtoull(v, &end, 10);
        return end == v || *end;
    default: /* OPT_MODEL */
        o->model = v;
        return strpbrk(v, " \t\n") != NULL || !*v;
    }
}

static int trace_gen_opt(void *ctx, const tool_opt *opt, const char *v)
{
    if (convert(ctx, opt->id, v))
        return tool_error(cmd, "%s '%s': out of range or malformed", opt->name, v) + 1;
    return -1;
}

static int parse_args(int argc, char **argv, trace_synth_opts *o)
{
    *o = (trace_synth_opts){NULL, "synthetic", 24, 32, 4, 1000, 1, 0, 0.8, 0.4, 0.5, 1};
    const tool_opt opts[] = {
        {"--out", "-o", TOOL_OPT_VALUE, 0, &o->out, 0},
        TOOL_VALUE("--layers", OPT_LAYERS),
        TOOL_VALUE("--experts", OPT_EXPERTS),
        TOOL_VALUE("--top-k", OPT_TOP_K),
        TOOL_VALUE("--tokens", OPT_TOKENS),
        TOOL_VALUE("--requests", OPT_REQUESTS),
        TOOL_VALUE("--spec", OPT_SPEC),
        TOOL_VALUE("--overlap", OPT_OVERLAP),
        TOOL_VALUE("--spec-hit", OPT_SPEC_HIT),
        TOOL_VALUE("--skew", OPT_SKEW),
        TOOL_VALUE("--seed", OPT_SEED),
        TOOL_VALUE("--model", OPT_MODEL),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = cmd, .usage = usage, .opts = opts,
        .no_value = "%s: expected a value (see --help)",
        .unknown = "unknown option '%s' (see --help)",
        .unexpected = "unknown option '%s' (see --help)",
    };
    int rc = tool_args_parse(&cli, argc, argv, trace_gen_opt, o);
    if (rc >= 0)
        return rc;
    if (!o->out)
        return tool_error(cmd, "-o FILE is required (see --help)") + 1;
    if (o->k + o->spec > o->experts)
        return tool_error(cmd, "--top-k %u plus --spec %u exceeds --experts %u", o->k, o->spec,
                          o->experts) + 1;
    if (o->requests > o->tokens)
        o->requests = o->tokens;
    return -1;
}

int cmd_trace_gen(int argc, char **argv)
{
    trace_synth_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char err[4200];
    double overlap;
    if (trace_synth_write(&o, &overlap, err, sizeof err) < 0)
        return tool_error(cmd, "%s", err);
    printf("wrote %s: %u tokens x %u layers, %u of %u experts per layer, %u request%s\n"
           "adjacent-token overlap %.3f (knob %.3f), skew %g%s\n",
           o.out, o.tokens, o.layers, o.k, o.experts, o.requests, o.requests == 1 ? "" : "s",
           overlap, o.overlap, o.skew, o.spec ? ", with speculative ranks" : "");
    return 0;
}
