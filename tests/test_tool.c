/*
 * Description: the smoe tool's vault subcommands, run as a separate
 * process ($SMOE_TOOL): gen then verify passes; a corrupted blob byte or
 * padding byte makes verify fail naming exactly that (layer, expert);
 * inspect --json parses and reports the counts, metadata and layout;
 * read streams a vault without adding a page to the page cache;
 * --help works for each command; bad arguments and bad vaults give a
 * message on stderr and a non-zero exit.
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

#include "smoe/smoe.h"
#include "testutil.h"
#include "smoe_tier.h"

static char *g_dir;
static const char *g_tool;

static int group_setup(void **state)
{
    (void)state;
    g_tool = getenv("SMOE_TOOL");
    if (!g_tool || !*g_tool) {
        fprintf(stderr, "SMOE_TOOL is not set: run this test through ctest\n");
        return -1;
    }
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

/* Output of the last run, NUL-terminated. */
static char *g_out, *g_err;

/* Run the tool with the NULL-terminated arguments; its exit status. */
static int run_tool(const char *const *args)
{
    return tu_run(g_dir, g_tool, args, &g_out, &g_err);
}
#define RUN(...) run_tool((const char *const[]){__VA_ARGS__, NULL})


static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static char *gen_vault(const char *name)
{
    char *p = tu_path(g_dir, name);
    int rc = RUN("gen", "--out", p, "--layers", "3", "--experts", "4", "--blob-bytes", "10k",
                 "--blob-bytes-max", "50000", "--seed", "5", "--top-k", "2", "--model", "tiny");
    if (rc != 0)
        fail_msg("gen failed (%d): %s", rc, g_err);
    return p;
}

static void test_gen_verify(void **state)
{
    (void)state;
    char *p = gen_vault("gv.smoe");
    tu_expect_contains(g_out, "12 blobs");
    assert_string_equal(g_err, ""); /* no progress when stderr is not a terminal */
    assert_int_equal(RUN("verify", p), 0);
    tu_expect_contains(g_out, "12 blobs");
    tu_expect_contains(g_out, "OK");
    assert_string_equal(g_err, "");
    /* the library reads what gen wrote, sized as asked */
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, p, &smoe__io_os), 0);
    assert_int_equal(v.entries, 12);
    assert_int_equal(v.top_k, 2);
    assert_string_equal(smoe__vault_meta(&v, "model"), "tiny");
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t e = 0; e < 4; e++) {
            const smoe__vault_entry *en = smoe__vault_entry_of(&v, l, e);
            assert_non_null(en);
            assert_in_range(en->size, 10240, 50000);
        }
    assert_true(v.layouts[0].min_bytes <= 10240);
    smoe__vault_free(&v);
    /* the same arguments write the same bytes */
    char *q = tu_path(g_dir, "gv2.smoe");
    assert_int_equal(RUN("gen", "--out", q, "--layers", "3", "--experts", "4", "--blob-bytes",
                         "10k", "--blob-bytes-max", "50000", "--seed", "5", "--top-k", "2",
                         "--model", "tiny"), 0);
    uint64_t na, nb;
    unsigned char *a = tu_read_file(p, &na), *b = tu_read_file(q, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na);
    free(a);
    free(b);
    free(q);
    free(p);
}

static void test_verify_corrupt_blob(void **state)
{
    (void)state;
    char *p = gen_vault("corrupt.smoe");
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, p, &smoe__io_os), 0);
    const smoe__vault_entry *e = smoe__vault_entry_of(&v, 1, 2);
    assert_non_null(e);
    tu_flip_byte(p, e->offset + e->size / 2);
    assert_int_equal(RUN("verify", p), 1);
    tu_expect_contains(g_err, "layer 1 expert 2: checksum mismatch");
    assert_int_equal(count_of(g_err, "layer "), 1);
    tu_expect_contains(g_out, "1 bad blob");
    /* a non-zero padding byte of another blob is caught too */
    e = smoe__vault_entry_of(&v, 2, 3);
    assert_non_null(e);
    assert_true(e->padded > e->size);
    tu_flip_byte(p, e->offset + e->padded - 1);
    assert_int_equal(RUN("verify", p), 1);
    tu_expect_contains(g_err, "layer 1 expert 2: checksum mismatch");
    tu_expect_contains(g_err, "layer 2 expert 3: padding byte");
    assert_int_equal(count_of(g_err, "layer "), 2);
    tu_expect_contains(g_out, "2 bad blobs");
    smoe__vault_free(&v);
    free(p);
}

