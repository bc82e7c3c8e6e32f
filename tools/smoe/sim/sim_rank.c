/*
 * sim_rank.c - how many requests a cache could hit if, at every token
 * boundary, it held for free the C experts most likely to be asked for by
 * the next token, as ranked from what it has seen so far.
 *
 * An expert never asked for before cannot be held (its first request is a
 * miss for any cache). No policy can re-arrange its whole cache for free
 * between tokens, but
 * one that ranks with the same information cannot beat this by much: it
 * is an estimate of what that information is worth, to set beside
 * Belady's optimum (which knows the future). Two rankings, the better
 * counted per size:
 *   table   the chance of use, counted online over every (layer, expert)
 *           at every token, for each pair (8-token history, one of six
 *           levels of the 0.98-decayed count against k / experts)
 *   count   the 0.98-decayed count alone
 */
#include <stdlib.h>
#include <string.h>

#include "sim_rank.h"

#define LEVELS 6

static const double *g_score; /* for the comparison; single-threaded use */

static int by_score(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    double x = g_score[i], y = g_score[j];
    if (x != y)
        return x < y ? 1 : -1;
    return i < j ? -1 : i > j;
}

static unsigned level_of(double f, double base)
{
    if (f <= 0)
        return 0;
    double r = f * 0.02 / base;
    return r < 0.25 ? 1 : r < 0.5 ? 2 : r < 1 ? 3 : r < 2 ? 4 : 5;
}

int simp_rank_bound(const tool_trace *t, size_t tok_begin, size_t tok_end,
                    const uint32_t *sizes, int n_sizes, uint64_t *hits, uint64_t *requests)
{
    size_t nk = (size_t)t->layers * t->experts;
    if (tok_end == 0 || tok_end > t->n_tokens)
        tok_end = t->n_tokens;
    double *f = calloc(nk ? nk : 1, sizeof *f);
    uint8_t *hist = calloc(nk ? nk : 1, 1), *used = calloc(nk ? nk : 1, 1);
    uint8_t *seen = calloc(nk ? nk : 1, 1);
    double *cnt_hit = calloc(256 * LEVELS, sizeof *cnt_hit);
    double *cnt_opp = calloc(256 * LEVELS, sizeof *cnt_opp);
    double *score = malloc((nk ? nk : 1) * sizeof *score);
    uint32_t *order = malloc((nk ? nk : 1) * sizeof *order);
    uint64_t *got = calloc((size_t)n_sizes * 2, sizeof *got);
    int rc = -1;
    if (!f || !hist || !used || !seen || !cnt_hit || !cnt_opp || !score || !order || !got)
        goto done;
    double base = (double)(t->top_k ? t->top_k : 1) / (double)(t->experts ? t->experts : 1);
    *requests = 0;
    for (size_t tok = tok_begin; tok < tok_end; tok++) {
        memset(used, 0, nk);
        for (size_t r = t->tok_row[tok]; r < t->tok_row[tok + 1]; r++)
            for (uint32_t i = t->row_off[r]; i < t->row_off[r + 1]; i++)
                used[(size_t)t->row_layer[r] * t->experts + t->ids[i]] = 1;
        for (size_t k = 0; k < nk; k++)
            *requests += used[k];
        for (int rank = 0; rank < 2; rank++) {
            for (size_t k = 0; k < nk; k++) {
                order[k] = (uint32_t)k;
                if (!seen[k]) {
                    score[k] = -1; /* cannot be held: last in the order */
                } else if (rank == 0) {
                    size_t c = (size_t)hist[k] * LEVELS + level_of(f[k], base);
                    score[k] = (cnt_hit[c] + base) / (cnt_opp[c] + 1);
                } else {
                    score[k] = f[k];
                }
            }
            g_score = score;
            qsort(order, nk, sizeof *order, by_score);
            for (int z = 0; z < n_sizes; z++) {
                size_t c = sizes[z] < nk ? sizes[z] : nk;
                for (size_t i = 0; i < c; i++)
                    got[(size_t)z * 2 + (size_t)rank] += used[order[i]] & seen[order[i]];
            }
        }
        for (size_t k = 0; k < nk; k++) {
            size_t c = (size_t)hist[k] * LEVELS + level_of(f[k], base);
            cnt_opp[c] += 1;
            cnt_hit[c] += used[k];
            f[k] = f[k] * 0.98 + used[k];
            seen[k] |= used[k];
            hist[k] = (uint8_t)((hist[k] << 1) | used[k]);
        }
    }
    for (int z = 0; z < n_sizes; z++)
        hits[z] = got[z * 2] > got[z * 2 + 1] ? got[z * 2] : got[z * 2 + 1];
    rc = 0;
done:
    free(f);
    free(hist);
    free(used);
    free(seen);
    free(cnt_hit);
    free(cnt_opp);
    free(score);
    free(order);
    free(got);
    return rc;
}
