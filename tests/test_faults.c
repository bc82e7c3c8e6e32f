/*
 * Description: deterministic I/O fault injection through the smoe__io table
 * (tests/fault_io.c). For a small workload (open a stream, claim every
 * expert, close) every I/O call in turn fails once (a later try succeeds)
 * and fails persistently from there on (the claim returns the error); every
 * read in turn comes back short; every call of every class is interrupted
 * (EINTR); the vault is truncated during a run, and truncated then
 * re-extended with zeros; the vault writer's and the histogram save's every
 * call fails in turn over an existing file (which must stay the old
 * complete version or become the new one). Every claim returns within a liveness bound (scaled
 * under sanitizers) either the exact bytes or a definite error, never
 * wrong bytes and never a hang, and after close the process's descriptors,
 * threads and the ring's mapping are back to where they were.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "fill/freq.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull
#define LAYERS 2
#define EXPERTS 3
#define NKEYS (LAYERS * EXPERTS)

/* Every vault here is LAYERS x EXPERTS, made from seed 99. */
static tu_fx *fx_new(uint64_t min_b, uint64_t max_b)
{
    return tu_fx_new(LAYERS, EXPERTS, min_b, max_b, 99);
}

/* 1 if the blob holds exactly what the test vault wrote for it. */
static int blob_ok(const tu_fx *f, const smoe_blob *b)
{
    uint64_t n = synth_blob_size(f->seed, b->layer, b->expert, f->min_bytes, f->max_bytes);
    if (b->size != n)
        return 0;
    unsigned char *want = malloc(n);
    assert_non_null(want);
    synth_blob_fill(want, n, f->seed, b->layer, b->expert);
    int ok = memcmp(b->data, want, n) == 0;
    free(want);
    return ok;
}

/* Faults injected and what came of them, for the summary line. */
struct tally {
    unsigned runs, injected, open_failed, claim_failed, claim_ok, retried_ok;
};

static void print_tally(const char *what, const struct tally *t)
{
    print_message("%s: %u runs, %u faults injected; open failed %u, claims failed %u "
                  "(retried ok %u), claims ok %u\n", what, t->runs, t->injected,
                  t->open_failed, t->claim_failed, t->retried_ok, t->claim_ok);
}

/* Read chunk for the streams opened next: 0, whole blobs (the default for
 * these sizes); 16384, blobs spread over several workers. */
static uint32_t g_chunk;
/* 1: open the streams the way an application does: ring sized by the
 * memory budget (reading /proc and cgroup files through the table), the
 * popularity histogram loaded and saved, pre-warm running. */
static int g_full_open;

static int open_stream(const tu_fx *f, uint32_t workers, uint32_t slots, unsigned flags,
                       smoe_stream **s)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.chunk_bytes = g_chunk;
    o.workers = workers;
    o.ring_slots = g_full_open ? 0 : slots;
    o.verify = SMOE_VERIFY_ON;
    o.flags = flags | SMOE_OPEN_ALLOW_BUFFERED;
    if (!g_full_open)
        o.flags |= SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
    return smoe_open(f->path, &o, s);
}

/* A claim that must return within the bound: the exact bytes, or one of
 * the definite errors a failed read gives. */
static int bounded_claim(smoe_stream *s, const tu_fx *f, uint32_t l, uint32_t e,
                         smoe_blob *b)
{
    uint64_t t0 = tu_now_ns();
    int r = smoe_claim_wait(s, l, e, tu_bound_ns(), b);
    uint64_t dt = tu_now_ns() - t0;
    if (dt >= tu_bound_ns() || r == SMOE_ETIMEDOUT)
        fail_msg("claim (%u, %u) took %.3f s: %s", l, e, (double)dt / 1e9, smoe_err_name(r));
    if (r >= 0) {
        if (!blob_ok(f, b))
            fail_msg("claim (%u, %u) returned wrong bytes", l, e);
        return r;
    }
    if (r != SMOE_EIO && r != SMOE_ETRUNC && r != SMOE_ECHECKSUM)
        fail_msg("claim (%u, %u): unexpected %s: %s", l, e, smoe_err_name(r),
                 smoe_last_error());
    if (b->held)
        fail_msg("claim (%u, %u) failed with a reference held", l, e);
    return r;
}

static void bounded_close(smoe_stream *s)
{
    uint64_t t0 = tu_now_ns();
    assert_int_equal(smoe_close(s), 0);
    if (tu_now_ns() - t0 >= tu_bound_ns())
        fail_msg("close took %.3f s", (double)(tu_now_ns() - t0) / 1e9);
}

