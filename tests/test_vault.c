/*
 * Description: the vault format (docs/vault-format.md): dtype names and
 * sizes; writer/reader round trips checking every blob's bytes and hash,
 * layouts, metadata, top_k and absent entries; one test per malformed-input
 * class of the spec, each asserting the exact error code and that
 * smoe_last_error() names the file and the field; the writer's argument
 * checks; reads through a memory-backed smoe__io table with injected faults.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "smoe/smoe.h"
#include "testutil.h"
#include "smoe_tier.h"

static char *g_dir;

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_tmpdir();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmdir(g_dir);
    free(g_dir);
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

#define BASE_LAYERS 2u
#define BASE_EXPERTS 4u
#define BASE_MIN 1000u
#define BASE_MAX 40000u
#define BASE_SEED 7u

/* A fresh copy of the small vault most malformed-input tests start from. */
static char *base_vault(const char *name)
{
    char *p = tu_path(g_dir, name);
    int rc = tu_make_vault(p, BASE_LAYERS, BASE_EXPERTS, BASE_MIN, BASE_MAX, BASE_SEED);
    if (rc != 0)
        fail_msg("tu_make_vault: %s: %s", smoe_err_name(rc), smoe_last_error());
    return p;
}

/*
 * Load must fail with `code`; the message must name the file and contain
 * every string in needles (NULL-terminated). *v must be left empty.
 */
static void expect_fail_(const char *path, int code, const char *const *needles)
{
    smoe__vault v;
    memset(&v, 0xa5, sizeof v);
    int rc = smoe__vault_load(&v, path, &smoe__io_os);
    const char *msg = smoe_last_error();
    if (rc != code)
        fail_msg("expected %s, got %s: %s", smoe_err_name(code), smoe_err_name(rc), msg);
    if (!strstr(msg, path))
        fail_msg("message does not name the file: %s", msg);
    for (const char *const *n = needles; *n; n++)
        if (!strstr(msg, *n))
            fail_msg("message lacks \"%s\": %s", *n, msg);
    assert_null(v.index);
    assert_null(v.path);
    assert_null(v.meta);
    assert_int_equal(v.entries, 0);
    smoe__vault_free(&v);
}
#define EXPECT_FAIL(path, code, ...) \
    expect_fail_(path, code, (const char *const[]){__VA_ARGS__, NULL})

static void load_ok(smoe__vault *v, const char *path)
{
    int rc = smoe__vault_load(v, path, &smoe__io_os);
    if (rc != 0)
        fail_msg("load %s: %s: %s", path, smoe_err_name(rc), smoe_last_error());
}

static uint64_t round16k(uint64_t v)
{
    return (v + 16383) / 16384 * 16384;
}

/* Every entry of the vault holds exactly synth_blob_fill's bytes, zero padded. */
static void check_contents(const char *path, const smoe__vault *v, uint64_t min,
                           uint64_t max, uint64_t seed, int (*present)(uint32_t, uint32_t))
{
    unsigned char *want = malloc(max + 16384), *got = malloc(max + 16384);
    assert_non_null(want);
    assert_non_null(got);
    uint64_t max_padded = 0, total = 0;
    uint32_t n = 0;
    for (uint32_t l = 0; l < v->layers; l++)
        for (uint32_t e = 0; e < v->experts; e++) {
            const smoe__vault_entry *en = smoe__vault_entry_of(v, l, e);
            if (present && !present(l, e)) {
                assert_null(en);
                continue;
            }
            assert_non_null(en);
            n++;
            uint64_t size = synth_blob_size(seed, l, e, min, max);
            assert_int_equal(en->size, size);
            assert_int_equal(en->padded, round16k(size));
            assert_int_equal(en->offset % 16384, 0);
            assert_true(en->offset >= 16384);
            synth_blob_fill(want, (size_t)size, seed, l, e);
            memset(want + size, 0, (size_t)(en->padded - size));
            tu_read_at(path, en->offset, got, (size_t)en->padded);
            assert_memory_equal(got, want, (size_t)en->padded);
            assert_int_equal(en->hash, smoe__hash(want, (size_t)size));
            if (en->padded > max_padded)
                max_padded = en->padded;
            total += en->padded;
        }
    assert_int_equal(n, v->entries);
    assert_int_equal(v->max_padded, max_padded);
    assert_int_equal(v->total_padded, total);
    free(want);
    free(got);
}

/* ---- dtypes --------------------------------------------------------------- */

static void test_dtype_names(void **state)
{
    (void)state;
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_BOOL), "bool");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_BF16), "bf16");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_F8_E4M3), "f8_e4m3");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_F4_E2M1), "f4_e2m1");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_C64), "c64");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(0)), "ggml:f32");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(2)), "ggml:q4_0");
    assert_string_equal(smoe_dtype_name(0x10c), "ggml:q4_K");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(16)), "ggml:iq2_xxs");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(29)), "ggml:iq1_m");
    assert_string_equal(smoe_dtype_name(0x11e), "ggml:bf16");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(34)), "ggml:tq1_0");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(35)), "ggml:tq2_0");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_GGML(39)), "ggml:mxfp4");
    assert_string_equal(smoe_dtype_name(SMOE_DTYPE_MLX_PACKED), "mlx_packed");
    /* unknown: 0, past the plain range, removed ggml ids, past ggml's range */
    static const uint32_t unknown[] = {0, 21, 63, 64, 0xff, SMOE_DTYPE_GGML(4),
                                       SMOE_DTYPE_GGML(5), SMOE_DTYPE_GGML(31),
                                       SMOE_DTYPE_GGML(32), SMOE_DTYPE_GGML(33),
                                       SMOE_DTYPE_GGML(36), SMOE_DTYPE_GGML(37),
                                       SMOE_DTYPE_GGML(38), SMOE_DTYPE_GGML(43), 0x1ff,
                                       0x201, 0xffffffffu};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_string_equal(smoe_dtype_name(unknown[i]), "?");
        uint64_t shape[1] = {256};
        assert_int_equal(smoe__dtype_bytes(unknown[i], shape, 1, 0, 0), 0);
    }
}

static uint64_t bytes2(uint32_t dtype, uint64_t a, uint64_t b)
{
    uint64_t s[2] = {a, b};
    return smoe__dtype_bytes(dtype, s, 2, 0, 0);
}