static void test_verify_bad_vault(void **state)
{
    (void)state;
    char *p = gen_vault("trunc.smoe");
    tu_truncate(p, tu_file_size(p) - 10);
    assert_int_equal(RUN("verify", p), 1);
    tu_expect_contains(g_err, "SMOE_ETRUNC");
    tu_expect_contains(g_err, "file_size");
    assert_int_equal(RUN("inspect", p), 1);
    tu_expect_contains(g_err, "SMOE_ETRUNC");
    free(p);
}

static void test_inspect_json(void **state)
{
    (void)state;
    char *p = gen_vault("json.smoe");
    assert_int_equal(RUN("inspect", p, "--json"), 0);
    json_object *o = json_tokener_parse(g_out);
    if (!o)
        fail_msg("not JSON:\n%s", g_out);
    json_object *x;
#define GET(obj, key) (assert_true(json_object_object_get_ex(obj, key, &x)), x)
    assert_int_equal(json_object_get_int64(GET(o, "layers")), 3);
    assert_int_equal(json_object_get_int64(GET(o, "experts")), 4);
    assert_int_equal(json_object_get_int64(GET(o, "entries")), 12);
    assert_int_equal(json_object_get_int64(GET(o, "absent")), 0);
    assert_int_equal(json_object_get_int64(GET(o, "top_k")), 2);
    assert_int_equal(json_object_get_int64(GET(o, "file_size")), tu_file_size(p));
    assert_int_equal(json_object_get_int64(GET(o, "version")), 1);
    json_object *meta = GET(o, "metadata");
    assert_string_equal(json_object_get_string(GET(meta, "model")), "tiny");
    assert_string_equal(json_object_get_string(GET(meta, "top_k")), "2");
    json_object *layouts = GET(o, "layouts");
    assert_int_equal(json_object_array_length(layouts), 1);
    json_object *l0 = json_object_array_get_idx(layouts, 0);
    assert_int_equal(json_object_get_int64(GET(l0, "used_by")), 12);
    json_object *comps = GET(l0, "components");
    assert_int_equal(json_object_array_length(comps), 3);
    static const char *const names[3] = {"gate", "up", "down"};
    for (int i = 0; i < 3; i++) {
        json_object *c = json_object_array_get_idx(comps, (size_t)i);
        assert_string_equal(json_object_get_string(GET(c, "name")), names[i]);
        assert_string_equal(json_object_get_string(GET(c, "dtype")), "bf16");
        assert_int_equal(json_object_array_length(GET(c, "shape")), 2);
        assert_true(json_object_get_int64(GET(c, "bytes")) > 0);
    }
#undef GET
    json_object_put(o);
    /* the text form names the same things */
    assert_int_equal(RUN("inspect", p), 0);
    tu_expect_contains(g_out, "layers           3");
    tu_expect_contains(g_out, "model = tiny");
    tu_expect_contains(g_out, "gate");
    tu_expect_contains(g_out, "bf16");
    free(p);
}

/* smoe read streams every blob; --retries is accepted and reported (a
 * failing disk is exercised by tests/kernel_faults.sh). */
