/*
 * slot.h - a slot's shared state: the packed slot word, the chunk counter
 * of the load in progress, the residency map entry, the failed load's
 * record, and the ring that holds them for every slot; and the slot
 * protocol's functions (slot.c), the only code that changes any of them.
 * The state machine, its invariants and each transition's memory orders
 * are at the top of slot.c.
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
 * The low 32 bits hold state, flags, pins and refs, so a futex on them
 * sees every state change.
 */
#ifndef SMOE_SLOT_H
#define SMOE_SLOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "platform/region.h"

/* A slot word's state (its low 3 bits). */
typedef enum smoe__slot_state {
    SMOE__SLOT_EMPTY = 0,
    SMOE__SLOT_LOADING = 1,
    SMOE__SLOT_READY = 2,
    SMOE__SLOT_CONSUMED = 3,
    SMOE__SLOT_FAILED = 4
} smoe__slot_state;

#define SMOE__W_STATE_MASK 0x7ull
#define SMOE__W_STARTED (1ull << 3)
#define SMOE__W_WAITERS (1ull << 4)
#define SMOE__W_SPEC (1ull << 5)
#define SMOE__W_TOPUP (1ull << 6)
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

static inline smoe__slot_state smoe__w_state(uint64_t w)
{
    return (smoe__slot_state)(w & SMOE__W_STATE_MASK);
}
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
    return SMOE__SLOT_LOADING | flags | ((uint64_t)key << SMOE__W_KEY_SHIFT) |
           (gen << SMOE__W_GEN_SHIFT);
}

/*
 * chunk_next: the arming whose chunks are being handed out,
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
/* The arming of c: its gen and attempt (31 bits), which tag the load's
 * error and fault record. */
static inline uint32_t smoe__cn_arming(uint64_t c)
{
    return (uint32_t)(c >> SMOE__CN_ATTEMPT_SHIFT);
}
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

/*
 * ring.err[v]: the error of slot v's load and the arming it belongs to.
 *
 *   bits  0..31  the error (a negative SMOE_E*), 0 while none
 *   bits 32..62  the arming (smoe__cn_arming): each arming stores its own
 *                tag with 0, and only a worker of that arming sets the
 *                error, by a CAS from exactly that value
 *
 * A claimer that read a FAILED word checks that the error is of that
 * word's gen (the same expert: a slot changes expert only with a new gen)
 * and that the fault record carries the same arming (slot.c).
 */
static inline uint64_t smoe__err_make(uint32_t arming, int err)
{
    return (uint64_t)arming << 32 | (uint32_t)err;
}
static inline int smoe__err_code(uint64_t e) { return (int)(int32_t)(uint32_t)e; }
static inline uint32_t smoe__err_arming(uint64_t e) { return (uint32_t)(e >> 32); }
static inline uint32_t smoe__arming_gen(uint32_t arming)
{
    return arming >> SMOE__CN_ATTEMPT_BITS;
}

/* What a FAILED slot's message adds to its error (fault_text.c). */
enum {
    SMOE__FAULT_NONE = 0, /* nothing (a shutdown) */
    SMOE__FAULT_READ,     /* the read: where, how much, errno, attempts, which copy */
    SMOE__FAULT_PADDING,  /* the padding is not zero: off is its first such byte; copy: the
                             copies where it is not */
    SMOE__FAULT_CHECKSUM  /* the hash does not match; copy: the copies read alone whose
                             bytes do not match */
};

/* Why slot v's load failed, next to ring.err[v]: written by the worker
 * that sets the error, read by a claimer that sees FAILED. seq tags the
 * record with its arming (SMOE__FAULT_SEQ_VALID | arming), 0 while it is
 * being written: a claimer copies the seven fields between two reads of seq
 * and keeps the copy only when both are its error's arming (a seqlock,
 * slot.c), so that a copy never mixes two failures. */