static void test_dtype_bytes(void **state)
{
    (void)state;
    assert_int_equal(bytes2(SMOE_DTYPE_BF16, 3, 5), 30);
    assert_int_equal(bytes2(SMOE_DTYPE_BOOL, 3, 5), 15);
    assert_int_equal(bytes2(SMOE_DTYPE_F64, 2, 2), 32);
    assert_int_equal(bytes2(SMOE_DTYPE_C64, 1, 3), 24);
    assert_int_equal(bytes2(SMOE_DTYPE_F4_E2M1, 3, 4), 6);
    assert_int_equal(bytes2(SMOE_DTYPE_F4_E2M1, 4, 3), 0); /* odd innermost */
    assert_int_equal(bytes2(SMOE_DTYPE_F6_E2M3, 2, 8), 12);
    assert_int_equal(bytes2(SMOE_DTYPE_F6_E3M2, 2, 6), 0);
    /* ggml: (elements / block) x block bytes, blocks along the innermost dim */
    static const struct { uint32_t t, block, bytes; } g[] = {
        {0, 1, 4}, {1, 1, 2}, {2, 32, 18}, {3, 32, 20}, {6, 32, 22}, {7, 32, 24},
        {8, 32, 34}, {9, 32, 36}, {10, 256, 84}, {11, 256, 110}, {12, 256, 144},
        {13, 256, 176}, {14, 256, 210}, {15, 256, 292}, {16, 256, 66}, {17, 256, 74},
        {18, 256, 98}, {19, 256, 50}, {20, 32, 18}, {21, 256, 110}, {22, 256, 82},
        {23, 256, 136}, {24, 1, 1}, {25, 1, 2}, {26, 1, 4}, {27, 1, 8}, {28, 1, 8},
        {29, 256, 56}, {30, 1, 2}, {34, 256, 54}, {35, 256, 66}, {39, 32, 17},
        {40, 64, 36}, {41, 128, 18}, {42, 64, 18},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        uint32_t d = SMOE_DTYPE_GGML(g[i].t);
        assert_string_not_equal(smoe_dtype_name(d), "?");
        assert_int_equal(bytes2(d, 3, 2 * g[i].block), 3 * 2 * g[i].bytes);
        if (g[i].block > 1)
            assert_int_equal(bytes2(d, 3, g[i].block + 1), 0);
    }
    /* mlx packed: sized by U32 words; a row must unpack to whole groups */
    uint64_t s[2] = {4, 8}; /* 8 words x 32 / 4 bits = 64 values per row */
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s, 2, 64, 4), 128);
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s, 2, 32, 4), 128);
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s, 2, 128, 4), 0);
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s, 2, 64, 7), 0);
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s, 2, 0, 4), 0);
    uint64_t s3[2] = {4, 6}; /* 6 words x 32 / 3 bits = 64 values */
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s3, 2, 64, 3), 96);
    uint64_t s3b[2] = {4, 7}; /* 224 bits: not a whole number of 3-bit values */
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_MLX_PACKED, s3b, 2, 32, 3), 0);
    /* not computable */
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_BF16, s, 2, 64, 4), 0); /* quant fields */
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_BF16, s, 0, 0, 0), 0);
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_BF16, s, 5, 0, 0), 0);
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_BF16, NULL, 1, 0, 0), 0);
    assert_int_equal(bytes2(SMOE_DTYPE_BF16, 0, 5), 0);
    assert_int_equal(bytes2(SMOE_DTYPE_F32, 1ull << 40, 1ull << 30), 0); /* overflow */
    uint64_t s4[4] = {2, 3, 4, 5};
    assert_int_equal(smoe__dtype_bytes(SMOE_DTYPE_I32, s4, 4, 0, 0), 480);
}

/* ---- round trips ---------------------------------------------------------- */

static void test_roundtrip(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "rt.smoe");
    /* sizes straddle 16 KiB multiples: 1, 2 and 3 padded blocks */
    assert_int_equal(tu_make_vault(p, 3, 5, 20000, 45000, 42), 0);
    smoe__vault v;
    load_ok(&v, p);
    assert_string_equal(v.path, p);
    assert_int_equal(v.layers, 3);
    assert_int_equal(v.experts, 5);
    assert_int_equal(v.entries, 15);
    assert_int_equal(v.n_layouts, 1);
    assert_int_equal(v.n_components, 3);
    assert_int_equal(v.component_align, 256);
    assert_int_equal(v.top_k, 2);
    assert_int_equal(v.file_size, tu_file_size(p));
    unsigned char ck[8];
    tu_read_at(p, TU_H_CHECKSUM, ck, 8);
    uint64_t be = 0;
    for (int i = 0; i < 8; i++)
        be = be << 8 | ck[i]; /* canonical form is big-endian */
    assert_int_equal(v.vault_id, be);
    assert_string_equal(smoe__vault_meta(&v, "model"), "tu-test");
    assert_string_equal(smoe__vault_meta(&v, "top_k"), "2");
    assert_null(smoe__vault_meta(&v, "quant"));
    assert_string_equal(v.meta, "model=tu-test\ntop_k=2\n");

    smoe_component want[3];
    uint32_t n = synth_layout(want, 20000);
    assert_int_equal(n, 3);
    assert_int_equal(v.layouts[0].first, 0);
    assert_int_equal(v.layouts[0].n, 3);
    assert_int_equal(v.layouts[0].min_bytes, tu_layout_extent(want, n));
    for (uint32_t i = 0; i < n; i++)
        assert_memory_equal(&v.components[i], &want[i], sizeof want[i]);
    assert_string_equal(v.components[0].name, "gate");
    assert_string_equal(v.components[2].name, "down");

    check_contents(p, &v, 20000, 45000, 42, NULL);
    assert_null(smoe__vault_entry_of(&v, 3, 0));
    assert_null(smoe__vault_entry_of(&v, 0, 5));
    smoe__vault_free(&v);
    smoe__vault_free(&v); /* idempotent */
    free(p);
}

static int absent_pattern(uint32_t layer, uint32_t expert)
{
    /* layer 0 is dense (no experts); in layer 2 every third expert is absent */
    return layer != 0 && !(layer == 2 && expert % 3 == 0);
}

static void test_roundtrip_absent_any_order(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "absent.smoe");
    static const char *const meta[] = {"arch", "qwen3_moe", "note", "a=b=c", "empty", "",
                                       NULL};
    tu_vault_opts o = {0};
    o.layers = 4;
    o.experts = 7;
    o.min_bytes = 1;
    o.max_bytes = 20000;
    o.seed = 99;
    o.top_k = 7;
    o.model = "m";
    o.meta = meta;
    o.present = absent_pattern;
    o.reverse = 1;
    assert_int_equal(tu_make_vault_ex(p, &o), 0);
    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.entries, 3 * 7 - 3);
    assert_int_equal(v.top_k, 7);
    assert_string_equal(smoe__vault_meta(&v, "arch"), "qwen3_moe");
    assert_string_equal(smoe__vault_meta(&v, "note"), "a=b=c");
    assert_string_equal(smoe__vault_meta(&v, "empty"), "");
    assert_null(smoe__vault_meta(&v, "a"));
    assert_null(smoe__vault_meta(&v, ""));
    /* the tiny layout: one u8 component of min_bytes */
    assert_int_equal(v.n_components, 1);
    assert_string_equal(v.components[0].name, "w");
    check_contents(p, &v, 1, 20000, 99, absent_pattern);
    /* entries were written last to first: the table is in that order */
    assert_int_equal(tu_read_u32(p, tu_entry_off(p, 0) + TU_E_LAYER), 3);
    assert_int_equal(tu_read_u32(p, tu_entry_off(p, 0) + TU_E_EXPERT), 6);
    smoe__vault_free(&v);
    free(p);
}

static void test_roundtrip_layouts(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "layouts.smoe");
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = 1;
    wo.experts = 3;
    wo.component_align = 4096;
    smoe_writer *w;
    assert_int_equal(smoe_writer_open(p, &wo, &w), 0);
    smoe_component q[3] = {
        {.name = "gate", .dtype = SMOE_DTYPE_GGML(12), .ndim = 2, .shape = {8, 512},
         .offset = 0, .nbytes = 8 * 2 * 144},
        {.name = "up", .dtype = SMOE_DTYPE_GGML(12), .ndim = 2, .shape = {8, 512},
         .offset = 4096, .nbytes = 8 * 2 * 144},
        {.name = "down", .dtype = SMOE_DTYPE_GGML(14), .ndim = 2, .shape = {512, 256},
         .offset = 8192, .nbytes = 512 * 210},
    };
    smoe_component mlx[4] = {
        {.name = "gate", .dtype = SMOE_DTYPE_MLX_PACKED, .ndim = 2, .shape = {16, 8},
         .offset = 0, .nbytes = 512, .quant_group = 64, .quant_bits = 4},
        {.name = "gate.scales", .dtype = SMOE_DTYPE_BF16, .ndim = 2, .shape = {16, 1},
         .offset = 4096, .nbytes = 32},
        {.name = "gate.biases", .dtype = SMOE_DTYPE_BF16, .ndim = 2, .shape = {16, 1},
         .offset = 8192, .nbytes = 32},
        /* a dtype this library does not know: its nbytes is taken as given */
        {.name = "router.bias\xc3\xa9", .dtype = 0x1ff, .ndim = 1, .shape = {3},
         .offset = 12288, .nbytes = 7},
    };
    uint32_t id0 = 9, id1 = 9;
    assert_int_equal(smoe_writer_add_layout(w, q, 3, &id0), 0);
    assert_int_equal(smoe_writer_add_layout(w, mlx, 4, &id1), 0);
    assert_int_equal(id0, 0);
    assert_int_equal(id1, 1);
    uint64_t ext0 = 8192 + 512 * 210, ext1 = 12288 + 7;
    unsigned char *buf = malloc(ext0);
    assert_non_null(buf);
    synth_blob_fill(buf, ext0, 5, 0, 0);
    assert_int_equal(smoe_writer_add_blob(w, 0, 2, 1, buf, ext1), 0);
    assert_int_equal(smoe_writer_add_blob(w, 0, 0, 0, buf, ext0), 0);
    assert_int_equal(smoe_writer_finish(w), 0);

    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.component_align, 4096);
    assert_int_equal(v.n_layouts, 2);
    assert_int_equal(v.n_components, 7);
    assert_int_equal(v.top_k, 0);
    assert_string_equal(v.meta, "");
    assert_null(smoe__vault_meta(&v, "model"));
    assert_int_equal(v.layouts[0].min_bytes, ext0);
    assert_int_equal(v.layouts[1].first, 3);
    assert_int_equal(v.layouts[1].n, 4);
    assert_int_equal(v.layouts[1].min_bytes, ext1);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(&v.components[i], &q[i], sizeof q[i]);
    for (int i = 0; i < 4; i++)
        assert_memory_equal(&v.components[3 + i], &mlx[i], sizeof mlx[i]);
    const smoe__vault_entry *e0 = smoe__vault_entry_of(&v, 0, 0);
    const smoe__vault_entry *e2 = smoe__vault_entry_of(&v, 0, 2);
    assert_non_null(e0);
    assert_non_null(e2);
    assert_null(smoe__vault_entry_of(&v, 0, 1));
    assert_int_equal(e0->layout, 0);
    assert_int_equal(e2->layout, 1);
    assert_int_equal(e2->offset, 16384);
    assert_int_equal(e0->offset, 32768);
    assert_int_equal(e0->hash, smoe__hash(buf, ext0));
    assert_int_equal(e2->hash, smoe__hash(buf, ext1));
    smoe__vault_free(&v);
    free(buf);
    free(p);
}