static void test_read_retries(void **state)
{
    (void)state;
    char *p = gen_vault("rd.smoe");
    assert_int_equal(RUN("read", p, "--hash", "--retries", "3", "--workers", "2", "--json"), 0);
    json_object *j = json_tokener_parse(g_out);
    assert_non_null(j);
    json_object *v;
    assert_true(json_object_object_get_ex(j, "blobs", &v));
    assert_int_equal(json_object_get_int64(v), 12);
    assert_true(json_object_object_get_ex(j, "hash_mismatches", &v));
    assert_int_equal(json_object_get_int64(v), 0);
    assert_true(json_object_object_get_ex(j, "retries", &v));
    assert_int_equal(json_object_get_int64(v), 0);
    json_object_put(j);
    assert_int_equal(RUN("read", p, "--retries", "x"), 1);
    tu_expect_contains(g_err, "--retries");
    free(p);
}

/* smoe read --verify-both: four runs, shares (smoe_warmup) then blob
 * order, each with verification off then on, every blob read and checked;
 * --order names a single order; a bad one is refused. */
static void test_read_orders(void **state)
{
    (void)state;
    char *p = gen_vault("ro.smoe");
    assert_int_equal(RUN("read", p, "--verify-both", "--hash", "--workers", "3", "--json"), 0);
    json_object *j = json_tokener_parse(g_out);
    assert_non_null(j);
    json_object *runs, *v;
    assert_true(json_object_object_get_ex(j, "runs", &runs));
    assert_int_equal(json_object_array_length(runs), 4);
    static const char *const order[4] = {"shares", "shares", "blobs", "blobs"};
    for (size_t i = 0; i < 4; i++) {
        json_object *r = json_object_array_get_idx(runs, i);
        assert_true(json_object_object_get_ex(r, "order", &v));
        assert_string_equal(json_object_get_string(v), order[i]);
        assert_true(json_object_object_get_ex(r, "verify", &v));
        assert_int_equal(json_object_get_boolean(v), (int)(i % 2));
        assert_true(json_object_object_get_ex(r, "blobs", &v));
        assert_int_equal(json_object_get_int64(v), 12);
        assert_true(json_object_object_get_ex(r, "hash_mismatches", &v));
        assert_int_equal(json_object_get_int64(v), 0);
        assert_true(json_object_object_get_ex(r, "bytes_read", &v));
        assert_true(json_object_get_int64(v) > 0);
    }
    json_object_put(j);
    assert_int_equal(RUN("read", p, "--order", "shares"), 0);
    tu_expect_contains(g_out, "shares (smoe_warmup): 12 blobs");
    assert_true(strstr(g_out, "blob order") == NULL);
    assert_int_equal(RUN("read", p, "--order", "sideways"), 1);
    tu_expect_contains(g_err, "--order");
    free(p);
}

/* smoe read streams a whole vault with direct I/O: the page cache gains
 * none of its pages (the freshly written vault's are dropped first). */
static void test_read_page_cache(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "pc.smoe");
    assert_int_equal(RUN("gen", "--out", p, "--layers", "4", "--experts", "8", "--blob-bytes",
                         "100k", "--blob-bytes-max", "300000", "--seed", "9"), 0);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
    size_t before = tu_cached_pages(p);
    assert_int_equal(RUN("read", p, "--workers", "4", "--json"), 0);
    json_object *j = json_tokener_parse(g_out);
    assert_non_null(j);
    json_object *v;
    assert_true(json_object_object_get_ex(j, "blobs", &v));
    assert_int_equal(json_object_get_int64(v), 32);
    assert_true(json_object_object_get_ex(j, "io_mode", &v));
    int direct = strcmp(json_object_get_string(v), "direct") == 0;
    json_object_put(j);
    size_t after = tu_cached_pages(p);
    free(p);
    if (!direct)
        skip(); /* this file system has no direct I/O: smoe read refused to fall back */
    if (after > before)
        fail_msg("smoe read grew the page cache from %zu to %zu pages", before, after);
}

/* smoe read --replica: both copies read, the counts add up, and --json
 * prints "replicas": [{"path", "bytes", "reads", "failed"}, ...], the
 * vault first; a copy of another vault is refused naming it; budget
 * checks copies the same way. */
