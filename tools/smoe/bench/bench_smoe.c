/*
 * bench_smoe.c - the `smoe` mode: replay the trace through the library.
 *
 * Per token and layer: demand-prefetch the layer's routed experts, then
 * (optionally) issue speculative prefetches, claim each expert (waiting),
 * simulate compute, release. Hits, joins and misses come from the demand
 * prefetch's status, the same way the offline simulators count them.
 *
 * With --idle-ms the library is left idle that long after open, with a
 * start-up warm-up (smoe_warmup: the ring's empty slots filled with the
 * likeliest experts at the drive's speed) running and pre-warm, when on,
 * running too; the warm-up is then cancelled (its reads would count in the
 * replay's figures) and the library marked busy (smoe_set_busy) for the
 * replay, as an engine marks the time it decodes; without it busy is
 * never set and nothing is warmed up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smoe/smoe.h"
#include "bench.h"
#include "os.h"
#include "bench_predict.h"
#include "tool.h"

#define CLAIM_TIMEOUT_NS (120ull * 1000000000ull)
#define FULL_RETRY_NS (10ull * 1000000000ull)

static int fail(bench_result *r, const char *what, uint32_t layer, uint32_t expert, int rc)
{
    snprintf(r->error, sizeof r->error, "%s(layer %u, expert %u): %s: %s", what, layer,
             expert, smoe_err_name(rc), smoe_last_error());
    return -1;
}

/* Demand prefetch; retries while the ring is momentarily full of loading
 * slots (only a ring barely larger than one layer's experts sees that). */
static int demand(smoe_stream *s, uint32_t layer, uint32_t expert, bench_result *r)
{
    int rc = smoe_prefetch(s, layer, expert, SMOE_PREFETCH_DEMAND);
    if (rc != SMOE_EFULL)
        return rc;
    r->full++;
    uint64_t end = tool_now_ns() + FULL_RETRY_NS;
    while (rc == SMOE_EFULL && tool_now_ns() < end)
        rc = smoe_prefetch(s, layer, expert, SMOE_PREFETCH_DEMAND);
    return rc;
}

