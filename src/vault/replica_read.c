/*
 * replica_read.c - a chunk's read from one copy of the vault, or from the
 * next one when it fails (replica.h).
 *
 * What a copy delivers is learned as bytes over busy time: the time during
 * which it had at least one read in flight (each start and end of a read
 * adds the time since the copy's previous such event, if reads were in
 * flight then), per window of SMOE__REPLICA_WINDOW_NS busy, averaged over
 * windows. This is the drive's throughput at the depth it is given, which
 * a single read's latency is not (a drive serves reads in parallel).
 *
 * Choice: one more read on a copy costs (its bytes in flight + the read's)
 * x its time per byte: when its queue would drain. The cheapest copy in
 * use that this chunk has not tried is taken, so every copy has work while
 * reads are queued, and a copy that delivers less gets fewer. A copy with
 * nothing learned costs 0, so each is tried early; ties go to copies in
 * turn from the worker's id. Copies set aside
 * take a read only when every copy in use failed the chunk, or, one read
 * at a time, once their retry time has come (a probe).
 *
 * Every field here is a hint or a counter: relaxed atomics, no lock. Two
 * workers may race on a copy's state (one sets it aside while another's
 * read on it succeeds); either outcome is safe, since a copy's state only
 * steers where reads go, and a chunk's bytes come from a read that
 * succeeded.
 */
#include <string.h>

#include "error.h"
#include "internal.h"
#include "log.h"
#include "vault/replica.h"
#include "platform/park.h"

#define RELAXED memory_order_relaxed

/* Copy c's probe, if its retry time has come: one reader wins it, and the
 * next probe waits another retry_ns. */
static int probe_due(smoe__replica *c, uint64_t t, uint64_t retry_ns)
{
    /* relaxed: a hint; the CAS makes one reader the prober */
    uint64_t until = atomic_load_explicit(&c->aside_until, RELAXED);
    return until && t >= until &&
           atomic_compare_exchange_strong_explicit(&c->aside_until, &until, t + retry_ns,
                                                   RELAXED, RELAXED);
}

/* The copy the next try of a chunk goes to; tried: bits of those done. */
static uint32_t pick(struct smoe_stream *s, uint32_t start, uint32_t tried, uint64_t n,
                     uint64_t t)
{
    uint32_t best = UINT32_MAX, aside = UINT32_MAX;
    uint64_t best_cost = UINT64_MAX;
    for (uint32_t j = 0; j < s->rep.n; j++) {
        uint32_t i = (start + j) % s->rep.n;
        smoe__replica *c = &s->rep.r[i];
        if (tried & (1u << i))
            continue;
        /* relaxed: hints (file comment) */
        if (atomic_load_explicit(&c->aside_until, RELAXED)) {
            if (probe_due(c, t, s->rep.retry_ns))
                return i;
            if (aside == UINT32_MAX)
                aside = i;
            continue;
        }
        uint64_t q = (atomic_load_explicit(&c->inflight_bytes, RELAXED) + n) >> 14;
        uint64_t cost = q * atomic_load_explicit(&c->ns_per_mib, RELAXED);
        if (cost < best_cost) {
            best_cost = cost;
            best = i;
        }
    }
    return best != UINT32_MAX ? best : aside;
}

/* A read of n bytes starts (n > 0) or ends (bytes: what it delivered) on
 * copy c at time t: its busy time, and a throughput sample per window. */
