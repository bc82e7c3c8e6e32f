/*
 * Description: index vaults (`smoe index`, vault format version 2).
 * Indexes the checkpoints tests/test_pack.c packs (one safetensors file, a
 * directory, a sharded index.json, stacked, fused, mlx-quantised,
 * Nemotron-H, JetMoE and GGUF layouts, a user's --pattern) and reads every expert back through the library: each
 * component, found with smoe_blob_component/smoe_blob_find, must equal its
 * source tensor's bytes, and lie at the address its file offset gives.
 * Then what an index vault must catch: a source whose size or header
 * changed (SMOE_ESOURCE naming the file), one expert byte changed
 * (SMOE_ECHECKSUM with verification on, naming the source file:
 * index_checksum_error_names_source), a changed modification time
 * alone (a warning), a missing source; that vault and sources moved
 * together still open; an odd safetensors header length (extents aligned
 * to nothing); chunked reads; the chunk plan (each chunk one aligned read
 * of one range of one file, the image covered once, the sizes bounded,
 * near extents merged) and a load issuing one read per chunk; --no-hash;
 * the descriptor budget; the hot path opening no file; and malformed index
 * vaults failing with the error classes of version 1. Each checked vault
 * is also warmed up (smoe_warmup, in layer order, into a ring smaller than
 * it) and read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "pack.h"
#include "pack_fixtures.h"
#include "smoe/smoe.h"
#include "vault/source.h"
#include "testutil.h"
#include "vault/vault.h"

/* ---- per-test directory ------------------------------------------------ */