enum { TRANSIENT, PERSISTENT };

/*
 * The workload: open, claim every expert (ahead: prefetch them all first,
 * so several workers read at once), close. TRANSIENT: a failed open or
 * claim is tried once more and must succeed. PERSISTENT: failures are
 * definite errors. Checks the process's resources after.
 */
static void workload(const tu_fx *f, struct fault_io *fio, uint32_t workers, int ahead,
                     int kind, struct tally *t)
{
    tu_baseline base = tu_baseline_take();
    smoe_stream *s = NULL;
    int r = open_stream(f, workers, NKEYS, 0, &s);
    if (r < 0) {
        assert_null(s);
        if (r != SMOE_EIO && r != SMOE_ESYS && r != SMOE_ETRUNC)
            fail_msg("open: unexpected %s: %s", smoe_err_name(r), smoe_last_error());
        t->open_failed++;
        if (kind == PERSISTENT) {
            tu_baseline_check(base, "after a failed open");
            assert_int_equal(atomic_load(&fio->open_fds), 0);
            return;
        }
        r = open_stream(f, workers, NKEYS, 0, &s);
        if (r < 0)
            fail_msg("open after a transient fault: %s", smoe_last_error());
    }
    smoe_ring_region rr = SMOE_RING_REGION_INIT;
    assert_int_equal(smoe_ring_region_get(s, &rr), 0);
    if (ahead)
        for (uint32_t k = 0; k < NKEYS; k++) {
            int p = smoe_prefetch(s, k / EXPERTS, k % EXPERTS, 0);
            assert_true(p == SMOE_QUEUED || p == SMOE_RESIDENT || p == SMOE_INFLIGHT);
        }
    for (uint32_t k = 0; k < NKEYS; k++) {
        smoe_blob b;
        uint32_t l = k / EXPERTS, e = k % EXPERTS;
        r = bounded_claim(s, f, l, e, &b);
        if (r < 0) {
            t->claim_failed++;
            if (kind == PERSISTENT)
                continue;
            /* The error stays until a prefetch retries the read. */
            smoe_blob b2;
            assert_int_equal(smoe_claim(s, l, e, &b2), r);
            assert_int_equal(smoe_prefetch(s, l, e, 0), SMOE_QUEUED);
            r = bounded_claim(s, f, l, e, &b);
            if (r < 0)
                fail_msg("claim (%u, %u) after a transient fault: %s", l, e,
                         smoe_last_error());
            t->retried_ok++;
        }
        t->claim_ok++;
        assert_int_equal(smoe_release(s, &b), 0);
    }
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.slots_referenced, 0);
    assert_int_equal(st.claims, st.releases);
    bounded_close(s);
    assert_false(tu_is_mapped(rr.base));
    tu_baseline_check(base, "after close");
    assert_int_equal(atomic_load(&fio->open_fds), 0);
}

/* Number of I/O calls one clean run of the workload makes. */
static uint64_t count_calls(const tu_fx *f, struct fault_io *fio, uint32_t workers,
                            int ahead)
{
    struct tally t = {0};
    fault_io_arm(fio, FIO_OFF, FIO_ANY, 0, 0, 0);
    workload(f, fio, workers, ahead, TRANSIENT, &t);
    assert_int_equal(t.claim_ok, NKEYS);
    assert_int_equal(t.claim_failed, 0);
    return atomic_load(&fio->total);
}

static void sweep(const tu_fx *f, uint32_t workers, int ahead, int kind, int err,
                  const char *what)
{
    struct fault_io fio;
    fault_io_install(&fio);
    uint64_t n = count_calls(f, &fio, workers, ahead);
    assert_true(n >= 10);
    struct tally t = {0};
    for (uint64_t k = 1; k <= n; k++) {
        fault_io_arm(&fio, kind == TRANSIENT ? FIO_FAIL_ONCE : FIO_FAIL_FROM, FIO_ANY, k,
                     err, 0);
        workload(f, &fio, workers, ahead, kind, &t);
        t.runs++;
        t.injected += (unsigned)atomic_load(&fio.fired);
        if (kind == TRANSIENT)
            assert_int_equal(atomic_load(&fio.fired), 1);
    }
    fault_io_remove();
    print_tally(what, &t);
}

