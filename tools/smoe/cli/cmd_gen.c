/*
 * cmd_gen.c - `smoe gen`: write a vault of pseudo-random experts, for tests
 * and benchmarks. Payloads and sizes are a pure function of the seed and
 * (layer, expert) (synth.h, which the tests check against), so the same
 * arguments write the same file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "args.h"
#include "synth.h"
#include "tool.h"

static const char cmd[] = "gen";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe gen --out F --layers L --experts E --blob-bytes B [options]\n"
            "\n"
            "Write a vault of L x E experts with pseudo-random payloads and a bf16\n"
            "gate/up/down layout sized to fit B. The file is written as F.tmp.<pid>\n"
            "and renamed to F once complete.\n"
            "\n"
            "  --out F              the vault to write\n"
            "  --layers L           layers, 1..65536\n"
            "  --experts E          experts per layer, 1..65536 (L x E <= 4194304)\n"
            "  --blob-bytes B       blob size; suffixes k, M, G (binary units)\n"
            "  --blob-bytes-max B2  blob sizes vary uniformly in [B, B2] (default B)\n"
            "  --seed S             seed of payloads and sizes (default 1)\n"
            "  --top-k K            store top_k = K (1..E) in the metadata\n"
            "  --model NAME         model name in the metadata (default \"smoe-gen\")\n"
            "  --help               this text\n");
}

typedef struct gen_args {
    const char *out, *model, *top_k;
    uint32_t layers, experts;
    uint64_t bmin, bmax, seed;
    int have_max;
} gen_args;

enum { OPT_LAYERS = 1, OPT_EXPERTS, OPT_BYTES, OPT_BYTES_MAX, OPT_SEED };

static int gen_opt(void *ctx, const tool_opt *o, const char *v)
{
    gen_args *a = ctx;
    switch (o->id) {
    case OPT_LAYERS:
        if (tool_parse_u32(v, 1, 65536, &a->layers))
            return tool_error(cmd, "--layers: '%s' is not a number from 1 to 65536", v);
        break;
    case OPT_EXPERTS:
        if (tool_parse_u32(v, 1, 65536, &a->experts))
            return tool_error(cmd, "--experts: '%s' is not a number from 1 to 65536", v);
        break;
    case OPT_BYTES:
        if (tool_parse_size(v, &a->bmin) || a->bmin == 0)
            return tool_error(cmd, "--blob-bytes: '%s' is not a size of at least 1 byte", v);
        break;
    case OPT_BYTES_MAX:
        if (tool_parse_size(v, &a->bmax) || a->bmax == 0)
            return tool_error(cmd, "--blob-bytes-max: '%s' is not a size of at least 1 byte", v);
        a->have_max = 1;
        break;
    default: {
        char *end;
        a->seed = strtoull(v, &end, 0);
        if (!*v || *end)
            return tool_error(cmd, "--seed: '%s' is not a number", v);
        break;
    }
    }
    return -1;
}

static int parse_args(int argc, char **argv, gen_args *a)
{
    memset(a, 0, sizeof *a);
    a->model = "smoe-gen";
    a->seed = 1;
    const tool_opt opts[] = {
        TOOL_TEXT("--out", &a->out),
        TOOL_TEXT("--model", &a->model),
        TOOL_TEXT("--top-k", &a->top_k),
        TOOL_VALUE("--layers", OPT_LAYERS),
        TOOL_VALUE("--experts", OPT_EXPERTS),
        TOOL_VALUE("--blob-bytes", OPT_BYTES),
        TOOL_VALUE("--blob-bytes-max", OPT_BYTES_MAX),
        TOOL_VALUE("--seed", OPT_SEED),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = cmd, .usage = usage, .opts = opts, .hint = 1,
        .no_value = "bad option '%s' (unknown, or missing its value)",
        .unknown = "bad option '%s' (unknown, or missing its value)",
    };
    int rc = tool_args_parse(&cli, argc, argv, gen_opt, a);
    if (rc >= 0)
        return rc;
    if (!a->out || !a->layers || !a->experts || !a->bmin)
        return tool_args_error(&cli, "--out, --layers, --experts and --blob-bytes are required",
                               NULL, NULL);
    if (!a->have_max)
        a->bmax = a->bmin;
    if (a->bmax < a->bmin)
        return tool_error(cmd, "--blob-bytes-max (%" PRIu64 ") is smaller than --blob-bytes "
                          "(%" PRIu64 ")", a->bmax, a->bmin);
    if (a->bmax > SIZE_MAX)
        return tool_error(cmd, "--blob-bytes-max is too large for this machine");
    return -1;
}

static int writer_error(smoe_writer *w, int rc)
{
    tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    smoe_writer_abort(w);
    return 1;
}

/* Open the writer with the layout and metadata; NULL after saying why. */
static smoe_writer *open_writer(const gen_args *a, uint32_t *layout)
{
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = a->layers;
    wo.experts = a->experts;
    smoe_writer *w = NULL;
    int rc = smoe_writer_open(a->out, &wo, &w);
    if (rc < 0) {
        tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
        return NULL;
    }
    smoe_component comps[3];
    uint32_t n = synth_layout(comps, a->bmin);
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, a->seed);
    if ((rc = smoe_writer_add_layout(w, comps, n, layout)) < 0 ||
        (rc = smoe_writer_set_meta(w, "model", a->model)) < 0 ||
        (rc = smoe_writer_set_meta(w, "arch", "synthetic")) < 0 ||
        (rc = smoe_writer_set_meta(w, "quant", n == 3 ? "bf16" : "u8")) < 0 ||
        (rc = smoe_writer_set_meta(w, "seed", num)) < 0 ||
        (a->top_k && (rc = smoe_writer_set_meta(w, "top_k", a->top_k)) < 0)) {
        writer_error(w, rc);
        return NULL;
    }
    return w;
}

