/*
 * bench_predict.h - the simulated router lookahead of `smoe bench
 * --spec-recall R`: what an engine's predictor of layer l + 1's experts
 * would say, built from the routing a trace holds.
 *
 * For a row whose true experts are t_1 .. t_k, the guess i is t_i with
 * probability R, and otherwise an expert drawn from the layer's
 * popularity (its share of the trace's requests, never uniformly) among
 * those that are neither true nor already guessed, so each guess is true
 * with probability R whatever the popularity. Each guess carries a score,
 * drawn from N(sep, 1) for a true one and N(0, 1) for a decoy (a router's
 * logit margin, as the predictor would see it), and reports the posterior
 * p = P(true | score) = 1 / (1 + (1 - R) / R * exp(-(sep * s - sep^2 / 2))):
 * calibrated (among guesses reported p, a fraction p are true) and
 * informative (true guesses report higher p on average).
 *
 * Deterministic for a seed; no allocation after init.
 */
#ifndef SMOE_TOOL_BENCH_PREDICT_H
#define SMOE_TOOL_BENCH_PREDICT_H

#include <stdint.h>

/* Separation of the true and decoy scores, in standard deviations. */
#define BENCH_PRED_SEP 1.5

typedef struct bench_pred {
    uint32_t layers, experts;
    double recall;
    double *cdf;   /* layers x experts: cumulative popularity, each layer's last 1 */
    uint64_t rng;
} bench_pred;

/* counts: layers x experts requests of each expert. 0, or -1 (out of
 * memory). A layer with no requests has no decoys to draw: its wrong
 * guesses are left out. */
int bench_pred_init(bench_pred *p, uint32_t layers, uint32_t experts, const uint64_t *counts,
                    double recall, uint64_t seed);
void bench_pred_free(bench_pred *p);

/*
 * The guesses for layer `layer` whose true experts are truth[0 .. k):
 * ids[i] and their reported probabilities prob[i]; returns how many (k,
 * or fewer when the layer has too few other experts with any popularity).
 * is_true[i] (may be NULL) says which came true, for the bench's counts.
 */
uint32_t bench_pred_guess(bench_pred *p, uint32_t layer, const uint32_t *truth, uint32_t k,
                          uint32_t *ids, float *prob, uint8_t *is_true);

#endif
