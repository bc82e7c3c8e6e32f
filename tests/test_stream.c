/*
 * Description: the streamer through the public API: slot state
 * transitions, retained re-claims that read zero bytes, LRU eviction of the
 * least recent idle slot, pinned and demanded slots never evicted (ring
 * full), demand served before speculation, speculative cap and upgrade,
 * failed reads reported by claim and retried by the next prefetch, release
 * and close misuse, shutdown waking waiters, option handling, and the page
 * cache left untouched by direct reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull

/* Every vault here is made from seed 42. */
static tu_fx *fx_new(uint32_t layers, uint32_t experts, uint64_t min_b, uint64_t max_b)
{
    return tu_fx_new(layers, experts, min_b, max_b, 42);
}

static smoe_stream *open_ring_ev(tu_fx *f, uint32_t slots, uint32_t workers,
                                 unsigned flags, uint32_t eviction)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.eviction = eviction;
    o.ring_slots = slots;
    o.workers = workers;
    o.flags = flags | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    int r = smoe_open(f->path, &o, &s);
    if (r != 0)
        fail_msg("smoe_open: %s: %s", smoe_err_name(r), smoe_last_error());
    return s;
}

static smoe_stream *open_ring(tu_fx *f, uint32_t slots, uint32_t workers, unsigned flags)
{
    return open_ring_ev(f, slots, workers, flags, SMOE_EVICT_DEFAULT);
}

/* The blob's bytes are what the test vault wrote for (layer, expert). */
static void check_blob(tu_fx *f, const smoe_blob *b)
{
    uint64_t n = synth_blob_size(f->seed, b->layer, b->expert, f->min_bytes, f->max_bytes);
    assert_int_equal(b->size, n);
    unsigned char *want = malloc(n);
    synth_blob_fill(want, n, f->seed, b->layer, b->expert);
    assert_memory_equal(b->data, want, n);
    free(want);
    assert_int_equal((uintptr_t)b->data % 16384, 0);
}

static void claim_release(smoe_stream *s, uint32_t l, uint32_t e, int expect)
{
    smoe_blob b;
    int r = smoe_claim_wait(s, l, e, 10 * SEC, &b);
    if (r != expect)
        fail_msg("claim_wait(%u,%u) = %s, want %s: %s", l, e, smoe_err_name(r),
                 smoe_err_name(expect), smoe_last_error());
    assert_int_equal(smoe_release(s, &b), 0);
}

static void transitions_and_retained_hit(void **state)
{
    (void)state;
    tu_fx *f = fx_new(2, 4, 20000, 70000);
    smoe_stream *s = open_ring(f, 8, 2, 0);
    smoe_blob b;

    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_ENOTRESIDENT); /* nobody asked */
    assert_int_equal(smoe_prefetch(s, 0, 1, 0), SMOE_QUEUED);
    int p = smoe_prefetch(s, 0, 1, 0);
    assert_true(p == SMOE_INFLIGHT || p == SMOE_RESIDENT); /* never a second read */
    assert_int_equal(smoe_claim_wait(s, 0, 1, 10 * SEC, &b), SMOE_READY);
    check_blob(f, &b);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.reads_done, 1);
    assert_int_equal(st.slots_referenced, 1);

    /* A second claim while held: another reference to the same bytes. */
    smoe_blob b2;
    assert_int_equal(smoe_claim(s, 0, 1, &b2), SMOE_HIT);
    assert_ptr_equal(b2.data, b.data);
    assert_int_equal(smoe_release(s, &b2), 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_release(s, &b), SMOE_EINVAL); /* double release */

    /* Retained: prefetch says resident, claim is a hit, nothing read. */
    uint64_t bytes = tu_stats(s).bytes_read;
    assert_int_equal(smoe_prefetch(s, 0, 1, 0), SMOE_RESIDENT);
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_HIT);
    check_blob(f, &b);
    assert_int_equal(smoe_release(s, &b), 0);
    st = tu_stats(s);
    assert_int_equal(st.bytes_read, bytes);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.claim_hits, 2);
    assert_int_equal(st.reads_done, 1);
    assert_int_equal(st.slots_retained, 1);

    assert_int_equal(smoe_prefetch(s, 2, 0, 0), SMOE_ENOENT);
    assert_int_equal(smoe_prefetch(s, 0, 4, 0), SMOE_ENOENT);
    assert_int_equal(smoe_claim(s, 9, 9, &b), SMOE_ENOENT);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

