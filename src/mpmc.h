/*
 * mpmc.h - bounded lock-free multi-producer multi-consumer queue
 * (Dmitry Vyukov's algorithm, with the cell freed in the consumer's claim),
 * and room reservations that make a push never find it full.
 *
 * Invariants:
 *  - capacity is a power of two; cells are allocated once at init, never
 *    after: push and pop allocate nothing and take no lock.
 *  - cell i's seq says whose turn it is: seq == pos means free for the
 *    producer that claims position pos; seq == pos + 1 means filled for the
 *    consumer of pos; seq == pos + capacity means consumed (free for the
 *    producer of the next lap).
 *  - A consumer reads the request, then claims the position with one CAS
 *    of the cell's seq from pos + 1 to pos + capacity: the claim frees the
 *    cell. (In Vyukov's original a consumer claims by a CAS on deq_pos and
 *    frees the cell by a later store, so a consumer stalled between the
 *    two made producers a lap ahead see the queue full.) deq_pos only
 *    tells consumers where to look; any of them advances it past a
 *    consumed cell. Positions are therefore consumed in order.
 *  - So a push at position p fails only when position p - capacity is not
 *    consumed, that is when capacity positions before p have been claimed
 *    by producers and none of them consumed: "full" is exact.
 *  - Reservations: a producer that first reserves room for its pushes
 *    (smoe__mpmc_reserve) while every consumer returns one unit of room
 *    after each pop (smoe__mpmc_unreserve) never finds the queue full:
 *    reserved room counts every position claimed and not yet consumed,
 *    and never exceeds the capacity. That needs the orders: a give-back is
 *    a release and a successful reservation an acquire, so a producer
 *    whose reservation took room a consumer gave back sees that consumer's
 *    freeing of its cell (relaxed, C11 lets the push read the old seq, and
 *    ARMv8 can).
 *  - A producer stalled between its enq_pos CAS and its seq store hides
 *    the tokens pushed after it from consumers until it resumes (Vyukov's
 *    queue is not wait-free); no token is lost and no wake-up either (the
 *    producer notifies after its push).
 *  - enq_pos and deq_pos run free as unsigned counters and are compared
 *    only by their signed difference with a cell's seq, so wrap-around of
 *    size_t is harmless.
 *  - producers, consumers and reservations touch different counters, kept
 *    on separate cache lines; the cell array is a separate allocation.
 *
 * Progress: push, pop and reserve are lock-free (a failed CAS means another
 * thread advanced), not wait-free. Full, empty and no room are reported,
 * never waited for.
 */
#ifndef SMOE_MPMC_H
#define SMOE_MPMC_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc.h"

/* One queued read request: a slot and the generation it was queued for. */
typedef struct smoe__req {
    uint32_t slot;
    uint32_t gen;
} smoe__req;

typedef struct smoe__mpmc_cell {
    atomic_size_t seq;
    _Atomic uint64_t req; /* slot << 32 | gen: read before the claim, so atomic */
} smoe__mpmc_cell;

typedef struct smoe__mpmc {
    alignas(64) atomic_size_t enq_pos; /* producers */
    alignas(64) atomic_size_t deq_pos; /* consumers */
    alignas(64) _Atomic size_t reserved; /* room reserved by producers, not yet freed */
    alignas(64) smoe__mpmc_cell *cells;
    size_t mask;
} smoe__mpmc;

/* capacity: rounded up to a power of two (>= 2). Returns 0 or -1 (ENOMEM). */
static inline int smoe__mpmc_init(smoe__mpmc *q, size_t capacity)
{
    size_t cap = 2;
    while (cap < capacity)
        cap <<= 1;
    q->cells = smoe__calloc(cap, sizeof *q->cells);
    if (!q->cells)
        return -1;
    q->mask = cap - 1;
    for (size_t i = 0; i < cap; i++) {
        atomic_init(&q->cells[i].seq, i);
        atomic_init(&q->cells[i].req, 0);
    }
    atomic_init(&q->enq_pos, 0);
    atomic_init(&q->deq_pos, 0);
    atomic_init(&q->reserved, 0);
    return 0;
}

static inline void smoe__mpmc_free(smoe__mpmc *q)
{
    free(q->cells);
    q->cells = NULL;
}

/* Tokens the queue holds at most. */
static inline size_t smoe__mpmc_capacity(const smoe__mpmc *q)
{
    return q->mask + 1;
}

/* Any thread. Reserve room for n pushes: 1, or 0 (nothing reserved) when
 * the room left is less than n. */
