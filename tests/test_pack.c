/*
 * Description: `smoe pack`. Writes small safetensors and GGUF checkpoints
 * with known bytes (per-expert tensors, stacked 3-D tensors, mlx-quantised
 * tensors with scales and biases, a sharded set, GGUF with quantised ggml
 * types, Nemotron-H per expert and stacked, JetMoE), packs each, and checks that every component's bytes in the vault
 * equal the source slice, that the scout file holds every other tensor byte
 * for byte, and that `smoe verify` passes. Each class of bad input (a
 * truncated file, a header length past the end, JSON that is not an object,
 * an unknown dtype, shape and size that disagree, overlapping or
 * out-of-file ranges, a missing shard, an incomplete layer, inconsistent
 * expert shapes) must fail with a message naming the file and the tensor
 * and leave no output file. The buffer parsers also take mutated headers.
 * pack_fifo_shard_refused: `smoe pack` and `smoe index` on a directory or a
 * shard index with a FIFO among the shards exit at once, naming it.
 * shard_index_over_65536_shards_refused: an index naming more shard files
 * than a vault may have sources is refused, naming the bound.
 */
#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "smoe_tier.h"
#include "pack.h"
#include "pack_fixtures.h"
#include "smoe/smoe.h"
#include "testutil.h"

/* ---- per-test directory ------------------------------------------------ */

static char dir[512];

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("SMOE_TEST_TMPDIR");
    snprintf(dir, sizeof dir, "%s/packXXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
    return 0;
}

static const char *path(const char *name)
{
    static char bufs[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(bufs[k], sizeof bufs[k], "%s/%s", dir, name);
    return bufs[k];
}

/* No vault, no scout, no temporary file in the directory. */
static void assert_no_output(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        int bad = strstr(de->d_name, ".tmp.") != NULL ||
                  (n > 5 && !strcmp(de->d_name + n - 5, ".smoe")) ||
                  (n > 6 && !strcmp(de->d_name + n - 6, ".scout"));
        if (bad)
            fail_msg("output file left behind: %s", de->d_name);
    }
    closedir(d);
}

static int pack(const char *source, const char *extra_pattern)
{
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    if (extra_pattern)
        assert_int_equal(pack_patterns_add(&ps, extra_pattern), 0);
    pack_opts o;
    memset(&o, 0, sizeof o);
    o.out = path("out.smoe");
    pack_result r;
    int rc = pack_run(source, &ps, &o, &r);
    pack_patterns_free(&ps);
    return rc;
}

/* Pack must fail with code and a message holding each of the words. */
static void expect_failure(const char *source, int code, const char *w1, const char *w2)
{
    int rc = pack(source, NULL);
    const char *msg = smoe_last_error();
    if (rc != code)
        fail_msg("expected %s, got %s: %s", smoe_err_name(code), smoe_err_name(rc), msg);
    if (w1 && !strstr(msg, w1))
        fail_msg("message lacks '%s': %s", w1, msg);
    if (w2 && !strstr(msg, w2))
        fail_msg("message lacks '%s': %s", w2, msg);
    assert_no_output();
}

/* ---- checking a packed vault -------------------------------------------- */

typedef fx_expect expect;

static int in_list(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

/*
 * Check the vault against the fixture: entries (layers x experts minus
 * dense layers), every component's bytes, the scout file, `smoe verify`.
 */
static void check_pack(const fx_model *m, const expect *ex, size_t nex, uint32_t layers,
                       uint32_t experts, uint32_t dense_layers)
{
    smoe__vault v;
    int rc = smoe__vault_load(&v, path("out.smoe"), smoe__io_get());
    if (rc)
        fail_msg("vault does not load: %s", smoe_last_error());
    assert_int_equal(v.layers, layers);
    assert_int_equal(v.experts, experts);
    assert_int_equal(v.entries, (layers - dense_layers) * experts);
    size_t vn;
    uint8_t *vb = fx_read_all(path("out.smoe"), &vn);
    assert_non_null(vb);

    char **used = calloc(m->n, sizeof *used);
    size_t n_used = 0;
    uint32_t present = 0;
    for (uint32_t l = 0; l < layers; l++)
        for (uint32_t e = 0; e < experts; e++) {
            const smoe__vault_entry *en = smoe__vault_entry_of(&v, l, e);
            if (!en)
                continue;
            present++;
            const smoe__vault_layout *lay = &v.layouts[en->layout];
            assert_int_equal(lay->n, nex);
            for (uint32_t c = 0; c < lay->n; c++) {
                const smoe_component *comp = &v.components[lay->first + c];
                const expect *x = NULL;
                for (size_t i = 0; i < nex; i++)
                    if (!strcmp(ex[i].comp, comp->name))
                        x = &ex[i];
                if (!x)
                    fail_msg("unexpected component '%s'", comp->name);
                assert_int_equal(comp->offset % 256, 0);
                char tn[256];
                fx_name(tn, sizeof tn, x->tensor, l, e);
                const fx_tensor *t = fx_find(m, tn);
                if (!t)
                    fail_msg("no fixture tensor %s", tn);
                uint64_t slice = x->stacked ? t->nbytes / t->shape[0] : t->nbytes;
                assert_int_equal(comp->nbytes, slice);
                assert_true(en->offset + comp->offset + slice <= vn);
                if (memcmp(vb + en->offset + comp->offset,
                           t->data + (x->stacked ? e * slice : 0), slice))
                    fail_msg("layer %u expert %u component %s differs from %s", l, e,
                             comp->name, tn);
                if (!in_list(used, n_used, tn))
                    used[n_used++] = strdup(tn);
            }
        }
    assert_int_equal(present, v.entries);

    /* The scout file: every other tensor, byte for byte. */
    pack_scout sc;
    rc = pack_scout_load(path("out.scout"), &sc);
    if (rc)
        fail_msg("scout does not load: %s", smoe_last_error());
    assert_int_equal(pack_scout_check_data(path("out.scout"), &sc), 0);
    size_t sn;
    uint8_t *sb = fx_read_all(path("out.scout"), &sn);
    assert_non_null(sb);
    assert_int_equal(sc.count, m->n - n_used);
    for (size_t i = 0; i < m->n; i++) {
        const fx_tensor *t = &m->t[i];
        if (in_list(used, n_used, t->name))
            continue;
        const pack_scout_entry *se = NULL;
        for (uint32_t k = 0; k < sc.count; k++)
            if (!strcmp(sc.e[k].name, t->name))
                se = &sc.e[k];
        if (!se)
            fail_msg("dense tensor %s is not in the scout file", t->name);
        assert_int_equal(se->nbytes, t->nbytes);
        assert_int_equal(se->offset % 64, 0);
        assert_int_equal(se->ndim, t->ndim);
        assert_memory_equal(se->shape, t->shape, t->ndim * sizeof *t->shape);
        assert_memory_equal(sb + se->offset, t->data, t->nbytes);
    }
    pack_scout_free(&sc);
    for (size_t i = 0; i < n_used; i++)
        free(used[i]);
    free(used);
    free(sb);
    free(vb);
    smoe__vault_free(&v);

    const char *tool = getenv("SMOE_TOOL");
    if (tool && *tool) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "'%s' verify '%s' >/dev/null 2>&1", tool, path("out.smoe"));
        assert_int_equal(system(cmd), 0);
        snprintf(cmd, sizeof cmd, "'%s' inspect '%s' >/dev/null 2>&1", tool, path("out.smoe"));
        assert_int_equal(system(cmd), 0);
    }
}

