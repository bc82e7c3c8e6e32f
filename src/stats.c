/* stats.c - smoe_get_stats: a near-instant snapshot of the counters. */
#include <string.h>

#include "error.h"
#include "sized.h"
#include "internal.h"
#include "fill/freq.h"
#include "fill/topup.h"
#include "fill/startup.h"
#include "policy/evict_reuse.h"

/* relaxed: statistics only, no ordering with anything */
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

SMOE_API int smoe_get_stats(smoe_stream *s, smoe_stats *st)
{
    if (!s || !st)
        return smoe__fail(SMOE_EINVAL, "get_stats: NULL argument");
    smoe_stats f;
    memset(&f, 0, sizeof f);
    f.struct_size = sizeof f;
    f.prefetch_demand = LOAD(s->c_prefetch_demand);
    f.prefetch_spec = LOAD(s->c_prefetch_spec);
    f.hits = LOAD(s->c_hits);
    f.joins = LOAD(s->c_joins);
    f.misses = LOAD(s->c_misses);
    f.spec_queued = LOAD(s->c_spec_queued);
    f.spec_skipped = LOAD(s->c_spec_skipped);
    f.spec_upgraded = LOAD(s->c_spec_upgraded);
    f.spec_cancelled = LOAD(s->c_spec_cancelled);
    f.spec_used = LOAD(s->c_spec_used);
    f.spec_wasted_bytes = LOAD(s->c_spec_wasted_bytes);
    f.full = LOAD(s->c_full);
    f.prefetch_hint = LOAD(s->c_prefetch_hint);
    f.hint_cancelled = LOAD(s->c_hint_cancelled);
    f.reads_done = LOAD(s->c_reads_done);
    f.reads_failed = LOAD(s->c_reads_failed);
    f.bytes_read = LOAD(s->c_bytes_read);
    f.evictions = LOAD(s->c_evictions);
    f.claims = LOAD(s->c_claims);
    f.claim_hits = LOAD(s->c_claim_hits);
    f.claim_waits = LOAD(s->c_claim_waits);
    f.claim_wait_ns = LOAD(s->c_claim_wait_ns);
    f.releases = LOAD(s->c_releases);
    f.slots = s->ring.nslots;
    f.slot_bytes = s->ring.stride;
    f.ring_bytes = s->ring.len;
    for (uint32_t v = 0; v < s->ring.nslots; v++) {
        uint64_t w = smoe__slot_peek(&s->ring, v);
        if (smoe__w_refs(w))
            f.slots_referenced++;
        switch (smoe__w_state(w)) {
        case SMOE__SLOT_EMPTY: f.slots_empty++; break;
        case SMOE__SLOT_LOADING: f.slots_loading++; break;
        case SMOE__SLOT_READY: f.slots_ready++; break;
        case SMOE__SLOT_CONSUMED: f.slots_retained += smoe__w_refs(w) == 0; break;
        case SMOE__SLOT_FAILED: f.slots_failed++; break;
        default: break;
        }
    }
    f.io_mode = (uint64_t)s->io_mode;
    f.verify = (uint64_t)s->verify;
    f.workers = s->nworkers;
    f.worker_parks = LOAD(s->c_worker_parks);
    f.worker_wakes = LOAD(s->c_worker_wakes);
    f.chunk_bytes = s->chunk;
    f.spec_chunk_bytes = s->spec_chunk;
    f.chunks_read = LOAD(s->c_chunks);
    f.eviction = s->eviction;
    f.evict_scans = LOAD(s->c_evict_scans);
    f.evict_scanned = LOAD(s->c_evict_scanned);
    if (s->reuse) {
        f.evict_rescored = LOAD(s->reuse->c_rescored);
        f.reuse_examples = LOAD(s->reuse->examples);
    }
    f.ready_demand_p50_ns = smoe__lat_quantile(&s->lat_demand, 0.50, &f.ready_demand);
    f.ready_demand_p99_ns = smoe__lat_quantile(&s->lat_demand, 0.99, NULL);
    f.ready_spec_p50_ns = smoe__lat_quantile(&s->lat_spec, 0.50, &f.ready_spec);
    f.ready_spec_p99_ns = smoe__lat_quantile(&s->lat_spec, 0.99, NULL);
    smoe__budget_stats(s, &f);
    smoe__freq_stats(s, &f);
    smoe__topup_stats(s, &f);
    smoe__startup_stats(s, &f);
    return smoe__sized_out(st, &f, sizeof f, sizeof(size_t), "get_stats", "smoe_stats");
}
