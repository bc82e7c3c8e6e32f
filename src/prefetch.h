/* prefetch.h - the prefetch path, shared with claim_wait and pre-warm. */
#ifndef SMOE_PREFETCH_H
#define SMOE_PREFETCH_H

#include <stdint.h>

struct smoe_stream;

/*
 * Prefetch expert `key` (layer * experts + expert, already validated).
 * kflags: 0 for demand, SMOE__W_SPEC for speculative, SMOE__W_SPEC |
 * SMOE__W_TOPUP for pre-warm. Returns as smoe_prefetch.
 */
int smoe__prefetch_key(struct smoe_stream *s, uint32_t key, uint64_t kflags);
/* A demand prefetch of `key` of `layer`, with the eviction policy's
 * bookkeeping (a demand request teaches reuse, whoever makes it). */
int smoe__prefetch_demand(struct smoe_stream *s, uint32_t layer, uint32_t key);

#endif