static void lru_evicts_least_recent_idle(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 8, 16384, 16384);
    smoe_stream *s = open_ring_ev(f, 4, 1, 0, SMOE_EVICT_LRU);
    for (uint32_t e = 0; e < 4; e++)
        claim_release(s, 0, e, SMOE_READY);
    claim_release(s, 0, 0, SMOE_HIT); /* 0 is now the most recent; 1 the least */
    assert_int_equal(smoe_prefetch(s, 0, 4, 0), SMOE_QUEUED);
    claim_release(s, 0, 4, SMOE_READY);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(tu_stats(s).evictions, 1);
    /* Next victim: 3 (0 and 2 were just used, 4 is fresh). */
    claim_release(s, 0, 5, SMOE_READY);
    assert_int_equal(smoe_claim(s, 0, 3, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

static void pinned_slots_never_evicted(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 6, 16384, 30000);
    smoe_stream *s = open_ring(f, 2, 1, 0);
    smoe_blob a, b;
    assert_int_equal(smoe_claim_wait(s, 0, 0, 10 * SEC, &a), SMOE_READY);
    assert_int_equal(smoe_claim_wait(s, 0, 1, 10 * SEC, &b), SMOE_READY);
    /* Both slots referenced: demand is refused, speculation skipped. */
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_EFULL);
    assert_int_equal(smoe_prefetch(s, 0, 2, SMOE_PREFETCH_SPECULATIVE), SMOE_SKIPPED);
    smoe_blob c;
    assert_int_equal(smoe_claim_wait(s, 0, 2, SEC, &c), SMOE_EFULL);
    check_blob(f, &a); /* untouched */
    check_blob(f, &b);
    smoe_stats st = tu_stats(s);
    assert_true(st.full >= 2);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(smoe_close(s), SMOE_EBUSY); /* references held */
    assert_int_equal(smoe_release(s, &a), 0);
    assert_int_equal(smoe_release(s, &b), 0);

    /* Demanded but unclaimed slots are pinned too: a demand for e2 must not
     * evict e1 of the same layer before e1 is claimed. */
    assert_int_equal(smoe_prefetch(s, 0, 3, 0), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 0, 4, 0), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 0, 5, 0), SMOE_EFULL);
    claim_release(s, 0, 3, SMOE_READY);
    claim_release(s, 0, 4, SMOE_READY);
    assert_int_equal(smoe_prefetch(s, 0, 5, 0), SMOE_QUEUED);
    claim_release(s, 0, 5, SMOE_READY);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/* Wait until no slot is loading. */
static void wait_loaded(smoe_stream *s)
{
    for (int i = 0; i < 20000 && tu_stats(s).slots_loading; i++)
        usleep(500);
    assert_int_equal(tu_stats(s).slots_loading, 0);
}

