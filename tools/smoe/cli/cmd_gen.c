/*
 * cmd_gen.c - `smoe gen`: write a vault of pseudo-random experts, for tests
 * and benchmarks. Payloads and sizes are a pure function of the seed and
 * (layer, expert), so the same arguments write the same file.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smoe/smoe.h"
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

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t key_of(uint64_t seed, uint32_t layer, uint32_t expert, uint64_t salt)
{
    uint64_t s = seed ^ salt;
    s ^= splitmix64(&s) + ((uint64_t)layer << 32 | expert);
    return splitmix64(&s);
}

static void fill(unsigned char *p, size_t n, uint64_t state)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = splitmix64(&state);
        for (int b = 0; b < 8; b++)
            p[i + (size_t)b] = (unsigned char)(v >> (8 * b));
    }
    uint64_t v = splitmix64(&state);
    for (; i < n; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/*
 * A plausible expert layout within max_bytes: bf16 gate and up [ffn,
 * hidden] and down [hidden, ffn], hidden the largest power of two (<= 4096)
 * that leaves ffn >= hidden / 4; a single u8 component for tiny blobs.
 */
static uint32_t plan_layout(smoe_component c[3], uint64_t max_bytes)
{
    memset(c, 0, 3 * sizeof *c);
    for (uint64_t h = 4096; h >= 8; h /= 2) {
        uint64_t f = max_bytes / (6 * h);
        while (f >= h / 4 && 2 * round_up(2 * h * f, 256) + 2 * h * f > max_bytes)
            f--;
        if (f == 0 || f < h / 4)
            continue;
        static const char *const names[3] = {"gate", "up", "down"};
        for (int i = 0; i < 3; i++) {
            snprintf(c[i].name, sizeof c[i].name, "%s", names[i]);
            c[i].dtype = SMOE_DTYPE_BF16;
            c[i].ndim = 2;
            c[i].shape[0] = i < 2 ? f : h;
            c[i].shape[1] = i < 2 ? h : f;
            c[i].offset = (uint64_t)i * round_up(2 * h * f, 256);
            c[i].nbytes = 2 * h * f;
        }
        return 3;
    }
    snprintf(c[0].name, sizeof c[0].name, "w");
    c[0].dtype = SMOE_DTYPE_U8;
    c[0].ndim = 1;
    c[0].shape[0] = max_bytes;
    c[0].nbytes = max_bytes;
    return 1;
}

static int writer_error(smoe_writer *w, int rc)
{
    tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    smoe_writer_abort(w);
    return 1;
}

