/*
 * prefetch.c - smoe_prefetch and smoe_cancel: find or reserve a slot for an
 * expert and queue its read. The moves of the slot word, of the residency
 * map and of the chunk counters are slot.c's; this file decides which to
 * make, and keeps the speculation budget, the queues' room and the
 * statistics.
 *
 * Two prefetches of one expert agree through the residency map before
 * either takes a victim: only the one that moves the entry NONE -> PENDING
 * reserves a slot, so an expert is never loaded twice. PENDING lasts for
 * one victim scan; a concurrent prefetch of the same expert waits it out
 * (pause, then sched_yield) and then joins. This is the one wait for
 * another thread a prefetch has (smoe.h says so): bounded by the holder's
 * scan, unless the holder is descheduled.
 *
 * Room in the request queues is reserved before anything changes
 * (mpmc.h): a speculative or pre-warm load that finds none is SKIPPED
 * before it takes a slot, a demand load or retry fails with SMOE_EFULL,
 * and an upgrade that finds none leaves the read to its speculative
 * tokens. No prefetch ever waits for a worker to make room.
 *
 * Each demand prefetch adds a pin to the slot word; each claim removes one
 * (slot.c): every demand prefetch is honoured by one claim.
 *
 * Lock-free, no allocation. System calls: a futex wake when a worker is
 * parked, and the sched_yield above (the clock, read when a load is queued
 * or upgraded, is the vDSO's: internal.h).
 */
#include <sched.h>

#include "error.h"
#include "internal.h"
#include "scheduler.h"
#include "policy/evict_reuse.h"
#include "policy/hint.h"
#include "platform/park.h"
#include "load.h"
#include "prefetch.h"

/* The demand class's queue (scheduler.h). */
#define DEMAND_Q(s) smoe__sched_q(&(s)->sched, SMOE__CL_DEMAND)

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
    size_t held = atomic_load_explicit(&DEMAND_Q(s)->reserved, memory_order_relaxed);
    return smoe__fail(SMOE_EFULL, "prefetch: (layer %u, expert %u): the demand queue has no "
                      "room for its %u read requests (%zu of %zu are queued or reserved); "
                      "nothing was changed", layer_of(s, key), expert_of(s, key), n, held,
                      smoe__mpmc_capacity(DEMAND_Q(s)));
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

/* Arm slot v's load and queue its chunk tokens on q, in room already
 * reserved there. */
static void queue_load(struct smoe_stream *s, smoe__mpmc *q, uint32_t v, uint32_t gen,
                       uint32_t key, int demand)
{
    smoe__workers_enqueue(s, q, v, gen, smoe__slot_arm(s, v, gen, key, demand));
}

/* A load that reserved key's map entry (and q's room for n tokens) found no
 * slot: give both back, and the budget unit. */
static int no_slot(struct smoe_stream *s, uint32_t key, uint64_t kflags, smoe__mpmc *q,
                   uint32_t n)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    smoe__mpmc_unreserve(q, n);
    if (!demand && !(kflags & SMOE__W_TOPUP))
        smoe__spec_put(s);
    smoe__map_unreserve(s->map, key);
    if (demand) {
        SMOE__COUNT(s, c_full, 1);
        return smoe__fail(SMOE_EFULL, "prefetch: every one of %u slots is referenced, loading "
                          "or awaiting its demand claim", s->ring.nslots);
    }
    SMOE__COUNT(s, c_spec_skipped, 1);
    return SMOE_SKIPPED;
}

/* Take a slot for key, by its kind's victim pick: 1 with *v and *gen. */
static int take_slot(struct smoe_stream *s, uint32_t key, uint64_t kflags, uint32_t *v,
                     uint64_t *w, uint32_t *gen)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    for (;;) {
        int got = (kflags & SMOE__W_TOPUP)
                      ? smoe__evict_pick_topup(s, key, v, w)
                      : smoe__evict_pick(s, demand ? SMOE__PICK_DEMAND : SMOE__PICK_SPEC, key,
                                         v, w);
        if (!got)
            return 0;
        if (smoe__slot_reserve(s, *v, w, key, kflags, gen))
            return 1;
    }
}

