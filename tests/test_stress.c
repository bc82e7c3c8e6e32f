/*
 * Description: concurrency stress of the streamer, shaped like
 * concurrencykit's ring validators.
 *
 * stress: threads start together behind a barrier and run random demand
 * and speculative prefetches, claims and releases of Zipf-distributed
 * experts on a ring much smaller than the vault, so eviction runs
 * constantly. Every claimed blob's XXH3 is checked against the table
 * (100% of claims) and again at release; each slot's word is asserted to
 * keep its generation and key between claim and release (an eviction
 * under a held reference would change them). At quiescence the counts are
 * conserved (claims = releases; every queued read reached one end: read or
 * cancelled), no reference is held, no slot is loading, and the residency
 * map and the slot words agree entry by entry.
 *
 * stress_with_faults: the same with 10% of reads failing (injected EIO):
 * failed claims are definite errors, never wrong bytes, and are counted.
 *
 * shutdown_trials: 100 randomized trials of smoe_shutdown from one thread
 * while others wait in smoe_claim_wait with reads in flight (slow or held):
 * every waiter returns SMOE_ESHUTDOWN, then close succeeds, within a
 * liveness bound.
 *
 * oversubscribed: more threads claiming than there are slots, every slot
 * held: each claim ends in a blob, SMOE_EFULL or SMOE_ETIMEDOUT, never a
 * deadlock.
 *
 * Usage: test_stress [threads] [seconds]; SMOE_STRESS_THREADS and
 * SMOE_STRESS_SECONDS (ctest sets it from the SMOE_STRESS_SECONDS CMake
 * variable) override the defaults (8 threads, 3 s). Blobs of 16 KiB to
 * 100 KB are read in 16 KiB chunks, so most loads spread over several
 * workers (SMOE_STRESS_CHUNK overrides; 0 reads whole blobs).
 * SMOE_STRESS_VAULT runs
 * stress against an existing vault instead of a generated one (its read
 * errors, if any, are tolerated and counted: tests/kernel_faults.sh).
 */
#include <errno.h>
#include <math.h>
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
#include "platform/park.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define LAYERS 4
#define EXPERTS 24
#define MAX_HELD 4
/* Demand prefetches a thread has made and not claimed yet: each one pins
 * its expert until a claim honours it, so a thread claims them first. */
#define MAX_OWED 2

static int g_threads = 8;
static double g_seconds = 3.0;
static const char *g_vault; /* SMOE_STRESS_VAULT */
static uint32_t g_chunk = 16384;

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

/* ---- the vault the tests share ----------------------------------------- */

struct vault_fx {
    char *dir;
    char path[600];
};

static struct vault_fx make_vault(void)
{
    struct vault_fx v;
    v.dir = tu_tmpdir();
    snprintf(v.path, sizeof v.path, "%s/stress.smoe", v.dir);
    assert_int_equal(tu_make_vault(v.path, LAYERS, EXPERTS, 16384, 100000, 7), 0);
    return v;
}

static void free_vault(struct vault_fx *v)
{
    tu_rmdir(v->dir);
    free(v->dir);
}

/* ---- stress -------------------------------------------------------------- */

struct shared {
    smoe_stream *s;
    pthread_barrier_t start;
    _Atomic int stop;
    int allow_errors;
    uint32_t nkeys, experts;
    uint32_t *keys;  /* present keys, by popularity rank */
    double *cdf;     /* Zipf(1.1) over the ranks */
    _Atomic uint64_t ops, claims, releases, bad_hash, bad_gen, errors, read_errors;
    _Atomic int first_error; /* the first unexpected result, for the message */
    const char *_Atomic first_error_op;
};

static void unexpected(struct shared *sh, const char *op, int code)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&sh->first_error, &none, code))
        atomic_store(&sh->first_error_op, op);
    atomic_fetch_add(&sh->errors, 1);
}

struct targ {
    struct shared *sh;
    uint64_t rng;
};

