/*
 * worker.c - the streamer's I/O threads.
 *
 * Each worker owns one descriptor of a packed vault (direct I/O is
 * serialised per descriptor on some systems; one each gives the drive its
 * full queue depth); an index vault's are per source file, opened in
 * smoe_open (source.c), and a chunk's read goes through extent.c. A blob is read in chunks: arming a load queues one token per
 * chunk, so a demand blob spreads over every idle worker at once. Loop:
 * pop a token from the demand queue, and only when it is empty from the
 * speculative one, so demand waits at most one chunk of lower-priority
 * work per worker; mark the slot STARTED (which also drops tokens of a
 * cancelled or stale load); take the next chunk of the load (a CAS on the
 * slot's chunk_next, which names the arming by gen and attempt and carries
 * the chunk size, so each chunk of an arming is read exactly once, in the
 * size it was armed with, whatever the number and age of the tokens: see
 * slot.h); read it; count it down. The worker that lands the last chunk
 * verifies the blob if asked and publishes READY or FAILED with a release
 * CAS. A worker pops a token and then returns one unit of its queue's
 * room (prefetch.c reserves room before it queues, so a push never finds
 * a queue full and nobody waits for room).
 *
 * Parking: an idle worker registers in `idle`, reads work_seq, checks the
 * queues once more and futex-waits on work_seq. A producer pushes, bumps
 * work_seq and wakes one worker if any is idle. Both sides use seq_cst on
 * idle and work_seq, so either the producer sees the idle count or the
 * worker sees the new work_seq (and the kernel refuses to sleep on a
 * stale value): no lost wake-up, no mutex, no condition variable.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "dio.h"
#include "error.h"
#include "extent.h"
#include "internal.h"
#include "park.h"

void smoe__workers_notify(struct smoe_stream *s, int n)
{
    atomic_fetch_add(&s->work_seq, 1);
    if (atomic_load(&s->idle) > 0) {
        smoe__park_wake(&s->work_seq, n);
        SMOE__COUNT(s, c_worker_wakes, 1);
    }
}

void smoe__slot_publish(struct smoe_stream *s, uint32_t v, int err)
{
    _Atomic uint64_t *word = &s->ring.word[v];
    if (err)
        /* relaxed: published by the release CAS below; claimers read it
         * after their acquire load of the word */
        atomic_store_explicit(&s->ring.err[v], err, memory_order_relaxed);
    /* relaxed: the CAS below re-checks */
    uint64_t w = atomic_load_explicit(word, memory_order_relaxed), nw;
    do {
        nw = (w & ~(SMOE__W_STATE_MASK | SMOE__W_STARTED | SMOE__W_WAITERS)) |
             (err ? SMOE__FAILED : SMOE__READY);
        /* release: pairs with the claimer's acquire load/CAS of the word,
         * making the bytes we read (or the error) visible with READY */
    } while (!atomic_compare_exchange_weak_explicit(word, &w, nw, memory_order_release,
                                                    memory_order_relaxed));
    if ((w & SMOE__W_SPEC) && !(w & SMOE__W_PREWARM) && smoe__w_pins(w) == 0)
        smoe__spec_put(s);
    smoe__touch(s, v); /* freshly loaded: a fresh tick */
    if (w & SMOE__W_WAITERS)
        smoe__park_wake(smoe__low32(word), INT_MAX);
}

void smoe__load_tokens(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t n, int demand)
{
    smoe__mpmc *q = demand ? &s->demand_q : &s->spec_q;
    const smoe__req rq = {v, gen};
    /* Cannot fail: the caller reserved room for n (mpmc.h, "Reservations") */
    for (uint32_t i = 0; i < n; i++)
        smoe__mpmc_push(q, rq);
    smoe__workers_notify(s, (int)n);
}