static void test_read_replicas(void **state)
{
    (void)state;
    char *p = gen_vault("rp.smoe"), *q = tu_path(g_dir, "rp-copy.smoe");
    uint64_t n;
    unsigned char *bytes = tu_read_file(p, &n);
    FILE *f = fopen(q, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(bytes);
    assert_int_equal(RUN("read", p, "--replica", q, "--workers", "4", "--chunk", "16k",
                         "--buffered", "--hash", "--json"), 0);
    json_object *j = json_tokener_parse(g_out), *v, *reps;
    assert_non_null(j);
    assert_true(json_object_object_get_ex(j, "bytes_read", &v));
    int64_t total = json_object_get_int64(v), sum = 0;
    assert_true(json_object_object_get_ex(j, "replicas", &reps));
    assert_int_equal(json_object_array_length(reps), 2);
    const char *const keys[] = {"path", "bytes", "reads", "failed"};
    for (size_t i = 0; i < 2; i++) {
        json_object *r = json_object_array_get_idx(reps, i);
        assert_int_equal(json_object_object_length(r), 4);
        int k = 0;
        json_object_object_foreach(r, key, val) {
            assert_string_equal(key, keys[k++]);
            (void)val;
        }
        assert_true(json_object_object_get_ex(r, "path", &v));
        assert_string_equal(json_object_get_string(v), i ? q : p);
        assert_true(json_object_object_get_ex(r, "bytes", &v));
        sum += json_object_get_int64(v);
        assert_true(json_object_object_get_ex(r, "failed", &v));
        assert_int_equal(json_object_get_int64(v), 0);
    }
    assert_int_equal(sum, total);
    json_object_put(j);
    char *other = tu_path(g_dir, "rp-other.smoe");
    assert_int_equal(RUN("gen", "--out", other, "--layers", "3", "--experts", "4",
                         "--blob-bytes", "10k", "--blob-bytes-max", "50000", "--seed", "6"), 0);
    assert_int_equal(RUN("read", p, "--replica", other), 1);
    tu_expect_contains(g_err, "is not a copy of");
    tu_expect_contains(g_err, other);
    assert_int_equal(RUN("budget", p, "--replica", q), 0);
    assert_int_equal(RUN("budget", p, "--replica", other), 1);
    tu_expect_contains(g_err, "is not a copy of");
    unlink(other);
    unlink(q);
    free(other);
    free(q);
    free(p);
}

static void test_help(void **state)
{
    (void)state;
    static const char *const cmds[] = {"gen", "inspect", "verify"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(RUN(cmds[i], "--help"), 0);
        char want[64];
        snprintf(want, sizeof want, "usage: smoe %s", cmds[i]);
        tu_expect_contains(g_out, want);
    }
}

static void test_bad_arguments(void **state)
{
    (void)state;
    char *p = tu_path(g_dir, "args.smoe");
    assert_int_not_equal(RUN("gen", "--layers", "2"), 0);
    tu_expect_contains(g_err, "required");
    assert_int_not_equal(RUN("gen", "--out", p, "--layers", "0", "--experts", "2",
                             "--blob-bytes", "1k"), 0);
    tu_expect_contains(g_err, "--layers");
    assert_int_not_equal(RUN("gen", "--out", p, "--layers", "1", "--experts", "2",
                             "--blob-bytes", "2k", "--blob-bytes-max", "1k"), 0);
    tu_expect_contains(g_err, "--blob-bytes-max");
    assert_int_not_equal(RUN("gen", "--out", p, "--layers", "1", "--experts", "2",
                             "--blob-bytes", "1k", "--top-k", "3"), 0);
    tu_expect_contains(g_err, "top_k");
    assert_false(tu_exists(p));
    assert_int_not_equal(RUN("gen", "--nope"), 0);
    tu_expect_contains(g_err, "--nope");
    assert_int_not_equal(RUN("inspect"), 0);
    assert_int_not_equal(RUN("verify", "a", "b"), 0);
    char *missing = tu_path(g_dir, "missing.smoe");
    assert_int_equal(RUN("verify", missing), 1);
    tu_expect_contains(g_err, "missing.smoe");
    free(missing);
    free(p);
}

static void test_budget_cmd(void **state)
{
    (void)state;
    char *p = gen_vault("budget.smoe"); /* 3 layers x 4 experts, top_k 2 */
    json_object *x;
#define GET(obj, key) (assert_true(json_object_object_get_ex(obj, key, &x)), x)
    /* Automatic: every figure in the JSON, the ring a whole number of slots. */
    assert_int_equal(RUN("budget", p, "--json", "--reserve", "1G", "--scout-bytes", "2M"), 0);
    json_object *o = json_tokener_parse(g_out);
    assert_non_null(o);
    json_object *in = GET(o, "inputs"), *b = GET(o, "budget");
    assert_int_equal(json_object_get_int64(GET(in, "reserve_bytes")), 1 << 30);
    assert_int_equal(json_object_get_int64(GET(in, "scout_bytes")), 2 << 20);
    assert_int_equal(json_object_get_int64(GET(in, "top_k")), 2);
    int64_t slots = json_object_get_int64(GET(o, "slots"));
    int64_t slot_bytes = json_object_get_int64(GET(o, "slot_bytes"));
    assert_true(slots >= 1 && slots <= 12); /* never more slots than blobs */
    assert_int_equal(slot_bytes % 16384, 0);
    assert_int_equal(json_object_get_int64(GET(o, "ring_bytes")), slots * slot_bytes);
    assert_int_equal(json_object_get_int64(GET(b, "slots_after_vault_cap")), slots);
    assert_non_null(json_object_object_get(b, "free"));
    json_object_put(o);
    /* Text names each step. */
    assert_int_equal(RUN("budget", p), 0);
    tu_expect_contains(g_out, "engine overhead");
    tu_expect_contains(g_out, "OS floor");
    tu_expect_contains(g_out, "clamp to [64, 4096]");
    tu_expect_contains(g_out, "ring ");
    /* Explicit slots under one token's working set (3 x 2): the warning. */
    assert_int_equal(RUN("budget", p, "--slots", "4"), 0);
    tu_expect_contains(g_out, "warning");
    assert_int_equal(RUN("budget", p, "--slots", "4", "--json"), 0);
    o = json_tokener_parse(g_out);
    assert_non_null(o);
    assert_true(json_object_get_boolean(GET(o, "cliff")));
    assert_int_equal(json_object_get_int64(GET(o, "working_set_slots")), 6);
    json_object_put(o);
    /* Under one layer's top-k: an error, exit 1. */
    assert_int_equal(RUN("budget", p, "--slots", "1"), 1);
    tu_expect_contains(g_err, "top-2");
    /* An explicit slot size (the library test covers one under the largest blob). */
    assert_int_equal(RUN("budget", p, "--slot-mb", "1", "--slots", "8"), 0);
    tu_expect_contains(g_out, "1.00 MiB");
    assert_int_not_equal(RUN("budget", p, "--nope"), 0);
    tu_expect_contains(g_err, "--nope");
    assert_int_equal(RUN("budget", "--help"), 0);
    tu_expect_contains(g_out, "usage: smoe budget");
#undef GET
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gen_verify),
        cmocka_unit_test(test_verify_corrupt_blob),
        cmocka_unit_test(test_verify_bad_vault),
        cmocka_unit_test(test_inspect_json),
        cmocka_unit_test(test_read_retries),
        cmocka_unit_test(test_read_orders),
        cmocka_unit_test(test_read_page_cache),
        cmocka_unit_test(test_read_replicas),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_budget_cmd),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    free(g_out);
    free(g_err);
    return rc;
}
