/*
 * Description: a consumer built against an older, smaller smoe.h works with
 * the current shared library. Each public struct that carries struct_size
 * is declared here as an earlier release might have shipped it (its first
 * fields, size field and all) and passed to the library inside a buffer
 * whose bytes after the old struct are guard bytes: options the caller did
 * not supply take their defaults (the stream behaves as one opened with
 * those fields zero), and results fill only the caller's struct_size, never
 * the guard. The test links the shared library and uses only the public
 * header, as an engine does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "smoe/smoe.h"

#define GUARD 0xA5
#define GUARD_BYTES 256
#define BLOB_BYTES 16384u

/* ---- the structs as an older smoe.h declared them ---------------------- */

/* smoe_open_opts up to verify: 32 bytes, no tail padding. */
struct old_open_opts {
    size_t struct_size;
    uint32_t workers;
    uint32_t ring_slots;
    uint64_t slot_bytes;
    uint32_t flags;
    uint32_t verify;
};

/* smoe_stats with its first group of counters (requests). */
struct old_stats_requests {
    size_t struct_size;
    uint64_t prefetch_demand, prefetch_spec, hits, joins, misses, spec_queued;
    uint64_t spec_skipped, spec_upgraded, spec_cancelled, spec_used;
    uint64_t spec_wasted_bytes, full;
};

/* smoe_stats up to the ring group (slot_bytes). */
struct old_stats_ring {
    struct old_stats_requests requests;
    uint64_t reads_done, reads_failed, bytes_read, evictions;
    uint64_t claims, claim_hits, claim_waits, claim_wait_ns, releases;
    uint64_t slots, slot_bytes;
};

struct old_vault_info {
    size_t struct_size;
    uint32_t layers;
    uint32_t experts;
};

struct old_ring_region {
    size_t struct_size;
    void *base;
};

struct old_writer_opts {
    size_t struct_size;
    uint32_t layers;
    uint32_t experts;
};

/* The old fields are the current struct's first fields, at the same
 * offsets: a change here is an ABI break this file would not see. */
