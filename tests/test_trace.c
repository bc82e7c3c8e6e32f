/*
 * Description: the routing trace reader (tools/smoe/sim/trace.c) accepts
 * well-formed plain and gzip traces with their header, requests and
 * speculative ranks, infers the shape when the header lacks it, computes
 * the adjacent-token overlap, and rejects each kind of malformed line with
 * an error naming the file and the line number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "trace.h"

static char tmpdir[4096];

static int setup_dir(void **state)
{
    (void)state;
    const char *base = getenv("SMOE_TEST_TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_trace.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    return rmdir(tmpdir) ? -1 : 0;
}

/* Write text to tmpdir/name, gzipped when gz; returns the path (static). */
static const char *write_file(const char *name, const char *text, int gz)
{
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, text, (unsigned)strlen(text)), (int)strlen(text));
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
        assert_int_equal(fclose(f), 0);
    }
    return path;
}

static const char good[] =
    "# source: unit test, hand written\n"
    "# model=tiny layers=3 experts=8 topk=2\n"
    "# request 0\n"
    "0 0 1 2 | 3 4\n"
    "0 1 5 6\n"
    "0 2 7 0 | 1\n"
    "\n"
    "1 0 1 3\r\n"
    "   \n"
    "1 2 4 5\n"
    "# request 1\n"
    "5 0 2\n"
    "5 1 6 7 | 0\n";

static void check_good(const tool_trace *t)
{
    assert_string_equal(t->source, "unit test, hand written");
    assert_string_equal(t->model, "tiny");
    assert_int_equal(t->layers, 3);
    assert_int_equal(t->experts, 8);
    assert_int_equal(t->top_k, 2);
    assert_int_equal(t->max_k, 2);
    assert_int_equal(t->max_spec, 2);
    assert_true(t->shape_from_header);
    assert_int_equal(t->n_rows, 7);
    assert_int_equal(t->n_tokens, 3);
    assert_int_equal(t->n_requests, 2);
    assert_int_equal(t->req_tok[0], 0);
    assert_int_equal(t->req_tok[1], 2);
    assert_int_equal(t->req_tok[2], 3);
    /* token rows: 3 rows, 2 rows (layer 1 missing), 2 rows */
    assert_int_equal(t->tok_row[0], 0);
    assert_int_equal(t->tok_row[1], 3);
    assert_int_equal(t->tok_row[2], 5);
    assert_int_equal(t->tok_row[3], 7);
    assert_int_equal(t->tok_num[0], 0);
    assert_int_equal(t->tok_num[1], 1);
    assert_int_equal(t->tok_num[2], 5);
    const uint32_t layers[] = {0, 1, 2, 0, 2, 0, 1};
    const uint32_t nk[] = {2, 2, 2, 2, 2, 1, 2};
    const uint32_t ns[] = {2, 0, 1, 0, 0, 0, 1};
    const uint32_t ids[] = {1, 2, 5, 6, 7, 0, 1, 3, 4, 5, 2, 6, 7};
    const uint32_t spec[] = {3, 4, 1, 0};
    for (size_t r = 0; r < 7; r++) {
        assert_int_equal(t->row_layer[r], layers[r]);
        assert_int_equal(t->row_off[r + 1] - t->row_off[r], nk[r]);
        assert_int_equal(t->spec_off[r + 1] - t->spec_off[r], ns[r]);
    }
    assert_int_equal(tool_trace_requests(t), 13);
    for (size_t i = 0; i < 13; i++)
        assert_int_equal(t->ids[i], ids[i]);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(t->spec[i], spec[i]);
}

static void test_good_plain(void **state)
{
    (void)state;
    char err[600];
    tool_trace t;
    const char *p = write_file("good.trace", good, 0);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), 0);
    check_good(&t);
    tool_trace_free(&t);
    unlink(p);
}

static void test_good_gzip(void **state)
{
    (void)state;
    char err[600];
    tool_trace t;
    const char *p = write_file("good.trace.gz", good, 1);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), 0);
    check_good(&t);
    tool_trace_free(&t);
    unlink(p);
}

static void test_inferred_shape(void **state)
{
    (void)state;
    char err[600];
    tool_trace t;
    const char *p = write_file("noheader.trace", "0 0 3\n0 4 9 1 2\n1 1 0\n", 0);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), 0);
    assert_int_equal(t.layers, 5);
    assert_int_equal(t.experts, 10);
    assert_int_equal(t.top_k, 3);
    assert_false(t.shape_from_header);
    assert_null(t.source);
    assert_null(t.model);
    assert_int_equal(t.n_requests, 1);
    assert_int_equal(t.n_tokens, 2);
    tool_trace_free(&t);
    unlink(p);
}

