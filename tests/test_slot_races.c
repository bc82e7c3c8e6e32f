/*
 * Description: races on a slot's word, its pins and the request queues,
 * each made deterministic and checked through the API:
 *
 *  claim_reports_only_its_experts_error  a claim of a FAILED expert that
 *      holds no pin must not report the error of another expert whose load
 *      took the slot while the claim was between its load of the word and
 *      its read of the error.
 *  pins_counted_not_owned  pins are counted, not owned: a thread that
 *      prefetches before its claim_wait keeps another thread's prefetched
 *      expert pinned; one that does not honours the other's prefetch (what
 *      smoe.h documents).
 *  failed_push_not_dropped  a push into room that was reserved is never
 *      dropped: with the queue's cells full behind the reservation
 *      counter's back (injected tokens), the load's tokens still reach a
 *      worker and the miss is counted, instead of the load staying LOADING
 *      for ever.
 *  prefetch_waits_only_for_a_slot_pick  what smoe_prefetch promises about
 *      waiting: it never waits for a worker, a read or queue room; it waits
 *      only while another thread's prefetch of the same expert picks that
 *      expert's slot.
 *  error_and_fault_of_one_failure  a claim that reads a FAILED slot's error
 *      while the slot fails again under the same word (a retry of the same
 *      expert) reports the error and the fault record of one failure, never
 *      a mix of two.
 * (The queue's positions across wrap-around: test_mpmc.)
 *
 * The races use the library's test seam (smoe__hook, src/internal.h).
 */
#include <errno.h>
#include <pthread.h>
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
#include "smoe/smoe.h"
#include "testutil.h"


/* Wait until slot v holds key in state st. */
static void wait_state(smoe_stream *s, uint32_t v, uint32_t key, unsigned st, const char *what)
{
    uint64_t t0 = tu_now_ns();
    for (;;) {
        uint64_t w = atomic_load(&s->ring.word[v]);
        if (smoe__w_key(w) == key && smoe__w_state(w) == st)
            return;
        if (tu_now_ns() - t0 > tu_bound_ns())
            fail_msg("%s never happened", what);
        usleep(200);
    }
}

/* A pause at one hook point, once: the first thread to reach `point`
 * sets paused and waits for release. */
static struct {
    _Atomic unsigned point;
    _Atomic int arm, paused, release;
} pause1;

static void pause_hook(struct smoe_stream *s, unsigned point, uint32_t slot, uint64_t a,
                       uint64_t b)
{
    (void)s; (void)slot; (void)a; (void)b;
    int one = 1;
    if (point == atomic_load(&pause1.point) &&
        atomic_compare_exchange_strong(&pause1.arm, &one, 0)) {
        atomic_store(&pause1.paused, 1);
        while (!atomic_load(&pause1.release))
            usleep(200);
    }
}

static void pause_at(smoe_stream *s, unsigned point)
{
    atomic_store(&pause1.point, point);
    atomic_store(&pause1.paused, 0);
    atomic_store(&pause1.release, 0);
    atomic_store(&pause1.arm, 1);
    atomic_store(&s->hook, pause_hook);
}

struct claimer { smoe_stream *s; uint32_t expert; int r; char msg[512]; };

static void *claimer_main(void *p)
{
    struct claimer *c = p;
    smoe_blob b;
    c->r = smoe_claim(c->s, 0, c->expert, &b);
    snprintf(c->msg, sizeof c->msg, "%s", c->r < 0 ? smoe_last_error() : "");
    if (c->r >= 0)
        smoe_release(c->s, &b);
    return NULL;
}

/* ---- a claim reports only its own expert's error ------------------------ */

/*
 * 1 slot. K1 = (0, 0) fails with EIO; its one pin is ended by the claim that
 * reports it: FAILED, no pins. Claimer C reads that word and pauses before
 * it reads err. A demand prefetch of K2 = (0, 1) takes the FAILED slot
 * (victim class 0) and its read fails with ENXIO. C resumes: it must not
 * report K2's error (ENXIO at K2's offset) as K1's; K1 is gone.
 */
