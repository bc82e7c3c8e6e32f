/* cmd_pack.c - `smoe pack`: turn a safetensors or GGUF checkpoint into a vault
 * and a scout file; `smoe index`: an index vault pointing into it, nothing
 * copied (docs/packing.md). Both take SOURCE, --out and --pattern alike. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smoe/smoe.h"
#include "args.h"
#include "pack.h"
#include "tool.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe pack --out NAME.smoe SOURCE [options]\n"
            "\n"
            "SOURCE is a .safetensors file, a model.safetensors.index.json, a directory\n"
            "holding either (config.json beside it is read when present), or a .gguf file.\n"
            "Every expert becomes one blob of the vault; every other tensor goes to the\n"
            "scout file.\n"
            "\n"
            "options:\n"
            "  --out FILE            the vault to write (required)\n"
            "  --scout FILE          the scout file (default: NAME.scout beside the vault)\n"
            "  --pattern SPEC        another expert name pattern, tried before the built-in\n"
            "                        ones (repeatable): KIND:TEMPLATE[:SRC=DST,...], KIND is\n"
            "                        'expert' or 'stacked', TEMPLATE uses {L} {E} {C} {*}, e.g.\n"
            "                        expert:model.layers.{L}.moe.experts.{E}.{C}.weight:w1=gate,w3=up,w2=down\n"
            "  --component-align N   alignment of components in a blob (default 256)\n"
            "  --progress, --quiet   force the progress bar on or off (default: on when\n"
            "                        stderr is a terminal)\n"
            "  --list-patterns       print the built-in patterns and exit\n");
}

static void index_usage(FILE *f)
{
    fprintf(f,
            "usage: smoe index SOURCE --out NAME.smoe [options]\n"
            "\n"
            "SOURCE is as for 'smoe pack': a .safetensors file, a model.safetensors.index.json,\n"
            "a directory holding either (config.json beside it is read when present), or a\n"
            "GGUF file. The index vault names each source file (relative to the vault's\n"
            "directory: move them together) and where each expert's components lie in it;\n"
            "no weight is copied. Each expert's XXH3 is recorded (one read of the experts),\n"
            "so a changed byte fails its load with verification on.\n"
            "\n"
            "options:\n"
            "  --out FILE            the index vault to write (required)\n"
            "  --scout FILE          also write a scout file, a copy of the dense tensors\n"
            "                        (default: none; the engine reads them from SOURCE)\n"
            "  --pattern SPEC        another expert name pattern, as for 'smoe pack'\n"
            "  --no-hash             record no per-expert hashes: reads no expert byte, and\n"
            "                        verification is off for this vault\n"
            "  --progress, --quiet   force the progress bar on or off (default: on when\n"
            "                        stderr is a terminal)\n"
            "  --list-patterns       print the built-in patterns and exit\n");
}

enum { OPT_PATTERN = 1, OPT_ALIGN };

typedef struct pack_args {
    const char *out, *source;
    int list;
    int index, no_hash;       /* smoe index, --no-hash */
    pack_opts o;
    pack_patterns ps;
} pack_args;

static int pack_opt(void *ctx, const tool_opt *opt, const char *v)
{
    pack_args *a = ctx;
    if (opt->id == OPT_PATTERN) {
        if (pack_patterns_add(&a->ps, v) < 0)
            return tool_error(a->index ? "index" : "pack", "%s", smoe_last_error());
    } else if (tool_parse_u32(v, 256, 16384, &a->o.component_align) < 0 ||
               (a->o.component_align & (a->o.component_align - 1))) {
        return tool_error("pack", "--component-align: '%s' is not a power of two from 256 to "
                          "16384", v);
    }
    return -1;
}

