/*
 * Description: the offline LRU and Belady-optimal simulators
 * (tools/smoe/sim/sim.c) count hits and misses exactly as worked out by hand on
 * small sequences (including the textbook reference string), handle zero
 * and oversized caches, agree with a naive O(n x slots) Belady on random
 * sequences, and build a trace's request sequence in replay order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void expect(int (*fn)(const uint32_t *, size_t, uint32_t, uint32_t, sim_result *),
                   const uint32_t *keys, size_t n, uint32_t n_keys, uint32_t slots,
                   uint64_t hits)
{
    sim_result r;
    assert_int_equal(fn(keys, n, n_keys, slots, &r), 0);
    assert_int_equal(r.requests, n);
    assert_int_equal(r.hits, hits);
    assert_int_equal(r.misses, n - hits);
}

/*
 * a b c a b d a b c d, three slots.
 * LRU: a b c miss; a b hit; d evicts c; a b hit; c evicts d; d evicts a:
 *      4 hits.
 * OPT: a b c miss; a b hit; d evicts c (next use 8, after a@6 and b@7);
 *      a b hit; c evicts a or b (neither used again); d hit: 5 hits.
 */
static const uint32_t seq1[] = {0, 1, 2, 0, 1, 3, 0, 1, 2, 3};

static void test_small_by_hand(void **state)
{
    (void)state;
    expect(sim_lru_keys, seq1, N_OF(seq1), 4, 3, 4);
    expect(sim_opt_keys, seq1, N_OF(seq1), 4, 3, 5);
    /* two slots. LRU: the distance between repeats is always 3 or more
     * keys, so nothing hits. */
    expect(sim_lru_keys, seq1, N_OF(seq1), 4, 2, 0);
    /* OPT with two slots, step by step:
     * 0:a m {a}  1:b m {a,b}  2:c m evict b (b@4 > a@3) {a,c}  3:a h
     * 4:b m evict c (c@8 > a@6) {a,b}  5:d m evict b (b@7 > a@6) {a,d}
     * 6:a h  7:b m evict a (never) {d,b}  8:c m evict b (never) {d,c}
     * 9:d h  => 3 hits */
    expect(sim_opt_keys, seq1, N_OF(seq1), 4, 2, 3);
}

/* The reference string from the classic page-replacement example, three
 * frames: OPT takes 9 faults, LRU 12. */
static const uint32_t classic[] = {7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1};

static void test_classic_reference_string(void **state)
{
    (void)state;
    expect(sim_lru_keys, classic, N_OF(classic), 8, 3, 20 - 12);
    expect(sim_opt_keys, classic, N_OF(classic), 8, 3, 20 - 9);
    /* four frames: OPT 8 faults, LRU 8 faults */
    expect(sim_lru_keys, classic, N_OF(classic), 8, 4, 20 - 8);
    expect(sim_opt_keys, classic, N_OF(classic), 8, 4, 20 - 8);
}

static void test_edges(void **state)
{
    (void)state;
    static const uint32_t s[] = {0, 0, 1, 1, 0};
    /* one slot: the repeat of each key hits */
    expect(sim_lru_keys, s, N_OF(s), 2, 1, 2);
    expect(sim_opt_keys, s, N_OF(s), 2, 1, 2);
    /* no slot: every request misses */
    expect(sim_lru_keys, s, N_OF(s), 2, 0, 0);
    expect(sim_opt_keys, s, N_OF(s), 2, 0, 0);
    /* room for everything: only the first request of each key misses */
    expect(sim_lru_keys, classic, N_OF(classic), 8, 100, 20 - 6);
    expect(sim_opt_keys, classic, N_OF(classic), 8, 100, 20 - 6);
    /* empty sequence */
    expect(sim_lru_keys, s, 0, 2, 3, 0);
    expect(sim_opt_keys, s, 0, 2, 3, 0);
}

/* Belady by brute force: on a miss with a full cache, scan ahead for each
 * cached key's next use. */
static uint64_t naive_opt(const uint32_t *k, size_t n, uint32_t slots)
{
    uint32_t cache[64];
    uint32_t used = 0;
    uint64_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (uint32_t c = 0; c < used; c++)
            found |= cache[c] == k[i];
        if (found) {
            hits++;
            continue;
        }
        if (used < slots) {
            cache[used++] = k[i];
            continue;
        }
        size_t far = 0;
        uint32_t victim = 0;
        for (uint32_t c = 0; c < used; c++) {
            size_t j = i + 1;
            while (j < n && k[j] != cache[c])
                j++;
            if (j > far) {
                far = j;
                victim = c;
            }
        }
        cache[victim] = k[i];
    }
    return hits;
}

static void test_random_against_naive(void **state)
{
    (void)state;
    uint64_t x = 12345;
    uint32_t keys[2000];
    for (int round = 0; round < 40; round++) {
        uint32_t n_keys = 4 + (uint32_t)(round % 37);
        uint32_t slots = 1 + (uint32_t)(round * 7 % 20);
        for (size_t i = 0; i < N_OF(keys); i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            /* skewed: low keys more often */
            uint32_t a = (uint32_t)(x >> 33) % n_keys, b = (uint32_t)(x >> 45) % n_keys;
            keys[i] = a < b ? a : b;
        }
        sim_result lru, opt;
        assert_int_equal(sim_lru_keys(keys, N_OF(keys), n_keys, slots, &lru), 0);
        assert_int_equal(sim_opt_keys(keys, N_OF(keys), n_keys, slots, &opt), 0);
        assert_int_equal(opt.hits, naive_opt(keys, N_OF(keys), slots));
        assert_true(opt.hits >= lru.hits);
    }
}

static void test_trace_keys(void **state)
{
    (void)state;
    const char *base = getenv("SMOE_TEST_TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/test_sim.%d.trace", base && *base ? base : "/tmp",
             (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# layers=2 experts=4 topk=2\n0 0 1 2 | 3\n0 1 3 0\n1 0 2\n1 1 0 1\n", f);
    assert_int_equal(fclose(f), 0);
    tool_trace t;
    char err[600];
    assert_int_equal(tool_trace_load(&t, path, err, sizeof err), 0);
    uint32_t *k;
    size_t n = sim_trace_keys(&t, 99, &k);
    static const uint32_t want[] = {1, 2, 7, 4, 2, 4, 5};
    assert_int_equal(n, N_OF(want));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(k[i], want[i]);
    free(k);
    /* first token only */
    n = sim_trace_keys(&t, 1, &k);
    assert_int_equal(n, 4);
    free(k);
    /* room for all: (layer 0, expert 2) and (layer 1, expert 0) repeat */
    n = sim_trace_keys(&t, 2, &k);
    sim_result r;
    assert_int_equal(sim_lru_keys(k, n, t.layers * t.experts, 8, &r), 0);
    assert_int_equal(r.hits, 2);
    free(k);
    tool_trace_free(&t);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_by_hand),
        cmocka_unit_test(test_classic_reference_string),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_random_against_naive),
        cmocka_unit_test(test_trace_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