static char dir[512];

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("SMOE_TEST_TMPDIR");
    snprintf(dir, sizeof dir, "%s/indexXXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static int teardown(void **state)
{
    (void)state;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static const char *path(const char *name)
{
    static char bufs[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(bufs[k], sizeof bufs[k], "%s/%s", dir, name);
    return bufs[k];
}

static int run_index(const char *source, const char *out, int no_hash, const char *scout)
{
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    pack_index_opts o = {out, scout, no_hash, 0, NULL, 0};
    pack_index_result r;
    int rc = pack_index_run(source, &ps, &o, &r);
    pack_patterns_free(&ps);
    return rc;
}

static void index_ok(const char *source, const char *out)
{
    int rc = run_index(source, out, 0, NULL);
    if (rc)
        fail_msg("index of %s failed: %s", source, smoe_last_error());
}

static tu_logbuf logbuf;

static int open_index(const char *vault, uint32_t verify, uint32_t chunk, smoe_stream **s)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 4;
    o.ring_slots = 8;
    o.verify = verify;
    o.chunk_bytes = chunk;
    o.spec_chunk_bytes = chunk;
    o.flags = SMOE_OPEN_EXTENTS | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ |
              SMOE_OPEN_ALLOW_BUFFERED;
    o.log_fn = tu_log_cb;
    o.log_user = &logbuf;
    memset(&logbuf, 0, sizeof logbuf);
    return smoe_open(vault, &o, s);
}

static void expect_msg(int rc, int code, const char *w1, const char *w2)
{
    const char *msg = smoe_last_error();
    if (rc != code)
        fail_msg("expected %s, got %s: %s", smoe_err_name(code), smoe_err_name(rc), msg);
    if (w1 && !strstr(msg, w1))
        fail_msg("message lacks '%s': %s", w1, msg);
    if (w2 && !strstr(msg, w2))
        fail_msg("message lacks '%s': %s", w2, msg);
}

static int tool(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run the smoe tool (when the build made one): its exit status, or -1. */
static int tool(const char *fmt, ...)
{
    const char *t = getenv("SMOE_TOOL");
    if (!t || !*t)
        return -1;
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", t, args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* ---- reading every expert back ---------------------------------------- */

/* Expert (l, e)'s components in a claimed blob against the fixture's
 * tensors; their addresses against their file offsets. */
static void check_blob(smoe_stream *s, const smoe_blob *b, const fx_model *m,
                       const fx_expect *ex, size_t nex)
{
    const smoe__vault *v = &s->vault;
    const uint32_t key = b->layer * v->experts + b->expert;
    const smoe__vault_layout *lo = &v->layouts[b->layout];
    assert_int_equal((uintptr_t)b->data % 16384, 0);
    for (uint32_t k = 0; k < lo->n; k++) {
        smoe_component c, byname;
        assert_int_equal(smoe_blob_component(s, b, k, &c), 0);
        assert_int_equal(smoe_blob_find(s, b, c.name, &byname), 0);
        assert_int_equal(byname.offset, c.offset);
        const fx_expect *x = NULL;
        for (size_t i = 0; i < nex; i++)
            if (!strcmp(ex[i].comp, c.name))
                x = &ex[i];
        if (!x)
            fail_msg("unexpected component '%s'", c.name);
        char tn[256];
        fx_name(tn, sizeof tn, x->tensor, b->layer, b->expert);
        const fx_tensor *t = fx_find(m, tn);
        if (!t)
            fail_msg("no fixture tensor %s", tn);
        uint64_t slice = x->stacked ? t->nbytes / t->shape[0] : t->nbytes;
        assert_int_equal(c.nbytes, slice);
        assert_true(c.offset + c.nbytes <= b->size);
        const uint8_t *at = (const uint8_t *)b->data + c.offset;
        if (memcmp(at, t->data + (x->stacked ? b->expert * slice : 0), slice))
            fail_msg("layer %u expert %u component %s differs from %s", b->layer, b->expert,
                     c.name, tn);
        /* Where it lies: as in the file, modulo the read alignment. */
        const smoe__vault_xt *xt = &v->extents[v->xent[key].first_extent + k];
        assert_int_equal(((uintptr_t)at - xt->offset) % s->src.align, 0);
        assert_int_equal((uintptr_t)at % v->sources[xt->source].align, 0);
        /* The layout's offsets: components end to end. */
        smoe_component lc;
        assert_int_equal(smoe_layout_component(s, b->layout, k, &lc), 0);
        if (k == 0)
            assert_int_equal(lc.offset, 0);
    }
}

/* Index vault at vault: every expert read back through the library. */
/* smoe_warmup on the index vault: as many experts as the ring's 8 slots
 * hold, in layer order, each verified on load and equal to its tensors. */
static void check_warmup(const fx_model *m, const fx_expect *ex, size_t nex, const char *vault,
                         uint32_t chunk)
{
    smoe_stream *s;
    int rc = open_index(vault, SMOE_VERIFY_ON, chunk, &s);
    if (rc)
        fail_msg("open failed: %s", smoe_last_error());
    const smoe__vault *v = &s->vault;
    const uint32_t want = v->entries < 8 ? v->entries : 8;
    assert_int_equal(smoe_warmup(s, NULL), (int)want);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.warmup_loaded, want);
    assert_int_equal(st.warmup_failed, 0);
    assert_int_equal(st.reads_failed, 0);
    uint32_t seen = 0;
    for (uint32_t l = 0; l < v->layers; l++)
        for (uint32_t e = 0; e < v->experts; e++) {
            if (!smoe__vault_entry_of(v, l, e))
                continue;
            smoe_blob b;
            rc = smoe_claim(s, l, e, &b);
            if (seen++ >= want) { /* past the ring: layer order chose the first */
                assert_int_equal(rc, SMOE_ENOTRESIDENT);
                continue;
            }
            if (rc < 0)
                fail_msg("claim (%u, %u) after warm-up: %s", l, e, smoe_last_error());
            check_blob(s, &b, m, ex, nex);
            assert_int_equal(smoe_release(s, &b), 0);
        }
    assert_int_equal(smoe_close(s), 0);
}

static void check_index(const fx_model *m, const fx_expect *ex, size_t nex, const char *vault,
                        uint32_t layers, uint32_t experts, uint32_t dense_layers,
                        uint32_t chunk)
{
    smoe_stream *s;
    int rc = open_index(vault, SMOE_VERIFY_ON, chunk, &s);
    if (rc)
        fail_msg("open failed: %s", smoe_last_error());
    const smoe__vault *v = &s->vault;
    assert_int_equal(v->version, SMOE__VAULT_VERSION_INDEX);
    assert_int_equal(v->layers, layers);
    assert_int_equal(v->experts, experts);
    assert_int_equal(v->entries, (layers - dense_layers) * experts);
    assert_int_equal(logbuf.warns, 0);
    uint32_t seen = 0;
    for (uint32_t l = 0; l < layers; l++)
        for (uint32_t e = 0; e < experts; e++) {
            if (!smoe__vault_entry_of(v, l, e))
                continue;
            smoe_blob b;
            /* Every other one speculative first, through the other queue. */
            if ((l + e) % 2)
                assert_true(smoe_prefetch(s, l, e, SMOE_PREFETCH_SPECULATIVE) >= 0);
            rc = smoe_claim_wait(s, l, e, UINT64_MAX, &b);
            if (rc < 0)
                fail_msg("claim (%u, %u): %s", l, e, smoe_last_error());
            check_blob(s, &b, m, ex, nex);
            assert_int_equal(smoe_release(s, &b), 0);
            seen++;
        }
    assert_int_equal(seen, v->entries);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.reads_failed, 0);
    assert_int_equal(st.verify, 1);
    assert_int_equal(smoe_close(s), 0);
    check_warmup(m, ex, nex, vault, chunk);
    int t = tool("verify '%s'", vault);
    assert_true(t == 0 || t == -1);
    t = tool("inspect '%s'", vault);
    assert_true(t == 0 || t == -1);
}

static void write_qwen(fx_model *m)
{
    fx_model_qwen(m, 4);
    assert_int_equal(fx_write_st(path("model.safetensors"), m, 0, m->n, NULL), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"qwen3_moe\", \"num_experts\": 4,"
                                   " \"num_experts_per_tok\": 2}"),
                     0);
}

/* ---- every source kind and layout ----------------------------------------- */

static void test_index_safetensors(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    index_ok(path("model.safetensors"), path("m.smoe"));
    check_index(&m, FX_QWEN_EX, 3, path("m.smoe"), 3, 4, 1, 0);
    /* The directory as SOURCE: the same. */
    index_ok(dir, path("d.smoe"));
    check_index(&m, FX_QWEN_EX, 3, path("d.smoe"), 3, 4, 1, 0);

    /* An engine that has not said it finds components per blob cannot be
     * given an index vault: their offsets are not the layout's. */
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
    smoe_stream *s;
    expect_msg(smoe_open(path("m.smoe"), &o, &s), SMOE_ENOTSUP, "index vault",
               "SMOE_OPEN_EXTENTS");

    /* A packed vault of the same model: smoe_blob_component answers from
     * the layout. */
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    pack_opts po;
    memset(&po, 0, sizeof po);
    po.out = path("p.smoe");
    pack_result pr;
    assert_int_equal(pack_run(path("model.safetensors"), &ps, &po, &pr), 0);
    pack_patterns_free(&ps);
    assert_int_equal(open_index(path("p.smoe"), SMOE_VERIFY_ON, 0, &s), 0);
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 1, 2, UINT64_MAX, &b) >= 0);
    for (uint32_t k = 0; k < 3; k++) {
        smoe_component c, lc;
        assert_int_equal(smoe_blob_component(s, &b, k, &c), 0);
        assert_int_equal(smoe_layout_component(s, b.layout, k, &lc), 0);
        assert_memory_equal(&c, &lc, sizeof c);
    }
    smoe_component c;
    expect_msg(smoe_blob_component(s, &b, 3, &c), SMOE_ENOENT, "component 3", NULL);
    expect_msg(smoe_blob_find(s, &b, "gate_up", &c), SMOE_ENOENT, "gate_up", NULL);
    assert_int_equal(smoe_release(s, &b), 0);
    expect_msg(smoe_blob_component(s, &b, 0, &c), SMOE_EINVAL, "no reference", NULL);
    expect_msg(smoe_blob_find(s, NULL, "gate", &c), SMOE_EINVAL, NULL, NULL);
    /* A blob of another stream: refused, as smoe_release refuses it. */
    smoe_stream *ix;
    assert_int_equal(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &ix), 0);
    assert_true(smoe_claim_wait(s, 1, 2, UINT64_MAX, &b) >= 0);
    expect_msg(smoe_blob_component(ix, &b, 0, &c), SMOE_EINVAL, "another stream", NULL);
    assert_int_equal(smoe_release(s, &b), 0);
    /* One copy, its sources, counted; replicas are for packed vaults. */
    assert_true(smoe_claim_wait(ix, 1, 2, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(ix, &b), 0);
    smoe_replica_stats rs = SMOE_REPLICA_STATS_INIT;
    assert_int_equal(smoe_get_replica_stats(ix, 0, &rs), 1);
    assert_true(rs.reads > 0 && rs.bytes > 0);
    assert_int_equal(smoe_close(ix), 0);
    const char *copies[] = {path("p.smoe")};
    o = (smoe_open_opts)SMOE_OPEN_OPTS_INIT;
    o.flags = SMOE_OPEN_EXTENTS | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ |
              SMOE_OPEN_ALLOW_BUFFERED;
    o.replicas = copies;
    o.n_replicas = 1;
    expect_msg(smoe_open(path("m.smoe"), &o, &ix), SMOE_ENOTSUP, "index vault", "replicas");
    assert_int_equal(smoe_close(s), 0);
    fx_free(&m);
}

/* The mixtral model in two shards with their index.json. */
static void write_sharded(fx_model *m)
{
    size_t half = fx_model_mixtral(m);
    fx_model tmp = *m;
    assert_int_equal(fx_write_st(path("model-00001-of-00002.safetensors"), &tmp, 0, half, NULL), 0);
    assert_int_equal(fx_write_st(path("model-00002-of-00002.safetensors"), &tmp, half,
                                 tmp.n - half, NULL), 0);
    char *ix = malloc(1 << 16);
    size_t k = (size_t)snprintf(ix, 1 << 16, "{\"weight_map\": {");
    for (size_t i = 0; i < tmp.n; i++)
        k += (size_t)snprintf(ix + k, (1 << 16) - k, "%s\"%s\": \"model-0000%d-of-00002."
                              "safetensors\"", i ? ", " : "", tmp.t[i].name, i < half ? 1 : 2);
    snprintf(ix + k, (1 << 16) - k, "}}");
    assert_int_equal(fx_write_text(path("model.safetensors.index.json"), ix), 0);
    free(ix);
}

