/*
 * bench_smoe.c - the `smoe` mode: replay the trace through the library.
 *
 * Per token and layer: demand-prefetch the layer's routed experts, then
 * (optionally) issue speculative prefetches, claim each expert (waiting),
 * simulate compute, release. Hits, joins and misses come from the demand
 * prefetch's status, the same way the offline simulators count them.
 *
 * With --idle-ms the library is left idle that long after open (pre-warm,
 * when on, runs then) and marked busy (smoe_set_busy) for the replay, as
 * an engine marks the time it decodes; without it busy is never set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smoe/smoe.h"
#include "bench.h"
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

static int replay(const bench_env *env, smoe_stream *s, int spec, bench_clock *c,
                  bench_result *r)
{
    const bench_cfg *cfg = env->cfg;
    const tool_trace *t = &env->trace;
    smoe_blob blobs[TRACE_MAX_K];
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
            uint32_t layer = t->row_layer[row];
            const uint32_t *e = &t->ids[t->row_off[row]];
            uint32_t k = t->row_off[row + 1] - t->row_off[row];
            cur_row[layer] = row;
            for (uint32_t i = 0; i < k; i++) {
                int st = demand(s, layer, e[i], r);
                if (st == SMOE_RESIDENT)
                    r->hits++;
                else if (st == SMOE_INFLIGHT)
                    r->joins++;
                else if (st == SMOE_QUEUED)
                    r->misses++;
                else {
                    rc = fail(r, "smoe_prefetch", layer, e[i], st);
                    break;
                }
                r->bytes_requested += env->blobs[(size_t)layer * env->experts + e[i]].padded;
            }
            r->requests += k;
            c->requests += k;
            if (rc)
                break;
            if (spec && cfg->spec) {
                uint32_t m = t->spec_off[row + 1] - t->spec_off[row];
                if (m > cfg->spec)
                    m = cfg->spec;
                for (uint32_t i = 0; i < m; i++) {
                    (void)smoe_prefetch(s, layer, t->spec[t->spec_off[row] + i],
                                        SMOE_PREFETCH_SPECULATIVE);
                    r->spec_issued++;
                }
            }
            if (spec && cfg->spec_next_layer && layer + 1 < env->layers &&
                prev_row[layer + 1] != SIZE_MAX) {
                size_t pr = prev_row[layer + 1];
                for (uint32_t i = t->row_off[pr]; i < t->row_off[pr + 1]; i++) {
                    (void)smoe_prefetch(s, layer + 1, t->ids[i], SMOE_PREFETCH_SPECULATIVE);
                    r->spec_issued++;
                }
            }
            uint64_t t0 = tool_now_ns();
            uint32_t held = 0;
            for (uint32_t i = 0; i < k; i++) {
                int st = smoe_claim_wait(s, layer, e[i], CLAIM_TIMEOUT_NS, &blobs[i]);
                if (st < 0) {
                    rc = fail(r, "smoe_claim_wait", layer, e[i], st);
                    break;
                }
                held++;
            }
            wait += tool_now_ns() - t0;
            bench_spin_us(cfg->compute_us);
            for (uint32_t i = 0; i < held; i++)
                (void)smoe_release(s, &blobs[i]);
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

void bench_run_smoe(const bench_env *env, int spec, uint64_t memory, bench_result *r)
{
    const bench_cfg *cfg = env->cfg;
    snprintf(r->hit_method, sizeof r->hit_method, "library");
    uint64_t slots = memory / env->slot_bytes;
    if (slots > UINT32_MAX)
        slots = UINT32_MAX;
    r->slots = (uint32_t)slots;
    smoe_open_opts o;
    smoe_open_opts_init(&o);
    o.workers = cfg->workers;
    o.ring_slots = (uint32_t)slots;
    o.flags = cfg->open_flags;
    o.verify = cfg->verify;
    o.chunk_bytes = cfg->chunk;
    o.eviction = r->mode == BENCH_SMOE_LRU     ? SMOE_EVICT_LRU
                 : r->mode == BENCH_SMOE_REUSE ? SMOE_EVICT_REUSE
                                               : cfg->eviction;
    o.top_k = env->trace.top_k;
    smoe_stream *s = NULL;
    int rc = smoe_open(cfg->vault, &o, &s);
    if (rc < 0) {
        snprintf(r->error, sizeof r->error, "smoe_open(%s, %u slots): %s: %s", cfg->vault,
                 (unsigned)slots, smoe_err_name(rc), smoe_last_error());
        return;
    }
    r->start_rss = bench_rss_now();
    if (cfg->idle_ms) {
        /* An engine between requests: idle, so pre-warm (when on) may load
         * the histogram's hottest experts; then busy for the replay, as an
         * engine is while it decodes. */
        idle(cfg->idle_ms);
        (void)smoe_set_busy(s, 1);
    }
    smoe_stats st0 = SMOE_STATS_INIT;
    if (smoe_get_stats(s, &st0) == 0)
        r->prewarm_reads_idle = st0.prewarm_reads;
    bench_clock c;
    if (bench_clock_init(&c, env, bench_mode_name(r->mode)) < 0) {
        snprintf(r->error, sizeof r->error, "out of memory");
        smoe_close(s);
        return;
    }
    double u0, s0;
    bench_cpu_now(&u0, &s0);
    rc = replay(env, s, spec, &c, r);
    bench_clock_finish(&c, r, u0, s0);
    /* busy stays set until close: clearing it would start a pre-warm pass
     * whose reads would count in the figures below */

    smoe_stats st = SMOE_STATS_INIT;
    if (smoe_get_stats(s, &st) == 0) {
        r->bytes_read = st.bytes_read;
        r->io_mode = st.io_mode;
        r->verify = st.verify;
        r->workers = st.workers;
        r->claim_waits = st.claim_waits;
        r->spec_queued = st.spec_queued;
        r->spec_skipped = st.spec_skipped;
        r->spec_used = st.spec_used;
        r->spec_wasted_bytes = st.spec_wasted_bytes;
        r->spec_upgraded = st.spec_upgraded;
        r->spec_cancelled = st.spec_cancelled;
        r->evictions = st.evictions;
        r->eviction = st.eviction;
        r->evict_scans = st.evict_scans;
        r->evict_scanned = st.evict_scanned;
        r->chunk_bytes = st.chunk_bytes;
        r->ready_demand_p50_ns = st.ready_demand_p50_ns;
        r->ready_demand_p99_ns = st.ready_demand_p99_ns;
        r->ready_spec_p50_ns = st.ready_spec_p50_ns;
        r->ready_spec_p99_ns = st.ready_spec_p99_ns;
        r->freq_status = st.freq_status;
        r->prewarm_slots = st.prewarm_slots;
        r->prewarm_passes = st.prewarm_passes;
        r->prewarm_reads = st.prewarm_reads;
        r->prewarm_hits = st.prewarm_hits;
        if (st.slots)
            r->slots = (uint32_t)st.slots;
    }
    if (smoe_close(s) < 0 && !rc) {
        snprintf(r->error, sizeof r->error, "smoe_close: %s", smoe_last_error());
        rc = -1;
    }
    r->ok = rc == 0;
}
