/*
 * prefetch.c - smoe_prefetch: find or reserve a slot for an expert and
 * queue its read.
 *
 * Two prefetches of one expert agree through the residency map before
 * either takes a victim: only the one that moves the entry NONE -> PENDING
 * by CAS reserves a slot, so an expert is never loaded twice. PENDING
 * lasts for one victim scan; a concurrent prefetch of the same expert
 * waits it out (pause, then sched_yield) and then joins.
 *
 * Room in the request queues is reserved before anything changes
 * (mpmc.h): a speculative or pre-warm load that finds none is SKIPPED
 * before it takes a slot, a demand load or retry fails with SMOE_EFULL,
 * and an upgrade that finds none leaves the read to its speculative
 * tokens. No prefetch ever waits for a worker to make room.
 *
 * Each demand prefetch adds a pin to the slot word; each claim removes one
 * (claim.c): every demand prefetch is honoured by one claim.
 *
 * Lock-free, no allocation. System calls: a futex wake when a worker is
 * parked, and the sched_yield above (the clock, read when a load is queued
 * or upgraded, is the vDSO's: internal.h).
 */
#include <sched.h>

#include "error.h"
#include "internal.h"
#include "park.h"
#include "prefetch.h"

static _Atomic uint64_t *map_of(struct smoe_stream *s, uint32_t key)
{
    return &s->map[key];
}

static const smoe__vault_entry *entry_of_key(const struct smoe_stream *s, uint32_t key)
{
    return &s->vault.index[key];
}

/* Undo a PENDING reservation that found no slot. */
static void unpend(struct smoe_stream *s, uint32_t key)
{
    /* release: pairs with the acquire loads of the map entry in prefetch
     * and claim (nothing was published, but keep the map's one protocol) */
    atomic_store_explicit(map_of(s, key), SMOE__MAP_NONE, memory_order_release);
}

/* Bookkeeping for the previous owner of a slot we just took. */
static void evicted(struct smoe_stream *s, uint32_t v, uint64_t old)
{
    SMOE__COUNT(s, c_evictions, 1);
    uint32_t old_key = smoe__w_key(old);
    uint64_t om = smoe__map_make(v, smoe__w_gen(old));
    /* release: a prefetch that then finds NONE and reserves must see our
     * slot CAS first, which it does through this store; failure is fine
     * (someone already cleared or re-pointed the stale entry) */
    atomic_compare_exchange_strong_explicit(map_of(s, old_key), &om, SMOE__MAP_NONE,
                                            memory_order_release, memory_order_relaxed);
    unsigned st = smoe__w_state(old);
    int counted_spec = (old & SMOE__W_SPEC) && !(old & SMOE__W_PREWARM);
    if (st == SMOE__READY && counted_spec)
        SMOE__COUNT(s, c_spec_wasted_bytes, entry_of_key(s, old_key)->padded);
    if (st == SMOE__LOADING) {
        SMOE__COUNT(s, c_spec_cancelled, 1);
        if (counted_spec)
            smoe__spec_put(s);
    }
    /* A claimer parked on the old word (a cancelled read) must look again:
     * our CAS dropped its WAITERS flag. */
    if (old & SMOE__W_WAITERS)
        smoe__park_wake(smoe__low32(&s->ring.word[v]), INT32_MAX);
}

static uint32_t layer_of(const struct smoe_stream *s, uint32_t key)
{
    return key / s->vault.experts;
}

static uint32_t expert_of(const struct smoe_stream *s, uint32_t key)
{
    return key % s->vault.experts;
}

/* The demand queue had no room for n more tokens. */
static int no_demand_room(struct smoe_stream *s, uint32_t key, uint32_t n)
{
    SMOE__COUNT(s, c_full, 1);
    /* relaxed: a figure for the message only */
    size_t held = atomic_load_explicit(&s->demand_q.reserved, memory_order_relaxed);
    return smoe__fail(SMOE_EFULL, "prefetch: (layer %u, expert %u): the demand queue has no "
                      "room for its %u read requests (%zu of %zu are queued or reserved); "
                      "nothing was changed", layer_of(s, key), expert_of(s, key), n, held,
                      smoe__mpmc_capacity(&s->demand_q));
}

static int too_many_pins(struct smoe_stream *s, uint32_t key)
{
    return smoe__fail(SMOE_EREFS, "prefetch: (layer %u, expert %u) already has %u demand "
                      "prefetches awaiting their claims", layer_of(s, key), expert_of(s, key),
                      SMOE__W_PIN_MAX);
}