static void busy_event(smoe__replica *c, uint64_t t, int start, uint64_t n, uint64_t bytes)
{
    /* relaxed: hints (file comment). Each interval between two events is
     * taken by exactly one of them (the exchange); the depth it sees may be
     * one read off, which shifts an interval's edge, not the sum much. */
    uint32_t q = start ? atomic_fetch_add_explicit(&c->inflight, 1, RELAXED)
                       : atomic_fetch_sub_explicit(&c->inflight, 1, RELAXED);
    if (start)
        atomic_fetch_add_explicit(&c->inflight_bytes, n, RELAXED);
    else
        atomic_fetch_sub_explicit(&c->inflight_bytes, n, RELAXED);
    uint64_t prev = atomic_exchange_explicit(&c->last_event, t, RELAXED);
    uint64_t busy = q > 0 && t > prev ? t - prev : 0;
    if (!start && bytes == 0) {
        /* a failed read: time spent failing says nothing of the rate */
        atomic_store_explicit(&c->win_ns, 0, RELAXED);
        atomic_store_explicit(&c->win_bytes, 0, RELAXED);
        return;
    }
    uint64_t w_ns = atomic_fetch_add_explicit(&c->win_ns, busy, RELAXED) + busy;
    uint64_t w_b = atomic_fetch_add_explicit(&c->win_bytes, bytes, RELAXED) + bytes;
    if (w_ns < SMOE__REPLICA_WINDOW_NS || w_b == 0)
        return;
    /* the window is full: whoever empties it takes the sample */
    w_ns = atomic_exchange_explicit(&c->win_ns, 0, RELAXED);
    w_b = atomic_exchange_explicit(&c->win_bytes, 0, RELAXED);
    if (w_ns == 0 || w_b == 0)
        return;
    uint64_t x = (uint64_t)((double)w_ns * (double)(1u << 20) / (double)w_b);
    x = x ? x : 1;
    uint64_t old = atomic_load_explicit(&c->ns_per_mib, RELAXED);
    atomic_store_explicit(&c->ns_per_mib, old ? old - old / 4 + x / 4 : x, RELAXED);
}

/* A read of `bytes` on copy i returned them. */
static void counted(smoe__replica *c, uint64_t bytes)
{
    /* relaxed: counters and hints (file comment) */
    atomic_fetch_add_explicit(&c->reads, 1, RELAXED);
    atomic_fetch_add_explicit(&c->bytes, bytes, RELAXED);
    atomic_store_explicit(&c->streak, 0, RELAXED);
}

/* Copy i, if set aside, is back in use: `why` it is. */
static void back_in_use(struct smoe_stream *s, uint32_t i, const char *why)
{
    smoe__replica *c = &s->rep.r[i];
    /* relaxed: a hint (file comment); the exchange makes one caller log */
    if (atomic_load_explicit(&c->aside_until, RELAXED) &&
        atomic_exchange_explicit(&c->aside_until, 0, RELAXED))
        smoe__log(s, SMOE_LOG_INFO, "replica %u (%s) is back in use: %s", i,
                  i ? c->path : s->vault.path, why);
}

/* A read of `bytes` on copy i succeeded; probe: it was set aside when the
 * read was given to it (a probe, or every copy in use had failed). Only
 * such a read puts it back in use: one that was in flight when the copy
 * was set aside says nothing new (a copy set aside for wrong bytes reads
 * well). */
static void succeeded(struct smoe_stream *s, uint32_t i, uint64_t bytes, int probe)
{
    counted(&s->rep.r[i], bytes);
    if (probe)
        back_in_use(s, i, "a read succeeded");
}

/* Set copy i aside at time t, unless it is already (a probe failed): 1 if
 * this call did, to log it. */
static int set_aside(struct smoe_stream *s, uint32_t i, uint64_t t)
{
    smoe__replica *c = &s->rep.r[i];
    /* relaxed: counters and hints (file comment) */
    if (atomic_exchange_explicit(&c->aside_until, t + s->rep.retry_ns, RELAXED))
        return 0;
    atomic_fetch_add_explicit(&c->set_aside, 1, RELAXED);
    return 1;
}

/* A read on copy i failed at time t; set it aside after a streak. */
static void failed(struct smoe_stream *s, uint32_t i, uint64_t t, const smoe__io_fail *why,
                   int err)
{
    smoe__replica *c = &s->rep.r[i];
    /* relaxed: counters and hints (file comment) */
    atomic_fetch_add_explicit(&c->failed, 1, RELAXED);
    uint32_t streak = atomic_fetch_add_explicit(&c->streak, 1, RELAXED) + 1;
    if (streak < SMOE__REPLICA_STREAK || !set_aside(s, i, t))
        return;
    smoe__log(s, SMOE_LOG_WARN, "replica %u (%s) set aside after %u failed reads in a row "
              "(the last: %s, %s at offset %llu); tried again in %llu ms", i,
              i ? c->path : s->vault.path, streak, smoe_err_name(err),
              why->eno ? strerror(why->eno) : "no errno", (unsigned long long)why->off,
              (unsigned long long)(s->rep.retry_ns / 1000000));
}

