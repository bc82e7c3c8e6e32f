/*
 * slot.c - the slot protocol: every move of a slot word, of the residency
 * map and of a load's chunk counters and error, and nothing else. The four
 * that every prefetch, claim and release of a resident expert makes
 * (smoe__map_lookup, smoe__slot_join, smoe__slot_claim, smoe__slot_release)
 * are static inline in slot.h, where a call would cost a few percent of
 * those calls (bench/bench_core.c); the rest are here. prefetch.c,
 * claim.c, worker.c, evict.c, topup.c and stream.c call them (and read
 * words through slot.h's two loads); none of them touches those words
 * itself. tests/spin/slot.pml models each function, step by step
 * (docs/internals/slot-protocol.md maps the steps).
 *
 * States of a slot word (slot.h has its fields). Every move is one CAS on
 * the whole word, from the exact value the mover decided on:
 *
 *             reserve               publish(0)          claim
 *    EMPTY ────────────► LOADING ─────────────► READY ─────────► CONSUMED ⟲ claim,
 *      ▲                  │ ▲ │                                            release
 *      └──── cancel ──────┘ │ └── publish(err) ──► FAILED
 *            (gen + 1)      └───── join: retry ◄──────┘
 *
 *   EMPTY, FAILED, CONSUMED without refs, unclaimed speculative READY,
 *   queued speculative LOADING ──── reserve (eviction) ────► LOADING (new key)
 *
 *   smoe__slot_reserve  EMPTY or an idle victim -> LOADING | STARTED, a new
 *                       key and gen, a pin for demand
 *   smoe__slot_arm      LOADING | STARTED -> LOADING, once the load's chunk
 *                       counters are armed (a new arming in chunk_next)
 *   smoe__slot_join     (slot.h) a pin more (demand); the first pin of a queued
 *                       speculative read clears SPEC (an upgrade);
 *                       FAILED -> LOADING | STARTED, same gen (a retry)
 *   smoe__slot_cancel   queued speculative LOADING -> EMPTY, gen + 1
 *   smoe__slot_start    LOADING -> LOADING | STARTED (a worker has a token)
 *   smoe__slot_take_chunk, _chunk_failed, _chunk_landed: the arming's chunks
 *   smoe__slot_publish  LOADING -> READY or FAILED (STARTED, WAITERS cleared)
 *   smoe__slot_claim    (slot.h) READY or CONSUMED -> CONSUMED, a ref more,
 *                       a pin less; FAILED: a pin less, the error reported
 *   smoe__slot_release  (slot.h) CONSUMED: a ref less
 *   smoe__slot_park     LOADING: WAITERS set; smoe__slots_shutdown clears it
 *
 * Invariants:
 *  - A slot with references is CONSUMED; it is never reserved, cancelled,
 *    retried or published, and its bytes stay those of its (key, gen).
 *  - A slot with pins is never reserved or cancelled: each demand prefetch
 *    adds one, each claim that takes a reference or reports the failed
 *    read removes one, so every demand prefetch is honoured by one claim.
 *  - STARTED: a LOADING slot cannot be cancelled between its reservation
 *    (or retry) and its arming, nor once a worker holds a token of it.
 *  - Only the reserving (or retrying) thread writes chunk_next, chunk_left
 *    and err while STARTED is set by the reservation; each arming's value
 *    of chunk_next is new (gen, attempt), and a worker derives a chunk's
 *    offset and length from the value its CAS succeeded on, so every chunk
 *    of an arming is read once, in the size it was armed with.
 *  - WAITERS is only ever on a LOADING word; every move off LOADING
 *    (publish, a reserve that cancels, cancel) or shutdown clears it and
 *    wakes the word, and a parked claimer sleeps only on a LOADING word.
 *  - The map entry of key is NONE, PENDING (one prefetch choosing key's
 *    slot), or (slot, gen); a slot changes key only with a new gen, so a
 *    stale entry is recognisable forever and is cleared by CAS from its
 *    exact value (never an entry re-pointed since).
 *
 * Memory orders, each pairing stated once (call sites below refer here):
 *  [P] publish's release CAS (READY, FAILED) -> the acquire load or CAS of
 *      a claim, a join, a worker's start: the blob's bytes, err and the
 *      fault record (stored relaxed before it) are visible with the state.
 *  [R] release's release CAS (refs - 1) and a failed claim's acq_rel unpin
 *      -> the acq_rel CAS of reserve (and of a retry): the last reader's
 *      reads (of the bytes, of err) happen before the slot is reused.
 *  [K] reserve's, retry's and cancel's acq_rel CAS: acquire as [R];
 *      release publishes the new key and gen to every later acquire of
 *      the word.
 *  [M] map_point's release store -> map_lookup's acquire load: the word
 *      read next is at least the one reserve's CAS wrote. map_clear's and
 *      map_unreserve's release -> map_try_reserve's acquire.
 *  [A] arm's release store of chunk_next -> take_chunk's acquire load and
 *      CAS: chunk_left, err and the fault record of the arming are seen by
 *      a worker that takes one of its chunks. arm's release CAS clearing
 *      STARTED -> the acq_rel CAS of a reserve or cancel that takes the
 *      slot: the arming is complete before any reuse.
 *  [C] the acq_rel countdown of chunk_left: each chunk's bytes and error
 *      are released; the last one acquires all before publishing.
 *  [W] park's seq_cst CAS setting WAITERS, then its load of stop, against
 *      shutdown's seq_cst store of stop, then its fetch_and clearing
 *      WAITERS: either the claimer sees stop, or shutdown clears the flag
 *      the claimer set (and the word it would sleep on changes).
 *
 * Hot path: no lock, no allocation; the only system calls are futex wakes
 * and waits (platform/park.h).
 */
