/*
 * Description: the bounded Vyukov MPMC queue (src/mpmc.h): FIFO order and
 * full/empty reporting single-threaded; a multi-producer multi-consumer
 * stress in which every item arrives exactly once and each producer's items
 * arrive in the order it pushed them; room reservations: producers that
 * reserve room before each push, while consumers give it back after each
 * pop, never see a push fail, on a queue of 2 cells wrapping constantly;
 * positions across size_t wrap-around and across 2^63.
 *
 * Stress shape (after concurrencykit's ring validator): all threads start
 * behind a barrier; each producer stamps items with its id and its own
 * sequence number; a per-item seen counter catches loss and duplication;
 * random pauses vary the interleavings. SMOE_TEST_ITERS overrides the item
 * count per producer.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "mpmc.h"
#include "platform/park.h"

static void fifo_single_thread(void **state)
{
    (void)state;
    smoe__mpmc q;
    assert_int_equal(smoe__mpmc_init(&q, 5), 0); /* rounds up to 8 */
    smoe__req r;
    assert_int_equal(smoe__mpmc_pop(&q, &r), 0);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(smoe__mpmc_push(&q, (smoe__req){i, i * 10}), 1);
    assert_int_equal(smoe__mpmc_push(&q, (smoe__req){99, 0}), 0); /* full */
    assert_int_equal(smoe__mpmc_size(&q), 8);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(smoe__mpmc_pop(&q, &r), 1);
        assert_int_equal(r.slot, i);
        assert_int_equal(r.gen, i * 10);
    }
    assert_int_equal(smoe__mpmc_pop(&q, &r), 0);
    /* Wrap around many times: positions run free. */
    for (uint32_t i = 0; i < 1000; i++) {
        assert_int_equal(smoe__mpmc_push(&q, (smoe__req){i, 0}), 1);
        assert_int_equal(smoe__mpmc_push(&q, (smoe__req){i + 1, 0}), 1);
        assert_int_equal(smoe__mpmc_pop(&q, &r), 1);
        assert_int_equal(r.slot, i);
        assert_int_equal(smoe__mpmc_pop(&q, &r), 1);
        assert_int_equal(r.slot, i + 1);
    }
    smoe__mpmc_free(&q);
}

enum { MAX_PRODUCERS = 8 };

struct stress {
    smoe__mpmc q;
    pthread_barrier_t start;
    uint32_t producers, consumers, per_producer;
    _Atomic uint32_t *seen;        /* producers * per_producer */
    _Atomic uint64_t consumed;
    _Atomic int order_errors, dup_errors;
};

struct thread_arg {
    struct stress *st;
    uint32_t id;
};