/* A file longer than file_size loads: the bytes past it are ignored. */
static void test_trailing_bytes(void **state)
{
    (void)state;
    char *p = base_vault("trailing.smoe");
    uint64_t size = tu_file_size(p);
    tu_truncate(p, size + 5000);
    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.file_size, size + 5000);
    smoe__vault_free(&v);
    free(p);
}

/* ---- memory-backed I/O and faults ------------------------------------------ */

static void test_mem_io(void **state)
{
    (void)state;
    char *p = base_vault("mem.smoe");
    smoe__vault a, b;
    load_ok(&a, p);
    tu_mem m = {0};
    m.data = tu_read_file(p, &m.size);
    m.max_chunk = 1000; /* short reads */
    m.eintr_every = 3;  /* and interruptions */
    smoe__io io = tu_mem_io(&m);
    assert_int_equal(smoe__vault_load(&b, "mem:vault", &io), 0);
    assert_int_equal(m.open_fds, 0);
    assert_int_equal(a.vault_id, b.vault_id);
    assert_int_equal(a.entries, b.entries);
    assert_memory_equal(a.index, b.index, (size_t)a.layers * a.experts * sizeof *a.index);
    assert_string_equal(b.path, "mem:vault");
    smoe__vault_free(&a);
    smoe__vault_free(&b);

    /* Every pread failing in turn: a clean SMOE_EIO naming the file, nothing
     * left allocated or open (ASan builds check the former). */
    m.max_chunk = 0;
    m.eintr_every = 0;
    m.preads = 0;
    assert_int_equal(smoe__vault_load(&b, "mem:vault", &io), 0);
    int total = m.preads;
    smoe__vault_free(&b);
    assert_true(total >= 4); /* header, table, layouts, metadata */
    for (int k = 1; k <= total; k++) {
        m.preads = 0;
        m.fail_at = k;
        m.fail_errno = EIO;
        int rc = smoe__vault_load(&b, "mem:vault", &io);
        assert_int_equal(rc, SMOE_EIO);
        assert_non_null(strstr(smoe_last_error(), "mem:vault"));
        assert_non_null(strstr(smoe_last_error(), strerror(EIO)));
        assert_null(b.index);
        assert_int_equal(m.open_fds, 0);
    }
    /* A file that shrinks under the reader: size() still reports the old
     * size, reads stop early. */
    m.fail_at = 0;
    m.report_size = m.size;
    m.size = 16384 + 100;
    int rc = smoe__vault_load(&b, "mem:vault", &io);
    assert_int_equal(rc, SMOE_ETRUNC);
    assert_non_null(strstr(smoe_last_error(), "ended before"));
    assert_int_equal(m.open_fds, 0);
    free(m.data);
    free(p);
}

static void test_open_fails(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "does-not-exist.smoe");
    EXPECT_FAIL(p, SMOE_ESYS, "cannot open");
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, NULL, &smoe__io_os), SMOE_EINVAL);
    assert_int_equal(smoe__vault_load(&v, p, NULL), SMOE_EINVAL);
    assert_int_equal(smoe__vault_load(NULL, p, &smoe__io_os), SMOE_EINVAL);
    smoe__vault_free(NULL);
    free(p);
}

/* ---- 1. header --------------------------------------------------------------- */

static void test_truncated_header(void **state)
{
    (void)state;
    char *p = base_vault("trunc-header.smoe");
    tu_truncate(p, 100);
    EXPECT_FAIL(p, SMOE_ETRUNC, "header", "100 bytes");
    tu_truncate(p, 0);
    EXPECT_FAIL(p, SMOE_ETRUNC, "header");
    free(p);
}

static void test_bad_magic(void **state)
{
    (void)state;
    char *p = base_vault("magic.smoe");
    tu_patch_bytes(p, 4, "\r\r", 2); /* CR LF -> CR CR, as a text-mode copy might */
    EXPECT_FAIL(p, SMOE_EMAGIC, "magic", "89 53 4d 4f 45 0d 0a 1a");
    free(p);
}

static void test_bad_version(void **state)
{
    (void)state;
    char *p = base_vault("version.smoe");
    tu_patch_u32(p, TU_H_VERSION, 3); /* 2 is the index vault (test_index.c) */
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EVERSION, "version", "found 3", "expected 1 or 2");
    free(p);
}