static uint32_t zipf_key(struct shared *sh, uint64_t *rng)
{
    double u = (double)(next_rand(rng) >> 11) / 9007199254740992.0;
    return sh->keys[synth_cdf_pick(sh->cdf, sh->nkeys, u)];
}

static int hash_ok(smoe_stream *s, const smoe_blob *b)
{
    const smoe__vault_entry *ve = &s->vault.index[b->layer * s->vault.experts + b->expert];
    return b->size == ve->size && smoe__hash(b->data, b->size) == ve->hash;
}

static void release_checked(struct shared *sh, smoe_blob *b)
{
    smoe_stream *s = sh->s;
    uint64_t w = atomic_load(&s->ring.word[b->slot]);
    if (smoe__w_gen(w) != b->gen || smoe__w_key(w) != b->layer * sh->experts + b->expert ||
        smoe__w_refs(w) == 0 || !hash_ok(s, b))
        atomic_fetch_add(&sh->bad_gen, 1);
    int r = smoe_release(s, b);
    if (r == 0)
        atomic_fetch_add(&sh->releases, 1);
    else
        unexpected(sh, "release", r);
}

static int read_error(int x)
{
    return x == SMOE_EIO || x == SMOE_ECHECKSUM || x == SMOE_ETRUNC;
}

static void *stress_thread(void *p)
{
    struct targ *a = p;
    struct shared *sh = a->sh;
    smoe_stream *s = sh->s;
    smoe_blob held[MAX_HELD]; /* claimed in place: release takes no copy */
    int nheld = 0;
    uint32_t owed[MAX_OWED];
    int nowed = 0;
    uint64_t ops = 0;
    pthread_barrier_wait(&sh->start);
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        uint64_t r = next_rand(&a->rng);
        uint32_t key = zipf_key(sh, &a->rng);
        uint32_t l = key / sh->experts, e = key % sh->experts;
        ops++;
        switch (r % 8) {
        case 0:
        case 1: {
            int spec = (r >> 8) & 1;
            if (!spec && nowed == MAX_OWED)
                break;
            int x = smoe_prefetch(s, l, e, spec ? SMOE_PREFETCH_SPECULATIVE : 0);
            if (x < 0 && x != SMOE_EFULL)
                unexpected(sh, "prefetch", x);
            if (x >= 0 && !spec)
                owed[nowed++] = key;
            break;
        }
        case 2:
        case 3:
        case 4: {
            if (nheld == MAX_HELD)
                break;
            int wait = !((r >> 8) & 1);
            if (nowed > 0) { /* honour a demand prefetch of ours first */
                key = owed[0];
                l = key / sh->experts, e = key % sh->experts;
                memmove(owed, owed + 1, --nowed * sizeof *owed);
                wait = 1;
            }
            smoe_blob *b = &held[nheld];
            int x = wait ? smoe_claim_wait(s, l, e, tu_bound_ns(), b) : smoe_claim(s, l, e, b);
            if (x >= 0 && !b->held) {
                unexpected(sh, "claim (success without a reference)", x);
            } else if (x >= 0) {
                atomic_fetch_add(&sh->claims, 1);
                if (!hash_ok(s, b))
                    atomic_fetch_add(&sh->bad_hash, 1);
                nheld++;
            } else if (read_error(x) && sh->allow_errors) {
                atomic_fetch_add(&sh->read_errors, 1);
                /* retry the read; its pin is ours to honour */
                if (nowed < MAX_OWED && smoe_prefetch(s, l, e, 0) >= 0)
                    owed[nowed++] = key;
            } else if (x != SMOE_EAGAIN && x != SMOE_ENOTRESIDENT && x != SMOE_EFULL) {
                unexpected(sh, "claim", x); /* ETIMEDOUT included: a hang */
            }
            break;
        }
        case 5:
            if ((r >> 8) % 64 == 0) {
                smoe_stats st = SMOE_STATS_INIT;
                smoe_get_stats(s, &st);
                break;
            }
            /* fall through */
        default:
            if (nheld > 0)
                release_checked(sh, &held[--nheld]);
            break;
        }
        if ((r >> 20) % 64 == 0)
            for (int k = (int)((r >> 30) % 256); k > 0; k--)
                smoe__cpu_relax();
    }
    while (nheld > 0)
        release_checked(sh, &held[--nheld]);
    /* Honour the demand prefetches still owed (a failed read's error
     * honours one too). */
    for (int i = 0; i < nowed; i++) {
        int x = smoe_claim_wait(s, owed[i] / sh->experts, owed[i] % sh->experts, tu_bound_ns(),
                                &held[0]);
        if (x >= 0) {
            atomic_fetch_add(&sh->claims, 1);
            release_checked(sh, &held[0]);
        } else if (!(read_error(x) && sh->allow_errors)) {
            unexpected(sh, "claim of an owed prefetch", x);
        }
    }
    atomic_fetch_add(&sh->ops, ops);
    return NULL;
}

