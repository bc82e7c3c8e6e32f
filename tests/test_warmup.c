/*
 * Description: smoe_warmup, smoe_warmup_wait, smoe_warmup_cancel. The
 * warm-up chooses the experts by claim count, then layer order, as many as
 * the ring's empty slots (a ring smaller than the vault keeps exactly the
 * likeliest, evicting nothing); each worker reads its own contiguous share
 * of the vault in file order; a demand read queued while the warm-up runs
 * is read next, before any further warm-up chunk; cancel returns only
 * once the load in progress has landed and nothing more is read; the
 * statistics count experts, bytes and rate; smoe_shutdown during a
 * warm-up ends smoe_warmup_wait with SMOE_ESHUTDOWN and close is clean;
 * with verification on, a parked worker takes the hashing of a landed
 * load (a verify token) and a corrupt blob still fails its checksum; bad
 * arguments are refused with their error.
 */
#include <pthread.h>
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

#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define LAYERS 2u
#define EXPERTS 16u
#define N (LAYERS * EXPERTS)
#define MAXREC 4096

static char *g_dir;
static char g_vault[600], g_freq[620];

/* What the hook saw: each chunk read's key and thread, in order. */
static _Atomic uint32_t g_nrec;
static uint32_t g_rec_key[MAXREC];
static pthread_t g_rec_thread[MAXREC];
/* Hold: the hook parks the first (hold_first) or every chunk read while
 * g_hold is set; g_holding says one is held. */
static atomic_int g_hold, g_hold_first, g_holding;

static void hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    if (point != SMOE__HOOK_CHUNK_READ)
        return;
    uint32_t i = atomic_fetch_add(&g_nrec, 1);
    if (i < MAXREC) {
        g_rec_key[i] = smoe__w_key(smoe__slot_peek(&s->ring, slot));
        g_rec_thread[i] = pthread_self();
    }
    if (atomic_load(&g_hold) && (!atomic_load(&g_hold_first) || i == 0)) {
        atomic_store(&g_holding, 1);
        while (atomic_load(&g_hold))
            usleep(200);
        atomic_store(&g_holding, 0);
    }
}

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tmpdir();
    snprintf(g_vault, sizeof g_vault, "%s/wu.smoe", g_dir);
    snprintf(g_freq, sizeof g_freq, "%s/wu.freq", g_dir);
    return tu_make_vault(g_vault, LAYERS, EXPERTS, 4000, 40000, 11);
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(g_dir);
    free(g_dir);
    return 0;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A stream with the hook installed and the record cleared; no pre-warm,
 * a histogram file of its own (absent: counts start at zero), verified. */
static smoe_stream *open_s(uint32_t slots, uint32_t workers)
{
    unlink(g_freq);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = slots;
    o.workers = workers;
    o.verify = SMOE_VERIFY_ON;
    o.freq_path = g_freq;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    int r = smoe_open(g_vault, &o, &s);
    if (r != 0)
        fail_msg("smoe_open: %s: %s", smoe_err_name(r), smoe_last_error());
    atomic_store(&g_nrec, 0);
    atomic_store(&g_hold, 0);
    atomic_store(&g_hold_first, 0);
    atomic_store(&g_holding, 0);
    atomic_store(&s->hook, hook);
    return s;
}

static void close_s(smoe_stream *s)
{
    atomic_store(&g_hold, 0);
    unlink(g_freq);
    assert_int_equal(smoe_close(s), 0);
}

/* 1 if (layer, expert) of key is resident: a claim succeeds (released). */
static int resident(smoe_stream *s, uint32_t key)
{
    smoe_blob b;
    int r = smoe_claim(s, key / EXPERTS, key % EXPERTS, &b);
    if (r < 0) {
        assert_int_equal(r, SMOE_ENOTRESIDENT);
        return 0;
    }
    assert_int_equal(smoe_release(s, &b), 0);
    return 1;
}

static uint64_t offset_of(smoe_stream *s, uint32_t key)
{
    return s->vault.index[key].offset;
}