static void countdown_once(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1000, 70000);
    sweep(f, 1, 0, TRANSIENT, EIO, "fail once, 1 worker");
    sweep(f, 3, 1, TRANSIENT, EIO, "fail once, 3 workers, prefetch ahead");
    g_chunk = 16384;
    sweep(f, 3, 1, TRANSIENT, EIO, "fail once, 3 workers, 16 KiB chunks");
    g_chunk = 0;
    g_full_open = 1;
    sweep(f, 2, 1, TRANSIENT, EIO, "fail once, budget, histogram, pre-warm");
    g_full_open = 0;
    tu_fx_free(f);
}

static void countdown_persistent(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1000, 70000);
    sweep(f, 1, 0, PERSISTENT, EIO, "fail persistently (EIO), 1 worker");
    sweep(f, 3, 1, PERSISTENT, EIO, "fail persistently (EIO), 3 workers");
    /* Calls that never stop being interrupted or never make progress. */
    sweep(f, 2, 1, PERSISTENT, EINTR, "interrupted persistently");
    sweep(f, 2, 1, PERSISTENT, EAGAIN, "EAGAIN persistently");
    g_chunk = 16384;
    sweep(f, 3, 1, PERSISTENT, EIO, "fail persistently (EIO), 3 workers, 16 KiB chunks");
    g_chunk = 0;
    g_full_open = 1;
    sweep(f, 2, 1, PERSISTENT, EIO, "fail persistently (EIO), budget, histogram, pre-warm");
    sweep(f, 2, 1, PERSISTENT, EINTR, "interrupted persistently, budget, histogram, pre-warm");
    g_full_open = 0;
    tu_fx_free(f);
}

/* Every read in turn comes back short: no error, the same bytes. */
static void short_reads_everywhere(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1000, 70000);
    struct fault_io fio;
    fault_io_install(&fio);
    static const struct {
        unsigned flags;
        uint64_t bytes;
    } cases[] = {
        {SMOE_OPEN_BUFFERED, 1}, {SMOE_OPEN_BUFFERED, 777}, {SMOE_OPEN_BUFFERED, 16383},
        {0, 4096}, {0, 16384}, /* direct I/O: short reads end on a block boundary */
    };
    struct tally t = {0};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        g_chunk = c % 2 ? 16384 : 0;
        fault_io_arm(&fio, FIO_OFF, FIO_PREAD, 0, 0, 0);
        struct tally clean = {0};
        workload(f, &fio, 2, 1, TRANSIENT, &clean);
        uint64_t preads = atomic_load(&fio.count[FIO_PREAD]);
        for (int once = 0; once <= 1; once++)
            for (uint64_t k = 1; k <= (once ? preads : 1); k++) {
                fault_io_arm(&fio, once ? FIO_SHORT_ONCE : FIO_SHORT, FIO_PREAD, k, 0,
                             cases[c].bytes);
                smoe_stream *s;
                tu_baseline base = tu_baseline_take();
                int r = open_stream(f, 2, NKEYS, cases[c].flags, &s);
                if (r < 0)
                    fail_msg("open with short reads: %s", smoe_last_error());
                for (uint32_t key = 0; key < NKEYS; key++) {
                    smoe_blob b;
                    r = bounded_claim(s, f, key / EXPERTS, key % EXPERTS, &b);
                    if (r < 0)
                        fail_msg("short reads of %llu bytes (read %llu%s): %s",
                                 (unsigned long long)cases[c].bytes, (unsigned long long)k,
                                 once ? "" : " on", smoe_last_error());
                    t.claim_ok++;
                    assert_int_equal(smoe_release(s, &b), 0);
                }
                bounded_close(s);
                tu_baseline_check(base, "after close");
                t.runs++;
                t.injected += (unsigned)atomic_load(&fio.fired);
            }
    }
    g_chunk = 0;
    fault_io_remove();
    print_tally("short reads", &t);
    tu_fx_free(f);
}

/* Direct reads the table cuts to 100 bytes: where O_DIRECT is real the
 * kernel refuses such a request (EINVAL), a definite error, never wrong
 * bytes. (A read the kernel itself returns cut short goes on from the last
 * aligned boundary: test_read_errors.) */
