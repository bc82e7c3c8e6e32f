/*
 * evict_reuse.h - the state of the `reuse` eviction policy (evict_reuse.c,
 * docs/eviction.md); its arithmetic is evict_reuse_model.h.
 *
 * Every field is a statistic: a stale or racing value makes a worse
 * victim choice, never a wrong one, because a slot is still taken by one
 * CAS on its word from the exact value the scan saw (prefetch.c). All
 * accesses are relaxed and every record is one 64-bit word, so a reader
 * never sees half of an update.
 */
#ifndef SMOE_EVICT_REUSE_H
#define SMOE_EVICT_REUSE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "policy/evict_reuse_model.h"

struct smoe_stream;

typedef struct smoe__reuse {
    uint32_t layers, experts, nslots;
    /* per expert (layer * experts + expert) */
    _Atomic uint64_t *f;      /* decayed use count (double bits) */
    _Atomic uint64_t *use;    /* last visit of its layer at its last use << 8 | hist */
    /* per layer */
    _Atomic uint32_t *visits; /* visits so far */
    _Atomic uint64_t *began;  /* the visit clock when its latest visit began */
    /* per slot */
    _Atomic uint64_t *score;  /* cached q (float bits) and what it was computed for */
    double *dpow;             /* decay^n for n < SMOE__REUSE_POW_N; read-only after init */

    alignas(64) _Atomic uint32_t cur; /* layer of the visit under way; UINT32_MAX: none */
    _Atomic uint64_t vclock;          /* visits begun, all layers */
    _Atomic uint64_t period;          /* visits between two of one layer, average (double bits) */
    _Atomic uint64_t qv;              /* victims' q, moving average (double bits) */

    alignas(64) _Atomic uint64_t w[SMOE__REUSE_W]; /* learning (double bits) */
    _Atomic uint64_t ws[SMOE__REUSE_W];            /* scans' snapshot of w */
    _Atomic uint32_t epoch;                        /* snapshots taken */
    _Atomic uint64_t examples;                     /* examples learned from */

    /* statistics */
    alignas(64) _Atomic uint64_t c_rescored; /* scores recomputed by scans */
} smoe__reuse;

/* Allocate the state for s (s->vault and s->ring are set). 0 or SMOE_ENOMEM. */
int smoe__reuse_init(struct smoe_stream *s);
void smoe__reuse_free(smoe__reuse *r);

/* A demand prefetch of `layer` is about to be made: the visit under way
 * may change. */
void smoe__reuse_visit(smoe__reuse *r, uint32_t layer);
/* Expert key of layer `layer` was asked for by a demand prefetch (hit or
 * miss): learn from it and update its record. */
void smoe__reuse_use(smoe__reuse *r, uint32_t key, uint32_t layer);
/* Slot v changed key or its expert was used: its cached score is stale. */
static inline void smoe__reuse_forget(smoe__reuse *r, uint32_t v)
{
    /* relaxed: a cache of a statistic (see the top of this file) */
    atomic_store_explicit(&r->score[v], 0, memory_order_relaxed);
}
/* The keep value of slot v, holding key: the victim has the lowest. *q
 * receives the slot's q (for smoe__reuse_victim). */
double smoe__reuse_keep(smoe__reuse *r, uint32_t v, uint32_t key, float *q);
/* A speculative read of an expert with a history whose q is below this is
 * not worth its bandwidth: on a busy disk a wasted read delays demand as
 * much as a useful one saves. 0.6 measured best of 0.5, 0.6 and 0.7
 * (docs/eviction.md, "Speculation"). */
#define SMOE__REUSE_SPEC_MIN_Q 0.6f
/* The keep value key would have in a slot now (computed, not cached): what
 * a speculative load of key must beat to take an occupied slot; *q its q.
 * An expert never asked for has no history to judge: *q is 1 and its keep
 * 0, so it may take EMPTY and FAILED slots and entries ranked below 0
 * (those whose layer is far off). */
double smoe__reuse_keep_key(smoe__reuse *r, uint32_t key, float *q);
/* The keep value key would have with q given (an engine's hint, hint.c)
 * in place of its learned q. */
double smoe__reuse_keep_q(smoe__reuse *r, uint32_t key, float q);
/* A scan chose a victim whose q was q. */
void smoe__reuse_victim(smoe__reuse *r, float q);

#endif