/* At quiescence: map and slot words agree both ways. */
static void check_map(smoe_stream *s)
{
    const uint32_t nkeys = s->vault.layers * s->vault.experts;
    for (uint32_t k = 0; k < nkeys; k++) {
        uint64_t m = atomic_load(&s->map[k]);
        assert_true(m != SMOE__MAP_PENDING);
        if (m == SMOE__MAP_NONE)
            continue;
        uint32_t v = smoe__map_slot(m);
        assert_true(v < s->ring.nslots);
        uint64_t w = atomic_load(&s->ring.word[v]);
        /* A stale entry is allowed (cleared lazily) only if the slot moved on. */
        if (smoe__w_key(w) == k && smoe__w_state(w) != SMOE__SLOT_EMPTY)
            assert_int_equal(smoe__w_gen(w), smoe__map_gen(m));
    }
    for (uint32_t v = 0; v < s->ring.nslots; v++) {
        uint64_t w = atomic_load(&s->ring.word[v]);
        if (smoe__w_state(w) == SMOE__SLOT_EMPTY)
            continue;
        assert_int_equal(smoe__w_refs(w), 0);
        assert_false(w & (SMOE__W_STARTED | SMOE__W_WAITERS));
        uint64_t m = atomic_load(&s->map[smoe__w_key(w)]);
        if (m != smoe__map_make(v, smoe__w_gen(w)))
            fail_msg("slot %u holds key %u gen %u but the map says 0x%llx", v,
                     smoe__w_key(w), smoe__w_gen(w), (unsigned long long)m);
    }
}