void smoe__load_start(struct smoe_stream *s, uint32_t v, uint32_t gen, uint32_t key,
                      int demand)
{
    const uint32_t n = smoe__load_chunks(s, key, demand);
    /* This arming's attempt: one more than the last arming's if that was of
     * the same gen (a retry of a failed read), else 0. relaxed: nobody else
     * writes chunk_next while the slot is reserved (STARTED) and not armed:
     * the last arming's chunks were all taken before it was published (or
     * none was, if it was cancelled), and the CAS that reserved the slot
     * read the word that publication or cancellation wrote. */
    uint64_t prev = atomic_load_explicit(&s->ring.chunk_next[v], memory_order_relaxed);
    uint32_t attempt = smoe__cn_gen(prev) == gen ? smoe__cn_attempt(prev) + 1 : 0;
    /* relaxed: published by the release store of chunk_next below */
    atomic_store_explicit(&s->ring.err[v], 0, memory_order_relaxed);
    atomic_store_explicit(&s->ring.chunk_left[v], n, memory_order_relaxed);
    atomic_store_explicit(&s->ring.t_queued[v], smoe__now_ns(), memory_order_relaxed);
    /* release: pairs with the worker's acquire load and CAS of chunk_next,
     * so a worker that takes a chunk of this arming sees the count above,
     * also when it holds a token of an earlier arming of the same gen */
    atomic_store_explicit(&s->ring.chunk_next[v], smoe__cn_make(gen, attempt, !demand),
                          memory_order_release);
    /* Armed: drop the STARTED the reservation set, so that a queued
     * speculative read can be cancelled until a worker takes a chunk.
     * Nobody else can move the slot meanwhile: it is not cancellable, and
     * no worker can take a chunk before the arming above. */
    /* relaxed: the CAS below re-checks */
    uint64_t w = atomic_load_explicit(&s->ring.word[v], memory_order_relaxed);
    while (smoe__w_gen(w) == gen && smoe__w_state(w) == SMOE__LOADING &&
           (w & SMOE__W_STARTED) &&
           /* release: the arming above happens before a cancel reuses the
            * slot (the evictor's acq_rel CAS reads this word) */
           !atomic_compare_exchange_weak_explicit(&s->ring.word[v], &w, w & ~SMOE__W_STARTED,
                                                  memory_order_release, memory_order_relaxed))
        ;
    smoe__load_tokens(s, v, gen, n, demand);
}

/* Record why slot v's load failed (f NULL: nothing to add), beside the
 * error. Only the worker that sets the error writes it. */
static void fault_note(struct smoe_stream *s, uint32_t v, uint32_t what,
                       const smoe__io_fail *f)
{
    static const smoe__io_fail none = {0, 0, 0, 0, 0};
    smoe__slot_fault *sf = &s->ring.fault[v];
    if (!f)
        f = &none;
    /* relaxed, all six: published with the error, by our acq_rel countdown
     * of chunk_left and then the release CAS publishing FAILED; they pair
     * with the claimer's acquire load of the slot word (claim.c) */
    atomic_store_explicit(&sf->what, what, memory_order_relaxed);
    atomic_store_explicit(&sf->eno, f->eno, memory_order_relaxed);
    atomic_store_explicit(&sf->tries, f->tries, memory_order_relaxed);
    atomic_store_explicit(&sf->off, f->off, memory_order_relaxed);
    atomic_store_explicit(&sf->len, f->len, memory_order_relaxed);
    atomic_store_explicit(&sf->file, f->file, memory_order_relaxed);
}

/* Offset in the blob of the first byte of its padding, data[size, padded),
 * that is not zero; UINT64_MAX when all are. */
static uint64_t padding_dirt(const uint8_t *data, uint64_t size, uint64_t padded)
{
    const uint8_t *t = data + size;
    const size_t n = (size_t)(padded - size);
    /* every byte equal to the next and the first zero: one memcmp */
    if (n == 0 || (t[0] == 0 && memcmp(t, t + 1, n - 1) == 0))
        return UINT64_MAX;
    size_t i = 0;
    while (t[i] == 0)
        i++;
    return size + i;
}