#define SMOE__FAULT_SEQ_VALID 0x80000000u
typedef struct smoe__slot_fault {
    _Atomic uint32_t seq;   /* SMOE__FAULT_SEQ_VALID | arming, or 0 */
    _Atomic uint32_t what;  /* SMOE__FAULT_* */
    _Atomic int eno;        /* smoe__io_fail's fields */
    _Atomic uint32_t tries;
    _Atomic uint64_t off;
    _Atomic uint64_t len;
    _Atomic uint32_t file;
    _Atomic uint32_t copy;
} smoe__slot_fault;

/* A copy of one, taken by the claimer. */
typedef struct smoe__fault {
    uint32_t what;
    smoe__io_fail io;
} smoe__fault;

/* The ring: one region, slot words and LRU ticks in dense arrays so a
 * victim scan reads a few compact cache lines per 8 slots (ring.c). */
typedef struct smoe__ring {
    uint8_t *base;       /* 16 KiB-aligned: mem.base */
    uint64_t len;        /* nslots * stride */
    uint64_t stride;     /* multiple of 16 KiB */
    uint32_t nslots;
    smoe__region mem;    /* the mapping (platform/region.h) */
    _Atomic uint64_t *word;  /* nslots: the packed slot words */
    _Atomic uint64_t *tick;  /* nslots: last-use tick, for LRU */
    _Atomic uint64_t *err;   /* nslots: the load's error and arming (smoe__err_make) */
    smoe__slot_fault *fault; /* nslots: why, for the claimer's message */
    /* Chunked reads of the load in progress: */
    _Atomic uint64_t *chunk_next; /* nslots: arming, chunk size, next chunk (above) */
    _Atomic uint32_t *chunk_left; /* nslots: chunks not yet landed */
    _Atomic uint64_t *t_queued;   /* nslots: when the load was asked for (ns) */
} smoe__ring;

/* Slot v's word, for a decision the caller may act on: acquire, pairs with
 * the release CAS that last changed the word (a release by a claimer, a
 * publication by a worker), so the slot is seen with its readers done. */
static inline uint64_t smoe__slot_word(const smoe__ring *r, uint32_t v)
{
    return atomic_load_explicit(&r->word[v], memory_order_acquire);
}

/* Slot v's word, to count, rank or poll only (statistics, pre-warm's
 * headroom): relaxed, nothing is read through it. */
static inline uint64_t smoe__slot_peek(const smoe__ring *r, uint32_t v)
{
    return atomic_load_explicit(&r->word[v], memory_order_relaxed);
}

/* ---- the slot protocol (slot.c) ---------------------------------------- */

struct smoe_stream;

/* Every slot EMPTY, no error, no arming (the ring's arrays just allocated). */
void smoe__slots_init(smoe__ring *r);

/* n map entries, every one NONE (the map just allocated). */
void smoe__map_init(_Atomic uint64_t *map, size_t n);
/* The residency map entry of key: NONE, PENDING, or (slot, gen). Inline:
 * every prefetch and claim makes it. */
static inline uint64_t smoe__map_lookup(_Atomic uint64_t *map, uint32_t key)
{
    /* acquire: [M] */
    return atomic_load_explicit(&map[key], memory_order_acquire);
}
/* NONE -> PENDING: 1 when this caller is the one to choose key's slot. */
int smoe__map_try_reserve(_Atomic uint64_t *map, uint32_t key);
/* PENDING -> NONE: the reservation found no slot. */
void smoe__map_unreserve(_Atomic uint64_t *map, uint32_t key);
/* PENDING -> (v, gen): key's load is in slot v. */
void smoe__map_point(_Atomic uint64_t *map, uint32_t key, uint32_t v, uint32_t gen);
/* entry -> NONE, if key's entry is still `entry` (a stale one; the old key
 * of an evicted or cancelled slot). */
void smoe__map_clear(_Atomic uint64_t *map, uint32_t key, uint64_t entry);

/*
 * Take slot v, seen as *w by a victim pick (EMPTY, or idle), for a new load
 * of key: LOADING, STARTED until armed, the flags of kflags (SMOE__W_SPEC,
 * SMOE__W_TOPUP; none: demand, which adds a pin), a new gen (*gen).
 * 1: taken, *w is the word it replaced; 0: the word moved (pick again).
 */
