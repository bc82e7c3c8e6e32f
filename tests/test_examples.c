/*
 * Description: the examples. decode_loop, run as a process
 * ($SMOE_DECODE_LOOP): synthetic routing and a valid trace (header keys,
 * requests, speculative ranks, CRLF, blank lines) run to the end and report
 * tokens/s, hit rate and claim wait; each malformed trace line, a gzip
 * file and bad options fail with a non-zero exit and a message naming the
 * file and line. quickstart (README's "Use", $SMOE_QUICKSTART): claims
 * top-4 of every layer and prints the bytes and byte sum the library's
 * claims give; a vault that cannot be opened exits 1 naming it. The GPU
 * examples' shared C part (examples/common): a
 * packed vault reads back with the shapes, metadata and bytes the
 * generator makes, and vaults it did not pack are refused with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "smoe/smoe.h"
#include "moe_model.h"
#include "testutil.h"

static char *g_dir, *g_vault;
static const char *g_prog, *g_quick;
static char *g_out, *g_err;

static int group_setup(void **state)
{
    (void)state;
    g_prog = getenv("SMOE_DECODE_LOOP");
    if (!g_prog || !*g_prog) {
        fprintf(stderr, "SMOE_DECODE_LOOP is not set: run this test through ctest\n");
        return -1;
    }
    g_quick = getenv("SMOE_QUICKSTART");
    if (!g_quick || !*g_quick) {
        fprintf(stderr, "SMOE_QUICKSTART is not set: run this test through ctest\n");
        return -1;
    }
    g_dir = tu_tmpdir();
    g_vault = tu_path(g_dir, "loop.smoe");
    /* 4 layers x 16 experts, top_k 2 */
    return tu_make_vault(g_vault, 4, 16, 20000, 40000, 3) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmdir(g_dir);
    free(g_dir);
    free(g_vault);
    free(g_out);
    free(g_err);
    return 0;
}

/* Run decode_loop with the NULL-terminated arguments; its exit status. */
static int run_loop(const char *const *args)
{
    return tu_run(g_dir, g_prog, args, &g_out, &g_err);
}
#define RUN(...) run_loop((const char *const[]){__VA_ARGS__, NULL})


static char *write_file(const char *name, const void *data, size_t n)
{
    char *p = tu_path(g_dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return p;
}

static void test_loop_synthetic(void **state)
{
    (void)state;
    assert_int_equal(RUN(g_vault, "--tokens", "6", "--requests", "3", "--idle-ms", "1"), 0);
    tu_expect_contains(g_out, "18 tokens in 3 requests x 4 layers x top-2");
    tu_expect_contains(g_out, "tokens/s");
    tu_expect_contains(g_out, "hit rate");
    tu_expect_contains(g_out, "waiting in claim");
    assert_string_equal(g_err, "");
}

static void test_loop_trace(void **state)
{
    (void)state;
    static const char trace[] =
        "# source: hand-written, with = signs: a=b\n"
        "# model=tiny layers=4 experts=16 topk=2\n"
        "# request 0\n"
        "0 0 1 2\n"
        "0 1 3 4 | 5 6\n"
        "\n"
        "0 3 7\r\n"
        "   \n"
        "1 0 1 2\n"
        "# request 1\n"
        "4 0 15 0\n"
        "4 2 9 8 | 1\n";
    char *p = write_file("good.txt", trace, sizeof trace - 1);
    assert_int_equal(RUN(g_vault, "--trace", p, "--idle-ms", "1"), 0);
    tu_expect_contains(g_out, "3 tokens in 2 requests");
    assert_string_equal(g_err, "");
    free(p);
}

static void test_loop_bad_traces(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"0 0 1\n0 0 2\n", "bad.txt:2: layer 0 after layer 0 of token 0"},
        {"2 0 1\n1 1 2\n", "bad.txt:2: token 1 after token 2"},
        {"0 0 3 3\n", "bad.txt:1: expert 3 appears twice"},
        {"0 0 3 | 4 3\n", "bad.txt:1: expert 3 appears twice"},
        {"0 4 1\n", "bad.txt:1: layer 4 is not below the vault's 4 layers"},
        {"0 0 16\n", "bad.txt:1: expert 16 is not below the vault's 16 experts"},
        {"0 0\n", "bad.txt:1: no experts"},
        {"0 0 | 1\n", "bad.txt:1: no experts"},
        {"zero 0 1\n", "bad.txt:1: expected \"token layer e1"},
        {"0 0 1 x\n", "bad.txt:1: unexpected \"x\""},
        {"0 0 1,2\n", "bad.txt:1: an expert number: unexpected character ','"},
        {"0 0 4294967296\n", "bad.txt:1: an expert number is over 4294967295"},
        {"# layers=5\n0 0 1\n", "bad.txt:1: the trace is for 5 layers, the vault has 4"},
        {"# experts=8\n", "bad.txt:1: the trace is for 8 experts per layer"},
        {"# topk=1\n0 0 1 2\n", "bad.txt:2: 2 ranked experts, over the header's topk=1"},
        {"# topk=2\n# topk=3\n", "bad.txt:2: header key topk=3, given earlier as 2"},
        {"# layers=four\n", "bad.txt:1: header key layers: found \"four\""},
        {"# request x\n0 0 1\n", "bad.txt:1: expected \"# request N\""},
        {"# nothing here\n\n", "no routing records"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *p = write_file("bad.txt", bad[i].text, strlen(bad[i].text));
        int rc = RUN(g_vault, "--trace", p);
        if (rc != 1 || !strstr(g_err, bad[i].msg))
            fail_msg("trace %zu \"%s\": exit %d, stderr \"%s\", expected exit 1 and \"%s\"",
                     i, bad[i].text, rc, g_err, bad[i].msg);
        tu_expect_contains(g_err, "decode_loop: ");
        free(p);
    }
    /* a line over 4095 bytes */
    size_t n = 5000;
    char *line = malloc(n + 8);
    assert_non_null(line);
    memset(line, ' ', n);
    memcpy(line + n, "0 0 1\n", 7);
    char *p = write_file("long.txt", line, n + 6);
    assert_int_equal(RUN(g_vault, "--trace", p), 1);
    tu_expect_contains(g_err, "long.txt:1: line longer than 4095 bytes");
    free(p);
    free(line);
    /* gzip is named, not parsed */
    static const unsigned char gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    p = write_file("t.gz", gz, sizeof gz);
    assert_int_equal(RUN(g_vault, "--trace", p), 1);
    tu_expect_contains(g_err, "t.gz: gzip-compressed");
    free(p);
    p = tu_path(g_dir, "missing.txt");
    assert_int_equal(RUN(g_vault, "--trace", p), 1);
    tu_expect_contains(g_err, "missing.txt: No such file");
    free(p);
}