#include <limits.h>

#include "internal.h"
#include "platform/park.h"
#include "slot.h"

/* Longest single park: a backstop, not a poll (every state change wakes). */
#define SMOE__PARK_MAX_NS 100000000ull

void smoe__slots_init(smoe__ring *r)
{
    for (uint32_t i = 0; i < r->nslots; i++) {
        atomic_init(&r->word[i], SMOE__SLOT_EMPTY);
        atomic_init(&r->err[i], 0);
        atomic_init(&r->fault[i].seq, 0);
        atomic_init(&r->fault[i].what, SMOE__FAULT_NONE);
        atomic_init(&r->fault[i].eno, 0);
        atomic_init(&r->fault[i].tries, 0);
        atomic_init(&r->fault[i].off, 0);
        atomic_init(&r->fault[i].len, 0);
        atomic_init(&r->fault[i].file, 0);
        atomic_init(&r->fault[i].copy, 0);
        atomic_init(&r->chunk_next[i], 0);
        atomic_init(&r->chunk_left[i], 0);
    }
}

/* ---- the residency map -------------------------------------------------- */

void smoe__map_init(_Atomic uint64_t *map, size_t n)
{
    for (size_t i = 0; i < n; i++)
        atomic_init(&map[i], SMOE__MAP_NONE);
}

int smoe__map_try_reserve(_Atomic uint64_t *map, uint32_t key)
{
    uint64_t none = SMOE__MAP_NONE;
    /* acquire: [M], from the clear that made it NONE; relaxed on failure:
     * the caller reads the entry again */
    return atomic_compare_exchange_strong_explicit(&map[key], &none, SMOE__MAP_PENDING,
                                                   memory_order_acquire,
                                                   memory_order_relaxed);
}

void smoe__map_unreserve(_Atomic uint64_t *map, uint32_t key)
{
    /* release: [M] (nothing was published, but the map keeps one protocol) */
    atomic_store_explicit(&map[key], SMOE__MAP_NONE, memory_order_release);
}

void smoe__map_point(_Atomic uint64_t *map, uint32_t key, uint32_t v, uint32_t gen)
{
    /* release: [M] */
    atomic_store_explicit(&map[key], smoe__map_make(v, gen), memory_order_release);
}

void smoe__map_clear(_Atomic uint64_t *map, uint32_t key, uint64_t entry)
{
    /* release: [M]; failure is fine (someone already cleared or re-pointed
     * the stale entry) */
    atomic_compare_exchange_strong_explicit(&map[key], &entry, SMOE__MAP_NONE,
                                            memory_order_release, memory_order_relaxed);
}

/* ---- prefetch: reserve, join, retry, arm, cancel ------------------------ */

