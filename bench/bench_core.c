/*
 * bench_core.c - micro-benchmarks of the streamer's hot path (not a test:
 * it asserts nothing, it measures). Prints:
 *  - CPU time used by a stream with N parked workers over a quiet interval;
 *  - wake-up latency: from the smoe_prefetch call to the parked worker's
 *    read starting (an instrumented smoe__io table timestamps the pread);
 *  - the hot path per call on retained experts: smoe_prefetch, smoe_claim
 *    and smoe_release each timed over batches of calls (a batch of demand
 *    prefetches of one expert, as many claims, as many releases), and the
 *    claim + release and prefetch + claim + release round trips;
 *  - speculative prefetches of retained experts, plain and hinted
 *    (smoe_prefetch_hint) in alternate batches, and demand prefetches once
 *    hints are on.
 *
 * Usage: bench_core [workers] [seconds-idle]
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "platform/park.h"
#include "smoe/smoe.h"
#include "testutil.h"

static _Atomic uint64_t pread_t; /* time of the latest pread */

static ssize_t timed_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    (void)io;
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&pread_t, &zero, smoe__now_ns());
    return smoe__io_os.pread(&smoe__io_os, fd, buf, n, off);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void pct(const char *what, uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    printf("%-34s p50 %8.0f ns   p90 %8.0f ns   p99 %8.0f ns   (n=%zu)\n", what,
           (double)v[n / 2], (double)v[n * 9 / 10], (double)v[n * 99 / 100], n);
}

