/*
 * Description: concurrency stress of the streamer. Threads start together
 * behind a barrier and run random demand and speculative prefetches,
 * claims and releases of Zipf-distributed experts on a ring much smaller
 * than the vault, so eviction runs constantly. Every claimed blob's XXH3 is
 * checked against the table (100% of claims); each slot's generation is
 * asserted unchanged between claim and release (an eviction under a held
 * reference would change it). At the end the counts are conserved: claims
 * equal releases, every queued read reached one end state, no reference
 * is left and no slot is loading.
 *
 * Usage: test_stress [threads] [seconds]; SMOE_STRESS_SECONDS and
 * SMOE_STRESS_THREADS override the defaults (8 threads, 3 s). Blobs of
 * 16 KiB to 100 KB are read in 16 KiB chunks, so most loads spread over
 * several workers (SMOE_STRESS_CHUNK overrides; 0 reads whole blobs).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "park.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define LAYERS 4
#define EXPERTS 24

static int g_threads = 8;
static double g_seconds = 3.0;
static uint32_t g_slots = 16;
static uint32_t g_workers = 4;
static uint32_t g_chunk = 16384;

struct shared {
    smoe_stream *s;
    pthread_barrier_t start;
    _Atomic int stop;
    _Atomic uint64_t ops, claims, releases, bad_hash, bad_gen, errors;
    double cdf[LAYERS * EXPERTS];
};

struct targ {
    struct shared *sh;
    uint64_t rng;
};

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static uint32_t zipf_key(struct shared *sh, uint64_t *rng)
{
    double u = (double)(next_rand(rng) >> 11) / 9007199254740992.0;
    uint32_t lo = 0, hi = LAYERS * EXPERTS - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (sh->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void *worker(void *p)
{
    struct targ *a = p;
    struct shared *sh = a->sh;
    smoe_stream *s = sh->s;
    smoe_blob held[4];
    int nheld = 0;
    pthread_barrier_wait(&sh->start);
    while (!atomic_load(&sh->stop)) {
        uint64_t r = next_rand(&a->rng);
        uint32_t key = zipf_key(sh, &a->rng);
        uint32_t l = key / EXPERTS, e = key % EXPERTS;
        atomic_fetch_add(&sh->ops, 1);
        switch (r % 8) {
        case 0:
        case 1: {
            int x = smoe_prefetch(s, l, e, (r >> 8) & 1 ? SMOE_PREFETCH_SPECULATIVE : 0);
            if (x < 0 && x != SMOE_EFULL)
                atomic_fetch_add(&sh->errors, 1);
            break;
        }
        case 2:
        case 3:
        case 4: {
            if (nheld == 4)
                break;
            smoe_blob b;
            int x = (r >> 8) & 1 ? smoe_claim(s, l, e, &b)
                                 : smoe_claim_wait(s, l, e, 5000000000ull, &b);
            if (x >= 0) {
                atomic_fetch_add(&sh->claims, 1);
                const smoe__vault_entry *ve = &s->vault.index[key];
                if (smoe__hash(b.data, b.size) != ve->hash)
                    atomic_fetch_add(&sh->bad_hash, 1);
                held[nheld++] = b;
            } else if (x != SMOE_EAGAIN && x != SMOE_ENOTRESIDENT && x != SMOE_EFULL &&
                       x != SMOE_ETIMEDOUT) {
                atomic_fetch_add(&sh->errors, 1);
            }
            break;
        }
        default:
            if (nheld > 0) {
                smoe_blob *b = &held[--nheld];
                uint64_t w = atomic_load(&s->ring.word[b->slot]);
                if (smoe__w_gen(w) != b->gen ||
                    smoe__hash(b->data, b->size) !=
                        s->vault.index[b->layer * EXPERTS + b->expert].hash)
                    atomic_fetch_add(&sh->bad_gen, 1);
                if (smoe_release(s, b) == 0)
                    atomic_fetch_add(&sh->releases, 1);
                else
                    atomic_fetch_add(&sh->errors, 1);
            }
            break;
        }
        if ((r >> 20) % 64 == 0)
            for (int k = (int)((r >> 30) % 256); k > 0; k--)
                smoe__cpu_relax();
    }
    while (nheld > 0) {
        if (smoe_release(s, &held[--nheld]) == 0)
            atomic_fetch_add(&sh->releases, 1);
    }
    return NULL;
}

static void stress(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/stress.smoe", dir);
    assert_int_equal(tu_make_vault(path, LAYERS, EXPERTS, 16384, 100000, 7), 0);

    struct shared *sh = calloc(1, sizeof *sh);
    double sum = 0;
    for (int i = 0; i < LAYERS * EXPERTS; i++)
        sum += 1.0 / pow(i + 1, 1.1);
    double acc = 0;
    for (int i = 0; i < LAYERS * EXPERTS; i++) {
        acc += 1.0 / pow(i + 1, 1.1) / sum;
        sh->cdf[i] = acc;
    }
    sh->cdf[LAYERS * EXPERTS - 1] = 1.0;

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = g_slots;
    o.workers = g_workers;
    o.verify = SMOE_VERIFY_ON;
    o.chunk_bytes = g_chunk; /* blobs of up to 7 chunks, spread over workers */
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    assert_int_equal(smoe_open(path, &o, &sh->s), 0);
    pthread_barrier_init(&sh->start, NULL, (unsigned)g_threads + 1);
    pthread_t *th = calloc((size_t)g_threads, sizeof *th);
    struct targ *args = calloc((size_t)g_threads, sizeof *args);
    for (int i = 0; i < g_threads; i++) {
        args[i].sh = sh;
        args[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    pthread_barrier_wait(&sh->start);
    usleep((useconds_t)(g_seconds * 1e6));
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < g_threads; i++)
        pthread_join(th[i], NULL);

    /* Quiescence: the workers finish what is queued. */
    smoe_stream *s = sh->s;
    smoe_stats st = SMOE_STATS_INIT;
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(smoe_get_stats(s, &st), 0);
        if (st.slots_loading == 0)
            break;
        usleep(5000);
    }
    print_message("stress: %d threads, %.1f s: %llu ops, %llu claims, %llu reads "
                  "(%llu chunks), %llu evictions, %llu hits, %llu cancelled\n",
                  g_threads, g_seconds, (unsigned long long)atomic_load(&sh->ops),
                  (unsigned long long)atomic_load(&sh->claims),
                  (unsigned long long)st.reads_done, (unsigned long long)st.chunks_read,
                  (unsigned long long)st.evictions,
                  (unsigned long long)st.hits, (unsigned long long)st.spec_cancelled);
    assert_int_equal(st.slots_loading, 0);
    assert_int_equal(st.slots_referenced, 0);
    assert_int_equal(atomic_load(&sh->bad_hash), 0);
    assert_int_equal(atomic_load(&sh->bad_gen), 0);
    assert_int_equal(atomic_load(&sh->errors), 0);
    assert_int_equal(atomic_load(&sh->claims), atomic_load(&sh->releases));
    assert_int_equal(st.claims, st.releases);
    assert_int_equal(st.reads_failed, 0);
    /* Every queued read reached exactly one end: read or cancelled. */
    assert_int_equal(st.misses + st.spec_queued, st.reads_done + st.spec_cancelled);
    assert_true(st.evictions > 0);
    assert_int_equal(smoe_close(s), 0);
    pthread_barrier_destroy(&sh->start);
    free(th);
    free(args);
    free(sh);
    tu_rmdir(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    const char *e;
    if ((e = getenv("SMOE_STRESS_THREADS")) && atoi(e) > 0)
        g_threads = atoi(e);
    if ((e = getenv("SMOE_STRESS_CHUNK")))
        g_chunk = (uint32_t)atoi(e) ? (uint32_t)atoi(e) : 1u << 30;
    if ((e = getenv("SMOE_STRESS_SECONDS")) && atof(e) > 0)
        g_seconds = atof(e);
    if (argc > 1 && atoi(argv[1]) > 0)
        g_threads = atoi(argv[1]);
    if (argc > 2 && atof(argv[2]) > 0)
        g_seconds = atof(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