static void run_stress(const char *path, double seconds, unsigned fail_permille,
                       uint32_t eviction, const char *what)
{
    struct shared *sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    struct fault_io fio;
    if (fail_permille) {
        fault_io_install(&fio);
        atomic_store(&fio.err, EIO);
        atomic_store(&fio.nth, fail_permille);
        atomic_store(&fio.call, FIO_PREAD);
    }
    tu_baseline base = tu_baseline_take();
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 16;
    o.workers = 4;
    o.verify = SMOE_VERIFY_ON;
    o.chunk_bytes = g_chunk; /* blobs of up to 7 chunks, spread over workers */
    o.eviction = eviction;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    int r = smoe_open(path, &o, &sh->s);
    /* A vault on a failing disk (SMOE_STRESS_VAULT): opening reads the
     * header and tables, which may fail too; that is a definite error, so
     * try again. */
    for (int tries = 1; r < 0 && g_vault && tries < 50; tries++)
        r = smoe_open(path, &o, &sh->s);
    if (r < 0)
        fail_msg("open %s: %s", path, smoe_last_error());
    smoe_stream *s = sh->s;
    if (fail_permille)
        atomic_store(&fio.mode, FIO_FAIL_RANDOM); /* after open: the loader reads cleanly */
    sh->allow_errors = fail_permille || g_vault;
    sh->experts = s->vault.experts;
    const uint32_t nall = s->vault.layers * s->vault.experts;
    sh->keys = malloc(nall * sizeof *sh->keys);
    sh->cdf = malloc(nall * sizeof *sh->cdf);
    assert_true(sh->keys && sh->cdf);
    /* Popularity ranks: a fixed shuffle of the present keys. */
    uint64_t rng = 0x5eed;
    for (uint32_t k = 0; k < nall; k++)
        if (s->vault.index[k].present)
            sh->keys[sh->nkeys++] = k;
    for (uint32_t i = sh->nkeys; i > 1; i--) {
        uint32_t j = (uint32_t)(next_rand(&rng) % i), t = sh->keys[i - 1];
        sh->keys[i - 1] = sh->keys[j];
        sh->keys[j] = t;
    }
    double sum = 0, acc = 0;
    for (uint32_t i = 0; i < sh->nkeys; i++)
        sum += 1.0 / pow(i + 1, 1.1);
    for (uint32_t i = 0; i < sh->nkeys; i++)
        sh->cdf[i] = (acc += 1.0 / pow(i + 1, 1.1) / sum);
    sh->cdf[sh->nkeys - 1] = 1.0;

    pthread_barrier_init(&sh->start, NULL, (unsigned)g_threads + 1);
    pthread_t *th = calloc((size_t)g_threads, sizeof *th);
    struct targ *args = calloc((size_t)g_threads, sizeof *args);
    for (int i = 0; i < g_threads; i++) {
        args[i].sh = sh;
        args[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&th[i], NULL, stress_thread, &args[i]), 0);
    }
    pthread_barrier_wait(&sh->start);
    uint64_t t0 = tu_now_ns();
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < g_threads; i++)
        pthread_join(th[i], NULL);
    double elapsed = (double)(tu_now_ns() - t0) / 1e9;

    /* Quiescence: the workers finish what is queued. */
    smoe_stats st = SMOE_STATS_INIT;
    uint64_t q0 = tu_now_ns();
    for (;;) {
        assert_int_equal(smoe_get_stats(s, &st), 0);
        if (st.slots_loading == 0 || tu_now_ns() - q0 > tu_bound_ns())
            break;
        usleep(2000);
    }
    uint64_t ops = atomic_load(&sh->ops);
    print_message("%s: %d threads, %.1f s: %llu ops (%.0f ops/s), %llu claims, %llu reads "
                  "(%llu chunks, %llu failed), %llu evictions, %llu hits, %llu cancelled, "
                  "%llu full\n",
                  what, g_threads, elapsed, (unsigned long long)ops, (double)ops / elapsed,
                  (unsigned long long)atomic_load(&sh->claims),
                  (unsigned long long)st.reads_done, (unsigned long long)st.chunks_read,
                  (unsigned long long)st.reads_failed,
                  (unsigned long long)st.evictions, (unsigned long long)st.hits,
                  (unsigned long long)st.spec_cancelled, (unsigned long long)st.full);
    assert_int_equal(st.slots_loading, 0);
    assert_int_equal(st.slots_referenced, 0);
    assert_int_equal(atomic_load(&sh->bad_hash), 0);
    assert_int_equal(atomic_load(&sh->bad_gen), 0);
    if (atomic_load(&sh->errors))
        fail_msg("%llu unexpected results, the first from %s: %s",
                 (unsigned long long)atomic_load(&sh->errors), atomic_load(&sh->first_error_op),
                 smoe_err_name(atomic_load(&sh->first_error)));
    assert_int_equal(atomic_load(&sh->claims), atomic_load(&sh->releases));
    assert_int_equal(st.claims, st.releases);
    if (!sh->allow_errors)
        assert_int_equal(st.reads_failed, 0);
    if (fail_permille)
        assert_true(st.reads_failed > 0 && atomic_load(&sh->read_errors) > 0);
    /* Every queued read reached exactly one end: read (ok or failed) or
     * cancelled before it started. */
    assert_int_equal(st.misses + st.spec_queued, st.reads_done + st.spec_cancelled);
    assert_true(st.claims > 0);
    if (!g_vault)
        assert_true(st.evictions > 0);
    check_map(s);
    assert_int_equal(smoe_close(s), 0);
    if (fail_permille)
        fault_io_remove();
    tu_baseline_check(base, "after close");
    pthread_barrier_destroy(&sh->start);
    free(th);
    free(args);
    free(sh->keys);
    free(sh->cdf);
    free(sh);
}

