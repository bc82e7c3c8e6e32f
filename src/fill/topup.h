/*
 * prewarm.h - the pre-warm thread: while the engine is idle it streams the
 * historically hottest experts into the ring (see prewarm.c).
 */
#ifndef SMOE_PREWARM_H
#define SMOE_PREWARM_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fill/prewarm_state.h"

struct smoe_stream;
struct smoe_open_opts;
struct smoe_stats;

/* smoe_open, last step: start the thread unless disabled or the ring is
 * too small to leave the working set its reserve. */
int smoe__prewarm_start(struct smoe_stream *s, const struct smoe_open_opts *o);
/* Make the thread re-check busy and stop (smoe_shutdown), and wait until
 * it is not in the middle of issuing a prefetch. */
void smoe__prewarm_kick(struct smoe_stream *s, int wait_issuing);
/* Stop and join the thread (close), free its memory. Safe if never started. */
void smoe__prewarm_stop(struct smoe_stream *s);
void smoe__prewarm_stats(const struct smoe_stream *s, struct smoe_stats *st);

#endif
