/*
 * Description: the simulated router lookahead of `smoe bench
 * --spec-recall` (tools/smoe/bench/bench_predict.h) on a generated
 * routing sequence. Over many rows its guesses contain each true expert
 * with the asked recall (within 0.01 at 0.45, 0.75 and 0.9; every one at
 * 1, none at 0); its reported probabilities are calibrated (in each tenth
 * of [0, 1] holding enough guesses, the share that came true is within
 * 0.03 of their mean probability) and informative (true guesses report
 * more on average); wrong guesses follow the layer's popularity (an expert
 * never requested is never guessed, the most popular decoy most often), a
 * row never repeats an expert, and a seed gives the same guesses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_predict.h"

#define LAYERS 4u
#define EXPERTS 32u
#define K 4u
#define ROWS 40000u

static uint64_t rng = 12345;
static uint32_t next(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* Popularity: expert e of any layer weighs 32 - e; the last four never
 * requested (weight 0). */
static uint64_t weight(uint32_t e)
{
    return e >= EXPERTS - 4 ? 0 : EXPERTS - e;
}

/* A row of K distinct experts drawn by popularity. */
static void draw_row(uint32_t *t)
{
    uint64_t total = 0;
    for (uint32_t e = 0; e < EXPERTS; e++)
        total += weight(e);
    for (uint32_t i = 0; i < K;) {
        uint64_t u = next() % total, run = 0;
        uint32_t e = 0;
        while ((run += weight(e)) <= u)
            e++;
        int dup = 0;
        for (uint32_t j = 0; j < i; j++)
            dup |= t[j] == e;
        if (!dup)
            t[i++] = e;
    }
}

typedef struct run_stats {
    uint64_t truth, hits, guesses;
    double sum_p_true, sum_p_false;
    uint64_t n_true, n_false;
    uint64_t bin_n[10], bin_true[10];
    double bin_p[10];
    uint64_t decoy[EXPERTS];
} run_stats;

static void run(double recall, run_stats *rs)
{
    memset(rs, 0, sizeof *rs);
    uint64_t counts[LAYERS * EXPERTS];
    for (uint32_t l = 0; l < LAYERS; l++)
        for (uint32_t e = 0; e < EXPERTS; e++)
            counts[l * EXPERTS + e] = weight(e) * 100;
    bench_pred p;
    assert_int_equal(bench_pred_init(&p, LAYERS, EXPERTS, counts, recall, 99), 0);
    for (uint32_t r = 0; r < ROWS; r++) {
        uint32_t t[K], ids[K];
        float prob[K];
        uint8_t hit[K];
        draw_row(t);
        uint32_t n = bench_pred_guess(&p, r % LAYERS, t, K, ids, prob, hit);
        assert_int_equal(n, K);
        rs->truth += K;
        for (uint32_t i = 0; i < n; i++) {
            int is_true = 0;
            for (uint32_t j = 0; j < K; j++)
                is_true |= ids[i] == t[j];
            assert_int_equal(is_true, hit[i]); /* the predictor's own account */
            for (uint32_t j = 0; j < i; j++)
                assert_int_not_equal(ids[i], ids[j]);
            assert_true(prob[i] >= 0.0f && prob[i] <= 1.0f);
            rs->hits += (uint64_t)is_true;
            rs->guesses++;
            unsigned b = prob[i] >= 1.0f ? 9 : (unsigned)(prob[i] * 10);
            rs->bin_n[b]++;
            rs->bin_true[b] += (uint64_t)is_true;
            rs->bin_p[b] += prob[i];
            if (is_true) {
                rs->sum_p_true += prob[i];
                rs->n_true++;
            } else {
                rs->sum_p_false += prob[i];
                rs->n_false++;
                rs->decoy[ids[i]]++;
            }
        }
    }
    bench_pred_free(&p);
}

static void recall_is_as_asked(void **state)
{
    (void)state;
    const double rs_want[] = {0.45, 0.75, 0.9};
    for (int i = 0; i < 3; i++) {
        run_stats rs;
        run(rs_want[i], &rs);
        double got = (double)rs.hits / (double)rs.truth;
        if (got < rs_want[i] - 0.01 || got > rs_want[i] + 0.01)
            fail_msg("recall %.2f asked, %.4f measured", rs_want[i], got);
    }
    run_stats rs;
    run(1.0, &rs);
    assert_int_equal(rs.hits, rs.truth);
    run(0.0, &rs);
    assert_int_equal(rs.hits, 0);
}

static void probabilities_are_calibrated(void **state)
{
    (void)state;
    const double rs_want[] = {0.45, 0.75};
    for (int i = 0; i < 2; i++) {
        run_stats rs;
        run(rs_want[i], &rs);
        int bins = 0;
        for (int b = 0; b < 10; b++) {
            if (rs.bin_n[b] < 2000)
                continue;
            bins++;
            double said = rs.bin_p[b] / (double)rs.bin_n[b];
            double came = (double)rs.bin_true[b] / (double)rs.bin_n[b];
            if (came < said - 0.03 || came > said + 0.03)
                fail_msg("recall %.2f: guesses reported %.3f on average in [%.1f, %.1f) came "
                         "true %.3f of the time (%llu guesses)", rs_want[i], said, b / 10.0,
                         (b + 1) / 10.0, came, (unsigned long long)rs.bin_n[b]);
        }
        assert_true(bins >= 4); /* spread over [0, 1], not one value */
        /* informative: true guesses report clearly more */
        assert_true(rs.sum_p_true / (double)rs.n_true >
                    rs.sum_p_false / (double)rs.n_false + 0.15);
    }
}

static void decoys_follow_popularity(void **state)
{
    (void)state;
    run_stats rs;
    run(0.5, &rs);
    for (uint32_t e = EXPERTS - 4; e < EXPERTS; e++)
        assert_int_equal(rs.decoy[e], 0); /* never requested: never guessed */
    /* more popular, more often a decoy: the first against the 20th */
    assert_true(rs.decoy[0] > 2 * rs.decoy[20]);
}

static void same_seed_same_guesses(void **state)
{
    (void)state;
    uint64_t counts[LAYERS * EXPERTS];
    for (uint32_t i = 0; i < LAYERS * EXPERTS; i++)
        counts[i] = weight(i % EXPERTS) + 1;
    bench_pred a, b;
    assert_int_equal(bench_pred_init(&a, LAYERS, EXPERTS, counts, 0.6, 5), 0);
    assert_int_equal(bench_pred_init(&b, LAYERS, EXPERTS, counts, 0.6, 5), 0);
    const uint32_t t[K] = {3, 7, 11, 1};
    for (int r = 0; r < 1000; r++) {
        uint32_t ia[K], ib[K];
        float pa[K], pb[K];
        uint32_t na = bench_pred_guess(&a, 1, t, K, ia, pa, NULL);
        uint32_t nb = bench_pred_guess(&b, 1, t, K, ib, pb, NULL);
        assert_int_equal(na, nb);
        assert_memory_equal(ia, ib, na * sizeof *ia);
        assert_memory_equal(pa, pb, na * sizeof *pa);
    }
    bench_pred_free(&a);
    bench_pred_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recall_is_as_asked),
        cmocka_unit_test(probabilities_are_calibrated),
        cmocka_unit_test(decoys_follow_popularity),
        cmocka_unit_test(same_seed_same_guesses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
