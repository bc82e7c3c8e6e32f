/*
 * Description: the hot path's promises (prefetch, claim, claim_wait,
 * release, and the worker's chunks), each race made deterministic and
 * checked through the public API:
 *
 *  rearm_stale_chunk_token[_verified]  a worker stalled between reading
 *          chunk_next and its CAS, while the load fails and a demand retry
 *          re-arms it with another chunk size, must not take a chunk of the
 *          new arming with its stale size (wrong bytes, or a spurious
 *          checksum error).
 *  spec_prefetch_never_waits, demand_never_waits_for_queue_room  a
 *          speculative prefetch never waits for queue room: with the
 *          speculative queue full of tokens the workers have not reached,
 *          it returns SMOE_SKIPPED at once, and no slot is reserved; a
 *          demand prefetch with no queue room fails (SMOE_EFULL) instead
 *          of waiting, an upgrade goes on at speculative priority.
 *  two_demand_prefetches_two_pins, claim_wait_ask_is_balanced,
 *  failed_read_pins_end_per_claim  every demand prefetch is honoured by
 *          one claim: two demand prefetches of an expert keep it pinned
 *          until both claimed it, a claim_wait's own prefetch is balanced
 *          by its claim, and a failed read's pins end one per claim that
 *          reports the error.
 *  claim_wait_timeout_every_path  smoe_claim_wait checks its timeout on
 *          every way round its loop.
 *  hot_path_system_calls  the hot path's system calls are the documented
 *          ones: a child process runs prefetch, claim, claim_wait and
 *          release under a seccomp filter allowing only them
 *          (clock_gettime denied: it must be served by the vDSO).
 *  release_on_other_stream_refused  a blob released on another stream is
 *          refused (SMOE_EINVAL).
 *  release_of_copy_refused  a copy of a descriptor is refused by release
 *          (SMOE_EINVAL), so it cannot take another holder's reference.
 *
 * The races use the library's test seam (smoe__hook, src/internal.h) to
 * pause a worker at a chosen point or to run code between two steps.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define MS 1000000ull

/* Names of smoe_prefetch's and smoe_claim's statuses, and of errors. */
static const char *pf_name(int r)
{
    static const char *const n[] = {"SMOE_QUEUED", "SMOE_RESIDENT", "SMOE_INFLIGHT",
                                    "SMOE_SKIPPED"};
    return r >= 0 && r < 4 ? n[r] : smoe_err_name(r);
}

static const char *cl_name(int r)
{
    return r == SMOE_READY ? "SMOE_READY" : r == SMOE_HIT ? "SMOE_HIT" : smoe_err_name(r);
}

/* Bytes of the blob that differ from what the vault wrote for it. */
static size_t wrong_bytes(const tu_fx *f, const smoe_blob *b)
{
    uint64_t n = synth_blob_size(f->seed, b->layer, b->expert, f->min_bytes, f->max_bytes);
    assert_int_equal(b->size, n);
    unsigned char *want = malloc(n);
    assert_non_null(want);
    synth_blob_fill(want, n, f->seed, b->layer, b->expert);
    size_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += ((const unsigned char *)b->data)[i] != want[i];
    free(want);
    return bad;
}

static int claim_ok(smoe_stream *s, const tu_fx *f, uint32_t l, uint32_t e)
{
    smoe_blob b;
    int r = smoe_claim_wait(s, l, e, tu_bound_ns(), &b);
    if (r < 0)
        fail_msg("claim_wait (%u, %u): %s: %s", l, e, smoe_err_name(r), smoe_last_error());
    assert_int_equal(wrong_bytes(f, &b), 0);
    assert_int_equal(smoe_release(s, &b), 0);
    return r;
}

static uint32_t slot_of(smoe_stream *s, uint32_t key)
{
    uint64_t m = atomic_load(&s->map[key]);
    assert_true(m != SMOE__MAP_NONE && m != SMOE__MAP_PENDING);
    return smoe__map_slot(m);
}

/* ---- a stalled worker and a re-armed load -------------------------------- */

/* The hook's plan: pause the first worker that is about to take chunk 1
 * (CAS), and later the first worker about to read a whole 32 KiB blob. */