/* The last chunk landed: verify, record the latency, publish. */
static void load_done(struct smoe_stream *s, const smoe__worker *wk, uint32_t v, uint32_t key,
                      const smoe__vault_entry *e)
{
    /* relaxed: ordered by the acq_rel countdown the caller just won */
    int err = atomic_load_explicit(&s->ring.err[v], memory_order_relaxed);
    if (err == 0 && s->verify) {
        const uint8_t *data = smoe__slot_data(&s->ring, v);
        uint64_t dirt;
        if (smoe__extent_hash(s, wk, key, data) != e->hash) {
            err = SMOE_ECHECKSUM;
            fault_note(s, v, SMOE__FAULT_NONE, NULL);
        } else if (!s->src.n && (dirt = padding_dirt(data, e->size, e->padded)) != UINT64_MAX) {
            /* The format promises zero padding (`smoe verify` checks it
             * too): bytes there mean the blob is not what was written. */
            err = SMOE_ECHECKSUM;
            const smoe__io_fail at = {e->offset + dirt, 0, 0, 0, 0};
            fault_note(s, v, SMOE__FAULT_PADDING, &at);
        }
    }
    SMOE__COUNT(s, c_reads_done, 1);
    if (err)
        SMOE__COUNT(s, c_reads_failed, 1);
    /* relaxed: latency statistics only */
    uint64_t t0 = atomic_load_explicit(&s->ring.t_queued[v], memory_order_relaxed);
    /* relaxed: the flags only classify the latency */
    uint64_t w = atomic_load_explicit(&s->ring.word[v], memory_order_relaxed);
    smoe__lat_add((w & SMOE__W_SPEC) && smoe__w_pins(w) == 0 ? &s->lat_spec : &s->lat_demand,
                  smoe__now_ns() - t0);
    smoe__slot_publish(s, v, err);
}

static void run_request(smoe__worker *wk, smoe__req rq)
{
    struct smoe_stream *s = wk->s;
    _Atomic uint64_t *word = &s->ring.word[rq.slot];
    /* acquire: pairs with the release CAS that armed this load, and
     * through it with the release of the slot's last reader */
    uint64_t w = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        if (smoe__w_state(w) != SMOE__LOADING || smoe__w_gen(w) != rq.gen)
            return; /* cancelled, evicted, done, or stale */
        if (w & SMOE__W_STARTED)
            break;
        /* acquire: as above; STARTED makes the load uncancellable */
        if (atomic_compare_exchange_weak_explicit(word, &w, w | SMOE__W_STARTED,
                                                  memory_order_acquire,
                                                  memory_order_acquire))
            break;
    }
    const smoe__vault_entry *e = &s->vault.index[smoe__w_key(w)];
    /* acquire: pairs with the release store arming the load (and, through
     * the CASes of other workers, with each later value) */
    uint64_t c = atomic_load_explicit(&s->ring.chunk_next[rq.slot], memory_order_acquire);
    uint32_t chunk;
    do {
        /* The chunk size is the arming's, from the value itself: a CAS
         * that succeeds from c takes chunk index(c) of exactly that arming
         * (a token of an earlier arming of this gen, stalled here, finds a
         * value it never saw and looks again). */
        chunk = (c & SMOE__CN_SPEC_CHUNK) ? s->spec_chunk : s->chunk;
        if (smoe__cn_gen(c) != rq.gen || smoe__cn_index(c) >= smoe__chunks(e->padded, chunk))
            return; /* not armed yet, or every chunk of this arming is taken */
        smoe__hook(s, SMOE__HOOK_CHUNK_CAS, rq.slot, c, chunk);
        /* acquire: as the load above */
    } while (!atomic_compare_exchange_weak_explicit(&s->ring.chunk_next[rq.slot], &c, c + 1,
                                                    memory_order_acquire,
                                                    memory_order_acquire));
    const uint64_t off = (uint64_t)smoe__cn_index(c) * chunk;
    const uint64_t len = e->padded - off < chunk ? e->padded - off : chunk;
    smoe__hook(s, SMOE__HOOK_CHUNK_READ, rq.slot, off, len);
    smoe__io_fail why;
    uint64_t got = 0;
    /* the chunk's part of the load: one read of a packed vault, the
     * segments of an index vault's sources in the range (extent.c) */
    int err = smoe__extent_read(s, wk, rq.slot, smoe__w_key(w), off, len, &got, &why);
    SMOE__COUNT(s, c_chunks, 1);
    if (err) {
        int none = 0;
        /* relaxed: published by the acq_rel countdown below; first error
         * wins, and its winner says why */
        if (atomic_compare_exchange_strong_explicit(&s->ring.err[rq.slot], &none, err,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed))
            fault_note(s, rq.slot,
                       err == SMOE_ESHUTDOWN ? SMOE__FAULT_NONE : SMOE__FAULT_READ, &why);
    } else {
        SMOE__COUNT(s, c_bytes_read, got);
    }
    /* acq_rel: release our chunk's bytes and error; the last one acquires
     * every other chunk's before verifying and publishing */
    if (atomic_fetch_sub_explicit(&s->ring.chunk_left[rq.slot], 1, memory_order_acq_rel) == 1)
        load_done(s, wk, rq.slot, smoe__w_key(w), e);
}