/* We hold key's map entry (PENDING): reserve a slot and queue the read (a
 * speculative one on sq: the plain or a hint band's queue). */
static int load_into_new_slot(struct smoe_stream *s, uint32_t key, uint64_t kflags,
                              smoe__mpmc *sq)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    const int counted_spec = !demand && !(kflags & SMOE__W_TOPUP);
    smoe__hook(s, SMOE__HOOK_SLOT_PICK, UINT32_MAX, key, 0);
    if (counted_spec && !spec_budget_take(s)) {
        smoe__map_unreserve(s->map, key);
        SMOE__COUNT(s, c_spec_skipped, 1);
        return SMOE_SKIPPED;
    }
    /* Room for the load's tokens, before a slot is taken. */
    smoe__mpmc *q = demand ? DEMAND_Q(s) : sq;
    const uint32_t n = smoe__load_chunks(s, key, demand);
    if (!smoe__mpmc_reserve(q, n)) {
        if (counted_spec)
            smoe__spec_put(s);
        smoe__map_unreserve(s->map, key);
        if (demand)
            return no_demand_room(s, key, n);
        SMOE__COUNT(s, c_spec_skipped, 1);
        return SMOE_SKIPPED;
    }
    uint32_t v, gen;
    uint64_t w;
    if (!take_slot(s, key, kflags, &v, &w, &gen))
        return no_slot(s, key, kflags, q, n);
    smoe__load_install(s, key, v, w, gen);
    queue_load(s, q, v, gen, key, demand);
    if (demand)
        SMOE__COUNT(s, c_misses, 1);
    else if (counted_spec)
        SMOE__COUNT(s, c_spec_queued, 1);
    return SMOE_QUEUED;
}

/* A demand prefetch pinned a READY or retained blob. */
static smoe_prefetch_status joined_resident(struct smoe_stream *s, uint32_t v, int demand)
{
    smoe__touch(s, v);
    if (demand && s->reuse)
        smoe__reuse_forget(s->reuse, v); /* its history is changing */
    if (demand)
        SMOE__COUNT(s, c_hits, 1);
    return SMOE_RESIDENT;
}

/* The first pin of a speculative read in flight (word w) upgraded it: its
 * chunk tokens wait behind speculative work, so queue them again on the
 * demand queue (chunks are handed out once per arming, slot.c, so the
 * extra tokens find nothing left). It was armed, or will be, in
 * speculative chunks. Without room the read goes on from its speculative
 * tokens. */
static void upgrade(struct smoe_stream *s, uint32_t v, uint64_t w, uint32_t key)
{
    SMOE__COUNT(s, c_spec_upgraded, 1);
    if (!(w & SMOE__W_TOPUP))
        smoe__spec_put(s);
    /* relaxed: latency statistics only */
    atomic_store_explicit(&s->ring.t_queued[v], smoe__now_ns(), memory_order_relaxed);
    const uint32_t n = smoe__load_chunks(s, key, 0);
    if (smoe__mpmc_reserve(DEMAND_Q(s), n))
        smoe__workers_enqueue(s, DEMAND_Q(s), v, smoe__w_gen(w), n);
}

/* A prefetch joined key's read in flight in slot v (word w before). */
static smoe_prefetch_status joined_inflight(struct smoe_stream *s, uint32_t v, uint64_t w,
                                            uint32_t key, int demand)
{
    if (demand && smoe__w_pins(w) == 0)
        upgrade(s, v, w, key);
    if (demand)
        SMOE__COUNT(s, c_joins, 1);
    return SMOE_INFLIGHT;
}

/* A demand prefetch made key's FAILED slot v LOADING again: a new arming,
 * in the room reserved. */
static smoe_prefetch_status retried(struct smoe_stream *s, uint32_t v, uint32_t gen,
                                    uint32_t key)
{
    smoe__touch(s, v);
    queue_load(s, DEMAND_Q(s), v, gen, key, 1);
    SMOE__COUNT(s, c_misses, 1);
    return SMOE_QUEUED;
}

/*
 * The map says key is in slot v (entry gen): join its read or blob, pin it
 * (demand), or retry its failed read (demand, with the retry's room
 * reserved before the slot changes). 1 with *r the prefetch's result; 0
 * when the slot no longer holds key (the entry is stale).
 */