static char *meta_of(const char *key)
{
    smoe__vault v;
    if (smoe__vault_load(&v, path("out.smoe"), smoe__io_get()))
        return NULL;
    const char *val = smoe__vault_meta(&v, key);
    char *r = val ? strdup(val) : NULL;
    smoe__vault_free(&v);
    return r;
}

static void assert_meta(const char *key, const char *want)
{
    char *got = meta_of(key);
    if (!got || strcmp(got, want))
        fail_msg("meta %s: expected '%s', got '%s'", key, want, got ? got : "(none)");
    free(got);
}

/* ---- fixtures ------------------------------------------------------------ */

static const uint64_t S_GATE[] = {8, 16};


static void write_qwen(fx_model *m)
{
    fx_model_qwen(m, 4);
    assert_int_equal(fx_write_st(path("model.safetensors"), m, 0, m->n, NULL), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"qwen3_moe\", \"num_experts\": 4,"
                                   " \"num_experts_per_tok\": 2, \"hidden_size\": 16}"),
                     0);
}

/* ---- packing each layout -------------------------------------------------- */

static void test_per_expert(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    /* Writing over the source is refused. */
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    pack_opts o;
    memset(&o, 0, sizeof o);
    o.out = path("model.safetensors");
    pack_result r;
    assert_int_equal(pack_run(path("model.safetensors"), &ps, &o, &r), SMOE_EINVAL);
    pack_patterns_free(&ps);
    assert_no_output();

    int rc = pack(path("model.safetensors"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    check_pack(&m, FX_QWEN_EX, 3, 3, 4, 1);
    assert_meta("arch", "qwen3_moe");
    assert_meta("top_k", "2");
    assert_meta("quant", "bf16");
    /* The model name falls back to the directory's name. */
    char *model = meta_of("model");
    assert_non_null(model);
    assert_non_null(strstr(dir, model));
    free(model);
    /* The whole directory as SOURCE gives the same vault. */
    unlink(path("out.smoe"));
    unlink(path("out.scout"));
    assert_int_equal(pack(dir, NULL), 0);
    check_pack(&m, FX_QWEN_EX, 3, 3, 4, 1);
    fx_free(&m);
}

static void test_sharded_mixtral(void **state)
{
    (void)state;
    fx_model m = {0};
    size_t half = fx_model_mixtral(&m);
    /* Two shards; layer 1's experts straddle them. */
    assert_int_equal(fx_write_st(path("model-00001-of-00002.safetensors"), &m, 0, half, NULL), 0);
    assert_int_equal(fx_write_st(path("model-00002-of-00002.safetensors"), &m, half, m.n - half,
                                 NULL), 0);
    char *ix = malloc(1 << 16);
    size_t k = (size_t)snprintf(ix, 1 << 16, "{\"metadata\": {\"total_size\": 0}, "
                                             "\"weight_map\": {");
    for (size_t i = 0; i < m.n; i++)
        k += (size_t)snprintf(ix + k, (1 << 16) - k, "%s\"%s\": \"model-0000%d-of-00002."
                              "safetensors\"", i ? ", " : "", m.t[i].name, i < half ? 1 : 2);
    snprintf(ix + k, (1 << 16) - k, "}}");
    assert_int_equal(fx_write_text(path("model.safetensors.index.json"), ix), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"mixtral\", \"num_local_experts\": 8,"
                                   " \"num_experts_per_tok\": 2}"),
                     0);
    int rc = pack(path("model.safetensors.index.json"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    check_pack(&m, FX_MIXTRAL_EX, 3, 2, 8, 0);
    assert_meta("arch", "mixtral");
    assert_meta("quant", "f16");

    /* A missing shard. */
    unlink(path("out.smoe"));
    unlink(path("out.scout"));
    unlink(path("model-00002-of-00002.safetensors"));
    expect_failure(path("model.safetensors.index.json"), SMOE_ENOENT,
                   "model-00002-of-00002.safetensors", "missing shard");
    free(ix);
    fx_free(&m);
}

/* mlx-style switch_mlp: the experts stacked in one 3-D tensor per layer. */
static void test_stacked(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_switch_mlp(&m);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    int rc = pack(path("model.safetensors"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    check_pack(&m, FX_SWITCH_EX, 3, 3, 6, 0);
    fx_free(&m);
}

/* Fused expert tensors with biases (gpt-oss style). */
static void test_stacked_fused(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_gpt_oss(&m);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"gpt_oss\", \"num_local_experts\": 4,"
                                   " \"experts_per_token\": 4}"),
                     0);
    int rc = pack(path("model.safetensors"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    check_pack(&m, FX_GPT_OSS_EX, 4, 2, 4, 0);
    assert_meta("top_k", "4");
    fx_free(&m);
}

/* mlx quantisation: U32 words plus .scales and .biases, bits from config. */
static void test_mlx_quantised(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_mlx(&m);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"qwen3_moe\", \"num_experts\": 4, "
                                   "\"num_experts_per_tok\": 2, \"quantization\": "
                                   "{\"group_size\": 32, \"bits\": 4}}"),
                     0);
    int rc = pack(path("model.safetensors"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    check_pack(&m, FX_MLX_EX, 9, 2, 4, 0);
    assert_meta("quant", "mlx_packed:4bit:g32");

    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("out.smoe"), smoe__io_get()), 0);
    assert_int_equal(v.n_layouts, 1);
    static const char *const order[] = {"gate", "gate.scales", "gate.biases", "up",
                                        "up.scales", "up.biases", "down", "down.scales",
                                        "down.biases"};
    for (uint32_t i = 0; i < 9; i++) {
        const smoe_component *c = &v.components[v.layouts[0].first + i];
        assert_string_equal(c->name, order[i]);
        if (i % 3 == 0) {
            assert_int_equal(c->dtype, SMOE_DTYPE_MLX_PACKED);
            assert_int_equal(c->quant_bits, 4);
            assert_int_equal(c->quant_group, 32);
        } else {
            assert_int_equal(c->dtype, SMOE_DTYPE_BF16);
        }
    }
    smoe__vault_free(&v);
    /* The quantised embedding is marked in the scout index too. */
    pack_scout sc;
    assert_int_equal(pack_scout_load(path("out.scout"), &sc), 0);
    for (uint32_t i = 0; i < sc.count; i++)
        if (!strcmp(sc.e[i].name, "model.embed_tokens.weight")) {
            assert_int_equal(sc.e[i].dtype, SMOE_DTYPE_MLX_PACKED);
            assert_int_equal(sc.e[i].quant_bits, 4);
        }
    pack_scout_free(&sc);

    /* Bits that do not fit the packed width are an error naming the tensor. */
    unlink(path("out.smoe"));
    unlink(path("out.scout"));
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"num_experts\": 4, \"quantization\": "
                                   "{\"group_size\": 32, \"bits\": 8}}"),
                     0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT, "model.safetensors",
                   "switch_mlp.gate_proj.weight': 8 packed words");
    fx_free(&m);
}

enum { GGML_F32 = 0, GGML_Q4_K = 12, GGML_Q6_K = 14, GGML_Q8_0 = 8 };


static void test_gguf(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_gguf(&m, 1);
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 64), 0);
    int rc = pack(path("tiny.gguf"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    check_pack(&m, FX_GGUF_EX, 3, 2, 4, 0);
    assert_meta("arch", "qwen3moe");
    assert_meta("model", "Tiny MoE");
    assert_meta("top_k", "2");
    assert_meta("quant", "ggml:q4_K+ggml:q6_K");
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("out.smoe"), smoe__io_get()), 0);
    assert_int_equal(v.n_layouts, 2);
    const smoe_component *c = &v.components[v.layouts[0].first];
    assert_string_equal(c->name, "gate");
    assert_int_equal(c->dtype, SMOE_DTYPE_GGML(GGML_Q4_K));
    assert_int_equal(c->ndim, 2);
    assert_int_equal(c->shape[0], 8);   /* outermost first, expert dim dropped */
    assert_int_equal(c->shape[1], 256);
    assert_int_equal(c->nbytes, 8 * 144);
    smoe__vault_free(&v);
    fx_free(&m);
}