int smoe__slot_reserve(struct smoe_stream *s, uint32_t v, uint64_t *w, uint32_t key,
                       uint64_t kflags, uint32_t *gen)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    /* STARTED until smoe__slot_arm: an evictor must not cancel a load whose
     * arming is still to come. */
    uint64_t nw = smoe__w_new_load(*w, key,
                                   kflags | SMOE__W_STARTED | (demand ? SMOE__W_PIN_ONE : 0));
    /* acq_rel: [K]; relaxed on failure: the caller picks again */
    if (!atomic_compare_exchange_strong_explicit(&s->ring.word[v], w, nw, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0;
    *gen = smoe__w_gen(nw);
    return 1;
}

uint32_t smoe__slot_arm(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t key,
                        int demand)
{
    const uint32_t n = smoe__load_chunks(s, key, demand);
    /* This arming's attempt: one more than the last arming's if that was of
     * the same gen (a retry of a failed read), else 0. relaxed: nobody else
     * writes chunk_next while the slot is reserved (STARTED) and not armed:
     * the last arming's chunks were all taken before it was published (or
     * none was, if it was cancelled), and the CAS that reserved the slot
     * read the word that publication or cancellation wrote. */
    uint64_t prev = atomic_load_explicit(&s->ring.chunk_next[v], memory_order_relaxed);
    uint32_t attempt = smoe__cn_gen(prev) == gen ? smoe__cn_attempt(prev) + 1 : 0;
    const uint64_t next = smoe__cn_make(gen, attempt, !demand);
    /* relaxed (all three): published by the release store of chunk_next;
     * err: no error yet, of this arming */
    atomic_store_explicit(&s->ring.err[v], smoe__err_make(smoe__cn_arming(next), 0),
                          memory_order_relaxed);
    atomic_store_explicit(&s->ring.chunk_left[v], n, memory_order_relaxed);
    atomic_store_explicit(&s->ring.t_queued[v], smoe__now_ns(), memory_order_relaxed);
    /* release: [A], also for a worker that holds a token of an earlier
     * arming of the same gen */
    atomic_store_explicit(&s->ring.chunk_next[v], next, memory_order_release);
    /* Armed: drop the STARTED the reservation set, so that a queued
     * speculative read can be cancelled until a worker takes a chunk.
     * Nobody else can move the slot meanwhile: it is not cancellable, and
     * no worker can take a chunk before the arming above. */
    /* relaxed: the CAS below re-checks */
    uint64_t w = atomic_load_explicit(&s->ring.word[v], memory_order_relaxed);
    while (smoe__w_gen(w) == gen && smoe__w_state(w) == SMOE__SLOT_LOADING &&
           (w & SMOE__W_STARTED) &&
           /* release: [A]; relaxed on failure: the loop re-checks */
           !atomic_compare_exchange_weak_explicit(&s->ring.word[v], &w, w & ~SMOE__W_STARTED,
                                                  memory_order_release, memory_order_relaxed))
        ;
    return n;
}

int smoe__slot_cancel(struct smoe_stream *s, uint32_t v, uint32_t key, uint32_t gen,
                      uint64_t *w)
{
    /* acquire: [K], from the CAS that gave the slot this key */
    *w = smoe__slot_word(&s->ring, v);
    uint64_t nw;
    do {
        if (smoe__w_key(*w) != key || smoe__w_gen(*w) != gen ||
            smoe__w_state(*w) != SMOE__SLOT_LOADING)
            return SMOE_ENOTRESIDENT;
        if ((*w & SMOE__W_STARTED) || smoe__w_pins(*w) || !(*w & SMOE__W_SPEC))
            return SMOE_EBUSY;
        /* EMPTY under a new generation: the queued tokens no longer match */
        nw = ((uint64_t)((gen + 1) & ((1u << SMOE__W_GEN_BITS) - 1)) << SMOE__W_GEN_SHIFT) |
             SMOE__SLOT_EMPTY;
        /* acq_rel: [K]; acquire on failure: the reloaded word is checked
         * again */
    } while (!atomic_compare_exchange_weak_explicit(&s->ring.word[v], w, nw,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire));
    return 0;
}

/* ---- workers: start, chunks, publish ------------------------------------ */

int smoe__slot_start(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t *key)
{
    _Atomic uint64_t *word = &s->ring.word[v];
    /* acquire: [A] through the word (the arming's release CAS) and [R] */
    uint64_t w = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        if (smoe__w_state(w) != SMOE__SLOT_LOADING || smoe__w_gen(w) != gen)
            return 0; /* cancelled, evicted, done, or stale */
        if (w & SMOE__W_STARTED)
            break;
        /* acquire: as the load above; STARTED makes the load uncancellable */
        if (atomic_compare_exchange_weak_explicit(word, &w, w | SMOE__W_STARTED,
                                                  memory_order_acquire, memory_order_acquire))
            break;
    }
    *key = smoe__w_key(w);
    return 1;
}