int smoe__slot_reserve(struct smoe_stream *s, uint32_t v, uint64_t *w, uint32_t key,
                       uint64_t kflags, uint32_t *gen);

/* How smoe__slot_join found the slot the map named. */
typedef enum smoe__join {
    SMOE__JOIN_GONE,      /* it no longer holds key (or is EMPTY): look again */
    SMOE__JOIN_PINS_FULL, /* demand: SMOE__W_PIN_MAX pins already; nothing changed */
    SMOE__JOIN_NEED_ROOM, /* demand, FAILED: reserve the retry's tokens' room, call again */
    SMOE__JOIN_NO_RETRY,  /* speculative, FAILED: only demand retries; nothing changed */
    SMOE__JOIN_RESIDENT,  /* READY or CONSUMED: pinned if demand */
    SMOE__JOIN_INFLIGHT,  /* LOADING: pinned if demand (the first pin of a queued
                           * speculative read makes it a demand read) */
    SMOE__JOIN_RETRY      /* was FAILED: LOADING again under the same gen, pinned
                           * and STARTED; arm it (smoe__slot_arm) */
} smoe__join;

/*
 * Join key's load or blob in slot v (the map's entry: gen). A demand join
 * adds a pin, or re-arms a FAILED read when the caller holds the retry's
 * queue room (room); a speculative one changes nothing. *w: the word
 * before the change. Inline, as the claim and the release below: each
 * prefetch, claim and release of a resident expert makes one.
 */
/* What a join of w does, and the word it makes of it (*nw; w itself for
 * an outcome that changes nothing: GONE, PINS_FULL, NEED_ROOM, NO_RETRY, a
 * speculative join). */
static inline smoe__join smoe__join_word(uint64_t w, uint32_t key, uint32_t gen, int demand,
                                         int room, uint64_t *nw)
{
    const smoe__slot_state st = smoe__w_state(w);
    *nw = w;
    if (smoe__w_key(w) != key || smoe__w_gen(w) != gen || st == SMOE__SLOT_EMPTY)
        return SMOE__JOIN_GONE;
    if (demand && smoe__w_pins(w) == SMOE__W_PIN_MAX)
        return SMOE__JOIN_PINS_FULL;
    switch (st) {
    case SMOE__SLOT_READY:
    case SMOE__SLOT_CONSUMED:
        if (demand)
            *nw += SMOE__W_PIN_ONE; /* pinned until claimed */
        return SMOE__JOIN_RESIDENT;
    case SMOE__SLOT_LOADING:
        if (demand) {
            *nw += SMOE__W_PIN_ONE;
            /* The first pin of a speculative read upgrades it; not started
             * yet, it becomes a plain demand read. */
            if (smoe__w_pins(w) == 0 && !(w & SMOE__W_STARTED))
                *nw &= ~(SMOE__W_SPEC | SMOE__W_TOPUP);
        }
        return SMOE__JOIN_INFLIGHT;
    case SMOE__SLOT_FAILED:
        if (!demand)
            return SMOE__JOIN_NO_RETRY;
        if (!room)
            return SMOE__JOIN_NEED_ROOM;
        /* LOADING again, same gen, STARTED until re-armed (as reserve) */
        *nw = ((w & ~(SMOE__W_STATE_MASK | SMOE__W_SPEC | SMOE__W_TOPUP | SMOE__W_STARTED |
                      SMOE__W_WAITERS)) |
               SMOE__SLOT_LOADING | SMOE__W_STARTED) + SMOE__W_PIN_ONE;
        return SMOE__JOIN_RETRY;
    default:
        return SMOE__JOIN_GONE;
    }
}

static inline smoe__join smoe__slot_join(smoe__ring *r, uint32_t v, uint32_t key, uint32_t gen,
                                         int demand, int room, uint64_t *w)
{
    /* acquire: [K], from the CAS that gave the slot this key, and [P] */
    *w = smoe__slot_word(r, v);
    for (;;) {
        uint64_t nw;
        smoe__join j = smoe__join_word(*w, key, gen, demand, room, &nw);
        if (nw == *w)
            return j; /* nothing to change, or an outcome that changes nothing */
        /* acq_rel: [K] (a retry reuses the slot's memory; a pin publishes
         * nothing but keeps one order for every move); acquire on failure:
         * the reloaded word is decided on again */
        if (atomic_compare_exchange_weak_explicit(&r->word[v], w, nw,
                                                  memory_order_acq_rel, memory_order_acquire))
            return j;
    }
}