/* Take a speculation budget unit. 1 if taken. */
static int spec_budget_take(struct smoe_stream *s)
{
    /* relaxed: a budget count, no data depends on it */
    uint32_t cur = atomic_load_explicit(&s->spec_inflight, memory_order_relaxed);
    do {
        if (cur >= s->spec_cap)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&s->spec_inflight, &cur, cur + 1,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed));
    return 1;
}

/* We own map[key] == PENDING: reserve a slot and queue the read. */
static int load_new(struct smoe_stream *s, uint32_t key, uint64_t kflags)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    const int counted_spec = !demand && !(kflags & SMOE__W_PREWARM);
    if (counted_spec && !spec_budget_take(s)) {
        unpend(s, key);
        SMOE__COUNT(s, c_spec_skipped, 1);
        return SMOE_SKIPPED;
    }
    /* Room for the load's tokens, before a slot is taken. */
    smoe__mpmc *q = demand ? &s->demand_q : &s->spec_q;
    const uint32_t n = smoe__load_chunks(s, key, demand);
    if (!smoe__mpmc_reserve(q, n)) {
        if (counted_spec)
            smoe__spec_put(s);
        unpend(s, key);
        if (demand)
            return no_demand_room(s, key, n);
        SMOE__COUNT(s, c_spec_skipped, 1);
        return SMOE_SKIPPED;
    }
    uint32_t v;
    uint64_t w, nw;
    for (;;) {
        int got = (kflags & SMOE__W_PREWARM)
                      ? smoe__evict_pick_prewarm(s, key, &v, &w)
                      : smoe__evict_pick(s, demand ? SMOE__PICK_DEMAND : SMOE__PICK_SPEC, key,
                                         &v, &w);
        if (!got) {
            smoe__mpmc_unreserve(q, n);
            if (counted_spec)
                smoe__spec_put(s);
            unpend(s, key);
            if (demand) {
                SMOE__COUNT(s, c_full, 1);
                return smoe__fail(SMOE_EFULL,
                                  "prefetch: every one of %u slots is referenced, loading "
                                  "or awaiting its demand claim",
                                  s->ring.nslots);
            }
            SMOE__COUNT(s, c_spec_skipped, 1);
            return SMOE_SKIPPED;
        }
        /* STARTED until smoe__load_start has armed the chunk counters: an
         * evictor must not cancel a load whose arming is still to come. */
        nw = smoe__w_new_load(w, key,
                              kflags | SMOE__W_STARTED | (demand ? SMOE__W_PIN_ONE : 0));
        /* acq_rel: acquire pairs with the release CAS of the last claimer's
         * release (its reads of the data finish before we reuse the slot);
         * release publishes the new key to claimers' acquire loads */
        if (atomic_compare_exchange_strong_explicit(&s->ring.word[v], &w, nw,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed))
            break;
    }
    if (smoe__w_state(w) != SMOE__EMPTY)
        evicted(s, v, w);
    if (s->reuse)
        smoe__reuse_forget(s->reuse, v); /* a new key: its score is not ours */
    smoe__touch(s, v); /* a fresh tick, so a burst cannot evict its own head */
    /* release: pairs with the acquire loads of map entries in prefetch and
     * claim, which then read the slot word we set above */
    atomic_store_explicit(map_of(s, key), smoe__map_make(v, smoe__w_gen(nw)),
                          memory_order_release);
    smoe__load_start(s, v, smoe__w_gen(nw), key, demand);
    if (demand)
        SMOE__COUNT(s, c_misses, 1);
    else if (counted_spec)
        SMOE__COUNT(s, c_spec_queued, 1);
    return SMOE_QUEUED;
}

/* The map says the expert is in slot v (word w, generation gen): join,
 * pin, retry or report. -1: the slot no longer holds it; re-read the map. */