static struct {
    _Atomic int arm_cas, cas_taken, cas_paused, cas_release, cas_resumed, cas_done;
    _Atomic int arm_read, read_taken, read_paused, read_release;
    _Atomic uint64_t cas_seen, cas_chunk;
    pthread_t cas_thread;
} h1;

static void stale_chunk_hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                        uint64_t b)
{
    (void)s;
    (void)slot;
    int zero = 0;
    if (point == SMOE__HOOK_CHUNK_CAS && atomic_load(&h1.arm_cas) && (uint32_t)a == 1 &&
        atomic_compare_exchange_strong(&h1.cas_taken, &zero, 1)) {
        h1.cas_thread = pthread_self();
        atomic_store(&h1.cas_seen, a);
        atomic_store(&h1.cas_chunk, b);
        atomic_store(&h1.cas_paused, 1);
        while (!atomic_load(&h1.cas_release))
            usleep(200);
        atomic_store(&h1.cas_resumed, 1);
    } else if (point == SMOE__HOOK_CHUNK_READ && atomic_load(&h1.arm_read) && b == 32768 &&
               atomic_compare_exchange_strong(&h1.read_taken, &zero, 1)) {
        atomic_store(&h1.read_paused, 1);
        while (!atomic_load(&h1.read_release))
            usleep(200);
    } else if (point == SMOE__HOOK_REQUEST_DONE && atomic_load(&h1.cas_resumed) &&
               pthread_equal(pthread_self(), h1.cas_thread)) {
        atomic_store(&h1.cas_done, 1);
    }
}

/*
 * The interleaving: Blobs of 32 KiB; speculative reads
 * in 16 KiB chunks (2), demand reads in one 32 KiB chunk; two workers.
 *  1. A speculative load of X is armed with 16 KiB chunks; worker P loads
 *     chunk_next (index 1) and the chunk size and is paused before its CAS.
 *  2. A demand prefetch upgrades the load; the other worker takes chunk 0
 *     (its read fails: EIO) and chunk 1: the slot is published FAILED.
 *  3. A claim reports SMOE_EIO; a demand prefetch retries the read: the
 *     slot is re-armed in one 32 KiB chunk, which the other worker takes
 *     and is paused before reading.
 *  4. P resumes. It must not take a chunk with its stale 16 KiB size: the
 *     retry's read is still in flight, so a claim must find X loading.
 */