/* Names no built-in pattern knows: an error, then a --pattern fixes it. */
static void test_user_pattern(void **state)
{
    (void)state;
    fx_model m = {0};
    uint64_t seed = 600;
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 3; e++)
            for (int k = 0; k < 2; k++) {
                char n[160];
                snprintf(n, sizeof n, "transformer.h.%u.moe.expert_%u.%s", l, e,
                         k ? "fc_out" : "fc_in");
                fx_add(&m, n, "F32", 2, S_GATE, 32, seed++);
            }
    assert_int_equal(fx_write_st(path("odd.safetensors"), &m, 0, m.n, NULL), 0);
    expect_failure(path("odd.safetensors"), SMOE_ENOENT, "no expert tensors", NULL);
    int rc = pack(path("odd.safetensors"),
                  "expert:transformer.h.{L}.moe.expert_{E}.{C}:fc_in=up,fc_out=down");
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    static const expect ex[] = {
        {"up", "transformer.h.{L}.moe.expert_{E}.fc_in", 0},
        {"down", "transformer.h.{L}.moe.expert_{E}.fc_out", 0},
    };
    check_pack(&m, ex, 2, 2, 3, 0);
    fx_free(&m);
}

/* NVIDIA Nemotron-H: no gate, Mamba layers without experts; per expert and
 * stacked. */
static void test_nemotron_h(void **state)
{
    (void)state;
    for (int stacked = 0; stacked < 2; stacked++) {
        fx_model m = {0};
        fx_model_nemotron_h(&m, stacked);
        assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
        assert_int_equal(fx_write_text(path("config.json"),
                                       "{\"model_type\": \"nemotron_h\", "
                                       "\"n_routed_experts\": 4, \"num_experts_per_tok\": 2}"),
                         0);
        int rc = pack(path("model.safetensors"), NULL);
        if (rc)
            fail_msg("pack failed: %s", smoe_last_error());
        static const expect per[] = {
            {"up", "backbone.layers.{L}.mixer.experts.{E}.up_proj.weight", 0},
            {"down", "backbone.layers.{L}.mixer.experts.{E}.down_proj.weight", 0},
        };
        static const expect stk[] = {
            {"up", "backbone.layers.{L}.mixer.experts.up_proj", 1},
            {"down", "backbone.layers.{L}.mixer.experts.down_proj", 1},
        };
        /* layers 0 and 2 are Mamba layers: no entries */
        check_pack(&m, stacked ? stk : per, 2, 4, 4, 2);
        assert_meta("arch", "nemotron_h");
        unlink(path("out.smoe"));
        unlink(path("out.scout"));
        fx_free(&m);
    }
}