static void test_bad_header_fields(void **state)
{
    (void)state;
    static const struct { uint32_t off; uint64_t val; int wide; const char *field; } cases[] = {
        {TU_H_HEADER_SIZE, 256, 0, "header_size"},
        {TU_H_ALIGNMENT, 4096, 0, "alignment"},
        {TU_H_COMPONENT_ALIGN, 128, 0, "component_align"},
        {TU_H_COMPONENT_ALIGN, 768, 0, "component_align"},
        {TU_H_COMPONENT_ALIGN, 32768, 0, "component_align"},
        {TU_H_FLAGS, 1, 0, "flags"},
        {TU_H_DATA_OFFSET, 32768, 1, "data_offset"},
        {TU_H_RESERVED + 5, 1, 0, "reserved"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = base_vault("hdr.smoe");
        if (cases[i].wide)
            tu_patch_u64(p, cases[i].off, cases[i].val);
        else
            tu_patch_u32(p, cases[i].off, (uint32_t)cases[i].val);
        tu_fix_checksum(p);
        EXPECT_FAIL(p, SMOE_EFORMAT, cases[i].field);
        free(p);
    }
}

/* ---- 2. counts ------------------------------------------------------------------ */

static void test_counts(void **state)
{
    (void)state;
    static const struct { uint32_t layers, experts, entries, layouts, components;
                          uint64_t meta_bytes; const char *field; } cases[] = {
        {0, 4, 8, 1, 3, 0, "layers"},
        {65537, 4, 8, 1, 3, 0, "layers"},
        {2, 0, 8, 1, 3, 0, "experts"},
        {2, 65537, 8, 1, 3, 0, "experts"},
        {8192, 1024, 8, 1, 3, 0, "layers x experts"},
        {2, 4, 0, 1, 3, 0, "entries"},
        {2, 4, 9, 1, 3, 0, "entries"},
        {2, 4, 8, 0, 3, 0, "layouts"},
        {2, 4, 8, 65537, 3, 0, "layouts"},
        {2, 4, 8, 1, 0, 0, "components"},
        {2, 4, 8, 1, (1u << 20) + 1, 0, "components"},
        {2, 4, 8, 1, 3, (1u << 20) + 1, "meta_bytes"},
        /* within the limits, but the tables could not fit in the file */
        {4096, 1024, 1u << 22, 1, 3, 0, "entries"},
        {2, 4, 8, 1, 1u << 20, 0, "components"},
        {2, 4, 8, 65536, 3, 0, "layouts"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = base_vault("counts.smoe");
        tu_patch_u32(p, TU_H_LAYERS, cases[i].layers);
        tu_patch_u32(p, TU_H_EXPERTS, cases[i].experts);
        tu_patch_u32(p, TU_H_ENTRIES, cases[i].entries);
        tu_patch_u32(p, TU_H_LAYOUTS, cases[i].layouts);
        tu_patch_u32(p, TU_H_COMPONENTS, cases[i].components);
        if (cases[i].meta_bytes)
            tu_patch_u64(p, TU_H_META_BYTES, cases[i].meta_bytes);
        EXPECT_FAIL(p, SMOE_ECOUNT, cases[i].field);
        free(p);
    }
    /* a big meta_bytes within the limit, in a file smaller than it */
    char *p = base_vault("counts-meta.smoe");
    tu_patch_u64(p, TU_H_META_BYTES, 1u << 20);
    EXPECT_FAIL(p, SMOE_ECOUNT, "meta_bytes", "the file has only");
    free(p);
}

/* ---- 3. table locations ------------------------------------------------------------- */

static void test_table_outside_file(void **state)
{
    (void)state;
    char *p = base_vault("outside.smoe");
    uint64_t fs = tu_read_u64(p, TU_H_FILE_SIZE);
    tu_patch_u64(p, TU_H_TABLE_OFFSET, fs & ~7ull); /* the table would end past the file */
    EXPECT_FAIL(p, SMOE_ERANGE, "table_offset", "file_size");
    free(p);

    p = base_vault("outside2.smoe");
    tu_patch_u64(p, TU_H_META_OFFSET, (tu_read_u64(p, TU_H_FILE_SIZE) + 15) & ~7ull);
    EXPECT_FAIL(p, SMOE_ERANGE, "meta_offset");
    free(p);

    p = base_vault("outside3.smoe");
    tu_patch_u64(p, TU_H_LAYOUT_OFFSET, 128); /* inside the header area */
    EXPECT_FAIL(p, SMOE_ERANGE, "layout_offset", "data_offset");
    free(p);

    p = base_vault("misaligned-table.smoe");
    tu_patch_u64(p, TU_H_TABLE_OFFSET, tu_read_u64(p, TU_H_TABLE_OFFSET) + 4);
    EXPECT_FAIL(p, SMOE_EALIGN, "table_offset", "multiple of 8");
    free(p);

    p = base_vault("tables-overlap.smoe");
    tu_patch_u64(p, TU_H_META_OFFSET, tu_read_u64(p, TU_H_LAYOUT_OFFSET) + 8);
    EXPECT_FAIL(p, SMOE_EOVERLAP, "layout_offset", "meta_offset");
    free(p);
}

static void test_table_overflow(void **state)
{
    (void)state;
    char *p = base_vault("table-overflow.smoe");
    tu_patch_u64(p, TU_H_TABLE_OFFSET, UINT64_MAX - 7);
    EXPECT_FAIL(p, SMOE_EOVERFLOW, "table_offset", "overflows");
    free(p);
    p = base_vault("meta-overflow.smoe");
    tu_patch_u64(p, TU_H_META_OFFSET, UINT64_MAX - 7);
    EXPECT_FAIL(p, SMOE_EOVERFLOW, "meta_offset");
    free(p);
}

static void test_truncated_file(void **state)
{
    (void)state;
    char *p = base_vault("trunc.smoe");
    uint64_t size = tu_file_size(p);
    tu_truncate(p, size - 1);
    EXPECT_FAIL(p, SMOE_ETRUNC, "file_size", "truncated");
    tu_truncate(p, 20000); /* cut inside the blobs */
    EXPECT_FAIL(p, SMOE_ETRUNC, "file_size");
    free(p);
}

/* ---- 4. checksum ------------------------------------------------------------------- */

static void test_header_checksum(void **state)
{
    (void)state;
    char *p = base_vault("hsum.smoe");
    tu_flip_byte(p, TU_H_CHECKSUM + 3);
    EXPECT_FAIL(p, SMOE_EHDRSUM, "checksum", "stored");
    free(p);
    /* a header field changed without updating the checksum */
    p = base_vault("hsum2.smoe");
    tu_patch_u32(p, TU_H_COMPONENT_ALIGN, 512);
    EXPECT_FAIL(p, SMOE_EHDRSUM, "checksum");
    free(p);
}

static void test_table_checksum(void **state)
{
    (void)state;
    char *p = base_vault("tsum.smoe");
    tu_flip_byte(p, tu_entry_off(p, 3) + TU_E_HASH + 2);
    EXPECT_FAIL(p, SMOE_EHDRSUM, "checksum");
    free(p);
    p = base_vault("tsum2.smoe");
    tu_flip_byte(p, tu_component_off(p, 1) + TU_C_SHAPE);
    EXPECT_FAIL(p, SMOE_EHDRSUM, "checksum");
    free(p);
    p = base_vault("tsum3.smoe");
    tu_flip_byte(p, tu_read_u64(p, TU_H_META_OFFSET) + 1);
    EXPECT_FAIL(p, SMOE_EHDRSUM, "checksum");
    free(p);
}

/* A blob byte is not covered by the header checksum: the load succeeds and
 * the entry's hash no longer matches the bytes. */
static void test_blob_corruption_not_header(void **state)
{
    (void)state;
    char *p = base_vault("blob.smoe");
    smoe__vault v;
    load_ok(&v, p);
    const smoe__vault_entry *e = smoe__vault_entry_of(&v, 1, 2);
    assert_non_null(e);
    tu_flip_byte(p, e->offset + 10);
    smoe__vault v2;
    load_ok(&v2, p);
    unsigned char *b = malloc((size_t)e->size);
    assert_non_null(b);
    tu_read_at(p, e->offset, b, (size_t)e->size);
    assert_int_not_equal(smoe__hash(b, (size_t)e->size), e->hash);
    free(b);
    smoe__vault_free(&v);
    smoe__vault_free(&v2);
    free(p);
}

/* ---- 5a. components and layouts ----------------------------------------------------- */

static char *patched_component(const char *name, uint32_t k, uint32_t field, const void *bytes,
                               size_t n)
{
    char *p = base_vault(name);
    tu_patch_bytes(p, tu_component_off(p, k) + field, bytes, n);
    tu_fix_checksum(p);
    return p;
}

static void test_component_name(void **state)
{
    (void)state;
    char name[64];
    memset(name, 'a', sizeof name);
    char *p = patched_component("cname.smoe", 1, TU_C_NAME, name, sizeof name);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 1", "name", "NUL-terminated");
    free(p);
    static const char zero64[64];
    p = patched_component("cname2.smoe", 0, TU_C_NAME, zero64, sizeof zero64);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 0", "name", "empty");
    free(p);
    p = patched_component("cname3.smoe", 2, TU_C_NAME + 10, "x", 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 2", "name", "NUL-padded");
    free(p);
    p = patched_component("cname4.smoe", 2, TU_C_NAME, "\xff\xfe", 2);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 2", "name", "UTF-8");
    free(p);
    p = patched_component("cname5.smoe", 2, TU_C_NAME, "up\0\0", 4); /* "down" -> "up" */
    EXPECT_FAIL(p, SMOE_EFORMAT, "layout 0", "\"up\"", "twice");
    free(p);
}

static void test_component_offset(void **state)
{
    (void)state;
    char *p = base_vault("coff.smoe");
    uint64_t off = tu_read_u64(p, tu_component_off(p, 1) + TU_C_OFFSET);
    tu_patch_u64(p, tu_component_off(p, 1) + TU_C_OFFSET, off + 8);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EALIGN, "component 1", "offset", "component_align");
    free(p);
    /* aligned, but on top of the previous component */
    p = base_vault("coff2.smoe");
    tu_patch_u64(p, tu_component_off(p, 1) + TU_C_OFFSET, 0);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EOVERLAP, "layout 0", "component 1", "overlaps");
    free(p);
}

static void test_component_nbytes(void **state)
{
    (void)state;
    char *p = base_vault("cnbytes.smoe");
    uint64_t nb = tu_read_u64(p, tu_component_off(p, 0) + TU_C_NBYTES);
    tu_patch_u64(p, tu_component_off(p, 0) + TU_C_NBYTES, nb + 2);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 0", "nbytes", "bf16");
    free(p);
    /* a q4_K shape whose innermost dimension is not a whole number of blocks */
    p = base_vault("cnbytes2.smoe");
    uint32_t q4k = SMOE_DTYPE_GGML(12);
    tu_patch_u32(p, tu_component_off(p, 0) + TU_C_DTYPE, q4k);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 0", "shape", "ggml:q4_K");
    free(p);
    /* nbytes zero */
    p = base_vault("cnbytes3.smoe");
    tu_patch_u64(p, tu_component_off(p, 0) + TU_C_NBYTES, 0);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 0", "nbytes");
    free(p);
    /* offset + nbytes wraps */
    p = base_vault("cnbytes4.smoe");
    tu_patch_u32(p, tu_component_off(p, 2) + TU_C_DTYPE, 0x1ff);
    tu_patch_u64(p, tu_component_off(p, 2) + TU_C_NBYTES, UINT64_MAX - 100);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EOVERFLOW, "component 2", "offset + nbytes");
    free(p);
}

