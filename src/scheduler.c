/*
 * scheduler.c - the workers' one way to their next token (scheduler.h).
 *
 * Demand first, always: a worker looks at a lower class only when every
 * class above it is empty, so demand waits at most one chunk per worker
 * behind other work (speculative and top-up loads are armed in small
 * chunks: internal.h). A demand prefetch that joins a speculative load
 * queues its chunks again as demand (prefetch.c, upgrade); a chunk is
 * handed out once per arming (slot.c), so the lower-class tokens left
 * behind find nothing and cost one failed start.
 */
#include "scheduler.h"

int smoe__sched_init(smoe__sched *sc, size_t qcap, uint32_t nslots)
{
    int fail = 0;
    for (unsigned c = 0; c < SMOE__CL_QUEUES; c++)
        fail |= smoe__mpmc_init(&sc->q[c], c == SMOE__CL_VERIFY ? nslots : qcap);
    return fail ? -1 : 0;
}

void smoe__sched_free(smoe__sched *sc)
{
    for (unsigned c = 0; c < SMOE__CL_QUEUES; c++)
        smoe__mpmc_free(&sc->q[c]);
}

unsigned smoe__sched_pop(smoe__sched *sc, int may_verify, smoe__req *rq)
{
    for (unsigned c = 0; c < SMOE__CL_QUEUES; c++) {
        if (c == SMOE__CL_VERIFY && !may_verify)
            continue;
        if (!smoe__mpmc_pop(&sc->q[c], rq))
            continue;
        /* The hand-off's pushes reserve no room (scheduler.h). */
        if (c != SMOE__CL_VERIFY)
            smoe__mpmc_unreserve(&sc->q[c], 1);
        return c;
    }
    return SMOE__CL_NONE;
}
