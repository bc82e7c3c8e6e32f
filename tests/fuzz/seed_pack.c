/*
 * seed_pack.c - write the seed corpora of fuzz_safetensors and fuzz_gguf:
 * small checkpoints made by the test fixture writers (tests/pack_fixtures.c),
 * cut after their headers, with the length of the rest in front (the
 * targets' input form), plus an index.json and a config.json; and of
 * fuzz_index: index vaults of the fixtures (smoe index), behind its
 * control byte.
 *
 * Usage: fuzz_seed_pack CORPUSDIR (it writes into CORPUSDIR/safetensors,
 * CORPUSDIR/gguf and CORPUSDIR/index). Not run by ctest; rerun by hand when
 * the fixtures or the formats change (docs/testing.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smoe_tier.h"
#include "pack.h"
#include "pack_fixtures.h"

static int put(const char *dir, const char *name, uint32_t w, const uint8_t *b, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        return -1;
    uint8_t h[4] = {(uint8_t)w, (uint8_t)(w >> 8), (uint8_t)(w >> 16), (uint8_t)(w >> 24)};
    int ok = fwrite(h, 1, 4, f) == 4 && fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The shortest prefix the parser accepts without asking for more. */
static size_t header_len(const uint8_t *b, size_t n, int gguf)
{
    for (size_t k = 8; k <= n; k++) {
        pack_source s;
        pack_source_init(&s);
        int rc = gguf ? pack_gguf_parse(b, k, n, "seed", 0, &s)
                      : pack_st_parse_header(b, k, n, "seed", 0, &s);
        pack_source_free(&s);
        if (rc != PACK_NEED_MORE)
            return rc == 0 ? k : 0;
    }
    return 0;
}

static int seed_file(const char *tmp, const char *dir, const char *name, int gguf)
{
    size_t n;
    uint8_t *b = fx_read_all(tmp, &n);
    size_t k = b ? header_len(b, n, gguf) : 0;
    int rc = k ? put(dir, name, (uint32_t)(n - k), b, k) : -1;
    if (!k)
        fprintf(stderr, "%s: the parser does not accept it\n", name);
    free(b);
    return rc;
}

enum { GGML_F32 = 0, GGML_Q4_K = 12, GGML_Q8_0 = 8 };