static void test_component_fields(void **state)
{
    (void)state;
    static const struct { uint32_t field; uint64_t val; int wide; const char *needle; } c[] = {
        {TU_C_NDIM, 0, 0, "ndim"},
        {TU_C_NDIM, 5, 0, "ndim"},
        {TU_C_SHAPE + 8, 0, 1, "shape[1]"},
        {TU_C_SHAPE + 16, 1, 1, "shape[2]"},
        {TU_C_QGROUP, 64, 0, "quant_group"},
        {TU_C_QBITS, 4, 0, "quant_bits"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *p = base_vault("cfield.smoe");
        uint64_t at = tu_component_off(p, 1) + c[i].field;
        if (c[i].wide)
            tu_patch_u64(p, at, c[i].val);
        else
            tu_patch_u32(p, at, (uint32_t)c[i].val);
        tu_fix_checksum(p);
        EXPECT_FAIL(p, SMOE_EFORMAT, "component 1", c[i].needle);
        free(p);
    }
    /* mlx packed with an invalid bit width */
    char *p = base_vault("cfield-mlx.smoe");
    uint64_t at = tu_component_off(p, 0);
    tu_patch_u32(p, at + TU_C_DTYPE, SMOE_DTYPE_MLX_PACKED);
    tu_patch_u32(p, at + TU_C_QGROUP, 32);
    tu_patch_u32(p, at + TU_C_QBITS, 7);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "component 0", "quant_bits", "found 7");
    free(p);
    /* an unknown dtype with any nbytes inside the blob is accepted */
    p = base_vault("cfield-unknown.smoe");
    at = tu_component_off(p, 2);
    tu_patch_u32(p, at + TU_C_DTYPE, 0x1ff);
    uint64_t nb = tu_read_u64(p, at + TU_C_NBYTES);
    tu_patch_u64(p, at + TU_C_NBYTES, nb - 5);
    tu_patch_u64(p, tu_layout_off(p, 0) + TU_L_EXTENT,
                 tu_read_u64(p, tu_layout_off(p, 0) + TU_L_EXTENT) - 5);
    tu_fix_checksum(p);
    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.components[2].dtype, 0x1ff);
    assert_int_equal(v.components[2].nbytes, nb - 5);
    smoe__vault_free(&v);
    free(p);
}

static void test_bad_layout(void **state)
{
    (void)state;
    char *p = base_vault("layout-n.smoe");
    tu_patch_u32(p, tu_layout_off(p, 0) + TU_L_N, 0);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "layout 0", "n_components");
    free(p);
    p = base_vault("layout-first.smoe");
    tu_patch_u32(p, tu_layout_off(p, 0) + TU_L_FIRST, 1);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "layout 0", "first_component", "exceeds components 3");
    free(p);
    p = base_vault("layout-extent.smoe");
    tu_patch_u64(p, tu_layout_off(p, 0) + TU_L_EXTENT, 100);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "layout 0", "extent", "found 100");
    free(p);
}

/* Two layouts whose component ranges overlap. */
static void test_layouts_overlap(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "layout-ovl.smoe");
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = 1;
    wo.experts = 2;
    smoe_writer *w;
    assert_int_equal(smoe_writer_open(p, &wo, &w), 0);
    smoe_component c[3];
    uint32_t n = synth_layout(c, 5000), id;
    assert_int_equal(smoe_writer_add_layout(w, c, n, &id), 0);
    assert_int_equal(smoe_writer_add_layout(w, c, n, &id), 0);
    unsigned char buf[5000] = {1};
    assert_int_equal(smoe_writer_add_blob(w, 0, 0, 0, buf, sizeof buf), 0);
    assert_int_equal(smoe_writer_add_blob(w, 0, 1, 1, buf, sizeof buf), 0);
    assert_int_equal(smoe_writer_finish(w), 0);
    tu_patch_u32(p, tu_layout_off(p, 1) + TU_L_FIRST, 2);
    tu_patch_u32(p, tu_layout_off(p, 1) + TU_L_N, 1);
    tu_patch_u64(p, tu_layout_off(p, 1) + TU_L_EXTENT, tu_layout_extent(c, n));
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EOVERLAP, "layout 1", "layout 0");
    free(p);
}

/* ---- 5b. entries -------------------------------------------------------------------- */

static char *patched_entry(const char *name, uint32_t i, uint32_t field, uint64_t v, int wide)
{
    char *p = base_vault(name);
    if (wide)
        tu_patch_u64(p, tu_entry_off(p, i) + field, v);
    else
        tu_patch_u32(p, tu_entry_off(p, i) + field, (uint32_t)v);
    tu_fix_checksum(p);
    return p;
}

static void test_layer_expert_range(void **state)
{
    (void)state;
    char *p = patched_entry("range-l.smoe", 5, TU_E_LAYER, BASE_LAYERS, 0);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 5", "layer", "found 2", "layers 2");
    free(p);
    p = patched_entry("range-e.smoe", 6, TU_E_EXPERT, 1000, 0);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 6", "expert", "found 1000", "experts 4");
    free(p);
}

static void test_unknown_layout(void **state)
{
    (void)state;
    char *p = patched_entry("layout-id.smoe", 2, TU_E_LAYOUT, 1, 0);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 2", "layout", "found 1", "layouts 1");
    free(p);
}

static void test_entry_flags(void **state)
{
    (void)state;
    char *p = patched_entry("eflags.smoe", 0, TU_E_FLAGS, 4, 0);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 0", "flags");
    free(p);
}

static void test_duplicate(void **state)
{
    (void)state;
    char *p = base_vault("dup.smoe");
    uint64_t e = tu_entry_off(p, 5);
    tu_patch_u32(p, e + TU_E_LAYER, 0);
    tu_patch_u32(p, e + TU_E_EXPERT, 3);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EDUP, "entry 5", "layer 0, expert 3", "entry 3");
    free(p);
}

static void test_misaligned_offset(void **state)
{
    (void)state;
    char *p = base_vault("misoff.smoe");
    uint64_t e = tu_entry_off(p, 4);
    tu_patch_u64(p, e + TU_E_OFFSET, tu_read_u64(p, e + TU_E_OFFSET) + 4096);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EALIGN, "entry 4", "offset", "multiple of 16384");
    free(p);
}

static void test_misaligned_padded(void **state)
{
    (void)state;
    char *p = base_vault("mispad.smoe");
    uint64_t e = tu_entry_off(p, 1);
    tu_patch_u64(p, e + TU_E_PADDED, tu_read_u64(p, e + TU_E_PADDED) + 8);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EALIGN, "entry 1", "padded", "multiple of 16384");
    free(p);
}

