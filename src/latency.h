/*
 * latency.h - a lock-free latency histogram: log-linear buckets (8 per
 * power of two, so quantiles are within 9%) from 1 us to about 1 hour.
 * Recording is one relaxed atomic add on a pre-allocated array; no lock,
 * no allocation. Used for time from prefetch to READY.
 */
#ifndef SMOE_LATENCY_H
#define SMOE_LATENCY_H

#include <stdatomic.h>
#include <stdint.h>

#define SMOE__LAT_SUB 8                     /* buckets per power of two */
#define SMOE__LAT_POW 32                    /* 2^10 ns .. 2^42 ns */
#define SMOE__LAT_BUCKETS (SMOE__LAT_SUB * SMOE__LAT_POW + 1)

typedef struct smoe__lat_hist {
    _Atomic uint64_t bucket[SMOE__LAT_BUCKETS];
} smoe__lat_hist;

/* Record one latency. Any thread. */
void smoe__lat_add(smoe__lat_hist *h, uint64_t ns);
/* The q-quantile (0 < q < 1) in ns, 0 if empty; *count gets the total. */
uint64_t smoe__lat_quantile(const smoe__lat_hist *h, double q, uint64_t *count);

#endif