static void test_overlap(void **state)
{
    (void)state;
    char err[600];
    tool_trace t;
    /* token 1 shares 1 of its 4 keys with token 0 (layer 0 expert 1);
     * token 2 shares 2 of 4 with token 1: mean 0.375 */
    const char *p = write_file("overlap.trace",
                               "# layers=2 experts=8\n"
                               "0 0 1 2\n0 1 1 2\n"
                               "1 0 1 3\n1 1 4 5\n"
                               "2 0 3 6\n2 1 5 7\n", 0);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), 0);
    assert_true(tool_trace_overlap(&t, t.n_tokens) > 0.3749 &&
                tool_trace_overlap(&t, t.n_tokens) < 0.3751);
    assert_true(tool_trace_overlap(&t, 2) > 0.2499 && tool_trace_overlap(&t, 2) < 0.2501);
    assert_true(tool_trace_overlap(&t, 1) == 0.0);
    tool_trace_free(&t);
    unlink(p);
}

/* Each malformed input, the line the error must name, and a word it must contain. */
static const struct {
    const char *text;
    int line;
    const char *word;
} bad[] = {
    {"0 0 1\n1 0 2\n0 1 3\n", 3, "must not decrease"},
    {"0 1 1\n0 1 2\n", 2, "layers of one token must increase"},
    {"0 2 1\n0 1 2\n", 2, "layers of one token must increase"},
    {"# layers=2 experts=4\n0 0 1\n0 1 4\n", 3, "expected < 4"},
    {"# layers=2 experts=4\n0 0 1\n0 2 1\n", 3, "expected < 2"},
    {"0 0 1 1\n", 1, "appears twice"},
    {"0 0 1 | 1\n", 1, "appears twice"},
    {"0 0 1 | 2 | 3\n", 1, "second '|'"},
    {"0 0 | 2\n", 1, "before any expert"},
    {"0 0\n", 1, "at least one expert"},
    {"\n\nx 0 1\n", 3, "expected 'token layer"},
    {"0 0 1 a\n", 1, "expected an expert number"},
    {"0 0 1x\n", 1, "expected a space"},
    {"0x 0 1\n", 1, "expected a space"},
    {"0 0 99999999999\n", 1, "exceeds"},
    {"# topk=2\n0 0 1 2 3\n", 2, "topk="},
    {"# layers=2\n# layers=3\n0 0 1\n", 2, "contradicts"},
    {"# experts=0\n0 0 1\n", 1, "experts="},
    {"# request x\n0 0 1\n", 1, "# request N"},
    {"# request 0\n0 0 1\n# request 1\n0 1 1\n", 4, "continues across"},
    {"0 70000 1\n", 1, "expected < 65536"},
};

static void test_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[600], want[4300];
        tool_trace t;
        const char *p = write_file("bad.trace", bad[i].text, (int)(i & 1));
        int rc = tool_trace_load(&t, p, err, sizeof err);
        if (rc != -1 || !strstr(err, bad[i].word))
            fail_msg("case %zu: rc %d, error '%s', wanted '%s'", i, rc, err, bad[i].word);
        snprintf(want, sizeof want, "%s:%d: ", p, bad[i].line);
        if (strncmp(err, want, strlen(want)))
            fail_msg("case %zu: error '%s' does not start with '%s'", i, err, want);
        assert_int_equal(t.n_rows, 0); /* left empty */
        tool_trace_free(&t);
        unlink(p);
    }
}

static void test_long_line_and_empty(void **state)
{
    (void)state;
    char err[600];
    tool_trace t;
    char *text = malloc(TRACE_LINE_MAX + 64);
    assert_non_null(text);
    strcpy(text, "0 0 1\n#");
    memset(text + 7, 'x', TRACE_LINE_MAX + 10);
    strcpy(text + 7 + TRACE_LINE_MAX + 10, "\n");
    const char *p = write_file("long.trace", text, 0);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: line longer than"));
    free(text);
    unlink(p); /* before write_file's buffer holds the next name */

    p = write_file("empty.trace", "# nothing but comments\n\n", 0);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), -1);
    assert_non_null(strstr(err, "no records"));
    unlink(p);

    assert_int_equal(tool_trace_load(&t, "/nonexistent/dir/x.trace", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/dir/x.trace: cannot open"));
    unlink(p);
}

static void test_truncated_gzip(void **state)
{
    (void)state;
    char err[600];
    tool_trace t;
    /* a long enough body that cutting the compressed file leaves a partial stream */
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (unsigned tok = 0; len + 64 < cap; tok++)
        for (unsigned l = 0; l < 4 && len + 64 < cap; l++)
            len += (size_t)snprintf(text + len, cap - len, "%u %u %u %u\n", tok, l,
                                    (tok * 7 + l) % 16, (tok * 7 + l + 5) % 16);
    const char *p = write_file("cut.trace.gz", text, 1);
    free(text);
    FILE *f = fopen(p, "rb+");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(truncate(p, size / 2), 0);
    assert_int_equal(tool_trace_load(&t, p, err, sizeof err), -1);
    assert_non_null(strstr(err, p));
    unlink(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_plain),
        cmocka_unit_test(test_good_gzip),
        cmocka_unit_test(test_inferred_shape),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_long_line_and_empty),
        cmocka_unit_test(test_truncated_gzip),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
