/*
 * slot.h - the packed slot word and the residency map entry.
 *
 * Every slot's whole state lives in one 64-bit word so that each transition
 * is a single compare-exchange: a claimer checks identity, state and
 * generation and takes its reference in the same CAS, and an evictor can
 * never slip between "it is READY" and "I hold a reference".
 *
 *   bits  0..2   state       EMPTY, LOADING, READY, CONSUMED, FAILED
 *   bit   3      STARTED     not cancellable: reserved and not armed yet, or
 *                            a worker took a chunk (LOADING only)
 *   bit   4      WAITERS     a claimer is parked on this word
 *   bit   5      SPEC        the read was speculative or pre-warm
 *   bit   6      PREWARM     the read was pre-warm
 *   bits  7..13  pins        demand prefetches awaiting their claim (max 127):
 *                            a slot with pins is never evicted
 *   bits 14..21  refs        references held by claims (max 255)
 *   bits 22..43  key         layer * experts + expert (2^22 experts)
 *   bits 44..63  gen         bumped each time the slot takes a new key
 *
 * State machine (all moves are CAS on the word):
 *
 *   EMPTY ─reserve─► LOADING ─worker─► READY ─claim─► CONSUMED ─┐
 *                      ▲   └─worker─► FAILED                   │ refs 0:
 *                      └─────── evict (idle: no refs, no pins) ◄┘ retained
 *
 * A CONSUMED slot with refs 0 is retained: its data and key stay, and a
 * claim of the same key is a hit. FAILED keeps its key and error until a
 * prefetch of that key retries the read (LOADING, same slot, same gen, a
 * new arming: see chunk_next below) or an evictor takes the slot. Each
 * demand prefetch adds a pin and each claim (that takes a reference, or
 * reports a failed read) removes one, if any: every demand prefetch is
 * honoured by one claim. The low 32 bits hold state, flags, pins and refs,
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
#define SMOE__W_STARTED (1ull << 3)
#define SMOE__W_WAITERS (1ull << 4)
#define SMOE__W_SPEC (1ull << 5)
#define SMOE__W_PREWARM (1ull << 6)
#define SMOE__W_PIN_SHIFT 7
#define SMOE__W_PIN_BITS 7
#define SMOE__W_PIN_ONE (1ull << SMOE__W_PIN_SHIFT)
#define SMOE__W_PIN_MAX ((1u << SMOE__W_PIN_BITS) - 1)
#define SMOE__W_REF_SHIFT 14
#define SMOE__W_REF_BITS 8
#define SMOE__W_REF_ONE (1ull << SMOE__W_REF_SHIFT)
#define SMOE__W_REF_MAX ((1u << SMOE__W_REF_BITS) - 1)
#define SMOE__W_KEY_SHIFT 22
#define SMOE__W_KEY_BITS 22
#define SMOE__W_GEN_SHIFT 44
#define SMOE__W_GEN_BITS 20

static inline unsigned smoe__w_state(uint64_t w) { return (unsigned)(w & SMOE__W_STATE_MASK); }
static inline uint32_t smoe__w_pins(uint64_t w)
{
    return (uint32_t)(w >> SMOE__W_PIN_SHIFT) & SMOE__W_PIN_MAX;
}
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
/* A fresh word for a slot that takes key: LOADING, no refs, gen+1; flags
 * may carry one pin (SMOE__W_PIN_ONE). */
static inline uint64_t smoe__w_new_load(uint64_t old, uint32_t key, uint64_t flags)
{
    uint64_t gen = (smoe__w_gen(old) + 1) & ((1u << SMOE__W_GEN_BITS) - 1);
    return SMOE__LOADING | flags | ((uint64_t)key << SMOE__W_KEY_SHIFT) |
           (gen << SMOE__W_GEN_SHIFT);
}

/*
 * chunk_next (src/worker.c): the arming whose chunks are being handed out,
 * the size they are read in, and the next chunk to hand out.
 *
 *   bits  0..31  next chunk index
 *   bit   32     SPEC_CHUNK  chunks of s->spec_chunk bytes, else s->chunk
 *   bits 33..43  attempt     bumped by each re-arming under the same gen
 *                            (the retry of a failed read)
 *   bits 44..63  gen         the load's gen, as in the slot word
 *
 * A worker takes chunk i by one CAS from the exact value it read, and
 * derives the chunk's offset and length from that value alone: no arming
 * shares a value with another (gen, attempt), and the size is not read from
 * a separate field that a re-arming could change between its load and its
 * CAS.
 */
#define SMOE__CN_SPEC_CHUNK (1ull << 32)
#define SMOE__CN_ATTEMPT_SHIFT 33
#define SMOE__CN_ATTEMPT_BITS 11
static inline uint32_t smoe__cn_index(uint64_t c) { return (uint32_t)c; }
static inline uint32_t smoe__cn_attempt(uint64_t c)
{
    return (uint32_t)(c >> SMOE__CN_ATTEMPT_SHIFT) & ((1u << SMOE__CN_ATTEMPT_BITS) - 1);
}
static inline uint32_t smoe__cn_gen(uint64_t c) { return (uint32_t)(c >> SMOE__W_GEN_SHIFT); }
/* The first value of an arming: chunk 0 of (gen, attempt). */
static inline uint64_t smoe__cn_make(uint32_t gen, uint32_t attempt, int spec_chunk)
{
    return ((uint64_t)gen << SMOE__W_GEN_SHIFT) |
           ((uint64_t)(attempt & ((1u << SMOE__CN_ATTEMPT_BITS) - 1)) << SMOE__CN_ATTEMPT_SHIFT) |
           (spec_chunk ? SMOE__CN_SPEC_CHUNK : 0);
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