/* JetMoE: stacked input_linear (gate and up) and output_linear; its
 * attention experts stay in the scout file. */
static void test_jetmoe(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_jetmoe(&m);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"jetmoe\", \"num_local_experts\": 4, "
                                   "\"num_experts_per_tok\": 2}"),
                     0);
    int rc = pack(path("model.safetensors"), NULL);
    if (rc)
        fail_msg("pack failed: %s", smoe_last_error());
    static const expect ex[] = {
        {"gate_up", "model.layers.{L}.mlp.input_linear.weight", 1},
        {"down", "model.layers.{L}.mlp.output_linear.weight", 1},
    };
    check_pack(&m, ex, 2, 2, 4, 0);
    assert_meta("top_k", "2");
    fx_free(&m);
}

static void test_pattern_syntax(void **state)
{
    (void)state;
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    static const char *const bad[] = {
        "expert",                                  /* no template */
        "dense:a.{L}.{E}.{C}",                     /* unknown kind */
        "expert:a.{L}.{C}",                        /* no {E} */
        "stacked:a.{L}.{E}.{C}",                   /* {E} in a stacked pattern */
        "expert:a.{L}.{E}",                        /* no {C} */
        "expert:a.{L}.{E}.{C}.{X}",                /* unknown placeholder */
        "expert:a.{L}.{E}.{C}:w1",                 /* map entry without '=' */
        "expert:a.{L}.{E}.{C}:w1=gate,w2=gate",    /* repeated component */
        "expert:a.{L}.{E}.{C}:",                   /* empty map */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (pack_patterns_add(&ps, bad[i]) != SMOE_EINVAL)
            fail_msg("pattern '%s' was accepted", bad[i]);
    pack_match mt;
    assert_int_equal(pack_patterns_match(&ps, "model.layers.12.mlp.experts.7.down_proj.weight",
                                         &mt), 1);
    assert_int_equal(mt.layer, 12);
    assert_int_equal(mt.expert, 7);
    assert_string_equal(mt.comp, "down");
    assert_int_equal(pack_patterns_match(&ps, "model.layers.3.block_sparse_moe.experts.1.w3.weight",
                                         &mt), 1);
    assert_string_equal(mt.comp, "up");
    assert_int_equal(pack_patterns_match(&ps, "language_model.model.layers.2.mlp.switch_mlp."
                                              "gate_proj.scales", &mt), 1);
    assert_int_equal(mt.kind, PACK_PAT_STACKED);
    assert_string_equal(mt.comp, "gate.scales");
    assert_int_equal(pack_patterns_match(&ps, "blk.5.ffn_up_exps.weight", &mt), 1);
    assert_int_equal(mt.layer, 5);
    assert_string_equal(mt.comp, "up");
    /* Not experts: shared experts, routers, dense MLPs. */
    assert_int_equal(pack_patterns_match(&ps, "model.layers.1.mlp.shared_experts.gate_proj.weight",
                                         &mt), 0);
    assert_int_equal(pack_patterns_match(&ps, "model.layers.1.mlp.gate.weight", &mt), 0);
    assert_int_equal(pack_patterns_match(&ps, "blk.1.ffn_gate_inp.weight", &mt), 0);
    assert_int_equal(pack_patterns_match(&ps, "blk.1.ffn_gate_shexp.weight", &mt), 0);
    /* A user pattern is tried first. */
    assert_int_equal(pack_patterns_add(&ps, "stacked:blk.{L}.ffn_{C}_exps.weight:gate=g,up=u,"
                                            "down=d"), 0);
    assert_int_equal(pack_patterns_match(&ps, "blk.5.ffn_up_exps.weight", &mt), 1);
    assert_string_equal(mt.comp, "u");
    pack_patterns_free(&ps);
}

/* The expert tensor names transformers 5.17's save_pretrained writes for each
 * MoE architecture the Python binding covers (recorded from the checks in
 * docs/python.md): per-expert tensors for the models transformers converts
 * on load, fused 3-D tensors for gpt-oss and Llama 4 and for checkpoints
 * saved in the fused in-memory form. */
static void test_pattern_transformers5(void **state)
{
    (void)state;
    static const struct {
        const char *name, *comp;
        int kind;
        uint32_t layer, expert;
    } cases[] = {
        /* Mixtral: saved back under its original names */
        {"model.layers.0.block_sparse_moe.experts.3.w1.weight", "gate", PACK_PAT_EXPERT, 0, 3},
        {"model.layers.0.block_sparse_moe.experts.3.w2.weight", "down", PACK_PAT_EXPERT, 0, 3},
        /* Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3, GLM-4-MoE */
        {"model.layers.1.mlp.experts.7.gate_proj.weight", "gate", PACK_PAT_EXPERT, 1, 7},
        {"model.layers.1.mlp.experts.7.up_proj.weight", "up", PACK_PAT_EXPERT, 1, 7},
        /* gpt-oss: fused, transposed, with biases */
        {"model.layers.2.mlp.experts.gate_up_proj", "gate_up", PACK_PAT_STACKED, 2, 0},
        {"model.layers.2.mlp.experts.gate_up_proj_bias", "gate_up.bias", PACK_PAT_STACKED, 2, 0},
        {"model.layers.2.mlp.experts.down_proj_bias", "down.bias", PACK_PAT_STACKED, 2, 0},
        /* Llama 4 */
        {"model.layers.4.feed_forward.experts.gate_up_proj", "gate_up", PACK_PAT_STACKED, 4, 0},
        {"model.layers.4.feed_forward.experts.down_proj", "down", PACK_PAT_STACKED, 4, 0},
        /* transformers 5's in-memory fused form (Mixtral and the Qwen family) */
        {"model.layers.5.mlp.experts.gate_up_proj", "gate_up", PACK_PAT_STACKED, 5, 0},
        {"model.language_model.layers.5.mlp.experts.down_proj", "down", PACK_PAT_STACKED, 5, 0},
        /* NVIDIA Nemotron-H: up and down only, per expert and stacked */
        {"backbone.layers.1.mixer.experts.12.up_proj.weight", "up", PACK_PAT_EXPERT, 1, 12},
        {"backbone.layers.1.mixer.experts.12.down_proj.weight", "down", PACK_PAT_EXPERT, 1, 12},
        {"model.layers.3.mixer.experts.up_proj", "up", PACK_PAT_STACKED, 3, 0},
        {"model.layers.3.mixer.experts.down_proj", "down", PACK_PAT_STACKED, 3, 0},
        /* JetMoE: stacked, gate and up fused in input_linear */
        {"model.layers.6.mlp.input_linear.weight", "gate_up", PACK_PAT_STACKED, 6, 0},
        {"model.layers.6.mlp.output_linear.weight", "down", PACK_PAT_STACKED, 6, 0},
    };
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pack_match mt;
        if (pack_patterns_match(&ps, cases[i].name, &mt) != 1)
            fail_msg("%s: not recognised as an expert tensor", cases[i].name);
        assert_string_equal(mt.comp, cases[i].comp);
        assert_int_equal(mt.kind, cases[i].kind);
        assert_int_equal(mt.layer, cases[i].layer);
        if (cases[i].kind == PACK_PAT_EXPERT)
            assert_int_equal(mt.expert, cases[i].expert);
    }
    /* Their shared experts, routers and routing biases stay dense. */
    static const char *const dense[] = {
        "model.layers.1.mlp.shared_expert.gate_proj.weight",
        "model.layers.1.mlp.shared_expert_gate.weight",
        "model.layers.1.mlp.shared_experts.down_proj.weight",
        "model.layers.1.mlp.gate.e_score_correction_bias",
        "model.layers.2.mlp.router.weight",
        "model.layers.2.mlp.router.bias",
        "model.layers.4.feed_forward.router.weight",
        "model.layers.4.feed_forward.shared_expert.up_proj.weight",
        "backbone.layers.1.mixer.shared_experts.up_proj.weight",
        "backbone.layers.1.mixer.gate.weight",
        "backbone.layers.0.mixer.in_proj.weight",
        "model.layers.6.self_attention.experts.input_linear.weight",
        "model.layers.6.mlp.router.layer.weight",
        "model.layers.6.mlp.bias",
    };
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        pack_match mt;
        if (pack_patterns_match(&ps, dense[i], &mt) != 0)
            fail_msg("%s: taken for an expert tensor (%s)", dense[i], mt.comp);
    }
    pack_patterns_free(&ps);
}