/* Each thread's chunk reads go up the file, and the threads' ranges do not
 * interleave: contiguous shares. */
static void check_shares(smoe_stream *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = i + 1; j < n; j++) {
            uint64_t oi = offset_of(s, g_rec_key[i]), oj = offset_of(s, g_rec_key[j]);
            if (pthread_equal(g_rec_thread[i], g_rec_thread[j])) {
                assert_true(oi < oj);
                continue;
            }
            /* another thread: every read of one lies below every read of
             * the other, so both orders of the pair agree with the first */
            for (uint32_t k = 0; k < n; k++) {
                if (!pthread_equal(g_rec_thread[k], g_rec_thread[i]))
                    continue;
                uint64_t ok = offset_of(s, g_rec_key[k]);
                assert_true((ok < oj) == (oi < oj));
            }
        }
    }
}

/* Ring smaller than the vault: the 8 likeliest experts (claim counts, then
 * layer order) and only they, nothing evicted, each worker's share read up
 * the file. */
static void t_order_small_ring(void **state)
{
    (void)state;
    smoe_stream *s = open_s(8, 2);
    atomic_store(&s->freq.count[20], 9);
    atomic_store(&s->freq.count[3], 5);
    atomic_store(&s->freq.count[31], 5);
    atomic_store(&s->freq.count[7], 1);
    const uint32_t want[8] = {0, 1, 2, 3, 4, 7, 20, 31};
    smoe_warmup_opts o = SMOE_WARMUP_OPTS_INIT;
    assert_int_equal(smoe_warmup(s, &o), 8);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.warmup_running, 0);
    assert_int_equal(st.warmup_experts, 8);
    assert_int_equal(st.warmup_loaded, 8);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.slots_empty, 0);
    uint32_t n = atomic_load(&g_nrec);
    assert_int_equal(n, 8);
    check_shares(s, n);
    for (uint32_t k = 0, w = 0; k < N; k++) {
        int in = w < 8 && want[w] == k;
        w += (uint32_t)in;
        assert_int_equal(resident(s, k), in);
    }
    /* Nothing empty is left: a second warm-up has nothing to do. */
    assert_int_equal(smoe_warmup(s, NULL), 0);
    close_s(s);
}

/* The whole vault, four streams: every expert loaded and verified, the
 * statistics add up. */
static void t_stats_whole_vault(void **state)
{
    (void)state;
    smoe_stream *s = open_s(64, 4);
    assert_int_equal(smoe_warmup(s, NULL), (int)N);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    smoe_stats st = tu_stats(s);
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < N; k++)
        bytes += s->vault.index[k].padded;
    assert_int_equal(st.warmup_running, 0);
    assert_int_equal(st.warmup_experts, N);
    assert_int_equal(st.warmup_loaded, N);
    assert_int_equal(st.warmup_failed, 0);
    assert_int_equal(st.warmup_bytes, bytes);
    assert_true(st.warmup_ns > 0);
    assert_true(st.warmup_bytes_per_s > 0);
    assert_int_equal(st.reads_failed, 0);
    uint32_t n = atomic_load(&g_nrec);
    assert_int_equal(n, N);
    check_shares(s, n);
    for (uint32_t k = 0; k < N; k++)
        assert_true(resident(s, k));
    /* Everything is resident: nothing to choose. */
    assert_int_equal(smoe_warmup(s, NULL), 0);
    close_s(s);
}

/* One worker, its first warm-up chunk held: a demand read queued then is
 * the very next read, ahead of the rest of the warm-up, and the warm-up
 * skips the expert demand loaded. */