static inline int smoe__mpmc_reserve(smoe__mpmc *q, size_t n)
{
    /* relaxed: the CAS below decides */
    size_t cur = atomic_load_explicit(&q->reserved, memory_order_relaxed);
    do {
        if (n > q->mask + 1 - cur)
            return 0;
        /* acquire on success: pairs with the release of smoe__mpmc_unreserve
         * whose room this reservation takes (every write of reserved is an
         * RMW: a release sequence), so the consumer's release CAS of the
         * cell's seq that preceded it is visible to our pushes; relaxed on
         * failure: the loop decides again */
    } while (!atomic_compare_exchange_weak_explicit(&q->reserved, &cur, cur + n,
                                                    memory_order_acquire,
                                                    memory_order_relaxed));
    return 1;
}

/* Any thread. Give back room for n: reserved and not pushed, or popped. */
static inline void smoe__mpmc_unreserve(smoe__mpmc *q, size_t n)
{
    /* release: pairs with the acquire of the smoe__mpmc_reserve that takes
     * this room; a consumer's freeing of its cell (pop) comes before */
    atomic_fetch_sub_explicit(&q->reserved, n, memory_order_release);
}

/* Any thread. Returns 1 if pushed, 0 if the queue is full (never after a
 * reservation: see the invariants). */
static inline int smoe__mpmc_push(smoe__mpmc *q, smoe__req req)
{
    /* relaxed: only a starting guess; the cell's seq acquire below orders */
    size_t pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
    smoe__mpmc_cell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        /* acquire: pairs with the consumer's release CAS of seq that freed
         * this cell, so our write of req cannot pass its read */
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)(seq - pos); /* wraps: no signed overflow */
        if (dif == 0) {
            /* relaxed: claiming the position publishes nothing yet; the seq
             * release store below publishes the request */
            if (atomic_compare_exchange_weak_explicit(&q->enq_pos, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return 0; /* full */
        } else {
            /* relaxed: another producer took pos; re-read a fresher guess */
            pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
        }
    }
    /* relaxed: published by the seq release store below */
    atomic_store_explicit(&c->req, (uint64_t)req.slot << 32 | req.gen, memory_order_relaxed);
    /* release: pairs with the consumer's acquire load of seq in pop */
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
    return 1;
}

/* Any thread. Returns 1 and fills *out, or 0 if the queue is empty. */
static inline int smoe__mpmc_pop(smoe__mpmc *q, smoe__req *out)
{
    /* relaxed: only where to look; the cell's seq acquire below orders */
    size_t pos = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
    for (;;) {
        smoe__mpmc_cell *c = &q->cells[pos & q->mask];
        /* acquire: pairs with the producer's release store of seq in push */
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)(seq - (pos + 1)); /* wraps: no signed overflow */
        if (dif < 0)
            return 0; /* empty: position pos is not filled yet */
        size_t next = pos + 1;
        if (dif == 0) {
            /* relaxed: ordered after the seq acquire above, and valid only
             * if the claim below succeeds (the next lap's producer writes
             * it only after a claim) */
            uint64_t r = atomic_load_explicit(&c->req, memory_order_relaxed);
            /* release: pairs with the next lap's producer's acquire load of
             * seq (our read of req happens before its write); relaxed on
             * failure: another consumer took pos, look again */
            if (atomic_compare_exchange_strong_explicit(&c->seq, &seq, pos + q->mask + 1,
                                                        memory_order_release,
                                                        memory_order_relaxed)) {
                /* relaxed: only a hint of where to look (may fail: a
                 * consumer that saw our claim advanced it already) */
                atomic_compare_exchange_strong_explicit(&q->deq_pos, &pos, next,
                                                        memory_order_relaxed,
                                                        memory_order_relaxed);
                out->slot = (uint32_t)(r >> 32);
                out->gen = (uint32_t)r;
                return 1;
            }
        } else {
            /* Position pos is consumed already: move deq_pos past it (it
             * fails if another consumer did). relaxed: a hint, as above */
            atomic_compare_exchange_strong_explicit(&q->deq_pos, &pos, next,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed);
        }
        /* relaxed: a fresher guess of where to look */
        pos = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
    }
}

/* Approximate number of queued items (for stats and heuristics only). */
static inline size_t smoe__mpmc_size(smoe__mpmc *q)
{
    /* relaxed: a snapshot for statistics, no ordering needed */
    size_t e = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
    size_t d = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
    return e - d <= q->mask + 1 ? e - d : 0;
}

#endif
