/*
 * Description: the pre-warm thread. It fills the ring with the hottest
 * experts of the loaded histogram first, in order, one read in flight at
 * a time, up to the ring minus
 * the working-set reserve (nothing on a ring of 128 slots or fewer, nothing
 * when disabled), without counting against the speculative cap; its reads
 * later claimed count as pre-warm hits. smoe_set_busy(1) stops new
 * pre-warm reads at once and smoe_set_busy(0) resumes them (checked
 * through smoe_stats); between requests it re-warms the session's own
 * favourites. It never evicts a slot demand loaded after its pass began
 * nor one whose expert is no colder than the one it loads (the pre-warm
 * victim pick, directly and through a running pass).
 * smoe_shutdown stops it issuing reads, and smoe_close joins it cleanly
 * while reads are in flight (run under ThreadSanitizer too).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "fill/freq.h"
#include "internal.h"
#include "platform/park.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull
#define LAYERS 2u
#define EXPERTS 200u
#define N (LAYERS * EXPERTS)

static char *g_dir;
static char g_vault[600], g_freq[620];
static smoe__vault g_v; /* the vault's table, for blob offsets */

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tmpdir();
    snprintf(g_vault, sizeof g_vault, "%s/pw.smoe", g_dir);
    snprintf(g_freq, sizeof g_freq, "%s.freq", g_vault);
    if (tu_make_vault(g_vault, LAYERS, EXPERTS, 4000, 16384, 5) != 0)
        return -1;
    return smoe__vault_load(&g_v, g_vault, smoe__io_get());
}

static int teardown(void **state)
{
    (void)state;
    smoe__vault_free(&g_v);
    tu_rmdir(g_dir);
    free(g_dir);
    return 0;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Distinct counts 1..N in a scrambled order: key k has heat(k). */
static uint64_t heat(uint32_t k)
{
    return (uint64_t)k * 7919 % N + 1;
}

/* The key of rank r (0: hottest). */
static uint32_t key_of_rank(uint32_t r)
{
    for (uint32_t k = 0; k < N; k++)
        if (heat(k) == N - r)
            return k;
    fail_msg("no key of rank %u", r);
    return 0;
}

static void write_hist(void)
{
    smoe__freq_id id = {g_v.layers, g_v.experts, g_v.vault_id, g_v.file_size};
    uint64_t counts[N];
    for (uint32_t k = 0; k < N; k++)
        counts[k] = heat(k);
    unsigned char buf[SMOE__FREQ_HEADER_SIZE + 8 * N];
    smoe__freq_encode(buf, &id, counts);
    FILE *f = fopen(g_freq, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, sizeof buf, f), sizeof buf);
    fclose(f);
}

static smoe_stream *open_pw(uint32_t slots, uint32_t workers, uint32_t pause_us,
                            unsigned flags)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = slots;
    o.workers = workers;
    o.prewarm_pause_us = pause_us;
    /* The requests below push experts out in least-recently-used order;
     * pre-warm's own victim choice does not depend on the policy. */
    o.eviction = SMOE_EVICT_LRU;
    o.flags = flags | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    int r = smoe_open(g_vault, &o, &s);
    if (r != 0)
        fail_msg("smoe_open: %s: %s", smoe_err_name(r), smoe_last_error());
    return s;
}

/* Wait (up to 20 s) until pred holds. */
static void wait_for(smoe_stream *s, int (*pred)(const smoe_stats *, uint64_t), uint64_t arg,
                     const char *what)
{
    for (int i = 0; i < 20000; i++) {
        smoe_stats st = tu_stats(s);
        if (pred(&st, arg))
            return;
        sleep_ms(1);
    }
    fail_msg("timed out waiting for %s", what);
}

/* At least arg passes done and no read in flight. */
static int passes_settled(const smoe_stats *st, uint64_t arg)
{
    return st->prewarm_passes >= arg && st->slots_loading == 0;
}

static int reads_at_least(const smoe_stats *st, uint64_t arg)
{
    return st->prewarm_reads >= arg;
}

static uint32_t layer_of(uint32_t k) { return k / EXPERTS; }
static uint32_t expert_of(uint32_t k) { return k % EXPERTS; }

static int claim_key(smoe_stream *s, uint32_t k)
{
    smoe_blob b;
    int r = smoe_claim(s, layer_of(k), expert_of(k), &b);
    if (r >= 0)
        assert_int_equal(smoe_release(s, &b), 0);
    return r;
}

/* ---- hottest first ---------------------------------------------------------- */

