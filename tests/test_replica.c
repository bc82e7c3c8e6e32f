/*
 * Description: vault replicas (opts.replicas, docs/replicas.md):
 *  - differing_replica_refused: a copy that is not the vault's (another
 *    vault of the same shape, a truncated copy, the vault's own file, a
 *    bad list) fails smoe_open with an error naming it;
 *  - reads_spread: chunks are read from both copies, the per-copy counts
 *    add up to the stream's, every blob is right; a copy made slow (each
 *    read delayed) serves fewer reads than the fast one;
 *  - failing_replica_changes_nothing: with every read of one copy failing,
 *    every claim still returns the right bytes, the copy is set aside and
 *    logged; only when every copy fails does a claim see SMOE_EIO;
 *  - recovered_replica_used_again: a copy that failed for a while is
 *    probed after opts.replica_retry_ms and serves reads again;
 *  - shutdown_with_reads_on_several: smoe_shutdown and smoe_close while
 *    reads are held in flight on both copies return, leaving no
 *    descriptor or thread behind;
 *  - replica_stats_bounds: smoe_get_replica_stats's count and refusals;
 *  - replica_checksum_error_names_the_copy: a blob wrong in every copy
 *    fails its claim with a message naming each copy that did not match;
 *  - replica_truncated_names_the_copy: when every copy fails a read, the
 *    claim's error names the copy whose error it is (a replica cut short
 *    after open: its index, path and the offset where it ends);
 *  - replica_corrupt_copy_set_aside: a replica with a wrong byte in every
 *    blob, the vault intact: every claim succeeds, and the copy is set
 *    aside after a streak of checksum failures, logged.
 * The faults come from tests/fault_io.c, aimed at one copy's descriptors.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define L 4u
#define E 8u

/* Installed by the tests that inject faults; static, so that a failed test
 * leaves no table pointing into its stack. */
static struct fault_io fio;

/* Workers may log at once (two copies set aside together): tu_log_cb under
 * a lock. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_locked(void *user, int level, const char *msg)
{
    pthread_mutex_lock(&log_lock);
    tu_log_cb(user, level, msg);
    pthread_mutex_unlock(&log_lock);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A byte-for-byte copy of src at dst. */
static void copy_file(const char *src, const char *dst)
{
    uint64_t n;
    unsigned char *p = tu_read_file(src, &n);
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(p);
}

typedef struct rx {
    tu_fx *f;
    char copy[700];
    tu_logbuf log;
} rx;

static rx *rx_new(void)
{
    rx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    x->f = tu_fx_new(L, E, 60000, 200000, 20);
    snprintf(x->copy, sizeof x->copy, "%s/copy.smoe", x->f->dir);
    copy_file(x->f->path, x->copy);
    return x;
}

static void rx_free(rx *x)
{
    unlink(x->copy);
    tu_fx_free(x->f);
    free(x);
}

static int open_with(rx *x, const char *const *reps, uint32_t n, uint32_t workers,
                     uint32_t retry_ms, smoe_stream **s)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = workers;
    o.ring_slots = L * E;
    o.chunk_bytes = 16384 * 2;
    o.verify = SMOE_VERIFY_ON;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
    o.replicas = reps;
    o.n_replicas = n;
    o.replica_retry_ms = retry_ms;
    o.log_fn = log_locked;
    o.log_user = &x->log;
    return smoe_open(x->f->path, &o, s);
}

