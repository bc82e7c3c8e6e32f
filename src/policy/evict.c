/*
 * evict.c - choosing the slot a new load goes into.
 *
 * Invariants:
 *  - Lazy: called once per new load, picks one slot; nothing is ever
 *    pruned in bulk.
 *  - Never chosen: a slot with references (the host may be reading it), a
 *    read in progress (STARTED), a slot pinned by demand prefetches that
 *    have not all been claimed yet (pins).
 *  - Preference: EMPTY first; then, by class, FAILED; CONSUMED with no
 *    references (retained); speculative READY never claimed (under reuse:
 *    in the retained class, ranked with it); speculative reads queued but
 *    not started (evicting one cancels it, for demand only).
 *  - Under reuse, an expert with a live hint (hint.c) is ranked, and a
 *    hinted load admitted, by the hint's probability in place of its
 *    learned q; the classes above still decide first, so a hint never
 *    takes a slot with references, pins or a read in progress. A hinted
 *    load below SMOE__HINT_DISPLACE_MIN_P takes only an EMPTY or FAILED
 *    slot.
 *  - Under reuse, a speculative load takes an occupied idle slot only if
 *    its entry's keep value is below the speculated expert's own. Within the
 *    best class the policy ranks: SMOE_EVICT_LRU takes the least recently
 *    used (smallest tick); SMOE_EVICT_REUSE the lowest keep value
 *    (evict_reuse.c), ties to the smallest tick.
 *  - The pick is only a proposal: the caller takes the slot with one CAS
 *    from the exact word seen here, and picks again if the word changed.
 *  - Work is one pass over the dense word and tick arrays (and, for
 *    reuse, the slots' cached scores): O(slots). docs/eviction.md, "Work
 *    per eviction", has the measured cost at 64 to 65,536 slots.
 */
#include <math.h>

#include "internal.h"
#include "policy/evict_reuse.h"

/* Eviction class of a slot word: lower is evicted first, -1 never. Under
 * reuse (ranked), an unclaimed speculative read competes with retained
 * experts on its keep value instead of outliving them all. */
static int victim_class(uint64_t w, unsigned kind, int ranked)
{
    if (smoe__w_refs(w) != 0 || smoe__w_pins(w) != 0)
        return -1;
    switch (smoe__w_state(w)) {
    case SMOE__SLOT_FAILED:
        return 0;
    case SMOE__SLOT_CONSUMED:
        return 1;
    case SMOE__SLOT_READY:
        if (!(w & SMOE__W_SPEC))
            return -1; /* demand READY: pinned until claimed */
        return ranked ? 1 : 2;
    case SMOE__SLOT_LOADING:
        /* A queued speculative read may be cancelled, but only to make room
         * for demand: speculation never cancels speculation. */
        if ((w & SMOE__W_STARTED) || !(w & SMOE__W_SPEC) || kind != SMOE__PICK_DEMAND)
            return -1;
        return 3;
    default:
        return -1;
    }
}

/* Slot v's word w is EMPTY: take it as the pick, and start the next scan
 * after it. */
static int pick_empty_at(struct smoe_stream *s, uint32_t v, uint64_t w, uint32_t *slot,
                         uint64_t *word)
{
    /* relaxed: a hint for the next scan */
    atomic_store_explicit(&s->empty_hint, v + 1, memory_order_relaxed);
    *slot = v;
    *word = w;
    return 1;
}

int smoe__evict_pick_empty(struct smoe_stream *s, uint32_t *slot, uint64_t *word)
{
    const uint32_t n = s->ring.nslots;
    /* relaxed: only where to start looking; any value is correct */
    uint32_t start = atomic_load_explicit(&s->empty_hint, memory_order_relaxed) % n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = start + i < n ? start + i : start + i - n;
        /* a slot we go on to take is seen with its readers done */
        uint64_t w = smoe__slot_word(&s->ring, v);
        if (smoe__w_state(w) == SMOE__SLOT_EMPTY)
            return pick_empty_at(s, v, w, slot, word);
    }
    return 0;
}