static void claim_reports_only_its_experts_error(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 2, 20000, 20000, 31);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 1;
    smoe_stream *s = tu_fx_open(f, &o);
    smoe_blob b;
    fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_PREAD, 1, EIO, 0);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    assert_int_equal(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b), SMOE_EIO);

    pause_at(s, SMOE__HOOK_CLAIM_FAILED);
    struct claimer c = {s, 0, 0, ""};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, claimer_main, &c), 0);
    tu_wait_flag(&pause1.paused, "the claimer at FAILED");
    fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_PREAD, 1, ENXIO, 0);
    assert_int_equal(smoe_prefetch(s, 0, 1, 0), SMOE_QUEUED); /* takes K1's FAILED slot */
    wait_state(s, 0, 1, SMOE__SLOT_FAILED, "K2's failure");
    atomic_store(&pause1.release, 1);
    pthread_join(t, NULL);
    atomic_store(&s->hook, NULL);
    print_message("claim_reports_only_its_experts_error: "
                  "K1's claim after K2 took its slot and failed: %s: %s\n",
                  smoe_err_name(c.r), c.msg);
    int wrong = strstr(c.msg, "ENXIO") != NULL;
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_EIO); /* K2's own claim */
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
    if (wrong)
        fail_msg("K1's claim reported K2's read error (ENXIO at K2's offset)");
    assert_int_equal(c.r, SMOE_ENOTRESIDENT);
}

/* ---- pins are counted, not owned ----------------------------------------- */

static void claim_release(smoe_stream *s, uint32_t e)
{
    smoe_blob x;
    int r = smoe_claim_wait(s, 0, e, tu_bound_ns(), &x);
    if (r < 0)
        fail_msg("claim_wait %u: %s", e, smoe_err_name(r));
    assert_int_equal(smoe_release(s, &x), 0);
}

/*
 * Pins are counted, not owned (smoe.h): a claim honours one demand
 * prefetch of the expert, whoever made it. Thread A demand-prefetches K and
 * has not claimed it yet; thread B takes K with smoe_claim_wait and
 * releases; two more experts go through the 2-slot ring; then A claims.
 *  with_prefetch: B demand-prefetched K before its claim_wait, as the header
 *    asks of every thread that claims a shared expert: B's claim honours
 *    B's prefetch, and A's claim finds K.
 *  without: B made no prefetch: its claim honours A's (the one pin K has),
 *    K is evicted by the churn, and A's claim returns SMOE_ENOTRESIDENT, as
 *    the header says.
 * Either way no pin is left behind: the ring turns over afterwards.
 */
static int pins_round(int b_prefetches)
{
    tu_fx *f = tu_fx_new(1, 3, 20000, 20000, 32);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *s = tu_fx_open(f, &o);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED); /* A */
    wait_state(s, smoe__map_slot(atomic_load(&s->map[0])), 0, SMOE__SLOT_READY, "K's read");
    if (b_prefetches)
        assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_RESIDENT); /* B */
    claim_release(s, 0); /* B */
    for (int i = 0; i < 2; i++) {
        claim_release(s, 1);
        claim_release(s, 2);
    }
    smoe_blob b;
    int r = smoe_claim(s, 0, 0, &b); /* A */
    print_message("pins_counted_not_owned: "
                  "A prefetched K, B %s claim_wait'ed K and released, churn: A's claim: "
                  "%s\n", b_prefetches ? "prefetched and" : "(no prefetch)",
                  r >= 0 ? "ok" : smoe_err_name(r));
    if (r >= 0)
        assert_int_equal(smoe_release(s, &b), 0);
    claim_release(s, 1);
    claim_release(s, 2);
    claim_release(s, 0);
    claim_release(s, 1);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
    return r;
}

static void pins_counted_not_owned(void **state)
{
    (void)state;
    assert_true(pins_round(1) >= 0);
    assert_int_equal(pins_round(0), SMOE_ENOTRESIDENT);
}