int smoe__slot_take_chunk(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t key,
                          uint64_t *off, uint64_t *len, uint32_t *arming)
{
    _Atomic uint64_t *next = &s->ring.chunk_next[v];
    /* acquire: [A] (and, through the CASes of other workers, each later
     * value) */
    uint64_t c = atomic_load_explicit(next, memory_order_acquire);
    uint32_t chunk;
    do {
        /* The chunk size is the arming's, from the value itself: a CAS that
         * succeeds from c takes chunk index(c) of exactly that arming (a
         * token of an earlier arming of this gen, stalled here, finds a
         * value it never saw and looks again). */
        chunk = (c & SMOE__CN_SPEC_CHUNK) ? s->spec_chunk : s->chunk;
        if (smoe__cn_gen(c) != gen ||
            smoe__cn_index(c) >= smoe__extent_chunks(&s->vault, key, chunk))
            return 0; /* not armed yet, or every chunk of this arming is taken */
        smoe__hook(s, SMOE__HOOK_CHUNK_CAS, v, c, chunk);
        /* acquire: as the load above */
    } while (!atomic_compare_exchange_weak_explicit(next, &c, c + 1, memory_order_acquire,
                                                    memory_order_acquire));
    smoe__extent_chunk_at(&s->vault, key, chunk, smoe__cn_index(c), off, len);
    *arming = smoe__cn_arming(c);
    return 1;
}

