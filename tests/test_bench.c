/*
 * Description: smoke test of `smoe bench` and `smoe trace-gen`. A tiny vault
 * (written with the writer API) and a short generated trace are replayed
 * with `--mode all` and speculation; the JSON must hold every field for
 * every mode, hits + joins + misses must equal the requests, the library
 * must have read exactly misses x the padded blob size, direct mode every
 * request, and the offline optimal hit rate must be at least LRU's. A
 * vault smaller than the trace must be refused, naming both shapes. A
 * replay recorded through the library ($SMOE_TRACE) gives back the same
 * rows. The first token's wait is reported, and --idle-ms with the
 * histogram on finds no histogram, then the one the first run saved.
 * --spec-recall runs a smoe+recall=R mode per recall whose hints come
 * true as often as asked (all at 1), and refuses a recall above 1.
 */
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

#include "smoe/smoe.h"
#include "trace.h"

#define LAYERS 4
#define EXPERTS 8
#define PAYLOAD 40000u
#define PADDED 49152u /* PAYLOAD rounded up to 16 KiB */

static char dir[1024], vault[1100], trace[1100], json[1100], out[1100];
static const char *tool;

static void write_vault(void)
{
    smoe_writer_opts o = SMOE_WRITER_OPTS_INIT;
    o.layers = LAYERS;
    o.experts = EXPERTS;
    smoe_writer *w;
    assert_int_equal(smoe_writer_open(vault, &o, &w), 0);
    smoe_component c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "w");
    c.dtype = SMOE_DTYPE_U8;
    c.ndim = 1;
    c.shape[0] = PAYLOAD;
    c.nbytes = PAYLOAD;
    uint32_t id;
    assert_int_equal(smoe_writer_add_layout(w, &c, 1, &id), 0);
    static unsigned char buf[PAYLOAD];
    for (uint32_t l = 0; l < LAYERS; l++)
        for (uint32_t e = 0; e < EXPERTS; e++) {
            memset(buf, (int)(l * EXPERTS + e), sizeof buf);
            assert_int_equal(smoe_writer_add_blob(w, l, e, id, buf, sizeof buf), 0);
        }
    assert_int_equal(smoe_writer_finish(w), 0);
}