static void t_hottest_first(void **state)
{
    (void)state;
    write_hist();
    static struct fault_io f;
    fault_io_install(&f);
    /* 160 slots keep max(128, 40) = 128 for the working set: 32 to warm. */
    smoe_stream *s = open_pw(160, 1, 1, 0);
    wait_for(s, passes_settled, 1, "the first pass");
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.freq_status, SMOE_FREQ_LOADED);
    assert_int_equal(st.prewarm_slots, 32);
    assert_int_equal(st.prewarm_reads, 32);
    assert_int_equal(st.slots_ready, 32);
    assert_int_equal(st.slots_empty, 128);
    assert_int_equal(st.spec_queued, 0);
    assert_int_equal(st.prewarm_hits, 0);

    /* Read in heat order: with one worker the reads land as issued. */
    uint32_t nlog = atomic_load(&f.nlog);
    assert_true(nlog >= 32 && nlog <= 4096);
    for (uint32_t r = 0; r < 32; r++) {
        uint64_t off = atomic_load(&f.log[nlog - 32 + r]);
        uint64_t want = g_v.index[key_of_rank(r)].offset;
        if (off != want)
            fail_msg("read %u of the pass at offset %llu, want the rank-%u expert at %llu", r,
                     (unsigned long long)off, r, (unsigned long long)want);
    }
    /* The 32 hottest are resident, READY from pre-warm; the 33rd is not. */
    for (uint32_t r = 0; r < 32; r++)
        assert_int_equal(claim_key(s, key_of_rank(r)), SMOE_READY);
    assert_int_equal(claim_key(s, key_of_rank(32)), SMOE_ENOTRESIDENT);
    st = tu_stats(s);
    assert_int_equal(st.prewarm_hits, 32);
    assert_int_equal(st.prewarm_reads, 32);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
}

static void t_not_speculative_cap(void **state)
{
    (void)state;
    write_hist();
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 1024; /* 768 to warm: every one of the 400 experts */
    o.workers = 2;
    o.prewarm_pause_us = 1;
    o.spec_share_pct = 1; /* 10 speculative reads at most */
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    assert_int_equal(smoe_open(g_vault, &o, &s), 0);
    wait_for(s, passes_settled, 1, "the first pass");
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.prewarm_slots, 768);
    assert_int_equal(st.prewarm_reads, N);
    assert_int_equal(st.spec_skipped, 0);
    assert_int_equal(st.slots_ready, N);
    assert_int_equal(smoe_close(s), 0);
}

static void t_small_ring_and_off(void **state)
{
    (void)state;
    write_hist();
    /* 128 slots: all of them are the working set's reserve. */
    smoe_stream *s = open_pw(128, 1, 1, 0);
    sleep_ms(50);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.prewarm_slots, 0);
    assert_int_equal(st.prewarm_reads, 0);
    assert_int_equal(st.slots_empty, 128);
    assert_int_equal(smoe_close(s), 0);
    /* 171 slots keep 128 and warm 43. */
    s = open_pw(171, 1, 1, 0);
    assert_int_equal(tu_stats(s).prewarm_slots, 43);
    assert_int_equal(smoe_close(s), 0);
    /* 1000 slots keep 250. */
    s = open_pw(1000, 1, 1, SMOE_OPEN_NO_FREQ);
    assert_int_equal(tu_stats(s).prewarm_slots, 750);
    assert_int_equal(smoe_close(s), 0);
    /* Disabled. */
    s = open_pw(1024, 1, 1, SMOE_OPEN_NO_PREWARM);
    sleep_ms(50);
    st = tu_stats(s);
    assert_int_equal(st.prewarm_slots, 0);
    assert_int_equal(st.prewarm_reads, 0);
    assert_int_equal(st.slots_empty, 1024);
    assert_int_equal(smoe_close(s), 0);
}

static void t_one_read_at_a_time(void **state)
{
    (void)state;
    write_hist();
    static struct fault_io f;
    fault_io_install(&f);
    f.delay_us = 3000; /* every read takes 3 ms, longer than the pause */
    /* 4 workers could run 4 reads at once; pre-warm keeps one in flight. */
    smoe_stream *s = open_pw(160, 4, 1, 0);
    uint64_t most = 0;
    for (int i = 0; i < 20000; i++) {
        smoe_stats st = tu_stats(s);
        if (st.slots_loading > most)
            most = st.slots_loading;
        if (st.prewarm_passes >= 1 && st.slots_loading == 0)
            break;
        sleep_ms(1);
    }
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.prewarm_passes, 1);
    assert_int_equal(st.prewarm_reads, 32);
    assert_true(most >= 1);
    if (most > 1)
        fail_msg("%llu pre-warm reads were loading at once", (unsigned long long)most);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
}

/* ---- busy ------------------------------------------------------------------ */

