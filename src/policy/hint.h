/*
 * hint.h - hinted speculation (hint.c, docs/eviction.md "Hints"): the
 * engine's probability that an expert is asked for at its layer's next
 * visit, kept per expert until that visit's demand arrives.
 *
 * Every field is a statistic or a queue: a racing hint costs a worse
 * victim choice or a read in a lower band, never a wrong slot move (those
 * stay slot.c's CASes). Accesses are relaxed (see each).
 */
#ifndef SMOE_HINT_H
#define SMOE_HINT_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "policy/hint_state.h"

struct smoe_stream;

/* Allocate the hint tables (s->vault set; the bands' queues are the
 * scheduler's, scheduler.h). 0 or SMOE_ENOMEM. */
int smoe__hint_init(struct smoe_stream *s);
void smoe__hint_free(struct smoe_stream *s);

/* Record a hint of key (of layer) with probability p (in [0, 1]). */
void smoe__hint_set(struct smoe_stream *s, uint32_t layer, uint32_t key, float p);

/* Cancel key's queued speculative read that no worker has started and no
 * demand prefetch pinned (smoe_cancel's body): 0, SMOE_ENOTRESIDENT or
 * SMOE_EBUSY, as smoe_cancel. */
int smoe__cancel_queued(struct smoe_stream *s, uint32_t key);

/* The band of probability p (in [0, 1]). */
static inline unsigned smoe__hint_band(float p)
{
    unsigned b = (unsigned)(p * (float)SMOE__HINT_BANDS);
    return b >= SMOE__HINT_BANDS ? SMOE__HINT_BANDS - 1 : b;
}

/* A demand prefetch of `layer` is being made: spend its hints, and settle
 * the hints of the layer before it (whose demand set is then complete):
 * cancel their reads that no worker has started and that no demand
 * prefetch joined. Lock-free, no allocation; O(experts) once per visit of
 * a hinted layer. */
void smoe__hint_demand(struct smoe_stream *s, uint32_t layer);

#endif