static void run_rearm_stale_chunk(int verify)
{
    tu_fx *f = tu_fx_new(1, 2, 32768, 32768, 11);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 2;
    o.ring_slots = 2;
    o.verify = verify ? SMOE_VERIFY_ON : SMOE_VERIFY_OFF;
    o.chunk_bytes = 65536;      /* clamped to the 32 KiB slot: one chunk */
    o.spec_chunk_bytes = 16384; /* two chunks */
    o.spec_share_pct = 100;
    smoe_stream *s = tu_fx_open(f, &o);
    memset(&h1, 0, sizeof h1);
    atomic_store(&s->hook, stale_chunk_hook);

    /* 1. the speculative load; the first read fails */
    fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_PREAD, 1, EIO, 0);
    atomic_store(&h1.arm_cas, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    tu_wait_flag(&h1.cas_paused, "a worker about to take chunk 1");
    /* 2. the upgrade: its tokens let the other worker take chunk 1 */
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_INFLIGHT);
    smoe_blob b;
    int r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
    if (r != SMOE_EIO)
        fail_msg("the first read should have failed: %s", cl_name(r));
    /* 3. the retry, paused before its read */
    atomic_store(&h1.arm_read, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_flag(&h1.read_paused, "the retry's read");
    /* 4. the stalled worker resumes */
    atomic_store(&h1.cas_release, 1);
    tu_wait_flag(&h1.cas_done, "the stalled worker's token");
    const uint32_t v = slot_of(s, 0);
    r = smoe_claim(s, 0, 0, &b);
    size_t bad = r >= 0 ? wrong_bytes(f, &b) : 0;
    print_message("rearm (verify %s): stalled worker saw chunk_next index %u, chunk %llu "
                  "bytes; after it resumed, with the retry's read in flight, claim: %s, "
                  "%zu wrong bytes\n", verify ? "on" : "off",
                  (unsigned)(uint32_t)atomic_load(&h1.cas_seen),
                  (unsigned long long)atomic_load(&h1.cas_chunk), cl_name(r), bad);
    if (r >= 0)
        smoe_release(s, &b);
    atomic_store(&h1.read_release, 1);
    if (r != SMOE_EAGAIN) {
        usleep(200000); /* the held read lands and counts down */
        print_message("rearm: chunk_left after the retry's read landed: %u\n",
                      atomic_load(&s->ring.chunk_left[v]));
        fail_msg("with the retry's read still in flight the claim returned %s (%zu wrong "
                 "bytes): a stale token published the load", cl_name(r), bad);
    }
    /* the retry's read lands: the exact bytes, and the countdown at zero */
    claim_ok(s, f, 0, 0);
    uint32_t left = atomic_load(&s->ring.chunk_left[v]);
    print_message("rearm: chunk_left after the retry: %u\n", left);
    assert_int_equal(left, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void rearm_stale_chunk_token(void **state)
{
    (void)state;
    run_rearm_stale_chunk(0);
}

static void rearm_stale_chunk_token_verified(void **state)
{
    (void)state;
    run_rearm_stale_chunk(1);
}

/* ---- prefetch never waits for queue room ---------------------------------- */

/* Releases the fault_io hold when one call has been running for 500 ms, so
 * that a prefetch that waits for queue room comes back (and is caught). */
static struct {
    struct fault_io *fio;
    _Atomic uint64_t in_call_since;
    _Atomic int fired, quit;
} valve;

static void *valve_main(void *p)
{
    (void)p;
    while (!atomic_load(&valve.quit)) {
        uint64_t t = atomic_load(&valve.in_call_since);
        if (t && tu_now_ns() - t > 500 * MS && !atomic_load(&valve.fired)) {
            atomic_store(&valve.fired, 1);
            atomic_store(&valve.fio->hold, 0);
        }
        usleep(1000);
    }
    return NULL;
}

/*
 * One worker is held in a read, so no token is taken off a queue.
 * Speculative loads that are queued and then cancelled (as a demand
 * evictor or smoe_cancel does) leave their 4 tokens each in the
 * speculative queue; once it is full, the next speculative prefetch must
 * come back SMOE_SKIPPED at once, without reserving a slot, instead of
 * waiting for a worker to make room.
 */
static void spec_prefetch_never_waits(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 8, 65536, 65536, 12);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 4;
    o.spec_share_pct = 100;
    o.chunk_bytes = 65536;
    o.spec_chunk_bytes = 16384; /* 4 tokens per speculative load */
    smoe_stream *s = tu_fx_open(f, &o);
    memset(&valve, 0, sizeof valve);
    valve.fio = &fio;
    pthread_t vt;
    assert_int_equal(pthread_create(&vt, NULL, valve_main, NULL), 0);

    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 7, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding); /* the only worker is busy from here on */
    unsigned queued = 0, waited = 0;
    int r = SMOE_QUEUED;
    uint64_t dt = 0;
    smoe_stats before = tu_stats(s);
    for (unsigned i = 0; i < 100000 && r == SMOE_QUEUED; i++) {
        uint32_t e = i % 6;
        before = tu_stats(s);
        uint64_t t0 = tu_now_ns();
        atomic_store(&valve.in_call_since, t0);
        r = smoe_prefetch(s, 0, e, SMOE_PREFETCH_SPECULATIVE);
        atomic_store(&valve.in_call_since, 0);
        dt = tu_now_ns() - t0;
        if (atomic_load(&valve.fired)) {
            waited = 1;
            break;
        }
        if (r == SMOE_QUEUED) {
            queued++;
            assert_int_equal(smoe_cancel(s, 0, e), 0);
        }
    }
    print_message("spec_prefetch_never_waits: "
                  "%u speculative loads queued and cancelled (%u tokens left "
                  "queued), then a speculative prefetch returned %s after %.1f ms%s\n",
                  queued, queued * 4, pf_name(r), (double)dt / 1e6,
                  waited ? ", released only by the valve: it waited for queue room" : "");
    if (waited)
        fail_msg("a speculative prefetch waited %.0f ms for queue room and returned %s",
                 (double)dt / 1e6, pf_name(r));
    assert_int_equal(r, SMOE_SKIPPED);
    /* decided before a slot was reserved: nothing moved */
    smoe_stats after = tu_stats(s);
    assert_int_equal(after.slots_loading, before.slots_loading);
    assert_int_equal(after.slots_empty, before.slots_empty);
    assert_int_equal(after.spec_skipped, before.spec_skipped + 1);
    assert_int_equal(after.spec_queued, before.spec_queued);
    assert_int_equal(atomic_load(&s->spec_inflight), 0);
    assert_int_equal(smoe_claim(s, 0, (queued) % 6, &(smoe_blob){0}), SMOE_ENOTRESIDENT);
    /* the worker drains the queue: speculation works again */
    atomic_store(&fio.hold, 0);
    claim_ok(s, f, 0, 7);
    uint64_t t0 = tu_now_ns();
    while ((r = smoe_prefetch(s, 0, 1, SMOE_PREFETCH_SPECULATIVE)) == SMOE_SKIPPED &&
           tu_now_ns() - t0 < tu_bound_ns())
        usleep(1000);
    assert_int_equal(r, SMOE_QUEUED);
    claim_ok(s, f, 0, 1);
    atomic_store(&valve.quit, 1);
    pthread_join(vt, NULL);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/*
 * The demand queue with no room (all of it reserved here, as queued tokens
 * would): a new demand load and a retry of a failed read fail with
 * SMOE_EFULL and change nothing; an upgrade of a queued speculative read
 * still pins it and the read completes from its speculative tokens; with
 * room back, everything proceeds.
 */
static void demand_never_waits_for_queue_room(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 4, 40000, 40000, 13);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 4;
    o.spec_share_pct = 100;
    smoe_stream *s = tu_fx_open(f, &o);
    const size_t room = smoe__mpmc_capacity(&s->sched.q[SMOE__CL_DEMAND]);
    smoe_blob b;

    /* a new demand load */
    assert_true(smoe__mpmc_reserve(&s->sched.q[SMOE__CL_DEMAND], room));
    smoe_stats st0 = tu_stats(s);
    uint64_t t0 = tu_now_ns();
    int r = smoe_prefetch(s, 0, 0, 0);
    print_message("demand_never_waits_for_queue_room: "
                  "demand prefetch with no queue room: %s after %.3f ms: %s\n",
                  pf_name(r), (double)(tu_now_ns() - t0) / 1e6, r < 0 ? smoe_last_error() : "");
    assert_int_equal(r, SMOE_EFULL);
    tu_expect_contains(smoe_last_error(), "queue");
    smoe_stats st1 = tu_stats(s);
    assert_int_equal(st1.slots_loading, st0.slots_loading);
    assert_int_equal(st1.slots_empty, st0.slots_empty);
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b), SMOE_EFULL);
    smoe__mpmc_unreserve(&s->sched.q[SMOE__CL_DEMAND], room);
    claim_ok(s, f, 0, 0);

    /* an upgrade without demand room: pinned, read at speculative priority */
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 3, 0), SMOE_QUEUED); /* keeps the worker busy */
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 0, 1, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_true(smoe__mpmc_reserve(&s->sched.q[SMOE__CL_DEMAND], room - 1)); /* not room for 1 more load's */
    assert_int_equal(smoe_prefetch(s, 0, 1, 0), SMOE_INFLIGHT);
    assert_int_equal(smoe_cancel(s, 0, 1), SMOE_EBUSY); /* pinned by the demand */
    smoe__mpmc_unreserve(&s->sched.q[SMOE__CL_DEMAND], room - 1);
    atomic_store(&fio.hold, 0);
    claim_ok(s, f, 0, 3);
    claim_ok(s, f, 0, 1);

    /* a retry without room: SMOE_EFULL, the failure stays */
    fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_PREAD, 1, EIO, 0);
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_QUEUED);
    assert_int_equal(smoe_claim_wait(s, 0, 2, tu_bound_ns(), &b), SMOE_EIO);
    assert_true(smoe__mpmc_reserve(&s->sched.q[SMOE__CL_DEMAND], room));
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_EFULL);
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_EIO);
    smoe__mpmc_unreserve(&s->sched.q[SMOE__CL_DEMAND], room);
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_QUEUED);
    claim_ok(s, f, 0, 2);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* ---- one claim per demand prefetch ---------------------------------------- */