static int found(struct smoe_stream *s, uint32_t v, uint64_t w, uint32_t key, uint32_t gen,
                 uint64_t kflags)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    /* Demand-queue room for a retry's tokens, reserved before its CAS. */
    const uint32_t nretry = demand ? smoe__load_chunks(s, key, 1) : 0;
    int room = 0, r = 0;
    for (;;) {
        if (smoe__w_key(w) != key || smoe__w_gen(w) != gen ||
            smoe__w_state(w) == SMOE__EMPTY) {
            r = -1;
            break;
        }
        uint64_t nw = w;
        const unsigned st = smoe__w_state(w);
        if (demand && st != SMOE__EMPTY && smoe__w_pins(w) == SMOE__W_PIN_MAX) {
            r = too_many_pins(s, key);
            break;
        }
        switch (st) {
        case SMOE__READY:
        case SMOE__CONSUMED:
            if (demand)
                nw += SMOE__W_PIN_ONE; /* pinned until claimed */
            break;
        case SMOE__LOADING:
            if (demand) {
                nw += SMOE__W_PIN_ONE;
                /* The first pin of a speculative read upgrades it; not
                 * started yet, it becomes a plain demand read. */
                if (smoe__w_pins(w) == 0 && !(w & SMOE__W_STARTED))
                    nw &= ~(SMOE__W_SPEC | SMOE__W_PREWARM);
            }
            break;
        case SMOE__FAILED:
            if (!demand)
                return SMOE_SKIPPED; /* only demand retries a failed read */
            if (!room && !smoe__mpmc_reserve(&s->demand_q, nretry))
                return no_demand_room(s, key, nretry);
            room = 1;
            nw = ((w & ~(SMOE__W_STATE_MASK | SMOE__W_SPEC | SMOE__W_PREWARM |
                         SMOE__W_STARTED | SMOE__W_WAITERS)) |
                  SMOE__LOADING | SMOE__W_STARTED) + SMOE__W_PIN_ONE; /* see load_new */
            break;
        default:
            r = -1;
            break;
        }
        if (r)
            break;
        /* acq_rel: as in load_new (a retry reuses the slot's memory);
         * acquire on failure: the reloaded word is checked again above */
        if (nw == w || atomic_compare_exchange_weak_explicit(&s->ring.word[v], &w, nw,
                                                             memory_order_acq_rel,
                                                             memory_order_acquire))
            break;
    }
    if (room && (r || smoe__w_state(w) != SMOE__FAILED))
        smoe__mpmc_unreserve(&s->demand_q, nretry); /* no retry after all */
    if (r)
        return r;
    switch (smoe__w_state(w)) {
    case SMOE__READY:
    case SMOE__CONSUMED:
        smoe__touch(s, v);
        if (demand && s->reuse)
            smoe__reuse_forget(s->reuse, v); /* its history is changing */
        if (demand)
            SMOE__COUNT(s, c_hits, 1);
        return SMOE_RESIDENT;
    case SMOE__LOADING:
        if (demand && smoe__w_pins(w) == 0) {
            SMOE__COUNT(s, c_spec_upgraded, 1);
            if (!(w & SMOE__W_PREWARM))
                smoe__spec_put(s);
            /* Its chunk tokens wait behind speculative work: queue them
             * again on the demand queue (chunks are handed out once per
             * arming, worker.c, so the extra tokens find nothing left). It
             * was armed, or will be, in speculative chunks. Without room
             * the read goes on from its speculative tokens. */
            /* relaxed: latency statistics only */
            atomic_store_explicit(&s->ring.t_queued[v], smoe__now_ns(), memory_order_relaxed);
            const uint32_t n = smoe__load_chunks(s, key, 0);
            if (smoe__mpmc_reserve(&s->demand_q, n))
                smoe__load_tokens(s, v, smoe__w_gen(w), n, 1);
        }
        if (demand)
            SMOE__COUNT(s, c_joins, 1);
        return SMOE_INFLIGHT;
    default: /* FAILED, now LOADING again: a new arming, in the room reserved */
        smoe__touch(s, v);
        smoe__load_start(s, v, smoe__w_gen(w), key, 1);
        SMOE__COUNT(s, c_misses, 1);
        return SMOE_QUEUED;
    }
}

int smoe__prefetch_key(struct smoe_stream *s, uint32_t key, uint64_t kflags)
{
    _Atomic uint64_t *m = map_of(s, key);
    unsigned spins = 0;
    for (;;) {
        /* acquire: pairs with the release store of the entry in load_new,
         * so the slot word we read next is at least that new */
        uint64_t me = atomic_load_explicit(m, memory_order_acquire);
        if (me == SMOE__MAP_NONE) {
            uint64_t none = SMOE__MAP_NONE;
            /* acquire: pairs with the release in evicted()/unpend() that
             * made it NONE; relaxed on failure: we loop and re-read */
            if (atomic_compare_exchange_strong_explicit(m, &none, SMOE__MAP_PENDING,
                                                        memory_order_acquire,
                                                        memory_order_relaxed))
                return load_new(s, key, kflags);
            continue;
        }
        if (me == SMOE__MAP_PENDING) {
            /* Another prefetch is choosing a slot for this expert. */
            if (++spins < 64)
                smoe__cpu_relax();
            else
                sched_yield();
            continue;
        }
        uint32_t v = smoe__map_slot(me);
        /* acquire: pairs with the release CAS that gave the slot this key */
        uint64_t w = atomic_load_explicit(&s->ring.word[v], memory_order_acquire);
        int r = found(s, v, w, key, smoe__map_gen(me), kflags);
        if (r != -1)
            return r;
        /* Stale entry: the slot went to another expert. Clear it (the
         * evictor does too; whoever is first wins) and look again.
         * release: pairs with the acquire of the NONE -> PENDING CAS */
        atomic_compare_exchange_strong_explicit(m, &me, SMOE__MAP_NONE,
                                                memory_order_release,
                                                memory_order_relaxed);
    }
}