static void test_loop_bad_args(void **state)
{
    (void)state;
    assert_int_equal(RUN(g_vault, "--tokens", "-1"), 2);
    tu_expect_contains(g_err, "--tokens: \"-1\" is not a number");
    assert_int_equal(RUN(g_vault, "--tokens", "5x"), 2);
    assert_int_equal(RUN(g_vault, "--tokens"), 2);
    tu_expect_contains(g_err, "--tokens needs a value");
    assert_int_equal(RUN(g_vault, "--frobnicate", "1"), 2);
    tu_expect_contains(g_err, "unknown option --frobnicate");
    assert_int_equal(RUN(g_vault, "--top-k", "17"), 1);
    tu_expect_contains(g_err, "top-k 17 is over the vault's 16 experts");
    char *p = tu_path(g_dir, "nope.smoe");
    assert_int_equal(RUN(p), 1);
    tu_expect_contains(g_err, "decode_loop: open: ");
    free(p);
    assert_int_equal(RUN("--help"), 0);
    tu_expect_contains(g_out, "usage: decode_loop VAULT");
}

/* ---- examples/common ----------------------------------------------------- */

static void test_model_roundtrip(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "model.smoe");
    moe_model m = {2, 3, 2, 42};
    assert_int_equal(moe_pack(p, &m), 0);
    smoe_stream *s;
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    assert_int_equal(smoe_open(p, &o, &s), 0);
    moe_model got;
    assert_int_equal(moe_model_get(s, &got), 0);
    assert_int_equal(got.layers, 2);
    assert_int_equal(got.experts, 3);
    assert_int_equal(got.top_k, 2);
    assert_int_equal(got.seed, 42);
    assert_string_equal(smoe_meta_get(s, "arch"), "qwen3_moe");

    smoe_blob b;
    assert_true(smoe_claim_wait(s, 1, 2, UINT64_MAX, &b) >= 0);
    moe_expert_view v;
    assert_int_equal(moe_view_get(s, b.layout, &v), 0);
    const uint64_t mat = (uint64_t)MOE_FFN * MOE_HIDDEN * 2;
    assert_int_equal(v.offset[MOE_GATE], 0);
    assert_int_equal(v.offset[MOE_UP], mat);
    assert_int_equal(v.offset[MOE_DOWN], 2 * mat);
    assert_int_equal(v.extent, 3 * mat);
    assert_int_equal(b.size, 3 * mat);
    /* the bytes are the generator's, matrix by matrix */
    uint16_t *w = malloc((size_t)mat);
    assert_non_null(w);
    moe_fill_matrix(w, MOE_FFN, MOE_HIDDEN, 42, 1, 2, MOE_GATE);
    assert_memory_equal(w, (const char *)b.data + v.offset[MOE_GATE], (size_t)mat);
    moe_fill_matrix(w, MOE_FFN, MOE_HIDDEN, 42, 1, 2, MOE_UP);
    assert_memory_equal(w, (const char *)b.data + v.offset[MOE_UP], (size_t)mat);
    moe_fill_matrix(w, MOE_HIDDEN, MOE_FFN, 42, 1, 2, MOE_DOWN);
    assert_memory_equal(w, (const char *)b.data + v.offset[MOE_DOWN], (size_t)mat);
    /* another expert's weights differ */
    moe_fill_matrix(w, MOE_HIDDEN, MOE_FFN, 42, 1, 1, MOE_DOWN);
    assert_memory_not_equal(w, (const char *)b.data + v.offset[MOE_DOWN], 4096);
    free(w);
    assert_int_equal(smoe_release(s, &b), 0);

    /* the reference: unit-RMS input, an output of the expected size */
    float h[MOE_HIDDEN] = {0}, x[MOE_HIDDEN];
    moe_next_embedding(h, 42, 0, 0.0f);
    moe_ref_rmsnorm(h, x);
    double ss = 0, y[MOE_HIDDEN] = {0};
    for (uint32_t i = 0; i < MOE_HIDDEN; i++)
        ss += (double)x[i] * x[i];
    assert_true(fabs(ss / MOE_HIDDEN - 1.0) < 1e-3);
    assert_int_equal(moe_ref_expert(&m, 1, 2, x, 1.0, y), 0);
    ss = 0;
    for (uint32_t i = 0; i < MOE_HIDDEN; i++) {
        assert_true(isfinite(y[i]));
        ss += y[i] * y[i];
    }
    assert_true(ss / MOE_HIDDEN > 0.05 && ss / MOE_HIDDEN < 5.0);
    assert_int_equal(smoe_close(s), 0);
    free(p);
}

