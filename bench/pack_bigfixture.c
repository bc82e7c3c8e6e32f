/*
 * pack_bigfixture.c - write a large synthetic MoE checkpoint for measuring
 * `smoe pack` (docs/packing.md, "Throughput"). Not a test: the bytes are
 * pseudo-random, the layout is Qwen3-MoE's (one bf16 tensor per expert and
 * projection) or mlx's (--stacked: one 3-D tensor per layer and projection).
 *
 *   pack_bigfixture DIR [LAYERS EXPERTS ROWS COLS] [--stacked]
 *
 * writes DIR/model.safetensors and DIR/config.json; the defaults (8 layers,
 * 32 experts, 2048 x 768) give 2.25 GiB of experts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x243F6A8885A308D3ull;

static void fill(uint8_t *b, size_t n)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        memcpy(b + i, &state, 8);
    }
}

typedef struct tensor {
    char name[128];
    uint64_t shape[3];
    int ndim;
    uint64_t bytes;
} tensor;

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pack_bigfixture DIR [LAYERS EXPERTS ROWS COLS] [--stacked]\n");
        return 2;
    }
    int stacked = 0, pos = 0;
    uint64_t v[4] = {8, 32, 2048, 768};
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--stacked"))
            stacked = 1;
        else if (!dir)
            dir = argv[i];
        else if (pos < 4)
            v[pos++] = strtoull(argv[i], NULL, 10);
    }
    uint64_t L = v[0], E = v[1], R = v[2], C = v[3];
    static const char *const proj[] = {"gate", "up", "down"};

    size_t cap = 16 + L * (stacked ? 3 : E * 3), n = 0;
    tensor *t = calloc(cap, sizeof *t);
    if (!t)
        return 1;
    snprintf(t[n].name, sizeof t[n].name, "model.embed_tokens.weight");
    t[n].ndim = 2, t[n].shape[0] = 32768, t[n].shape[1] = C, n++;
    for (uint64_t l = 0; l < L; l++) {
        for (uint64_t e = 0; e < (stacked ? 1 : E); e++)
            for (int k = 0; k < 3; k++) {
                tensor *x = &t[n++];
                uint64_t r = k == 2 ? C : R, c = k == 2 ? R : C;
                if (stacked) {
                    snprintf(x->name, sizeof x->name,
                             "model.layers.%" PRIu64 ".mlp.switch_mlp.%s_proj.weight", l, proj[k]);
                    x->ndim = 3, x->shape[0] = E, x->shape[1] = r, x->shape[2] = c;
                } else {
                    snprintf(x->name, sizeof x->name,
                             "model.layers.%" PRIu64 ".mlp.experts.%" PRIu64 ".%s_proj.weight",
                             l, e, proj[k]);
                    x->ndim = 2, x->shape[0] = r, x->shape[1] = c;
                }
            }
    }
    snprintf(t[n].name, sizeof t[n].name, "lm_head.weight");
    t[n].ndim = 2, t[n].shape[0] = 32768, t[n].shape[1] = C, n++;

    size_t hcap = n * 160 + 64, hl = 0;
    char *h = malloc(hcap);
    uint64_t off = 0;
    hl += (size_t)snprintf(h + hl, hcap - hl, "{");
    for (size_t i = 0; i < n; i++) {
        t[i].bytes = 2;
        for (int d = 0; d < t[i].ndim; d++)
            t[i].bytes *= t[i].shape[d];
        hl += (size_t)snprintf(h + hl, hcap - hl, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[",
                               i ? "," : "", t[i].name);
        for (int d = 0; d < t[i].ndim; d++)
            hl += (size_t)snprintf(h + hl, hcap - hl, "%s%" PRIu64, d ? "," : "", t[i].shape[d]);
        hl += (size_t)snprintf(h + hl, hcap - hl, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                               off, off + t[i].bytes);
        off += t[i].bytes;
    }
    hl += (size_t)snprintf(h + hl, hcap - hl, "}");
    while (hl % 8)
        h[hl++] = ' ';

    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(h, 1, hl, f);
    size_t chunk = 8u << 20;
    uint8_t *buf = malloc(chunk);
    for (uint64_t left = off; left > 0;) {
        size_t k = left < chunk ? (size_t)left : chunk;
        fill(buf, chunk);
        if (fwrite(buf, 1, k, f) != k) {
            perror(path);
            return 1;
        }
        left -= k;
    }
    if (fclose(f)) {
        perror(path);
        return 1;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"model_type\": \"qwen3_moe\", \"num_experts\": %" PRIu64 ", "
               "\"num_experts_per_tok\": 8}\n", E);
    fclose(f);
    printf("%s/model.safetensors: %" PRIu64 " bytes of tensors\n", dir, off);
    free(buf);
    free(h);
    free(t);
    return 0;
}
