/*
 * topup_state.h - the idle top-up's state (topup.h), embedded in
 * struct smoe_stream: plain data below internal.h, so that the stream
 * object includes no header of the code that runs on it.
 */
#ifndef SMOE_TOPUP_STATE_H
#define SMOE_TOPUP_STATE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

/* Slots kept for the live working set: pre-warm never fills them. */
#define SMOE__TOPUP_RESERVE_MIN 128u
#define SMOE__TOPUP_RESERVE_DIV 4u
#define SMOE__TOPUP_PAUSE_US 4000u
/* Consecutive prefetches that found no room before a pass gives up. */
#define SMOE__TOPUP_MAX_SKIPS 16u

typedef struct smoe__topup_item {
    uint64_t count;
    uint32_t key;
} smoe__topup_item;

typedef struct smoe__topup {
    pthread_t thread;
    int started;
    uint32_t cap;               /* most slots pre-warm fills; 0: no thread */
    uint64_t pause_ns;          /* between two pre-warm reads */
    smoe__topup_item *order;  /* the pass's keys, hottest first (thread-owned) */
    /* The thread parks on seq; smoe_set_busy, smoe_shutdown and close bump
     * it and wake the thread. */
    alignas(64) _Atomic uint32_t seq;
    atomic_int issuing;         /* set around each busy check + prefetch */
    atomic_int quit;            /* close: leave now */
    _Atomic uint64_t floor;     /* LRU clock when the current pass began */
    _Atomic uint64_t c_reads, c_passes;  /* written by the pre-warm thread */
    alignas(64) _Atomic uint64_t c_hits; /* written by claimers */
} smoe__topup;

#endif
