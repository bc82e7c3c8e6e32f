/*
 * scheduler.h - the one structure every read goes through (scheduler.c): demand,
 * the verification hand-off, hinted speculation by band, plain
 * speculation, the idle top-up; and, below them all, the start-up fill's
 * shares. Classes and their order: scheduler_state.h.
 *
 * Producers reserve room in a class's queue before they take a slot
 * (smoe__mpmc_reserve; the verification hand-off needs none: one token
 * per slot at most, in a queue of nslots cells), push into it
 * (smoe__workers_enqueue), and the worker that pops a token returns its
 * room. Hot path: no lock, no allocation.
 */
#ifndef SMOE_SCHEDULER_H
#define SMOE_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler_state.h"

/* Allocate the queues: qcap cells for each reading class, nslots for the
 * hand-off. 0, or -1 (out of memory; what was allocated is freed by
 * smoe__sched_free). */
int smoe__sched_init(smoe__sched *sc, size_t qcap, uint32_t nslots);
void smoe__sched_free(smoe__sched *sc);

/* The class of hint band b (0 the least probable). */
static inline unsigned smoe__sched_hint_class(unsigned b)
{
    return SMOE__CL_HINT + (SMOE__HINT_BANDS - 1 - b);
}

static inline smoe__mpmc *smoe__sched_q(smoe__sched *sc, unsigned cl)
{
    return &sc->q[cl];
}

/*
 * The next token, from the first class in order that has one: its class,
 * or SMOE__CL_NONE. may_verify: the caller has no start-up fill share
 * left to read (else the hand-off class is passed over). The token's room
 * goes back to its queue. The start-up fill's class is the caller's to
 * try after SMOE__CL_NONE.
 */
unsigned smoe__sched_pop(smoe__sched *sc, int may_verify, smoe__req *rq);

#endif