static void demand_before_speculation(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 16, 16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 16, 1, 0);
    smoe__vault *v = &s->vault;
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED); /* occupies the worker */
    tu_wait_holding(&fio.holding);
    uint32_t base = atomic_load(&fio.nlog);
    for (uint32_t e = 1; e <= 3; e++)
        assert_int_equal(smoe_prefetch(s, 0, e, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    for (uint32_t e = 4; e <= 6; e++)
        assert_int_equal(smoe_prefetch(s, 0, e, 0), SMOE_QUEUED);
    atomic_store(&fio.hold, 0);
    for (uint32_t e = 0; e <= 6; e++) {
        smoe_blob b;
        assert_true(smoe_claim_wait(s, 0, e, 10 * SEC, &b) >= 0);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    /* After the held read: the three demand reads, then the speculative. */
    assert_int_equal(atomic_load(&fio.nlog), base + 6);
    for (uint32_t i = 0; i < 6; i++) {
        uint64_t off = atomic_load(&fio.log[base + i]);
        uint32_t e = UINT32_MAX;
        for (uint32_t k = 0; k < 16; k++)
            if (v->index[k].offset == off)
                e = k;
        if (i < 3)
            assert_true(e >= 4 && e <= 6);
        else
            assert_true(e >= 1 && e <= 3);
    }
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void speculation_cap_and_upgrade(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 16, 16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 8;
    o.workers = 1;
    o.spec_share_pct = 25; /* 2 speculative reads in flight */
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 0, 1, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 0, 2, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 0, 3, SMOE_PREFETCH_SPECULATIVE), SMOE_SKIPPED);
    /* Demand for a queued speculative read: upgraded, not read twice. */
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_INFLIGHT);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.spec_queued, 2);
    assert_int_equal(st.spec_skipped, 1);
    assert_int_equal(st.spec_upgraded, 1);
    /* The upgrade freed a speculative unit. */
    assert_int_equal(smoe_prefetch(s, 0, 3, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    atomic_store(&fio.hold, 0);
    wait_loaded(s); /* a claim_wait now would upgrade 3 as well */
    claim_release(s, 0, 0, SMOE_READY);
    claim_release(s, 0, 2, SMOE_READY);
    claim_release(s, 0, 1, SMOE_READY);
    claim_release(s, 0, 3, SMOE_READY);
    st = tu_stats(s);
    assert_int_equal(st.reads_done, 4); /* 0, 1, 2, 3 once each */
    assert_int_equal(st.spec_used, 2);  /* 1 and 3 (2 became demand) */
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void demand_cancels_queued_speculation(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 8, 16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 3;
    o.workers = 1;
    o.spec_share_pct = 100;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 0, 1, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 0, 2, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    /* Ring full of one demand read and two queued speculative reads:
     * speculation cannot cancel speculation, demand can. */
    assert_int_equal(smoe_prefetch(s, 0, 3, SMOE_PREFETCH_SPECULATIVE), SMOE_SKIPPED);
    assert_int_equal(smoe_prefetch(s, 0, 4, 0), SMOE_QUEUED);
    atomic_store(&fio.hold, 0);
    claim_release(s, 0, 0, SMOE_READY);
    claim_release(s, 0, 4, SMOE_READY);
    claim_release(s, 0, 2, SMOE_READY); /* the other speculative read landed */
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_ENOTRESIDENT);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.spec_cancelled, 1);
    assert_int_equal(st.reads_done, 3); /* the cancelled read never happened */
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void failed_read_reaches_claim(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 16384, 40000);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 4, 2, 0);
    fio.err = EIO;
    fio.offset = s->vault.index[2].offset;
    fio.call = FIO_PREAD;
    fio.mode = FIO_FAIL_OFFSET;
    smoe_blob b;
    assert_int_equal(smoe_claim_wait(s, 0, 2, 10 * SEC, &b), SMOE_EIO);
    assert_int_equal(b.held, 0);
    /* The error stays until a prefetch retries. */
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_EIO);
    assert_int_equal(smoe_claim_wait(s, 0, 2, 10 * SEC, &b), SMOE_EIO);
    assert_int_equal(tu_stats(s).slots_failed, 1);
    fio.mode = FIO_OFF;
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_QUEUED);
    assert_int_equal(smoe_claim_wait(s, 0, 2, 10 * SEC, &b), SMOE_READY);
    check_blob(f, &b);
    assert_int_equal(smoe_release(s, &b), 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.reads_failed, 1);
    assert_int_equal(st.slots_failed, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* A demand read that failed and whose error was claimed does not keep its
 * slot pinned: with every slot holding a reported failure, the next demand
 * still finds room (FAILED slots are the first choice of eviction). */
static void claimed_failures_free_their_slots(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 6, 16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 2, 1, 0);
    fault_io_arm(&fio, FIO_FAIL_FROM, FIO_PREAD, 1, EIO, 0);
    smoe_blob b;
    assert_int_equal(smoe_claim_wait(s, 0, 0, 10 * SEC, &b), SMOE_EIO);
    assert_int_equal(smoe_claim_wait(s, 0, 1, 10 * SEC, &b), SMOE_EIO);
    assert_int_equal(tu_stats(s).slots_failed, 2);
    fault_io_disarm(&fio);
    assert_int_equal(smoe_claim_wait(s, 0, 2, 10 * SEC, &b), SMOE_READY);
    check_blob(f, &b);
    assert_int_equal(smoe_release(s, &b), 0);
    /* Expert 2 took the least recent failure's slot (expert 0); the other
     * failure is still reported, until a demand prefetch retries it. */
    assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_EIO);
    assert_int_equal(smoe_prefetch(s, 0, 1, 0), SMOE_QUEUED);
    claim_release(s, 0, 1, SMOE_READY);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void truncated_after_open_fails_claim(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 16384, 16384);
    smoe_stream *s = open_ring(f, 4, 1, 0);
    uint64_t off3 = s->vault.index[3].offset;
    assert_int_equal(truncate(f->path, (off_t)off3), 0);
    smoe_blob b;
    assert_int_equal(smoe_claim_wait(s, 0, 3, 10 * SEC, &b), SMOE_ETRUNC);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