static void t_busy_stops_reads(void **state)
{
    (void)state;
    write_hist();
    /* 20 ms between reads: a whole pass would take 8 s. */
    smoe_stream *s = open_pw(1024, 2, 20000, 0);
    wait_for(s, reads_at_least, 2, "two pre-warm reads");
    assert_int_equal(smoe_set_busy(s, 1), 0);
    uint64_t r1 = tu_stats(s).prewarm_reads;
    sleep_ms(150);
    assert_int_equal(tu_stats(s).prewarm_reads, r1);
    /* Demand is served while busy. */
    smoe_blob b;
    uint32_t cold = key_of_rank(N - 1);
    assert_true(smoe_claim_wait(s, layer_of(cold), expert_of(cold), 10 * SEC, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    sleep_ms(50);
    assert_int_equal(tu_stats(s).prewarm_reads, r1);

    /* Idle again: a new pass resumes. */
    assert_int_equal(smoe_set_busy(s, 0), 0);
    wait_for(s, reads_at_least, r1 + 2, "pre-warm to resume");
    assert_int_equal(smoe_set_busy(s, 1), 0);
    uint64_t r2 = tu_stats(s).prewarm_reads;
    sleep_ms(100);
    assert_int_equal(tu_stats(s).prewarm_reads, r2);
    /* Repeated busy calls change nothing. */
    assert_int_equal(smoe_set_busy(s, 1), 0);
    sleep_ms(30);
    assert_int_equal(tu_stats(s).prewarm_reads, r2);
    assert_int_equal(smoe_close(s), 0);
    assert_int_equal(smoe_set_busy(NULL, 1), SMOE_EINVAL);
}

static void t_between_requests(void **state)
{
    (void)state;
    unlink(g_freq); /* no history: the first pass has nothing to do */
    smoe_stream *s = open_pw(160, 2, 1, 0);
    wait_for(s, passes_settled, 1, "the empty first pass");
    assert_int_equal(tu_stats(s).prewarm_reads, 0);

    /* A request: ten favourites claimed three times each, then 160 others
     * once, which push the favourites out of the ring. */
    assert_int_equal(smoe_set_busy(s, 1), 0);
    smoe_blob b;
    for (int rep = 0; rep < 3; rep++)
        for (uint32_t k = 0; k < 10; k++) {
            assert_true(smoe_claim_wait(s, layer_of(k), expert_of(k), 10 * SEC, &b) >= 0);
            assert_int_equal(smoe_release(s, &b), 0);
        }
    for (uint32_t k = 100; k < 260; k++) {
        assert_true(smoe_claim_wait(s, layer_of(k), expert_of(k), 10 * SEC, &b) >= 0);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    for (uint32_t k = 0; k < 10; k++)
        assert_int_equal(claim_key(s, k), SMOE_ENOTRESIDENT);
    assert_int_equal(tu_stats(s).prewarm_reads, 0);

    /* Between requests the favourites come back, each in place of one of
     * the once-claimed experts; those are not traded for each other. */
    assert_int_equal(smoe_set_busy(s, 0), 0);
    wait_for(s, passes_settled, 2, "the pass between requests");
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.prewarm_reads, 10);
    for (uint32_t k = 0; k < 10; k++)
        assert_int_equal(claim_key(s, k), SMOE_READY);
    assert_int_equal(tu_stats(s).prewarm_hits, 10);
    assert_int_equal(smoe_close(s), 0);
    unlink(g_freq);
}

/* ---- what pre-warm may evict ---------------------------------------------------- */

static void t_pick_floor(void **state)
{
    (void)state;
    smoe_stream *s = open_pw(8, 1, 1, SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ);
    smoe_blob b;
    for (uint32_t k = 0; k < 8; k++) {
        assert_true(smoe_claim_wait(s, layer_of(k), expert_of(k), 10 * SEC, &b) >= 0);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    /* Slot of the least recently used: the first expert loaded. */
    uint32_t lru = smoe__map_slot(atomic_load(&s->map[0]));
    uint64_t lru_tick = atomic_load(&s->ring.tick[lru]);
    const uint32_t hot = 50; /* the expert pre-warm wants to load */
    atomic_store(&s->freq.count[hot], 100);
    uint32_t v;
    uint64_t w;

    /* A pass that began after all of them: the LRU one is its victim. */
    atomic_store(&s->topup.floor, atomic_load(&s->clock));
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 1);
    assert_int_equal(v, lru);
    /* A pass that began before every one of them was last used: none. */
    atomic_store(&s->topup.floor, lru_tick);
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 0);
    /* Only the LRU one is older than the pass. */
    atomic_store(&s->topup.floor, lru_tick + 1);
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 1);
    assert_int_equal(v, lru);

    /* Among old slots, the expert with the fewest claims goes first. */
    atomic_store(&s->topup.floor, atomic_load(&s->clock));
    atomic_store(&s->freq.count[0], 40);
    uint32_t cold = smoe__map_slot(atomic_load(&s->map[5]));
    atomic_store(&s->freq.count[5], 0);
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 1);
    assert_int_equal(v, cold);
    /* Never an expert at least as popular as the one loaded. */
    for (uint32_t k = 0; k < 8; k++)
        atomic_store(&s->freq.count[k], 100);
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 0);
    atomic_store(&s->freq.count[3], 99);
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 1);
    assert_int_equal(v, smoe__map_slot(atomic_load(&s->map[3])));

    /* A referenced slot is never a victim, however old and cold. */
    for (uint32_t k = 0; k < 8; k++)
        atomic_store(&s->freq.count[k], 1);
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_HIT);
    atomic_store(&s->ring.tick[lru], 0);
    atomic_store(&s->freq.count[0], 0);
    assert_int_equal(smoe__evict_pick_topup(s, hot, &v, &w), 1);
    assert_int_not_equal(v, lru);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
}