static smoe_stream *open_ok(rx *x, uint32_t workers, uint32_t retry_ms)
{
    const char *reps[] = {x->copy};
    smoe_stream *s = NULL;
    int r = open_with(x, reps, 1, workers, retry_ms, &s);
    if (r != 0)
        fail_msg("smoe_open: %s: %s", smoe_err_name(r), smoe_last_error());
    return s;
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

/* Demand every expert of layers [l0, l1) at once, then claim, check and
 * release each. */
static void read_layers(smoe_stream *s, const tu_fx *f, uint32_t l0, uint32_t l1)
{
    for (uint32_t l = l0; l < l1; l++)
        for (uint32_t e = 0; e < E; e++)
            assert_true(smoe_prefetch(s, l, e, SMOE_PREFETCH_DEMAND) >= 0);
    for (uint32_t l = l0; l < l1; l++)
        for (uint32_t e = 0; e < E; e++) {
            smoe_blob b;
            int r = smoe_claim_wait(s, l, e, tu_bound_ns(), &b);
            if (r < 0)
                fail_msg("claim (%u, %u): %s: %s", l, e, smoe_err_name(r), smoe_last_error());
            assert_true(blob_ok(f, &b));
            assert_int_equal(smoe_release(s, &b), 0);
        }
}

static smoe_replica_stats rstats(smoe_stream *s, uint32_t i)
{
    smoe_replica_stats st = SMOE_REPLICA_STATS_INIT;
    int r = smoe_get_replica_stats(s, i, &st);
    if (r < 0)
        fail_msg("get_replica_stats %u: %s", i, smoe_last_error());
    return st;
}

static void differing_replica_refused(void **state)
{
    (void)state;
    rx *x = rx_new();
    smoe_stream *s = NULL;
    /* another vault of the same shape and sizes, other bytes */
    char other[700];
    snprintf(other, sizeof other, "%s/other.smoe", x->f->dir);
    assert_int_equal(tu_make_vault(other, L, E, 60000, 200000, 21), 0);
    const char *reps[] = {x->copy, other};
    assert_int_equal(open_with(x, reps, 2, 2, 0, &s), SMOE_EINVAL);
    assert_null(s);
    tu_expect_contains(smoe_last_error(), other);
    tu_expect_contains(smoe_last_error(), "is not a copy of");
    tu_expect_contains(smoe_last_error(), "vault id");
    /* a truncated copy: the loader's error, naming it */
    copy_file(x->copy, other);
    tu_truncate(other, tu_file_size(x->copy) - 16384);
    assert_int_equal(open_with(x, reps, 2, 2, 0, &s), SMOE_ETRUNC);
    tu_expect_contains(smoe_last_error(), "replica 2");
    tu_expect_contains(smoe_last_error(), other);
    /* the vault itself, or one copy twice */
    const char *self[] = {x->f->path};
    assert_int_equal(open_with(x, self, 1, 2, 0, &s), SMOE_EINVAL);
    tu_expect_contains(smoe_last_error(), "is the same file as");
    const char *twice[] = {x->copy, x->copy};
    assert_int_equal(open_with(x, twice, 2, 2, 0, &s), SMOE_EINVAL);
    tu_expect_contains(smoe_last_error(), "is the same file as");
    /* bad lists */
    assert_int_equal(open_with(x, NULL, 1, 2, 0, &s), SMOE_EINVAL);
    const char *null_item[] = {NULL};
    assert_int_equal(open_with(x, null_item, 1, 2, 0, &s), SMOE_EINVAL);
    const char *many[16] = {0};
    assert_int_equal(open_with(x, many, 16, 2, 0, &s), SMOE_EINVAL);
    tu_expect_contains(smoe_last_error(), "n_replicas 16");
    /* a missing copy */
    const char *gone[] = {"/nonexistent/copy.smoe"};
    assert_true(open_with(x, gone, 1, 2, 0, &s) < 0);
    tu_expect_contains(smoe_last_error(), "/nonexistent/copy.smoe");
    assert_null(s);
    unlink(other);
    rx_free(x);
}

static void reads_spread(void **state)
{
    (void)state;
    rx *x = rx_new();
    fault_io_install(&fio);
    fio.target = x->copy;
    /* reads overlap, as a drive's do; long enough that each copy is busy
     * for more than one throughput window (SMOE__REPLICA_WINDOW_NS), so
     * that both report a rate however the reads overlap */
    atomic_store(&fio.delay_us, 1500);
    smoe_stream *s = open_ok(x, 4, 0);
    read_layers(s, x->f, 0, L);
    smoe_stats st = tu_stats(s);
    smoe_replica_stats a = rstats(s, 0), b = rstats(s, 1);
    assert_int_equal(smoe_get_replica_stats(s, 1, &b), 2);
    print_message("even: vault %llu reads, copy %llu reads\n", (unsigned long long)a.reads,
                  (unsigned long long)b.reads);
    assert_true(a.reads > 0 && b.reads > 0);
    assert_int_equal(a.reads + b.reads, st.chunks_read);
    assert_int_equal(a.bytes + b.bytes, st.bytes_read);
    assert_int_equal(a.failed + b.failed, 0);
    assert_string_equal(a.path, x->f->path);
    assert_string_equal(b.path, x->copy);
    assert_true(a.rate > 0 && b.rate > 0 && a.in_use && b.in_use);
    assert_int_equal(smoe_close(s), 0);

    /* the copy a drive of bounded bandwidth (one read at a time) 10x slower
     * per read: it gets fewer reads */
    atomic_store(&fio.target_delay_us, 3000);
    atomic_store(&fio.target_serial, 1);
    s = open_ok(x, 4, 0);
    read_layers(s, x->f, 0, L);
    a = rstats(s, 0);
    b = rstats(s, 1);
    print_message("slow copy: vault %llu reads, copy %llu reads\n",
                  (unsigned long long)a.reads, (unsigned long long)b.reads);
    assert_true(a.reads > 2 * b.reads);
    assert_true(b.reads > 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    rx_free(x);
}

/* A warm-up share is one worker's sequential run: its reads go to the copy
 * of the worker's id, so with four workers on two copies each copy serves
 * two whole shares (placed by learned cost, a share's reads went almost
 * all to one copy), and every blob arrives intact. */
static void warmup_shares_split_over_copies(void **state)
{
    (void)state;
    rx *x = rx_new();
    fault_io_install(&fio);
    fio.target = x->copy;
    atomic_store(&fio.delay_us, 300);
    smoe_stream *s = open_ok(x, 4, 0);
    int n = smoe_warmup(s, NULL);
    assert_int_equal(n, (int)(L * E));
    assert_int_equal(smoe_warmup_wait(s, 60 * 1000000000ull), 0);
    smoe_replica_stats a = rstats(s, 0), b = rstats(s, 1);
    print_message("warm-up: vault %llu reads, copy %llu reads\n", (unsigned long long)a.reads,
                  (unsigned long long)b.reads);
    assert_int_equal(a.failed + b.failed, 0);
    assert_true(a.reads * 4 >= a.reads + b.reads && b.reads * 4 >= a.reads + b.reads);
    read_layers(s, x->f, 0, L);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    rx_free(x);
}

static void failing_replica_changes_nothing(void **state)
{
    (void)state;
    rx *x = rx_new();
    fault_io_install(&fio);
    fio.target = x->copy;
    smoe_stream *s = open_ok(x, 4, 60000);
    uint64_t at_open = atomic_load(&fio.target_reads); /* its header and tables */
    atomic_store(&fio.target_fail, 1); /* after open: a copy that fails there is refused */
    read_layers(s, x->f, 0, L);
    smoe_stats st = tu_stats(s);
    smoe_replica_stats a = rstats(s, 0), b = rstats(s, 1);
    assert_int_equal(st.reads_failed, 0);
    assert_int_equal(st.slots_failed, 0);
    assert_int_equal(b.reads, 0);
    assert_true(b.failed >= SMOE__REPLICA_STREAK);
    assert_int_equal(b.failed, atomic_load(&fio.target_fired));
    assert_int_equal(b.set_aside, 1);
    assert_int_equal(b.in_use, 0);
    assert_int_equal(a.reads, st.chunks_read);
    tu_expect_contains(x->log.text, "set aside");
    tu_expect_contains(x->log.text, x->copy);
    /* set aside: the copy is not tried again before its retry time */
    /* the streak, and reads already on it then (4 workers) */
    assert_true(atomic_load(&fio.target_reads) - at_open <= SMOE__REPLICA_STREAK + 3);
    assert_int_equal(smoe_close(s), 0);

    /* every copy failing: the claim sees the error */
    atomic_store(&fio.target_fail, 0);
    s = open_ok(x, 2, 60000);
    fault_io_arm(&fio, FIO_FAIL_FROM, FIO_PREAD, 1, EIO, 0);
    assert_true(smoe_prefetch(s, 0, 0, SMOE_PREFETCH_DEMAND) >= 0);
    smoe_blob blob;
    assert_int_equal(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &blob), SMOE_EIO);
    fault_io_disarm(&fio);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    rx_free(x);
}

static void recovered_replica_used_again(void **state)
{
    (void)state;
    rx *x = rx_new();
    fault_io_install(&fio);
    fio.target = x->copy;
    atomic_store(&fio.delay_us, 300);
    smoe_stream *s = open_ok(x, 4, 50);
    atomic_store(&fio.target_fail, 1);
    read_layers(s, x->f, 0, 2);
    smoe_replica_stats b = rstats(s, 1);
    assert_true(b.set_aside >= 1);
    assert_int_equal(b.reads, 0);
    /* the drive is back; after the retry time a probe finds it */
    atomic_store(&fio.target_fail, 0);
    sleep_ms(120);
    read_layers(s, x->f, 2, L);
    b = rstats(s, 1);
    print_message("after recovery: copy %llu reads, %llu failed\n",
                  (unsigned long long)b.reads, (unsigned long long)b.failed);
    assert_true(b.reads > 0);
    assert_int_equal(b.in_use, 1);
    tu_expect_contains(x->log.text, "back in use");
    assert_int_equal(tu_stats(s).reads_failed, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    rx_free(x);
}

static void shutdown_with_reads_on_several(void **state)
{
    (void)state;
    rx *x = rx_new();
    tu_baseline base = tu_baseline_take();
    fault_io_install(&fio);
    fio.target = x->copy;
    smoe_stream *s = open_ok(x, 4, 0);
    atomic_store(&fio.hold, 1);
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t e = 0; e < E; e++)
            assert_true(smoe_prefetch(s, l, e, SMOE_PREFETCH_DEMAND) >= 0);
    /* wait until reads are held on both copies */
    uint64_t t0 = tu_now_ns();
    while (!(atomic_load(&s->rep.r[0].inflight) && atomic_load(&s->rep.r[1].inflight))) {
        assert_true(tu_now_ns() - t0 < tu_bound_ns());
        sleep_ms(1);
    }
    assert_int_equal(smoe_shutdown(s), 0);
    atomic_store(&fio.hold, 0);
    smoe_blob b;
    int r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
    assert_int_equal(r, SMOE_ESHUTDOWN);
    assert_int_equal(smoe_close(s), 0);
    assert_int_equal(atomic_load(&fio.open_fds), 0);
    fault_io_remove();
    tu_baseline_check(base, "close after a shutdown with reads on two copies");
    rx_free(x);
}

static void replica_stats_bounds(void **state)
{
    (void)state;
    rx *x = rx_new();
    smoe_stream *s = NULL;
    assert_int_equal(open_with(x, NULL, 0, 1, 0, &s), 0);
    smoe_replica_stats st = SMOE_REPLICA_STATS_INIT;
    assert_int_equal(smoe_get_replica_stats(s, 0, &st), 1);
    assert_string_equal(st.path, x->f->path);
    assert_int_equal(smoe_get_replica_stats(s, 1, &st), SMOE_EINVAL);
    assert_int_equal(smoe_get_replica_stats(NULL, 0, &st), SMOE_EINVAL);
    assert_int_equal(smoe_get_replica_stats(s, 0, NULL), SMOE_EINVAL);
    st.struct_size = sizeof(size_t);
    assert_int_equal(smoe_get_replica_stats(s, 0, &st), SMOE_EINVAL);
    /* an older caller's shorter struct: only its bytes are written */
    struct {
        smoe_replica_stats head;
        uint64_t guard;
    } g;
    memset(&g, 0xAB, sizeof g);
    g.head.struct_size = offsetof(smoe_replica_stats, reads) + sizeof(uint64_t);
    assert_int_equal(smoe_get_replica_stats(s, 0, &g.head), 1);
    assert_int_equal(g.head.reads, 0);
    assert_int_equal(g.head.bytes, 0xABABABABABABABABull);
    assert_int_equal(smoe_close(s), 0);
    rx_free(x);
}

/* File offset of blob (layer, expert) in the vault at path (its copies'
 * are the same). */
static uint64_t blob_offset(const char *path, uint32_t layer, uint32_t expert)
{
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path, smoe__io_get()), 0);
    uint64_t off = v.index[layer * v.experts + expert].offset;
    smoe__vault_free(&v);
    return off;
}

