/*
 * topup.h - the idle top-up ("pre-warm" in the docs and the statistics):
 * while the engine is idle a thread streams the historically hottest
 * experts into the ring (see topup.c). Not the start-up fill (startup.h).
 */
#ifndef SMOE_TOPUP_H
#define SMOE_TOPUP_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fill/topup_state.h"

struct smoe_stream;
struct smoe_open_opts;
struct smoe_stats;

/* smoe_open, last step: start the thread unless disabled or the ring is
 * too small to leave the working set its reserve. */
int smoe__topup_start(struct smoe_stream *s, const struct smoe_open_opts *o);
/* Make the thread re-check busy and stop (smoe_shutdown), and wait until
 * it is not in the middle of issuing a prefetch. */
void smoe__topup_kick(struct smoe_stream *s, int wait_issuing);
/* Stop and join the thread (close), free its memory. Safe if never started. */
void smoe__topup_stop(struct smoe_stream *s);
void smoe__topup_stats(const struct smoe_stream *s, struct smoe_stats *st);

#endif