struct waiter {
    smoe_stream *s;
    uint32_t expert;
    int result;
};

static void *wait_thread(void *p)
{
    struct waiter *w = p;
    smoe_blob b;
    w->result = smoe_claim_wait(w->s, 0, w->expert, UINT64_MAX, &b);
    if (w->result >= 0)
        smoe_release(w->s, &b);
    return NULL;
}

static void shutdown_wakes_waiters(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_ring(f, 4, 1, 0);
    atomic_store(&fio.hold, 1);
    pthread_t th[3];
    struct waiter w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct waiter){s, (uint32_t)i, 1};
        pthread_create(&th[i], NULL, wait_thread, &w[i]);
    }
    tu_wait_holding(&fio.holding);
    usleep(20000); /* let the others park */
    assert_int_equal(smoe_shutdown(s), 0);
    assert_int_equal(smoe_shutdown(s), 0); /* idempotent */
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].result, SMOE_ESHUTDOWN);
    }
    smoe_blob b;
    assert_int_equal(smoe_prefetch(s, 0, 3, 0), SMOE_ESHUTDOWN);
    assert_int_equal(smoe_claim(s, 0, 3, &b), SMOE_ESHUTDOWN);
    atomic_store(&fio.hold, 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void options_and_misuse(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 2, 16384, 50000);
    smoe_open_opts o;
    smoe_open_opts_init(&o);
    smoe_open_opts m = SMOE_OPEN_OPTS_INIT;
    assert_memory_equal(&o, &m, sizeof o); /* macro and function agree */
    smoe_stream *s = (smoe_stream *)1;

    o.slot_bytes = 16384; /* smaller than the largest (padded 65536) blob */
    assert_int_equal(smoe_open(f->path, &o, &s), SMOE_ESLOTSIZE);
    assert_null(s);
    assert_non_null(strstr(smoe_last_error(), "slot size 16384 bytes is smaller than the largest blob"));
    smoe_open_opts_init(&o);
    o.flags = 1u << 30;
    assert_int_equal(smoe_open(f->path, &o, &s), SMOE_EINVAL);
    smoe_open_opts_init(&o);
    o.struct_size = 3;
    assert_int_equal(smoe_open(f->path, &o, &s), SMOE_EINVAL);
    assert_int_equal(smoe_open("/nonexistent/v.smoe", NULL, &s), SMOE_ESYS);
    assert_int_equal(smoe_close(NULL), 0);

    /* An older, smaller options struct: the rest takes defaults. */
    smoe_open_opts_init(&o);
    o.ring_slots = 5;
    o.workers = 3;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    o.struct_size = offsetof(smoe_open_opts, verify);
    o.verify = 77; /* beyond struct_size: ignored */
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    smoe_stats st = SMOE_STATS_INIT;
    st.struct_size = offsetof(smoe_stats, hits); /* older, smaller stats */
    st.hits = 12345;
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.prefetch_demand, 1);
    assert_int_equal(st.hits, 12345); /* not written past struct_size */
    st = tu_stats(s);
    assert_int_equal(st.slots, 5);
    assert_int_equal(st.workers, 3);
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    assert_int_equal(smoe_vault_info_get(s, &vi), 0);
    assert_int_equal(vi.layers, 1);
    assert_int_equal(vi.experts, 2);
    assert_int_equal(st.slot_bytes, vi.max_padded);

    smoe_ring_region rr = SMOE_RING_REGION_INIT;
    assert_int_equal(smoe_ring_region_get(s, &rr), 0);
    assert_int_equal((uintptr_t)rr.base % 16384, 0);
    assert_int_equal(rr.length, 5 * vi.max_padded);
    assert_int_equal(rr.slot_stride, vi.max_padded);
    smoe_blob b;
    assert_int_equal(smoe_claim_wait(s, 0, 0, 10 * SEC, &b), SMOE_READY);
    assert_ptr_equal((const char *)rr.base + b.ring_offset, b.data);
    smoe_component c;
    assert_true(smoe_layout_count(s, b.layout) >= 1);
    assert_int_equal(smoe_layout_component(s, b.layout, 0, &c), 0);
    assert_int_equal(smoe_layout_find(s, b.layout, c.name, &c), 0);
    assert_int_equal(smoe_layout_find(s, b.layout, "no such", &c), SMOE_ENOENT);
    smoe_blob forged = b;
    forged.gen ^= 1;
    assert_int_equal(smoe_release(s, &forged), SMOE_EINVAL);
    assert_int_equal(smoe_release(s, &b), 0);
    memset(&b, 0, sizeof b);
    assert_int_equal(smoe_release(s, &b), SMOE_EINVAL); /* never claimed */
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/* A file system that refuses O_DIRECT at open, or accepts it at open and
 * refuses the first read (both exist): a clear error, or buffered reads
 * when the caller allows them. */