/* A sharded checkpoint: each shard named once, layer 1's experts in both. */
static void test_index_sharded(void **state)
{
    (void)state;
    fx_model m = {0};
    write_sharded(&m);
    index_ok(path("model.safetensors.index.json"), path("m.smoe"));
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("m.smoe"), smoe__io_get()), 0);
    assert_int_equal(v.n_sources, 2);
    assert_string_equal(v.sources[0].name, "model-00001-of-00002.safetensors");
    assert_string_equal(v.sources[1].name, "model-00002-of-00002.safetensors");
    smoe__vault_free(&v);
    check_index(&m, FX_MIXTRAL_EX, 3, path("m.smoe"), 2, 8, 0, 0);
    fx_free(&m);
}

static void nemotron_per(fx_model *m)
{
    fx_model_nemotron_h(m, 0);
}

static void nemotron_stacked(fx_model *m)
{
    fx_model_nemotron_h(m, 1);
}

static const fx_expect NEMOTRON_PER_EX[2] = {
    {"up", "backbone.layers.{L}.mixer.experts.{E}.up_proj.weight", 0},
    {"down", "backbone.layers.{L}.mixer.experts.{E}.down_proj.weight", 0},
};
static const fx_expect NEMOTRON_STACKED_EX[2] = {
    {"up", "backbone.layers.{L}.mixer.experts.up_proj", 1},
    {"down", "backbone.layers.{L}.mixer.experts.down_proj", 1},
};
static const fx_expect JETMOE_EX[2] = {
    {"gate_up", "model.layers.{L}.mlp.input_linear.weight", 1},
    {"down", "model.layers.{L}.mlp.output_linear.weight", 1},
};

/* The layouts test_pack.c packs, indexed: read whole, and in 16 KiB
 * chunks (a range cut into many reads). */
static void test_index_layouts(void **state)
{
    (void)state;
    static const struct {
        void (*build)(fx_model *m);
        const char *config;
        const fx_expect *ex;
        size_t nex;
        uint32_t layers, experts, dense;
    } kinds[] = {
        {fx_model_switch_mlp, NULL, FX_SWITCH_EX, 3, 3, 6, 0},
        {fx_model_gpt_oss, "{\"num_local_experts\": 4}", FX_GPT_OSS_EX, 4, 2, 4, 0},
        {fx_model_mlx, "{\"num_experts\": 4, \"quantization\": {\"group_size\": 32, "
                       "\"bits\": 4}}", FX_MLX_EX, 9, 2, 4, 0},
        /* Nemotron-H: layers 0 and 2 are Mamba layers, without experts */
        {nemotron_per, "{\"n_routed_experts\": 4}", NEMOTRON_PER_EX, 2, 4, 4, 2},
        {nemotron_stacked, "{\"n_routed_experts\": 4}", NEMOTRON_STACKED_EX, 2, 4, 4, 2},
        {fx_model_jetmoe, "{\"num_local_experts\": 4}", JETMOE_EX, 2, 2, 4, 0},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        fx_model m = {0};
        kinds[i].build(&m);
        char name[64];
        snprintf(name, sizeof name, "k%zu.safetensors", i);
        assert_int_equal(fx_write_st(path(name), &m, 0, m.n, NULL), 0);
        if (kinds[i].config)
            assert_int_equal(fx_write_text(path("config.json"), kinds[i].config), 0);
        index_ok(path(name), path("m.smoe"));
        for (uint32_t chunk = 0; chunk <= 16384; chunk += 16384)
            check_index(&m, kinds[i].ex, kinds[i].nex, path("m.smoe"), kinds[i].layers,
                        kinds[i].experts, kinds[i].dense, chunk);
        unlink(path("config.json"));
        fx_free(&m);
    }
}

/* A name layout the built-in table misses, given as --pattern. */
static void test_index_user_pattern(void **state)
{
    (void)state;
    fx_model m = {0};
    static const uint64_t shape[] = {24, 40};
    uint64_t seed = 1900;
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 3; e++)
            for (int k = 0; k < 2; k++) {
                char n[160];
                snprintf(n, sizeof n, "transformer.h.%u.moe.expert_%u.%s", l, e,
                         k ? "fc_out" : "fc_in");
                fx_add(&m, n, "F32", 2, shape, 32, seed++);
            }
    assert_int_equal(fx_write_st(path("odd.safetensors"), &m, 0, m.n, NULL), 0);
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    pack_index_opts o = {path("m.smoe"), NULL, 0, 0, NULL, 0};
    pack_index_result r;
    expect_msg(pack_index_run(path("odd.safetensors"), &ps, &o, &r), SMOE_ENOENT,
               "no expert tensors", NULL);
    assert_int_equal(pack_patterns_add(&ps, "expert:transformer.h.{L}.moe.expert_{E}.{C}:"
                                            "fc_in=up,fc_out=down"), 0);
    int rc = pack_index_run(path("odd.safetensors"), &ps, &o, &r);
    pack_patterns_free(&ps);
    if (rc)
        fail_msg("index failed: %s", smoe_last_error());
    static const fx_expect ex[] = {
        {"up", "transformer.h.{L}.moe.expert_{E}.fc_in", 0},
        {"down", "transformer.h.{L}.moe.expert_{E}.fc_out", 0},
    };
    check_index(&m, ex, 2, path("m.smoe"), 2, 3, 0, 0);
    fx_free(&m);
}

/* GGUF: components keep the file's general.alignment (64 here). */
static void test_index_gguf(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_gguf(&m, 1);
    assert_int_equal(fx_write_gguf(path("tiny.gguf"), &m, FX_GGUF_KV, 4, 64), 0);
    index_ok(path("tiny.gguf"), path("m.smoe"));
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("m.smoe"), smoe__io_get()), 0);
    assert_int_equal(v.n_sources, 1);
    assert_int_equal(v.sources[0].kind, SMOE__V2_KIND_GGUF);
    /* general.alignment is 64, but layer 1's Q6_K down experts are 1680
     * bytes each: every extent keeps 16 */
    assert_int_equal(v.sources[0].align, 16);
    assert_int_equal(v.n_layouts, 2);
    assert_string_equal(smoe__vault_meta(&v, "source_format"), "gguf");
    smoe__vault_free(&v);
    check_index(&m, FX_GGUF_EX, 3, path("m.smoe"), 2, 4, 0, 0);
    /* A directory holding the GGUF. */
    assert_int_equal(mkdir(path("g"), 0755), 0);
    assert_int_equal(rename(path("tiny.gguf"), path("g/tiny.gguf")), 0);
    index_ok(path("g"), path("g.smoe"));
    check_index(&m, FX_GGUF_EX, 3, path("g.smoe"), 2, 4, 0, 0);
    fx_free(&m);
}

/* A header length that is not a multiple of 8: every tensor at an odd
 * offset, extents aligned to nothing; chunked reads of 16 KiB cut the
 * experts' reads anywhere. */
