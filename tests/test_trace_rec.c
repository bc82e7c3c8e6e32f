/*
 * Description: the library's trace recorder (src/fill/trace_rec.c). Records
 * from one producer come out as a trace the reader parses, grouped into
 * lines by layer, with the token advancing when the layer goes back; with
 * several producers started behind a barrier every record appears exactly
 * once and each producer's records keep their order; with a tiny buffer
 * the records that do not fit are dropped and counted, never reordered;
 * a failing write or an uncreatable file is reported, never a crash.
 * Usage: test_trace_rec [producers [records-per-producer]]
 */
#include <errno.h>
#include <pthread.h>
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
#include "smoe_tier.h"
#include "trace.h"
#include "fill/trace_rec.h"

static unsigned n_producers = 4;
static unsigned n_per_producer = 50000;
static char path[4096];

static void make_path(const char *name)
{
    const char *base = getenv("SMOE_TEST_TMPDIR");
    snprintf(path, sizeof path, "%s/test_trace_rec.%d.%s", base && *base ? base : "/tmp",
             (int)getpid(), name);
}

static void load(tool_trace *t)
{
    char err[600];
    if (tool_trace_load(t, path, err, sizeof err))
        fail_msg("the recorded trace does not parse: %s", err);
}

static void test_single_producer(void **state)
{
    (void)state;
    make_path("single.trace");
    smoe__trace_rec *r;
    assert_int_equal(smoe__trace_rec_open(&r, path, 3, 8, 2, "tiny model"), 0);
    /* token 0: layers 0 1 2; token 1: layers 0 2; token 2: layer 1 twice
     * (the repeat of expert 4 starts token 3) */
    static const uint32_t rec[][2] = {{0, 1}, {0, 2}, {1, 3}, {1, 4}, {2, 5}, {2, 6},
                                      {0, 7}, {0, 1}, {2, 2}, {1, 4}, {1, 4}};
    for (size_t i = 0; i < sizeof rec / sizeof rec[0]; i++)
        smoe__trace_rec_add(r, rec[i][0], rec[i][1]);
    assert_int_equal(smoe__trace_rec_dropped(r), 0);
    smoe__trace_rec_close(r);

    tool_trace t;
    load(&t);
    assert_string_equal(t.model, "tiny_model");
    assert_int_equal(t.layers, 3);
    assert_int_equal(t.experts, 8);
    assert_int_equal(t.top_k, 2);
    assert_int_equal(t.n_tokens, 4);
    assert_int_equal(t.n_rows, 7);
    static const uint32_t layers[] = {0, 1, 2, 0, 2, 1, 1};
    static const uint32_t tok[] = {0, 0, 0, 1, 1, 2, 3};
    for (size_t r2 = 0; r2 < t.n_rows; r2++)
        assert_int_equal(t.row_layer[r2], layers[r2]);
    for (size_t k = 0; k < t.n_tokens; k++)
        for (size_t r2 = t.tok_row[k]; r2 < t.tok_row[k + 1]; r2++)
            assert_int_equal(tok[r2], t.tok_num[k]);
    /* every record, in order */
    assert_int_equal(tool_trace_requests(&t), 11);
    for (size_t i = 0; i < 11; i++)
        assert_int_equal(t.ids[i], rec[i][1]);
    tool_trace_free(&t);
    unlink(path);
}

static void test_long_line_splits(void **state)
{
    (void)state;
    make_path("long.trace");
    smoe__trace_rec *r;
    assert_int_equal(smoe__trace_rec_open(&r, path, 1, 200, 0, NULL), 0);
    for (uint32_t e = 0; e < 150; e++) /* 64 + 64 + 22: three tokens of layer 0 */
        smoe__trace_rec_add(r, 0, e);
    smoe__trace_rec_close(r);
    tool_trace t;
    load(&t);
    assert_string_equal(t.model, "unknown");
    assert_int_equal(t.n_rows, 3);
    assert_int_equal(t.n_tokens, 3);
    assert_int_equal(tool_trace_requests(&t), 150);
    for (uint32_t i = 0; i < 150; i++)
        assert_int_equal(t.ids[i], i);
    tool_trace_free(&t);
    unlink(path);
}

typedef struct producer {
    smoe__trace_rec *r;
    pthread_barrier_t *bar;
    uint32_t id;
    uint32_t n;
} producer;

/* Producer p records (layer i, expert p) for i = 0 .. n-1: the layer is
 * its sequence number, the expert names the producer. */
static void *produce(void *arg)
{
    producer *p = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (p->id + 1);
    pthread_barrier_wait(p->bar);
    for (uint32_t i = 0; i < p->n; i++) {
        smoe__trace_rec_add(p->r, i, p->id);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (volatile unsigned spin = (unsigned)(x & 63); spin; spin--) {
        }
    }
    return NULL;
}