struct pf_thread {
    smoe_stream *s;
    pthread_barrier_t *bar;
    int r;
};

static void *demand_prefetcher(void *p)
{
    struct pf_thread *t = p;
    pthread_barrier_wait(t->bar);
    t->r = smoe_prefetch(t->s, 0, 0, 0);
    return NULL;
}

/* Claim and release (layer 0, expert e) of a 2-slot ring, twice over two
 * other experts: anything unpinned and idle is evicted by then. */
static void churn(smoe_stream *s, const tu_fx *f, uint32_t e1, uint32_t e2)
{
    claim_ok(s, f, 0, e1);
    claim_ok(s, f, 0, e2);
    claim_ok(s, f, 0, e1);
    claim_ok(s, f, 0, e2);
}

/*
 * Threads A and B each demand-prefetch expert K; A claims and releases it;
 * two other experts are loaded through the 2-slot ring. B's prefetch still
 * pins K, so B's claim finds it. Once B has claimed too, nothing pins it.
 */
static void two_demand_prefetches_two_pins(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 3, 20000, 20000, 14);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *s = tu_fx_open(f, &o);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    struct pf_thread a = {s, &bar, 0}, b = {s, &bar, 0};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, demand_prefetcher, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, demand_prefetcher, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&bar);
    assert_true(a.r >= 0 && b.r >= 0);
    claim_ok(s, f, 0, 0); /* A's claim */
    /* Experts 1 and 2 through the ring: only one slot is free to take. */
    int r1 = smoe_prefetch(s, 0, 1, 0);
    smoe_blob x;
    assert_true(r1 >= 0);
    assert_true(smoe_claim_wait(s, 0, 1, tu_bound_ns(), &x) >= 0);
    assert_int_equal(smoe_release(s, &x), 0);
    int r2 = smoe_prefetch(s, 0, 2, 0);
    assert_true(smoe_claim_wait(s, 0, 2, tu_bound_ns(), &x) >= 0);
    assert_int_equal(smoe_release(s, &x), 0);
    smoe_blob bb;
    int r = smoe_claim(s, 0, 0, &bb); /* B's claim */
    print_message("two_demand_prefetches_two_pins: "
                  "prefetches %s and %s, A claimed and released, two more "
                  "experts loaded (%s, %s): B's claim: %s\n", pf_name(a.r),
                  pf_name(b.r), pf_name(r1), pf_name(r2), cl_name(r));
    if (r < 0)
        fail_msg("B's demand prefetch did not pin the expert until B claimed it: %s",
                 smoe_err_name(r));
    assert_int_equal(r, SMOE_HIT);
    assert_int_equal(wrong_bytes(f, &bb), 0);
    assert_int_equal(smoe_release(s, &bb), 0);
    /* Both prefetches honoured: K is an ordinary retained slot again. */
    churn(s, f, 1, 2);
    assert_int_equal(smoe_claim(s, 0, 0, &bb), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/*
 * A claim_wait that issues its own demand prefetch takes the pin it adds:
 * afterwards the expert is not pinned. A claim_wait after a prefetch adds
 * none (one prefetch, one claim).
 */
static void claim_wait_ask_is_balanced(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 3, 20000, 20000, 15);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *s = tu_fx_open(f, &o);
    smoe_blob b;
    claim_ok(s, f, 0, 0); /* asks, claims */
    churn(s, f, 1, 2);
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    claim_ok(s, f, 0, 0); /* does not ask: the prefetch pinned it */
    churn(s, f, 1, 2);
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/*
 * Two demand prefetches of an expert whose read fails: each claim reports
 * the error and ends one pin; the failed slot stays pinned (not evicted)
 * until the second claim has had its error, then it is the first victim.
 */
static void failed_read_pins_end_per_claim(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 3, 20000, 20000, 16);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *s = tu_fx_open(f, &o);
    smoe_blob b;
    fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_PREAD, 1, EIO, 0);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    assert_true(smoe_prefetch(s, 0, 0, 0) >= 0);
    assert_int_equal(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b), SMOE_EIO);
    churn(s, f, 1, 2); /* the failed slot is still pinned: 1 and 2 share a slot */
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_EIO);
    claim_ok(s, f, 0, 1);
    claim_ok(s, f, 0, 2); /* takes the failed slot (class 0) */
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* ---- claim_wait's timeout -------------------------------------------------- */