static void test_entry_in_header_area(void **state)
{
    (void)state;
    char *p = patched_entry("hdrarea.smoe", 0, TU_E_OFFSET, 0, 1);
    EXPECT_FAIL(p, SMOE_ERANGE, "entry 0", "offset", "data_offset");
    free(p);
}

static void test_entry_sizes(void **state)
{
    (void)state;
    char *p = patched_entry("size0.smoe", 1, TU_E_SIZE, 0, 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 1", "size", "found 0");
    free(p);

    p = base_vault("size-big.smoe");
    uint64_t e = tu_entry_off(p, 1);
    tu_patch_u64(p, e + TU_E_SIZE, tu_read_u64(p, e + TU_E_PADDED) + 1);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 1", "size", "padded");
    free(p);

    p = base_vault("pad-big.smoe");
    e = tu_entry_off(p, 1);
    tu_patch_u64(p, e + TU_E_PADDED, tu_read_u64(p, e + TU_E_PADDED) + 16384);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 1", "padded", "less than size + 16384");
    free(p);

    /* smaller than its layout's extent (768 bytes in the base vault) */
    p = patched_entry("size-extent.smoe", 2, TU_E_SIZE, 700, 1);
    tu_patch_u64(p, tu_entry_off(p, 2) + TU_E_PADDED, 16384);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EFORMAT, "entry 2", "size", "extent");
    free(p);
}

static void test_entry_overflow(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "eoverflow.smoe");
    /* blobs of at most 16 KiB: padded is 16384 */
    assert_int_equal(tu_make_vault(p, 1, 2, 1000, 16384, 3), 0);
    uint64_t e = tu_entry_off(p, 1);
    tu_patch_u64(p, e + TU_E_OFFSET, UINT64_MAX - 16383); /* a multiple of 16384 */
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EOVERFLOW, "entry 1", "offset + padded", "overflows");
    free(p);
}

static void test_truncated_extent(void **state)
{
    (void)state;
    char *p = base_vault("trunc-extent.smoe");
    uint64_t fs = tu_read_u64(p, TU_H_FILE_SIZE);
    uint64_t e = tu_entry_off(p, 7);
    tu_patch_u64(p, e + TU_E_OFFSET, round16k(fs)); /* starts past the end */
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_ETRUNC, "entry 7", "ends past the end of the file", "file_size");
    free(p);
    /* an extent that starts inside the file and runs past it */
    p = base_vault("trunc-extent2.smoe");
    fs = tu_read_u64(p, TU_H_FILE_SIZE);
    e = tu_entry_off(p, 7);
    uint64_t off = tu_read_u64(p, e + TU_E_OFFSET);
    tu_patch_u64(p, e + TU_E_OFFSET, round16k(fs) - 16384);
    tu_patch_u64(p, e + TU_E_SIZE, 40000);
    tu_patch_u64(p, e + TU_E_PADDED, 49152);
    tu_fix_checksum(p);
    assert_true(round16k(fs) - 16384 > off);
    EXPECT_FAIL(p, SMOE_ETRUNC, "entry 7", "file_size");
    free(p);
}

static void test_overlapping_blobs(void **state)
{
    (void)state;
    char *p = base_vault("overlap.smoe");
    uint64_t off0 = tu_read_u64(p, tu_entry_off(p, 0) + TU_E_OFFSET);
    tu_patch_u64(p, tu_entry_off(p, 4) + TU_E_OFFSET, off0);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EOVERLAP, "entry 4", "entry 0", "overlaps");
    free(p);
    /* a blob reaching into the next one by one padded block */
    p = base_vault("overlap2.smoe");
    uint64_t e = tu_entry_off(p, 2);
    uint64_t size = tu_read_u64(p, e + TU_E_SIZE), pad = tu_read_u64(p, e + TU_E_PADDED);
    tu_patch_u64(p, e + TU_E_SIZE, pad + 1);
    tu_patch_u64(p, e + TU_E_PADDED, pad + 16384);
    tu_fix_checksum(p);
    (void)size;
    EXPECT_FAIL(p, SMOE_EOVERLAP, "entry 3", "entry 2");
    free(p);
}

static void test_blob_overlaps_tables(void **state)
{
    (void)state;
    /* 20 KB of metadata: the tables span more than one 16 KiB block */
    static char big[20001];
    memset(big, 'x', sizeof big - 1);
    const char *meta[] = {"notes", big, NULL};
    tu_vault_opts o = {0};
    o.layers = 1;
    o.experts = 3;
    o.min_bytes = 1000;
    o.max_bytes = 16384;
    o.seed = 11;
    o.meta = meta;
    char *p = tu_path(g_dir, "over-tables.smoe");
    assert_int_equal(tu_make_vault_ex(p, &o), 0);
    uint64_t t = tu_read_u64(p, TU_H_TABLE_OFFSET);
    assert_int_equal(t % 16384, 0);
    tu_patch_u64(p, tu_entry_off(p, 2) + TU_E_OFFSET, t);
    tu_fix_checksum(p);
    EXPECT_FAIL(p, SMOE_EOVERLAP, "entry 2", "expert table", "table_offset");
    free(p);
}

/* ---- metadata -------------------------------------------------------------------------- */

/* A vault whose metadata is "key1=v1\nkey2=v2\n" patched at byte `at`. */
static char *patched_meta(const char *name, uint64_t at, const char *bytes, size_t n)
{
    static const char *const meta[] = {"key1", "v1", "key2", "v2", NULL};
    tu_vault_opts o = {0};
    o.layers = 1;
    o.experts = 4;
    o.min_bytes = 1000;
    o.max_bytes = 2000;
    o.seed = 1;
    o.meta = meta;
    char *p = tu_path(g_dir, name);
    assert_int_equal(tu_make_vault_ex(p, &o), 0);
    tu_patch_bytes(p, tu_read_u64(p, TU_H_META_OFFSET) + at, bytes, n);
    tu_fix_checksum(p);
    return p;
}

static void test_bad_meta(void **state)
{
    (void)state;
    char *p = patched_meta("meta-nl.smoe", 15, " ", 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "metadata", "newline");
    free(p);
    p = patched_meta("meta-eq.smoe", 4, ":", 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "metadata line 1", "'='");
    free(p);
    p = patched_meta("meta-key.smoe", 8, "=", 1); /* "=ey2=v2" */
    EXPECT_FAIL(p, SMOE_EFORMAT, "metadata line 2", "empty key");
    free(p);
    p = patched_meta("meta-dup.smoe", 11, "1", 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "metadata line 2", "\"key1\"", "twice");
    free(p);
    p = patched_meta("meta-nul.smoe", 6, "\0", 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "metadata", "NUL");
    free(p);
    p = patched_meta("meta-utf8.smoe", 5, "\xc0", 1);
    EXPECT_FAIL(p, SMOE_EFORMAT, "metadata", "UTF-8");
    free(p);
    /* top_k: "key2=v2" -> "top_k=x" and friends; experts is 4 */
    static const char *const bad_k[] = {"top_k=x", "top_k=0", "top_k=5", "top_k= "};
    for (size_t i = 0; i < sizeof bad_k / sizeof bad_k[0]; i++) {
        char k[8];
        memcpy(k, bad_k[i], 7);
        p = patched_meta("meta-topk.smoe", 8, k, 7);
        EXPECT_FAIL(p, SMOE_EFORMAT, "top_k", "experts (4)");
        free(p);
    }
    p = patched_meta("meta-topk-ok.smoe", 8, "top_k=4", 7);
    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.top_k, 4);
    smoe__vault_free(&v);
    free(p);
}

/* ---- the writer's argument checks -------------------------------------------------------- */

static void expect_wfail(int rc, int code, const char *needle)
{
    if (rc != code)
        fail_msg("expected %s, got %s: %s", smoe_err_name(code), smoe_err_name(rc),
                 smoe_last_error());
    if (!strstr(smoe_last_error(), needle))
        fail_msg("message lacks \"%s\": %s", needle, smoe_last_error());
}

