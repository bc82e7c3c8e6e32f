/*
 * load.h - beginning a load in a slot (load.c): one path for the loads
 * the scheduler's queues carry (prefetch.c) and for the start-up fill's
 * (startup.c).
 */
#ifndef SMOE_LOAD_H
#define SMOE_LOAD_H

#include <stdint.h>

struct smoe_stream;

/* Slot v (word w before, now reserved for key at gen) holds key's new
 * load: the previous owner's map entry and figures go, a claimer parked
 * on its word looks again, key's map entry points here. */
void smoe__load_install(struct smoe_stream *s, uint32_t key, uint32_t v, uint64_t w,
                        uint32_t gen);

/* A start-up fill load of `key` (startup.c), the same load as a prefetch's
 * but into an EMPTY slot only (the fill never evicts) and armed in
 * demand-sized chunks with no tokens: the caller reads them from its
 * share, below every class of the scheduler. 1 (armed: *v, *gen), 0
 * (resident or in flight already), -1 (no EMPTY slot left). */
int smoe__load_fill(struct smoe_stream *s, uint32_t key, uint32_t *v, uint32_t *gen);

#endif
