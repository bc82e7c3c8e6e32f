/* cmd_pack.c - `smoe pack`: turn a safetensors or GGUF checkpoint into a vault
 * and a scout file (docs/packing.md). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smoe/smoe.h"
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

static void human(char *buf, size_t n, uint64_t bytes)
{
    double v = (double)bytes;
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", v, unit[u]);
}

int cmd_pack(int argc, char **argv)
{
    const char *out = NULL, *source = NULL;
    pack_opts o;
    memset(&o, 0, sizeof o);
    o.progress = isatty(STDERR_FILENO);
    pack_patterns ps;
    if (pack_patterns_init(&ps) < 0)
        return tool_error("pack", "%s", smoe_last_error());
    int rc = 0, list = 0;

    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            pack_patterns_free(&ps);
            return 0;
        } else if (!strcmp(a, "--list-patterns")) {
            list = 1;
        } else if (!strcmp(a, "--progress")) {
            o.progress = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o.progress = 0;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o") || !strcmp(a, "--scout") ||
                   !strcmp(a, "--pattern") || !strcmp(a, "--component-align")) {
            if (!v) {
                rc = tool_error("pack", "%s needs a value", a);
                break;
            }
            i++;
            if (!strcmp(a, "--out") || !strcmp(a, "-o"))
                out = v;
            else if (!strcmp(a, "--scout"))
                o.scout = v;
            else if (!strcmp(a, "--pattern")) {
                if (pack_patterns_add(&ps, v) < 0)
                    rc = tool_error("pack", "%s", smoe_last_error());
            } else if (tool_parse_u32(v, 256, 16384, &o.component_align) < 0 ||
                       (o.component_align & (o.component_align - 1))) {
                rc = tool_error("pack", "--component-align: '%s' is not a power of two from "
                                "256 to 16384", v);
            }
        } else if (a[0] == '-' && a[1]) {
            rc = tool_error("pack", "unknown option '%s' (see smoe pack --help)", a);
        } else if (source) {
            rc = tool_error("pack", "more than one SOURCE ('%s' and '%s')", source, a);
        } else {
            source = a;
        }
    }
    if (rc == 0 && list) {
        for (uint32_t i = 0; i < ps.n; i++)
            printf("%s\n", ps.p[i].spec);
        pack_patterns_free(&ps);
        return 0;
    }
    if (rc == 0 && (!out || !source)) {
        usage(stderr);
        rc = 2;
    }
    if (rc) {
        pack_patterns_free(&ps);
        return rc;
    }

    o.out = out;
    o.stop = &interrupted;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    pack_result r;
    int err = pack_run(source, &ps, &o, &r);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    pack_patterns_free(&ps);
    if (err < 0)
        return tool_error("pack", "%s", smoe_last_error());

    char vb[32], sb[32], cb[32], rate[32];
    human(vb, sizeof vb, r.vault_bytes);
    human(sb, sizeof sb, r.scout_bytes);
    human(cb, sizeof cb, r.source_bytes);
    double secs = (double)r.ns / 1e9;
    human(rate, sizeof rate, secs > 0 ? (uint64_t)((double)r.source_bytes / secs) : 0);
    char *scout = o.scout ? NULL : pack_scout_path_for(out);
    printf("%s: %" PRIu32 " layers x %" PRIu32 " experts, %" PRIu32 " blobs, %" PRIu32
           " layout%s, %s\n", out, r.layers, r.experts, r.entries, r.layouts,
           r.layouts == 1 ? "" : "s", vb);
    printf("%s: %" PRIu64 " dense tensors, %s\n", o.scout ? o.scout : scout, r.n_scout, sb);
    printf("copied %s in %.2f s (%s/s)\n", cb, secs, rate);
    free(scout);
    return 0;
}