static void misaligned_short_direct_read(void **state)
{
    (void)state;
    tu_fx *f = fx_new(20000, 20000);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s;
    assert_int_equal(open_stream(f, 1, 2, 0, &s), 0);
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    fault_io_arm(&fio, FIO_SHORT, FIO_PREAD, 1, 0, 100);
    smoe_blob b;
    int r = bounded_claim(s, f, 0, 0, &b);
    if (st.io_mode == SMOE_IO_DIRECT)
        assert_int_equal(r, SMOE_EIO);
    else if (r >= 0)
        assert_int_equal(smoe_release(s, &b), 0);
    bounded_close(s);
    fault_io_remove();
    tu_fx_free(f);
}

/* EINTR on every call of every class: all retried, all succeed. */
static void eintr_everywhere(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1000, 70000);
    struct fault_io fio;
    fault_io_install(&fio);
    struct tally t = {0};
    for (int direct = 0; direct <= 1; direct++) {
        g_chunk = direct ? 16384 : 0;
        fault_io_arm(&fio, FIO_EINTR_ALL, FIO_ANY, 0, 0, 0);
        smoe_stream *s;
        tu_baseline base = tu_baseline_take();
        int r = open_stream(f, 3, NKEYS, direct ? 0 : SMOE_OPEN_BUFFERED, &s);
        if (r < 0)
            fail_msg("open with EINTR everywhere: %s", smoe_last_error());
        for (uint32_t key = 0; key < NKEYS; key++) {
            smoe_blob b;
            if (bounded_claim(s, f, key / EXPERTS, key % EXPERTS, &b) < 0)
                fail_msg("claim with EINTR everywhere: %s", smoe_last_error());
            t.claim_ok++;
            assert_int_equal(smoe_release(s, &b), 0);
        }
        bounded_close(s);
        tu_baseline_check(base, "after close");
        assert_int_equal(atomic_load(&fio.open_fds), 0);
        t.runs++;
        t.injected += (unsigned)atomic_load(&fio.fired);
        /* Every class was interrupted at least once. */
        for (int c = FIO_OPEN; c <= FIO_PREAD; c++)
            assert_true(atomic_load(&fio.count[c]) >= 2);
    }
    g_chunk = 0;
    /* The writer too: a complete, loadable vault. */
    char *p = tu_path(f->dir, "w.smoe");
    fault_io_arm(&fio, FIO_EINTR_ALL, FIO_ANY, 0, 0, 0);
    assert_int_equal(tu_make_vault(p, 2, 5, 100, 40000, 3), 0);
    t.runs++;
    t.injected += (unsigned)atomic_load(&fio.fired);
    assert_true(atomic_load(&fio.count[FIO_RENAME]) >= 2);
    fault_io_remove();
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, p, &smoe__io_os), 0);
    smoe__vault_free(&v);
    free(p);
    print_tally("EINTR on every call", &t);
    tu_fx_free(f);
}

/* A run over a vault cut in the middle of its last blob: that claim gets a
 * definite error (the read spans the end of the file), the others their
 * bytes. */
static void read_spanning_end_of_file(void **state)
{
    (void)state;
    tu_fx *f = fx_new(30000, 30000);
    for (int direct = 0; direct <= 1; direct++) {
        assert_int_equal(tu_make_vault(f->path, LAYERS, EXPERTS, 30000, 30000, f->seed), 0);
        smoe_stream *s;
        assert_int_equal(open_stream(f, 2, NKEYS, direct ? 0 : SMOE_OPEN_BUFFERED, &s), 0);
        const smoe__vault_entry *last = NULL;
        uint32_t last_key = 0;
        for (uint32_t k = 0; k < NKEYS; k++)
            if (!last || s->vault.index[k].offset > last->offset)
                last = &s->vault.index[k], last_key = k;
        tu_truncate(f->path, last->offset + 5000);
        for (uint32_t k = 0; k < NKEYS; k++) {
            smoe_blob b;
            int r = bounded_claim(s, f, k / EXPERTS, k % EXPERTS, &b);
            if (k == last_key) {
                if (r != SMOE_ETRUNC)
                    fail_msg("%s claim of the cut blob: %s, expected SMOE_ETRUNC: %s",
                             direct ? "direct" : "buffered", smoe_err_name(r),
                             smoe_last_error());
            } else {
                assert_true(r >= 0);
                assert_int_equal(smoe_release(s, &b), 0);
            }
        }
        bounded_close(s);
    }
    tu_fx_free(f);
}

struct trunc_shared {
    smoe_stream *s;
    const tu_fx *f;
    _Atomic int stop;
    _Atomic uint64_t ok, failed, checksum, wrong, unexpected, slow;
};