/*
 * Arm slot v's load (LOADING under gen, key key, reserved or re-armed:
 * STARTED) for its chunks in the demand or the speculative size: error
 * cleared, a new arming in chunk_next, and STARTED dropped, so that a
 * queued speculative read can be cancelled until a worker takes a chunk.
 * Returns the chunk count: the caller queues one token per chunk.
 */
uint32_t smoe__slot_arm(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t key,
                        int demand);

/*
 * Cancel key's queued speculative load in slot v (gen): EMPTY under gen + 1,
 * so that its tokens no longer match. 0 (*w: the word cancelled),
 * SMOE_ENOTRESIDENT (not that load), SMOE_EBUSY (started, pinned or demand).
 */
int smoe__slot_cancel(struct smoe_stream *s, uint32_t v, uint32_t key, uint32_t gen,
                      uint64_t *w);

/* A worker holds a token of slot v's load gen: mark it STARTED (no longer
 * cancellable). 1 (*key: its expert), or 0 for a stale token (cancelled,
 * evicted, published, another load). */
int smoe__slot_start(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t *key);
/* Take the next chunk of the current arming of slot v's load gen, of entry
 * key (its chunks: smoe__extent_chunks): 1 with its offset and length in
 * the slot and the arming it is of (smoe__cn_arming), 0 when none is left
 * (or the load is not armed yet). */
int smoe__slot_take_chunk(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t key,
                          uint64_t *off, uint64_t *len, uint32_t *arming);
/* A chunk of slot v's load (arming) failed with err: the first error wins,
 * and its fault record (what, why: NULL for none) is written beside it. */
void smoe__slot_chunk_failed(struct smoe_stream *s, uint32_t v, uint32_t arming, int err,
                             uint32_t what, const smoe__io_fail *why);
/* A chunk of slot v's load landed (read or failed): 1 for the last one,
 * whose worker then finishes the load (smoe__slot_load_error, publish). */
int smoe__slot_chunk_landed(struct smoe_stream *s, uint32_t v);
/* The finished load's error: 0 when every chunk was read. */
int smoe__slot_load_error(struct smoe_stream *s, uint32_t v);
/* Record why slot v's load (arming) failed where no chunk did
 * (verification). */
void smoe__slot_note_fault(struct smoe_stream *s, uint32_t v, uint32_t arming, uint32_t what,
                           const smoe__io_fail *f);
/* The arming of slot v's load, for a worker that finishes it without
 * having taken its last chunk itself (a warm-up's verify token). */
uint32_t smoe__slot_arming(struct smoe_stream *s, uint32_t v);
/* Publish slot v's finished load (arming): READY (err 0) or FAILED(err);
 * returns the speculation budget unit of an unpinned speculative read,
 * gives the slot a fresh tick and wakes its waiters. */
void smoe__slot_publish(struct smoe_stream *s, uint32_t v, uint32_t arming, int err);

/* What one claim attempt found (smoe__slot_claim). */
typedef enum smoe__claim_step {
    SMOE__CLAIM_TAKEN,     /* a reference taken (and a pin removed, if any) */
    SMOE__CLAIM_LOADING,   /* a read in flight: *w is the word to park on */
    SMOE__CLAIM_GONE,      /* the slot no longer holds key */
    SMOE__CLAIM_REFS_FULL, /* SMOE__W_REF_MAX references already */
    SMOE__CLAIM_FAILED     /* the load failed: *err and *why; a pin removed, if any */
} smoe__claim_step;

/* The FAILED case of a claim (slot.c): 1 with *err and *why, a pin
 * removed if any; 0: look again (*w reloaded). */