int main(int argc, char **argv)
{
    uint32_t workers = argc > 1 ? (uint32_t)atoi(argv[1]) : 16;
    double idle_s = argc > 2 ? atof(argv[2]) : 3.0;
    char *dir = tu_tmpdir(), *path = tu_path(dir, "bench.smoe");
    const uint32_t E = 256;
    if (tu_make_vault(path, 1, E, 16384, 16384, 3) != 0) {
        fprintf(stderr, "bench_core: cannot write %s\n", path);
        return 1;
    }
    smoe__io io = smoe__io_os;
    io.pread = timed_pread;
    smoe__io_set(&io);

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = workers;
    o.ring_slots = E;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    int r = smoe_open(path, &o, &s);
    if (r < 0) {
        fprintf(stderr, "bench_core: %s\n", smoe_last_error());
        return 1;
    }
    smoe_stats st = SMOE_STATS_INIT;
    printf("libsmoe_stream %s, %u workers, %s I/O\n", smoe_version_string(), workers,
           (smoe_get_stats(s, &st), st.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered"));

    /* Idle CPU: every worker parked. */
    usleep(200000);
    double c0 = cpu_seconds();
    uint64_t t0 = smoe__now_ns();
    usleep((useconds_t)(idle_s * 1e6));
    double cpu = cpu_seconds() - c0, wall = (double)(smoe__now_ns() - t0) / 1e9;
    printf("idle: %.4f CPU s over %.2f s wall (%.3f%% of one core)\n", cpu, wall,
           100.0 * cpu / wall);

    /* Wake-up latency: one demand read at a time, workers parked between. */
    enum { WAKES = 200 };
    uint64_t wake[WAKES];
    for (uint32_t i = 0; i < WAKES; i++) {
        usleep(2000); /* let the worker park again */
        atomic_store(&pread_t, 0);
        uint64_t t = smoe__now_ns();
        if (smoe_prefetch(s, 0, i, 0) != SMOE_QUEUED) {
            fprintf(stderr, "bench_core: prefetch: %s\n", smoe_last_error());
            return 1;
        }
        smoe_blob b;
        if (smoe_claim_wait(s, 0, i, UINT64_MAX, &b) < 0 || smoe_release(s, &b) < 0) {
            fprintf(stderr, "bench_core: claim: %s\n", smoe_last_error());
            return 1;
        }
        wake[i] = atomic_load(&pread_t) - t;
    }
    pct("wake-up (prefetch call -> pread)", wake, WAKES);

    /* Per call, on retained experts (0..199 are resident). A batch is
     * PER_CALL demand prefetches of one expert (each adds a pin: at most
     * 127), then as many claims (each takes a reference, at most 255, and
     * removes a pin), then as many releases. */
    enum { BATCHES = 2000, PER_CALL = 100 };
    uint64_t *lp = malloc(sizeof *lp * BATCHES), *lc = malloc(sizeof *lc * BATCHES),
             *lr = malloc(sizeof *lr * BATCHES);
    smoe_blob *held = calloc(PER_CALL, sizeof *held);
    unsigned failed = 0;
    for (int k = 0; k < BATCHES; k++) {
        uint32_t e = (uint32_t)k % WAKES;
        uint64_t ta = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_prefetch(s, 0, e, 0) != SMOE_RESIDENT;
        uint64_t t1 = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_claim(s, 0, e, &held[j]) != SMOE_HIT;
        uint64_t t2 = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_release(s, &held[j]) != 0;
        uint64_t t3 = smoe__now_ns();
        lp[k] = (t1 - ta) / PER_CALL;
        lc[k] = (t2 - t1) / PER_CALL;
        lr[k] = (t3 - t2) / PER_CALL;
    }
    if (failed) {
        fprintf(stderr, "bench_core: %u calls did not return what a hit returns\n", failed);
        return 1;
    }
    pct("prefetch (demand, resident)", lp, BATCHES);
    pct("claim (hit)", lc, BATCHES);
    pct("release", lr, BATCHES);
    free(held);

    /* Round trips on retained experts. */
    enum { PER = 1000 };
    smoe_blob b;
    for (int kind = 1; kind < 3; kind++) {
        for (int k = 0; k < BATCHES; k++) {
            uint32_t e = (uint32_t)k % WAKES;
            uint64_t t = smoe__now_ns();
            for (int j = 0; j < PER; j++) {
                if (kind == 2)
                    smoe_prefetch(s, 0, e, 0);
                smoe_claim(s, 0, e, &b);
                smoe_release(s, &b);
            }
            lp[k] = (smoe__now_ns() - t) / PER;
        }
        pct(kind == 1 ? "claim + release (hit)" : "prefetch + claim + release (hit)", lp,
            BATCHES);
    }
    /* Speculative prefetches of retained experts, plain and hinted, in
     * alternate batches (side by side); then demand prefetches once hints
     * are on (each checks its layer's hint state). */
    for (int k = 0; k < BATCHES; k++) {
        uint32_t e = (uint32_t)k % WAKES;
        uint64_t ta = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_prefetch(s, 0, e, SMOE_PREFETCH_SPECULATIVE) != SMOE_RESIDENT;
        uint64_t t1 = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_prefetch_hint(s, 0, e, 0.75f) != SMOE_RESIDENT;
        uint64_t t2 = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_prefetch(s, 0, e, 0) != SMOE_RESIDENT;
        uint64_t t3 = smoe__now_ns();
        for (int j = 0; j < PER_CALL; j++)
            failed += smoe_claim(s, 0, e, &b) != SMOE_HIT || smoe_release(s, &b) != 0;
        lp[k] = (t1 - ta) / PER_CALL;
        lc[k] = (t2 - t1) / PER_CALL;
        lr[k] = (t3 - t2) / PER_CALL;
    }
    if (failed) {
        fprintf(stderr, "bench_core: %u calls did not return what a hit returns\n", failed);
        return 1;
    }
    pct("prefetch (speculative, resident)", lp, BATCHES);
    pct("prefetch_hint (resident)", lc, BATCHES);
    pct("prefetch (demand, resident, hints on)", lr, BATCHES);
    free(lp);
    free(lc);
    free(lr);
    smoe_get_stats(s, &st);
    printf("worker parks %llu, wakes issued %llu\n", (unsigned long long)st.worker_parks,
           (unsigned long long)st.worker_wakes);
    smoe_close(s);
    smoe__io_set(NULL);
    tu_rmdir(dir);
    free(path);
    free(dir);
    return 0;
}