static void *trunc_claimer(void *p)
{
    struct trunc_shared *sh = p;
    uint64_t rng = (uint64_t)(uintptr_t)p ^ 0x9E3779B97F4A7C15ull;
    while (!atomic_load(&sh->stop)) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t key = (uint32_t)(rng >> 33) % NKEYS;
        smoe_blob b;
        uint64_t t0 = tu_now_ns();
        int r = smoe_claim_wait(sh->s, key / EXPERTS, key % EXPERTS, tu_bound_ns(), &b);
        if (tu_now_ns() - t0 >= tu_bound_ns())
            atomic_fetch_add(&sh->slow, 1);
        if (r >= 0) {
            atomic_fetch_add(blob_ok(sh->f, &b) ? &sh->ok : &sh->wrong, 1);
            smoe_release(sh->s, &b);
        } else if (r == SMOE_ETRUNC || r == SMOE_EIO || r == SMOE_ECHECKSUM) {
            atomic_fetch_add(&sh->failed, 1);
            if (r == SMOE_ECHECKSUM)
                atomic_fetch_add(&sh->checksum, 1);
            smoe_prefetch(sh->s, key / EXPERTS, key % EXPERTS, 0); /* retry next time */
        } else if (r != SMOE_EFULL) {
            atomic_fetch_add(&sh->unexpected, 1);
        }
    }
    return NULL;
}

/* Claimers run while the vault is cut to half (then, second round, also
 * re-extended with zeros, which read back without an error and only
 * verification catches): every claim gets the exact bytes or an error. */
static void truncated_during_run(void **state)
{
    (void)state;
    tu_fx *f = fx_new(16384, 40000);
    for (int extend = 0; extend <= 1; extend++) {
        assert_int_equal(tu_make_vault(f->path, LAYERS, EXPERTS, 16384, 40000, f->seed), 0);
        uint64_t size = tu_file_size(f->path);
        struct trunc_shared sh = {0};
        sh.f = f;
        tu_baseline base = tu_baseline_take();
        /* 3 slots for 6 experts: eviction keeps re-reading. */
        assert_int_equal(open_stream(f, 2, 3, 0, &sh.s), 0);
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&th[i], NULL, trunc_claimer, &sh), 0);
        usleep(100000);
        tu_truncate(f->path, SMOE__VAULT_ALIGN + (size - SMOE__VAULT_ALIGN) / 2);
        if (extend)
            tu_truncate(f->path, size);
        usleep(300000);
        atomic_store(&sh.stop, 1);
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        print_message("truncated%s during a run: %llu claims ok, %llu failed (%llu "
                      "checksum mismatches)\n", extend ? " and re-extended" : "",
                      (unsigned long long)sh.ok, (unsigned long long)sh.failed,
                      (unsigned long long)sh.checksum);
        assert_int_equal(atomic_load(&sh.wrong), 0);
        assert_int_equal(atomic_load(&sh.unexpected), 0);
        assert_int_equal(atomic_load(&sh.slow), 0);
        assert_true(atomic_load(&sh.failed) > 0);
        assert_true(atomic_load(&sh.ok) > 0);
        if (extend) /* zeros read back without an error: only verification sees them */
            assert_true(atomic_load(&sh.checksum) > 0);
        smoe_stats st = SMOE_STATS_INIT;
        assert_int_equal(smoe_get_stats(sh.s, &st), 0);
        assert_true(st.reads_failed > 0);
        bounded_close(sh.s);
        tu_baseline_check(base, "after close");
    }
    tu_fx_free(f);
}

struct retry_race {
    smoe_stream *s;
    _Atomic int stop;
    _Atomic uint64_t prefetches;
};

static void *retry_prefetcher(void *p)
{
    struct retry_race *rr = p;
    while (!atomic_load(&rr->stop)) {
        smoe_prefetch(rr->s, 0, 1, 0); /* retries the failed read */
        atomic_fetch_add(&rr->prefetches, 1);
    }
    return NULL;
}

/* A claim racing with the prefetch that retries a failed read: it reports
 * the failure or that the read is in flight, never success without a
 * reference. */
