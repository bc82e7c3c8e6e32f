/*
 * Description: hinted speculation (smoe_prefetch_hint). When more
 * speculative reads are queued than the workers serve, hinted ones are read
 * highest probability first, then plain speculative ones; once a layer's
 * demand set is complete (the next layer's first demand prefetch) the
 * hinted reads it contradicts are cancelled unless started or joined by
 * demand, while plain speculative reads stay queued; a hint never takes a
 * slot that is referenced, pinned or being read, under either policy;
 * hinted reads count against the speculation cap; under reuse a live hint
 * (the latest of an expert's) decides which retained expert goes, and a
 * hint below 0.5 fills only a free slot, never displacing an entry; bad
 * arguments are refused.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull
#define EXPERTS 8u

static smoe_stream *open_ring(const tu_fx *f, uint32_t slots, uint32_t eviction,
                              uint32_t spec_pct)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = slots;
    o.workers = 1;
    o.eviction = eviction;
    o.spec_share_pct = spec_pct;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    int r = smoe_open(f->path, &o, &s);
    if (r != 0)
        fail_msg("smoe_open: %s: %s", smoe_err_name(r), smoe_last_error());
    return s;
}

static void claim_release(smoe_stream *s, uint32_t l, uint32_t e)
{
    smoe_blob b;
    int r = smoe_claim_wait(s, l, e, 10 * SEC, &b);
    if (r < 0)
        fail_msg("claim_wait(%u,%u) = %s: %s", l, e, smoe_err_name(r), smoe_last_error());
    assert_int_equal(smoe_release(s, &b), 0);
}

/* The keys whose reads a worker began, in order (one chunk per blob). */
static _Atomic uint32_t order[64];
static _Atomic uint32_t n_order;

static void record_hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                        uint64_t b)
{
    (void)a;
    (void)b;
    if (point != SMOE__HOOK_CHUNK_READ)
        return;
    uint32_t i = atomic_fetch_add(&n_order, 1);
    if (i < 64)
        atomic_store(&order[i], smoe__w_key(smoe__slot_peek(&s->ring, slot)));
}

/* One worker held on a demand read; behind it hints of p 0.1, 0.9, 0.5,
 * 0.3 and a plain speculative prefetch, queued in a mixed order. Released,
 * the worker reads them 0.9, 0.5, 0.3, 0.1, then the plain one. */
static void ordered_by_probability(uint32_t eviction)
{
    tu_fx *f = tu_fx_new(2, EXPERTS, 16384, 16384, 3);
    static struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 16, eviction, 100);
    atomic_store(&n_order, 0);
    atomic_store(&s->hook, record_hook);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 1, 5, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 1, 0.1f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 2, 0.9f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 3, 0.5f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 4, 0.3f), SMOE_QUEUED);
    atomic_store(&fio.hold, 0);
    /* every read done before any claim: a claim's demand prefetch would
     * upgrade a queued read */
    for (int i = 0; i < 20000 && tu_stats(s).reads_done < 6; i++)
        usleep(500);
    assert_int_equal(tu_stats(s).reads_done, 6);
    claim_release(s, 0, 0);
    for (uint32_t e = 1; e <= 5; e++)
        claim_release(s, 1, e);
    atomic_store(&s->hook, NULL);
    const uint32_t want[] = {0, EXPERTS + 2, EXPERTS + 3, EXPERTS + 4, EXPERTS + 1,
                             EXPERTS + 5};
    assert_int_equal(atomic_load(&n_order), 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(atomic_load(&order[i]), want[i]);
    assert_int_equal(tu_stats(s).prefetch_hint, 4);
    assert_int_equal(tu_stats(s).spec_used, 5);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void hints_read_by_probability_reuse(void **state)
{
    (void)state;
    ordered_by_probability(SMOE_EVICT_REUSE);
}

static void hints_read_by_probability_lru(void **state)
{
    (void)state;
    ordered_by_probability(SMOE_EVICT_LRU);
}

/* Hints for layer 1 queue behind a held demand read. Layer 1's demand asks
 * for expert 1 only (joining its hinted read); the first demand prefetch
 * of layer 2 then cancels the hinted reads of experts 2 and 3, and leaves
 * the plain speculative read of expert 4 queued. */
static void contradicted_hints_cancelled(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(3, EXPERTS, 16384, 16384, 5);
    static struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 16, SMOE_EVICT_REUSE, 100);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch_hint(s, 1, 1, 0.8f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 2, 0.6f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 3, 0.4f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 1, 4, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 1, 1, 0), SMOE_INFLIGHT); /* layer 1's demand */
    assert_int_equal(tu_stats(s).hint_cancelled, 0);            /* not complete yet */
    assert_int_equal(smoe_prefetch(s, 2, 0, 0), SMOE_QUEUED);   /* now it is */
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.hint_cancelled, 2);
    assert_int_equal(st.spec_cancelled, 2);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 1, 2, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_claim(s, 1, 3, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_cancel(s, 1, 4), 0); /* the plain one was still queued */
    atomic_store(&fio.hold, 0);
    claim_release(s, 0, 0);
    claim_release(s, 1, 1);
    claim_release(s, 2, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* A hinted read a worker has started is not cancelled by its layer's
 * demand set; it completes and can still be claimed. */
static void started_hint_not_cancelled(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(3, EXPERTS, 16384, 16384, 6);
    static struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 16, SMOE_EVICT_REUSE, 100);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch_hint(s, 1, 2, 0.7f), SMOE_QUEUED);
    tu_wait_holding(&fio.holding); /* its read has started */
    assert_int_equal(smoe_prefetch(s, 1, 0, 0), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 2, 0, 0), SMOE_QUEUED);
    assert_int_equal(tu_stats(s).hint_cancelled, 0);
    atomic_store(&fio.hold, 0);
    claim_release(s, 1, 0);
    claim_release(s, 2, 0);
    claim_release(s, 1, 2);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* Four slots: retained (0,0), referenced (0,1), being read (1,0), pinned
 * and queued (1,1). Hints of probability 1 may take the retained slot
 * only: the next is skipped, and the referenced, read and pinned experts
 * are all still there with their bytes. */
