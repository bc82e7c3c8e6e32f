/*
 * hint.c - hinted speculation: the per-expert probabilities an engine
 * gives with smoe_prefetch_hint, their lifetime, and the cancellation of
 * the reads a layer's demand set contradicts (docs/eviction.md, "Hints";
 * docs/threading.md).
 *
 * Lifetime of a hint of expert e of layer l, probability p:
 *  - given: hint[key] = p, hint_layer[l] = GIVEN. While live, the reuse
 *    policy ranks and admits e by p instead of its learned q (evict.c).
 *  - spent: the first demand prefetch of l sets DEMANDED; eviction goes
 *    back to the learned estimate (the demand teaches it what happened).
 *  - settled: the first demand prefetch of layer l + 1 (l's demand set is
 *    then complete) clears l's hints and cancels each hinted read that no
 *    worker has started and that no demand prefetch pinned: its expert was
 *    not asked for. A read already started, or READY, stays (its bytes
 *    are spent; it is ranked like any unclaimed speculative read).
 * An engine that interleaves the demand of two layers may see a hinted read
 * of the later one cancelled before its demand comes: a miss, never a
 * wrong result.
 *
 * No lock, no allocation after open; every access is relaxed (statistics:
 * the slot moves themselves are slot.c's CASes).
 */
#include <stdlib.h>

#include "alloc.h"
#include "error.h"
#include "internal.h"
#include "policy/hint.h"

/* relaxed: statistics (see the top of this file and hint.h) */
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

int smoe__hint_init(struct smoe_stream *s)
{
    size_t nkeys = (size_t)s->vault.layers * s->vault.experts;
    s->hint = smoe__calloc(nkeys ? nkeys : 1, sizeof *s->hint);
    s->hint_layer = smoe__calloc(s->vault.layers ? s->vault.layers : 1, sizeof *s->hint_layer);
    if (!s->hint || !s->hint_layer)
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the hint tables");
    for (size_t i = 0; i < nkeys; i++)
        atomic_init(&s->hint[i], 0);
    for (uint32_t l = 0; l < s->vault.layers; l++)
        atomic_init(&s->hint_layer[l], 0);
    return 0;
}

void smoe__hint_free(struct smoe_stream *s)
{
    free(s->hint);
    free(s->hint_layer);
}

void smoe__hint_set(struct smoe_stream *s, uint32_t layer, uint32_t key, float p)
{
    uint32_t b;
    memcpy(&b, &p, sizeof b);
    if (!LOAD(s->hint_on))
        STORE(s->hint_on, 1);
    STORE(s->hint[key], b ? b : 1u); /* p = 0 is kept as the least positive float */
    if (LOAD(s->hint_layer[layer]) != SMOE__HINT_GIVEN)
        STORE(s->hint_layer[layer], SMOE__HINT_GIVEN);
}

int smoe__cancel_queued(struct smoe_stream *s, uint32_t key)
{
    const uint64_t me = smoe__map_lookup(s->map, key);
    if (me == SMOE__MAP_NONE || me == SMOE__MAP_PENDING)
        return SMOE_ENOTRESIDENT;
    const uint32_t v = smoe__map_slot(me);
    uint64_t w;
    int r = smoe__slot_cancel(s, v, key, smoe__map_gen(me), &w);
    if (r < 0)
        return r;
    smoe__map_clear(s->map, key, me);
    SMOE__COUNT(s, c_spec_cancelled, 1);
    if (!(w & SMOE__W_TOPUP))
        smoe__spec_put(s);
    smoe__slot_wake_waiters(s, v, w);
    return 0;
}

/* Layer l's demand set is complete: clear its hints, cancel the reads it
 * contradicts. */
static void settle(struct smoe_stream *s, uint32_t l)
{
    const uint32_t base = l * s->vault.experts;
    for (uint32_t e = 0; e < s->vault.experts; e++) {
        /* relaxed: see the top of this file */
        if (!atomic_exchange_explicit(&s->hint[base + e], 0, memory_order_relaxed))
            continue;
        if (smoe__cancel_queued(s, base + e) == 0)
            SMOE__COUNT(s, c_hint_cancelled, 1);
    }
}

void smoe__hint_demand(struct smoe_stream *s, uint32_t layer)
{
    if (!LOAD(s->hint_on))
        return;
    if (LOAD(s->hint_layer[layer]) == SMOE__HINT_GIVEN)
        STORE(s->hint_layer[layer], SMOE__HINT_GIVEN | SMOE__HINT_DEMANDED);
    const uint32_t prev = layer ? layer - 1 : s->vault.layers - 1;
    if (prev == layer || !(LOAD(s->hint_layer[prev]) & SMOE__HINT_DEMANDED))
        return;
    /* relaxed: one settler per visit; a racing one finds 0 and leaves */
    if (atomic_exchange_explicit(&s->hint_layer[prev], 0, memory_order_relaxed) &
        SMOE__HINT_DEMANDED)
        settle(s, prev);
}