#define SAME_FIELD(old, cur, f) \
    _Static_assert(offsetof(old, f) == offsetof(cur, f), #cur "." #f " moved")
SAME_FIELD(struct old_open_opts, smoe_open_opts, workers);
SAME_FIELD(struct old_open_opts, smoe_open_opts, ring_slots);
SAME_FIELD(struct old_open_opts, smoe_open_opts, slot_bytes);
SAME_FIELD(struct old_open_opts, smoe_open_opts, flags);
SAME_FIELD(struct old_open_opts, smoe_open_opts, verify);
SAME_FIELD(struct old_stats_requests, smoe_stats, full);
SAME_FIELD(struct old_stats_ring, smoe_stats, releases);
SAME_FIELD(struct old_stats_ring, smoe_stats, slot_bytes);
SAME_FIELD(struct old_vault_info, smoe_vault_info, experts);
SAME_FIELD(struct old_ring_region, smoe_ring_region, base);
SAME_FIELD(struct old_writer_opts, smoe_writer_opts, experts);
_Static_assert(sizeof(struct old_open_opts) == offsetof(smoe_open_opts, spec_share_pct),
               "the old options end at a field boundary");
_Static_assert(sizeof(struct old_stats_ring) == offsetof(smoe_stats, ring_bytes),
               "the old stats end at a field boundary");

/* An old struct followed by guard bytes, as it may lie in the caller's
 * memory: whatever follows it is not the library's to read or write. */
#define GUARDED(T) struct { T old; unsigned char guard[GUARD_BYTES]; }

static void guard_fill(void *p, size_t n)
{
    memset(p, GUARD, n);
}

static void assert_guard_intact(const unsigned char *g)
{
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (g[i] != GUARD)
            fail_msg("guard byte %zu after the caller's struct was written: 0x%02x", i, g[i]);
}

/* ---- fixture: a small vault written with the public writer --------------- */

typedef struct fixture {
    char dir[256];
    char path[300];
} fixture;

static int write_vault(const char *path, const void *wopts)
{
    smoe_writer *w = NULL;
    int rc = smoe_writer_open(path, (const smoe_writer_opts *)wopts, &w);
    if (rc < 0)
        return rc;
    smoe_component c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "w");
    c.dtype = SMOE_DTYPE_U8;
    c.ndim = 1;
    c.shape[0] = BLOB_BYTES;
    c.nbytes = BLOB_BYTES;
    uint32_t id;
    unsigned char *buf = malloc(BLOB_BYTES);
    assert_non_null(buf);
    if ((rc = smoe_writer_add_layout(w, &c, 1, &id)) < 0)
        goto fail;
    for (uint32_t e = 0; e < 4; e++) {
        memset(buf, (int)(e + 1), BLOB_BYTES);
        if ((rc = smoe_writer_add_blob(w, 0, e, id, buf, BLOB_BYTES)) < 0)
            goto fail;
    }
    free(buf);
    return smoe_writer_finish(w);
fail:
    free(buf);
    smoe_writer_abort(w);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *base = getenv("SMOE_TEST_TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/abi-compat-XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/v.smoe", f->dir);

    /* The writer, with options from an older header. */
    GUARDED(struct old_writer_opts) w;
    guard_fill(&w, sizeof w);
    w.old.struct_size = sizeof w.old;
    w.old.layers = 1;
    w.old.experts = 4;
    assert_int_equal(write_vault(f->path, &w), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char p[320];
    snprintf(p, sizeof p, "%s.freq", f->path);
    unlink(p);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static const unsigned test_flags =
    SMOE_OPEN_ALLOW_BUFFERED | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;

/* Load expert 0 and 1 and claim expert 0 twice (a miss, then a hit). */
static void exercise(smoe_stream *s)
{
    smoe_blob b;
    assert_int_equal(smoe_prefetch(s, 0, 1, SMOE_PREFETCH_DEMAND), SMOE_QUEUED);
    for (int i = 0; i < 2; i++) {
        int rc = smoe_claim_wait(s, 0, 0, 10ull * 1000 * 1000 * 1000, &b);
        assert_true(rc == SMOE_READY || rc == SMOE_HIT);
        assert_int_equal(b.size, BLOB_BYTES);
        assert_int_equal(((const unsigned char *)b.data)[BLOB_BYTES - 1], 1);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    assert_int_equal(smoe_claim_wait(s, 0, 1, 10ull * 1000 * 1000 * 1000, &b), SMOE_READY);
    assert_int_equal(smoe_release(s, &b), 0);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_old_open_opts_take_defaults(void **state)
{
    fixture *f = *state;

    /* Old struct, then bytes that would be a nonzero spec_share_pct, top_k,
     * reserve, scout pointers and so on if the library read them. */
    GUARDED(struct old_open_opts) o;
    guard_fill(&o, sizeof o);
    o.old.struct_size = sizeof o.old;
    o.old.workers = 2;
    o.old.ring_slots = 6;
    o.old.slot_bytes = 0;
    o.old.flags = test_flags;
    o.old.verify = SMOE_VERIFY_DEFAULT;
    smoe_stream *s = NULL;
    if (smoe_open(f->path, (const smoe_open_opts *)&o, &s) < 0)
        fail_msg("smoe_open with an old options struct: %s", smoe_last_error());
    assert_guard_intact(o.guard);
    exercise(s);
    smoe_stats got = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &got), 0);
    assert_int_equal(smoe_close(s), 0);

    /* The same stream from the current struct, every later field zero. */
    smoe_open_opts cur = SMOE_OPEN_OPTS_INIT;
    cur.workers = 2;
    cur.ring_slots = 6;
    cur.flags = test_flags;
    assert_int_equal(smoe_open(f->path, &cur, &s), 0);
    exercise(s);
    smoe_stats want = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &want), 0);
    assert_int_equal(smoe_close(s), 0);

    assert_int_equal(got.workers, 2);
    assert_int_equal(got.slots, 6);
    assert_int_equal(got.workers, want.workers);
    assert_int_equal(got.slots, want.slots);
    assert_int_equal(got.slot_bytes, want.slot_bytes);
    assert_int_equal(got.ring_bytes, want.ring_bytes);
    assert_int_equal(got.verify, want.verify);
    assert_int_equal(got.io_mode, want.io_mode);
    assert_int_equal(got.chunk_bytes, want.chunk_bytes);
    assert_int_equal(got.misses, want.misses);
    assert_int_equal(got.claims, want.claims);
    assert_int_equal(got.claim_hits, want.claim_hits);
}