static void test_index_odd_header_chunked(void **state)
{
    (void)state;
    fx_model m = {0};
    static const uint64_t g[] = {64, 200}, d[] = {200, 64};
    uint64_t seed = 900;
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 3; e++) {
            char n[160];
            snprintf(n, sizeof n, "model.layers.%u.mlp.experts.%u.gate_proj.weight", l, e);
            fx_add(&m, n, "BF16", 2, g, 16, seed++);
            snprintf(n, sizeof n, "model.layers.%u.mlp.experts.%u.up_proj.weight", l, e);
            fx_add(&m, n, "U8", 2, g, 8, seed++);   /* odd sizes: odd offsets after */
            snprintf(n, sizeof n, "model.layers.%u.mlp.experts.%u.down_proj.weight", l, e);
            fx_add(&m, n, "BF16", 2, d, 16, seed++);
        }
    /* a header of 8k + 5 bytes puts every tensor at an odd offset */
    assert_int_equal(fx_write_st_pad(path("odd.safetensors"), &m, 0, m.n, NULL, 5), 0);
    index_ok(path("odd.safetensors"), path("m.smoe"));
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("m.smoe"), smoe__io_get()), 0);
    assert_int_equal(v.sources[0].align, 1);
    assert_int_equal(v.sources[0].header_bytes % 8, 5);
    smoe__vault_free(&v);
    check_index(&m, FX_QWEN_EX, 3, path("m.smoe"), 2, 3, 0, 0);
    check_index(&m, FX_QWEN_EX, 3, path("m.smoe"), 2, 3, 0, 16384);
    fx_free(&m);
}

/* ---- the chunk plan -------------------------------------------------------- */

/*
 * The plan of v at alignment A, its chunks at chunk size C: the segments of
 * each entry tile its slot image, aligned; each extent lies in one segment
 * at the slot offset its component is given; two segments of one file are
 * more than SMOE__EXTENT_GAP apart; the chunks cover the image once, in
 * order, each one range inside one segment, at most C bytes, aligned.
 */
static void check_plan(const smoe__vault *v, uint32_t A, uint32_t C)
{
    uint32_t most = 0;
    for (uint32_t key = 0; key < v->layers * v->experts; key++) {
        const smoe__vault_entry *e = &v->index[key];
        if (!e->present)
            continue;
        const smoe__vault_xentry *xe = &v->xent[key];
        const smoe__vault_seg *sg = &v->segs[xe->first_seg];
        uint64_t at = 0, want = 0;
        for (uint32_t j = 0; j < xe->n_seg; j++) {
            assert_int_equal(sg[j].slot_off, at);
            assert_true(sg[j].len > 0);
            assert_int_equal(sg[j].file_off % A, 0);
            assert_int_equal(sg[j].len % A, 0);
            at += sg[j].len;
            want += (sg[j].len + C - 1) / C;
            for (uint32_t i = 0; i < j; i++) {
                if (sg[i].source != sg[j].source)
                    continue;
                const smoe__vault_seg *lo = sg[i].file_off < sg[j].file_off ? &sg[i] : &sg[j];
                const smoe__vault_seg *hi = lo == &sg[i] ? &sg[j] : &sg[i];
                assert_true(hi->file_off > lo->file_off + lo->len + SMOE__EXTENT_GAP);
            }
        }
        assert_int_equal(e->size, at);
        assert_int_equal(e->padded, (at + 16383) / 16384 * 16384);
        const uint32_t n = v->layouts[e->layout].n;
        for (uint32_t k = 0; k < n; k++) {
            const smoe__vault_xt *x = &v->extents[xe->first_extent + k];
            uint32_t j = 0;
            while (j < xe->n_seg && !(sg[j].source == x->source && sg[j].file_off <= x->offset &&
                                      x->offset < sg[j].file_off + sg[j].len))
                j++;
            assert_true(j < xe->n_seg);
            assert_true(x->offset + x->length <= sg[j].file_off + sg[j].len);
            assert_int_equal(smoe__extent_comp_at(v, key, k),
                             sg[j].slot_off + (x->offset - sg[j].file_off));
        }
        /* The chunks: in order, end to end, one range of one segment each. */
        const uint32_t nc = smoe__extent_chunks(v, key, C);
        assert_int_equal(nc, want);
        uint64_t end = 0;
        for (uint32_t i = 0; i < nc; i++) {
            uint64_t off, len;
            smoe__extent_chunk_at(v, key, C, i, &off, &len);
            assert_int_equal(off, end);
            assert_true(len > 0 && len <= C);
            assert_int_equal(off % A, 0);
            assert_int_equal(len % A, 0);
            uint32_t j = 0;
            while (j < xe->n_seg && !(sg[j].slot_off <= off && off < sg[j].slot_off + sg[j].len))
                j++;
            assert_true(j < xe->n_seg);
            assert_true(off + len <= sg[j].slot_off + sg[j].len);
            end = off + len;
        }
        assert_int_equal(end, e->size);
        if (nc > most)
            most = nc;
    }
    assert_int_equal(smoe__extent_max_chunks(v, C), most ? most : 1);
}

/* An index vault of one layer built in memory: entry e has the n[e]
 * extents xt[e][0..n[e]) (two source files). */
typedef struct plan_case {
    uint32_t n;
    smoe__vault_xt xt[6];
} plan_case;

static void build_vault(smoe__vault *v, const plan_case *pc, uint32_t np)
{
    memset(v, 0, sizeof *v);
    v->path = strdup("mem.smoe");
    v->version = SMOE__VAULT_VERSION_INDEX;
    v->layers = 1;
    v->experts = np;
    v->entries = np;
    v->n_layouts = np;
    v->index = calloc(np, sizeof *v->index);
    v->xent = calloc(np, sizeof *v->xent);
    v->layouts = calloc(np, sizeof *v->layouts);
    v->extents = calloc(np * 6, sizeof *v->extents);
    v->n_sources = 2;
    v->sources = calloc(2, sizeof *v->sources);
    assert_non_null(v->path);
    assert_true(v->index && v->xent && v->layouts && v->extents && v->sources);
    for (uint32_t e = 0; e < np; e++) {
        v->index[e] = (smoe__vault_entry){0, 0, 0, 0, e, 1};
        v->layouts[e].n = pc[e].n;
        v->xent[e].first_extent = v->n_extents;
        for (uint32_t k = 0; k < pc[e].n; k++)
            v->extents[v->n_extents++] = pc[e].xt[k];
    }
}

/* Segments and chunks of chosen extents, at every read alignment and a few
 * chunk sizes. */