/* Every blob, with a progress line; 0, or 1 after aborting the writer. */
static int add_blobs(const gen_args *a, smoe_writer *w, uint32_t layout, uint64_t *bytes)
{
    unsigned char *buf = malloc((size_t)a->bmax);
    if (!buf) {
        smoe_writer_abort(w);
        return tool_error(cmd, "out of memory for a %" PRIu64 "-byte blob", a->bmax);
    }
    tool_progress pg;
    tool_progress_start(&pg, cmd);
    uint64_t total = (uint64_t)a->layers * a->experts;
    for (uint64_t i = 0; i < total; i++) {
        uint32_t l = (uint32_t)(i / a->experts), e = (uint32_t)(i % a->experts);
        uint64_t size = synth_blob_size(a->seed, l, e, a->bmin, a->bmax);
        synth_blob_fill(buf, (size_t)size, a->seed, l, e);
        int rc = smoe_writer_add_blob(w, l, e, layout, buf, size);
        if (rc < 0) {
            free(buf);
            tool_progress_stop(&pg);
            return writer_error(w, rc);
        }
        *bytes += size;
        tool_progress_blobs(&pg, i + 1, total, *bytes);
    }
    free(buf);
    return 0;
}

int cmd_gen(int argc, char **argv)
{
    gen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    uint64_t t0 = tool_now_ns(), bytes = 0;
    uint32_t layout;
    smoe_writer *w = open_writer(&a, &layout);
    if (!w)
        return 1;
    if (add_blobs(&a, w, layout, &bytes))
        return 1;
    if ((rc = smoe_writer_finish(w)) < 0)
        return tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    double secs = (double)(tool_now_ns() - t0) / 1e9;
    printf("%s: %" PRIu32 " layers x %" PRIu32 " experts, %" PRIu64 " blobs, %" PRIu64
           " payload bytes, written in %.2f s\n", a.out, a.layers, a.experts,
           (uint64_t)a.layers * a.experts, bytes, secs);
    return 0;
}