int smoe__slot_claim_failed(struct smoe_stream *s, smoe__ring *r, uint32_t v, uint64_t *w,
                            int *err, smoe__fault *why);
/* Claim key's blob in slot v of s (r: s's ring; the map's entry: gen). On
 * TAKEN *w is the word before (READY: first claim; CONSUMED: a hit); on
 * LOADING the word to park on. */
static inline smoe__claim_step smoe__slot_claim(struct smoe_stream *s, smoe__ring *r,
                                                uint32_t v, uint32_t key,
                                                uint32_t gen, uint64_t *w, int *err,
                                                smoe__fault *why)
{
    /* acquire: [K] (the key) and [P] (the bytes, or the error) */
    uint64_t cur = smoe__slot_word(r, v);
    smoe__claim_step step;
    for (;;) {
        if (smoe__w_key(cur) != key || smoe__w_gen(cur) != gen) {
            step = SMOE__CLAIM_GONE; /* evicted since the map was read */
            break;
        }
        const smoe__slot_state st = smoe__w_state(cur);
        if (st == SMOE__SLOT_LOADING) {
            step = SMOE__CLAIM_LOADING;
            break;
        }
        if (st == SMOE__SLOT_FAILED) {
            /* out of line: the rare case keeps cur in a register */
            uint64_t f = cur;
            int done = smoe__slot_claim_failed(s, r, v, &f, err, why);
            cur = f;
            if (done) {
                step = SMOE__CLAIM_FAILED;
                break;
            }
            continue;
        }
        if (st != SMOE__SLOT_READY && st != SMOE__SLOT_CONSUMED) {
            step = SMOE__CLAIM_GONE;
            break;
        }
        if (smoe__w_refs(cur) >= SMOE__W_REF_MAX) {
            step = SMOE__CLAIM_REFS_FULL;
            break;
        }
        uint64_t nw = ((cur & ~SMOE__W_STATE_MASK) | SMOE__SLOT_CONSUMED) + SMOE__W_REF_ONE -
                      (smoe__w_pins(cur) ? SMOE__W_PIN_ONE : 0);
        /* acquire: [P], the blob's bytes; failure reloads cur */
        if (atomic_compare_exchange_weak_explicit(&r->word[v], &cur, nw, memory_order_acquire,
                                                  memory_order_acquire)) {
            step = SMOE__CLAIM_TAKEN;
            break;
        }
    }
    *w = cur;
    return step;
}

/* Park on slot v until its word moves from w, at most ns (and 100 ms). */
void smoe__slot_park(struct smoe_stream *s, uint32_t v, uint64_t w, uint64_t ns);
/* Drop a reference to key's blob (gen) in slot v: 0, or -1 when the slot
 * holds no reference to it. */
static inline int smoe__slot_release(smoe__ring *r, uint32_t v, uint32_t key, uint32_t gen)
{
    /* relaxed: the CAS below re-checks; its release is what orders */
    uint64_t w = atomic_load_explicit(&r->word[v], memory_order_relaxed);
    for (;;) {
        if (smoe__w_gen(w) != gen || smoe__w_key(w) != key ||
            smoe__w_state(w) != SMOE__SLOT_CONSUMED || smoe__w_refs(w) == 0)
            return -1;
        /* release: [R]; relaxed on failure: retry */
        if (atomic_compare_exchange_weak_explicit(&r->word[v], &w, w - SMOE__W_REF_ONE,
                                                  memory_order_release, memory_order_relaxed))
            return 0;
    }
}

/* Wake the claimers parked on slot v, if w (the word a move replaced) says
 * there are any. */
void smoe__slot_wake_waiters(struct smoe_stream *s, uint32_t v, uint64_t w);
/* 1 while key's load is in flight (LOADING in the slot its entry names).
 * A poll: nothing is read through it. */
int smoe__slot_loading(struct smoe_stream *s, uint32_t key);
/* smoe_shutdown: no claimer stays parked on any slot. */
void smoe__slots_shutdown(struct smoe_stream *s);
/* References held on every slot. */
uint64_t smoe__slots_refs(struct smoe_stream *s);

#endif
