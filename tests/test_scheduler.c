/*
 * Description: the scheduler (src/scheduler.c), the one structure every
 * read goes through: demand overtakes every other class, whatever was
 * queued before it; each class is served in its order (demand, the
 * verification hand-off, hinted speculation from the most probable band
 * down, plain speculation, the idle top-up) and first in, first out
 * within it; the verification hand-off is served ahead of all
 * speculation, so a start-up fill's end never waits behind it, and only
 * to workers without a fill share; each token's reserved room goes back
 * when it is popped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "scheduler.h"

#define CAP 64u

/* Queue a token in class c, in room reserved first as producers do (the
 * hand-off reserves none). */
static void put(smoe__sched *sc, unsigned c, uint32_t slot)
{
    if (c != SMOE__CL_VERIFY)
        assert_true(smoe__mpmc_reserve(&sc->q[c], 1));
    assert_true(smoe__mpmc_push(&sc->q[c], (smoe__req){slot, 0}));
}

static void pop_expect(smoe__sched *sc, int may_verify, unsigned c, uint32_t slot)
{
    smoe__req rq;
    assert_int_equal(smoe__sched_pop(sc, may_verify, &rq), c);
    assert_int_equal(rq.slot, slot);
}

/* A demand token queued after a token of every other class is served
 * first; and again after the others have each been served once. */
static void t_demand_overtakes(void **state)
{
    (void)state;
    smoe__sched sc;
    assert_int_equal(smoe__sched_init(&sc, CAP, CAP), 0);
    for (unsigned c = SMOE__CL_QUEUES; c-- > 1;)
        put(&sc, c, 100 + c);
    put(&sc, SMOE__CL_DEMAND, 1);
    pop_expect(&sc, 1, SMOE__CL_DEMAND, 1);
    pop_expect(&sc, 1, SMOE__CL_VERIFY, 100 + SMOE__CL_VERIFY);
    put(&sc, SMOE__CL_DEMAND, 2);
    pop_expect(&sc, 1, SMOE__CL_DEMAND, 2);
    pop_expect(&sc, 1, SMOE__CL_HINT, 100 + SMOE__CL_HINT);
    smoe__sched_free(&sc);
}

/* Tokens queued lowest class first come out highest class first, FIFO
 * within a class, hint bands from the most probable down; then none. */
static void t_classes_in_order(void **state)
{
    (void)state;
    smoe__sched sc;
    assert_int_equal(smoe__sched_init(&sc, CAP, CAP), 0);
    for (unsigned c = SMOE__CL_QUEUES; c-- > 0;)
        for (uint32_t i = 0; i < 3; i++)
            put(&sc, c, c * 10 + i);
    for (unsigned c = 0; c < SMOE__CL_QUEUES; c++)
        for (uint32_t i = 0; i < 3; i++)
            pop_expect(&sc, 1, c, c * 10 + i);
    smoe__req rq;
    assert_int_equal(smoe__sched_pop(&sc, 1, &rq), SMOE__CL_NONE);
    /* band b's class: the top band right below the hand-off */
    assert_int_equal(smoe__sched_hint_class(SMOE__HINT_BANDS - 1), SMOE__CL_HINT);
    assert_int_equal(smoe__sched_hint_class(0), SMOE__CL_SPEC - 1);
    assert_true(SMOE__CL_SPEC < SMOE__CL_TOPUP);
    /* every reserved unit went back */
    for (unsigned c = 0; c < SMOE__CL_QUEUES; c++)
        assert_int_equal(atomic_load(&sc.q[c].reserved), 0);
    smoe__sched_free(&sc);
}

/* The hand-off is not starved by speculation: behind full speculative,
 * hinted and top-up queues it is the next token a worker without a share
 * takes. A worker still reading its share never takes it. */
static void t_verify_not_starved(void **state)
{
    (void)state;
    smoe__sched sc;
    assert_int_equal(smoe__sched_init(&sc, CAP, CAP), 0);
    for (unsigned c = SMOE__CL_HINT; c < SMOE__CL_QUEUES; c++)
        for (uint32_t i = 0; i < CAP; i++)
            put(&sc, c, i);
    put(&sc, SMOE__CL_VERIFY, 7);
    smoe__req rq;
    for (int i = 0; i < 5; i++)
        assert_int_not_equal(smoe__sched_pop(&sc, 0, &rq), SMOE__CL_VERIFY);
    pop_expect(&sc, 1, SMOE__CL_VERIFY, 7);
    smoe__sched_free(&sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_demand_overtakes),
        cmocka_unit_test(t_classes_in_order),
        cmocka_unit_test(t_verify_not_starved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