/* Sleep ms milliseconds (the engine idle between requests). */
static void idle(uint32_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* A demand prefetch's status as the offline simulators count it: 0, or
 * SMOE_EINVAL for a status demand never gets. */
static int count_status(smoe_prefetch_status st, bench_result *r)
{
    switch (st) {
    case SMOE_RESIDENT: r->hits++; return 0;
    case SMOE_INFLIGHT: r->joins++; return 0;
    case SMOE_QUEUED: r->misses++; return 0;
    case SMOE_SKIPPED: break; /* speculative requests only */
    }
    return SMOE_EINVAL;
}

/* One (token, layer) row as the replay sees it. */
typedef struct row_ref {
    uint32_t layer, k;
    const uint32_t *e; /* the k routed experts */
} row_ref;

/* Demand-prefetch the row's experts, counting hits, joins and misses as
 * the offline simulators do. 0, or -1 with r->error. */
static int demand_row(const bench_env *env, smoe_stream *s, const row_ref *w, bench_result *r)
{
    for (uint32_t i = 0; i < w->k; i++) {
        int rc = demand(s, w->layer, w->e[i], r);
        if (rc < 0 || (rc = count_status((smoe_prefetch_status)rc, r)) < 0)
            return fail(r, "smoe_prefetch", w->layer, w->e[i], rc);
        r->bytes_requested += env->blobs[(size_t)w->layer * env->experts + w->e[i]].padded;
    }
    return 0;
}

/* Speculative prefetches after a row's demand: the next gate ranks
 * (--spec), and the previous token's experts of the next layer
 * (--spec-next-layer, prev_next: that row or SIZE_MAX). */
static void speculate(const bench_env *env, smoe_stream *s, size_t row, const row_ref *w,
                      size_t prev_next, bench_result *r)
{
    const bench_cfg *cfg = env->cfg;
    const tool_trace *t = &env->trace;
    if (cfg->spec) {
        uint32_t m = t->spec_off[row + 1] - t->spec_off[row];
        if (m > cfg->spec)
            m = cfg->spec;
        for (uint32_t i = 0; i < m; i++) {
            (void)smoe_prefetch(s, w->layer, t->spec[t->spec_off[row] + i],
                                SMOE_PREFETCH_SPECULATIVE);
            r->spec_issued++;
        }
    }
    if (cfg->spec_next_layer && w->layer + 1 < env->layers && prev_next != SIZE_MAX) {
        for (uint32_t i = t->row_off[prev_next]; i < t->row_off[prev_next + 1]; i++) {
            (void)smoe_prefetch(s, w->layer + 1, t->ids[i], SMOE_PREFETCH_SPECULATIVE);
            r->spec_issued++;
        }
    }
}

/* smoe+recall=R: the simulated predictor's guesses for the token's next
 * row, when it is the next layer's, as hints (bench_predict.h). */
static void hint_next(const bench_env *env, smoe_stream *s, bench_pred *pred, size_t row,
                      size_t row_end, bench_result *r)
{
    const tool_trace *t = &env->trace;
    if (row + 1 >= row_end || t->row_layer[row + 1] != t->row_layer[row] + 1)
        return;
    uint32_t ids[TRACE_MAX_K];
    float prob[TRACE_MAX_K];
    uint8_t hit[TRACE_MAX_K];
    const uint32_t k = t->row_off[row + 2] - t->row_off[row + 1];
    const uint32_t n = bench_pred_guess(pred, t->row_layer[row + 1], &t->ids[t->row_off[row + 1]],
                                        k, ids, prob, hit);
    r->hint_rows_truth += k;
    for (uint32_t i = 0; i < n; i++) {
        (void)smoe_prefetch_hint(s, t->row_layer[row + 1], ids[i], prob[i]);
        r->hints_issued++;
        r->hints_true += hit[i];
    }
}

/* Claim the row's experts (waiting), compute, release; the wait is added
 * to *wait. 0, or -1 with r->error. */
static int claim_row(const bench_env *env, smoe_stream *s, const row_ref *w, uint64_t *wait,
                     bench_result *r)
{
    smoe_blob blobs[TRACE_MAX_K];
    uint64_t t0 = tool_now_ns();
    uint32_t held = 0;
    int rc = 0;
    for (uint32_t i = 0; i < w->k && !rc; i++) {
        int st = smoe_claim_wait(s, w->layer, w->e[i], CLAIM_TIMEOUT_NS, &blobs[i]);
        if (st < 0)
            rc = fail(r, "smoe_claim_wait", w->layer, w->e[i], st);
        else
            held++;
    }
    *wait += tool_now_ns() - t0;
    bench_spin_us(env->cfg->compute_us);
    for (uint32_t i = 0; i < held; i++)
        (void)smoe_release(s, &blobs[i]);
    return rc;
}

static int replay(const bench_env *env, smoe_stream *s, int spec, bench_pred *pred,
                  bench_clock *c, bench_result *r)
{
    const tool_trace *t = &env->trace;
    /* row of the previous token for each layer, for --spec-next-layer */
    size_t *rows = malloc((size_t)env->layers * 2 * sizeof *rows);
    if (!rows) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return -1;
    }
    size_t *prev_row = rows, *cur_row = rows + env->layers;
    for (uint32_t l = 0; l < env->layers; l++)
        prev_row[l] = cur_row[l] = SIZE_MAX;
    int rc = 0;
    for (size_t tok = 0; tok < env->n_tokens && !rc; tok++) {
        uint64_t wait = 0;
        for (size_t row = t->tok_row[tok]; row < t->tok_row[tok + 1] && !rc; row++) {
            row_ref w = {t->row_layer[row], t->row_off[row + 1] - t->row_off[row],
                         &t->ids[t->row_off[row]]};
            cur_row[w.layer] = row;
            rc = demand_row(env, s, &w, r);
            r->requests += w.k;
            c->requests += w.k;
            if (rc)
                break;
            if (spec)
                speculate(env, s, row, &w,
                          w.layer + 1 < env->layers ? prev_row[w.layer + 1] : SIZE_MAX, r);
            if (pred)
                hint_next(env, s, pred, row, t->tok_row[tok + 1], r);
            rc = claim_row(env, s, &w, &wait, r);
        }
        c->wait_ns[tok] = wait;
        c->hits = r->hits + r->joins;
        size_t *tmp = prev_row;
        prev_row = cur_row;
        cur_row = tmp;
        for (uint32_t l = 0; l < env->layers; l++)
            cur_row[l] = SIZE_MAX;
        bench_clock_token(c, tok);
    }
    free(rows);
    return rc;
}

/* The library's own figures after the replay. */
static void copy_stats(const smoe_stats *st, bench_result *r)
{
    r->bytes_read = st->bytes_read;
    r->io_mode = st->io_mode;
    r->verify = st->verify;
    r->workers = st->workers;
    r->claim_waits = st->claim_waits;
    r->spec_queued = st->spec_queued;
    r->spec_skipped = st->spec_skipped;
    r->spec_used = st->spec_used;
    r->spec_wasted_bytes = st->spec_wasted_bytes;
    r->spec_upgraded = st->spec_upgraded;
    r->spec_cancelled = st->spec_cancelled;
    r->evictions = st->evictions;
    r->eviction = st->eviction;
    r->evict_scans = st->evict_scans;
    r->evict_scanned = st->evict_scanned;
    r->chunk_bytes = st->chunk_bytes;
    r->ready_demand_p50_ns = st->ready_demand_p50_ns;
    r->ready_demand_p99_ns = st->ready_demand_p99_ns;
    r->ready_spec_p50_ns = st->ready_spec_p50_ns;
    r->ready_spec_p99_ns = st->ready_spec_p99_ns;
    r->freq_status = st->freq_status;
    r->prewarm_slots = st->prewarm_slots;
    r->prewarm_passes = st->prewarm_passes;
    r->prewarm_reads = st->prewarm_reads;
    r->prewarm_hits = st->prewarm_hits;
    r->hint_cancelled = st->hint_cancelled;
    if (st->slots)
        r->slots = (uint32_t)st->slots;
}