static void hint_never_takes_busy_slot(uint32_t eviction)
{
    tu_fx *f = tu_fx_new(2, EXPERTS, 16384, 16384, 9);
    static struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 4, eviction, 100);
    claim_release(s, 0, 0);
    claim_release(s, 0, 1);
    smoe_blob held;
    assert_int_equal(smoe_claim(s, 0, 1, &held), SMOE_HIT);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 1, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 1, 1, 0), SMOE_QUEUED);
    int r = smoe_prefetch_hint(s, 1, 2, 1.0f);
    assert_true(r == SMOE_QUEUED || r == SMOE_SKIPPED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 3, 1.0f), SMOE_SKIPPED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 4, 1.0f), SMOE_SKIPPED);
    /* the referenced blob is unchanged */
    uint8_t *want = malloc(held.size);
    assert_non_null(want);
    synth_blob_fill(want, held.size, f->seed, 0, 1);
    assert_memory_equal(held.data, want, held.size);
    free(want);
    assert_int_equal(smoe_release(s, &held), 0);
    atomic_store(&fio.hold, 0);
    claim_release(s, 1, 0);
    claim_release(s, 1, 1);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void hint_never_takes_busy_slot_reuse(void **state)
{
    (void)state;
    hint_never_takes_busy_slot(SMOE_EVICT_REUSE);
}

static void hint_never_takes_busy_slot_lru(void **state)
{
    (void)state;
    hint_never_takes_busy_slot(SMOE_EVICT_LRU);
}

/* 16 slots at a 25% share: at most 4 speculative reads in flight, hinted
 * or plain; the fifth is skipped (counted), and a settled hint's unit
 * comes back. */