static struct {
    smoe_stream *s;
    const tu_fx *f;
    uint64_t sleep_ns;
    int nested, calls, max_calls;
} h4;

/* After claim_wait's own prefetch of K returned: let time pass, then take
 * K's pin by a claim and evict it (1-slot ring), so the waiter finds it
 * gone and goes round again. */
static void timeout_hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                        uint64_t b)
{
    (void)slot;
    (void)a;
    (void)b;
    if (point != SMOE__HOOK_WAIT_ASKED || h4.nested || h4.calls >= h4.max_calls)
        return;
    h4.nested = 1;
    h4.calls++;
    struct timespec ts = {0, (long)h4.sleep_ns};
    nanosleep(&ts, NULL);
    claim_ok(s, h4.f, 0, 0);
    claim_ok(s, h4.f, 0, 1);
    h4.nested = 0;
}

static void claim_wait_timeout_every_path(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 2, 20000, 20000, 17);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 1;
    smoe_stream *s = tu_fx_open(f, &o);
    const uint64_t timeout = 20 * MS;
    memset(&h4, 0, sizeof h4);
    h4.s = s;
    h4.f = f;
    h4.sleep_ns = 30 * MS;
    h4.max_calls = 4;
    atomic_store(&s->hook, timeout_hook);
    smoe_blob b;
    uint64_t t0 = tu_now_ns();
    int r = smoe_claim_wait(s, 0, 0, timeout, &b);
    uint64_t dt = tu_now_ns() - t0;
    atomic_store(&s->hook, NULL);
    print_message("claim_wait_timeout_every_path: "
                  "claim_wait with a %.0f ms timeout, evicted behind it %d times "
                  "(%.0f ms each): %s after %.0f ms\n", (double)timeout / 1e6, h4.calls,
                  (double)h4.sleep_ns / 1e6, cl_name(r), (double)dt / 1e6);
    if (r >= 0)
        smoe_release(s, &b);
    if (r != SMOE_ETIMEDOUT)
        fail_msg("claim_wait with a %.0f ms timeout ran %.0f ms and returned %s",
                 (double)timeout / 1e6, (double)dt / 1e6, cl_name(r));
    /* it gave up after the first round that overran the timeout */
    assert_int_equal(h4.calls, 1);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/* ---- the hot path's system calls ------------------------------------------ */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SMOE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SMOE_TEST_SANITIZED 1