static uint32_t xorshift(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* Spin a little, yield a little, then sleep: with more threads than cores
 * a pure spinner holds the core the thread it waits for needs, and on a
 * loaded machine sched_yield alone can hand the core back to the spinner
 * again and again while the producer that owns the next cell is preempted
 * (a 1 s run took over 60 s at a load average of 12). */
static void backoff(unsigned spins)
{
    if (spins < 64) {
        smoe__cpu_relax();
    } else if (spins < 256) {
        sched_yield();
    } else {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static void *producer(void *p)
{
    struct thread_arg *a = p;
    struct stress *st = a->st;
    uint32_t rnd = a->id * 2654435761u + 1;
    pthread_barrier_wait(&st->start);
    for (uint32_t i = 0; i < st->per_producer; i++) {
        smoe__req r = {a->id, i}; /* slot = producer id, gen = its sequence */
        for (unsigned spins = 0; !smoe__mpmc_push(&st->q, r); spins++)
            backoff(spins);
        if ((xorshift(&rnd) & 63) == 0)
            for (int k = xorshift(&rnd) & 127; k > 0; k--)
                smoe__cpu_relax();
    }
    return NULL;
}

static void *consumer(void *p)
{
    struct thread_arg *a = p;
    struct stress *st = a->st;
    uint32_t last[MAX_PRODUCERS];
    for (int i = 0; i < MAX_PRODUCERS; i++)
        last[i] = UINT32_MAX;
    const uint64_t total = (uint64_t)st->producers * st->per_producer;
    uint32_t rnd = a->id * 40503u + 7;
    unsigned idle = 0;
    pthread_barrier_wait(&st->start);
    while (atomic_load(&st->consumed) < total) {
        smoe__req r;
        if (!smoe__mpmc_pop(&st->q, &r)) {
            backoff(idle++);
            continue;
        }
        idle = 0;
        atomic_fetch_add(&st->consumed, 1);
        if (r.slot >= st->producers || r.gen >= st->per_producer) {
            atomic_fetch_add(&st->order_errors, 1); /* torn or garbage item */
            continue;
        }
        /* One consumer sees a producer's items in increasing order. */
        if (last[r.slot] != UINT32_MAX && r.gen <= last[r.slot])
            atomic_fetch_add(&st->order_errors, 1);
        last[r.slot] = r.gen;
        if (atomic_fetch_add(&st->seen[(size_t)r.slot * st->per_producer + r.gen], 1) != 0)
            atomic_fetch_add(&st->dup_errors, 1);
        if ((xorshift(&rnd) & 63) == 0)
            for (int k = xorshift(&rnd) & 127; k > 0; k--)
                smoe__cpu_relax();
    }
    return NULL;
}

static void run_stress(uint32_t producers, uint32_t consumers, uint32_t per_producer,
                       size_t capacity)
{
    struct stress st;
    st.producers = producers;
    st.consumers = consumers;
    st.per_producer = per_producer;
    assert_int_equal(smoe__mpmc_init(&st.q, capacity), 0);
    st.seen = calloc((size_t)producers * per_producer, sizeof *st.seen);
    assert_non_null(st.seen);
    atomic_init(&st.consumed, 0);
    atomic_init(&st.order_errors, 0);
    atomic_init(&st.dup_errors, 0);
    pthread_barrier_init(&st.start, NULL, producers + consumers);
    pthread_t th[2 * MAX_PRODUCERS];
    struct thread_arg args[2 * MAX_PRODUCERS];
    for (uint32_t i = 0; i < producers + consumers; i++) {
        args[i].st = &st;
        args[i].id = i < producers ? i : i - producers;
        assert_int_equal(pthread_create(&th[i], NULL, i < producers ? producer : consumer,
                                        &args[i]), 0);
    }
    for (uint32_t i = 0; i < producers + consumers; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&st.order_errors), 0);
    assert_int_equal(atomic_load(&st.dup_errors), 0);
    for (size_t i = 0; i < (size_t)producers * per_producer; i++)
        assert_int_equal(atomic_load(&st.seen[i]), 1); /* nothing lost */
    smoe__req r;
    assert_int_equal(smoe__mpmc_pop(&st.q, &r), 0);
    pthread_barrier_destroy(&st.start);
    free(st.seen);
    smoe__mpmc_free(&st.q);
}

static uint32_t iters(uint32_t dflt)
{
    const char *e = getenv("SMOE_TEST_ITERS");
    return e && atoi(e) > 0 ? (uint32_t)atoi(e) : dflt;
}

static void mpmc_stress_4x4(void **state)
{
    (void)state;
    run_stress(4, 4, iters(200000), 64);
}

static void mpmc_stress_tiny_queue(void **state)
{
    (void)state;
    run_stress(MAX_PRODUCERS, 2, iters(200000) / 4, 2); /* constant full/empty */
}

static void reservations_single_thread(void **state)
{
    (void)state;
    smoe__mpmc q;
    assert_int_equal(smoe__mpmc_init(&q, 4), 0);
    assert_int_equal(smoe__mpmc_capacity(&q), 4);
    assert_true(smoe__mpmc_reserve(&q, 3));
    assert_false(smoe__mpmc_reserve(&q, 2)); /* 1 left: nothing reserved */
    assert_true(smoe__mpmc_reserve(&q, 1));
    assert_false(smoe__mpmc_reserve(&q, 1));
    smoe__mpmc_unreserve(&q, 4);
    assert_true(smoe__mpmc_reserve(&q, 4));
    smoe__mpmc_free(&q);
}

/* Reserve-then-push producers and pop-then-unreserve consumers. */
struct resv {
    smoe__mpmc q;
    pthread_barrier_t start;
    uint32_t per_producer, producers;
    _Atomic uint64_t popped, failed_pushes;
};

static void *resv_producer(void *p)
{
    struct resv *st = p;
    pthread_barrier_wait(&st->start);
    for (uint32_t i = 0; i < st->per_producer; i++) {
        while (!smoe__mpmc_reserve(&st->q, 1))
            sched_yield(); /* the test's producers may wait; the library's do not */
        if (!smoe__mpmc_push(&st->q, (smoe__req){i, 0})) {
            atomic_fetch_add(&st->failed_pushes, 1);
            smoe__mpmc_unreserve(&st->q, 1);
            atomic_fetch_add(&st->popped, 1); /* so that the consumers finish */
        }
    }
    return NULL;
}

static void *resv_consumer(void *p)
{
    struct resv *st = p;
    const uint64_t total = (uint64_t)st->per_producer * st->producers;
    smoe__req r;
    pthread_barrier_wait(&st->start);
    while (atomic_load(&st->popped) < total) {
        if (smoe__mpmc_pop(&st->q, &r)) {
            smoe__mpmc_unreserve(&st->q, 1);
            atomic_fetch_add(&st->popped, 1);
        } else {
            sched_yield();
        }
    }
    return NULL;
}

static void reserved_push_never_fails(void **state)
{
    (void)state;
    struct resv st = {0};
    st.producers = 4;
    st.per_producer = iters(200000) / 4;
    assert_int_equal(smoe__mpmc_init(&st.q, 2), 0);
    pthread_barrier_init(&st.start, NULL, 6);
    pthread_t th[6];
    for (int i = 0; i < 6; i++)
        assert_int_equal(pthread_create(&th[i], NULL, i < 4 ? resv_producer : resv_consumer,
                                        &st), 0);
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&st.start);
    print_message("reserved pushes: %llu popped, %llu pushes failed\n",
                  (unsigned long long)atomic_load(&st.popped),
                  (unsigned long long)atomic_load(&st.failed_pushes));
    assert_int_equal(atomic_load(&st.failed_pushes), 0);
    assert_int_equal(atomic_load(&st.q.reserved), 0);
    smoe__mpmc_free(&st.q);
}

/*
 * Positions across size_t wrap-around and across 2^63 (no signed overflow:
 * UBSan in CI stage 2): every round pushes and pops in FIFO order, a full
 * queue refuses one more push and an empty one pops nothing.
 */

static void set_positions(smoe__mpmc *q, size_t base)
{
    atomic_store(&q->enq_pos, base);
    atomic_store(&q->deq_pos, base);
    for (size_t p = base, i = 0; i <= q->mask; i++, p++)
        atomic_store(&q->cells[p & q->mask].seq, p);
}

static void wrap_at(size_t base)
{
    smoe__mpmc q;
    assert_int_equal(smoe__mpmc_init(&q, 4), 0);
    set_positions(&q, base);
    uint32_t next_in = 0, next_out = 0;
    for (int round = 0; round < 40; round++) {
        unsigned k = 1 + (unsigned)round % 4;
        for (unsigned i = 0; i < k; i++, next_in++)
            assert_int_equal(smoe__mpmc_push(&q, (smoe__req){next_in, next_in}), 1);
        if (k == 4)
            assert_int_equal(smoe__mpmc_push(&q, (smoe__req){0, 0}), 0); /* exactly full */
        for (unsigned i = 0; i < k; i++, next_out++) {
            smoe__req r;
            assert_int_equal(smoe__mpmc_pop(&q, &r), 1);
            assert_int_equal(r.slot, next_out);
        }
        smoe__req r;
        assert_int_equal(smoe__mpmc_pop(&q, &r), 0);
    }
    smoe__mpmc_free(&q);
}

static void mpmc_positions_wrap(void **state)
{
    (void)state;
    wrap_at(SIZE_MAX - 5);
    wrap_at((SIZE_MAX >> 1) - 5); /* across 2^63: the signed difference */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_single_thread),
        cmocka_unit_test(mpmc_stress_4x4),
        cmocka_unit_test(mpmc_stress_tiny_queue),
        cmocka_unit_test(reservations_single_thread),
        cmocka_unit_test(reserved_push_never_fails),
        cmocka_unit_test(mpmc_positions_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