/* ---- bad input ------------------------------------------------------------ */

static void test_bad_truncated(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    size_t n;
    uint8_t *b = fx_read_all(path("model.safetensors"), &n);
    assert_non_null(b);
    free(b);
    assert_int_equal(fx_truncate(path("model.safetensors"), n - 100), 0);
    expect_failure(path("model.safetensors"), SMOE_ERANGE, "model.safetensors",
                   "': bytes [");
    /* Cut inside the header: the header length runs past the end. */
    assert_int_equal(fx_truncate(path("model.safetensors"), 200), 0);
    expect_failure(path("model.safetensors"), SMOE_ETRUNC, "model.safetensors",
                   "header length");
    /* Shorter than the length field itself. */
    assert_int_equal(fx_truncate(path("model.safetensors"), 5), 0);
    expect_failure(path("model.safetensors"), SMOE_ETRUNC, "model.safetensors", NULL);
    fx_free(&m);
}

static void test_bad_header_length(void **state)
{
    (void)state;
    uint8_t b[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    FILE *f = fopen(path("model.safetensors"), "wb");
    assert_non_null(f);
    fwrite(b, 1, sizeof b, f);
    fclose(f);
    expect_failure(path("model.safetensors"), SMOE_ETRUNC, "model.safetensors",
                   "past the end");
}

static void test_bad_json(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, "[1, 2, 3]"), 0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT, "model.safetensors",
                   "not a JSON object");
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, "{\"a\": \"b\"}"), 0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT, "model.safetensors", "'a'");
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, "{\"a\": {\"dtype\""),
                     0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT, "model.safetensors",
                   "not valid JSON");
    /* An index that is not an object. */
    assert_int_equal(fx_write_text(path("model.safetensors.index.json"), "\"weights\""), 0);
    expect_failure(path("model.safetensors.index.json"), SMOE_EFORMAT,
                   "model.safetensors.index.json", "not a JSON object");
    fx_free(&m);
}

static void test_bad_dtype(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    snprintf(m.t[5].dtype, sizeof m.t[5].dtype, "Q9_X");
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT, m.t[5].name, "unknown dtype");
    fx_free(&m);
}

static void test_bad_size(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    m.t[7].shape[0] = 9; /* 9 x 16 bf16 is 288 bytes; the data has 256 */
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT, m.t[7].name, "288 bytes");
    fx_free(&m);
}

static void test_bad_ranges(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    /* Tensor 3 claims the bytes of tensor 2 (same size). */
    uint64_t off = 0;
    for (int i = 0; i < 2; i++)
        off += m.t[i].nbytes;
    m.t[3].begin_override = (int64_t)off;
    m.t[3].end_override = (int64_t)(off + m.t[3].nbytes);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_EOVERLAP, m.t[3].name, "overlap");
    /* And one past the end of the file. */
    m.t[3].begin_override = 1 << 20;
    m.t[3].end_override = (1 << 20) + (int64_t)m.t[3].nbytes;
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_ERANGE, m.t[3].name, "outside");
    fx_free(&m);
}