static void t_keeps_newer_demand(void **state)
{
    (void)state;
    write_hist();
    /* 160 slots, 32 to warm, 100 ms between pre-warm reads: demand's 140
     * loads end long before pre-warm could fill the 20 slots left. */
    smoe_stream *s = open_pw(160, 2, 100000, 0);
    wait_for(s, reads_at_least, 1, "the pass to begin");
    /* While the pass runs, demand loads 140 of the coldest experts. */
    smoe_blob b;
    for (uint32_t r = N - 140; r < N; r++) {
        uint32_t k = key_of_rank(r);
        assert_true(smoe_claim_wait(s, layer_of(k), expert_of(k), 10 * SEC, &b) >= 0);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    /* The pass fills what is empty, then finds nothing older than itself
     * to evict and ends. */
    wait_for(s, passes_settled, 1, "the pass to end");
    for (uint32_t r = N - 140; r < N; r++)
        if (claim_key(s, key_of_rank(r)) != SMOE_HIT)
            fail_msg("pre-warm evicted the rank-%u expert demand loaded during its pass", r);
    smoe_stats st = tu_stats(s);
    assert_true(st.prewarm_reads <= 20);
    assert_true(st.prewarm_reads >= 1);
    assert_int_equal(st.slots_empty, 0);
    assert_int_equal(st.evictions, 0); /* nobody took a slot from anybody */
    assert_int_equal(smoe_close(s), 0);
}

/* ---- shutdown and close ------------------------------------------------------- */

static void t_shutdown_stops(void **state)
{
    (void)state;
    write_hist();
    smoe_stream *s = open_pw(1024, 2, 5000, 0);
    wait_for(s, reads_at_least, 2, "two pre-warm reads");
    assert_int_equal(smoe_shutdown(s), 0);
    uint64_t r1 = tu_stats(s).prewarm_reads;
    sleep_ms(60);
    assert_int_equal(tu_stats(s).prewarm_reads, r1);
    assert_int_equal(smoe_close(s), 0);
}

static void t_close_in_flight(void **state)
{
    (void)state;
    write_hist();
    static struct fault_io f;
    for (int round = 0; round < 3; round++) {
        fault_io_install(&f);
        f.delay_us = 20000; /* every read takes 20 ms: some are in flight at close */
        smoe_stream *s = open_pw(1024, 2, 1, 0);
        wait_for(s, reads_at_least, 3, "three pre-warm reads");
        uint64_t t0 = smoe__now_ns();
        assert_int_equal(smoe_close(s), 0);
        uint64_t ns = smoe__now_ns() - t0;
        if (ns > 5 * SEC)
            fail_msg("close took %llu ms", (unsigned long long)(ns / 1000000));
        fault_io_remove();
    }
    /* Closed at once after open, before the first pass got anywhere. */
    for (int round = 0; round < 20; round++) {
        smoe_stream *s = open_pw(1024, 2, 1, 0);
        assert_int_equal(smoe_close(s), 0);
    }
}

/* A test that fails half-way must not leave its fault table to the next. */
static int remove_faults(void **state)
{
    (void)state;
    fault_io_remove();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(t_hottest_first, remove_faults),
        cmocka_unit_test_teardown(t_not_speculative_cap, remove_faults),
        cmocka_unit_test_teardown(t_small_ring_and_off, remove_faults),
        cmocka_unit_test_teardown(t_one_read_at_a_time, remove_faults),
        cmocka_unit_test_teardown(t_busy_stops_reads, remove_faults),
        cmocka_unit_test_teardown(t_between_requests, remove_faults),
        cmocka_unit_test_teardown(t_pick_floor, remove_faults),
        cmocka_unit_test_teardown(t_keeps_newer_demand, remove_faults),
        cmocka_unit_test_teardown(t_shutdown_stops, remove_faults),
        cmocka_unit_test_teardown(t_close_in_flight, remove_faults),
    };
    return cmocka_run_group_tests_name("prewarm", tests, setup, teardown);
}