static void test_index_chunk_plan(void **state)
{
    (void)state;
    const uint64_t G = SMOE__EXTENT_GAP, M = 1 << 20, T = 100 * M;
    static plan_case pc[7];
    /* 0: a GGUF expert of stacked tensors (gpt-oss): three weights and
     * three biases, each in its own tensor, far apart */
    pc[0].n = 6;
    for (uint32_t k = 0; k < 3; k++) {
        pc[0].xt[k] = (smoe__vault_xt){T * k + 7 * 2203200 + 96, 2203200, 0};
        pc[0].xt[3 + k] = (smoe__vault_xt){T * (3 + k) + 7 * 5760 + 32, k == 2 ? 11520 : 5760, 0};
    }
    /* 1: one tensor per component, side by side at odd offsets (a
     * safetensors checkpoint of per-expert tensors) */
    pc[1].n = 3;
    for (uint32_t k = 0; k < 3; k++)
        pc[1].xt[k] = (smoe__vault_xt){1000005 + 70001 * k, 70001, 0};
    /* 2: a gap of G bytes (merged) and one of G + 32 KiB (apart at any
     * alignment), listed out of file order */
    pc[2].n = 3;
    pc[2].xt[0] = (smoe__vault_xt){4 * M + 16384 + 2 * G + 32768 + 1, 100, 0};
    pc[2].xt[1] = (smoe__vault_xt){4 * M, 16384, 0};
    pc[2].xt[2] = (smoe__vault_xt){4 * M + 16384 + G, 1, 0};
    /* 3: the same offsets in two files (a sharded checkpoint) */
    pc[3].n = 2;
    pc[3].xt[0] = (smoe__vault_xt){8192, 40000, 1};
    pc[3].xt[1] = (smoe__vault_xt){8192, 40000, 0};
    /* 4: one large extent: cut at the chunk size */
    pc[4].n = 1;
    pc[4].xt[0] = (smoe__vault_xt){3, 9 * M + 77, 1};
    /* 5: overlapping and nested extents (a fused tensor and its part) */
    pc[5].n = 2;
    pc[5].xt[0] = (smoe__vault_xt){6 * M, 3 * M, 0};
    pc[5].xt[1] = (smoe__vault_xt){7 * M + 1, 1000, 0};
    /* 6: tiny extents a little apart: one range */
    pc[6].n = 4;
    for (uint32_t k = 0; k < 4; k++)
        pc[6].xt[k] = (smoe__vault_xt){2 * M + 6000 * k, 1000, 0};
    smoe__vault v;
    build_vault(&v, pc, 7);
    static const uint32_t aligns[] = {512, 4096, 16384};
    static const uint32_t chunks[] = {16384, 65536, 512 << 10, 4 << 20};
    for (size_t a = 0; a < 3; a++) {
        assert_int_equal(smoe__extent_plan(&v, aligns[a]), 0);
        assert_int_equal(v.plan_align, aligns[a]);
        for (size_t c = 0; c < 4; c++)
            check_plan(&v, aligns[a], chunks[c]);
        /* What the plan merges, whatever the alignment. */
        assert_int_equal(v.xent[0].n_seg, 6);
        assert_int_equal(v.xent[1].n_seg, 1);
        assert_int_equal(v.xent[2].n_seg, 2);
        assert_int_equal(v.xent[3].n_seg, 2);
        assert_int_equal(v.xent[4].n_seg, 1);
        assert_int_equal(v.xent[5].n_seg, 1);
        assert_int_equal(v.xent[6].n_seg, 1);
        /* The stacked expert: six reads of one chunk each at 4 MiB, as
         * many as it has ranges; the large extent, three. */
        assert_int_equal(smoe__extent_chunks(&v, 0, 4 << 20), 6);
        assert_int_equal(smoe__extent_chunks(&v, 4, 4 << 20), 3);
    }
    smoe__vault_free(&v);
}

/* A gpt-oss layout of larger stacked tensors at odd offsets: some of an
 * expert's ranges lie apart, some merge (an expert's last slice and the
 * next tensor's start). Read back through direct I/O as Linux checks it,
 * each chunk is one read, aligned. */
static void test_index_chunk_reads(void **state)
{
    (void)state;
    fx_model m = {0};
    static const uint64_t gu[] = {4, 128, 320}, gub[] = {4, 320}, dn[] = {4, 160, 128},
                          dnb[] = {4, 128};
    uint64_t seed = 1700;
    for (uint32_t l = 0; l < 2; l++) {
        char n[160];
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.gate_up_proj", l);
        fx_add(&m, n, "BF16", 3, gu, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.gate_up_proj_bias", l);
        fx_add(&m, n, "BF16", 2, gub, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.down_proj", l);
        fx_add(&m, n, "BF16", 3, dn, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.down_proj_bias", l);
        fx_add(&m, n, "BF16", 2, dnb, 16, seed++);
    }
    assert_int_equal(fx_write_st_pad(path("g.safetensors"), &m, 0, m.n, NULL, 5), 0);
    assert_int_equal(fx_write_text(path("config.json"), "{\"num_local_experts\": 4}"), 0);
    index_ok(path("g.safetensors"), path("m.smoe"));
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("m.smoe"), smoe__io_get()), 0);
    uint32_t apart = 0;
    for (uint32_t key = 0; key < v.layers * v.experts; key++)
        apart += v.xent[key].n_seg > 1;
    assert_true(apart > 0);
    for (uint32_t c = 16384; c <= (1u << 20); c *= 4)
        check_plan(&v, v.plan_align, c);
    smoe__vault_free(&v);

    static struct fault_io f;
    fault_io_install(&f);
    atomic_store(&f.fake_direct, 4096);
    smoe_stream *s;
    int rc = open_index(path("m.smoe"), SMOE_VERIFY_ON, 16384, &s);
    if (rc) {
        fault_io_remove();
        fail_msg("open failed: %s", smoe_last_error());
    }
    assert_int_equal(tu_stats(s).io_mode, SMOE_IO_DIRECT);
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 4; e++) {
            const uint32_t key = l * s->vault.experts + e;
            uint64_t reads = f.count[FIO_PREAD];
            smoe_blob b;
            rc = smoe_claim_wait(s, l, e, UINT64_MAX, &b);
            if (rc < 0)
                fail_msg("claim (%u, %u): %s", l, e, smoe_last_error());
            assert_int_equal(f.count[FIO_PREAD] - reads,
                             smoe__extent_chunks(&s->vault, key, 16384));
            check_blob(s, &b, &m, FX_GPT_OSS_EX, 4);
            assert_int_equal(smoe_release(s, &b), 0);
        }
    assert_int_equal(tu_stats(s).reads_failed, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    fx_free(&m);
}

/* ---- the source has changed ------------------------------------------------ */

/* Offset in model.safetensors of tensor `name`'s first byte. */
/* Offset of tensor name in the safetensors file `file` of the test directory. */
static uint64_t tensor_offset_in(const char *file, const char *name)
{
    pack_source s;
    pack_source_init(&s);
    assert_int_equal(pack_st_load_file(&s, path(file)), 0);
    uint64_t off = UINT64_MAX;
    for (size_t i = 0; i < s.n_tensors; i++)
        if (!strcmp(s.tensors[i].name, name))
            off = s.tensors[i].offset;
    pack_source_free(&s);
    assert_true(off != UINT64_MAX);
    return off;
}

static uint64_t tensor_offset(const char *name)
{
    return tensor_offset_in("model.safetensors", name);
}

/* A checksum error of an index vault's expert names the source file its
 * bytes come from. */
static void index_checksum_error_names_source(void **state)
{
    (void)state;
    fx_model m = {0};
    write_sharded(&m);
    index_ok(path("model.safetensors.index.json"), path("m.smoe"));
    char src[1024];
    snprintf(src, sizeof src, "%s", path("model-00002-of-00002.safetensors"));
    tu_flip_byte(src, tensor_offset_in("model-00002-of-00002.safetensors",
                                       "model.layers.1.block_sparse_moe.experts.7.w3.weight") +
                          5);
    smoe_stream *s;
    if (open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s))
        fail_msg("open: %s", smoe_last_error());
    smoe_blob b;
    expect_msg(smoe_claim_wait(s, 1, 7, UINT64_MAX, &b), SMOE_ECHECKSUM, "layer 1, expert 7",
               "model-00002-of-00002.safetensors");
    print_message("claim: %s\n", smoe_last_error());
    assert_int_equal(smoe_close(s), 0);
    fx_free(&m);
}

