/*
 * load.c - beginning a load in a reserved slot: the steps every new load
 * takes, whoever reads it (load.h). Below prefetch.c, which queues the
 * load's tokens, and startup.c, whose worker reads the chunks itself.
 */
#include "internal.h"
#include "load.h"
#include "policy/evict_reuse.h"

/* Statistics and the speculation budget of the load or blob a reservation
 * just replaced (word w). */
static void count_eviction(struct smoe_stream *s, uint64_t w)
{
    SMOE__COUNT(s, c_evictions, 1);
    unsigned st = smoe__w_state(w);
    int counted_spec = (w & SMOE__W_SPEC) && !(w & SMOE__W_TOPUP);
    if (st == SMOE__SLOT_READY && counted_spec)
        SMOE__COUNT(s, c_spec_wasted_bytes, s->vault.index[smoe__w_key(w)].padded);
    if (st == SMOE__SLOT_LOADING) {
        SMOE__COUNT(s, c_spec_cancelled, 1);
        if (counted_spec)
            smoe__spec_put(s);
    }
}

/* Slot v (word w before, now reserved for key at gen) holds key's new
 * load: the previous owner's map entry, its figures, and a claimer parked
 * on its word (a cancelled read) must look again; key's entry points here. */
void smoe__load_install(struct smoe_stream *s, uint32_t key, uint32_t v, uint64_t w,
                        uint32_t gen)
{
    if (smoe__w_state(w) != SMOE__SLOT_EMPTY) {
        smoe__map_clear(s->map, smoe__w_key(w), smoe__map_make(v, smoe__w_gen(w)));
        count_eviction(s, w);
        smoe__slot_wake_waiters(s, v, w);
    }
    if (s->reuse)
        smoe__reuse_forget(s->reuse, v); /* a new key: its score is not ours */
    smoe__touch(s, v); /* a fresh tick, so a burst cannot evict its own head */
    smoe__map_point(s->map, key, v, gen);
}

int smoe__load_fill(struct smoe_stream *s, uint32_t key, uint32_t *v, uint32_t *gen)
{
    if (!smoe__map_try_reserve(s->map, key))
        return 0;
    uint64_t w;
    do {
        if (!smoe__evict_pick_empty(s, v, &w)) {
            smoe__map_unreserve(s->map, key);
            return -1;
        }
    } while (!smoe__slot_reserve(s, *v, &w, key, SMOE__W_SPEC | SMOE__W_TOPUP, gen));
    smoe__load_install(s, key, *v, w, *gen);
    /* demand-sized chunks: large requests; no tokens, the caller reads them */
    (void)smoe__slot_arm(s, *v, *gen, key, 1);
    return 1;
}
