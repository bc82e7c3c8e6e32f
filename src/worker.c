/*
 * worker.c - the streamer's I/O threads.
 *
 * Each worker owns one descriptor (direct I/O is serialised per
 * descriptor on some systems; one each gives the drive its full queue
 * depth). Loop: pop the demand queue, and only when it is empty the
 * speculative one; take the slot (LOADING -> LOADING|STARTED by CAS, which
 * also drops stale or cancelled requests); read the padded blob into it;
 * verify it if asked; publish READY or FAILED with a release CAS.
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

#include "error.h"
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
    if ((w & SMOE__W_SPEC) && !(w & (SMOE__W_DEMAND | SMOE__W_PREWARM)))
        smoe__spec_put(s);
    smoe__touch(s, v); /* freshly loaded: a fresh tick */
    if (w & SMOE__W_WAITERS)
        smoe__park_wake(smoe__low32(word), INT_MAX);
}

static void run_request(smoe__worker *wk, smoe__req rq)
{
    struct smoe_stream *s = wk->s;
    _Atomic uint64_t *word = &s->ring.word[rq.slot];
    /* acquire: pairs with the release CAS that queued this load, and
     * through it with the release of the slot's last reader */
    uint64_t w = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        if (smoe__w_state(w) != SMOE__LOADING || smoe__w_gen(w) != rq.gen ||
            (w & SMOE__W_STARTED))
            return; /* cancelled, already taken by another worker, or stale */
        /* acquire: as above; failure reloads w for the checks */
        if (atomic_compare_exchange_weak_explicit(word, &w, w | SMOE__W_STARTED,
                                                  memory_order_acquire,
                                                  memory_order_acquire))
            break;
    }
    const smoe__vault_entry *e = &s->vault.index[smoe__w_key(w)];
    uint8_t *data = smoe__slot_data(&s->ring, rq.slot);
    int eno = 0;
    int err = smoe__io_read_full(s->io, wk->fd, data, e->padded, e->offset, &s->stop, &eno);
    if (err == 0 && s->verify && smoe__hash(data, e->size) != e->hash)
        err = SMOE_ECHECKSUM;
    SMOE__COUNT(s, c_reads_done, 1);
    if (err)
        SMOE__COUNT(s, c_reads_failed, 1);
    else
        SMOE__COUNT(s, c_bytes_read, e->padded);
    smoe__slot_publish(s, rq.slot, err);
}

static int pop_request(struct smoe_stream *s, smoe__req *rq)
{
    /* Demand first, always; speculation only when demand is empty. */
    return smoe__mpmc_pop(&s->demand_q, rq) || smoe__mpmc_pop(&s->spec_q, rq);
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
            continue;
        }
        atomic_fetch_add(&s->idle, 1);
        uint32_t seq = atomic_load(&s->work_seq);
        if (pop_request(s, &rq)) {
            atomic_fetch_sub(&s->idle, 1);
            run_request(wk, rq);
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