static void test_index_changed(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    index_ok(path("model.safetensors"), path("m.smoe"));
    char src[1024]; /* path()'s buffers are reused */
    snprintf(src, sizeof src, "%s", path("model.safetensors"));
    uint64_t size = tu_file_size(src);
    smoe_stream *s;

    /* A new modification time alone: a warning naming the file. */
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    assert_int_equal(utimensat(AT_FDCWD, src, ts, 0), 0);
    assert_int_equal(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s), 0);
    assert_int_equal(logbuf.warns, 1);
    tu_expect_contains(logbuf.text, "model.safetensors");
    tu_expect_contains(logbuf.text, "modified");
    assert_int_equal(smoe_close(s), 0);

    /* One byte of one expert: that expert's load fails its checksum with
     * verification on, every other loads; unnoticed with it off. */
    uint64_t at = tensor_offset("model.layers.2.mlp.experts.1.up_proj.weight") + 7;
    tu_flip_byte(src, at);
    if (open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s))
        fail_msg("open: %s", smoe_last_error());
    smoe_blob b;
    expect_msg(smoe_claim_wait(s, 2, 1, UINT64_MAX, &b), SMOE_ECHECKSUM, "layer 2, expert 1",
               NULL);
    assert_true(smoe_claim_wait(s, 2, 0, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_true(smoe_claim_wait(s, 1, 1, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
    assert_int_equal(open_index(path("m.smoe"), SMOE_VERIFY_OFF, 0, &s), 0);
    assert_true(smoe_claim_wait(s, 2, 1, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
    assert_int_equal(tool("verify '%s'", path("m.smoe")) == 0, 0);
    tu_flip_byte(src, at);

    /* A byte of the header (a key renamed, same length): an error at open
     * naming the file and its header. */
    uint8_t c;
    tu_read_at(src, 12, &c, 1);
    uint8_t other = c == 'x' ? 'y' : 'x';
    tu_patch_bytes(src, 12, &other, 1);
    expect_msg(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s), SMOE_ESOURCE,
               "model.safetensors", "header");
    assert_null(s);
    assert_int_equal(tool("inspect '%s'", path("m.smoe")) == 0, 0);
    tu_patch_bytes(src, 12, &c, 1);

    /* Its size: likewise. */
    FILE *f = fopen(src, "ab");
    assert_non_null(f);
    fputc(0, f);
    fclose(f);
    expect_msg(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s), SMOE_ESOURCE,
               "model.safetensors", "size");
    tu_truncate(src, size);
    if (open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s))
        fail_msg("open: %s", smoe_last_error());
    assert_int_equal(smoe_close(s), 0);
    fx_free(&m);
}

static void test_index_missing_and_moved(void **state)
{
    (void)state;
    fx_model m = {0};
    fx_model_qwen(&m, 4);
    /* The vault in another directory than its source: a name with "..". */
    assert_int_equal(mkdir(path("a"), 0755), 0);
    assert_int_equal(mkdir(path("a/models"), 0755), 0);
    assert_int_equal(mkdir(path("a/vaults"), 0755), 0);
    assert_int_equal(fx_write_st(path("a/models/model.safetensors"), &m, 0, m.n, NULL), 0);
    index_ok(path("a/models/model.safetensors"), path("a/vaults/m.smoe"));
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("a/vaults/m.smoe"), smoe__io_get()), 0);
    assert_string_equal(v.sources[0].name, "../models/model.safetensors");
    smoe__vault_free(&v);

    /* Both moved together: still found. */
    assert_int_equal(rename(path("a"), path("b")), 0);
    check_index(&m, FX_QWEN_EX, 3, path("b/vaults/m.smoe"), 3, 4, 1, 0);

    /* The vault moved alone: its source is missing, named. */
    assert_int_equal(rename(path("b/vaults/m.smoe"), path("m.smoe")), 0);
    smoe_stream *s;
    expect_msg(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s), SMOE_ESOURCE,
               "../models/model.safetensors", "missing");
    assert_null(s);
    int t = tool("inspect '%s'", path("m.smoe"));
    assert_true(t == 1 || t == -1);
    t = tool("verify '%s'", path("m.smoe"));
    assert_true(t == 1 || t == -1);
    fx_free(&m);
}

/* --no-hash: nothing of the experts is read at index time, and nothing is
 * checked at load. */
static void test_index_no_hash(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    assert_int_equal(run_index(path("model.safetensors"), path("m.smoe"), 1, NULL), 0);
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("m.smoe"), smoe__io_get()), 0);
    assert_int_equal(v.flags, SMOE__V2_NO_HASH);
    for (uint32_t k = 0; k < v.layers * v.experts; k++)
        assert_int_equal(v.index[k].hash, 0);
    smoe__vault_free(&v);
    uint64_t at = tensor_offset("model.layers.1.mlp.experts.0.gate_proj.weight");
    tu_flip_byte(path("model.safetensors"), at);
    smoe_stream *s;
    assert_int_equal(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s), 0);
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 1, 0, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(tu_stats(s).verify, 0);
    assert_int_equal(smoe_close(s), 0);
    int t = tool("verify '%s'", path("m.smoe"));
    assert_true(t == 0 || t == -1);
    fx_free(&m);
}

/* A scout copy beside the index vault, as smoe pack writes it. */
static void test_index_scout(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    assert_int_equal(run_index(path("model.safetensors"), path("m.smoe"), 0, path("m.scout")), 0);
    pack_scout sc;
    assert_int_equal(pack_scout_load(path("m.scout"), &sc), 0);
    assert_int_equal(pack_scout_check_data(path("m.scout"), &sc), 0);
    assert_int_equal(sc.count, m.n - 2 * 4 * 3);
    pack_scout_free(&sc);
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path("m.smoe"), smoe__io_get()), 0);
    assert_string_equal(smoe__vault_meta(&v, "scout"), "m.scout");
    smoe__vault_free(&v);

    /* Interrupted: nothing left behind. */
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    volatile sig_atomic_t stop = 1;
    pack_index_opts o = {path("n.smoe"), path("n.scout"), 0, 0, &stop, 0};
    pack_index_result r;
    assert_int_equal(pack_index_run(path("model.safetensors"), &ps, &o, &r), SMOE_ESHUTDOWN);
    pack_patterns_free(&ps);
    assert_false(tu_exists(path("n.smoe")));
    assert_false(tu_exists(path("n.scout")));
    assert_int_equal(tu_count_files(dir), 4); /* model, config, m.smoe, m.scout; no tmp */
    fx_free(&m);
}

/* The tool on an index vault: read, bench (every mode), budget, inspect,
 * and smoe index itself. */