static void stress(void **state)
{
    (void)state;
    /* Each eviction policy for half the time: reuse's scans read and write
     * its statistics from every prefetching thread. */
    if (g_vault) {
        run_stress(g_vault, g_seconds / 2, 0, SMOE_EVICT_REUSE, "stress, reuse eviction");
        run_stress(g_vault, g_seconds / 2, 0, SMOE_EVICT_LRU, "stress, lru eviction");
        return;
    }
    struct vault_fx v = make_vault();
    run_stress(v.path, g_seconds / 2, 0, SMOE_EVICT_REUSE, "stress, reuse eviction");
    run_stress(v.path, g_seconds / 2, 0, SMOE_EVICT_LRU, "stress, lru eviction");
    free_vault(&v);
}

static void stress_with_faults(void **state)
{
    (void)state;
    if (g_vault)
        skip();
    struct vault_fx v = make_vault();
    double secs = g_seconds / 6 < 1 ? 1 : g_seconds / 6;
    run_stress(v.path, secs, 100, SMOE_EVICT_DEFAULT, "stress, 10% of reads failing");
    free_vault(&v);
}

/* ---- shutdown trials -------------------------------------------------- */

struct waiter_shared {
    smoe_stream *s;
    _Atomic int done, started;
    _Atomic uint64_t shutdown_seen, claims, bad, unexpected;
};

struct waiter {
    struct waiter_shared *ws;
    uint64_t rng;
};

static void *waiter_thread(void *p)
{
    struct waiter *w = p;
    struct waiter_shared *ws = w->ws;
    atomic_fetch_add(&ws->started, 1);
    for (;;) {
        uint32_t key = (uint32_t)(next_rand(&w->rng) % (LAYERS * EXPERTS));
        smoe_blob b;
        int r = smoe_claim_wait(ws->s, key / EXPERTS, key % EXPERTS, UINT64_MAX, &b);
        if (r >= 0) {
            atomic_fetch_add(&ws->claims, 1);
            if (!hash_ok(ws->s, &b))
                atomic_fetch_add(&ws->bad, 1);
            if (smoe_release(ws->s, &b) != 0)
                atomic_fetch_add(&ws->unexpected, 1);
            continue;
        }
        if (r == SMOE_ESHUTDOWN) {
            atomic_fetch_add(&ws->shutdown_seen, 1);
            break;
        }
        if (r != SMOE_EFULL) {
            atomic_fetch_add(&ws->unexpected, 1);
            break;
        }
    }
    atomic_fetch_add(&ws->done, 1);
    return NULL;
}

static void *shutdown_thread(void *p)
{
    smoe_shutdown(p);
    return NULL;
}