static void t_demand_overtakes(void **state)
{
    (void)state;
    smoe_stream *s = open_s(64, 1);
    atomic_store(&g_hold_first, 1);
    atomic_store(&g_hold, 1);
    assert_int_equal(smoe_warmup(s, NULL), (int)N);
    tu_wait_holding(&g_holding);
    const uint32_t last = N - 1; /* the warm-up's last, by file offset */
    assert_true(smoe_prefetch(s, last / EXPERTS, last % EXPERTS, 0) >= 0);
    atomic_store(&g_hold, 0);
    smoe_blob b;
    assert_true(smoe_claim_wait(s, last / EXPERTS, last % EXPERTS, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    assert_true(atomic_load(&g_nrec) >= 2);
    assert_int_not_equal(g_rec_key[0], last);
    assert_int_equal(g_rec_key[1], last);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.warmup_loaded, N - 1);
    assert_int_equal(st.misses, 1);
    for (uint32_t k = 0; k < N; k++)
        assert_true(resident(s, k));
    close_s(s);
}

static void *cancel_main(void *arg)
{
    smoe_stream *s = arg;
    intptr_t r = smoe_warmup_cancel(s);
    return (void *)r;
}

static atomic_int g_cancel_done;
static void *cancel_flag_main(void *arg)
{
    void *r = cancel_main(arg);
    atomic_store(&g_cancel_done, 1);
    return r;
}

/* Cancel while a load is being read: it returns only after that load has
 * landed, and nothing further is read. */
static void t_cancel(void **state)
{
    (void)state;
    smoe_stream *s = open_s(64, 1);
    atomic_store(&g_hold_first, 1);
    atomic_store(&g_hold, 1);
    assert_int_equal(smoe_warmup(s, NULL), (int)N);
    tu_wait_holding(&g_holding);
    atomic_store(&g_cancel_done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_flag_main, s), 0);
    sleep_ms(50);
    assert_int_equal(atomic_load(&g_cancel_done), 0); /* the read is still held */
    atomic_store(&g_hold, 0);
    void *r;
    assert_int_equal(pthread_join(t, &r), 0);
    assert_int_equal((intptr_t)r, 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.warmup_running, 0);
    assert_int_equal(st.warmup_loaded, 1);
    assert_int_equal(st.slots_loading, 0);
    assert_int_equal(st.slots_ready, 1);
    uint64_t reads = st.reads_done;
    sleep_ms(50);
    assert_int_equal(tu_stats(s).reads_done, reads);
    assert_int_equal(atomic_load(&g_nrec), 1);
    assert_int_equal(smoe_warmup_wait(s, 0), 0);
    /* a new warm-up may start: the rest */
    assert_int_equal(smoe_warmup(s, NULL), (int)N - 1);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    assert_int_equal(tu_stats(s).warmup_loaded, N - 1);
    close_s(s);
}

static void *wait_main(void *arg)
{
    smoe_stream *s = arg;
    intptr_t r = smoe_warmup_wait(s, UINT64_MAX);
    return (void *)r;
}

/* smoe_shutdown during a warm-up: a waiter returns SMOE_ESHUTDOWN, a new
 * warm-up is refused, cancel returns, close is clean. */
static void t_shutdown_during(void **state)
{
    (void)state;
    tu_baseline base = tu_baseline_take();
    smoe_stream *s = open_s(64, 2);
    atomic_store(&g_hold, 1);
    assert_int_equal(smoe_warmup(s, NULL), (int)N);
    tu_wait_holding(&g_holding);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, s), 0);
    sleep_ms(20);
    assert_int_equal(smoe_shutdown(s), 0);
    void *r;
    assert_int_equal(pthread_join(t, &r), 0);
    assert_int_equal((intptr_t)r, SMOE_ESHUTDOWN);
    assert_int_equal(smoe_warmup(s, NULL), SMOE_ESHUTDOWN);
    assert_int_equal(smoe_warmup_cancel(s), 0);
    assert_int_equal(tu_stats(s).warmup_running, 0);
    atomic_store(&g_hold, 0);
    close_s(s);
    tu_baseline_check(base, "after close during a warm-up");
}

static _Atomic uint32_t g_done_tokens;
static void count_hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                       uint64_t b)
{
    if (point == SMOE__HOOK_REQUEST_DONE)
        atomic_fetch_add(&g_done_tokens, 1); /* no demand here: verify tokens */
    hook(s, point, slot, a, b);
}

