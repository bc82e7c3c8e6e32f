/*
 * claim.c - smoe_claim, smoe_claim_wait and smoe_release.
 *
 * A claim takes its reference with one CAS on the slot word that also
 * checks the slot's key, generation and state, so no evictor can slip in
 * between "it is READY" and "I hold a reference"; the same CAS removes one
 * demand pin, if the slot has any (every demand prefetch is honoured by one
 * claim). A claim that reports a failed read removes one pin too. Those
 * moves, and parking on a slot, are slot.c's. The descriptor records the
 * stream and its own address, so release refuses a descriptor of another
 * stream or a copy. claim never issues I/O; claim_wait spins briefly, then
 * parks on the slot word's low 32 bits (futex/ulock) after setting
 * WAITERS, which every publisher clears before waking; shutdown clears it
 * too. No mutex, no condition variable.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "fault_text.h"
#include "internal.h"
#include "fill/freq.h"
#include "platform/park.h"
#include "prefetch.h"

/* Pause iterations before parking: a 16 KiB-aligned read takes tens of
 * microseconds at best, and on a machine with few cores a spinning claimer
 * steals the CPU the workers need. */
#define SMOE__CLAIM_SPINS 128

static int check_args(struct smoe_stream *s, uint32_t layer, uint32_t expert, smoe_blob *blob,
                      const char *fn)
{
    if (!s || !blob)
        return smoe__fail(SMOE_EINVAL, "%s: NULL %s", fn, s ? "blob" : "stream");
    /* *blob's old contents are not looked at: callers pass uninitialised
     * descriptors (a claim into one that still holds a reference is the
     * caller's leak: smoe.h). */
    blob->held = 0; /* a failed claim leaves a descriptor release refuses */
    if (!smoe__vault_entry_of(&s->vault, layer, expert))
        return smoe__fail(SMOE_ENOENT, "%s: no expert (layer %u, expert %u) in %s "
                          "(%u layers x %u experts)", fn, layer, expert, s->vault.path,
                          s->vault.layers, s->vault.experts);
    return 0;
}

/* A reference to (layer, expert) taken on slot v (word w before the
 * claim): fill the descriptor and count; a first claim is READY, a
 * retained blob's a HIT. */
static smoe_claim_status fill_blob(struct smoe_stream *s, uint32_t layer, uint32_t expert,
                                   uint32_t v, uint32_t gen, uint64_t w, smoe_blob *blob)
{
    const uint32_t key = layer * s->vault.experts + expert;
    const smoe__vault_entry *e = &s->vault.index[key];
    blob->data = smoe__slot_data(&s->ring, v);
    blob->size = e->size;
    blob->ring_offset = (uint64_t)v * s->ring.stride;
    blob->layer = layer;
    blob->expert = expert;
    blob->layout = e->layout;
    blob->slot = v;
    blob->gen = gen;
    blob->held = 1;
    blob->reserved_[0] = s->id;                       /* which stream */
    blob->reserved_[1] = (uint64_t)(uintptr_t)blob;   /* which descriptor */
    smoe__touch(s, v);
    smoe__freq_hit(&s->freq, key);
    SMOE__COUNT(s, c_claims, 1);
    if (smoe__w_state(w) == SMOE__SLOT_CONSUMED) {
        SMOE__COUNT(s, c_claim_hits, 1);
        return SMOE_HIT;
    }
    if ((w & SMOE__W_SPEC) && !(w & SMOE__W_TOPUP))
        SMOE__COUNT(s, c_spec_used, 1);
    else if (w & SMOE__W_TOPUP)
        SMOE__COUNT(s, topup.c_hits, 1);
    return SMOE_READY;
}

/*
 * One claim attempt. On SMOE_EAGAIN with a slot known, *wait_slot and
 * *wait_word tell claim_wait where to park (wait_slot UINT32_MAX: none).
 * On a failed load's error, *why says why (else its what is NONE).
 */
static int claim_once(struct smoe_stream *s, uint32_t layer, uint32_t expert, smoe_blob *blob,
                      uint32_t *wait_slot, uint64_t *wait_word, smoe__fault *why)
{
    const uint32_t key = layer * s->vault.experts + expert;
    *wait_slot = UINT32_MAX;
    why->what = SMOE__FAULT_NONE;
    uint64_t me = smoe__map_lookup(s->map, key);
    if (me == SMOE__MAP_NONE)
        return SMOE_ENOTRESIDENT;
    if (me == SMOE__MAP_PENDING)
        return SMOE_EAGAIN;
    const uint32_t v = smoe__map_slot(me), gen = smoe__map_gen(me);
    uint64_t w;
    int err = 0;
    switch (smoe__slot_claim(s, &s->ring, v, key, gen, &w, &err, why)) {
    case SMOE__CLAIM_TAKEN:
        return fill_blob(s, layer, expert, v, gen, w, blob);
    case SMOE__CLAIM_LOADING:
        *wait_slot = v;
        *wait_word = w;
        return SMOE_EAGAIN;
    case SMOE__CLAIM_REFS_FULL:
        return SMOE_EREFS;
    case SMOE__CLAIM_FAILED:
        return err;
    default: /* SMOE__CLAIM_GONE: evicted since the map was read */
        return SMOE_ENOTRESIDENT;
    }
}