#endif
#endif
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    !defined(SMOE_TEST_SANITIZED)
#define SMOE_TEST_SECCOMP 1
#endif

#ifdef SMOE_TEST_SECCOMP

#if defined(__x86_64__)
#define SMOE_AUDIT_ARCH AUDIT_ARCH_X86_64
#else
#define SMOE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* What the child reports through a shared page. */
struct sc_report {
    _Atomic int sys;  /* the first system call refused, or -1 */
    _Atomic int done; /* calls made */
};
static struct sc_report *g_report;

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    int none = -1;
    atomic_compare_exchange_strong(&g_report->sys, &none, si->si_syscall);
    syscall(SYS_exit_group, 3);
}

/* Allow the hot path's system calls (src/internal.h) and the child's
 * exit; trap everything else. clock_gettime is not allowed: the vDSO must
 * serve it without entering the kernel. */
static int hot_path_filter(void)
{
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
                  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SMOE_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_pread64),
        ALLOW(__NR_futex),
        ALLOW(__NR_sched_yield),
        ALLOW(__NR_exit_group),
        ALLOW(__NR_rt_sigreturn),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
#undef ALLOW
    struct sock_fprog p = {(unsigned short)(sizeof prog / sizeof *prog), prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return -1;
    /* every thread: the workers too */
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &p);
}