static void shutdown_trials(void **state)
{
    (void)state;
    struct vault_fx v = make_vault();
    struct fault_io fio;
    fault_io_install(&fio);
    uint64_t rng = 12345, max_ns = 0;
    unsigned held_trials = 0, waiters_total = 0;
    for (int trial = 0; trial < 100; trial++) {
        tu_baseline base = tu_baseline_take();
        uint32_t workers = 1 + (uint32_t)(next_rand(&rng) % 4);
        uint32_t slots = 2 + (uint32_t)(next_rand(&rng) % 14);
        int nwait = 1 + (int)(next_rand(&rng) % 8);
        int hold = next_rand(&rng) % 3 == 0;
        atomic_store(&fio.delay_us, (uint32_t)(next_rand(&rng) % 3000));
        atomic_store(&fio.hold, 0);
        smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
        o.ring_slots = slots;
        o.workers = workers;
        o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
        struct waiter_shared ws = {0};
        assert_int_equal(smoe_open(v.path, &o, &ws.s), 0);
        atomic_store(&fio.hold, hold); /* reads stuck in the device */
        pthread_t th[8];
        struct waiter w[8];
        for (int i = 0; i < nwait; i++) {
            w[i].ws = &ws;
            w[i].rng = next_rand(&rng) | 1;
            assert_int_equal(pthread_create(&th[i], NULL, waiter_thread, &w[i]), 0);
        }
        while (atomic_load(&ws.started) < nwait)
            usleep(100);
        usleep((useconds_t)(next_rand(&rng) % 5000));
        pthread_t sd;
        assert_int_equal(pthread_create(&sd, NULL, shutdown_thread, ws.s), 0);
        uint64_t t0 = tu_now_ns();
        while (atomic_load(&ws.done) < nwait) {
            if (tu_now_ns() - t0 > tu_bound_ns())
                fail_msg("trial %d: %d of %d waiters still waiting %.1f s after shutdown "
                         "(%u workers, %u slots, reads %s)", trial,
                         nwait - atomic_load(&ws.done), nwait, (double)tu_bound_ns() / 1e9,
                         workers, slots, hold ? "held" : "slow");
            usleep(200);
        }
        uint64_t dt = tu_now_ns() - t0;
        if (dt > max_ns)
            max_ns = dt;
        pthread_join(sd, NULL);
        for (int i = 0; i < nwait; i++)
            pthread_join(th[i], NULL);
        assert_int_equal(atomic_load(&ws.shutdown_seen), nwait);
        assert_int_equal(atomic_load(&ws.unexpected), 0);
        assert_int_equal(atomic_load(&ws.bad), 0);
        /* The device lets its reads finish; close joins the workers. */
        atomic_store(&fio.hold, 0);
        t0 = tu_now_ns();
        assert_int_equal(smoe_close(ws.s), 0);
        if (tu_now_ns() - t0 > tu_bound_ns())
            fail_msg("trial %d: close took %.1f s", trial, (double)(tu_now_ns() - t0) / 1e9);
        tu_baseline_check(base, "after close");
        assert_int_equal(atomic_load(&fio.open_fds), 0);
        held_trials += (unsigned)hold;
        waiters_total += (unsigned)nwait;
    }
    fault_io_remove();
    print_message("shutdown: 100 trials (%u with reads held), %u waiters, all returned "
                  "SMOE_ESHUTDOWN; slowest %.2f ms after shutdown\n", held_trials,
                  waiters_total, (double)max_ns / 1e6);
    free_vault(&v);
}

/* ---- over-subscription ------------------------------------------------ */

struct over_shared {
    smoe_stream *s;
    _Atomic int stop, done;
    _Atomic uint64_t ok, full, timedout, bad, unexpected;
};

static void *over_thread(void *p)
{
    struct over_shared *os = p;
    static _Atomic uint64_t seed = 77;
    uint64_t rng = atomic_fetch_add(&seed, 0x9E3779B97F4A7C15ull) | 1;
    while (!atomic_load(&os->stop)) {
        uint32_t key = (uint32_t)(next_rand(&rng) % 12);
        smoe_blob b;
        int r = smoe_claim_wait(os->s, key / EXPERTS, key % EXPERTS, 20000000ull, &b);
        if (r >= 0) {
            atomic_fetch_add(&os->ok, 1);
            if (!hash_ok(os->s, &b))
                atomic_fetch_add(&os->bad, 1);
            usleep((useconds_t)(next_rand(&rng) % 2000));
            if (smoe_release(os->s, &b) != 0)
                atomic_fetch_add(&os->unexpected, 1);
        } else if (r == SMOE_EFULL) {
            atomic_fetch_add(&os->full, 1);
        } else if (r == SMOE_ETIMEDOUT) {
            atomic_fetch_add(&os->timedout, 1);
        } else {
            atomic_fetch_add(&os->unexpected, 1);
        }
    }
    atomic_fetch_add(&os->done, 1);
    return NULL;
}

