/* latency.c - see latency.h. */
#include "latency.h"

static unsigned bucket_of(uint64_t ns)
{
    if (ns < (1ull << 10))
        return 0;
    unsigned p = 63u - (unsigned)__builtin_clzll(ns); /* 10 .. 63 */
    if (p >= 10 + SMOE__LAT_POW)
        return SMOE__LAT_BUCKETS - 1;
    unsigned sub = (unsigned)((ns >> (p - 3)) & (SMOE__LAT_SUB - 1));
    return 1 + (p - 10) * SMOE__LAT_SUB + sub;
}

/* Upper edge of bucket b in ns. */
static uint64_t bucket_top(unsigned b)
{
    if (b == 0)
        return 1ull << 10;
    unsigned p = 10 + (b - 1) / SMOE__LAT_SUB, sub = (b - 1) % SMOE__LAT_SUB;
    return (1ull << p) + ((uint64_t)(sub + 1) << (p - 3));
}

void smoe__lat_add(smoe__lat_hist *h, uint64_t ns)
{
    /* relaxed: statistics only, no ordering with anything */
    atomic_fetch_add_explicit(&h->bucket[bucket_of(ns)], 1, memory_order_relaxed);
}

uint64_t smoe__lat_quantile(const smoe__lat_hist *h, double q, uint64_t *count)
{
    uint64_t c[SMOE__LAT_BUCKETS], n = 0;
    for (unsigned b = 0; b < SMOE__LAT_BUCKETS; b++) {
        /* relaxed: a snapshot for statistics */
        c[b] = atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
        n += c[b];
    }
    if (count)
        *count = n;
    if (n == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)n), seen = 0;
    for (unsigned b = 0; b < SMOE__LAT_BUCKETS; b++) {
        seen += c[b];
        if (seen > rank)
            return bucket_top(b);
    }
    return bucket_top(SMOE__LAT_BUCKETS - 1);
}
