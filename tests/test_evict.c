/*
 * Description: the ring's eviction policies through the public API. Under
 * lru and reuse alike, a load never takes a slot that is referenced,
 * loading or pinned by an unclaimed demand prefetch (a full ring refuses
 * demand with SMOE_EFULL); every scan looks at each slot at most once.
 * With one worker and one host thread, the library's hits and misses are
 * those of the offline replay of the same policy (tools/smoe/sim/sim_policy.c)
 * request by request on a generated routing sequence, and two runs make
 * the same choices. The reuse policy counts one visit per layer step,
 * also when an engine prefetches a layer ahead, and learns from every
 * demand request, also one a claim_wait makes; under reuse, speculation
 * never displaces an entry worth more than the speculated expert.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "policy/evict_reuse.h"
#include "sim_policy.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull

static tu_fx *fx_new(uint32_t layers, uint32_t experts)
{
    return tu_fx_new(layers, experts, 16384, 16384, 7);
}

static void claim_release(smoe_stream *s, uint32_t l, uint32_t e)
{
    smoe_blob b;
    int r = smoe_claim_wait(s, l, e, 10 * SEC, &b);
    if (r < 0)
        fail_msg("claim_wait(%u,%u) = %s: %s", l, e, smoe_err_name(r), smoe_last_error());
    assert_int_equal(smoe_release(s, &b), 0);
}

/* Four slots: one retained, one referenced, one being read, one pinned by
 * a queued demand read. Only the retained one may go. Under lru a
 * speculative read takes it, and then demand may cancel that queued read;
 * under reuse speculation may not displace the retained expert (it was
 * asked for, the speculated one never was), and demand takes it. Then the
 * ring is full. */
