/*
 * startup.h - the start-up fill (the public smoe_warmup; "warm-up" in
 * the docs): fill the ring's empty slots at the drive's speed, one
 * contiguous share of the vault per worker (see startup.c). Not the idle
 * top-up (topup.h).
 */
#ifndef SMOE_STARTUP_H
#define SMOE_STARTUP_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mpmc.h"
#include "fill/startup_state.h"

struct smoe_stream;
struct smoe__worker;
struct smoe_stats;

/* Worker loop: the next warm-up token for this worker, if the warm-up
 * runs and its share has work: 1 with *slot, *gen. Cheap when none runs. */
int smoe__startup_next(struct smoe__worker *wk, uint32_t *slot, uint32_t *gen);
/* The worker ran the token (smoe__startup_next): took is 1 when it read a
 * chunk, landed as run_request's (worker.c): 0 chunks to go, 1 the load
 * published, 2 its verification handed to another worker. */
void smoe__startup_ran(struct smoe__worker *wk, int took, int landed);
/* Slot v's warm-up load (gen) has all its chunks landed and is to be
 * verified: queue its hashing for a worker without a share (a verify
 * token), with no wake-up (such workers poll while parked, see
 * smoe__startup_park_ns). 1 if queued; 0: hash it here. The warm-up does
 * not end before smoe__startup_verify_end. */
int smoe__startup_hand_verify(struct smoe_stream *s, uint32_t v, uint32_t gen);
/* May wk take the verification hand-off's tokens (scheduler.h): a start-up
 * fill runs and wk has no share of it left to read (1). */
int smoe__startup_may_verify(const struct smoe__worker *wk);
/* How long an idle worker parks: UINT64_MAX, or while a verified warm-up
 * runs and the worker has no share left, a short poll (so that handing
 * it a blob costs the reading worker no wake-up system call). */
uint64_t smoe__startup_park_ns(const struct smoe__worker *wk);
/* That worker published the load of key with err (0: READY): count it,
 * end the warm-up if it was the last thing running. */
void smoe__startup_verify_end(struct smoe_stream *s, uint32_t key, int err);
/* smoe_shutdown: wake smoe_warmup_wait callers. */
void smoe__startup_kick(struct smoe_stream *s);
/* close, after the workers are joined: free its memory. */
void smoe__startup_free(struct smoe_stream *s);
void smoe__startup_stats(const struct smoe_stream *s, struct smoe_stats *st);

#endif