static void direct_io_refused(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 2, 16384, 16384);
    struct fault_io fio;
    for (int how = 1; how <= 2; how++) {
        fault_io_install(&fio);
        fio.refuse_direct = how;
        smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
        o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
        o.ring_slots = 2;
        o.workers = 2;
        smoe_stream *s;
        assert_int_equal(smoe_open(f->path, &o, &s), SMOE_EDIRECTIO);
        assert_non_null(strstr(smoe_last_error(), f->path));
        assert_non_null(strstr(smoe_last_error(), "SMOE_OPEN_ALLOW_BUFFERED"));
        o.flags |= SMOE_OPEN_ALLOW_BUFFERED;
        assert_int_equal(smoe_open(f->path, &o, &s), 0);
        assert_int_equal(tu_stats(s).io_mode, SMOE_IO_BUFFERED);
        claim_release(s, 0, 1, SMOE_READY);
        assert_int_equal(smoe_close(s), 0);
        fault_io_remove();
    }
    tu_fx_free(f);
}

/* Index of the expert whose blob holds file offset off (1 layer). */
static uint32_t expert_at(smoe_stream *s, uint64_t off)
{
    for (uint32_t e = 0; e < s->vault.experts; e++) {
        const smoe__vault_entry *ve = &s->vault.index[e];
        if (off >= ve->offset && off < ve->offset + ve->padded)
            return e;
    }
    return UINT32_MAX;
}

static smoe_stream *open_chunked(tu_fx *f, uint32_t slots, uint32_t workers, uint32_t chunk)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = slots;
    o.workers = workers;
    o.chunk_bytes = chunk;
    o.spec_chunk_bytes = chunk;
    o.spec_share_pct = 100;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    int r = smoe_open(f->path, &o, &s);
    if (r)
        fail_msg("smoe_open: %s", smoe_last_error());
    return s;
}