static void test_writer_open_errors(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "wopen.smoe");
    smoe_writer *w = (smoe_writer *)1;
    smoe_writer_opts o = SMOE_WRITER_OPTS_INIT;
    o.layers = 2;
    o.experts = 4;
    expect_wfail(smoe_writer_open(p, NULL, &w), SMOE_EINVAL, "opts");
    assert_null(w);
    expect_wfail(smoe_writer_open(NULL, &o, &w), SMOE_EINVAL, "path");
    expect_wfail(smoe_writer_open(p, &o, NULL), SMOE_EINVAL, "out");
    smoe_writer_opts bad = o;
    bad.struct_size = 8;
    expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "struct_size");
    bad = o;
    bad.layers = 0;
    expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "layers");
    bad.layers = 65537;
    expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "layers");
    bad = o;
    bad.experts = 0;
    expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "experts");
    bad = o;
    bad.layers = 8192;
    bad.experts = 1024;
    expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "layers x experts");
    static const uint32_t aligns[] = {100, 128, 384, 32768};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        bad = o;
        bad.component_align = aligns[i];
        expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "component_align");
    }
    bad = o;
    bad.reserved0_ = 1;
    expect_wfail(smoe_writer_open(p, &bad, &w), SMOE_EINVAL, "reserved0_");
    char *nodir = tu_path(g_dir, "no/such/dir.smoe");
    expect_wfail(smoe_writer_open(nodir, &o, &w), SMOE_ESYS, "no/such/dir.smoe.tmp.");
    free(nodir);
    /* an older caller's smaller struct: the missing field takes its default */
    bad = o;
    bad.component_align = 999;
    bad.struct_size = offsetof(smoe_writer_opts, component_align);
    assert_int_equal(smoe_writer_open(p, &bad, &w), 0);
    smoe_writer_abort(w);
    assert_false(tu_exists(p));
    free(p);
}

static smoe_writer *open_writer(const char *path, uint32_t layers, uint32_t experts)
{
    smoe_writer_opts o = SMOE_WRITER_OPTS_INIT;
    o.layers = layers;
    o.experts = experts;
    smoe_writer *w = NULL;
    int rc = smoe_writer_open(path, &o, &w);
    if (rc != 0)
        fail_msg("smoe_writer_open: %s", smoe_last_error());
    return w;
}

static void test_writer_layout_errors(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "wlayout.smoe");
    smoe_writer *w = open_writer(p, 1, 2);
    smoe_component good[3];
    uint32_t n = synth_layout(good, 100000), id;
    assert_int_equal(n, 3);
    smoe_component c[3];
    expect_wfail(smoe_writer_add_layout(w, good, 0, &id), SMOE_EINVAL, "at least one");
    expect_wfail(smoe_writer_add_layout(w, NULL, 3, &id), SMOE_EINVAL, "at least one");
    expect_wfail(smoe_writer_add_layout(NULL, good, 3, &id), SMOE_EINVAL, "NULL");
#define BAD_LAYOUT(mutate, code, needle)                                        \
    do {                                                                        \
        memcpy(c, good, sizeof c);                                              \
        mutate;                                                                 \
        expect_wfail(smoe_writer_add_layout(w, c, 3, &id), code, needle);       \
    } while (0)
    BAD_LAYOUT(c[1].name[0] = 0, SMOE_EINVAL, "name is empty");
    BAD_LAYOUT(memset(c[1].name, 'n', sizeof c[1].name), SMOE_EINVAL, "NUL-terminated");
    BAD_LAYOUT(strcpy(c[2].name, "gate"), SMOE_EINVAL, "\"gate\"");
    BAD_LAYOUT(strcpy(c[2].name, "\xe2\x82"), SMOE_EINVAL, "UTF-8");
    BAD_LAYOUT(c[1].offset += 8, SMOE_EINVAL, "component_align");
    BAD_LAYOUT(c[1].offset = 0, SMOE_EINVAL, "overlaps or precedes");
    BAD_LAYOUT((c[1].offset = c[2].offset, c[2].offset = good[1].offset), SMOE_EINVAL,
               "overlaps or precedes");
    BAD_LAYOUT(c[0].nbytes += 2, SMOE_EINVAL, "nbytes");
    BAD_LAYOUT(c[0].nbytes = 0, SMOE_EINVAL, "nbytes");
    BAD_LAYOUT(c[0].ndim = 0, SMOE_EINVAL, "ndim");
    BAD_LAYOUT(c[0].ndim = 5, SMOE_EINVAL, "ndim");
    BAD_LAYOUT(c[0].shape[2] = 1, SMOE_EINVAL, "shape[2]");
    BAD_LAYOUT(c[0].shape[0] = 0, SMOE_EINVAL, "shape[0]");
    BAD_LAYOUT(c[0].quant_bits = 4, SMOE_EINVAL, "quant_bits");
    BAD_LAYOUT((c[0].dtype = SMOE_DTYPE_MLX_PACKED, c[0].quant_group = 64, c[0].quant_bits = 7),
               SMOE_EINVAL, "quant_bits");
    BAD_LAYOUT((c[0].dtype = SMOE_DTYPE_MLX_PACKED, c[0].quant_bits = 4), SMOE_EINVAL,
               "quant_group");
    BAD_LAYOUT((c[0].dtype = SMOE_DTYPE_GGML(12), c[0].shape[1] = 100), SMOE_EINVAL,
               "cannot be stored as ggml:q4_K");
#undef BAD_LAYOUT
    /* rejected calls changed nothing: the first good layout gets id 0, and
     * garbage after a name's NUL is not written */
    memcpy(c, good, sizeof c);
    memset(c[0].name + 5, 'z', sizeof c[0].name - 5);
    assert_int_equal(smoe_writer_add_layout(w, c, 3, &id), 0);
    assert_int_equal(id, 0);
    unsigned char *buf = calloc(1, 100000);
    assert_non_null(buf);
    assert_int_equal(smoe_writer_add_blob(w, 0, 0, 0, buf, 100000), 0);
    assert_int_equal(smoe_writer_finish(w), 0);
    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.n_layouts, 1);
    assert_memory_equal(&v.components[0], &good[0], sizeof good[0]);
    smoe__vault_free(&v);
    free(buf);
    free(p);
}

static void test_writer_meta_errors(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "wmeta.smoe");
    smoe_writer *w = open_writer(p, 1, 8);
    expect_wfail(smoe_writer_set_meta(w, NULL, "v"), SMOE_EINVAL, "key");
    expect_wfail(smoe_writer_set_meta(w, "", "v"), SMOE_EINVAL, "key");
    expect_wfail(smoe_writer_set_meta(w, "a=b", "v"), SMOE_EINVAL, "'='");
    expect_wfail(smoe_writer_set_meta(w, "a\nb", "v"), SMOE_EINVAL, "newline");
    expect_wfail(smoe_writer_set_meta(w, "k", "x\ny"), SMOE_EINVAL, "newline");
    expect_wfail(smoe_writer_set_meta(w, "k", NULL), SMOE_EINVAL, "value");
    expect_wfail(smoe_writer_set_meta(w, "k", "\xff"), SMOE_EINVAL, "UTF-8");
    expect_wfail(smoe_writer_set_meta(w, "top_k", "0"), SMOE_EINVAL, "top_k");
    expect_wfail(smoe_writer_set_meta(w, "top_k", "9"), SMOE_EINVAL, "top_k");
    expect_wfail(smoe_writer_set_meta(w, "top_k", "two"), SMOE_EINVAL, "top_k");
    expect_wfail(smoe_writer_set_meta(w, "top_k", "99999999999999999999"), SMOE_EINVAL,
                 "top_k");
    char *huge = malloc((1u << 20) + 1);
    assert_non_null(huge);
    memset(huge, 'h', 1u << 20);
    huge[1u << 20] = 0;
    expect_wfail(smoe_writer_set_meta(w, "big", huge), SMOE_EINVAL, "limit");
    free(huge);
    assert_int_equal(smoe_writer_set_meta(w, "model", "first"), 0);
    assert_int_equal(smoe_writer_set_meta(w, "top_k", "8"), 0);
    assert_int_equal(smoe_writer_set_meta(w, "model", "second"), 0); /* replaces */
    smoe_component c[3];
    uint32_t n = synth_layout(c, 3000), id;
    assert_int_equal(smoe_writer_add_layout(w, c, n, &id), 0);
    unsigned char buf[3000] = {0};
    assert_int_equal(smoe_writer_add_blob(w, 0, 5, id, buf, sizeof buf), 0);
    assert_int_equal(smoe_writer_finish(w), 0);
    smoe__vault v;
    load_ok(&v, p);
    assert_string_equal(v.meta, "model=second\ntop_k=8\n");
    assert_int_equal(v.top_k, 8);
    smoe__vault_free(&v);
    free(p);
}