static void test_bad_missing_expert(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    /* Drop layer 2's expert 3 (its three tensors): keep the rest. */
    fx_model k = {0};
    for (size_t i = 0; i < m.n; i++)
        if (!strstr(m.t[i].name, "layers.2.mlp.experts.3.")) {
            fx_tensor *t = fx_add(&k, m.t[i].name, m.t[i].dtype, m.t[i].ndim, m.t[i].shape,
                                  0, 0);
            free(t->data);
            t->data = malloc(m.t[i].nbytes);
            memcpy(t->data, m.t[i].data, m.t[i].nbytes);
            t->nbytes = m.t[i].nbytes;
        }
    assert_int_equal(fx_write_st(path("model.safetensors"), &k, 0, k.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_ENOENT, "layer 2", "expert 3 is missing");
    /* With config.json's count, an expert missing from every layer is caught. */
    assert_int_equal(fx_write_text(path("config.json"), "{\"num_experts\": 5}"), 0);
    expect_failure(path("model.safetensors"), SMOE_ENOENT, "expert 4 is missing",
                   "num_experts");
    /* One expert lacking one component. */
    unlink(path("config.json"));
    fx_free(&k);
    for (size_t i = 0; i < m.n; i++)
        if (strcmp(m.t[i].name, "model.layers.1.mlp.experts.2.down_proj.weight")) {
            fx_tensor *t = fx_add(&k, m.t[i].name, m.t[i].dtype, m.t[i].ndim, m.t[i].shape,
                                  0, 0);
            free(t->data);
            t->data = malloc(m.t[i].nbytes);
            memcpy(t->data, m.t[i].data, m.t[i].nbytes);
            t->nbytes = m.t[i].nbytes;
        }
    assert_int_equal(fx_write_st(path("model.safetensors"), &k, 0, k.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_ENOENT, "expert 2", "'down'");
    fx_free(&k);
    fx_free(&m);
}

static void test_bad_inconsistent(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    /* Expert 2 of layer 1 has its gate transposed: same bytes, other shape. */
    for (size_t i = 0; i < m.n; i++)
        if (!strcmp(m.t[i].name, "model.layers.1.mlp.experts.2.gate_proj.weight")) {
            m.t[i].shape[0] = 16;
            m.t[i].shape[1] = 8;
        }
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    expect_failure(path("model.safetensors"), SMOE_EFORMAT,
                   "model.layers.1.mlp.experts.2.gate_proj.weight", "inconsistent");
    fx_free(&m);
}

static void test_bad_gguf(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_gguf(&m, 0);
    /* Truncated inside the tensor infos. */
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 0), 0);
    assert_int_equal(fx_truncate(path("tiny.gguf"), 600), 0);
    expect_failure(path("tiny.gguf"), SMOE_ETRUNC, "tiny.gguf", "file ends");
    /* Truncated inside the data. */
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 0), 0);
    size_t n;
    free(fx_read_all(path("tiny.gguf"), &n));
    assert_int_equal(fx_truncate(path("tiny.gguf"), n - 40), 0);
    expect_failure(path("tiny.gguf"), SMOE_ERANGE, "tiny.gguf", "output_norm.weight");
    /* An unknown ggml type (4 was removed from ggml). */
    m.t[1].ggml_type = 4;
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 0), 0);
    expect_failure(path("tiny.gguf"), SMOE_EFORMAT, m.t[1].name, "unknown ggml type");
    m.t[1].ggml_type = GGML_F32;
    /* A misaligned tensor offset, then overlapping ones. */
    m.t[2].offset_override = 4;
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 0), 0);
    expect_failure(path("tiny.gguf"), SMOE_EALIGN, m.t[2].name, "alignment");
    m.t[2].offset_override = 0;
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 0), 0);
    expect_failure(path("tiny.gguf"), SMOE_EOVERLAP, m.t[2].name, "overlap");
    m.t[2].offset_override = -1;
    /* The header's expert count disagrees with the tensors. */
    static const fx_kv kv6[] = {
        {"general.architecture", "qwen3moe", 0},
        {"qwen3moe.expert_count", NULL, 6},
    };
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, kv6, 2, 0), 0);
    expect_failure(path("tiny.gguf"), SMOE_EFORMAT, "blk.0.ffn_gate_exps.weight",
                   "expert_count");
    /* Not GGUF at all. */
    assert_int_equal(fx_write_text(path("tiny.gguf"), "GGUX0000000000000000000000000000"), 0);
    expect_failure(path("tiny.gguf"), SMOE_EMAGIC, "tiny.gguf", NULL);
    fx_free(&m);
}

/* ---- robustness of the buffer parsers -------------------------------------- */

static uint64_t rng = 12345;

static uint32_t next_rand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

typedef int (*parse_fn)(const uint8_t *, size_t, uint64_t, const char *, uint32_t,
                        pack_source *);

static void mutate_and_parse(const uint8_t *orig, size_t n, size_t region, parse_fn fn)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (int it = 0; it < 3000; it++) {
        memcpy(b, orig, n);
        int flips = 1 + (int)(next_rand() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = next_rand() % region;
            switch (next_rand() % 3) {
            case 0: b[at] ^= (uint8_t)(1u << (next_rand() % 8)); break;
            case 1: b[at] = (uint8_t)next_rand(); break;
            default: b[at] = (uint8_t)"{}[]\",:0129\xff"[next_rand() % 13]; break;
            }
        }
        size_t len = next_rand() % 8 ? n : next_rand() % n;
        pack_source s;
        pack_source_init(&s);
        uint32_t file;
        assert_int_equal(pack_source_add_file(&s, "fuzz", len, &file), 0);
        int rc = fn(b, len, len, "fuzz", file, &s);
        assert_true(rc <= 0);
        pack_source_free(&s);
    }
    free(b);
}

static void test_parser_mutations(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 2);
    assert_int_equal(fx_write_st(path("model.safetensors"), &m, 0, m.n, NULL), 0);
    size_t n;
    uint8_t *b = fx_read_all(path("model.safetensors"), &n);
    assert_non_null(b);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    mutate_and_parse(b, n, (size_t)(8 + hl), pack_st_parse_header);
    free(b);
    fx_free(&m);

    fx_model_gguf(&m, 1);
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 64), 0);
    b = fx_read_all(path("tiny.gguf"), &n);
    assert_non_null(b);
    mutate_and_parse(b, n, 700, pack_gguf_parse);
    free(b);
    fx_free(&m);
}