/* ---- a push into reserved room is never dropped ------------------------- */

struct pf { smoe_stream *s; uint32_t expert; _Atomic int done; int r; };

static void *prefetch_main(void *p)
{
    struct pf *a = p;
    a->r = smoe_prefetch(a->s, 0, a->expert, 0);
    atomic_store(&a->done, 1);
    return NULL;
}

/*
 * The only worker is held in a read of K1. The demand queue's free cells
 * are then filled with stale tokens pushed without a reservation, so that
 * the reservation counter says there is room where the cells have none:
 * what a push sees when a consumer's freeing of a cell is not yet visible
 * to it. A demand prefetch of K2 reserves, and its pushes find the
 * queue full. Its tokens must not be dropped: once the worker runs again,
 * K2 must be read (the push is retried, and counted).
 */
static void failed_push_not_dropped(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 2, 20000, 20000, 33);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 2;
    smoe_stream *s = tu_fx_open(f, &o);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    unsigned injected = 0;
    while (smoe__mpmc_push(&s->sched.q[SMOE__CL_DEMAND], (smoe__req){0, 0xfffffu}))
        injected++; /* stale tokens: gen matches no load */
    struct pf a = {s, 1, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, prefetch_main, &a), 0);
    usleep(50000);
    int returned_while_full = atomic_load(&a.done);
    atomic_store(&fio.hold, 0);
    pthread_join(t, NULL);
    assert_int_equal(a.r, SMOE_QUEUED);
    smoe_blob b;
    int r = smoe_claim_wait(s, 0, 1, (uint64_t)(2.0 * tu_time_mult() * 1e9), &b);
    uint64_t w = atomic_load(&s->ring.word[smoe__map_slot(atomic_load(&s->map[1]))]);
    print_message("failed_push_not_dropped: "
                  "%u stale tokens filled the demand queue; K2's prefetch %s while it was "
                  "full; K2's claim_wait: %s (slot state %u)\n", injected,
                  returned_while_full ? "returned" : "did not return", smoe_err_name(r),
                  (unsigned)smoe__w_state(w));
    if (r >= 0)
        assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b), SMOE_READY);
    assert_int_equal(smoe_release(s, &b), 0);
    const uint64_t counted = atomic_load(&s->c_push_full);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
    if (r < 0)
        fail_msg("K2's tokens were dropped: its load stays LOADING (claim_wait %s)",
                 smoe_err_name(r));
    assert_true(counted > 0);
}

/* ---- what smoe_prefetch waits for ---------------------------------------- */

/*
 * What smoe_prefetch promises (smoe.h): with the only worker held in a
 * read, every prefetch returns at once (no wait for a worker, a read or
 * queue room); a prefetch of an expert whose slot another thread's
 * prefetch is picking (PENDING) returns once that thread has picked it,
 * with SMOE_INFLIGHT; a prefetch of another expert meanwhile returns.
 */