static void claim_races_failed_retry(void **state)
{
    (void)state;
    tu_fx *f = fx_new(16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    struct retry_race rr = {0};
    g_chunk = 0;
    assert_int_equal(open_stream(f, 2, 2, 0, &rr.s), 0);
    fault_io_arm(&fio, FIO_FAIL_FROM, FIO_PREAD, 1, EIO, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, retry_prefetcher, &rr), 0);
    uint64_t n = 0, failed = 0, bad = 0, unheld = 0, t0 = tu_now_ns();
    while (tu_now_ns() - t0 < 1000000000ull) {
        smoe_blob b;
        memset(&b, 0xa5, sizeof b);
        int r = smoe_claim(rr.s, 0, 1, &b);
        n++;
        if (r >= 0) {
            bad++; /* every read fails: no claim can succeed */
            unheld += !b.held;
            if (b.held)
                smoe_release(rr.s, &b);
        } else if (r == SMOE_EIO) {
            failed++;
        } else if (r != SMOE_EAGAIN && r != SMOE_ENOTRESIDENT) {
            bad++;
        }
    }
    atomic_store(&rr.stop, 1);
    pthread_join(th, NULL);
    print_message("claims racing retries: %llu claims, %llu saw the failure, %llu prefetches, "
                  "%llu wrong results (%llu successes without a reference)\n",
                  (unsigned long long)n, (unsigned long long)failed,
                  (unsigned long long)atomic_load(&rr.prefetches), (unsigned long long)bad,
                  (unsigned long long)unheld);
    assert_int_equal(bad, 0);
    assert_true(failed > 0);
    bounded_close(rr.s);
    fault_io_remove();
    tu_fx_free(f);
}

/* Remove the files of dir whose names start with prefix. */
static void remove_temporaries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            char *p = tu_path(dir, e->d_name);
            unlink(p);
            free(p);
        }
    closedir(d);
}

/* The histogram file's counts, or 0 when it does not decode for s. */
static int read_hist(smoe_stream *s, const char *path, uint64_t *counts)
{
    if (!tu_exists(path))
        return 0;
    uint64_t len;
    unsigned char *buf = tu_read_file(path, &len);
    smoe__freq_id id = {s->vault.layers, s->vault.experts, s->vault.vault_id,
                        s->vault.file_size};
    const char *why;
    int st = smoe__freq_decode(buf, len, &id, counts, &why);
    free(buf);
    return st == SMOE_FREQ_LOADED;
}

/* Saving the popularity histogram with each of its I/O calls failing in
 * turn, once and from there on, with short writes, and interrupted: the
 * file is always the previous complete version or the new one, and no
 * temporary file is left unless removing it failed too. */
static void freq_save_countdown(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1000, 30000);
    char *hist = tu_path(f->dir, "v.freq");
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = NKEYS;
    o.freq_path = hist;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_ALLOW_BUFFERED;
    tu_baseline base = tu_baseline_take();
    smoe_stream *s;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    uint64_t prev[NKEYS], want[NKEYS], got[NKEYS];
    smoe_blob b;
    for (uint32_t k = 0; k < NKEYS; k++) {
        assert_true(bounded_claim(s, f, k / EXPERTS, k % EXPERTS, &b) >= 0);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    fault_io_arm(&fio, FIO_OFF, FIO_ANY, 0, 0, 0);
    assert_int_equal(smoe_freq_save(s), 0);
    uint64_t calls = atomic_load(&fio.total);
    assert_true(calls >= 6); /* open, write, fsync, close, rename, directory sync */
    unsigned runs = 0, injected = 0, failed = 0, left = 0;
    for (int mode = 0; mode < 4; mode++)
        for (uint64_t k = 1; k <= (mode < 2 ? calls : 1); k++) {
            uint32_t key = (uint32_t)(runs % NKEYS); /* new counts to save */
            assert_true(bounded_claim(s, f, key / EXPERTS, key % EXPERTS, &b) >= 0);
            assert_int_equal(smoe_release(s, &b), 0);
            for (uint32_t i = 0; i < NKEYS; i++)
                want[i] = atomic_load(&s->freq.count[i]);
            assert_true(read_hist(s, hist, prev));
            if (mode == 0)
                fault_io_arm(&fio, FIO_FAIL_ONCE, FIO_ANY, k, EIO, 0);
            else if (mode == 1)
                fault_io_arm(&fio, FIO_FAIL_FROM, FIO_ANY, k, ENOSPC, 0);
            else if (mode == 2)
                fault_io_arm(&fio, FIO_SHORT, FIO_PWRITE, 1, 0, 3);
            else
                fault_io_arm(&fio, FIO_EINTR_ALL, FIO_ANY, 0, 0, 0);
            int r = smoe_freq_save(s);
            runs++;
            injected += (unsigned)atomic_load(&fio.fired);
            fault_io_disarm(&fio);
            if (mode >= 2 && r != 0)
                fail_msg("save with %s: %s", mode == 2 ? "short writes" : "EINTR",
                         smoe_last_error());
            assert_true(read_hist(s, hist, got));
            if (r == 0) {
                assert_memory_equal(got, want, sizeof got);
            } else {
                failed++;
                assert_memory_equal(got, prev, sizeof got);
            }
            if (tu_count_files(f->dir) != 2) { /* the vault and the histogram */
                if (mode != 1)
                    fail_msg("a temporary file is left after a save (fault at call %llu)",
                             (unsigned long long)k);
                left++;
                remove_temporaries(f->dir, "v.freq.tmp.");
            }
        }
    bounded_close(s);
    fault_io_remove();
    tu_baseline_check(base, "after close");
    print_message("histogram saves: %u runs, %u faults injected; %u saves failed and left "
                  "the previous file (%u left a temporary file: its unlink failed too), the "
                  "rest wrote the new one\n", runs, injected, failed, left);
    free(hist);
    tu_fx_free(f);
}