/* The child: open (allowed anything), then the hot path under the filter:
 * demand and speculative prefetches, claims, claim_waits (parking),
 * releases and evictions over a ring smaller than the vault. */
static void hot_path_child(const char *path)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 2;
    o.ring_slots = 3;
    o.spec_chunk_bytes = 16384;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    o.eviction = SMOE_EVICT_LRU;
    smoe_stream *s;
    if (smoe_open(path, &o, &s) != 0)
        _exit(4);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    usleep(20000); /* let the workers park */
    if (hot_path_filter() != 0)
        _exit(5);
    for (uint32_t i = 0; i < 400; i++) {
        uint32_t e = (i * 7) % 8;
        smoe_prefetch(s, 0, (e + 1) % 8, SMOE_PREFETCH_SPECULATIVE);
        smoe_blob b;
        int r = (i & 1) ? smoe_claim_wait(s, 0, e, UINT64_MAX, &b) : smoe_claim(s, 0, e, &b);
        if (r == SMOE_ENOTRESIDENT && smoe_prefetch(s, 0, e, 0) >= 0)
            r = smoe_claim_wait(s, 0, e, UINT64_MAX, &b);
        if (r < 0 && r != SMOE_EAGAIN)
            syscall(SYS_exit_group, 6);
        if (r == SMOE_EAGAIN) {
            if (smoe_claim_wait(s, 0, e, UINT64_MAX, &b) < 0)
                syscall(SYS_exit_group, 7);
        }
        if (smoe_release(s, &b) != 0)
            syscall(SYS_exit_group, 8);
        atomic_fetch_add(&g_report->done, 1);
    }
    syscall(SYS_exit_group, 0);
}
#endif

static void hot_path_system_calls(void **state)
{
    (void)state;
#if defined(SMOE_TEST_SANITIZED)
    /* The sanitizer runtimes make system calls of their own. */
    print_message("hot_path_system_calls: "
                  "not run under a sanitizer (its runtime makes its own system "
                  "calls)\n");
    skip();
#elif !defined(SMOE_TEST_SECCOMP)
    print_message("hot_path_system_calls: needs Linux on x86-64 or arm64 (seccomp)\n");
    skip();
#else
    tu_fx *f = tu_fx_new(1, 8, 20000, 60000, 18);
    g_report = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(g_report != MAP_FAILED);
    atomic_store(&g_report->sys, -1);
    atomic_store(&g_report->done, 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        hot_path_child(f->path);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    int sys = atomic_load(&g_report->sys), done = atomic_load(&g_report->done);
    print_message("hot_path_system_calls: "
                  "%d prefetch/claim/release rounds under the filter; exit %d; "
                  "refused system call: %d\n", done,
                  WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st), sys);
    if (sys >= 0)
        fail_msg("the hot path made system call %d, not one of pread64, futex, sched_yield "
                 "(clock_gettime %d must not enter the kernel)", sys, __NR_clock_gettime);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(done, 400);
    munmap(g_report, 4096);
    tu_fx_free(f);
#endif
}

/* ---- release of a blob that is not the caller's --------------------------- */

/* Two streams on one vault each claim (0, 5): slot, generation and key
 * coincide. Releasing a's blob on b is refused; both owners release. */