static void prefetch_waits_only_for_a_slot_pick(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 3, 20000, 20000, 34);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 3;
    smoe_stream *s = tu_fx_open(f, &o);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    /* The worker is held: none of these waits for it. */
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_INFLIGHT);
    assert_int_equal(smoe_prefetch(s, 0, 0, SMOE_PREFETCH_SPECULATIVE), SMOE_INFLIGHT);
    /* A thread picking K1's slot, paused there; another's prefetch of K1
     * waits for the pick, one of K2 does not. */
    pause_at(s, SMOE__HOOK_SLOT_PICK);
    struct pf holder = {s, 1, 0, 0}, joiner = {s, 1, 0, 0};
    pthread_t th, tj;
    assert_int_equal(pthread_create(&th, NULL, prefetch_main, &holder), 0);
    tu_wait_flag(&pause1.paused, "the holder picking a slot");
    assert_int_equal(pthread_create(&tj, NULL, prefetch_main, &joiner), 0);
    usleep(20000);
    int joiner_early = atomic_load(&joiner.done);
    int other = smoe_prefetch(s, 0, 2, 0);
    atomic_store(&pause1.release, 1);
    pthread_join(th, NULL);
    pthread_join(tj, NULL);
    atomic_store(&s->hook, NULL);
    print_message("prefetch_waits_only_for_a_slot_pick: "
                  "joiner of a PENDING entry returned %s the pick: %d (SMOE_INFLIGHT "
                  "%d)\n", joiner_early ? "before" : "after", joiner.r, SMOE_INFLIGHT);
    assert_false(joiner_early);
    assert_int_equal(other, SMOE_QUEUED);
    assert_int_equal(holder.r, SMOE_QUEUED);
    assert_int_equal(joiner.r, SMOE_INFLIGHT);
    atomic_store(&fio.hold, 0);
    smoe_blob b;
    for (uint32_t e = 0; e < 3; e++) /* K0: 2 demand prefetches; K1: 2; K2: 1 */
        for (int i = 0; i < (e < 2 ? 2 : 1); i++) {
            assert_int_equal(smoe_claim_wait(s, 0, e, tu_bound_ns(), &b) >= 0, 1);
            assert_int_equal(smoe_release(s, &b), 0);
        }
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* ---- one failure's error and fault record -------------------------------- */

/*
 * One expert K, verification on. Its first read lands corrupt bytes:
 * ECHECKSUM, no fault record beyond the code (pins 1). Claimer C reads the
 * error (ECHECKSUM) and pauses before it copies the fault record. Another
 * claim reports ECHECKSUM (pins 0), the bytes are repaired, a demand
 * prefetch retries (pins 1) and that read fails with ENXIO: FAILED, pins
 * 1, the same gen: the very word C read. C resumes: it must report one
 * failure, ECHECKSUM without a read's errno or EIO with ENXIO, not the
 * first failure's code with the second's fault record.
 */
static void error_and_fault_of_one_failure(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 1, 20000, 20000, 35);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 1;
    o.verify = SMOE_VERIFY_ON;
    smoe_stream *s = tu_fx_open(f, &o);
    const uint64_t at = s->vault.index[0].offset + 100; /* read buffered: seen at once */
    tu_flip_byte(f->path, at);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    wait_state(s, 0, 0, SMOE__SLOT_FAILED, "K's checksum failure");
    pause_at(s, SMOE__HOOK_CLAIM_ERR);
    struct claimer c = {s, 0, 0, ""};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, claimer_main, &c), 0);
    tu_wait_flag(&pause1.paused, "the claimer after reading the error");
    const uint64_t w0 = atomic_load(&s->ring.word[0]);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ECHECKSUM); /* pins 0 */
    tu_flip_byte(f->path, at);
    fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_PREAD, 1, ENXIO, 0);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED); /* retry, pins 1 */
    uint64_t t0 = tu_now_ns();
    while (atomic_load(&s->ring.word[0]) != w0) {
        if (tu_now_ns() - t0 > tu_bound_ns())
            fail_msg("the retry never failed back to the same word");
        usleep(200);
    }
    atomic_store(&pause1.release, 1);
    pthread_join(t, NULL);
    atomic_store(&s->hook, NULL);
    print_message("error_and_fault_of_one_failure: "
                  "C read ECHECKSUM, the slot failed again (EIO, ENXIO) under the same "
                  "word: C's claim: %s: %s\n", smoe_err_name(c.r), c.msg);
    int enxio = strstr(c.msg, "ENXIO") != NULL;
    int mixed = (c.r == SMOE_ECHECKSUM && enxio) || (c.r == SMOE_EIO && !enxio);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
    if (mixed)
        fail_msg("the claim mixed two failures: %s with \"%s\"", smoe_err_name(c.r), c.msg);
    assert_true(c.r == SMOE_ECHECKSUM || c.r == SMOE_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_reports_only_its_experts_error),
        cmocka_unit_test(pins_counted_not_owned),
        cmocka_unit_test(failed_push_not_dropped),
        cmocka_unit_test(prefetch_waits_only_for_a_slot_pick),
        cmocka_unit_test(error_and_fault_of_one_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