static void only_idle_slots_are_taken(uint32_t eviction)
{
    tu_fx *f = fx_new(2, 8);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = tu_open_ring(f->path, 4, 1, eviction);
    assert_int_equal(tu_stats(s).eviction, eviction);

    claim_release(s, 0, 0);
    claim_release(s, 0, 1);
    smoe_blob held;
    assert_int_equal(smoe_claim(s, 0, 1, &held), SMOE_HIT); /* referenced */
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 1, 0, 0), SMOE_QUEUED); /* being read */
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 1, 1, 0), SMOE_QUEUED); /* pinned, queued */

    smoe_blob b;
    if (eviction == SMOE_EVICT_LRU) {
        /* Speculation may only take the retained slot. */
        assert_int_equal(smoe_prefetch(s, 1, 2, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
        assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ENOTRESIDENT);
    } else {
        /* Nothing worth less than the speculated expert: skipped. */
        assert_int_equal(smoe_prefetch(s, 1, 2, SMOE_PREFETCH_SPECULATIVE), SMOE_SKIPPED);
        assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_HIT);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    /* Demand may take the retained slot or cancel a queued speculative
     * read, and nothing else. */
    assert_int_equal(smoe_prefetch(s, 1, 3, 0), SMOE_QUEUED);
    assert_int_equal(tu_stats(s).spec_cancelled, eviction == SMOE_EVICT_LRU);
    assert_int_equal(smoe_prefetch(s, 1, 4, 0), SMOE_EFULL);
    assert_int_equal(smoe_prefetch(s, 1, 4, SMOE_PREFETCH_SPECULATIVE), SMOE_SKIPPED);

    atomic_store(&fio.hold, 0);
    claim_release(s, 1, 0);
    claim_release(s, 1, 1);
    claim_release(s, 1, 3);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.evictions, eviction == SMOE_EVICT_LRU ? 2 : 1);
    assert_true(st.evict_scans >= 3);
    assert_true(st.evict_scanned <= st.evict_scans * st.slots); /* one pass each */
    assert_int_equal(smoe_release(s, &held), 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void lru_takes_only_idle_slots(void **state)
{
    (void)state;
    only_idle_slots_are_taken(SMOE_EVICT_LRU);
}

static void reuse_takes_only_idle_slots(void **state)
{
    (void)state;
    only_idle_slots_are_taken(SMOE_EVICT_REUSE);
}

/* ---- the library against the offline replay ---------------------------- */

#define L 4u
#define E 8u
#define K 2u
#define TOKENS 400u

static int taken(const uint32_t *got, uint32_t n, uint32_t e)
{
    for (uint32_t i = 0; i < n; i++)
        if (got[i] == e)
            return 1;
    return 0;
}

/* Decode steps: for each token, each layer asks for K distinct experts,
 * skewed towards low expert numbers and often the previous token's. */
static void make_steps(simp_steps *st)
{
    memset(st, 0, sizeof *st);
    st->layers = L;
    st->experts = E;
    st->n_steps = (size_t)TOKENS * L;
    st->layer = calloc(st->n_steps, sizeof *st->layer);
    st->off = calloc(st->n_steps + 1, sizeof *st->off);
    st->keys = calloc(st->n_steps * K, sizeof *st->keys);
    assert_true(st->layer && st->off && st->keys);
    uint64_t x = 12345;
    uint32_t prev[L][K];
    size_t n = 0;
    for (uint32_t t = 0; t < TOKENS; t++)
        for (uint32_t l = 0; l < L; l++) {
            size_t step = (size_t)t * L + l;
            st->layer[step] = l;
            st->off[step] = n;
            uint32_t got[K];
            for (uint32_t j = 0; j < K; j++) {
                uint32_t e;
                do {
                    uint64_t r = synth_splitmix64(&x);
                    if (t > 0 && r % 100 < 45)
                        e = prev[l][(r >> 8) % K];
                    else {
                        uint32_t a = (uint32_t)((r >> 16) % E), b = (uint32_t)((r >> 32) % E);
                        e = a < b ? a : b; /* skewed to small numbers */
                    }
                } while (taken(got, j, e));
                got[j] = e;
                st->keys[n++] = l * E + e;
            }
            memcpy(prev[l], got, sizeof got);
        }
    st->off[st->n_steps] = n;
}

/* Hits per request of the offline replay, from its victims. */
static uint8_t *sim_hits(const simp_steps *st, uint32_t slots, simp_policy policy)
{
    size_t n = simp_steps_requests(st);
    uint32_t *victims = calloc(n, sizeof *victims);
    uint8_t *hit = calloc(n, 1), *cached = calloc((size_t)L * E, 1);
    assert_true(victims && hit && cached);
    simp_params p;
    simp_params_default(&p, policy);
    sim_result res;
    assert_int_equal(simp_run(st, slots, &p, &res, victims, NULL), 0);
    for (size_t r = 0; r < n; r++) {
        uint32_t k = st->keys[r];
        hit[r] = cached[k];
        if (victims[r] != SIMP_NONE)
            cached[victims[r]] = 0;
        cached[k] = 1;
    }
    free(victims);
    free(cached);
    return hit;
}

/* Hits per request of the library: each step prefetches its experts, then
 * claims and releases them, as an engine runs a layer. */
static uint8_t *lib_hits(const tu_fx *f, const simp_steps *st, uint32_t slots,
                         uint32_t eviction, smoe_stats *out)
{
    size_t n = simp_steps_requests(st);
    uint8_t *hit = calloc(n, 1);
    assert_non_null(hit);
    smoe_stream *s = tu_open_ring(f->path, slots, 1, eviction);
    for (size_t step = 0; step < st->n_steps; step++) {
        for (size_t r = st->off[step]; r < st->off[step + 1]; r++) {
            uint32_t k = st->keys[r];
            int p = smoe_prefetch(s, k / E, k % E, 0);
            assert_true(p == SMOE_RESIDENT || p == SMOE_QUEUED);
            hit[r] = p == SMOE_RESIDENT;
        }
        for (size_t r = st->off[step]; r < st->off[step + 1]; r++)
            claim_release(s, st->keys[r] / E, st->keys[r] % E);
    }
    *out = tu_stats(s);
    assert_int_equal(smoe_close(s), 0);
    return hit;
}

static void matches_replay(uint32_t eviction, simp_policy policy)
{
    tu_fx *f = fx_new(L, E);
    simp_steps st;
    make_steps(&st);
    size_t n = simp_steps_requests(&st);
    /* 6 slots: under one token's working set (L x K = 8); 12: above it. */
    static const uint32_t sizes[] = {6, 12};
    uint64_t all_hits = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *want = sim_hits(&st, sizes[i], policy);
        smoe_stats s1, s2;
        uint8_t *got = lib_hits(f, &st, sizes[i], eviction, &s1);
        uint64_t hits = 0;
        for (size_t r = 0; r < n; r++) {
            if (got[r] != want[r])
                fail_msg("%u slots, request %zu (step %zu): library %s, replay %s", sizes[i],
                         r, r / K, got[r] ? "hit" : "miss", want[r] ? "hit" : "miss");
            hits += got[r];
        }
        assert_true(hits < n);
        all_hits += hits;
        assert_int_equal(s1.hits, hits);
        assert_true(s1.evict_scanned <= s1.evict_scans * s1.slots);
        if (eviction == SMOE_EVICT_REUSE) {
            assert_true(s1.reuse_examples > 0);
            assert_true(s1.evict_rescored > 0);
        }
        /* Deterministic: a second run makes the same choices. */
        uint8_t *again = lib_hits(f, &st, sizes[i], eviction, &s2);
        assert_memory_equal(got, again, n);
        assert_int_equal(s2.reuse_examples, s1.reuse_examples);
        free(again);
        free(got);
        free(want);
    }
    assert_true(all_hits > 0);
    simp_steps_free(&st);
    tu_fx_free(f);
}