static int pop_request(struct smoe_stream *s, smoe__req *rq)
{
    /* Demand first, always; speculation only when demand is empty. The
     * token's room goes back once it is off the queue. */
    smoe__mpmc *q = &s->demand_q;
    if (!smoe__mpmc_pop(q, rq)) {
        q = &s->spec_q;
        if (!smoe__mpmc_pop(q, rq))
            return 0;
    }
    smoe__mpmc_unreserve(q, 1);
    return 1;
}

static void set_thread_name(uint32_t id)
{
    char name[16];
    snprintf(name, sizeof name, "smoe-io-%u", id);
#if defined(__APPLE__)
    pthread_setname_np(name);
#elif defined(__linux__)
    pthread_setname_np(pthread_self(), name);
#else
    (void)name;
#endif
}

static void *worker_main(void *arg)
{
    smoe__worker *wk = arg;
    struct smoe_stream *s = wk->s;
    smoe__req rq;
    set_thread_name(wk->id);
    while (!atomic_load(&s->stop)) {
        if (pop_request(s, &rq)) {
            run_request(wk, rq);
            smoe__hook(s, SMOE__HOOK_REQUEST_DONE, rq.slot, 0, 0);
            continue;
        }
        atomic_fetch_add(&s->idle, 1);
        uint32_t seq = atomic_load(&s->work_seq);
        if (pop_request(s, &rq)) {
            atomic_fetch_sub(&s->idle, 1);
            run_request(wk, rq);
            smoe__hook(s, SMOE__HOOK_REQUEST_DONE, rq.slot, 0, 0);
            continue;
        }
        if (!atomic_load(&s->stop)) {
            SMOE__COUNT(s, c_worker_parks, 1);
            smoe__park_wait(&s->work_seq, seq, UINT64_MAX);
        }
        atomic_fetch_sub(&s->idle, 1);
    }
    return NULL;
}

int smoe__workers_start(struct smoe_stream *s)
{
    for (uint32_t i = 0; i < s->nworkers; i++) {
        smoe__worker *wk = &s->workers[i];
        /* Where a direct read cut short may go on (smoe__io_read_full_ex):
         * a boundary both the file offset and the slot's memory may be cut
         * at; when unknown, 16 KiB, a multiple of every alignment smoe_open
         * accepts. */
        uint32_t mem_align, off_align;
        wk->align = 0;
        if (s->io_mode == SMOE_IO_DIRECT) {
            if (smoe__dio_align(wk->fd, &mem_align, &off_align) == 0 && off_align)
                wk->align = mem_align > off_align ? mem_align : off_align;
            else
                wk->align = SMOE__ALIGN;
        }
        int e = pthread_create(&wk->thread, NULL, worker_main, wk);
        if (e)
            return smoe__fail(SMOE_ESYS, "open: cannot start worker %u of %u: %s", i,
                              s->nworkers, strerror(e));
        wk->started = 1;
    }
    return 0;
}

void smoe__workers_join(struct smoe_stream *s)
{
    atomic_store(&s->stop, 1);
    atomic_fetch_add(&s->work_seq, 1);
    smoe__park_wake(&s->work_seq, INT_MAX);
    for (uint32_t i = 0; i < s->nworkers; i++) {
        if (s->workers[i].started) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].started = 0;
        }
    }
}
