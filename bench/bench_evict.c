/*
 * bench_evict.c - the work per eviction (not a test: it measures). For
 * rings of 64, 1,024 and 65,536 slots, every slot retained (CONSUMED, no
 * reference: all are candidates, none EMPTY), it times one victim scan
 * (smoe__evict_pick) under lru, under reuse with the slots' scores cached
 * (the usual case: a score changes only when its layer is visited, its
 * expert used or the weights snapshot renewed), and under reuse with every
 * score recomputed (the worst case); and the reuse bookkeeping a demand
 * prefetch adds (smoe__reuse_visit and smoe__reuse_use). Median over
 * repetitions, on whatever else the machine is doing: compare the columns
 * of one run.
 *
 * Usage: bench_evict [reps]
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "policy/evict_reuse.h"
#include "platform/park.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define LAYERS 64u
#define EXPERTS 64u

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return v[n / 2];
}

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Fill every slot with a retained expert and teach reuse a history. */
static void fill(smoe_stream *s)
{
    const uint32_t nkeys = LAYERS * EXPERTS;
    for (uint32_t v = 0; v < s->ring.nslots; v++) {
        uint64_t w = smoe__w_new_load(0, v % nkeys, 0);
        atomic_store(&s->ring.word[v], smoe__w_with_state(w, SMOE__SLOT_CONSUMED));
        atomic_store(&s->ring.tick[v], v);
    }
    if (!s->reuse)
        return;
    uint64_t x = 88172645463325252ull;
    for (uint32_t t = 0; t < 200; t++)
        for (uint32_t l = 0; l < LAYERS; l++) {
            smoe__reuse_visit(s->reuse, l);
            for (int k = 0; k < 8; k++) {
                uint32_t e = (uint32_t)(rng(&x) % EXPERTS);
                smoe__reuse_use(s->reuse, l * EXPERTS + e, l);
            }
        }
    smoe__reuse_visit(s->reuse, LAYERS / 2); /* a visit under way */
}

/* Median ns of one scan; forget: drop every cached score first. */
static uint64_t time_scan(smoe_stream *s, int reps, int forget)
{
    uint64_t *t = malloc((size_t)reps * sizeof *t);
    for (int i = 0; i < reps; i++) {
        if (forget)
            for (uint32_t v = 0; v < s->ring.nslots; v++)
                smoe__reuse_forget(s->reuse, v);
        uint32_t slot;
        uint64_t word;
        uint64_t t0 = smoe__now_ns();
        int got = smoe__evict_pick(s, SMOE__PICK_DEMAND, 0, &slot, &word);
        t[i] = smoe__now_ns() - t0;
        if (!got) {
            fprintf(stderr, "bench_evict: no victim\n");
            exit(1);
        }
    }
    uint64_t m = median(t, (size_t)reps);
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 201;
    if (reps < 1)
        reps = 1;
    char *dir = tu_tmpdir(), *path = tu_path(dir, "bench.smoe");
    if (tu_make_vault(path, LAYERS, EXPERTS, 16384, 16384, 1) != 0) {
        fprintf(stderr, "bench_evict: cannot write %s\n", path);
        return 1;
    }
    printf("victim scan, all slots retained; median of %d scans (ns)\n", reps);
    printf("%8s %12s %14s %16s %12s %14s\n", "slots", "lru", "reuse cached",
           "reuse rescored", "lru/slot", "reuse/slot");
    static const uint32_t sizes[] = {64, 1024, 65536};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        smoe_stream *s = tu_open_ring(path, sizes[i], 1, SMOE_EVICT_LRU);
        fill(s);
        uint64_t lru = time_scan(s, reps, 0);
        smoe_close(s);
        s = tu_open_ring(path, sizes[i], 1, SMOE_EVICT_REUSE);
        fill(s);
        time_scan(s, 1, 0); /* computes and caches every score */
        uint64_t cached = time_scan(s, reps, 0);
        uint64_t fresh = time_scan(s, reps < 21 ? reps : 21, 1);
        smoe_close(s);
        printf("%8u %12llu %14llu %16llu %12.1f %14.1f\n", sizes[i], (unsigned long long)lru,
               (unsigned long long)cached, (unsigned long long)fresh,
               (double)lru / sizes[i], (double)cached / sizes[i]);
        fflush(stdout);
    }

    /* The demand path's bookkeeping: one visit per layer step, 8 uses. */
    smoe_stream *s = tu_open_ring(path, 64, 1, SMOE_EVICT_REUSE);
    uint64_t x = 2463534242ull, n = 0;
    uint64_t t0 = smoe__now_ns();
    for (uint32_t t = 0; t < 500; t++)
        for (uint32_t l = 0; l < LAYERS; l++) {
            smoe__reuse_visit(s->reuse, l);
            for (int k = 0; k < 8; k++, n++)
                smoe__reuse_use(s->reuse, l * EXPERTS + (uint32_t)(rng(&x) % EXPERTS), l);
        }
    uint64_t dt = smoe__now_ns() - t0;
    smoe_stats st = SMOE_STATS_INIT;
    smoe_get_stats(s, &st);
    printf("reuse per demand prefetch: %.0f ns (%llu requests, %.2f examples learned each)\n",
           (double)dt / (double)n, (unsigned long long)n,
           (double)st.reuse_examples / (double)n);
    smoe_close(s);
    tu_rmdir(dir);
    free(path);
    free(dir);
    return 0;
}