static int setup(void **state)
{
    (void)state;
    tool = getenv("SMOE_TOOL");
    const char *base = getenv("SMOE_TEST_TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_bench.XXXXXX", base && *base ? base : "/tmp");
    if (!tool || !mkdtemp(dir))
        return -1;
    snprintf(vault, sizeof vault, "%s/tiny.smoe", dir);
    snprintf(trace, sizeof trace, "%s/tiny.trace.gz", dir);
    snprintf(json, sizeof json, "%s/bench.json", dir);
    snprintf(out, sizeof out, "%s/bench.out", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[1200];
    int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (n < 0 || (size_t)n >= sizeof cmd)
        return -1;
    return system(cmd) == 0 ? 0 : -1;
}

/* Run a shell command; on an unexpected status, show its output. */
static int run(const char *cmd)
{
    char full[16000];
    int n = snprintf(full, sizeof full, "%s > '%s' 2>&1", cmd, out);
    assert_true(n > 0 && (size_t)n < sizeof full);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void show_output(void)
{
    FILE *f = fopen(out, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        fprintf(stderr, "  | %s", line);
    if (f)
        fclose(f);
}

static int output_has(const char *s)
{
    FILE *f = fopen(out, "r");
    if (!f)
        return 0;
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return strstr(text, s) != NULL;
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("the JSON lacks '%s' in %s", key, json_object_to_json_string(o));
    return v;
}

static uint64_t get_u(json_object *o, const char *key)
{
    return (uint64_t)json_object_get_int64(get(o, key));
}

static void test_bench_all(void **state)
{
    (void)state;
    write_vault();
    int fd = open(vault, O_RDONLY | O_DIRECT);
    if (fd < 0)
        skip(); /* this file system refuses direct I/O: nothing to compare */
    close(fd);

    char cmd[9000];
    int n = snprintf(cmd, sizeof cmd, "'%s' trace-gen -o '%s' --layers %d --experts %d --top-k 2 "
             "--tokens 40 --requests 2 --overlap 0.5 --seed 7", tool, trace, LAYERS, EXPERTS);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    if (run(cmd)) {
        show_output();
        fail_msg("trace-gen failed");
    }
    assert_true(output_has("adjacent-token overlap"));

    /* 10 slots: more than one layer's experts, fewer than the 32 in all */
    n = snprintf(cmd, sizeof cmd, "'%s' bench --vault '%s' --trace '%s' --mode all "
             "--memory %u --workers 2 --spec-next-layer --no-drop-caches --no-progress "
             "--json '%s'", tool, vault, trace, 10 * PADDED, json);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    if (run(cmd)) {
        show_output();
        fail_msg("smoe bench --mode all failed");
    }
    assert_true(output_has("against smoe"));
    assert_true(output_has("smoe: first token wait"));

    json_object *root = json_object_from_file(json);
    assert_non_null(root);
    json_object *v = get(root, "vault");
    assert_int_equal(get_u(v, "layers"), LAYERS);
    assert_int_equal(get_u(v, "experts"), EXPERTS);
    assert_int_equal(get_u(v, "slot_bytes"), PADDED);
    json_object *t = get(root, "trace");
    assert_int_equal(get_u(t, "tokens"), 40);
    uint64_t requests = get_u(t, "expert_requests");
    assert_int_equal(requests, 40 * LAYERS * 2);
    get(t, "adjacent_overlap");
    json_object *c = get(root, "config");
    assert_int_equal(get_u(c, "ring_slots"), 10);
    get(c, "memory_bytes");
    get(c, "workers");
    json_object *off = get(root, "offline");
    double lru = json_object_get_double(get(off, "lru_hit_rate"));
    double opt = json_object_get_double(get(off, "opt_hit_rate"));
    assert_true(opt >= lru && opt > 0.0 && opt <= 1.0);

    json_object *modes = get(root, "modes");
    static const char *want[] = {"smoe", "smoe+spec", "pagecache", "mmap", "direct"};
    assert_int_equal(json_object_array_length(modes), 5);
    static const char *fields[] = {
        "memory_bytes", "slots", "tokens", "elapsed_s", "tokens_per_s", "wait_total_s",
        "requests", "hits", "joins", "misses", "hit_rate", "join_rate", "hit_method",
        "bytes_read", "bytes_requested", "gb_per_s", "delivered_gb_per_s", "cpu_user_s",
        "cpu_sys_s", "cpu_s_per_gb", "peak_rss_bytes", "memory_limited",
        "cgroup_limit_bytes", "caches_dropped", "workers"};
    for (size_t i = 0; i < 5; i++) {
        json_object *m = json_object_array_get_idx(modes, i);
        assert_string_equal(json_object_get_string(get(m, "mode")), want[i]);
        if (!json_object_get_boolean(get(m, "ok")))
            fail_msg("mode %s failed: %s", want[i], json_object_to_json_string(m));
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            get(m, fields[f]);
        json_object *w = get(m, "wait_us_per_token");
        double mean = json_object_get_double(get(w, "mean"));
        double p50 = json_object_get_double(get(w, "p50"));
        double p99 = json_object_get_double(get(w, "p99"));
        assert_true(mean >= 0 && p50 >= 0 && p99 >= p50);
        /* the first token, and the mean of the first 10 of the 40 */
        double first = json_object_get_double(get(w, "first_token"));
        double first10 = json_object_get_double(get(w, "first_10_mean"));
        assert_true(first >= 0 && first10 >= 0);
        assert_true(first <= first10 * 10 * 1.000001 + 1e-6);
        assert_true(first10 * 10 <= mean * 40 * 1.000001 + 1e-6);
        assert_int_equal(get_u(m, "tokens"), 40);
        uint64_t hits = get_u(m, "hits"), joins = get_u(m, "joins"), misses = get_u(m, "misses");
        assert_int_equal(get_u(m, "requests"), requests);
        assert_int_equal(hits + joins + misses, requests);
        assert_int_equal(get_u(m, "bytes_requested"), requests * PADDED);
        assert_true(get_u(m, "peak_rss_bytes") > 0);
        if (i == 0) /* the library, no speculation: one padded read per miss */
            assert_int_equal(get_u(m, "bytes_read"), misses * PADDED);
        if (i <= 1) {
            json_object *lib = get(m, "library");
            get(lib, "spec_wasted_bytes");
            get(lib, "spec_used");
            get(lib, "io_mode");
        }
        if (i == 1)
            assert_true(get_u(get(m, "library"), "spec_issued") > 0);
        if (i == 4) { /* direct: every request read, nothing retained */
            assert_int_equal(hits + joins, 0);
            assert_int_equal(get_u(m, "bytes_read"), requests * PADDED);
        }
        if (i > 0) {
            json_object *vs = get(m, "vs_smoe");
            get(vs, "wait_mean");
            get(vs, "wait_p99");
        }
    }
    json_object_put(root);
}

/* --spec-recall: a smoe+recall=R mode per recall, with the smoe mode's
 * fields and the hints' own; a perfect predictor's hints all come true, a
 * 0.5 one's about half; a recall outside [0, 1] is refused. */
static void test_spec_recall(void **state)
{
    (void)state;
    write_vault();
    int fd = open(vault, O_RDONLY | O_DIRECT);
    if (fd < 0)
        skip();
    close(fd);
    char cmd[9000];
    int n = snprintf(cmd, sizeof cmd, "'%s' trace-gen -o '%s' --layers %d --experts %d "
             "--top-k 2 --tokens 40 --requests 2 --overlap 0.5 --seed 9", tool, trace, LAYERS,
             EXPERTS);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    assert_int_equal(run(cmd), 0);
    n = snprintf(cmd, sizeof cmd, "'%s' bench --vault '%s' --trace '%s' --memory %u "
             "--workers 2 --compute-us 100 --spec-recall 1,0.5 --no-drop-caches "
             "--no-progress --json '%s'", tool, vault, trace, 10 * PADDED, json);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    if (run(cmd)) {
        show_output();
        fail_msg("smoe bench --spec-recall failed");
    }
    assert_true(output_has("smoe+recall=0.5: wait per token"));
    json_object *root = json_object_from_file(json);
    assert_non_null(root);
    json_object *modes = get(root, "modes");
    assert_int_equal(json_object_array_length(modes), 3);
    static const char *want[] = {"smoe", "smoe+recall=1", "smoe+recall=0.5"};
    for (size_t i = 0; i < 3; i++) {
        json_object *m = json_object_array_get_idx(modes, i);
        assert_string_equal(json_object_get_string(get(m, "mode")), want[i]);
        if (!json_object_get_boolean(get(m, "ok")))
            fail_msg("mode %s failed: %s", want[i], json_object_to_json_string(m));
        assert_int_equal(get_u(m, "hits") + get_u(m, "joins") + get_u(m, "misses"),
                         get_u(m, "requests"));
        json_object *lib = get(m, "library");
        get(lib, "spec_wasted_bytes");
        if (i == 0)
            continue;
        get(m, "vs_smoe");
        uint64_t issued = get_u(lib, "hints_issued"), came = get_u(lib, "hints_true");
        get(lib, "wasted_bytes");
        get(lib, "hint_cancelled");
        /* 40 tokens, hints for layers 1..3, top-2 */
        assert_int_equal(issued, 40 * (LAYERS - 1) * 2);
        double r = json_object_get_double(get(lib, "recall_measured"));
        if (i == 1) {
            assert_int_equal(came, issued);
            assert_true(r == 1.0);
        } else {
            assert_true(r > 0.35 && r < 0.65);
        }
    }
    json_object_put(root);
    n = snprintf(cmd, sizeof cmd, "'%s' bench --vault '%s' --trace '%s' --spec-recall 1.5",
                 tool, vault, trace);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    assert_int_not_equal(run(cmd), 0);
    assert_true(output_has("--spec-recall '1.5'"));
}

static void test_shape_mismatch(void **state)
{
    (void)state;
    char bigger[1200], cmd[9000];
    snprintf(bigger, sizeof bigger, "%s/big.trace", dir);
    int n = snprintf(cmd, sizeof cmd, "'%s' trace-gen -o '%s' --layers %d --experts %d --top-k 2 "
             "--tokens 3", tool, bigger, LAYERS * 2, EXPERTS);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    assert_int_equal(run(cmd), 0);
    n = snprintf(cmd, sizeof cmd, "'%s' bench --vault '%s' --trace '%s' --no-progress", tool,
             vault, bigger);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    assert_int_equal(run(cmd), 1);
    if (!output_has("4 layers x 8 experts") || !output_has("is 8 x 8")) {
        show_output();
        fail_msg("the error does not name both shapes");
    }
}

/* The library records what the replay asked for: the same rows come back. */
static void test_record_roundtrip(void **state)
{
    (void)state;
    int fd = open(vault, O_RDONLY | O_DIRECT);
    if (fd < 0)
        skip();
    close(fd);
    char rec[1200], cmd[9000], err[600];
    snprintf(rec, sizeof rec, "%s/recorded.trace", dir);
    int n = snprintf(cmd, sizeof cmd, "SMOE_TRACE='%s' '%s' bench --vault '%s' --trace '%s' "
                     "--mode smoe --memory %u --workers 2 --no-drop-caches --no-progress",
                     rec, tool, vault, trace, 10 * PADDED);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    if (run(cmd)) {
        show_output();
        fail_msg("smoe bench --mode smoe with SMOE_TRACE failed");
    }
    tool_trace a, b;
    if (tool_trace_load(&a, trace, err, sizeof err))
        fail_msg("%s", err);
    if (tool_trace_load(&b, rec, err, sizeof err))
        fail_msg("the recorded trace does not parse: %s", err);
    assert_int_equal(b.layers, LAYERS);
    assert_int_equal(b.experts, EXPERTS);
    assert_int_equal(a.n_tokens, b.n_tokens);
    assert_int_equal(a.n_rows, b.n_rows);
    for (size_t r = 0; r < a.n_rows; r++)
        assert_int_equal(a.row_layer[r], b.row_layer[r]);
    assert_int_equal(tool_trace_requests(&a), tool_trace_requests(&b));
    for (size_t i = 0; i < tool_trace_requests(&a); i++)
        assert_int_equal(a.ids[i], b.ids[i]);
    tool_trace_free(&a);
    tool_trace_free(&b);
}

/* --idle-ms with the histogram on: the first run finds no histogram and
 * saves one at close, the second loads it; the JSON says so. */
static void test_idle_freq(void **state)
{
    (void)state;
    int fd = open(vault, O_RDONLY | O_DIRECT);
    if (fd < 0)
        skip();
    close(fd);
    char cmd[9000];
    static const char *want[] = {"absent", "loaded"};
    for (int i = 0; i < 2; i++) {
        int n = snprintf(cmd, sizeof cmd, "'%s' bench --vault '%s' --trace '%s' --mode smoe "
                         "--memory %u --workers 2 --tokens 5 --prewarm --freq --idle-ms 20 "
                         "--no-drop-caches --no-progress --json '%s'", tool, vault, trace,
                         10 * PADDED, json);
        assert_true(n > 0 && (size_t)n < sizeof cmd);
        if (run(cmd)) {
            show_output();
            fail_msg("smoe bench --idle-ms failed");
        }
        assert_true(output_has("idle 20 ms after open"));
        json_object *root = json_object_from_file(json);
        assert_non_null(root);
        assert_int_equal(get_u(get(root, "config"), "idle_ms"), 20);
        json_object *m = json_object_array_get_idx(get(root, "modes"), 0);
        assert_non_null(m);
        if (!json_object_get_boolean(get(m, "ok")))
            fail_msg("the run failed: %s", json_object_to_json_string(m));
        json_object *lib = get(m, "library");
        assert_string_equal(json_object_get_string(get(lib, "freq_status")), want[i]);
        get(lib, "prewarm_reads");
        get(lib, "prewarm_reads_before_first_token");
        get(lib, "prewarm_hits");
        get(get(m, "wait_us_per_token"), "first_token");
        json_object_put(root);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_all),
        cmocka_unit_test(test_spec_recall),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_record_roundtrip),
        cmocka_unit_test(test_idle_freq),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