/* Claim (layer, expert) on demand: its result, the message in smoe_last_error(). */
static int claim_one(smoe_stream *s, uint32_t layer, uint32_t expert)
{
    assert_true(smoe_prefetch(s, layer, expert, SMOE_PREFETCH_DEMAND) >= 0);
    smoe_blob b;
    int r = smoe_claim_wait(s, layer, expert, tu_bound_ns(), &b);
    if (r >= 0)
        assert_int_equal(smoe_release(s, &b), 0);
    return r;
}

/* A blob whose bytes are wrong in every copy: the claim's checksum error
 * names each copy that was read and did not match, the replica by its
 * index and path. */
static void replica_checksum_error_names_the_copy(void **state)
{
    (void)state;
    rx *x = rx_new();
    uint64_t at = blob_offset(x->f->path, 1, 2) + 100;
    tu_flip_byte(x->f->path, at);
    tu_flip_byte(x->copy, at + 1);
    smoe_stream *s = open_ok(x, 2, 60000);
    int r = claim_one(s, 1, 2);
    print_message("claim: %s\n", smoe_last_error());
    assert_int_equal(r, SMOE_ECHECKSUM);
    char want[800];
    snprintf(want, sizeof want, "replica 1 (%s)", x->copy);
    tu_expect_contains(smoe_last_error(), want);
    tu_expect_contains(smoe_last_error(), "copy 0");
    assert_true(claim_one(s, 1, 3) >= 0); /* the others are intact */
    assert_int_equal(smoe_close(s), 0);
    rx_free(x);
}