static void lru_matches_replay(void **state)
{
    (void)state;
    matches_replay(SMOE_EVICT_LRU, SIMP_LRU);
}

static void reuse_matches_replay(void **state)
{
    (void)state;
    matches_replay(SMOE_EVICT_REUSE, SIMP_REUSE);
}

/* reuse beats lru on a layer cycle that does not fit (the looping pattern
 * where LRU evicts exactly what comes round next). */
static void reuse_beats_lru_on_a_loop(void **state)
{
    (void)state;
    tu_fx *f = fx_new(L, E);
    simp_steps st;
    make_steps(&st);
    smoe_stats lru, reuse;
    free(lib_hits(f, &st, 6, SMOE_EVICT_LRU, &lru));
    free(lib_hits(f, &st, 6, SMOE_EVICT_REUSE, &reuse));
    assert_true(reuse.hits > lru.hits);
    simp_steps_free(&st);
    tu_fx_free(f);
}

/* ---- visits ---------------------------------------------------------------- */

static void visits_follow_layer_steps(void **state)
{
    (void)state;
    tu_fx *f = fx_new(L, E);
    smoe_stream *s = tu_open_ring(f->path, 8, 1, SMOE_EVICT_REUSE);
    smoe__reuse *r = s->reuse;
    assert_non_null(r);
    /* Three tokens of decode: one visit per layer step. */
    for (uint32_t t = 0; t < 3; t++)
        for (uint32_t l = 0; l < L; l++) {
            smoe__reuse_visit(r, l);
            smoe__reuse_visit(r, l); /* the layer's other experts */
        }
    for (uint32_t l = 0; l < L; l++)
        assert_int_equal(atomic_load(&r->visits[l]), 3);
    assert_int_equal(atomic_load(&r->vclock), 3 * L);
    /* An engine that prefetches the next layer while finishing this one:
     * 0 1 0 1 2 1 2 3 2 3 is still one more visit of each layer. */
    static const uint32_t seq[] = {0, 1, 0, 1, 2, 1, 2, 3, 2, 3};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++)
        smoe__reuse_visit(r, seq[i]);
    for (uint32_t l = 0; l < L; l++)
        assert_int_equal(atomic_load(&r->visits[l]), 4);
    assert_int_equal(atomic_load(&r->vclock), 4 * L);
    /* Speculative prefetches and claims of what is loaded begin no visit. */
    assert_int_equal(smoe_prefetch(s, 1, 0, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    for (int i = 0; i < 20000 && tu_stats(s).slots_loading; i++)
        usleep(500);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 1, 0, &b), SMOE_READY);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(atomic_load(&r->vclock), 4 * L);
    assert_int_equal(atomic_load(&r->cur), 3);
    /* A claim_wait that has to ask for its expert is a demand request. */
    claim_release(s, 0, 5);
    assert_int_equal(atomic_load(&r->vclock), 4 * L + 1);
    assert_int_equal(atomic_load(&r->cur), 0);
    assert_int_equal(atomic_load(&r->use[5]) >> 8, 5); /* used at visit 5 */
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

static void bad_eviction_option(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 2);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.eviction = SMOE_EVICT_REUSE + 1;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(f->path, &o, &s), SMOE_EINVAL);
    assert_null(s);
    assert_non_null(strstr(smoe_last_error(), "opts.eviction"));
    /* The default is reported as the policy it resolves to. */
    o.eviction = SMOE_EVICT_DEFAULT;
    o.ring_slots = 2;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    assert_int_equal(tu_stats(s).eviction, SMOE__DEFAULT_EVICTION);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lru_takes_only_idle_slots),
        cmocka_unit_test(reuse_takes_only_idle_slots),
        cmocka_unit_test(lru_matches_replay),
        cmocka_unit_test(reuse_matches_replay),
        cmocka_unit_test(reuse_beats_lru_on_a_loop),
        cmocka_unit_test(visits_follow_layer_steps),
        cmocka_unit_test(bad_eviction_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