static void test_index_tools(void **state)
{
    (void)state;
    const char *t = getenv("SMOE_TOOL");
    if (!t || !*t)
        skip();
    fx_model m = {0};
    write_sharded(&m);
    char v[1024], tr[1024];
    snprintf(v, sizeof v, "%s", path("m.smoe"));
    snprintf(tr, sizeof tr, "%s", path("t.trace"));
    assert_int_equal(tool("index '%s' --out '%s' --quiet", path("model.safetensors.index.json"),
                          v), 0);
    assert_int_equal(tool("read '%s' --hash --verify --workers 3", v), 0);
    assert_int_equal(tool("read '%s' --hash --buffered --chunk 16384", v), 0);
    assert_int_equal(tool("trace-gen -o '%s' --layers 2 --experts 8 --top-k 2 --tokens 40", tr),
                     0);
    assert_int_equal(tool("bench --vault '%s' --trace '%s' --mode all --memory 50%% "
                          "--workers 2", v, tr), 0);
    assert_int_equal(tool("budget '%s'", v), 0);
    assert_int_equal(tool("inspect --json '%s'", v), 0);
    /* --no-hash: inspect says so */
    assert_int_equal(tool("index '%s' --out '%s' --no-hash --quiet", dir, v), 0);
    char cmd[4096], out[8192], ins[1024];
    snprintf(ins, sizeof ins, "%s", path("inspect.txt"));
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' > '%s'", t, v, ins);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(ins, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    tu_expect_contains(out, "not recorded (--no-hash): verification is off");
    tu_expect_contains(out, "model-00002-of-00002.safetensors");
    tu_expect_contains(out, "present, unchanged");
    /* usage errors */
    assert_int_equal(tool("index '%s'", dir), 2);
    assert_int_equal(tool("index --out '%s' --bogus '%s'", v, dir), 1);
    fx_free(&m);
}

/* ---- descriptors -------------------------------------------------------------- */

static void test_index_descriptors(void **state)
{
    (void)state;
    /* One per source per worker while the budget allows, else fewer. */
    assert_int_equal(smoe__source_sets(16, 1, 256), 16);
    assert_int_equal(smoe__source_sets(16, 60, 256), 4);
    assert_int_equal(smoe__source_sets(16, 400, 256), 1);
    assert_int_equal(smoe__source_sets(16, 60, 0), 1);

    fx_model m = {0};
    write_qwen(&m);
    index_ok(path("model.safetensors"), path("m.smoe"));
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    smoe_stream *s;
    assert_int_equal(open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s), 0);
    assert_int_equal(s->src.sets, old.rlim_cur / 4 >= 4 ? 4 : old.rlim_cur / 4);
    assert_int_equal(smoe_close(s), 0);
    /* A soft limit of 12 leaves a budget of 3: 4 workers share 3. */
    low = old;
    low.rlim_cur = 12;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int rc = open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s);
    uint32_t sets = rc == 0 ? s->src.sets : 0;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    if (rc)
        fail_msg("open under a limit of 12 descriptors: %s", smoe_last_error());
    assert_int_equal(sets, 3);
    smoe_blob b;
    for (uint32_t e = 0; e < 4; e++) {
        assert_true(smoe_claim_wait(s, 1, e, UINT64_MAX, &b) >= 0);
        check_blob(s, &b, &m, FX_QWEN_EX, 3);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    assert_int_equal(smoe_close(s), 0);
    fx_free(&m);
}

/* The hot path opens no file: every descriptor is opened in smoe_open. And
 * a failed read names the source file. */
static void test_index_hot_path_opens_nothing(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    index_ok(path("model.safetensors"), path("m.smoe"));
    static struct fault_io f;
    fault_io_install(&f);
    smoe_stream *s;
    int rc = open_index(path("m.smoe"), SMOE_VERIFY_ON, 0, &s);
    uint64_t opens = f.count[FIO_OPEN], reads = f.count[FIO_PREAD];
    if (rc == 0) {
        /* A failed read of a source: the claim's message names the file. */
        const smoe__vault *v = &s->vault;
        const uint32_t key = 1 * v->experts + 3;
        const smoe__vault_seg *sg = &v->segs[v->xent[key].first_seg];
        fault_io_arm(&f, FIO_FAIL_OFFSET, FIO_PREAD, 1, EIO, sg->file_off);
        smoe_blob b;
        expect_msg(smoe_claim_wait(s, 1, 3, UINT64_MAX, &b), SMOE_EIO,
                   "of source 0 'model.safetensors'", "EIO");
        fault_io_disarm(&f);
        assert_true(smoe_prefetch(s, 1, 3, 0) >= 0); /* the retry */
        opens = f.count[FIO_OPEN];
        reads = f.count[FIO_PREAD];
    }
    for (uint32_t l = 1; rc == 0 && l < 3; l++)
        for (uint32_t e = 0; e < 4; e++) {
            smoe_blob b;
            assert_true(smoe_claim_wait(s, l, e, UINT64_MAX, &b) >= 0);
            assert_int_equal(smoe_release(s, &b), 0);
        }
    assert_int_equal(f.count[FIO_OPEN], opens);
    assert_true(f.count[FIO_PREAD] >= reads + 7); /* (1, 3) may have landed before */
    if (rc == 0)
        assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    assert_int_equal(rc, 0);
    fx_free(&m);
}

/* ---- malformed index vaults ----------------------------------------------------- */

typedef struct bad_case {
    uint64_t off;   /* file offset of the field */
    uint64_t value;
    int width;      /* 4 or 8; negative: the checksum is not fixed (the check
                       comes before it, and the fixer would read out of range) */
    int code;
    const char *w1, *w2;
} bad_case;

static void expect_load(const char *p, int code, const char *w1, const char *w2)
{
    smoe__vault v;
    int rc = smoe__vault_load(&v, p, smoe__io_get());
    expect_msg(rc, code, w1, w2);
    assert_null(v.index);
}