static void release_on_other_stream_refused(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 6, 20000, 20000, 19);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *a = tu_fx_open(f, &o);
    smoe_open_opts o2 = SMOE_OPEN_OPTS_INIT;
    o2.workers = 1;
    o2.ring_slots = 2;
    smoe_stream *b = tu_fx_open(f, &o2);
    smoe_blob ba, bb;
    assert_true(smoe_claim_wait(a, 0, 5, tu_bound_ns(), &ba) >= 0);
    assert_true(smoe_claim_wait(b, 0, 5, tu_bound_ns(), &bb) >= 0);
    assert_int_equal(ba.slot, bb.slot);
    assert_int_equal(ba.gen, bb.gen);
    int r = smoe_release(b, &ba);
    print_message("release_on_other_stream_refused: "
                  "release of stream a's blob on stream b: %s (%s)\n",
                  smoe_err_name(r), r < 0 ? smoe_last_error() : "accepted");
    int owner = r == 0 ? smoe_release(a, &ba) : 0;
    int closed = r == 0 ? smoe_close(a) : 0;
    if (r != SMOE_EINVAL)
        fail_msg("release on another stream returned %s; the owner's release then %s, "
                 "smoe_close(a) %s", smoe_err_name(r), smoe_err_name(owner),
                 smoe_err_name(closed));
    tu_expect_contains(smoe_last_error(), "another stream");
    assert_int_equal(ba.held, 1); /* still the owner's */
    assert_int_equal(smoe_release(a, &ba), 0);
    assert_int_equal(smoe_release(b, &bb), 0);
    assert_int_equal(smoe_close(a), 0);
    assert_int_equal(smoe_close(b), 0);
    tu_fx_free(f);
}

/*
 * Holders 1 and 2 claim one expert (2 references). Holder 1 releases its
 * descriptor and then a copy of it: the copy's release is refused, so
 * holder 2 keeps its reference and its bytes through churn that evicts
 * every idle slot. A descriptor moved to another address is refused too.
 */
static void release_of_copy_refused(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 4, 20000, 20000, 20);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *s = tu_fx_open(f, &o);
    smoe_blob h1b, h2b;
    assert_true(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &h1b) >= 0);
    assert_true(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &h2b) >= 0);
    smoe_blob copy = h1b;
    assert_int_equal(smoe_release(s, &h1b), 0);
    int r = smoe_release(s, &copy);
    const char *msg = r < 0 ? smoe_last_error() : "accepted";
    print_message("release_of_copy_refused: release of a copy of a released descriptor: %s (%s)\n",
                  smoe_err_name(r), msg);
    if (r == SMOE_EINVAL)
        tu_expect_contains(msg, "copy");
    /* churn: every idle slot is reused */
    for (int i = 0; i < 4; i++) {
        smoe_blob x;
        int c = smoe_claim_wait(s, 0, 1 + (uint32_t)i % 3, tu_bound_ns(), &x);
        if (c >= 0)
            smoe_release(s, &x);
    }
    size_t bad = wrong_bytes(f, &h2b);
    print_message("release_of_copy_refused: holder 2's bytes after churn: %zu wrong\n", bad);
    if (r != SMOE_EINVAL)
        fail_msg("the copy's release returned %s and took holder 2's reference: %zu of "
                 "its bytes were overwritten", smoe_err_name(r), bad);
    assert_int_equal(bad, 0);
    /* a descriptor moved elsewhere is a copy too */
    smoe_blob *moved = malloc(sizeof *moved);
    assert_non_null(moved);
    memcpy(moved, &h2b, sizeof h2b);
    assert_int_equal(smoe_release(s, moved), SMOE_EINVAL);
    free(moved);
    assert_int_equal(smoe_release(s, &h2b), 0);
    assert_int_equal(smoe_release(s, &h2b), SMOE_EINVAL); /* twice */
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rearm_stale_chunk_token),
        cmocka_unit_test(rearm_stale_chunk_token_verified),
        cmocka_unit_test(spec_prefetch_never_waits),
        cmocka_unit_test(demand_never_waits_for_queue_room),
        cmocka_unit_test(two_demand_prefetches_two_pins),
        cmocka_unit_test(claim_wait_ask_is_balanced),
        cmocka_unit_test(failed_read_pins_end_per_claim),
        cmocka_unit_test(claim_wait_timeout_every_path),
        cmocka_unit_test(hot_path_system_calls),
        cmocka_unit_test(release_on_other_stream_refused),
        cmocka_unit_test(release_of_copy_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