static int join_slot(struct smoe_stream *s, uint32_t v, uint32_t key, uint32_t gen,
                     uint64_t kflags, int *r)
{
    const int demand = !(kflags & SMOE__W_SPEC);
    const uint32_t nretry = demand ? smoe__load_chunks(s, key, 1) : 0;
    int room = 0;
    uint64_t w;
    smoe__join j;
    while ((j = smoe__slot_join(&s->ring, v, key, gen, demand, room, &w)) ==
           SMOE__JOIN_NEED_ROOM) {
        if (!smoe__mpmc_reserve(DEMAND_Q(s), nretry)) {
            *r = no_demand_room(s, key, nretry);
            return 1;
        }
        room = 1;
    }
    if (room && j != SMOE__JOIN_RETRY)
        smoe__mpmc_unreserve(DEMAND_Q(s), nretry); /* no retry after all */
    switch (j) {
    case SMOE__JOIN_PINS_FULL: *r = too_many_pins(s, key); return 1;
    case SMOE__JOIN_NO_RETRY: *r = SMOE_SKIPPED; return 1; /* only demand retries */
    case SMOE__JOIN_RESIDENT: *r = joined_resident(s, v, demand); return 1;
    case SMOE__JOIN_INFLIGHT: *r = joined_inflight(s, v, w, key, demand); return 1;
    case SMOE__JOIN_RETRY: *r = retried(s, v, gen, key); return 1;
    default: return 0; /* SMOE__JOIN_GONE */
    }
}

/* smoe__prefetch_key, a new speculative read going on sq. */
static int prefetch_into(struct smoe_stream *s, uint32_t key, uint64_t kflags, smoe__mpmc *sq)
{
    unsigned spins = 0;
    for (;;) {
        uint64_t me = smoe__map_lookup(s->map, key);
        if (me == SMOE__MAP_NONE) {
            if (smoe__map_try_reserve(s->map, key))
                return load_into_new_slot(s, key, kflags, sq);
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
        int r;
        if (join_slot(s, smoe__map_slot(me), key, smoe__map_gen(me), kflags, &r))
            return r;
        /* Stale entry: the slot went to another expert. Clear it (the
         * evictor does too; whoever is first wins) and look again. */
        smoe__map_clear(s->map, key, me);
    }
}

int smoe__prefetch_key(struct smoe_stream *s, uint32_t key, uint64_t kflags)
{
    /* the idle top-up has its own class, below plain speculation */
    unsigned cl = (kflags & SMOE__W_TOPUP) ? SMOE__CL_TOPUP : SMOE__CL_SPEC;
    return prefetch_into(s, key, kflags, smoe__sched_q(&s->sched, cl));
}

int smoe__prefetch_demand(struct smoe_stream *s, uint32_t layer, uint32_t key)
{
    smoe__hint_demand(s, layer);
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
    return smoe__cancel_queued(s, layer * s->vault.experts + expert);
}

SMOE_API int smoe_prefetch_hint(smoe_stream *s, uint32_t layer, uint32_t expert, float p)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "prefetch_hint: NULL stream");
    if (atomic_load(&s->stop))
        return smoe__fail(SMOE_ESHUTDOWN, "prefetch_hint: stream is shut down");
    if (!(p >= 0.0f && p <= 1.0f)) /* also refuses NaN */
        return smoe__fail(SMOE_EINVAL, "prefetch_hint: (layer %u, expert %u): probability "
                          "%g is not in [0, 1]", layer, expert, (double)p);
    if (!smoe__vault_entry_of(&s->vault, layer, expert))
        return smoe__fail(SMOE_ENOENT, "prefetch_hint: no expert (layer %u, expert %u) in %s "
                          "(%u layers x %u experts)", layer, expert, s->vault.path,
                          s->vault.layers, s->vault.experts);
    const uint32_t key = layer * s->vault.experts + expert;
    SMOE__COUNT(s, c_prefetch_hint, 1);
    /* before the prefetch: its victim pick and admission read the hint */
    smoe__hint_set(s, layer, key, p);
    return prefetch_into(s, key, SMOE__W_SPEC, smoe__sched_q(&s->sched, smoe__sched_hint_class(smoe__hint_band(p))));
}