static void hints_under_speculation_cap(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(3, EXPERTS, 16384, 16384, 11);
    static struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 16, SMOE_EVICT_REUSE, 25);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 1, 7, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    for (uint32_t e = 1; e <= 3; e++)
        assert_int_equal(smoe_prefetch_hint(s, 1, e, 0.9f), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch_hint(s, 1, 4, 0.9f), SMOE_SKIPPED);
    assert_int_equal(tu_stats(s).spec_skipped, 1);
    /* layer 1's demand asks for none of them; layer 2's settles layer 1 */
    assert_int_equal(smoe_prefetch(s, 1, 0, 0), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 2, 0, 0), SMOE_QUEUED);
    assert_int_equal(tu_stats(s).hint_cancelled, 3);
    assert_int_equal(smoe_prefetch_hint(s, 1, 4, 0.9f), SMOE_QUEUED); /* units back */
    atomic_store(&fio.hold, 0);
    claim_release(s, 0, 0);
    claim_release(s, 1, 0);
    claim_release(s, 2, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* Under reuse, three retained experts of layer 0 with the same history;
 * the least recently used would go. Hinted p = 0 for the most recent and
 * 1 for the others, a demand miss of layer 1 takes the hinted-0 one. */
static void live_hint_ranks_victims(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, EXPERTS, 16384, 16384, 13);
    smoe_stream *s = open_ring(f, 3, SMOE_EVICT_REUSE, 100);
    for (uint32_t e = 0; e < 3; e++)
        claim_release(s, 0, e);
    assert_int_equal(smoe_prefetch_hint(s, 0, 0, 1.0f), SMOE_RESIDENT);
    assert_int_equal(smoe_prefetch_hint(s, 0, 1, 1.0f), SMOE_RESIDENT);
    assert_int_equal(smoe_prefetch_hint(s, 0, 2, 1.0f), SMOE_RESIDENT);
    assert_int_equal(smoe_prefetch_hint(s, 0, 2, 0.0f), SMOE_RESIDENT); /* replaces 1 */
    claim_release(s, 1, 0);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/* Under reuse, a hint below even odds fills a free slot but never displaces
 * an entry, even one ranked below it; at 0.5 and up it may. Three retained
 * experts of layer 0, (0, 2) hinted 0 (the lowest keep value, the victim
 * of the next load): a hint of 0.45 for layer 1 is skipped and (0, 2)
 * stays; one of 0.5 takes (0, 2)'s slot. On a fresh ring a hint of 0.05
 * is read into an EMPTY slot. */
static void low_hint_never_displaces(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, EXPERTS, 16384, 16384, 19);
    smoe_stream *s = open_ring(f, 3, SMOE_EVICT_REUSE, 100);
    assert_int_equal(smoe_prefetch_hint(s, 1, 7, 0.05f), SMOE_QUEUED); /* EMPTY slot */
    claim_release(s, 1, 7);
    assert_int_equal(smoe_close(s), 0);

    s = open_ring(f, 3, SMOE_EVICT_REUSE, 100);
    for (uint32_t e = 0; e < 3; e++)
        claim_release(s, 0, e);
    assert_int_equal(smoe_prefetch_hint(s, 0, 2, 0.0f), SMOE_RESIDENT);
    assert_int_equal(smoe_prefetch_hint(s, 1, 3, 0.45f), SMOE_SKIPPED);
    assert_int_equal(tu_stats(s).evictions, 0);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    int r = smoe_prefetch_hint(s, 1, 4, 0.5f);
    assert_true(r == SMOE_QUEUED || r == SMOE_INFLIGHT);
    claim_release(s, 1, 4);
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_ENOTRESIDENT);
    for (uint32_t e = 0; e < 2; e++) {
        assert_int_equal(smoe_claim(s, 0, e, &b), SMOE_HIT);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

static void bad_arguments_refused(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, EXPERTS, 16384, 16384, 17);
    smoe_stream *s = open_ring(f, 4, SMOE_EVICT_REUSE, 100);
    assert_int_equal(smoe_prefetch_hint(NULL, 0, 0, 0.5f), SMOE_EINVAL);
    assert_int_equal(smoe_prefetch_hint(s, 0, 0, -0.01f), SMOE_EINVAL);
    assert_int_equal(smoe_prefetch_hint(s, 0, 0, 1.01f), SMOE_EINVAL);
    assert_int_equal(smoe_prefetch_hint(s, 0, 0, NAN), SMOE_EINVAL);
    tu_expect_contains(smoe_last_error(), "not in [0, 1]");
    assert_int_equal(smoe_prefetch_hint(s, 2, 0, 0.5f), SMOE_ENOENT);
    assert_int_equal(smoe_prefetch_hint(s, 0, EXPERTS, 0.5f), SMOE_ENOENT);
    assert_int_equal(tu_stats(s).prefetch_hint, 0);
    assert_int_equal(smoe_shutdown(s), 0);
    assert_int_equal(smoe_prefetch_hint(s, 0, 0, 0.5f), SMOE_ESHUTDOWN);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hints_read_by_probability_reuse),
        cmocka_unit_test(hints_read_by_probability_lru),
        cmocka_unit_test(contradicted_hints_cancelled),
        cmocka_unit_test(started_hint_not_cancelled),
        cmocka_unit_test(hint_never_takes_busy_slot_reuse),
        cmocka_unit_test(hint_never_takes_busy_slot_lru),
        cmocka_unit_test(hints_under_speculation_cap),
        cmocka_unit_test(live_hint_ranks_victims),
        cmocka_unit_test(low_hint_never_displaces),
        cmocka_unit_test(bad_arguments_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