static void test_scout_corrupt(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    assert_int_equal(pack(path("model.safetensors"), NULL), 0);
    size_t n;
    uint8_t *b = fx_read_all(path("out.scout"), &n);
    assert_non_null(b);
    pack_scout sc;
    assert_int_equal(pack_scout_parse(b, n, n, "out.scout", &sc), 0);
    pack_scout_free(&sc);
    /* A flipped bit in the index, the header, the magic; a short file. */
    b[PACK_SCOUT_HEADER + 3] ^= 1;
    assert_int_equal(pack_scout_parse(b, n, n, "out.scout", &sc), SMOE_EHDRSUM);
    b[PACK_SCOUT_HEADER + 3] ^= 1;
    b[16] ^= 1;
    assert_true(pack_scout_parse(b, n, n, "out.scout", &sc) < 0);
    b[16] ^= 1;
    b[0] ^= 1;
    assert_int_equal(pack_scout_parse(b, n, n, "out.scout", &sc), SMOE_EMAGIC);
    b[0] ^= 1;
    assert_int_equal(pack_scout_parse(b, n - 64, n - 64, "out.scout", &sc), SMOE_ETRUNC);
    /* Damaged tensor bytes: the index still parses, the data check fails. */
    FILE *f = fopen(path("out.scout"), "r+b");
    assert_non_null(f);
    fseek(f, -70, SEEK_END);
    int c = fgetc(f);
    fseek(f, -70, SEEK_END); /* a write after a read needs a seek between (C11 7.21.5.3) */
    fputc(0x5a ^ c, f);
    fclose(f);
    assert_int_equal(pack_scout_load(path("out.scout"), &sc), 0);
    assert_int_equal(pack_scout_check_data(path("out.scout"), &sc), SMOE_ECHECKSUM);
    pack_scout_free(&sc);
    free(b);
    fx_free(&m);
}

static void test_interrupted(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    static volatile sig_atomic_t stop = 1;
    pack_opts o;
    memset(&o, 0, sizeof o);
    o.out = path("out.smoe");
    o.stop = &stop;
    pack_result r;
    assert_int_equal(pack_run(path("model.safetensors"), &ps, &o, &r), SMOE_ESHUTDOWN);
    assert_no_output();
    pack_patterns_free(&ps);
    fx_free(&m);
}

/* The engine's view: open the packed vault with its scout file, claim an
 * expert, find its components by name, read the source's bytes there. */
static void test_stream_packed(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_gguf(&m, 1);
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 64), 0);
    assert_int_equal(pack(path("tiny.gguf"), NULL), 0);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 4;
    o.workers = 2;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    o.scout_path = path("out.scout");
    smoe_stream *s = NULL;
    int rc = smoe_open(path("out.smoe"), &o, &s);
    if (rc)
        fail_msg("smoe_open: %s: %s", smoe_err_name(rc), smoe_last_error());
    smoe_vault_info vi;
    memset(&vi, 0, sizeof vi);
    vi.struct_size = sizeof vi;
    assert_int_equal(smoe_vault_info_get(s, &vi), 0);
    assert_int_equal(vi.top_k, 2);
    assert_string_equal(smoe_meta_get(s, "arch"), "qwen3moe");
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 4; e += 3) {
            smoe_blob b;
            rc = smoe_claim_wait(s, l, e, UINT64_MAX, &b);
            if (rc < 0)
                fail_msg("claim (%u, %u): %s: %s", l, e, smoe_err_name(rc), smoe_last_error());
            static const char *const comps[] = {"gate", "up", "down"};
            for (int k = 0; k < 3; k++) {
                smoe_component c;
                assert_int_equal(smoe_layout_find(s, b.layout, comps[k], &c), 0);
                char tn[64];
                snprintf(tn, sizeof tn, "blk.%u.ffn_%s_exps.weight", l, comps[k]);
                const fx_tensor *t = fx_find(&m, tn);
                assert_non_null(t);
                uint64_t slice = t->nbytes / 4;
                assert_int_equal(c.nbytes, slice);
                assert_memory_equal((const uint8_t *)b.data + c.offset, t->data + e * slice,
                                    slice);
            }
            assert_int_equal(smoe_release(s, &b), 0);
        }
    assert_int_equal(smoe_close(s), 0);
    fx_free(&m);
}

/* A write that fails anywhere (scout or vault) fails the pack, leaving nothing. */
static void test_write_faults(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    int failures = 0;
    for (int at = 1; at < 1000; at++) {
        tu_fault f = {at, 0};
        smoe__io io = tu_fault_io(&f);
        smoe__io_set(&io);
        int rc = pack(path("model.safetensors"), NULL);
        smoe__io_set(NULL);
        if (rc == 0) {
            check_pack(&m, FX_QWEN_EX, 3, 3, 4, 1);
            break;
        }
        if (rc != SMOE_EIO)
            fail_msg("write %d failing gave %s: %s", at, smoe_err_name(rc), smoe_last_error());
        assert_no_output();
        failures++;
    }
    assert_true(failures > 10); /* the scout's writes and the vault's were both hit */
    fx_free(&m);
}