void smoe__slot_note_fault(struct smoe_stream *s, uint32_t v, uint32_t arming, uint32_t what,
                           const smoe__io_fail *f)
{
    static const smoe__io_fail none = {0, 0, 0, 0, 0, 0};
    smoe__slot_fault *sf = &s->ring.fault[v];
    if (!f)
        f = &none;
    /* The seqlock's write side [F]: seq 0 (being written), a release
     * fence, the fields, then the arming's seq by a release store. relaxed:
     * the fence orders it before the fields */
    atomic_store_explicit(&sf->seq, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    /* relaxed, all seven: [F] (and published with the error by [C], [P]) */
    atomic_store_explicit(&sf->what, what, memory_order_relaxed);
    atomic_store_explicit(&sf->eno, f->eno, memory_order_relaxed);
    atomic_store_explicit(&sf->tries, f->tries, memory_order_relaxed);
    atomic_store_explicit(&sf->off, f->off, memory_order_relaxed);
    atomic_store_explicit(&sf->len, f->len, memory_order_relaxed);
    atomic_store_explicit(&sf->file, f->file, memory_order_relaxed);
    atomic_store_explicit(&sf->copy, f->copy, memory_order_relaxed);
    /* release: [F] */
    atomic_store_explicit(&sf->seq, SMOE__FAULT_SEQ_VALID | arming, memory_order_release);
}

void smoe__slot_chunk_failed(struct smoe_stream *s, uint32_t v, uint32_t arming, int err,
                             uint32_t what, const smoe__io_fail *why)
{
    uint64_t none = smoe__err_make(arming, 0);
    /* release: [E]; relaxed on failure: an error is set already. The
     * first error of this arming wins (the CAS is from this arming's "no
     * error"), and its winner alone writes the fault record */
    if (atomic_compare_exchange_strong_explicit(&s->ring.err[v], &none,
                                                smoe__err_make(arming, err),
                                                memory_order_release, memory_order_relaxed))
        smoe__slot_note_fault(s, v, arming, what, why);
}

int smoe__slot_chunk_landed(struct smoe_stream *s, uint32_t v)
{
    /* acq_rel: [C] */
    return atomic_fetch_sub_explicit(&s->ring.chunk_left[v], 1, memory_order_acq_rel) == 1;
}

uint32_t smoe__slot_arming(struct smoe_stream *s, uint32_t v)
{
    /* relaxed: the caller holds the load's last chunk (every chunk of the
     * arming taken, none to come), ordered after that chunk's CAS */
    return smoe__cn_arming(atomic_load_explicit(&s->ring.chunk_next[v], memory_order_relaxed));
}

int smoe__slot_load_error(struct smoe_stream *s, uint32_t v)
{
    /* relaxed: ordered by [C], the countdown the caller just won */
    return smoe__err_code(atomic_load_explicit(&s->ring.err[v], memory_order_relaxed));
}

void smoe__slot_publish(struct smoe_stream *s, uint32_t v, uint32_t arming, int err)
{
    _Atomic uint64_t *word = &s->ring.word[v];
    if (err)
        /* release: [E] (and published by [P]) */
        atomic_store_explicit(&s->ring.err[v], smoe__err_make(arming, err),
                              memory_order_release);
    /* relaxed: the CAS below re-checks */
    uint64_t w = atomic_load_explicit(word, memory_order_relaxed), nw;
    do {
        nw = (w & ~(SMOE__W_STATE_MASK | SMOE__W_STARTED | SMOE__W_WAITERS)) |
             (err ? SMOE__SLOT_FAILED : SMOE__SLOT_READY);
        /* release: [P]; relaxed on failure: retry */
    } while (!atomic_compare_exchange_weak_explicit(word, &w, nw, memory_order_release,
                                                    memory_order_relaxed));
    if ((w & SMOE__W_SPEC) && !(w & SMOE__W_TOPUP) && smoe__w_pins(w) == 0)
        smoe__spec_put(s);
    smoe__touch(s, v); /* freshly loaded: a fresh tick */
    smoe__slot_wake_waiters(s, v, w);
}

/* ---- claimers: claim, park, release ------------------------------------- */

/* Copy slot v's fault record, if it is arming's and whole: 1; 0 when it
 * is being written or is another arming's (the seqlock's read side, [F]). */
static int fault_copy(const smoe__ring *r, uint32_t v, uint32_t arming, smoe__fault *why)
{
    smoe__slot_fault *sf = &r->fault[v];
    /* acquire: [F], the release store of seq that ended the writing */
    uint32_t seq = atomic_load_explicit(&sf->seq, memory_order_acquire);
    /* relaxed, all seven: [F] */
    why->what = atomic_load_explicit(&sf->what, memory_order_relaxed);
    why->io.eno = atomic_load_explicit(&sf->eno, memory_order_relaxed);
    why->io.tries = atomic_load_explicit(&sf->tries, memory_order_relaxed);
    why->io.off = atomic_load_explicit(&sf->off, memory_order_relaxed);
    why->io.len = atomic_load_explicit(&sf->len, memory_order_relaxed);
    why->io.file = atomic_load_explicit(&sf->file, memory_order_relaxed);
    why->io.copy = atomic_load_explicit(&sf->copy, memory_order_relaxed);
    /* acquire fence: [F] (a field written by a later writer makes the
     * reload of seq below, and of the word after it, see that writer's
     * start) */
    atomic_thread_fence(memory_order_acquire);
    /* relaxed: ordered by the fence above */
    return seq == (SMOE__FAULT_SEQ_VALID | arming) &&
           atomic_load_explicit(&sf->seq, memory_order_relaxed) == seq;
}

/* The FAILED case of smoe__slot_claim (slot.h). The error and the fault
 * record must be the load's that *w published: err carries its arming,
 * whose gen must be *w's (the slot still holds this expert), the fault
 * record must be whole and of the same arming, and the slot must still be
 * *w afterwards: with a pin, the unpinning CAS from *w checks that; without
 * one, nothing kept an evictor from giving the slot to another expert
 * meanwhile, so the word is loaded again. Any mismatch: look again. */
int smoe__slot_claim_failed(struct smoe_stream *s, smoe__ring *r, uint32_t v, uint64_t *w,
                            int *err, smoe__fault *why)
{
    smoe__hook(s, SMOE__HOOK_CLAIM_FAILED, v, *w, 0);
    /* acquire: [E], the worker's first-error CAS (or publish's store) */
    const uint64_t e = atomic_load_explicit(&r->err[v], memory_order_acquire);
    const uint32_t arming = smoe__err_arming(e);
    if (smoe__err_code(e) == 0 || smoe__arming_gen(arming) != smoe__w_gen(*w)) {
        /* re-armed for a retry since *w was read (smoe__slot_arm clears the
         * error), or the slot went to another load: look again rather than
         * report success without a reference, or another load's error.
         * acquire: [P], [K] */
        *w = smoe__slot_word(r, v);
        return 0;
    }
    smoe__hook(s, SMOE__HOOK_CLAIM_ERR, v, *w, (uint64_t)(uint32_t)smoe__err_code(e));
    smoe__fault f;
    if (!fault_copy(r, v, arming, &f)) {
        *w = smoe__slot_word(r, v); /* acquire: [P], [K] */
        return 0;
    }
    if (!smoe__w_pins(*w)) {
        /* acquire: [P], [K]; after fault_copy's acquire fence, so an error
         * or a field of a later load means this load sees that load's
         * reservation */
        const uint64_t now = smoe__slot_word(r, v);
        if (now != *w) {
            *w = now;
            return 0;
        }
    } else if (!atomic_compare_exchange_weak_explicit(&r->word[v], w, *w - SMOE__W_PIN_ONE,
                                                      memory_order_acq_rel,
                                                      memory_order_acquire)) {
        /* The error has reached a claimer: it honours one demand prefetch,
         * as a successful claim does, so failures the caller has asked about
         * do not hold slots until the same expert is asked for again.
         * acq_rel: [R]; acquire on failure: the moved word is decided on
         * again */
        return 0;
    }
    *err = smoe__err_code(e);
    *why = f;
    return 1;
}

void smoe__slot_park(struct smoe_stream *s, uint32_t v, uint64_t w, uint64_t ns)
{
    _Atomic uint64_t *word = &s->ring.word[v];
    if (!(w & SMOE__W_WAITERS)) {
        uint64_t nw = w | SMOE__W_WAITERS;
        /* seq_cst: [W] */
        if (!atomic_compare_exchange_strong(word, &w, nw))
            return; /* the word moved: no need to sleep */
        w = nw;
    }
    if (atomic_load(&s->stop)) {
        /* Shutdown may already have cleared WAITERS and woken this word,
         * and our CAS set it again: clear it and wake whoever parked on it
         * since, or another waiter could sleep through the shutdown. */
        if (atomic_fetch_and(word, ~SMOE__W_WAITERS) & SMOE__W_WAITERS)
            smoe__park_wake(smoe__low32(word), INT32_MAX);
        return;
    }
    smoe__park_wait(smoe__low32(word), (uint32_t)w,
                    ns < SMOE__PARK_MAX_NS ? ns : SMOE__PARK_MAX_NS);
}

/* ---- waiters, shutdown, polls ------------------------------------------- */

void smoe__slot_wake_waiters(struct smoe_stream *s, uint32_t v, uint64_t w)
{
    if (w & SMOE__W_WAITERS)
        smoe__park_wake(smoe__low32(&s->ring.word[v]), INT32_MAX);
}

int smoe__slot_loading(struct smoe_stream *s, uint32_t key)
{
    /* relaxed (both): only polls the read's progress; nothing is read
     * through these words */
    uint64_t me = atomic_load_explicit(&s->map[key], memory_order_relaxed);
    if (me == SMOE__MAP_NONE || me == SMOE__MAP_PENDING)
        return 0;
    uint64_t w = smoe__slot_peek(&s->ring, smoe__map_slot(me));
    return smoe__w_key(w) == key && smoe__w_gen(w) == smoe__map_gen(me) &&
           smoe__w_state(w) == SMOE__SLOT_LOADING;
}

void smoe__slots_shutdown(struct smoe_stream *s)
{
    /* Clearing WAITERS changes the word claimers sleep on, so one that is
     * about to sleep cannot miss this. seq_cst: [W] */
    for (uint32_t v = 0; v < s->ring.nslots; v++) {
        uint64_t w = atomic_fetch_and(&s->ring.word[v], ~SMOE__W_WAITERS);
        smoe__slot_wake_waiters(s, v, w);
    }
}

uint64_t smoe__slots_refs(struct smoe_stream *s)
{
    uint64_t held = 0;
    for (uint32_t v = 0; v < s->ring.nslots; v++)
        held += smoe__w_refs(atomic_load(&s->ring.word[v]));
    return held;
}