static void test_model_refuses_foreign_vaults(void **state)
{
    (void)state;
    smoe_stream *s;
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    assert_int_equal(smoe_open(g_vault, &o, &s), 0);
    moe_model m;
    assert_int_not_equal(moe_model_get(s, &m), 0); /* no seed or shape metadata */
    moe_expert_view v;
    assert_int_equal(moe_view_get(s, 0, &v), SMOE_EFORMAT); /* smaller matrices */
    assert_int_equal(moe_view_get(s, 99, &v), SMOE_ENOENT); /* no such layout */
    assert_int_equal(smoe_close(s), 0);

    moe_model bad = {1, 4, 5, 1}; /* top-k over the experts */
    char *p = tu_path(g_dir, "bad.smoe");
    assert_int_equal(moe_pack(p, &bad), SMOE_EINVAL);
    assert_false(tu_exists(p));
    free(p);
}

/* quickstart's experts (7 x layer + i for i < 4), claimed here: the bytes
 * and the byte sum it must print. */
static void quickstart_expected(char *line, size_t n)
{
    smoe_stream *s = tu_open_ring(g_vault, 8, 2, SMOE_EVICT_LRU);
    uint64_t sum = 0, bytes = 0;
    for (uint32_t layer = 0; layer < 4; layer++)
        for (uint32_t i = 0; i < 4; i++) {
            smoe_blob b;
            assert_int_equal(smoe_claim_wait(s, layer, (7 * layer + i) % 16, UINT64_MAX, &b),
                             0);
            smoe_component c;
            for (uint32_t j = 0; smoe_blob_component(s, &b, j, &c) == 0; j++)
                for (uint64_t x = 0; x < c.nbytes; x++)
                    sum += ((const unsigned char *)b.data)[c.offset + x];
            bytes += b.size;
            assert_int_equal(smoe_release(s, &b), 0);
        }
    assert_int_equal(smoe_close(s), 0);
    snprintf(line, n, "4 layers x 4 experts claimed, %llu bytes, byte sum %llu\n",
             (unsigned long long)bytes, (unsigned long long)sum);
}

static void test_quickstart_claims_every_layer(void **state)
{
    (void)state;
    char want[160];
    quickstart_expected(want, sizeof want);
    const char *args[] = {g_vault, NULL};
    assert_int_equal(tu_run(g_dir, g_quick, args, &g_out, &g_err), 0);
    assert_string_equal(g_out, want);
    assert_string_equal(g_err, "");
}

static void test_quickstart_unopenable_vault_exits(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "no-such.smoe");
    const char *args[] = {p, NULL};
    assert_int_equal(tu_run(g_dir, g_quick, args, &g_out, &g_err), 1);
    tu_expect_contains(g_err, "quickstart: ");
    tu_expect_contains(g_err, "no-such.smoe");
    assert_string_equal(g_out, "");
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_synthetic),
        cmocka_unit_test(test_loop_trace),
        cmocka_unit_test(test_loop_bad_traces),
        cmocka_unit_test(test_loop_bad_args),
        cmocka_unit_test(test_model_roundtrip),
        cmocka_unit_test(test_model_refuses_foreign_vaults),
        cmocka_unit_test(test_quickstart_claims_every_layer),
        cmocka_unit_test(test_quickstart_unopenable_vault_exits),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