/* The writer replacing an existing vault, with each of its I/O calls
 * failing in turn: the file at the path is always the old complete vault
 * or the new one, and nothing is left behind. */
static void writer_countdown(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *p = tu_path(dir, "w.smoe");
    assert_int_equal(tu_make_vault(p, 2, 3, 100, 20000, 1), 0);
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, p, &smoe__io_os), 0);
    uint64_t old_id = v.vault_id, new_id;
    smoe__vault_free(&v);
    struct fault_io fio;
    fault_io_install(&fio);
    assert_int_equal(tu_make_vault(p, 2, 3, 100, 20000, 2), 0);
    uint64_t n = atomic_load(&fio.total);
    fault_io_remove();
    assert_int_equal(smoe__vault_load(&v, p, &smoe__io_os), 0);
    new_id = v.vault_id;
    smoe__vault_free(&v);
    assert_true(new_id != old_id);
    unsigned runs = 0, injected = 0, failed = 0, left = 0;
    for (uint64_t k = 1; k <= n; k++)
        for (int kind = TRANSIENT; kind <= PERSISTENT; kind++) {
            assert_int_equal(tu_make_vault(p, 2, 3, 100, 20000, 1), 0); /* the old one */
            tu_baseline base = tu_baseline_take();
            fault_io_install(&fio);
            fault_io_arm(&fio, kind == TRANSIENT ? FIO_FAIL_ONCE : FIO_FAIL_FROM, FIO_ANY, k,
                         EIO, 0);
            int rc = tu_make_vault(p, 2, 3, 100, 20000, 2);
            runs++;
            injected += (unsigned)atomic_load(&fio.fired);
            fault_io_remove();
            tu_baseline_check(base, "after the writer");
            assert_int_equal(atomic_load(&fio.open_fds), 0);
            assert_int_equal(smoe__vault_load(&v, p, &smoe__io_os), 0);
            if (rc == 0) {
                assert_int_equal(v.vault_id, new_id);
            } else {
                failed++;
                assert_int_equal(v.vault_id, old_id);
            }
            smoe__vault_free(&v);
            /* No temporary file is left, unless removing it failed too. */
            if (tu_count_files(dir) != 1) {
                if (kind != PERSISTENT)
                    fail_msg("fault at call %llu: a temporary file is left",
                             (unsigned long long)k);
                tu_rmdir(dir);
                assert_int_equal(mkdir(dir, 0700), 0);
                left++;
            }
        }
    print_message("vault writer: %u runs, %u faults injected; %u writes failed and left "
                  "the old vault (%u left a temporary file: its unlink failed too), the "
                  "rest wrote the new one\n", runs, injected, failed, left);
    tu_rmdir(dir);
    free(dir);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(countdown_once),
        cmocka_unit_test(countdown_persistent),
        cmocka_unit_test(short_reads_everywhere),
        cmocka_unit_test(misaligned_short_direct_read),
        cmocka_unit_test(eintr_everywhere),
        cmocka_unit_test(read_spanning_end_of_file),
        cmocka_unit_test(truncated_during_run),
        cmocka_unit_test(claim_races_failed_retry),
        cmocka_unit_test(writer_countdown),
        cmocka_unit_test(freq_save_countdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
