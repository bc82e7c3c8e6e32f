/*
 * sim_rank.h - what the experts' histories are worth to any cache: the
 * requests it could hit holding, at each token boundary, the C experts
 * ranked most likely to be asked for next (see sim_rank.c).
 */
#ifndef SMOE_TOOL_SIM_RANK_H
#define SMOE_TOOL_SIM_RANK_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/*
 * Tokens [tok_begin, tok_end) of t (tok_end 0: to the last), in order.
 * hits[z] receives the bound for a cache of sizes[z] entries; *requests
 * the requests counted. @return 0, or -1 when out of memory.
 */
int simp_rank_bound(const tool_trace *t, size_t tok_begin, size_t tok_end,
                    const uint32_t *sizes, int n_sizes, uint64_t *hits, uint64_t *requests);

#endif