static void test_index_malformed(void **state)
{
    (void)state;
    fx_model m = {0};
    write_qwen(&m);
    index_ok(path("model.safetensors"), path("good.smoe"));
    char good[1024], bad[1024]; /* path()'s buffers are reused */
    snprintf(good, sizeof good, "%s", path("good.smoe"));
    snprintf(bad, sizeof bad, "%s", path("bad.smoe"));
    uint64_t n;
    unsigned char *g = tu_read_file(good, &n);
    const uint64_t T = tu_read_u64(good, TU_H_TABLE_OFFSET);
    const uint64_t X = tu_read_u64(good, TU_H2_EXTENT_OFFSET);
    const uint64_t S = tu_read_u64(good, TU_H2_SOURCE_OFFSET);
    const uint64_t L = tu_read_u64(good, TU_H_LAYOUT_OFFSET);
    const uint64_t size = tu_read_u64(good, S + TU_S_SIZE);
    const uint64_t hdr = tu_read_u64(good, S + TU_S_HEADER_BYTES);
    const uint64_t x0 = tu_read_u64(good, X + TU_X_OFFSET);
    const uint64_t comp0 = L + 16; /* one layout */
    const bad_case cases[] = {
        /* header fields */
        {TU_H_HEADER_SIZE, 64, 4, SMOE_EFORMAT, "header_size", NULL},
        {TU_H_ALIGNMENT, 4096, 4, SMOE_EFORMAT, "alignment", NULL},
        {TU_H_FLAGS, 2, 4, SMOE_EFORMAT, "flags", NULL},
        {TU_H2_RESERVED, 1, 8, SMOE_EFORMAT, "reserved", NULL},
        /* table locations */
        {TU_H_TABLE_OFFSET, 64, -8, SMOE_ERANGE, "table_offset", "header"},
        {TU_H2_EXTENT_OFFSET, X + 4, -8, SMOE_EALIGN, "extent_offset", "multiple of 8"},
        {TU_H2_SOURCE_OFFSET, T, -8, SMOE_EOVERLAP, "source_offset", "overlaps"},
        {TU_H_META_OFFSET, UINT64_MAX - 7, -8, SMOE_EOVERFLOW, "meta_offset", "overflows"},
        /* sources */
        {S + TU_S_KIND, 3, 4, SMOE_EFORMAT, "source 0", "kind"},
        {S + TU_S_ALIGN, 12, 4, SMOE_EFORMAT, "source 0", "align"},
        {S + TU_S_HEADER_BYTES, size + 1, 8, SMOE_ERANGE, "source 0", "header_bytes"},
        {S + TU_S_NAME_LEN, 5000, 4, SMOE_EFORMAT, "source 0", "name_len"},
        {S + TU_S_NAME_OFFSET, 1u << 20, 8, SMOE_ERANGE, "source 0", "name_offset"},
        {S + TU_S_MTIME_NSEC, 1000000000u, 4, SMOE_EFORMAT, "source 0", "mtime_nsec"},
        {S + TU_S_RESERVED, 9, 8, SMOE_EFORMAT, "source 0", "reserved"},
        /* extents */
        {X + TU_X_SOURCE, 1, 4, SMOE_EFORMAT, "extent 0", "source"},
        {X + TU_X_FLAGS, 1, 4, SMOE_EFORMAT, "extent 0", "flags"},
        {X + TU_X_OFFSET, x0 + 1, 8, SMOE_EALIGN, "extent 0", "alignment 8"},
        {X + TU_X_OFFSET, size, 8, SMOE_ERANGE, "extent 0", "ends past"},
        {X + TU_X_OFFSET, 8, 8, SMOE_ERANGE, "extent 0", "header"},
        {X + TU_X_OFFSET, UINT64_MAX - 7, 8, SMOE_EOVERFLOW, "extent 0", "overflows"},
        {X + TU_X_OFFSET, x0 + 256, 8, SMOE_EOVERLAP, "extent", "overlaps"},
        {X + TU_X_LENGTH, 0, 8, SMOE_EFORMAT, "extent 0", "length is 0"},
        {X + TU_X_LENGTH, 128, 8, SMOE_EFORMAT, "entry 0", "extent 0"},
        /* entries */
        {T + TU_E_LAYER, 99, 4, SMOE_EFORMAT, "entry 0", "layer"},
        {T + TU_E_EXPERT, 99, 4, SMOE_EFORMAT, "entry 0", "expert"},
        {T + TU_E_LAYOUT, 5, 4, SMOE_EFORMAT, "entry 0", "layout"},
        {T + TU_E_FLAGS, 1, 4, SMOE_EFORMAT, "entry 0", "flags"},
        {T + TU_E2_SIZE + TU_E_EXPERT, 0, 4, SMOE_EDUP, "entry 1", "already appears"},
        {T + TU_E2_FIRST_EXTENT, 3, 8, SMOE_EFORMAT, "entry 0", "first_extent"},
        {TU_H_FLAGS, 1, 4, SMOE_EFORMAT, "entry 0", "hash"},
        /* components */
        {comp0 + TU_C_NBYTES, 100, 8, SMOE_EFORMAT, "component 0", "nbytes"},
        {comp0 + TU_C_DTYPE, SMOE_DTYPE_F32, 4, SMOE_EFORMAT, "component 0", "nbytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        FILE *f = fopen(bad, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(g, 1, (size_t)n, f), n);
        fclose(f);
        if (c->width == 4)
            tu_patch_u32(bad, c->off, (uint32_t)c->value);
        else
            tu_patch_u64(bad, c->off, c->value);
        if (c->width > 0)
            tu_fix_checksum(bad);
        smoe__vault v;
        int rc = smoe__vault_load(&v, bad, smoe__io_get());
        if (rc != c->code || (c->w1 && !strstr(smoe_last_error(), c->w1)) ||
            (c->w2 && !strstr(smoe_last_error(), c->w2)))
            fail_msg("case %zu (offset %" PRIu64 " = %" PRIu64 "): expected %s with '%s', '%s'; "
                     "got %s: %s", i, c->off, c->value, smoe_err_name(c->code), c->w1,
                     c->w2 ? c->w2 : "", smoe_err_name(rc), smoe_last_error());
        smoe__vault_free(&v);
    }

    /* Components not end to end from 0 (each moved by 8, as version 1
     * would take them). */
    FILE *f = fopen(bad, "wb");
    fwrite(g, 1, (size_t)n, f);
    fclose(f);
    for (uint32_t k = 0; k < 3; k++)
        tu_patch_u64(bad, comp0 + 128 * k + TU_C_OFFSET, 8 + 256 * k);
    tu_patch_u64(bad, L + TU_L_EXTENT, 8 + 768);
    tu_fix_checksum(bad);
    expect_load(bad, SMOE_EFORMAT, "component 0 (gate)", "expected 0");

    /* A source name that is absolute. */
    f = fopen(bad, "wb");
    fwrite(g, 1, (size_t)n, f);
    fclose(f);
    uint64_t name_at = S + TU_S_RECORD + tu_read_u64(bad, S + TU_S_NAME_OFFSET);
    tu_patch_bytes(bad, name_at, "/", 1);
    tu_fix_checksum(bad);
    expect_load(bad, SMOE_EFORMAT, "source 0", "absolute");

    /* Counts: checked before the checksum. */
    f = fopen(bad, "wb");
    fwrite(g, 1, (size_t)n, f);
    fclose(f);
    tu_patch_u32(bad, TU_H2_SOURCES, 0);
    expect_load(bad, SMOE_ECOUNT, "sources", "1..");
    tu_patch_u32(bad, TU_H2_SOURCES, 1);
    tu_patch_u32(bad, TU_H2_EXTENTS, 1u << 30);
    expect_load(bad, SMOE_ECOUNT, "extents", "bytes");
    tu_patch_u32(bad, TU_H2_EXTENTS, tu_read_u32(good, TU_H2_EXTENTS));
    tu_patch_u32(bad, TU_H2_NAMES_BYTES, 5000);
    expect_load(bad, SMOE_ECOUNT, "names_bytes", NULL);

    /* The rest as version 1: magic, version, checksum, truncation. */
    f = fopen(bad, "wb");
    fwrite(g, 1, (size_t)n, f);
    fclose(f);
    tu_flip_byte(bad, X + TU_X_LENGTH);
    expect_load(bad, SMOE_EHDRSUM, "checksum", NULL);
    tu_flip_byte(bad, X + TU_X_LENGTH);
    tu_truncate(bad, n - 1);
    expect_load(bad, SMOE_ETRUNC, "file_size", NULL);
    f = fopen(bad, "wb");
    fwrite(g, 1, (size_t)n, f);
    fclose(f);
    tu_patch_u32(bad, TU_H_VERSION, 3);
    expect_load(bad, SMOE_EVERSION, "version", "found 3");
    tu_patch_bytes(bad, 0, "GGUF", 4);
    expect_load(bad, SMOE_EMAGIC, "magic", NULL);
    (void)hdr;
    free(g);
    fx_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index_safetensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_sharded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_layouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_user_pattern, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_gguf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_odd_header_chunked, setup, teardown),
        cmocka_unit_test(test_index_chunk_plan),
        cmocka_unit_test_setup_teardown(test_index_chunk_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(index_checksum_error_names_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_missing_and_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_no_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_scout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_tools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_descriptors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_hot_path_opens_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_malformed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
