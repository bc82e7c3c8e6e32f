/*
 * slot.h - the packed slot word and the residency map entry.
 *
 * Every slot's whole state lives in one 64-bit word so that each transition
 * is a single compare-exchange: a claimer checks identity, state and
 * generation and takes its reference in the same CAS, and an evictor can
 * never slip between "it is READY" and "I hold a reference".
 *
 *   bits  0..2   state       EMPTY, LOADING, READY, CONSUMED, FAILED
 *   bit   3      DEMAND      a demand prefetch awaits its claim: pinned
 *   bit   4      STARTED     a worker has begun the read (LOADING only)
 *   bit   5      WAITERS     a claimer is parked on this word
 *   bit   6      SPEC        the read was speculative or pre-warm
 *   bit   7      PREWARM     the read was pre-warm
 *   bits  8..21  refs        references held by claims (max 16383)
 *   bits 22..43  key         layer * experts + expert (2^22 experts)
 *   bits 44..63  gen         bumped each time the slot takes a new key
 *
 * State machine (all moves are CAS on the word):
 *
 *   EMPTY ─reserve─► LOADING ─worker─► READY ─claim─► CONSUMED ─┐
 *                      ▲   └─worker─► FAILED                   │ refs 0:
 *                      └─────── evict (LRU, refs 0 only) ◄──────┘ retained
 *
 * A CONSUMED slot with refs 0 is retained: its data and key stay, and a
 * claim of the same key is a hit. FAILED keeps its key and error until a
 * prefetch of that key retries the read (LOADING, same slot, same gen) or
 * an evictor takes the slot. The low 32 bits hold state, flags and refs,
 * so a futex on them sees every state change.
 */
#ifndef SMOE_SLOT_H
#define SMOE_SLOT_H

#include <stdint.h>

enum {
    SMOE__EMPTY = 0,
    SMOE__LOADING = 1,
    SMOE__READY = 2,
    SMOE__CONSUMED = 3,
    SMOE__FAILED = 4
};

#define SMOE__W_STATE_MASK 0x7ull
#define SMOE__W_DEMAND (1ull << 3)
#define SMOE__W_STARTED (1ull << 4)
#define SMOE__W_WAITERS (1ull << 5)
#define SMOE__W_SPEC (1ull << 6)
#define SMOE__W_PREWARM (1ull << 7)
#define SMOE__W_REF_SHIFT 8
#define SMOE__W_REF_BITS 14
#define SMOE__W_REF_ONE (1ull << SMOE__W_REF_SHIFT)
#define SMOE__W_REF_MAX ((1u << SMOE__W_REF_BITS) - 1)
#define SMOE__W_KEY_SHIFT 22
#define SMOE__W_KEY_BITS 22
#define SMOE__W_GEN_SHIFT 44
#define SMOE__W_GEN_BITS 20

static inline unsigned smoe__w_state(uint64_t w) { return (unsigned)(w & SMOE__W_STATE_MASK); }
static inline uint32_t smoe__w_refs(uint64_t w)
{
    return (uint32_t)(w >> SMOE__W_REF_SHIFT) & SMOE__W_REF_MAX;
}
static inline uint32_t smoe__w_key(uint64_t w)
{
    return (uint32_t)(w >> SMOE__W_KEY_SHIFT) & ((1u << SMOE__W_KEY_BITS) - 1);
}
static inline uint32_t smoe__w_gen(uint64_t w)
{
    return (uint32_t)(w >> SMOE__W_GEN_SHIFT);
}
static inline uint64_t smoe__w_with_state(uint64_t w, unsigned state)
{
    return (w & ~SMOE__W_STATE_MASK) | state;
}
/* A fresh word for a slot that takes key: LOADING, no refs, gen+1. */
static inline uint64_t smoe__w_new_load(uint64_t old, uint32_t key, uint64_t flags)
{
    uint64_t gen = (smoe__w_gen(old) + 1) & ((1u << SMOE__W_GEN_BITS) - 1);
    return SMOE__LOADING | flags | ((uint64_t)key << SMOE__W_KEY_SHIFT) |
           (gen << SMOE__W_GEN_SHIFT);
}

/*
 * Residency map entry, one per (layer, expert): NONE, PENDING (a prefetch
 * is choosing a slot for it), or (slot, gen) of the slot that holds or
 * loads it. The gen tag makes a stale entry recognisable forever (a slot
 * only changes key with a new gen), so clearing one by CAS cannot hit an
 * entry that was re-pointed at the same slot later (ABA).
 */
#define SMOE__MAP_NONE 0ull
#define SMOE__MAP_PENDING 1ull
static inline uint64_t smoe__map_make(uint32_t slot, uint32_t gen)
{
    return ((uint64_t)gen << 32) | ((uint64_t)slot + 2);
}
static inline uint32_t smoe__map_slot(uint64_t m) { return (uint32_t)m - 2; }
static inline uint32_t smoe__map_gen(uint64_t m) { return (uint32_t)(m >> 32); }

#endif
