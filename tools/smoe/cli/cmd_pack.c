/* cmd_pack.c - `smoe pack`: turn a safetensors or GGUF checkpoint into a vault
 * and a scout file (docs/packing.md). */
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

enum { OPT_PATTERN = 1, OPT_ALIGN };

typedef struct pack_args {
    const char *out, *source;
    int list;
    pack_opts o;
    pack_patterns ps;
} pack_args;

static int pack_opt(void *ctx, const tool_opt *opt, const char *v)
{
    pack_args *a = ctx;
    if (opt->id == OPT_PATTERN) {
        if (pack_patterns_add(&a->ps, v) < 0)
            return tool_error("pack", "%s", smoe_last_error());
    } else if (tool_parse_u32(v, 256, 16384, &a->o.component_align) < 0 ||
               (a->o.component_align & (a->o.component_align - 1))) {
        return tool_error("pack", "--component-align: '%s' is not a power of two from 256 to "
                          "16384", v);
    }
    return -1;
}

/* -1 to go on with a->ps to free; else the exit code, a->ps freed. */
static int parse_args(int argc, char **argv, pack_args *a)
{
    memset(a, 0, sizeof *a);
    a->o.progress = isatty(STDERR_FILENO);
    if (pack_patterns_init(&a->ps) < 0)
        return tool_error("pack", "%s", smoe_last_error());
    const tool_opt opts[] = {
        TOOL_FLAG("--list-patterns", &a->list, 1),
        TOOL_FLAG("--progress", &a->o.progress, 1),
        {"--quiet", "-q", TOOL_OPT_FLAG, 0, &a->o.progress, 0},
        {"--out", "-o", TOOL_OPT_VALUE, 0, &a->out, 0},
        TOOL_TEXT("--scout", &a->o.scout),
        TOOL_VALUE("--pattern", OPT_PATTERN),
        TOOL_VALUE("--component-align", OPT_ALIGN),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = "pack", .usage = usage, .opts = opts, .operand = &a->source,
        .max_operands = 1, .unknown = "unknown option '%s' (see smoe pack --help)",
        .extra = "more than one SOURCE ('%s' and '%s')", .status = 1,
    };
    int rc = tool_args_parse(&cli, argc, argv, pack_opt, a);
    if (rc < 0 && a->list) {
        for (uint32_t i = 0; i < a->ps.n; i++)
            printf("%s\n", a->ps.p[i].spec);
        rc = 0;
    } else if (rc < 0 && (!a->out || !a->source)) {
        usage(stderr);
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

int cmd_pack(int argc, char **argv)
{
    pack_args a;
    int rc = parse_args(argc, argv, &a);
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
    int err = pack_run(a.source, &a.ps, &a.o, &r);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    pack_patterns_free(&a.ps);
    if (err < 0)
        return tool_error("pack", "%s", smoe_last_error());
    print_result(&a, &r);
    return 0;
}