int smoe__prefetch_demand(struct smoe_stream *s, uint32_t layer, uint32_t key)
{
    if (s->reuse)
        smoe__reuse_visit(s->reuse, layer);
    int r = smoe__prefetch_key(s, key, 0);
    if (r >= 0 && s->reuse)
        smoe__reuse_use(s->reuse, key, layer);
    return r;
}

SMOE_API int smoe_prefetch(smoe_stream *s, uint32_t layer, uint32_t expert, unsigned flags)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "prefetch: NULL stream");
    if (atomic_load(&s->stop))
        return smoe__fail(SMOE_ESHUTDOWN, "prefetch: stream is shut down");
    if (flags & ~(unsigned)SMOE_PREFETCH_SPECULATIVE)
        return smoe__fail(SMOE_EINVAL, "prefetch: unknown flags 0x%x", flags);
    if (!smoe__vault_entry_of(&s->vault, layer, expert))
        return smoe__fail(SMOE_ENOENT, "prefetch: no expert (layer %u, expert %u) in %s "
                          "(%u layers x %u experts)", layer, expert, s->vault.path,
                          s->vault.layers, s->vault.experts);
    uint32_t key = layer * s->vault.experts + expert;
    if (flags & SMOE_PREFETCH_SPECULATIVE) {
        SMOE__COUNT(s, c_prefetch_spec, 1);
        return smoe__prefetch_key(s, key, SMOE__W_SPEC);
    }
    if (s->trace)
        smoe__trace_rec_add(s->trace, layer, expert);
    int r = smoe__prefetch_demand(s, layer, key);
    if (r >= 0)
        SMOE__COUNT(s, c_prefetch_demand, 1);
    return r;
}

SMOE_API int smoe_cancel(smoe_stream *s, uint32_t layer, uint32_t expert)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "cancel: NULL stream");
    if (!smoe__vault_entry_of(&s->vault, layer, expert))
        return smoe__fail(SMOE_ENOENT, "cancel: no expert (layer %u, expert %u) in %s",
                          layer, expert, s->vault.path);
    const uint32_t key = layer * s->vault.experts + expert;
    _Atomic uint64_t *m = map_of(s, key);
    /* acquire: pairs with the release store of the entry in load_new */
    uint64_t me = atomic_load_explicit(m, memory_order_acquire);
    if (me == SMOE__MAP_NONE || me == SMOE__MAP_PENDING)
        return SMOE_ENOTRESIDENT;
    const uint32_t v = smoe__map_slot(me), gen = smoe__map_gen(me);
    /* acquire: pairs with the release CAS that gave the slot this key */
    uint64_t w = atomic_load_explicit(&s->ring.word[v], memory_order_acquire), nw;
    do {
        if (smoe__w_key(w) != key || smoe__w_gen(w) != gen ||
            smoe__w_state(w) != SMOE__LOADING)
            return SMOE_ENOTRESIDENT;
        if ((w & SMOE__W_STARTED) || smoe__w_pins(w) || !(w & SMOE__W_SPEC))
            return SMOE_EBUSY;
        /* EMPTY under a new generation: the queued tokens no longer match */
        nw = ((uint64_t)((gen + 1) & ((1u << SMOE__W_GEN_BITS) - 1)) << SMOE__W_GEN_SHIFT) |
             SMOE__EMPTY;
        /* acq_rel: as the victim CAS in load_new; failure reloads w */
    } while (!atomic_compare_exchange_weak_explicit(&s->ring.word[v], &w, nw,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire));
    /* release: as in evicted(); failure means someone cleared it already */
    atomic_compare_exchange_strong_explicit(m, &me, SMOE__MAP_NONE, memory_order_release,
                                            memory_order_relaxed);
    SMOE__COUNT(s, c_spec_cancelled, 1);
    if (!(w & SMOE__W_PREWARM))
        smoe__spec_put(s);
    if (w & SMOE__W_WAITERS)
        smoe__park_wake(smoe__low32(&s->ring.word[v]), INT32_MAX);
    return 0;
}