/* -1 to go on with a->ps to free; else the exit code, a->ps freed. */
static int parse_args(int argc, char **argv, int index, pack_args *a)
{
    memset(a, 0, sizeof *a);
    a->index = index;
    a->o.progress = isatty(STDERR_FILENO);
    const char *cmd = index ? "index" : "pack";
    if (pack_patterns_init(&a->ps) < 0)
        return tool_error(cmd, "%s", smoe_last_error());
    const tool_opt opts[] = {
        TOOL_FLAG("--list-patterns", &a->list, 1),
        TOOL_FLAG("--progress", &a->o.progress, 1),
        {"--quiet", "-q", TOOL_OPT_FLAG, 0, &a->o.progress, 0},
        {"--out", "-o", TOOL_OPT_VALUE, 0, &a->out, 0},
        TOOL_TEXT("--scout", &a->o.scout),
        TOOL_VALUE("--pattern", OPT_PATTERN),
        index ? (tool_opt)TOOL_FLAG("--no-hash", &a->no_hash, 1)
              : (tool_opt)TOOL_VALUE("--component-align", OPT_ALIGN),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = cmd, .usage = index ? index_usage : usage, .opts = opts,
        .operand = &a->source, .max_operands = 1,
        .unknown = index ? "unknown option '%s' (see smoe index --help)"
                         : "unknown option '%s' (see smoe pack --help)",
        .extra = "more than one SOURCE ('%s' and '%s')", .status = 1,
    };
    int rc = tool_args_parse(&cli, argc, argv, pack_opt, a);
    if (rc < 0 && a->list) {
        for (uint32_t i = 0; i < a->ps.n; i++)
            printf("%s\n", a->ps.p[i].spec);
        rc = 0;
    } else if (rc < 0 && (!a->out || !a->source)) {
        cli.usage(stderr);
        rc = 2;
    }
    if (rc >= 0)
        pack_patterns_free(&a->ps);
    return rc;
}

static void print_result(const pack_args *a, const pack_result *r)
{
    char vb[32], sb[32], cb[32], rate[32];
    double secs = (double)r->ns / 1e9;
    tool_human_bytes(vb, sizeof vb, (double)r->vault_bytes, 2);
    tool_human_bytes(sb, sizeof sb, (double)r->scout_bytes, 2);
    tool_human_bytes(cb, sizeof cb, (double)r->source_bytes, 2);
    tool_human_bytes(rate, sizeof rate,
                     secs > 0 ? (double)(uint64_t)((double)r->source_bytes / secs) : 0, 2);
    char *scout = a->o.scout ? NULL : pack_scout_path_for(a->out);
    printf("%s: %" PRIu32 " layers x %" PRIu32 " experts, %" PRIu32 " blobs, %" PRIu32
           " layout%s, %s\n", a->out, r->layers, r->experts, r->entries, r->layouts,
           r->layouts == 1 ? "" : "s", vb);
    printf("%s: %" PRIu64 " dense tensors, %s\n", a->o.scout ? a->o.scout : scout, r->n_scout,
           sb);
    printf("copied %s in %.2f s (%s/s)\n", cb, secs, rate);
    free(scout);
}

static void print_index_result(const pack_args *a, const pack_index_result *r)
{
    char vb[32], mb[32], hb[32], sb[32];
    double secs = (double)r->ns / 1e9;
    tool_human_bytes(vb, sizeof vb, (double)r->vault_bytes, 2);
    tool_human_bytes(mb, sizeof mb, (double)r->model_bytes, 2);
    tool_human_bytes(hb, sizeof hb, (double)r->hashed_bytes, 2);
    printf("%s: %" PRIu32 " layers x %" PRIu32 " experts, %" PRIu32 " entries, %" PRIu32
           " layout%s, %" PRIu32 " source file%s (%s), index %s (%.4f%% of the model)\n",
           a->out, r->layers, r->experts, r->entries, r->layouts, r->layouts == 1 ? "" : "s",
           r->sources, r->sources == 1 ? "" : "s", mb, vb,
           r->model_bytes ? 100.0 * (double)r->vault_bytes / (double)r->model_bytes : 0.0);
    if (a->o.scout) {
        tool_human_bytes(sb, sizeof sb, (double)r->scout_bytes, 2);
        printf("%s: %" PRIu64 " dense tensors, %s\n", a->o.scout, r->n_scout, sb);
    }
    printf("%s %s in %.2f s%s\n", a->no_hash ? "read headers," : "read and hashed", hb, secs,
           a->no_hash ? " (no expert hashes: verification is off for this vault)" : "");
}

static int run(int argc, char **argv, int index)
{
    pack_args a;
    int rc = parse_args(argc, argv, index, &a);
    if (rc >= 0)
        return rc;
    a.o.out = a.out;
    a.o.stop = &interrupted;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    pack_result r;
    pack_index_result ir;
    int err;
    if (index) {
        pack_index_opts io = {a.out, a.o.scout, a.no_hash, a.o.progress, &interrupted, 0};
        err = pack_index_run(a.source, &a.ps, &io, &ir);
    } else {
        err = pack_run(a.source, &a.ps, &a.o, &r);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    pack_patterns_free(&a.ps);
    if (err < 0)
        return tool_error(index ? "index" : "pack", "%s", smoe_last_error());
    if (index)
        print_index_result(&a, &ir);
    else
        print_result(&a, &r);
    return 0;
}

int cmd_pack(int argc, char **argv)
{
    return run(argc, argv, 0);
}

int cmd_index(int argc, char **argv)
{
    return run(argc, argv, 1);
}