/* The command line: exit codes, --scout, no output on bad input. */
static void test_cli(void **state)
{
    (void)state;
    const char *tool = getenv("SMOE_TOOL");
    if (!tool || !*tool)
        skip();
    fx_model m = {0};
    write_qwen(&m);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' pack --quiet --out '%s' --scout '%s' '%s' >/dev/null",
             tool, path("a.smoe"), path("dense.bin"), dir);
    assert_int_equal(system(cmd), 0);
    struct stat st;
    assert_int_equal(stat(path("a.smoe"), &st), 0);
    assert_int_equal(stat(path("dense.bin"), &st), 0);
    char json[1024];
    snprintf(json, sizeof json, "%s", path("inspect.json"));
    snprintf(cmd, sizeof cmd, "'%s' inspect --json --scout '%s' '%s' > '%s'", tool,
             path("dense.bin"), path("a.smoe"), json);
    assert_int_equal(system(cmd), 0);
    uint64_t jn;
    char *js = (char *)tu_read_file(json, &jn);
    js = realloc(js, (size_t)jn + 1);
    assert_non_null(js);
    js[jn] = 0;
    tu_expect_contains(js, "\"name\":\"model.embed_tokens.weight\"");
    free(js);
    unlink(json);
    snprintf(cmd, sizeof cmd, "'%s' verify --scout '%s' '%s' >/dev/null", tool,
             path("dense.bin"), path("a.smoe"));
    assert_int_equal(system(cmd), 0);
    /* A damaged scout tensor fails verify. */
    FILE *f = fopen(path("dense.bin"), "r+b");
    assert_non_null(f);
    fseek(f, -64, SEEK_END);
    int c = fgetc(f);
    fseek(f, -64, SEEK_END); /* a write after a read needs a seek between (C11 7.21.5.3) */
    fputc(0xa5 ^ c, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' verify --scout '%s' '%s' >/dev/null 2>&1", tool,
             path("dense.bin"), path("a.smoe"));
    assert_int_not_equal(system(cmd), 0);
    unlink(path("a.smoe"));
    unlink(path("dense.bin"));
    fx_truncate(path("model.safetensors"), 100);
    snprintf(cmd, sizeof cmd, "'%s' pack --out '%s' '%s' 2>/dev/null", tool, path("b.smoe"),
             path("model.safetensors"));
    assert_int_not_equal(system(cmd), 0);
    assert_no_output();
    fx_free(&m);
}

/* A shard index whose weight_map names n tensors, each in a shard of its
 * own ("model-000000-of-N.safetensors", ...), none of which exists. */
static char *index_of_shards(uint32_t n, size_t *len)
{
    size_t cap = 64 + (size_t)n * 80, k = 0;
    char *ix = malloc(cap);
    assert_non_null(ix);
    k += (size_t)snprintf(ix + k, cap - k, "{\"weight_map\": {");
    for (uint32_t i = 0; i < n; i++)
        k += (size_t)snprintf(ix + k, cap - k, "%s\"model.layers.%u.w\": \"model-%06u-of-%06u."
                              "safetensors\"", i ? ", " : "", i, i, n);
    k += (size_t)snprintf(ix + k, cap - k, "}}");
    *len = k;
    return ix;
}

/* A shard index naming more shard files than a vault may have sources is
 * refused, naming the bound; one at the bound is read through to its
 * first missing shard (the parse is linear in the shards). */
static void shard_index_over_65536_shards_refused(void **state)
{
    (void)state;
    size_t n;
    char *ix = index_of_shards(100000, &n);
    pack_st_index out;
    int rc = pack_st_parse_index(ix, n, "big.index.json", &out);
    if (rc != SMOE_ECOUNT)
        fail_msg("100000 shards: expected SMOE_ECOUNT, got %s: %s", smoe_err_name(rc),
                 rc < 0 ? smoe_last_error() : "accepted");
    tu_expect_contains(smoe_last_error(), "big.index.json");
    tu_expect_contains(smoe_last_error(), "65536");
    free(ix);
    ix = index_of_shards(65536, &n);
    FILE *f = fopen(path("model.safetensors.index.json"), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(ix, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    expect_failure(path("model.safetensors.index.json"), SMOE_ENOENT, "missing shard",
                   "model-000000-of-065536.safetensors");
    free(ix);
}

/* `smoe pack` or `smoe index` on SOURCE, bounded: a hang is killed after 20 s
 * (and then fails the test). The exit status and stderr are checked. */
static void expect_tool_refuses(const char *cmd, const char *source, const char *w1,
                                const char *w2)
{
    const char *tool = getenv("SMOE_TOOL");
    const char *args[] = {cmd, "--quiet", "--out", path("fifo.smoe"), source, NULL};
    char *out = NULL, *err = NULL;
    int rc = tu_run_bounded(dir, 20, tool, args, &out, &err);
    if (rc < 0)
        fail_msg("smoe %s %s did not exit within 20 s (killed): %s", cmd, source, err);
    if (rc == 0)
        fail_msg("smoe %s %s succeeded with a FIFO among its files", cmd, source);
    tu_expect_contains(err, w1);
    tu_expect_contains(err, w2);
    free(out);
    free(err);
    assert_no_output();
}

/* A checkpoint's *.safetensors that is a FIFO (named pipe): opening it
 * must not wait for a writer for ever; the tool names the file and what it
 * is, for a directory and for a shard index naming it. */
static void pack_fifo_shard_refused(void **state)
{
    (void)state;
    const char *tool = getenv("SMOE_TOOL");
    if (!tool || !*tool)
        skip();
    fx_model m = {0};
    write_qwen(&m);
    /* a directory of *.safetensors, one of them a FIFO */
    assert_int_equal(mkfifo(path("model-fifo.safetensors"), 0600), 0);
    expect_tool_refuses("pack", dir, "model-fifo.safetensors", "FIFO");
    expect_tool_refuses("index", dir, "model-fifo.safetensors", "FIFO");
    /* a shard index whose second shard is a FIFO */
    assert_int_equal(fx_write_text(path("model.safetensors.index.json"),
                                   "{\"weight_map\": {\"model.embed_tokens.weight\": "
                                   "\"model.safetensors\", \"lm_head.weight\": "
                                   "\"model-fifo.safetensors\"}}"),
                     0);
    expect_tool_refuses("pack", path("model.safetensors.index.json"),
                        "model-fifo.safetensors", "FIFO");
    expect_tool_refuses("index", dir, "model-fifo.safetensors", "FIFO");
    fx_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_per_expert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sharded_mixtral, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stacked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stacked_fused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mlx_quantised, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gguf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_pattern, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nemotron_h, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jetmoe, setup, teardown),
        cmocka_unit_test(test_pattern_syntax),
        cmocka_unit_test(test_pattern_transformers5),
        cmocka_unit_test_setup_teardown(test_bad_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_header_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_dtype, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_missing_expert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_inconsistent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_gguf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parser_mutations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scout_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_packed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(pack_fifo_shard_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(shard_index_over_65536_shards_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
