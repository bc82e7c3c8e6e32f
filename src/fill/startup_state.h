/*
 * startup_state.h - the start-up fill's state (startup.h), embedded in struct
 * smoe_stream: plain data below internal.h, so that the stream object
 * includes no header of the code that runs on it.
 */
#ifndef SMOE_STARTUP_STATE_H
#define SMOE_STARTUP_STATE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mpmc.h"

/*
 * A share's cursor, one word its worker alone moves once the warm-up runs:
 *   bits  0..30  end      one past its last entry of the read order
 *   bits 32..62  next     its next entry
 *   bit   63     FINISHED the worker is done with it (counted off `active`)
 */
#define SMOE__STARTUP_FINISHED (1ull << 63)

typedef struct smoe__startup_share {
    alignas(64) _Atomic uint64_t cur;
    /* the load in progress (worker-owned): slot, gen, key; have: 1 if any */
    uint32_t slot, gen, key;
    int have;
} smoe__startup_share;

/* state: IDLE -> STARTING (one smoe_warmup call) -> RUNNING -> IDLE; CANCEL
 * is set on RUNNING by smoe_warmup_cancel. */
enum { SMOE__STARTUP_IDLE = 0, SMOE__STARTUP_STARTING = 1, SMOE__STARTUP_RUNNING = 2, SMOE__STARTUP_CANCEL = 4 };

typedef struct smoe__startup {
    uint32_t *order;             /* the chosen keys in read order (freq.n room) */
    smoe__startup_share *share;   /* nworkers */
    _Atomic uint32_t nshares;    /* shares of this warm-up */
    alignas(64) _Atomic uint32_t state;
    _Atomic uint32_t active;     /* shares not FINISHED, plus verifications handed off */
    _Atomic uint32_t done_seq;   /* waiters park here; bumped at the end */
    _Atomic uint64_t t_start, t_end;
    _Atomic uint64_t c_experts;
    alignas(64) _Atomic uint64_t c_loaded, c_failed, c_bytes; /* written by workers */
} smoe__startup;

#endif
