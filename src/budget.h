/*
 * budget.h - sizing the ring from the memory the machine can spare
 * (docs/budget.md).
 *
 * Pure arithmetic (budget.c) on the figures the platform's memory probe
 * reads (platform/mem.h), and smoe_open's use of both (budget_open.c).
 */
#ifndef SMOE_BUDGET_H
#define SMOE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "platform/mem.h"

struct smoe_stream;
struct smoe_open_opts;
struct smoe_stats;

/* The constants of docs/budget.md. */
#define SMOE__BUDGET_OVERHEAD (1ull << 30)      /* fixed engine overhead: 1 GiB */
#define SMOE__BUDGET_OS_FLOOR_MIN (4ull << 30)  /* OS floor: max(RAM / 8, 4 GiB) */
#define SMOE__BUDGET_OS_FLOOR_DIV 8u
#define SMOE__BUDGET_FALLBACK_PCT 25u           /* floor: 25% of free memory */
#define SMOE__BUDGET_MIN_SLOTS 64u
#define SMOE__BUDGET_MAX_SLOTS 4096u

/* ---- the computation -------------------------------------------------- */

typedef struct smoe__budget_in {
    uint64_t slot_bytes;     /* the slot stride (16 KiB multiple) */
    int have_mem;
    uint64_t mem_total, mem_available;
    uint64_t cg_room;        /* SMOE__NO_LIMIT: no container limit */
    uint64_t cg_limit, cg_usage; /* reported only */
    uint64_t scout_bytes, overhead_bytes, reserve_bytes;
    uint32_t layers;
    uint32_t vault_entries;  /* blobs in the vault: no use for more slots; 0: no cap */
    uint32_t top_k;          /* 0: unknown */
    uint32_t explicit_slots; /* 0: automatic */
} smoe__budget_in;

typedef struct smoe__budget {
    smoe__budget_in in;
    unsigned rules;          /* SMOE_BUDGET_* */
    uint64_t free_bytes;     /* min(mem_available, cg_room) */
    uint64_t os_floor;       /* max(mem_total / 8, 4 GiB) */
    uint64_t after[4];       /* free minus scout, overhead, reserve, floor (>= 0) */
    uint64_t budget_bytes;   /* after[3] */
    uint64_t slots_budget;   /* budget_bytes / slot_bytes */
    uint64_t slots_fallback; /* 25% of free / slot_bytes */
    uint64_t slots_cap;      /* cg_room / slot_bytes; UINT64_MAX: none */
    uint64_t step[4];        /* slots after the floor, the clamp, the cgroup cap and
                              * the vault cap */
    uint32_t slots;          /* the ring */
    uint64_t working_set;    /* layers x top_k; 0: unknown */
    int cliff;               /* slots < working_set */
} smoe__budget;

/*
 * Slots for the ring (docs/budget.md): explicit, or free memory minus the
 * scout file, the engine overhead, the engine's reserve and the OS floor,
 * divided by the slot size; then raised to the 25% fallback, clamped to
 * [64, 4096], capped at the container's room and at the vault's blob
 * count. Pure.
 * @return 0 (out filled, cliff set when the ring holds less than one
 * token's working set); SMOE_ESMALLRING when it holds less than one
 * layer's top-k (or no slot at all), with a message naming both counts.
 */
int smoe__budget_compute(const smoe__budget_in *in, smoe__budget *out);
/* Copy a probe's memory and cgroup figures into in. */
void smoe__budget_in_probe(smoe__budget_in *in, const smoe__mem_probe *p);

/* ---- the stream's use ------------------------------------------------- */

/*
 * smoe_open: choose the slot count for slot size `stride` from the options
 * (probing memory when ring_slots is 0), fail below one layer's top-k, log
 * the cliff. The result stays in s->budget for smoe_get_stats.
 */
int smoe__budget_open(struct smoe_stream *s, const struct smoe_open_opts *o,
                      uint64_t stride, uint32_t *nslots);
/* Copy the budget figures into a stats snapshot. */
void smoe__budget_stats(const struct smoe_stream *s, struct smoe_stats *st);

#endif