static void test_many_producers(void **state)
{
    (void)state;
    make_path("multi.trace");
    smoe__trace_rec *r;
    assert_int_equal(smoe__trace_rec_open(&r, path, 65536, n_producers, 0, "mt"), 0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, n_producers);
    pthread_t th[64];
    producer pr[64];
    for (unsigned i = 0; i < n_producers; i++) {
        pr[i] = (producer){r, &bar, i, n_per_producer};
        assert_int_equal(pthread_create(&th[i], NULL, produce, &pr[i]), 0);
    }
    for (unsigned i = 0; i < n_producers; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    /* the buffer holds a million records: nothing may be dropped */
    assert_int_equal(smoe__trace_rec_dropped(r), 0);
    smoe__trace_rec_close(r);

    tool_trace t;
    load(&t);
    uint32_t next[64] = {0};
    for (size_t row = 0; row < t.n_rows; row++)
        for (uint32_t i = t.row_off[row]; i < t.row_off[row + 1]; i++) {
            uint32_t p = t.ids[i];
            assert_true(p < n_producers);
            if (t.row_layer[row] != next[p])
                fail_msg("producer %u: record %u came where %u was due", p, t.row_layer[row],
                         next[p]);
            next[p]++;
        }
    for (unsigned p = 0; p < n_producers; p++)
        assert_int_equal(next[p], n_per_producer);
    tool_trace_free(&t);
    unlink(path);
}

static void test_full_buffer_drops(void **state)
{
    (void)state;
    make_path("drop.trace");
    smoe__trace_rec *r;
    const uint32_t total = 200000;
    assert_int_equal(smoe__trace_rec_open_cap(&r, path, 50000, 4, 0, "drop", 64), 0);
    for (uint32_t i = 0; i < total; i++) /* record i is (i % 50000, i / 50000) */
        smoe__trace_rec_add(r, i % 50000, i / 50000);
    uint64_t dropped = smoe__trace_rec_dropped(r);
    smoe__trace_rec_close(r);
    assert_true(dropped > 0); /* 64 slots cannot absorb 200000 records in 50 ms */

    tool_trace t;
    load(&t);
    uint64_t written = tool_trace_requests(&t);
    assert_int_equal(written + dropped, total);
    int64_t last = -1;
    size_t j = 0;
    for (size_t row = 0; row < t.n_rows; row++)
        for (uint32_t i = t.row_off[row]; i < t.row_off[row + 1]; i++, j++) {
            int64_t seq = (int64_t)t.ids[i] * 50000 + t.row_layer[row];
            if (seq <= last)
                fail_msg("record %lld after %lld: order lost", (long long)seq,
                         (long long)last);
            last = seq;
        }
    tool_trace_free(&t);
    unlink(path);
}

static ssize_t failing_pwrite(const smoe__io *io, int fd, const void *buf, size_t n,
                              uint64_t off)
{
    (void)io;
    (void)fd;
    (void)buf;
    (void)n;
    /* let the header through, fail the records */
    return off == 0 ? (ssize_t)n : -ENOSPC;
}

static void test_write_failure(void **state)
{
    (void)state;
    make_path("fail.trace");
    smoe__io bad = smoe__io_os;
    bad.pwrite = failing_pwrite;
    smoe__io_set(&bad);
    smoe__trace_rec *r;
    int rc = smoe__trace_rec_open(&r, path, 4, 4, 0, NULL);
    smoe__io_set(NULL);
    assert_int_equal(rc, 0);
    for (uint32_t i = 0; i < 10000; i++)
        smoe__trace_rec_add(r, i % 4, i % 3);
    smoe__trace_rec_close(r); /* no crash, no hang */
    unlink(path);

    assert_int_equal(smoe__trace_rec_open(&r, "/nonexistent-dir/x.trace", 4, 4, 0, NULL),
                     SMOE_ESYS);
    assert_null(r);
    assert_non_null(strstr(smoe_last_error(), "/nonexistent-dir/x.trace"));
    assert_int_equal(smoe__trace_rec_open(&r, path, 0, 4, 0, NULL), SMOE_EINVAL);
    smoe__trace_rec_close(NULL);
    assert_int_equal(smoe__trace_rec_dropped(NULL), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_producers = (unsigned)strtoul(argv[1], NULL, 10);
    if (argc > 2)
        n_per_producer = (unsigned)strtoul(argv[2], NULL, 10);
    if (n_producers < 1 || n_producers > 64 || n_per_producer < 1 || n_per_producer > 65536) {
        fprintf(stderr, "usage: %s [producers 1..64 [records 1..65536]]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_producer),
        cmocka_unit_test(test_long_line_splits),
        cmocka_unit_test(test_many_producers),
        cmocka_unit_test(test_full_buffer_drops),
        cmocka_unit_test(test_write_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
