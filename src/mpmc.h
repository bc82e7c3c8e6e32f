/*
 * mpmc.h - bounded lock-free multi-producer multi-consumer queue
 * (Dmitry Vyukov's algorithm).
 *
 * Invariants:
 *  - capacity is a power of two; cells are allocated once at init, never
 *    after: push and pop allocate nothing and take no lock.
 *  - cell i's seq says whose turn it is: seq == pos means free for the
 *    producer that claims position pos; seq == pos + 1 means filled for the
 *    consumer of pos; a consumer frees it by storing pos + capacity.
 *  - enq_pos and deq_pos run free as unsigned counters and are compared
 *    only by their signed difference with a cell's seq, so wrap-around of
 *    size_t is harmless.
 *  - producers and consumers touch different counters, kept on separate
 *    cache lines; the cell array is a separate allocation.
 *
 * Progress: push and pop are lock-free (a failed CAS means another thread
 * advanced), not wait-free. Full and empty are reported, never waited for.
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
    smoe__req req;
} smoe__mpmc_cell;

typedef struct smoe__mpmc {
    alignas(64) atomic_size_t enq_pos; /* producers */
    alignas(64) atomic_size_t deq_pos; /* consumers */
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
    for (size_t i = 0; i < cap; i++)
        atomic_init(&q->cells[i].seq, i);
    atomic_init(&q->enq_pos, 0);
    atomic_init(&q->deq_pos, 0);
    return 0;
}

static inline void smoe__mpmc_free(smoe__mpmc *q)
{
    free(q->cells);
    q->cells = NULL;
}

/* Any thread. Returns 1 if pushed, 0 if the queue is full. */
static inline int smoe__mpmc_push(smoe__mpmc *q, smoe__req req)
{
    /* relaxed: only a starting guess; the cell's seq acquire below orders */
    size_t pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
    smoe__mpmc_cell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        /* acquire: pairs with the release store of seq by the consumer that
         * freed this cell, so our write of req cannot pass its read */
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
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
    c->req = req;
    /* release: pairs with the consumer's acquire load of seq in pop */
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
    return 1;
}

/* Any thread. Returns 1 and fills *out, or 0 if the queue is empty. */
static inline int smoe__mpmc_pop(smoe__mpmc *q, smoe__req *out)
{
    /* relaxed: only a starting guess; the cell's seq acquire below orders */
    size_t pos = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
    smoe__mpmc_cell *c;
    for (;;) {
        c = &q->cells[pos & q->mask];
        /* acquire: pairs with the producer's release store of seq in push */
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            /* relaxed: the seq acquire above already ordered the req read */
            if (atomic_compare_exchange_weak_explicit(&q->deq_pos, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return 0; /* empty */
        } else {
            /* relaxed: another consumer took pos; re-read a fresher guess */
            pos = atomic_load_explicit(&q->deq_pos, memory_order_relaxed);
        }
    }
    *out = c->req;
    /* release: pairs with the next producer's acquire load of seq in push */
    atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
    return 1;
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