static void oversubscribed(void **state)
{
    (void)state;
    struct vault_fx v = make_vault();
    tu_baseline base = tu_baseline_take();
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 4;
    o.workers = 2;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    struct over_shared os = {0};
    assert_int_equal(smoe_open(v.path, &o, &os.s), 0);

    /* Every slot held: claims of the held experts are hits, any other
     * expert is refused at once with SMOE_EFULL. */
    smoe_blob held[4], b;
    for (uint32_t e = 0; e < 4; e++)
        assert_int_equal(smoe_claim_wait(os.s, 0, e, tu_bound_ns(), &held[e]), SMOE_READY);
    assert_int_equal(smoe_claim_wait(os.s, 0, 5, tu_bound_ns(), &b), SMOE_EFULL);
    assert_int_equal(smoe_claim_wait(os.s, 0, 2, tu_bound_ns(), &b), SMOE_HIT);
    assert_int_equal(smoe_release(os.s, &b), 0);
    for (uint32_t e = 0; e < 4; e++)
        assert_int_equal(smoe_release(os.s, &held[e]), 0);

    /* 16 threads on 4 slots, each holding what it gets for a while. */
    pthread_t th[16];
    for (int i = 0; i < 16; i++)
        assert_int_equal(pthread_create(&th[i], NULL, over_thread, &os), 0);
    usleep((useconds_t)(1e6 * (g_seconds < 2 ? g_seconds / 2 : 1)));
    atomic_store(&os.stop, 1);
    uint64_t t0 = tu_now_ns();
    while (atomic_load(&os.done) < 16) {
        if (tu_now_ns() - t0 > tu_bound_ns())
            fail_msg("%d of 16 claimers still running after stop: deadlock",
                     16 - atomic_load(&os.done));
        usleep(500);
    }
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    print_message("oversubscribed: 16 threads on 4 slots: %llu claims, %llu ring full, "
                  "%llu timed out\n", (unsigned long long)os.ok, (unsigned long long)os.full,
                  (unsigned long long)os.timedout);
    assert_int_equal(atomic_load(&os.unexpected), 0);
    assert_int_equal(atomic_load(&os.bad), 0);
    assert_true(atomic_load(&os.ok) > 0);
    assert_true(atomic_load(&os.full) + atomic_load(&os.timedout) > 0);
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(os.s, &st), 0);
    assert_int_equal(st.slots_referenced, 0);
    assert_int_equal(smoe_close(os.s), 0);
    tu_baseline_check(base, "after close");
    free_vault(&v);
}

int main(int argc, char **argv)
{
    const char *e;
    if ((e = getenv("SMOE_STRESS_THREADS")) && atoi(e) > 0)
        g_threads = atoi(e);
    if ((e = getenv("SMOE_STRESS_SECONDS")) && atof(e) > 0)
        g_seconds = atof(e);
    if ((e = getenv("SMOE_STRESS_CHUNK")))
        g_chunk = (uint32_t)atoi(e) ? (uint32_t)atoi(e) : 1u << 30;
    if ((e = getenv("SMOE_STRESS_VAULT")) && *e)
        g_vault = e;
    if (argc > 1 && atoi(argv[1]) > 0)
        g_threads = atoi(argv[1]);
    if (argc > 2 && atof(argv[2]) > 0)
        g_seconds = atof(argv[2]);
    if (g_threads > 1000)
        g_threads = 1000;
    const struct CMUnitTest all[] = {
        cmocka_unit_test(stress),
        cmocka_unit_test(stress_with_faults),
        cmocka_unit_test(shutdown_trials),
        cmocka_unit_test(oversubscribed),
    };
    const struct CMUnitTest only_stress[] = {
        cmocka_unit_test(stress),
    };
    if (g_vault)
        return cmocka_run_group_tests(only_stress, NULL, NULL);
    return cmocka_run_group_tests(all, NULL, NULL);
}
