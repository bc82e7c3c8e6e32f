/*
 * sim.h - offline cache simulators: what LRU and Belady's optimal policy
 * would hit on a trace with the same slot count as the ring.
 *
 * Counting matches the library's demand counters: a request for a key in
 * the cache is a hit, anything else a miss, and every miss is inserted
 * (the ring has no bypass: a read needs a slot), evicting one entry when
 * the cache is full. Offline there is no read in flight, so no joins.
 */
#ifndef SMOE_TOOL_SIM_H
#define SMOE_TOOL_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct sim_result {
    uint64_t requests;
    uint64_t hits;
    uint64_t misses;
} sim_result;

/*
 * Replay keys[0..n) (each < n_keys) through a cache of `slots` entries.
 * LRU evicts the least recently requested entry; OPT (Belady) evicts the
 * entry whose next request is farthest away, never-again first. LRU is
 * O(n), OPT O(n log slots) after an O(n) next-use pass.
 * @return 0, or -1 when out of memory.
 */
int sim_lru_keys(const uint32_t *keys, size_t n, uint32_t n_keys, uint32_t slots,
                 sim_result *out);
int sim_opt_keys(const uint32_t *keys, size_t n, uint32_t n_keys, uint32_t slots,
                 sim_result *out);

/*
 * The request sequence of a trace's first n_tokens tokens, in replay
 * order (tokens, then layers, then rank order): key = layer * experts +
 * expert. *out is malloc'ed; @return its length, 0 when out of memory.
 */
size_t sim_trace_keys(const tool_trace *t, size_t n_tokens, uint32_t **out);

#endif