/* A demand blob's chunks are read by several workers, each chunk once. */
static void chunks_spread_over_workers(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 8 * 16384, 8 * 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    fio.delay_us = 5000; /* keep each worker busy long enough for others to join */
    smoe_stream *s = open_chunked(f, 4, 4, 16384);
    const uint32_t base = atomic_load(&fio.nlog);
    claim_release(s, 0, 1, SMOE_READY);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.chunk_bytes, 16384);
    assert_int_equal(st.spec_chunk_bytes, 16384);
    assert_int_equal(st.chunks_read, 8);
    assert_int_equal(st.reads_done, 1);
    assert_int_equal(st.bytes_read, 8 * 16384);
    uint32_t n = atomic_load(&fio.nlog), threads = 0;
    assert_int_equal(n - base, 8);
    for (uint32_t i = base; i < n; i++) {
        int seen = 0;
        for (uint32_t j = base; j < i; j++)
            seen |= atomic_load(&fio.log_thread[j]) == atomic_load(&fio.log_thread[i]);
        threads += !seen;
    }
    assert_true(threads >= 2);
    assert_int_equal(st.ready_demand, 1);
    assert_true(st.ready_demand_p50_ns > 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* Demand and speculative reads use their own chunk sizes; defaults are
 * clamped to the slot. */
static void chunk_sizes_by_kind(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 4 * 16384, 4 * 16384);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 4;
    o.workers = 2;
    o.chunk_bytes = 4 * 16384;
    o.spec_chunk_bytes = 16384;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    claim_release(s, 0, 0, SMOE_READY);
    assert_int_equal(tu_stats(s).chunks_read, 1); /* demand: one 64 KiB chunk */
    assert_int_equal(smoe_prefetch(s, 0, 1, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    wait_loaded(s);
    assert_int_equal(tu_stats(s).chunks_read, 5); /* speculative: four 16 KiB chunks */
    claim_release(s, 0, 1, SMOE_READY);
    assert_int_equal(smoe_close(s), 0);
    o.chunk_bytes = o.spec_chunk_bytes = 0; /* defaults: 4 MiB and 512 KiB */
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.chunk_bytes, 4 * 16384); /* no larger than a slot */
    assert_int_equal(st.spec_chunk_bytes, 4 * 16384);
    assert_int_equal(smoe_close(s), 0);
    o.spec_chunk_bytes = 1000;
    assert_int_equal(smoe_open(f->path, &o, &s), SMOE_EINVAL);
    tu_fx_free(f);
}

/* With one worker busy on a speculative blob, a demand blob queued later
 * is read at the next chunk boundary, before the rest of the speculation. */
static void demand_overtakes_speculation_between_chunks(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 6 * 16384, 6 * 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_chunked(f, 4, 1, 16384);
    const uint32_t base = atomic_load(&fio.nlog); /* the reads of smoe_open */
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    tu_wait_holding(&fio.holding); /* the worker is inside chunk 0 of expert 0 */
    assert_int_equal(smoe_prefetch(s, 0, 2, 0), SMOE_QUEUED);
    atomic_store(&fio.hold, 0);
    claim_release(s, 0, 2, SMOE_READY);
    wait_loaded(s);
    assert_int_equal(atomic_load(&fio.nlog) - base, 12);
    assert_int_equal(expert_at(s, atomic_load(&fio.log[base])), 0);
    for (uint32_t i = 1; i <= 6; i++)
        assert_int_equal(expert_at(s, atomic_load(&fio.log[base + i])), 2);
    for (uint32_t i = 7; i < 12; i++)
        assert_int_equal(expert_at(s, atomic_load(&fio.log[base + i])), 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

static void cancel_queued_speculation(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 16384, 16384);
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = open_chunked(f, 4, 1, 16384);
    atomic_store(&fio.hold, 1);
    assert_int_equal(smoe_prefetch(s, 0, 0, 0), SMOE_QUEUED);
    tu_wait_holding(&fio.holding);
    assert_int_equal(smoe_prefetch(s, 0, 1, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_prefetch(s, 0, 2, SMOE_PREFETCH_SPECULATIVE), SMOE_QUEUED);
    assert_int_equal(smoe_cancel(s, 0, 1), 0);
    assert_int_equal(smoe_cancel(s, 0, 1), SMOE_ENOTRESIDENT); /* nothing queued now */
    assert_int_equal(smoe_cancel(s, 0, 0), SMOE_EBUSY);        /* demand, started */
    assert_int_equal(smoe_cancel(s, 0, 3), SMOE_ENOTRESIDENT); /* never asked for */
    assert_int_equal(smoe_cancel(s, 9, 0), SMOE_ENOENT);
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_ENOTRESIDENT);
    atomic_store(&fio.hold, 0);
    claim_release(s, 0, 0, SMOE_READY);
    wait_loaded(s);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.spec_cancelled, 1);
    assert_int_equal(st.reads_done, 2); /* 0 and 2: the cancelled read never ran */
    assert_int_equal(st.slots_empty, 2);
    assert_int_equal(smoe_cancel(s, 0, 2), SMOE_ENOTRESIDENT); /* READY: not queued */
    /* The cancelled expert can be asked for again. */
    claim_release(s, 0, 1, SMOE_READY);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* SMOE_OPEN_SHAREABLE: the ring's descriptor maps the bytes a claim gives. */
static void ring_shareable(void **state)
{
    (void)state;
    tu_fx *f = fx_new(1, 4, 16384, 50000);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 3;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    smoe_ring_region rr = SMOE_RING_REGION_INIT;
    assert_int_equal(smoe_ring_region_get(s, &rr), 0);
    assert_int_equal(rr.fd, -1); /* not shareable unless asked */
    assert_int_equal(smoe_close(s), 0);

    o.flags |= SMOE_OPEN_SHAREABLE;
    int r = smoe_open(f->path, &o, &s);
    if (r == SMOE_ENOTSUP) { /* no memory file on this system (Windows) */
        tu_fx_free(f);
        skip();
    }
    assert_int_equal(r, 0);
    assert_int_equal(smoe_ring_region_get(s, &rr), 0);
    assert_true(rr.fd >= 0);
    assert_int_equal(rr.fd_offset % 16384, 0);
    assert_true(fcntl(rr.fd, F_GETFD) & FD_CLOEXEC);
    struct stat sb;
    assert_int_equal(fstat(rr.fd, &sb), 0);
    assert_true((uint64_t)sb.st_size >= rr.fd_offset + rr.length);

    /* A 1.0 caller's smaller struct: nothing written past it. */
    smoe_ring_region old = SMOE_RING_REGION_INIT;
    old.struct_size = offsetof(smoe_ring_region, fd);
    old.fd = 12345;
    assert_int_equal(smoe_ring_region_get(s, &old), 0);
    assert_int_equal(old.fd, 12345);
    assert_ptr_equal(old.base, rr.base);

    void *maps[3];
    smoe_blob b[3];
    for (uint32_t e = 0; e < 3; e++) {
        assert_int_equal(smoe_claim_wait(s, 0, e, 10 * SEC, &b[e]), SMOE_READY);
        assert_int_equal(b[e].ring_offset % 16384, 0);
        maps[e] = mmap(NULL, b[e].size, PROT_READ, MAP_SHARED, rr.fd,
                       (off_t)(rr.fd_offset + b[e].ring_offset));
        assert_true(maps[e] != MAP_FAILED);
        assert_ptr_not_equal(maps[e], b[e].data);
        assert_memory_equal(maps[e], b[e].data, b[e].size);
    }
    const uint8_t *view = mmap(NULL, rr.length, PROT_READ, MAP_SHARED, rr.fd,
                               (off_t)rr.fd_offset);
    assert_true(view != MAP_FAILED);
    for (uint32_t e = 0; e < 3; e++)
        assert_int_equal(smoe_release(s, &b[e]), 0);
    /* The same pages, not a copy: expert 3 evicts one of the three, and a
     * mapping made before shows it (why a caller unmaps before release). */
    smoe_blob b3;
    assert_int_equal(smoe_claim_wait(s, 0, 3, 10 * SEC, &b3), SMOE_READY);
    assert_memory_equal(view + b3.ring_offset, b3.data, b3.size);
    uint32_t i = 0;
    while (i < 3 && b[i].ring_offset != b3.ring_offset)
        i++;
    assert_true(i < 3); /* a ring of three slots: one was evicted */
    assert_memory_equal(maps[i], b3.data, b3.size < b[i].size ? b3.size : b[i].size);
    assert_int_equal(smoe_release(s, &b3), 0);
    munmap((void *)view, rr.length);
    for (uint32_t e = 0; e < 3; e++)
        munmap(maps[e], b[e].size);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

/* Pages of the file in the page cache. */
static void page_cache_untouched(void **state)
{
    (void)state;
    tu_fx *f = fx_new(2, 16, 16384, 200000);
    int fd = open(f->path, O_RDONLY);
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
    size_t before = tu_cached_pages(f->path);
    smoe_stream *s = open_ring(f, 4, 2, 0);
    if (tu_stats(s).io_mode != SMOE_IO_DIRECT) {
        smoe_close(s);
        tu_fx_free(f);
        skip(); /* this file system has no direct I/O */
    }
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 16; e++)
            claim_release(s, l, e, SMOE_READY);
    assert_int_equal(smoe_close(s), 0);
    size_t after = tu_cached_pages(f->path);
    if (after > before)
        fail_msg("page cache grew from %zu to %zu pages", before, after);
    tu_fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transitions_and_retained_hit),
        cmocka_unit_test(lru_evicts_least_recent_idle),
        cmocka_unit_test(pinned_slots_never_evicted),
        cmocka_unit_test(demand_before_speculation),
        cmocka_unit_test(speculation_cap_and_upgrade),
        cmocka_unit_test(demand_cancels_queued_speculation),
        cmocka_unit_test(failed_read_reaches_claim),
        cmocka_unit_test(claimed_failures_free_their_slots),
        cmocka_unit_test(truncated_after_open_fails_claim),
        cmocka_unit_test(shutdown_wakes_waiters),
        cmocka_unit_test(options_and_misuse),
        cmocka_unit_test(direct_io_refused),
        cmocka_unit_test(chunks_spread_over_workers),
        cmocka_unit_test(chunk_sizes_by_kind),
        cmocka_unit_test(demand_overtakes_speculation_between_chunks),
        cmocka_unit_test(cancel_queued_speculation),
        cmocka_unit_test(ring_shareable),
        cmocka_unit_test(page_cache_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