int cmd_gen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},
        {"layers", required_argument, NULL, 'l'},
        {"experts", required_argument, NULL, 'e'},
        {"blob-bytes", required_argument, NULL, 'b'},
        {"blob-bytes-max", required_argument, NULL, 'B'},
        {"seed", required_argument, NULL, 's'},
        {"top-k", required_argument, NULL, 'k'},
        {"model", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *model = "smoe-gen", *top_k = NULL;
    uint32_t layers = 0, experts = 0;
    uint64_t bmin = 0, bmax = 0, seed = 1;
    int have_max = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'm': model = optarg; break;
        case 'k': top_k = optarg; break;
        case 'l':
            if (tool_parse_u32(optarg, 1, 65536, &layers))
                return tool_error(cmd, "--layers: '%s' is not a number from 1 to 65536",
                                  optarg);
            break;
        case 'e':
            if (tool_parse_u32(optarg, 1, 65536, &experts))
                return tool_error(cmd, "--experts: '%s' is not a number from 1 to 65536",
                                  optarg);
            break;
        case 'b':
            if (tool_parse_size(optarg, &bmin) || bmin == 0)
                return tool_error(cmd, "--blob-bytes: '%s' is not a size of at least 1 byte",
                                  optarg);
            break;
        case 'B':
            if (tool_parse_size(optarg, &bmax) || bmax == 0)
                return tool_error(cmd, "--blob-bytes-max: '%s' is not a size of at least 1 "
                                  "byte", optarg);
            have_max = 1;
            break;
        case 's': {
            char *end;
            seed = strtoull(optarg, &end, 0);
            if (!*optarg || *end)
                return tool_error(cmd, "--seed: '%s' is not a number", optarg);
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            tool_error(cmd, "bad option '%s' (unknown, or missing its value)",
                       argv[optind - 1]);
            fprintf(stderr, "run 'smoe gen --help' for usage\n");
            return 2;
        }
    }
    if (optind < argc) {
        tool_error(cmd, "unexpected argument '%s'", argv[optind]);
        fprintf(stderr, "run 'smoe gen --help' for usage\n");
        return 2;
    }
    if (!out || !layers || !experts || !bmin) {
        tool_error(cmd, "--out, --layers, --experts and --blob-bytes are required");
        fprintf(stderr, "run 'smoe gen --help' for usage\n");
        return 2;
    }
    if (!have_max)
        bmax = bmin;
    if (bmax < bmin)
        return tool_error(cmd, "--blob-bytes-max (%" PRIu64 ") is smaller than --blob-bytes "
                          "(%" PRIu64 ")", bmax, bmin);
    if (bmax > SIZE_MAX)
        return tool_error(cmd, "--blob-bytes-max is too large for this machine");

    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = layers;
    wo.experts = experts;
    smoe_writer *w = NULL;
    int rc = smoe_writer_open(out, &wo, &w);
    if (rc < 0)
        return tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    smoe_component comps[3];
    uint32_t n = plan_layout(comps, bmin), layout;
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, seed);
    if ((rc = smoe_writer_add_layout(w, comps, n, &layout)) < 0 ||
        (rc = smoe_writer_set_meta(w, "model", model)) < 0 ||
        (rc = smoe_writer_set_meta(w, "arch", "synthetic")) < 0 ||
        (rc = smoe_writer_set_meta(w, "quant", n == 3 ? "bf16" : "u8")) < 0 ||
        (rc = smoe_writer_set_meta(w, "seed", num)) < 0 ||
        (top_k && (rc = smoe_writer_set_meta(w, "top_k", top_k)) < 0))
        return writer_error(w, rc);

    unsigned char *buf = malloc((size_t)bmax);
    if (!buf) {
        smoe_writer_abort(w);
        return tool_error(cmd, "out of memory for a %" PRIu64 "-byte blob", bmax);
    }
    int tty = isatty(STDERR_FILENO);
    uint64_t total = (uint64_t)layers * experts, bytes = 0;
    uint64_t t0 = tool_now_ns(), last = t0;
    for (uint64_t i = 0; i < total; i++) {
        uint32_t l = (uint32_t)(i / experts), e = (uint32_t)(i % experts);
        uint64_t size = bmin;
        if (bmax > bmin)
            size += key_of(seed, l, e, 0x5123) % (bmax - bmin + 1);
        fill(buf, (size_t)size, key_of(seed, l, e, 0xb10b));
        if ((rc = smoe_writer_add_blob(w, l, e, layout, buf, size)) < 0) {
            free(buf);
            if (tty)
                fputc('\n', stderr);
            return writer_error(w, rc);
        }
        bytes += size;
        uint64_t now = tool_now_ns();
        if (tty && (now - last > 200000000ull || i + 1 == total)) {
            fprintf(stderr, "\rsmoe gen: %" PRIu64 "/%" PRIu64 " blobs, %.1f MiB", i + 1,
                    total, (double)bytes / (1 << 20));
            last = now;
        }
    }
    free(buf);
    if (tty)
        fputc('\n', stderr);
    if ((rc = smoe_writer_finish(w)) < 0)
        return tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    double secs = (double)(tool_now_ns() - t0) / 1e9;
    printf("%s: %" PRIu32 " layers x %" PRIu32 " experts, %" PRIu64 " blobs, %" PRIu64
           " payload bytes, written in %.2f s\n", out, layers, experts, total, bytes, secs);
    return 0;
}