/* One stream, two workers, verification on, one blob corrupted: the
 * reading worker hands hashing to the parked one (verify tokens) without
 * waking it (no worker wake-up is issued during the warm-up), the corrupt
 * blob fails with SMOE_ECHECKSUM and counts as failed, every other one
 * loads, and smoe_warmup_wait returns only once every handed-off
 * verification has published. */
static void t_verify_handoff(void **state)
{
    (void)state;
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad.smoe", g_dir);
    assert_int_equal(tu_make_vault(bad, LAYERS, EXPERTS, 4000, 40000, 11), 0);
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, bad, smoe__io_get()), 0);
    const uint32_t victim = 9;
    tu_flip_byte(bad, v.index[victim].offset + 100);
    smoe__vault_free(&v);

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 64;
    o.workers = 2;
    o.verify = SMOE_VERIFY_ON;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(bad, &o, &s), 0);
    atomic_store(&g_nrec, 0);
    atomic_store(&g_done_tokens, 0);
    atomic_store(&g_hold_first, 1);
    atomic_store(&g_hold, 1);
    atomic_store(&s->hook, count_hook);
    smoe_warmup_opts wo = SMOE_WARMUP_OPTS_INIT;
    wo.workers = 1; /* one stream: the other worker is free to hash */
    assert_int_equal(smoe_warmup(s, &wo), (int)N);
    tu_wait_holding(&g_holding);
    for (int i = 0; i < 10000 && atomic_load(&s->idle) == 0; i++)
        usleep(500);
    assert_int_equal(atomic_load(&s->idle), 1); /* the other worker is parked */
    const uint64_t wakes = tu_stats(s).worker_wakes;
    atomic_store(&g_hold, 0);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.worker_wakes, wakes);
    assert_int_equal(st.slots_loading, 0);
    assert_int_equal(st.warmup_loaded, N - 1);
    assert_int_equal(st.warmup_failed, 1);
    assert_true(atomic_load(&g_done_tokens) >= 1);
    assert_int_equal(st.reads_done, N);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, victim / EXPERTS, victim % EXPERTS, &b), SMOE_ECHECKSUM);
    for (uint32_t k = 0; k < N; k++)
        if (k != victim)
            assert_true(resident(s, k));
    assert_int_equal(smoe_close(s), 0);
    unlink(bad);
}

/* The hashing worker is held after its first verification and the
 * reading worker at its last blob, so the hashes of the blobs between wait
 * in the queue. smoe_shutdown then: the waiter returns SMOE_ESHUTDOWN, the held
 * worker leaves without hashing the rest (none of them becomes READY
 * unverified), claims return SMOE_ESHUTDOWN at once rather than waiting on
 * loads nobody will finish, and close is clean. */
static _Atomic uint32_t g_verified;
static atomic_int g_hold_verify, g_reader_held;
static void verify_hold_hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                             uint64_t b)
{
    if (point == SMOE__HOOK_REQUEST_DONE && atomic_fetch_add(&g_verified, 1) == 0)
        while (atomic_load(&g_hold_verify))
            usleep(200); /* the hashing worker, after its first blob */
    hook(s, point, slot, a, b);
    if (point == SMOE__HOOK_CHUNK_READ && atomic_load(&g_nrec) == N) {
        /* the reading worker, at its last blob: still in its share, so
         * it takes no verify token either */
        atomic_store(&g_reader_held, 1);
        while (atomic_load(&g_hold_verify))
            usleep(200);
    }
}