/* fuzz_index's input: a control byte, then the index vault of source. */
static int seed_index(const char *tmp, const char *dir, const char *name, const char *source,
                      int no_hash, uint8_t ctl)
{
    char vault[4200], p[4200];
    snprintf(vault, sizeof vault, "%s/seed.smoe", tmp);
    pack_index_opts o = {vault, NULL, no_hash, 0, NULL, 0};
    pack_index_result r;
    if (pack_index_run(source, NULL, &o, &r) < 0) {
        fprintf(stderr, "%s: %s\n", name, smoe_last_error());
        return -1;
    }
    size_t n;
    uint8_t *b = fx_read_all(vault, &n);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = b ? fopen(p, "wb") : NULL;
    int ok = f && fwrite(&ctl, 1, 1, f) == 1 && fwrite(b, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    free(b);
    unlink(vault);
    return ok ? 0 : -1;
}

/* Index vaults of a few of the test models, each source kind. */
static int seed_indexes(const char *tmp, const char *dir)
{
    char a[4200], b[4200];
    int rc = 0;
    fx_model m = {0};
    snprintf(a, sizeof a, "%s/model.safetensors", tmp);
    fx_model_qwen(&m, 4);
    rc |= fx_write_st(a, &m, 0, m.n, NULL) || seed_index(tmp, dir, "seed-qwen", a, 0, 0) ||
          seed_index(tmp, dir, "seed-qwen-nohash", a, 1, 0x40) ||
          fx_write_st_pad(a, &m, 0, m.n, NULL, 5) ||
          seed_index(tmp, dir, "seed-odd", a, 0, 0x80 | 3);
    unlink(a);
    fx_free(&m);
    size_t half = fx_model_mixtral(&m);
    snprintf(a, sizeof a, "%s/s1.safetensors", tmp);
    snprintf(b, sizeof b, "%s/s2.safetensors", tmp);
    rc |= fx_write_st(a, &m, 0, half, NULL) || fx_write_st(b, &m, half, m.n - half, NULL);
    fx_free(&m);
    snprintf(a, sizeof a, "%s", tmp);
    rc |= seed_index(tmp, dir, "seed-sharded", a, 0, 5);
    snprintf(a, sizeof a, "%s/s1.safetensors", tmp);
    unlink(a);
    unlink(b);
    snprintf(a, sizeof a, "%s/tiny.gguf", tmp);
    fx_model_gguf(&m, 1);
    rc |= fx_write_gguf(a, &m, FX_GGUF_KV, 4, 64) || seed_index(tmp, dir, "seed-gguf", a, 0, 1);
    unlink(a);
    fx_free(&m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUSDIR\n", argv[0]);
        return 2;
    }
    char st[4096], gg[4096], ix[4096], tmp[] = "/tmp/smoe-seed-XXXXXX";
    snprintf(st, sizeof st, "%s/safetensors", argv[1]);
    snprintf(gg, sizeof gg, "%s/gguf", argv[1]);
    snprintf(ix, sizeof ix, "%s/index", argv[1]);
    if (!mkdtemp(tmp))
        return 1;
    char file[4200];
    snprintf(file, sizeof file, "%s/f", tmp);
    int rc = 0;

    /* safetensors: a dense tensor, experts per name, stacked experts. */
    fx_model m = {0};
    static const uint64_t emb[] = {8, 16}, g[] = {4, 16}, st3[] = {2, 4, 16}, norm[] = {16};
    fx_add(&m, "model.embed_tokens.weight", "BF16", 2, emb, 16, 1);
    fx_add(&m, "model.layers.0.mlp.experts.0.gate_proj.weight", "BF16", 2, g, 16, 2);
    fx_add(&m, "model.layers.0.mlp.experts.1.up_proj.weight", "F16", 2, g, 16, 3);
    fx_add(&m, "model.layers.0.mlp.switch_mlp.down_proj.weight", "U32", 3, st3, 32, 4);
    fx_add(&m, "model.norm.weight", "F32", 1, norm, 32, 5);
    rc |= fx_write_st(file, &m, 0, m.n, NULL) || seed_file(file, st, "seed-model", 0);
    rc |= fx_write_st(file, &m, 4, 1, NULL) || seed_file(file, st, "seed-one", 0);
    fx_free(&m);
    static const char index[] =
        "{\"metadata\":{\"total_size\":1234},\"weight_map\":{"
        "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
        "\"model.layers.0.mlp.experts.0.gate_proj.weight\":\"model-00002-of-00002.safetensors\","
        "\"model.norm.weight\":\"model-00002-of-00002.safetensors\"}}";
    rc |= put(st, "seed-index", 2u << 30, (const uint8_t *)index, strlen(index));
    static const char config[] =
        "{\"model_type\":\"qwen3_moe\",\"num_experts\":128,\"num_experts_per_tok\":8,"
        "\"quantization\":{\"group_size\":64,\"bits\":4},\"_name_or_path\":\"tiny\"}";
    rc |= put(st, "seed-config", 3u << 30, (const uint8_t *)config, strlen(config));

    /* GGUF: stacked expert tensors, quantised, key-values of a MoE. */
    static const uint64_t gemb[] = {32, 256}, gnorm[] = {256}, gexp[] = {4, 8, 256};
    fx_add_ggml(&m, "token_embd.weight", GGML_Q8_0, 32, 34, 2, gemb, 10);
    fx_add_ggml(&m, "blk.0.attn_norm.weight", GGML_F32, 1, 4, 1, gnorm, 11);
    fx_add_ggml(&m, "blk.0.ffn_gate_exps.weight", GGML_Q4_K, 256, 144, 3, gexp, 12);
    fx_add_ggml(&m, "blk.0.ffn_down_exps.weight", GGML_Q4_K, 256, 144, 3, gexp, 13);
    static const fx_kv kv[] = {
        {"general.architecture", "qwen3moe", 0},
        {"general.name", "Tiny MoE", 0},
        {"qwen3moe.expert_count", NULL, 4},
        {"qwen3moe.expert_used_count", NULL, 2},
    };
    rc |= fx_write_gguf(file, &m, kv, 4, 0) || seed_file(file, gg, "seed-moe", 1);
    rc |= fx_write_gguf(file, &m, kv, 1, 64) || seed_file(file, gg, "seed-align64", 1);
    fx_free(&m);
    unlink(file);
    rc |= seed_indexes(tmp, ix);
    rmdir(tmp);
    return rc ? 1 : 0;
}