static void test_old_stats_filled_to_their_size(void **state)
{
    fixture *f = *state;
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 2;
    o.ring_slots = 4;
    o.flags = test_flags;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    exercise(s);

    smoe_stats full = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &full), 0);

    GUARDED(struct old_stats_requests) a;
    guard_fill(&a, sizeof a);
    a.old.struct_size = sizeof a.old;
    assert_int_equal(smoe_get_stats(s, (smoe_stats *)&a), 0);
    assert_guard_intact(a.guard);
    assert_int_equal(a.old.struct_size, sizeof a.old); /* left as the caller set it */
    assert_int_equal(a.old.prefetch_demand, full.prefetch_demand);
    assert_int_equal(a.old.misses, full.misses);
    assert_int_equal(a.old.hits, full.hits);
    assert_int_equal(a.old.full, full.full);

    GUARDED(struct old_stats_ring) b;
    guard_fill(&b, sizeof b);
    b.old.requests.struct_size = sizeof b.old;
    assert_int_equal(smoe_get_stats(s, (smoe_stats *)&b), 0);
    assert_guard_intact(b.guard);
    assert_int_equal(b.old.requests.misses, full.misses);
    assert_int_equal(b.old.claims, full.claims);
    assert_int_equal(b.old.claim_hits, full.claim_hits);
    assert_int_equal(b.old.releases, full.releases);
    assert_int_equal(b.old.slots, 4);
    assert_int_equal(b.old.slot_bytes, full.slot_bytes);

    /* A size that is not one of smoe_stats's: refused, nothing written. */
    GUARDED(size_t) z;
    guard_fill(&z, sizeof z);
    z.old = 3;
    assert_int_equal(smoe_get_stats(s, (smoe_stats *)&z), SMOE_EINVAL);
    assert_guard_intact(z.guard);
    assert_int_equal(smoe_close(s), 0);
}

static void test_old_info_structs_filled_to_their_size(void **state)
{
    fixture *f = *state;
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = 4;
    o.flags = test_flags;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);

    GUARDED(struct old_vault_info) vi;
    guard_fill(&vi, sizeof vi);
    vi.old.struct_size = sizeof vi.old;
    assert_int_equal(smoe_vault_info_get(s, (smoe_vault_info *)&vi), 0);
    assert_guard_intact(vi.guard);
    assert_int_equal(vi.old.layers, 1);
    assert_int_equal(vi.old.experts, 4);

    GUARDED(struct old_ring_region) rr;
    guard_fill(&rr, sizeof rr);
    rr.old.struct_size = sizeof rr.old;
    assert_int_equal(smoe_ring_region_get(s, (smoe_ring_region *)&rr), 0);
    assert_guard_intact(rr.guard);
    smoe_ring_region full = SMOE_RING_REGION_INIT;
    assert_int_equal(smoe_ring_region_get(s, &full), 0);
    assert_ptr_equal(rr.old.base, full.base);
    assert_int_equal(smoe_close(s), 0);
}

static void test_header_and_library_versions(void **state)
{
    (void)state;
    /* A consumer built against 1.0 runs with any 1.x: same major, and a
     * library at least as new as the header's ABI. */
    assert_int_equal(smoe_version_number() / 10000, SMOE_VERSION_MAJOR);
    assert_true(smoe_version_number() >= (unsigned)SMOE_VERSION_MAJOR * 10000);
    char want[32];
    snprintf(want, sizeof want, "%u.%u.%u", smoe_version_number() / 10000,
             smoe_version_number() / 100 % 100, smoe_version_number() % 100);
    assert_string_equal(smoe_version_string(), want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_old_open_opts_take_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_stats_filled_to_their_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_info_structs_filled_to_their_size, setup,
                                        teardown),
        cmocka_unit_test(test_header_and_library_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