int smoe__evict_pick(struct smoe_stream *s, unsigned kind, uint32_t key, uint32_t *slot,
                     uint64_t *word)
{
    const uint32_t n = s->ring.nslots;
    smoe__reuse *const reuse = s->reuse;
    /* Under reuse a speculative load only displaces an entry worth less
     * than itself (speculation must not flush what demand will reuse), and
     * only an expert likely to be asked for is worth a read at all. */
    double admit = 0.0;
    if (reuse && kind == SMOE__PICK_SPEC) {
        float q;
        if (smoe__hint_live(s, key, &q)) {
            /* the engine's probability replaces the learned q. Below even
             * odds the read is more likely wasted than used, and on a busy
             * disk a wasted read delays demand as much as a used one
             * saves: it may fill a free slot, never displace an entry */
            admit = q < SMOE__HINT_DISPLACE_MIN_P ? -HUGE_VAL : smoe__reuse_keep_q(reuse, key, q);
        } else {
            admit = smoe__reuse_keep_key(reuse, key, &q);
            if (q < SMOE__REUSE_SPEC_MIN_Q)
                return 0;
        }
    }
    /* relaxed: only where to start looking; any value is correct */
    uint32_t start = atomic_load_explicit(&s->empty_hint, memory_order_relaxed) % n;
    int best_class = 4;
    uint64_t best_tick = UINT64_MAX, best_word = 0;
    double best_keep = 0;
    float best_q = 0;
    uint32_t best = UINT32_MAX, scanned = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = start + i < n ? start + i : start + i - n;
        /* a slot we go on to take is seen with its readers done */
        uint64_t w = smoe__slot_word(&s->ring, v);
        if (smoe__w_state(w) == SMOE__SLOT_EMPTY)
            return pick_empty_at(s, v, w, slot, word);
        scanned++;
        int c = victim_class(w, kind, reuse != NULL);
        if (c < 0 || c > best_class)
            continue;
        /* relaxed: ranking only (see smoe__touch) */
        uint64_t t = atomic_load_explicit(&s->ring.tick[v], memory_order_relaxed);
        if (reuse) {
            float q;
            double keep = smoe__reuse_keep(reuse, v, smoe__w_key(w), &q);
            if (smoe__hint_live(s, smoe__w_key(w), &q)) /* ranked by its hint */
                keep = smoe__reuse_keep_q(reuse, smoe__w_key(w), q);
            if (kind == SMOE__PICK_SPEC && c > 0 && keep >= admit)
                continue;
            if (c < best_class || keep < best_keep || (keep == best_keep && t < best_tick)) {
                best_class = c;
                best_keep = keep;
                best_q = q;
                best_tick = t;
                best = v;
                best_word = w;
            }
        } else if (c < best_class || t < best_tick) {
            best_class = c;
            best_tick = t;
            best = v;
            best_word = w;
        }
    }
    SMOE__COUNT(s, c_evict_scans, 1);
    SMOE__COUNT(s, c_evict_scanned, scanned);
    if (best == UINT32_MAX)
        return 0;
    if (reuse)
        smoe__reuse_victim(reuse, best_q);
    *slot = best;
    *word = best_word;
    return 1;
}

/*
 * Pre-warm's pick for key: an EMPTY slot, else an idle victim (never a
 * load in flight, a reference or a pin) that is both
 *  - older than the pre-warm pass: its tick predates the pass's start, so
 *    nothing demand loaded, claimed or released since the pass began, and
 *    none of the pass's own loads, is taken; and
 *  - colder: its expert has fewer claims in the histogram than key, so
 *    pre-warm never trades an expert for one no more popular.
 * FAILED slots first, then the fewest claims, then the least recently used.
 */
int smoe__evict_pick_topup(struct smoe_stream *s, uint32_t key, uint32_t *slot,
                             uint64_t *word)
{
    const uint32_t n = s->ring.nslots;
    /* relaxed: written by the pre-warm thread, which is the caller */
    const uint64_t floor = atomic_load_explicit(&s->topup.floor, memory_order_relaxed);
    /* relaxed: statistics only (see smoe__freq_hit) */
    const uint64_t heat = atomic_load_explicit(&s->freq.count[key], memory_order_relaxed);
    int best_class = 2;
    uint64_t best_heat = UINT64_MAX, best_tick = UINT64_MAX, best_word = 0;
    uint32_t best = UINT32_MAX;

    for (uint32_t v = 0; v < n; v++) {
        uint64_t w = smoe__slot_word(&s->ring, v);
        if (smoe__w_state(w) == SMOE__SLOT_EMPTY) {
            *slot = v;
            *word = w;
            return 1;
        }
        int c = victim_class(w, SMOE__PICK_SPEC, 0);
        if (c < 0)
            continue;
        c = c != 0; /* FAILED, or any other idle class */
        /* relaxed: ranking only (see smoe__touch) */
        uint64_t t = atomic_load_explicit(&s->ring.tick[v], memory_order_relaxed);
        /* relaxed: statistics only */
        uint64_t h = atomic_load_explicit(&s->freq.count[smoe__w_key(w)], memory_order_relaxed);
        if (t >= floor || h >= heat)
            continue;
        if (c < best_class ||
            (c == best_class && (h < best_heat || (h == best_heat && t < best_tick)))) {
            best_class = c;
            best_heat = h;
            best_tick = t;
            best = v;
            best_word = w;
        }
    }
    if (best == UINT32_MAX)
        return 0;
    *slot = best;
    *word = best_word;
    return 1;
}