/* Reads and failures per copy of the vault. */
static void copy_replica_stats(smoe_stream *s, bench_result *r)
{
    smoe_replica_stats rs = SMOE_REPLICA_STATS_INIT;
    int n = smoe_get_replica_stats(s, 0, &rs);
    for (int i = 0; i < n && i < 16 && smoe_get_replica_stats(s, (uint32_t)i, &rs) > 0; i++) {
        r->copy_reads[i] = rs.reads;
        r->copy_failed[i] = rs.failed;
        r->copies = (uint64_t)i + 1;
    }
}

/* The stream of this run: r->slots slots, the mode's eviction policy. */
static smoe_stream *open_stream(const bench_env *env, bench_result *r)
{
    const bench_cfg *cfg = env->cfg;
    smoe_open_opts o;
    smoe_open_opts_init(&o);
    o.workers = cfg->workers;
    o.ring_slots = r->slots;
    o.flags = cfg->open_flags;
    o.verify = cfg->verify;
    o.chunk_bytes = cfg->chunk;
    o.eviction = r->mode == BENCH_SMOE_LRU     ? SMOE_EVICT_LRU
                 : r->mode == BENCH_SMOE_REUSE ? SMOE_EVICT_REUSE
                                               : cfg->eviction;
    o.top_k = env->trace.top_k;
    o.replicas = cfg->replicas.path;
    o.n_replicas = cfg->replicas.n;
    smoe_stream *s = NULL;
    int rc = smoe_open(cfg->vault, &o, &s);
    if (rc < 0) {
        snprintf(r->error, sizeof r->error, "smoe_open(%s, %u slots): %s: %s", cfg->vault,
                 (unsigned)r->slots, smoe_err_name(rc), smoe_last_error());
        return NULL;
    }
    return s;
}

/* smoe+recall=R's predictor: popularity from the replayed tokens' rows. */
static int pred_open(const bench_env *env, double recall, bench_pred *pred)
{
    const tool_trace *t = &env->trace;
    uint64_t *counts = calloc((size_t)env->layers * env->experts + 1, sizeof *counts);
    if (!counts)
        return -1;
    for (size_t row = 0; row < t->tok_row[env->n_tokens]; row++)
        for (uint32_t i = t->row_off[row]; i < t->row_off[row + 1]; i++)
            counts[(size_t)t->row_layer[row] * env->experts + t->ids[i]]++;
    int rc = bench_pred_init(pred, env->layers, env->experts, counts, recall,
                             0x5eed0000u + (uint64_t)(recall * 1000.0));
    free(counts);
    return rc;
}

void bench_run_smoe(const bench_env *env, int spec, uint64_t memory, bench_result *r)
{
    snprintf(r->hit_method, sizeof r->hit_method, "library");
    uint64_t slots = memory / env->slot_bytes;
    r->slots = slots > UINT32_MAX ? UINT32_MAX : (uint32_t)slots;
    smoe_stream *s = open_stream(env, r);
    if (!s)
        return;
    r->start_rss = tool_os_rss_now();
    if (env->cfg->idle_ms) {
        /* An engine between requests: idle, so pre-warm (when on) may load
         * the histogram's hottest experts; then busy for the replay, as an
         * engine is while it decodes. */
        (void)smoe_warmup(s, NULL);
        idle(env->cfg->idle_ms);
        (void)smoe_warmup_cancel(s);
        (void)smoe_set_busy(s, 1);
    }
    smoe_stats st0 = SMOE_STATS_INIT;
    if (smoe_get_stats(s, &st0) == 0) {
        r->prewarm_reads_idle = st0.prewarm_reads;
        r->warmup_loaded_idle = st0.warmup_loaded;
        r->warmup_bytes_idle = st0.warmup_bytes;
    }
    bench_clock c;
    int rc = -1;
    if (bench_clock_init(&c, env, bench_mode_name(r->mode)) < 0) {
        snprintf(r->error, sizeof r->error, "out of memory");
    } else {
        double u0, s0;
        tool_os_cpu(&u0, &s0);
        bench_pred pred = {0};
        int hinted = r->mode == BENCH_SMOE_HINT;
        if (hinted && pred_open(env, r->recall, &pred) < 0) {
            snprintf(r->error, sizeof r->error, "out of memory");
            bench_clock_finish(&c, r, u0, s0);
            smoe_close(s);
            return;
        }
        rc = replay(env, s, spec, hinted ? &pred : NULL, &c, r);
        bench_pred_free(&pred);
        bench_clock_finish(&c, r, u0, s0);
        /* busy stays set until close: clearing it would start a pre-warm
         * pass whose reads would count in the figures below */
        smoe_stats st = SMOE_STATS_INIT;
        if (smoe_get_stats(s, &st) == 0)
            copy_stats(&st, r);
        copy_replica_stats(s, r);
    }
    if (smoe_close(s) < 0 && !rc) {
        snprintf(r->error, sizeof r->error, "smoe_close: %s", smoe_last_error());
        rc = -1;
    }
    r->ok = rc == 0;
}