static void test_writer_blob_errors(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "wblob.smoe");
    smoe_writer *w = open_writer(p, 2, 3);
    unsigned char buf[4096] = {0};
    expect_wfail(smoe_writer_add_blob(w, 0, 0, 0, buf, 10), SMOE_EINVAL, "layout 0");
    smoe_component c[3];
    uint32_t n = synth_layout(c, 3000), id;
    assert_int_equal(smoe_writer_add_layout(w, c, n, &id), 0);
    expect_wfail(smoe_writer_add_blob(w, 2, 0, id, buf, 3000), SMOE_EINVAL, "layer 2");
    expect_wfail(smoe_writer_add_blob(w, 1, 3, id, buf, 3000), SMOE_EINVAL, "expert 3");
    expect_wfail(smoe_writer_add_blob(w, 1, 1, 1, buf, 3000), SMOE_EINVAL, "layout 1");
    expect_wfail(smoe_writer_add_blob(w, 1, 1, id, NULL, 3000), SMOE_EINVAL, "no data");
    expect_wfail(smoe_writer_add_blob(w, 1, 1, id, buf, 0), SMOE_EINVAL, "no data");
    expect_wfail(smoe_writer_add_blob(w, 1, 1, id, buf, tu_layout_extent(c, n) - 1),
                 SMOE_EINVAL, "extent");
    expect_wfail(smoe_writer_add_blob(NULL, 1, 1, id, buf, 3000), SMOE_EINVAL, "NULL");
    assert_int_equal(smoe_writer_add_blob(w, 1, 1, id, buf, 3000), 0);
    expect_wfail(smoe_writer_add_blob(w, 1, 1, id, buf, 3000), SMOE_EINVAL, "already");
    assert_int_equal(smoe_writer_finish(w), 0);
    smoe__vault v;
    load_ok(&v, p);
    assert_int_equal(v.entries, 1);
    smoe__vault_free(&v);
    free(p);
}

static void test_writer_finish_abort(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "wfin.smoe");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    /* abort removes the temporary file and leaves nothing at path */
    smoe_writer *w = open_writer(p, 1, 1);
    assert_true(tu_exists(tmp));
    smoe_writer_abort(w);
    assert_false(tu_exists(tmp));
    assert_false(tu_exists(p));
    smoe_writer_abort(NULL);
    /* finishing without blobs fails, frees, and removes the temporary file */
    w = open_writer(p, 1, 1);
    expect_wfail(smoe_writer_finish(w), SMOE_EINVAL, "no blobs");
    assert_false(tu_exists(tmp));
    assert_false(tu_exists(p));
    expect_wfail(smoe_writer_finish(NULL), SMOE_EINVAL, "NULL");
    /* until finish, only the temporary file exists; then only the vault */
    w = open_writer(p, 1, 1);
    smoe_component c[3];
    uint32_t n = synth_layout(c, 20000), id;
    assert_int_equal(smoe_writer_add_layout(w, c, n, &id), 0);
    unsigned char *buf = calloc(1, 20000);
    assert_non_null(buf);
    assert_int_equal(smoe_writer_add_blob(w, 0, 0, id, buf, 20000), 0);
    assert_true(tu_exists(tmp));
    assert_false(tu_exists(p));
    assert_int_equal(smoe_writer_finish(w), 0);
    assert_false(tu_exists(tmp));
    assert_true(tu_exists(p));
    /* layout: header, one blob of 2 padded blocks, tables from 49152 */
    assert_int_equal(tu_read_u64(p, TU_H_TABLE_OFFSET), 16384 + 32768);
    assert_int_equal(tu_read_u64(p, TU_H_FILE_SIZE), tu_file_size(p));
    unsigned char zero[16384 - 128], got[16384 - 128];
    memset(zero, 0, sizeof zero);
    tu_read_at(p, 128, got, sizeof got);
    assert_memory_equal(got, zero, sizeof zero);
    free(buf);
    free(p);
}

static void test_writer_write_fails(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "wfault.smoe");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    smoe_component c[3];
    uint32_t n = synth_layout(c, 20000), id;
    unsigned char *buf = calloc(1, 20000);
    assert_non_null(buf);
    /* each pwrite in turn fails: blob, padding, blob, padding, tables, header */
    for (int k = 1; k <= 7; k++) {
        tu_fault f = {0};
        f.pwrite_fail_at = k;
        smoe__io io = tu_fault_io(&f);
        smoe__io_set(&io);
        smoe_writer *w = open_writer(p, 1, 2);
        assert_int_equal(smoe_writer_add_layout(w, c, n, &id), 0);
        int rc = smoe_writer_add_blob(w, 0, 0, id, buf, 20000);
        if (rc == 0)
            rc = smoe_writer_add_blob(w, 0, 1, id, buf, 20000);
        if (rc < 0) {
            expect_wfail(rc, SMOE_EIO, "failed");
            /* the writer now refuses everything */
            expect_wfail(smoe_writer_set_meta(w, "k", "v"), SMOE_EIO, "earlier write failed");
        }
        rc = smoe_writer_finish(w);
        smoe__io_set(NULL);
        if (k <= 6) {
            assert_int_equal(rc, SMOE_EIO);
            assert_false(tu_exists(p));
        } else {
            assert_int_equal(rc, 0); /* only six writes happen */
            assert_true(tu_exists(p));
            unlink(p);
        }
        assert_false(tu_exists(tmp));
    }
    free(buf);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names),
        cmocka_unit_test(test_dtype_bytes),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_roundtrip_absent_any_order),
        cmocka_unit_test(test_roundtrip_layouts),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_mem_io),
        cmocka_unit_test(test_open_fails),
        cmocka_unit_test(test_truncated_header),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_bad_header_fields),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_table_outside_file),
        cmocka_unit_test(test_table_overflow),
        cmocka_unit_test(test_truncated_file),
        cmocka_unit_test(test_header_checksum),
        cmocka_unit_test(test_table_checksum),
        cmocka_unit_test(test_blob_corruption_not_header),
        cmocka_unit_test(test_component_name),
        cmocka_unit_test(test_component_offset),
        cmocka_unit_test(test_component_nbytes),
        cmocka_unit_test(test_component_fields),
        cmocka_unit_test(test_bad_layout),
        cmocka_unit_test(test_layouts_overlap),
        cmocka_unit_test(test_layer_expert_range),
        cmocka_unit_test(test_unknown_layout),
        cmocka_unit_test(test_entry_flags),
        cmocka_unit_test(test_duplicate),
        cmocka_unit_test(test_misaligned_offset),
        cmocka_unit_test(test_misaligned_padded),
        cmocka_unit_test(test_entry_in_header_area),
        cmocka_unit_test(test_entry_sizes),
        cmocka_unit_test(test_entry_overflow),
        cmocka_unit_test(test_truncated_extent),
        cmocka_unit_test(test_overlapping_blobs),
        cmocka_unit_test(test_blob_overlaps_tables),
        cmocka_unit_test(test_bad_meta),
        cmocka_unit_test(test_writer_open_errors),
        cmocka_unit_test(test_writer_layout_errors),
        cmocka_unit_test(test_writer_meta_errors),
        cmocka_unit_test(test_writer_blob_errors),
        cmocka_unit_test(test_writer_finish_abort),
        cmocka_unit_test(test_writer_write_fails),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