void smoe__replica_checked(struct smoe_stream *s, uint32_t i, int ok, uint64_t off)
{
    smoe__replica *c = &s->rep.r[i];
    /* relaxed: counters and hints (file comment). The streak of checksum
     * failures is apart from the read streak, which each read that returns
     * bytes clears: a copy whose reads succeed with wrong bytes must still
     * reach it. Only a blob of its own that passes clears it. */
    if (ok) {
        atomic_store_explicit(&c->sum_streak, 0, RELAXED);
        back_in_use(s, i, "a blob read from it alone passed its checksum");
        return;
    }
    atomic_fetch_add_explicit(&c->failed, 1, RELAXED);
    uint32_t streak = atomic_fetch_add_explicit(&c->sum_streak, 1, RELAXED) + 1;
    if (streak < SMOE__REPLICA_STREAK || !set_aside(s, i, smoe__now_ns()))
        return;
    smoe__log(s, SMOE_LOG_WARN, "replica %u (%s) set aside after %u blobs in a row failed "
              "their checksum when read from it alone (the last at offset %llu); tried "
              "again in %llu ms", i, i ? c->path : s->vault.path, streak,
              (unsigned long long)off, (unsigned long long)(s->rep.retry_ns / 1000000));
}

/* A sequential run's own copy (smoe__replica_read), if it is in use. */
static uint32_t own_copy(struct smoe_stream *s, const smoe__worker *wk)
{
    uint32_t i = wk->id % s->rep.n;
    /* relaxed: a hint (file comment) */
    return atomic_load_explicit(&s->rep.r[i].aside_until, RELAXED) ? UINT32_MAX : i;
}

int smoe__replica_read(struct smoe_stream *s, const smoe__worker *wk, void *buf, uint64_t n,
                       uint64_t off, int sequential, smoe__io_fail *why)
{
    uint32_t tried = 0;
    int err = SMOE_EIO;
    for (uint32_t k = 0; k < s->rep.n; k++) {
        uint64_t t0 = smoe__now_ns();
        uint32_t i = k == 0 && sequential ? own_copy(s, wk) : UINT32_MAX;
        if (i == UINT32_MAX)
            i = pick(s, wk->id, tried, n, t0);
        tried |= 1u << i;
        smoe__replica *c = &s->rep.r[i];
        /* relaxed: a hint (file comment) */
        const int probe = atomic_load_explicit(&c->aside_until, RELAXED) != 0;
        busy_event(c, t0, 1, n, 0);
        err = smoe__io_read_full_ex(s->io, c->fd[wk->id], buf, (size_t)n, off,
                                    c->align[wk->id], &s->stop, why);
        uint64_t t1 = smoe__now_ns();
        busy_event(c, t1, 0, n, err ? 0 : n);
        if (err == 0) {
            succeeded(s, i, n, probe);
            return 0;
        }
        if (err == SMOE_ESHUTDOWN)
            return err;
        why->copy = 1u << i;
        failed(s, i, t1, why, err);
    }
    return err;
}

int smoe__replica_read_copy(struct smoe_stream *s, const smoe__worker *wk, uint32_t i,
                            void *buf, uint64_t n, uint64_t off, smoe__io_fail *why)
{
    smoe__replica *c = &s->rep.r[i];
    busy_event(c, smoe__now_ns(), 1, n, 0);
    int err = smoe__io_read_full_ex(s->io, c->fd[wk->id], buf, (size_t)n, off,
                                    c->align[wk->id], &s->stop, why);
    uint64_t t1 = smoe__now_ns();
    busy_event(c, t1, 0, n, err ? 0 : n);
    /* A read that returns bytes leaves a copy set aside where it is: the
     * check of those bytes decides (smoe__replica_checked). */
    if (err == 0)
        counted(c, n);
    else if (err != SMOE_ESHUTDOWN)
        failed(s, i, t1, why, err);
    why->copy = 1u << i;
    return err;
}

void smoe__replica_count(struct smoe_stream *s, uint64_t bytes, int failed)
{
    /* relaxed: counters */
    atomic_fetch_add_explicit(failed ? &s->rep.r[0].failed : &s->rep.r[0].reads, 1, RELAXED);
    atomic_fetch_add_explicit(&s->rep.r[0].bytes, failed ? 0 : bytes, RELAXED);
}
