/*
 * scheduler_state.h - the scheduler's queues (scheduler.h): one structure for
 * every producer of reads, embedded in struct smoe_stream; plain data
 * below internal.h.
 *
 * Workers serve the classes in the order of this enum: a class is looked
 * at only when every class above it is empty. Within a class, tokens are
 * served first in, first out (the queues of mpmc.h).
 */
#ifndef SMOE_SCHEDULER_STATE_H
#define SMOE_SCHEDULER_STATE_H

#include "mpmc.h"
#include "policy/hint_state.h"

enum {
    /* chunks of loads a demand prefetch waits on (and upgrades) */
    SMOE__CL_DEMAND = 0,
    /* hashing a start-up fill load another worker read (the verification
     * hand-off): served only by workers with no fill share left, so the
     * fill's readers keep streaming; ahead of speculation so that the
     * fill's end never waits on it */
    SMOE__CL_VERIFY,
    /* hinted speculation, SMOE__HINT_BANDS classes, the most probable band
     * first (smoe__sched_hint_class) */
    SMOE__CL_HINT,
    /* plain speculation (smoe_prefetch_spec) */
    SMOE__CL_SPEC = SMOE__CL_HINT + SMOE__HINT_BANDS,
    /* the idle top-up ("pre-warm", topup.c) */
    SMOE__CL_TOPUP,
    SMOE__CL_QUEUES,
    /* below every queue: a chunk of the worker's own start-up fill share
     * (startup.c), which is a cursor, not a queue */
    SMOE__CL_FILL = SMOE__CL_QUEUES,
    SMOE__CL_NONE
};

typedef struct smoe__sched {
    smoe__mpmc q[SMOE__CL_QUEUES];
} smoe__sched;

#endif