static void t_shutdown_with_verify_queued(void **state)
{
    (void)state;
    tu_baseline base = tu_baseline_take();
    smoe_stream *s = open_s(64, 2);
    atomic_store(&g_verified, 0);
    atomic_store(&g_reader_held, 0);
    atomic_store(&g_hold_verify, 1);
    atomic_store(&s->hook, verify_hold_hook);
    smoe_warmup_opts wo = SMOE_WARMUP_OPTS_INIT;
    wo.workers = 1; /* one stream; the other worker hashes */
    assert_int_equal(smoe_warmup(s, &wo), (int)N);
    for (int i = 0; i < 20000 && !atomic_load(&g_reader_held); i++)
        usleep(500); /* every blob but the last read */
    assert_int_equal(atomic_load(&g_reader_held), 1);
    for (int i = 0; i < 20000 && !atomic_load(&g_verified); i++)
        usleep(500);
    sleep_ms(20);
    assert_int_equal(atomic_load(&g_verified), 1); /* N - 2 hashes queued */
    assert_int_equal(smoe_warmup_wait(s, 20000000ull), SMOE_ETIMEDOUT); /* hashes wait */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, s), 0);
    assert_int_equal(smoe_shutdown(s), 0);
    atomic_store(&g_hold_verify, 0);
    void *r;
    assert_int_equal(pthread_join(t, &r), 0);
    assert_int_equal((intptr_t)r, SMOE_ESHUTDOWN);
    smoe_blob b;
    for (uint32_t k = 0; k < N; k++)
        assert_int_equal(smoe_claim_wait(s, k / EXPERTS, k % EXPERTS, UINT64_MAX, &b),
                         SMOE_ESHUTDOWN);
    sleep_ms(50); /* the released worker sees stop and leaves */
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.slots_ready, 1); /* the queued blobs were never hashed, never READY */
    assert_int_equal(st.warmup_running, 0);
    assert_int_equal(atomic_load(&g_verified), 1);
    close_s(s);
    tu_baseline_check(base, "after close with verifications queued");
}

/* Bad arguments, a second warm-up while one runs, a timed-out wait. */
static void t_bad_args(void **state)
{
    (void)state;
    assert_int_equal(smoe_warmup(NULL, NULL), SMOE_EINVAL);
    assert_int_equal(smoe_warmup_wait(NULL, 0), SMOE_EINVAL);
    assert_int_equal(smoe_warmup_cancel(NULL), SMOE_EINVAL);
    smoe_stream *s = open_s(64, 1);
    assert_int_equal(smoe_warmup_wait(s, 0), 0); /* none runs */
    assert_int_equal(smoe_warmup_cancel(s), 0);
    smoe_warmup_opts o = SMOE_WARMUP_OPTS_INIT;
    o.struct_size = 0;
    assert_int_equal(smoe_warmup(s, &o), SMOE_EINVAL);
    o = (smoe_warmup_opts)SMOE_WARMUP_OPTS_INIT;
    o.flags = 1;
    assert_int_equal(smoe_warmup(s, &o), SMOE_EINVAL);
    tu_expect_contains(smoe_last_error(), "flags");
    struct {
        smoe_warmup_opts o;
        uint64_t newer;
    } big = {SMOE_WARMUP_OPTS_INIT, 1};
    big.o.struct_size = sizeof big;
    assert_int_equal(smoe_warmup(s, &big.o), SMOE_ENOTSUP);
    big.newer = 0;
    big.o.max_experts = 3;
    atomic_store(&g_hold_first, 1);
    atomic_store(&g_hold, 1);
    assert_int_equal(smoe_warmup(s, &big.o), 3); /* zero beyond: accepted */
    tu_wait_holding(&g_holding);
    assert_int_equal(smoe_warmup(s, NULL), SMOE_EBUSY);
    assert_int_equal(smoe_warmup_wait(s, 1000000), SMOE_ETIMEDOUT);
    assert_int_equal(tu_stats(s).warmup_running, 1);
    atomic_store(&g_hold, 0);
    assert_int_equal(smoe_warmup_wait(s, UINT64_MAX), 0);
    assert_int_equal(tu_stats(s).warmup_loaded, 3);
    close_s(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_order_small_ring),
        cmocka_unit_test(t_stats_whole_vault),
        cmocka_unit_test(t_demand_overtakes),
        cmocka_unit_test(t_cancel),
        cmocka_unit_test(t_shutdown_during),
        cmocka_unit_test(t_verify_handoff),
        cmocka_unit_test(t_shutdown_with_verify_queued),
        cmocka_unit_test(t_bad_args),
    };
    return cmocka_run_group_tests_name("warmup", tests, setup, teardown);
}
