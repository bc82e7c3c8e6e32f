/*
 * Description: `smoe sim`, run as a separate process ($SMOE_TOOL), on a
 * trace written by `smoe trace-gen`: prints one row per trace and size
 * with Belady and each policy asked for; --json holds the same figures,
 * no policy above Belady; every step shape (half, tokens, group, both
 * shuffles, one-shot reads) and --ceiling run; bad options, a missing
 * trace and a malformed trace give a message naming the problem and a
 * non-zero exit.
 */
#include <errno.h>
#include <fcntl.h>
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
#include <json-c/json.h>

#include "testutil.h"

static char *g_dir, *g_trace;
static const char *g_tool;
static char *g_out, *g_err;

/* Run the tool with the NULL-terminated arguments; its exit status. */
static int run_tool(const char *const *args)
{
    return tu_run(g_dir, g_tool, args, &g_out, &g_err);
}
#define RUN(...) run_tool((const char *const[]){__VA_ARGS__, NULL})


static int lines_of(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static int group_setup(void **state)
{
    (void)state;
    g_tool = getenv("SMOE_TOOL");
    if (!g_tool || !*g_tool) {
        fprintf(stderr, "SMOE_TOOL is not set: run this test through ctest\n");
        return -1;
    }
    g_dir = tu_tmpdir();
    g_trace = tu_path(g_dir, "t.trace");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    free(g_out);
    free(g_err);
    free(g_trace);
    tu_rmdir(g_dir);
    free(g_dir);
    return 0;
}

static void make_trace(void)
{
    int rc = RUN("trace-gen", "-o", g_trace, "--layers", "4", "--experts", "8", "--top-k", "2",
                 "--tokens", "300", "--requests", "3", "--seed", "3");
    if (rc != 0)
        fail_msg("trace-gen failed (%d): %s", rc, g_err);
}

static void test_table_and_json(void **state)
{
    (void)state;
    make_trace();
    char *json = tu_path(g_dir, "sim.json");
    assert_int_equal(RUN("sim", g_trace, "--size", "25%,6", "--json", json), 0);
    tu_expect_contains(g_out, "belady");
    tu_expect_contains(g_out, "lru");
    tu_expect_contains(g_out, "lfu");
    tu_expect_contains(g_out, "layer");
    tu_expect_contains(g_out, "reuse");
    tu_expect_contains(g_out, "t.trace");
    assert_int_equal(lines_of(g_out), 3); /* header, two sizes */
    json_object *root = json_object_from_file(json);
    assert_non_null(root);
    json_object *rows;
    assert_true(json_object_object_get_ex(root, "rows", &rows));
    assert_int_equal(json_object_array_length(rows), 2);
    for (size_t i = 0; i < 2; i++) {
        json_object *row = json_object_array_get_idx(rows, i), *v, *pols;
        assert_true(json_object_object_get_ex(row, "slots", &v));
        assert_int_equal(json_object_get_int(v), i == 0 ? 8 : 6); /* 25% of 32, then 6 */
        assert_true(json_object_object_get_ex(row, "belady", &v));
        double opt = json_object_get_double(v);
        assert_true(opt > 0 && opt < 1);
        assert_true(json_object_object_get_ex(row, "policies", &pols));
        assert_int_equal(json_object_object_length(pols), 4);
        json_object_object_foreach(pols, name, pol)
        {
            (void)name;
            assert_true(json_object_object_get_ex(pol, "hit_rate", &v));
            assert_true(json_object_get_double(v) <= opt + 1e-12);
            assert_true(json_object_object_get_ex(pol, "of_belady", &v));
            double f = json_object_get_double(v);
            assert_true(f >= 0 && f <= 1.0 + 1e-12);
        }
    }
    json_object_put(root);
    free(json);
    /* two traces: a mean row per size */
    assert_int_equal(RUN("sim", "--policy", "lru,reuse", g_trace, g_trace), 0);
    assert_int_equal(lines_of(g_out), 1 + 6 + 3);
    tu_expect_contains(g_out, "mean fraction of belady");
}

static void test_shapes(void **state)
{
    (void)state;
    make_trace();
    static const char *const shapes[][2] = {
        {"--half", "1"},          {"--half", "2"},           {"--tokens", "100:"},
        {"--tokens", ":50"},      {"--group", "16"},         {"--shuffle-tokens", "9"},
        {"--shuffle-layers", "9"}, {"--lambda", "0"},        {"--rate", "0"},
        {"--one-shot", "2"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int rc = RUN("sim", "--stats", shapes[i][0], shapes[i][1], g_trace);
        if (rc != 0)
            fail_msg("%s %s: exit %d: %s", shapes[i][0], shapes[i][1], rc, g_err);
        tu_expect_contains(g_out, "evictions");
    }
    assert_int_equal(RUN("sim", "--no-history", "--no-current", "--policy", "reuse", g_trace),
                     0);
    assert_int_equal(RUN("sim", "--ceiling", "--half", "2", "--policy", "lru", g_trace), 0);
    tu_expect_contains(g_out, "ceiling");
    assert_int_not_equal(RUN("sim", "--ceiling", "--group", "4", g_trace), 0);
    tu_expect_contains(g_err, "--ceiling");
}

static void test_bad_input(void **state)
{
    (void)state;
    make_trace();
    assert_int_not_equal(RUN("sim"), 0);
    tu_expect_contains(g_err, "expected at least one trace");
    assert_int_not_equal(RUN("sim", "--policy", "arc", g_trace), 0);
    tu_expect_contains(g_err, "unknown policy 'arc'");
    assert_int_not_equal(RUN("sim", "--size", "0%", g_trace), 0);
    tu_expect_contains(g_err, "--size");
    assert_int_not_equal(RUN("sim", "--size", "ten", g_trace), 0);
    tu_expect_contains(g_err, "'ten'");
    assert_int_not_equal(RUN("sim", "--half", "3", g_trace), 0);
    tu_expect_contains(g_err, "--half");
    assert_int_not_equal(RUN("sim", "--half", "1", "--tokens", "0:5", g_trace), 0);
    tu_expect_contains(g_err, "exclude");
    assert_int_not_equal(RUN("sim", "--tokens", "9:3", g_trace), 0);
    tu_expect_contains(g_err, "--tokens");
    assert_int_not_equal(RUN("sim", "--tokens", "5000:", g_trace), 0);
    tu_expect_contains(g_err, "none in the range");
    assert_int_not_equal(RUN("sim", "--decay", "2", g_trace), 0);
    tu_expect_contains(g_err, "--decay");
    assert_int_not_equal(RUN("sim", "--frobnicate", g_trace), 0);
    tu_expect_contains(g_err, "unknown option");
    assert_int_not_equal(RUN("sim", "--size"), 0);
    tu_expect_contains(g_err, "expected a value");
    char *missing = tu_path(g_dir, "missing.trace");
    assert_int_not_equal(RUN("sim", missing), 0);
    tu_expect_contains(g_err, "missing.trace");
    free(missing);
    /* a malformed trace: the reader's message names the file and line */
    char *bad = tu_path(g_dir, "bad.trace");
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("# layers=2 experts=4\n0 0 1 2\n0 5 1\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_not_equal(RUN("sim", bad), 0);
    tu_expect_contains(g_err, "bad.trace:3");
    free(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_and_json),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