/* Every copy fails a read: the vault with an I/O error, the replica
 * because it was cut short after open. The claim's error is the last
 * copy's and names that copy, with the offset in that copy. */
static void replica_truncated_names_the_copy(void **state)
{
    (void)state;
    rx *x = rx_new();
    fault_io_install(&fio);
    fio.target = x->f->path;
    /* one worker: the vault is tried first, then the replica */
    smoe_stream *s = open_ok(x, 1, 60000);
    uint64_t cut = blob_offset(x->f->path, L - 1, E - 1) + 16384;
    tu_truncate(x->copy, cut);
    atomic_store(&fio.target_fail, 1);
    int r = claim_one(s, L - 1, E - 1);
    print_message("claim: %s\n", smoe_last_error());
    char want[800];
    if (r == SMOE_ETRUNC) {
        snprintf(want, sizeof want, "replica 1 (%s)", x->copy);
        tu_expect_contains(smoe_last_error(), want);
        snprintf(want, sizeof want, "offset %llu", (unsigned long long)cut);
        tu_expect_contains(smoe_last_error(), want);
    } else {
        assert_int_equal(r, SMOE_EIO);
        tu_expect_contains(smoe_last_error(), "copy 0");
    }
    atomic_store(&fio.target_fail, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    rx_free(x);
}

/* A replica with a wrong byte in every blob, the vault intact: every claim
 * returns the right bytes (a blob that fails its check is read again from
 * each copy alone), and the copy is set aside after a streak of checksum
 * failures, logged with its path. */
static void replica_corrupt_copy_set_aside(void **state)
{
    (void)state;
    rx *x = rx_new();
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t e = 0; e < E; e++)
            tu_flip_byte(x->copy, blob_offset(x->f->path, l, e) + 64);
    smoe_stream *s = open_ok(x, 4, 60000);
    read_layers(s, x->f, 0, L);
    smoe_replica_stats a = rstats(s, 0), b = rstats(s, 1);
    print_message("vault: %llu reads, %llu failed; corrupt copy: %llu reads, %llu failed, "
                  "set aside %llu\n", (unsigned long long)a.reads, (unsigned long long)a.failed,
                  (unsigned long long)b.reads, (unsigned long long)b.failed,
                  (unsigned long long)b.set_aside);
    assert_int_equal(tu_stats(s).slots_failed, 0);
    assert_true(b.failed >= SMOE__REPLICA_STREAK);
    assert_int_equal(b.set_aside, 1);
    assert_int_equal(b.in_use, 0);
    assert_int_equal(a.failed, 0);
    tu_expect_contains(x->log.text, "set aside");
    tu_expect_contains(x->log.text, x->copy);
    tu_expect_contains(x->log.text, "checksum");
    assert_int_equal(smoe_close(s), 0);
    rx_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(differing_replica_refused),
        cmocka_unit_test(reads_spread),
        cmocka_unit_test(warmup_shares_split_over_copies),
        cmocka_unit_test(failing_replica_changes_nothing),
        cmocka_unit_test(recovered_replica_used_again),
        cmocka_unit_test(shutdown_with_reads_on_several),
        cmocka_unit_test(replica_stats_bounds),
        cmocka_unit_test(replica_checksum_error_names_the_copy),
        cmocka_unit_test(replica_truncated_names_the_copy),
        cmocka_unit_test(replica_corrupt_copy_set_aside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