static int claim_error(struct smoe_stream *s, int r, uint32_t layer, uint32_t expert,
                       const smoe__fault *why)
{
    if (r >= 0 || r == SMOE_EAGAIN || r == SMOE_ENOTRESIDENT)
        return r; /* expected outcomes of a poll: no message */
    char how[768];
    smoe__fault_text(s, layer * s->vault.experts + expert, r, why, how, sizeof how);
    return smoe__fail(r, "claim: (layer %u, expert %u) of %s: %s%s", layer, expert,
                      s->vault.path, smoe_strerror(r), how);
}

SMOE_API int smoe_claim(smoe_stream *s, uint32_t layer, uint32_t expert, smoe_blob *blob)
{
    int r = check_args(s, layer, expert, blob, "claim");
    if (r < 0)
        return r;
    if (atomic_load(&s->stop))
        return smoe__fail(SMOE_ESHUTDOWN, "claim: stream is shut down");
    uint32_t ws;
    uint64_t ww;
    smoe__fault why;
    r = claim_once(s, layer, expert, blob, &ws, &ww, &why);
    return claim_error(s, r, layer, expert, &why);
}

SMOE_API int smoe_claim_wait(smoe_stream *s, uint32_t layer, uint32_t expert,
                             uint64_t timeout_ns, smoe_blob *blob)
{
    int r = check_args(s, layer, expert, blob, "claim_wait");
    if (r < 0)
        return r;
    const uint32_t key = layer * s->vault.experts + expert;
    uint64_t t0 = 0, now = 0;
    smoe__fault why = {SMOE__FAULT_NONE, {0, 0, 0, 0, 0, 0}};
    for (unsigned spins = 0;; spins++) {
        if (atomic_load(&s->stop)) {
            r = smoe__fail(SMOE_ESHUTDOWN, "claim_wait: stream is shut down");
            break;
        }
        uint32_t ws;
        uint64_t ww;
        r = claim_once(s, layer, expert, blob, &ws, &ww, &why);
        if (r != SMOE_EAGAIN && r != SMOE_ENOTRESIDENT)
            break;
        /* Every way round this loop passes here: the timeout runs from the
         * first attempt that failed. */
        now = smoe__now_ns();
        if (t0 == 0) {
            t0 = now;
            SMOE__COUNT(s, c_claim_waits, 1);
        } else if (timeout_ns != UINT64_MAX && now - t0 >= timeout_ns) {
            r = smoe__fail(SMOE_ETIMEDOUT, "claim_wait: (layer %u, expert %u) not ready "
                           "after %llu ns", layer, expert, (unsigned long long)timeout_ns);
            break;
        }
        /* Not resident: ask for it. A read in flight that is not (or no
         * longer) a demand read: ask, which upgrades it to demand and pins
         * it, so we never wait at speculative priority on a read that an
         * evictor may cancel. The ask adds one pin, which this call's claim
         * removes; while the read has a pin nothing asks again. */
        if (r == SMOE_ENOTRESIDENT || (ws != UINT32_MAX && smoe__w_pins(ww) == 0)) {
            int p = smoe__prefetch_demand(s, layer, key);
            if (p < 0) {
                r = p;
                break;
            }
            if (p == SMOE_RESIDENT || p == SMOE_QUEUED) {
                smoe__hook(s, SMOE__HOOK_WAIT_ASKED, UINT32_MAX, (uint64_t)p, 0);
                continue;
            }
        }
        if (spins < SMOE__CLAIM_SPINS) {
            smoe__cpu_relax();
            continue;
        }
        if (ws == UINT32_MAX) {
            sched_yield(); /* PENDING: another prefetch is picking its slot */
            continue;
        }
        smoe__slot_park(s, ws, ww, timeout_ns == UINT64_MAX ? UINT64_MAX : timeout_ns - (now - t0));
    }
    if (t0)
        SMOE__COUNT(s, c_claim_wait_ns, smoe__now_ns() - t0);
    return claim_error(s, r, layer, expert, &why);
}

SMOE_API int smoe_release(smoe_stream *s, smoe_blob *blob)
{
    if (!s || !blob)
        return smoe__fail(SMOE_EINVAL, "release: NULL %s", s ? "blob" : "stream");
    if (!blob->held || blob->slot >= s->ring.nslots)
        return smoe__fail(SMOE_EINVAL, "release: the descriptor holds no reference "
                          "(released already, or never claimed)");
    if (blob->reserved_[0] != s->id)
        return smoe__fail(SMOE_EINVAL, "release: the descriptor of (layer %u, expert %u) was "
                          "claimed on another stream; release it on the stream that claimed "
                          "it", blob->layer, blob->expert);
    if (blob->reserved_[1] != (uint64_t)(uintptr_t)blob)
        return smoe__fail(SMOE_EINVAL, "release: the descriptor at %p of (layer %u, expert "
                          "%u) is a copy (or was moved) of the one the claim filled at %p; "
                          "release that one", (void *)blob, blob->layer, blob->expert,
                          (void *)(uintptr_t)blob->reserved_[1]);
    const uint32_t v = blob->slot;
    const uint32_t key = blob->layer * s->vault.experts + blob->expert;
    if (smoe__slot_release(&s->ring, v, key, blob->gen) < 0)
        return smoe__fail(SMOE_EINVAL, "release: slot %u does not hold a reference "
                          "for (layer %u, expert %u)", v, blob->layer, blob->expert);
    blob->held = 0;
    smoe__touch(s, v);
    SMOE__COUNT(s, c_releases, 1);
    return 0;
}
