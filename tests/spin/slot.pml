/*
 * slot.pml - the slot protocol of libsmoe_stream as a Promela model,
 * checked with spin by tests/spin/run.sh. docs/internals/slot-protocol.md
 * explains the model, the properties and how to run it.
 *
 * Shared state, and where it is in the C code:
 *   word[v]   the packed slot word (src/slot.h): state, DEMAND, STARTED,
 *             WAITERS, SPEC, refs, key, gen.
 *   map[k]    the residency map entry (src/slot.h): NONE, PENDING, or
 *             (slot, gen).
 *   dq, sq    the demand and speculative request queues (src/mpmc.h):
 *             FIFO channels of (slot, gen).
 *   data[v]   what the slot's bytes hold: DATA(key, gen) once the read of
 *             that load finished, TORN while a read writes them.
 *   stop, work_seq, idle, spec_inflight: the stream's fields of those names.
 *
 * Processes: host (a thread calling smoe_prefetch, smoe_claim_wait,
 * smoe_claim, smoe_release), worker (src/worker.c), shutdown
 * (smoe_shutdown in src/stream.c), quiescent (checks the final state).
 *
 * Steps. Every process is a loop over a program counter `pc`; each option
 * of the loop is one step: one atomic operation of the C code on shared
 * state (a load, a store, a CAS, an RMW, a queue push or pop, a futex wait
 * or wake) together with the thread-local work that follows it up to the
 * next shared access. Each step is commented with the C function it
 * models. A C CAS loop whose every iteration reloads the word and decides
 * again from it, with no other effect between iterations (claim_once,
 * found, release, run_request, smoe__slot_publish), is one atomic
 * read-modify-write step: the loop ends with the CAS that succeeds (or a
 * decision on a value loaded), and that is the step. A CAS from a word
 * seen earlier (the victim CAS of load_new, the WAITERS CAS of
 * park_on_slot, the map CASes) stays a CAS from that older value.
 *
 * Futexes: a parked thread sleeps until a wake on its address clears its
 * csleep / wsleep entry; the wait compares the word with the value it
 * expects in the same step as falling asleep, as the kernel does. The
 * 100 ms backstop of park_on_slot (SMOE__PARK_MAX_NS) is modelled as a
 * wake-up that comes once nothing else can move; with -DNO_BACKSTOP it is
 * left out, and a lost wake-up is then an invalid end state.
 *
 * Not modelled: LRU ticks (within a victim class either slot may win),
 * empty_hint (the scan starts at slot 0), statistics, pre-warm (the
 * PREWARM flag only exempts a speculative read from the budget), the
 * claim_wait timeout, SMOE_EREFS, a full request queue (asserted never to
 * happen), and memory orders (spin explores sequentially consistent
 * interleavings). Busy-waits that only re-read until something changes
 * (PENDING) are waits for the change.
 *
 * Switches (spin -D...):
 *   CFG=n                 the configuration: slots, experts, workers and
 *                         the calls each host makes (below, and in init).
 *   WORKER_FUTEX          model the workers' idle/work_seq futex protocol
 *                         step by step; without it an idle worker waits
 *                         for a request or stop.
 *   NO_BACKSTOP           leave out park_on_slot's 100 ms backstop.
 *   CHECK_UNPIN           also check that a FAILED slot whose error a claim
 *                         has reported never leaves a load without room.
 *   FIXES                 proposed changes to the C code (not in it yet):
 *                         see park_stopped, PF_EVWAKE and CO_WORD, and
 *                         docs/internals/slot-protocol.md.
 * Known-bad variants, each of which spin must reject:
 *   BAD_FAIL_RECYCLE      a failed read gives its slot back as EMPTY instead
 *                         of publishing FAILED: a claim_wait asks for the
 *                         expert again and again while the read keeps
 *                         failing (non-progress cycle).
 *   BAD_TWO_STEP_CLAIM    a claim loads the word, sees READY, and takes its
 *                         reference with a second, unconditional RMW: an
 *                         evictor slips in between and the claimer holds a
 *                         reference to another expert's slot (assertion).
 */

#ifndef CFG
#define CFG 1
#endif

#if CFG == 1
/* one slot, one expert: two claim_wait callers, failed reads, shutdown */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 2
#elif CFG == 2
/* one slot, one expert: three callers (claim_wait, claim_wait, claim) */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 3
/* one slot, one expert: two claim_wait callers and demand and speculative
 * prefetches: joins, upgrades, retries of failed reads */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 4
/* one slot, two experts: eviction, cancellation, stale map entries */
#define NSLOTS 1
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 5
/* two slots, two experts, two workers: a claim_wait's ask upgrades a
 * speculative read, whose second request two workers race for */
#define NSLOTS 2
#define NKEYS 2
#define NWORKERS 2
#define NHOSTS 3
#elif CFG == 7
/* one slot, one expert: one claim_wait caller, shutdown */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 1
#elif CFG == 6
/* two slots, three experts: retained, speculative and failed slots
 * evicted by class; a speculative read cancelled while a claim_wait is
 * parked on it */
#define NSLOTS 2
#define NKEYS 3
#define NWORKERS 1
#define NHOSTS 3
#endif

#ifndef SHUTDOWN
#if CFG == 1 || CFG == 7
#define SHUTDOWN 1
#else
#define SHUTDOWN 0
#endif
#endif
#ifndef SPEC_CAP
#define SPEC_CAP 1
#endif
#define QCAP 4

/* ---- the slot word (src/slot.h) ---- */
#define EMPTY    0
#define LOADING  1
#define READY    2
#define CONSUMED 3
#define FAILED   4

#define W_STATE_MASK 7
#define W_DEMAND     8    /* SMOE__W_DEMAND: pinned until claimed */
#define W_STARTED    16   /* SMOE__W_STARTED: a worker is reading */
#define W_WAITERS    32   /* SMOE__W_WAITERS: a claimer is parked */
#define W_SPEC       64   /* SMOE__W_SPEC: speculative read */
#define W_REF_ONE    256  /* refs: bits 8..11 */
#define W_KEY_SHIFT  12   /* key: bits 12..15 */
#define W_GEN_SHIFT  16   /* gen: bits 16.. */

#define ST(w)    ((w) & W_STATE_MASK)
#define REFS(w)  (((w) >> 8) & 15)
#define KEY(w)   (((w) >> W_KEY_SHIFT) & 15)
#define GEN(w)   ((w) >> W_GEN_SHIFT)
/* What a futex on the word compares: the C code parks on its low 32 bits
 * (state, flags, refs, the key's low bits); the gen is above them. */
#define LOW(w)   ((w) & 65535)
/* smoe__w_new_load: LOADING, flags, no refs, the new key, gen + 1. The C
 * gen wraps at 2^20, this one at GEN_MOD; the configurations load far
 * fewer times than that (asserted in load_new), except the known-bad
 * recycle loop, whose reloads are unbounded: there the wrap closes the
 * loop into a cycle of states that spin can find. */
#define GEN_MOD 16
#define NEW_LOAD(old, k, flags) \
    (LOADING | (flags) | ((k) << W_KEY_SHIFT) | \
     (((GEN(old) + 1) % GEN_MOD) << W_GEN_SHIFT))

/* ---- the residency map entry (src/slot.h) ---- */
#define MAP_NONE    0
#define MAP_PENDING 1
#define MAP_MAKE(v, g) (((g) << 8) | ((v) + 2))
#define MAP_SLOT(m)    (((m) & 255) - 2)
#define MAP_GEN(m)     ((m) >> 8)

/* ---- the slot's bytes ---- */
#define TORN (-1)
#define DATA(k, g) (((g) << 4) | (k))

/* ---- victim classes (src/evict.c victim_class); NEVER: not a victim ---- */
#define NEVER 9
#define VCLASS_C(w, dem) \
    ((REFS(w) != 0 || ((w) & W_DEMAND) != 0) -> NEVER : \
     (ST(w) == FAILED -> 0 : \
      (ST(w) == CONSUMED -> 1 : \
       (ST(w) == READY -> (((w) & W_SPEC) != 0 -> 2 : NEVER) : \
        (ST(w) == LOADING -> \
            ((((w) & W_STARTED) != 0 || ((w) & W_SPEC) == 0 || !(dem)) -> NEVER : 3) : \
         NEVER)))))
#define VCLASS(w, dem) VCLASS_C(w, dem)

/* ---- results ---- */
#define NOSLOT 255
#define P_NONE      0
#define P_QUEUED    1   /* SMOE_QUEUED */
#define P_RESIDENT  2   /* SMOE_RESIDENT */
#define P_INFLIGHT  3   /* SMOE_INFLIGHT */
#define P_SKIPPED   4   /* SMOE_SKIPPED */
#define P_EFULL     5   /* SMOE_EFULL */
#define P_ESHUTDOWN 6   /* SMOE_ESHUTDOWN */

#define C_NONE      0
#define C_OK        1   /* SMOE_READY or SMOE_HIT: one reference taken */
#define C_EAGAIN    2   /* SMOE_EAGAIN */
#define C_ENOTRES   3   /* SMOE_ENOTRESIDENT */
#define C_EFAILED   4   /* SMOE_EIO, SMOE_ETRUNC, SMOE_ECHECKSUM */
#define C_ESHUTDOWN 5   /* SMOE_ESHUTDOWN */
#define C_EFULL     6   /* SMOE_EFULL from claim_wait's demand prefetch */

/* ---- what a host may call ---- */
#define OP_DEMAND  1    /* smoe_prefetch(layer, expert, 0) */
#define OP_SPEC    2    /* smoe_prefetch(..., SMOE_PREFETCH_SPECULATIVE) */
#define OP_WAIT    4    /* smoe_claim_wait(..., UINT64_MAX), then smoe_release */
#define OP_CLAIM   8    /* smoe_claim, then smoe_release */

/* ---- shared state ---- */
int word[NSLOTS];          /* ring.word */
int map[NKEYS];            /* s->map */
int data[NSLOTS];          /* the slots' bytes */
bool stop;                 /* s->stop */
byte spec_inflight;        /* s->spec_inflight */
byte work_seq;             /* s->work_seq */
byte idle;                 /* s->idle */
bool wsleep[NWORKERS];     /* worker i is parked on work_seq */
byte csleep[NHOSTS];       /* host i is parked on slot csleep[i] - 1 (0: awake) */
byte held[NSLOTS];         /* ghost: references the hosts hold */
#ifdef CHECK_UNPIN
bool frep[NSLOTS];         /* ghost: a claim has reported this FAILED slot's error */
#endif
chan dq = [QCAP] of { byte, byte };   /* s->demand_q: (slot, gen) */
chan sq = [QCAP] of { byte, byte };   /* s->spec_q */
hidden byte ci, cj;        /* loop counters inside d_steps only */

/*
 * Invariants of the slot words, checked in every step that changes one:
 * the references in a word are those the hosts hold (none lost, none
 * negative); WAITERS and STARTED only on LOADING; a LOADING or READY slot
 * is demand or speculative (pinned or evictable, never leaked); references
 * only on CONSUMED; no two slots hold one key.
 */
inline check_slots()
{
    ci = 0;
    do
    :: ci < NSLOTS ->
        assert(REFS(word[ci]) == held[ci]);
        assert((word[ci] & W_WAITERS) == 0 || ST(word[ci]) == LOADING);
        assert((word[ci] & W_STARTED) == 0 || ST(word[ci]) == LOADING);
        assert(ST(word[ci]) != READY || (word[ci] & (W_SPEC | W_DEMAND)) != 0);
        assert(ST(word[ci]) != LOADING || (word[ci] & (W_SPEC | W_DEMAND)) != 0);
        assert(REFS(word[ci]) == 0 || ST(word[ci]) == CONSUMED);
        assert(ST(word[ci]) <= FAILED);
        cj = ci + 1;
        do
        :: cj < NSLOTS ->
            assert(ST(word[ci]) == EMPTY || ST(word[cj]) == EMPTY ||
                   KEY(word[ci]) != KEY(word[cj]));
            cj++
        :: else -> break
        od;
        ci++
    :: else -> break
    od;
    ci = 0;
    cj = 0
}

/* internal.h smoe__spec_put: give a speculation budget unit back. */
inline spec_put()
{
    assert(spec_inflight > 0);
    spec_inflight--
}

/* park.c smoe__park_wake(&work_seq, 1): one parked worker, if any. */
inline wake_one_worker()
{
    if
    :: wsleep[0] -> wsleep[0] = 0
#if NWORKERS > 1
    :: wsleep[1] -> wsleep[1] = 0
#endif
    :: else -> skip
    fi
}

/* park.c smoe__park_wake(low32(&word[V]), INT_MAX): every host parked on V. */
inline wake_slot(V)
{
    ci = 0;
    do
    :: ci < NHOSTS ->
        if
        :: csleep[ci] == V + 1 -> csleep[ci] = 0
        :: else -> skip
        fi;
        ci++
    :: else -> break
    od;
    ci = 0
}

/* ------------------------------------------------------------------ */
/* host: the thread-local parts, shared by the steps below              */
/* ------------------------------------------------------------------ */

/* pc values of a host */
#define H_NEXT     1    /* choose the next call */
#define H_DONE     2    /* the call returned */
#define PF_MAP     11   /* smoe__prefetch_key: load map[k] */
#define PF_PEND    12   /* ... CAS NONE -> PENDING */
#define PF_BUDGET  13   /* load_new: spec_budget_take */
#define PF_PICK    14   /* smoe__evict_pick: load word[ei] */
#define PF_TAKE    15   /* load_new: the victim CAS */
#define PF_EVICTED 16   /* evicted(): clear the old key's entry */
#define PF_EVPUT   17   /* evicted(): a cancelled read's budget unit */
#define PF_STORE   18   /* load_new: store map[k] = (slot, gen) */
#define PF_PUTUN   19   /* load_new: no victim, give the budget unit back */
#define PF_UNPEND  20   /* unpend(): map[k] = NONE */
#define PF_FOUND   21   /* found(): load the word, CAS it */
#define PF_UPPUT   22   /* found(): an upgrade gives the unit back */
#define PF_STALE   23   /* smoe__prefetch_key: clear a stale entry */
#define PF_EVWAKE  24   /* (FIXES) evicted(): wake the old word's waiters */
#define Q_PUSH     30   /* queue_read: smoe__mpmc_push */
#define Q_SEQ      31   /* smoe__workers_notify: work_seq++ */
#define Q_IDLE     32   /* ... load idle */
#define Q_WAKE     33   /* ... futex wake one worker */
#define CW_TOP     40   /* smoe_claim_wait: loop top, load stop */
#define CO_MAP     42   /* claim_once: load map[k] */
#define CO_WORD    43   /* claim_once: load the word, CAS the reference */
#define CW_YIELD   44   /* smoe_claim_wait: sched_yield, poll again */
#define CW_PARK    45   /* park_on_slot: CAS WAITERS (or load stop) */
#define CW_STOP    46   /* park_on_slot: load stop */
#define CW_FUTEX   47   /* park_on_slot: futex wait: compare and sleep */
#define CW_SLEEP   48   /* ... asleep until woken */
#define CO_INC     49   /* (BAD_TWO_STEP_CLAIM) the separate increment */
#define CW_STOPCLR 52   /* (FIXES) park_on_slot saw stop: clear WAITERS */
#define CW_STOPWAKE 53  /* (FIXES) ... and wake the slot */
#define RL_REL     50   /* the caller reads the blob, smoe_release */

/* return addresses */
#define RET_TOP   0     /* prefetch: back to the caller of smoe_prefetch */
#define RET_WAIT  1     /* prefetch / claim_once: back into smoe_claim_wait */
#define RET_CLAIM 2     /* claim_once: back into smoe_claim */

/* Forget the prefetch's locals (smaller state space; they are dead). */
inline pf_clear()
{
    pme = 0; pv = 0; pg = 0; pw = 0; pnw = 0; ew = 0;
    ei = 0; eclass = 0; ebest = 0; ebw = 0; efailed = 0; qdem = 0; qv = 0; qg = 0;
    pr = P_NONE
}

/* A claim returned cr: release path or done. */
inline claim_done()
{
    cw = 0;
    if
    :: cr == C_OK -> pc = RL_REL
    :: else -> pc = H_DONE
    fi
}

/*
 * smoe__prefetch_key returned pr. From smoe_prefetch: done. From
 * smoe_claim_wait (the demand "ask"): EFULL ends the wait; RESIDENT or
 * QUEUED poll again at once; otherwise park on the slot claim_once saw, or
 * poll again (PENDING: sched_yield).
 */
inline pf_return()
{
    if
    :: pret == RET_TOP -> pc = H_DONE
    :: else ->
        if
        :: pr == P_EFULL -> cr = C_EFULL; pc = H_DONE
        :: pr == P_RESIDENT || pr == P_QUEUED -> poll_again()
        :: else ->
            if
            :: cws != NOSLOT -> pc = CW_PARK
            :: else -> pc = CW_YIELD
            fi
        fi
    fi;
    pf_clear()
}

/*
 * claim_once returned cr (cws/cww: a LOADING slot to park on). From
 * smoe_claim: done. From smoe_claim_wait: done unless EAGAIN or
 * ENOTRESIDENT; not resident, or a speculative read in flight not yet
 * asked for: ask (demand prefetch, which upgrades it); else park or poll.
 */
inline co_return()
{
    if
    :: cret == RET_CLAIM -> claim_done()
    :: else ->
        if
        :: cr != C_EAGAIN && cr != C_ENOTRES -> claim_done()
        :: cr == C_ENOTRES ||
           (cr == C_EAGAIN && !casked && cws != NOSLOT && (cww & W_DEMAND) == 0) ->
            casked = 1;
            pspec = 0;
            pret = RET_WAIT;
            pc = PF_MAP
        :: else ->
            if
            :: cws != NOSLOT -> pc = CW_PARK
            :: else -> pc = CW_YIELD
            fi
        fi
    fi
}

/* smoe_claim_wait goes round its loop again: what claim_once found is
 * dead (it will look again). */
inline poll_again()
{
    cws = 0; cww = 0; cv = 0; cg = 0; cr = C_NONE; pc = CW_TOP
}

/*
 * park_on_slot saw stop: return (the loop top then returns ESHUTDOWN).
 * Proposed fix: first clear WAITERS and wake the slot's sleepers, as
 * smoe_shutdown does, since this claimer may have set WAITERS again after
 * smoe_shutdown cleared it, under a claimer that saw stop == 0 and is about
 * to sleep on a word with WAITERS set.
 */
inline park_stopped()
{
#ifdef FIXES
    pc = CW_STOPCLR
#else
    poll_again()
#endif
}

/* evicted(): a cancelled speculative read gives its budget unit back. */
inline evicted_put()
{
    if
    :: ST(pw) == LOADING && (pw & W_SPEC) != 0 -> pc = PF_EVPUT
    :: else -> pc = PF_STORE
    fi
}

/* The scan of smoe__evict_pick starts over. */
inline pick_start()
{
    ei = 0; eclass = 4; ebest = NOSLOT; ebw = 0; ew = 0; efailed = 0
}

/* The demand queue if DEM, else the speculative one: push (V, G) next.
 * Only the result pr is still needed after that. */
inline queue_read(DEM, V, G)
{
    qdem = DEM; qv = V; qg = G; pc = Q_PUSH;
    pme = 0; pv = 0; pg = 0; pw = 0; pnw = 0; ew = 0; ei = 0; eclass = 0; ebest = 0; ebw = 0;
    efailed = 0
}

/*
 * A host thread makes nops calls. Call i (from 0) is any of the calls in
 * the 4-bit mask (ops >> 4i) & 15 (OP_*), for any of the experts in the
 * 4-bit mask (keys >> 4i) & 15.
 */
proctype host(byte id; int ops; int keys; byte nops)
{
    byte pc = H_NEXT, n, k;
    /* smoe__prefetch_key */
    bit pspec;
    byte pret, pr, pv, pg, ei, eclass, ebest;
    bit efailed;
    int pme, pw, pnw, ew, ebw;
    /* queue_read */
    bit qdem;
    byte qv, qg;
    /* claim */
    bit casked, cspin;
    byte cret, cr, cv, cg, cws;
    int cme, cw, cww;

    do
    /* ---- the next call ---- */
    :: atomic {
        /* Choose the call and its expert; every call starts with
         * atomic_load(&stop), done in this step (the choice is local). */
        pc == H_NEXT && n < nops ->
        if
        :: (keys >> (4 * n)) & 1 -> k = 0
        :: (keys >> (4 * n)) & 2 -> k = 1
        :: (keys >> (4 * n)) & 4 -> k = 2
        fi;
        if
        :: (ops >> (4 * n)) & OP_DEMAND -> pspec = 0; pret = RET_TOP; pc = PF_MAP
        :: (ops >> (4 * n)) & OP_SPEC -> pspec = 1; pret = RET_TOP; pc = PF_MAP
        :: (ops >> (4 * n)) & OP_WAIT -> casked = 0; cspin = 1; cret = RET_WAIT; pc = CO_MAP
        :: (ops >> (4 * n)) & OP_CLAIM -> cret = RET_CLAIM; pc = CO_MAP
        fi;
        n++;
        if
        :: stop -> pc = H_DONE              /* SMOE_ESHUTDOWN */
        :: else -> skip
        fi
       }
    :: pc == H_NEXT && n >= nops -> break
    :: pc == H_DONE ->
progress_call:                              /* a call returned */
        atomic { pc = H_NEXT; k = 0; cr = C_NONE; cv = 0; cg = 0; cws = 0; cww = 0;
                 cret = 0; pret = 0; pspec = 0; casked = 0; cspin = 0; pf_clear() }

    /* ---- smoe_prefetch (prefetch.c); its load of stop is in H_NEXT ---- */
    :: d_step {
        /* smoe__prefetch_key: acquire load of map[k]. PENDING: another
         * prefetch is picking a slot; the C code spins (pause, then
         * sched_yield) until the entry changes, modelled as waiting for
         * the change (the spins change nothing). */
        pc == PF_MAP && map[k] != MAP_PENDING ->
        pme = map[k];
        if
        :: pme == MAP_NONE -> pc = PF_PEND
        :: else -> pv = MAP_SLOT(pme); pg = MAP_GEN(pme); pc = PF_FOUND
        fi
       }
    :: d_step {                             /* smoe__prefetch_key: CAS map[k] NONE -> PENDING */
        pc == PF_PEND ->
        if
        :: map[k] == MAP_NONE ->
            map[k] = MAP_PENDING;
            pick_start();
            if
            :: pspec -> pc = PF_BUDGET
            :: else -> pc = PF_PICK
            fi
        :: else -> pc = PF_MAP
        fi
       }
    :: d_step {                             /* load_new: spec_budget_take (CAS loop) */
        pc == PF_BUDGET ->
        if
        :: spec_inflight < SPEC_CAP -> spec_inflight++; pc = PF_PICK
        :: else -> pr = P_SKIPPED; pc = PF_UNPEND
        fi
       }
    :: atomic {                             /* smoe__evict_pick: acquire load of word[ei] */
        pc == PF_PICK ->
        ew = word[ei];
        if
#ifdef CHECK_UNPIN
        :: ST(ew) == FAILED && frep[ei] -> efailed = 1
#endif
        :: else -> skip
        fi;
        if
        :: ST(ew) == EMPTY -> ebest = ei; ebw = ew; eclass = 0; ei = NSLOTS
        :: else ->
            if
            :: VCLASS(ew, !pspec) < eclass ->
                eclass = VCLASS(ew, !pspec); ebest = ei; ebw = ew
            :: VCLASS(ew, !pspec) < 4 && VCLASS(ew, !pspec) == eclass ->
                if                          /* same class: the LRU one, either */
                :: ebest = ei; ebw = ew
                :: skip
                fi
            :: else -> skip
            fi;
            ei++
        fi;
        if
        :: ei >= NSLOTS && ebest != NOSLOT -> pv = ebest; pw = ebw; pc = PF_TAKE
        :: ei >= NSLOTS && ebest == NOSLOT ->     /* no victim */
#ifdef CHECK_UNPIN
            /* FAILED slots are the first choice of eviction
             * (docs/decisions.md): once a claim has reported its error,
             * a FAILED slot may not keep a load from finding room */
            assert(!efailed);
#endif
            if
            :: pspec -> pr = P_SKIPPED; pc = PF_PUTUN
            :: else -> pr = P_EFULL; pc = PF_UNPEND
            fi
        :: else -> skip
        fi;
        ew = 0
       }
    :: d_step {                             /* load_new: acq_rel CAS word[v]: w -> new load */
        pc == PF_TAKE ->
#ifndef BAD_FAIL_RECYCLE
        assert(GEN(pw) + 1 < GEN_MOD);
#endif
        pnw = NEW_LOAD(pw, k, (pspec -> W_SPEC : W_DEMAND));
        if
        :: word[pv] == pw ->
            word[pv] = pnw;
#ifdef CHECK_UNPIN
            frep[pv] = 0;
#endif
            check_slots();
            ei = 0; eclass = 0; ebest = 0; ebw = 0; efailed = 0;
            if
            :: ST(pw) != EMPTY -> pc = PF_EVICTED
            :: else -> pc = PF_STORE
            fi
        :: else -> pick_start(); pc = PF_PICK     /* the word moved: pick again */
        fi
       }
    :: d_step {                             /* evicted(): CAS map[old key] (v, old gen) -> NONE */
        pc == PF_EVICTED ->
        if
        :: map[KEY(pw)] == MAP_MAKE(pv, GEN(pw)) -> map[KEY(pw)] = MAP_NONE
        :: else -> skip
        fi;
#ifdef FIXES
        if
        :: (pw & W_WAITERS) != 0 -> pc = PF_EVWAKE
        :: else -> evicted_put()
        fi
#else
        evicted_put()
#endif
       }
#ifdef FIXES
    :: d_step {
        /* proposed fix: evicted() wakes the claimers parked on the word it
         * replaced (a cancelled read): the victim CAS dropped WAITERS */
        pc == PF_EVWAKE -> wake_slot(pv); evicted_put()
       }
#endif
    :: d_step {                             /* evicted(): smoe__spec_put (a cancelled read) */
        pc == PF_EVPUT -> spec_put(); pc = PF_STORE
       }
    :: d_step {                             /* load_new: release store map[k] = (v, gen) */
        pc == PF_STORE ->
        map[k] = MAP_MAKE(pv, GEN(pnw));
        pr = P_QUEUED;
        queue_read(!pspec, pv, GEN(pnw))
       }
    :: d_step {                             /* load_new: smoe__spec_put (no victim) */
        pc == PF_PUTUN -> spec_put(); pc = PF_UNPEND
       }
    :: d_step {                             /* unpend(): release store map[k] = NONE */
        pc == PF_UNPEND -> map[k] = MAP_NONE; pf_return()
       }
    :: d_step {                             /* found(): acquire load of the word, CAS loop */
        pc == PF_FOUND ->
        pw = word[pv];
        if
        :: KEY(pw) != k || GEN(pw) != pg || ST(pw) == EMPTY ->
            pc = PF_STALE                   /* -1: the slot went to another key */
        :: else ->
            pnw = pw;
            if
            :: ST(pw) == READY || ST(pw) == CONSUMED ->
                if
                :: !pspec -> pnw = pw | W_DEMAND       /* pinned until claimed */
                :: else -> skip
                fi;
                pr = P_RESIDENT
            :: ST(pw) == LOADING ->
                if
                :: !pspec && (pw & W_DEMAND) == 0 ->   /* upgrade a speculative read */
                    pnw = pw | W_DEMAND;
                    if
                    :: (pw & W_STARTED) == 0 -> pnw = pnw & ~W_SPEC
                    :: else -> skip
                    fi
                :: else -> skip
                fi;
                pr = P_INFLIGHT
            :: ST(pw) == FAILED ->
                if
                :: pspec -> pr = P_SKIPPED             /* only demand retries */
                :: else ->
                    pnw = (pw & ~(W_STATE_MASK | W_SPEC | W_STARTED | W_WAITERS)) |
                          LOADING | W_DEMAND;
                    pr = P_QUEUED
                fi
            :: else -> assert(false)
            fi;
            word[pv] = pnw;
            check_slots();
#ifdef CHECK_UNPIN
            if
            :: ST(pw) == FAILED && !pspec -> frep[pv] = 0
            :: else -> skip
            fi;
#endif
            if
            :: ST(pw) == LOADING && !pspec && (pw & W_DEMAND) == 0 -> pc = PF_UPPUT
            :: ST(pw) == FAILED && !pspec -> queue_read(1, pv, pg)   /* retry the read */
            :: else -> pf_return()
            fi
        fi
       }
    :: d_step {                             /* found(): the upgrade's smoe__spec_put */
        pc == PF_UPPUT ->
        spec_put();
        if
        :: (pw & W_STARTED) == 0 -> queue_read(1, pv, pg)   /* again, on demand_q */
        :: else -> pf_return()
        fi
       }
    :: d_step {                             /* smoe__prefetch_key: CAS map[k] stale -> NONE */
        pc == PF_STALE ->
        if
        :: map[k] == pme -> map[k] = MAP_NONE
        :: else -> skip
        fi;
        pf_clear();
        pc = PF_MAP
       }

    /* ---- queue_read and smoe__workers_notify (prefetch.c, worker.c) ---- */
    :: d_step {                             /* smoe__mpmc_push */
        pc == Q_PUSH ->
        if
        :: qdem -> assert(len(dq) < QCAP); dq!qv,qg
        :: else -> assert(len(sq) < QCAP); sq!qv,qg
        fi;
#ifdef WORKER_FUTEX
        pc = Q_SEQ
#else
        pf_return()                         /* a worker waits for this (see worker) */
#endif
       }
#ifdef WORKER_FUTEX
    :: d_step {                             /* atomic_fetch_add(&work_seq, 1) */
        pc == Q_SEQ -> work_seq++; pc = Q_IDLE
       }
    :: d_step {                             /* atomic_load(&idle) > 0 */
        pc == Q_IDLE ->
        if
        :: idle > 0 -> pc = Q_WAKE
        :: else -> pf_return()
        fi
       }
    :: atomic {                             /* smoe__park_wake(&work_seq, 1) */
        pc == Q_WAKE -> wake_one_worker(); pf_return()
       }
#endif

    /* ---- smoe_claim_wait, smoe_claim (claim.c); the first load of stop
     * is in H_NEXT ---- */
    :: d_step {                             /* smoe_claim_wait: atomic_load(&stop) */
        pc == CW_TOP ->
        if
        :: stop -> cr = C_ESHUTDOWN; pc = H_DONE
        :: else -> cret = RET_WAIT; pc = CO_MAP
        fi
       }
    :: d_step {                             /* claim_once: acquire load of map[k] */
        pc == CO_MAP ->
        cws = NOSLOT;
        cww = 0;
        cme = map[k];
        if
        :: cme == MAP_NONE -> cr = C_ENOTRES; co_return()
        :: cme == MAP_PENDING -> cr = C_EAGAIN; co_return()
        :: else -> cv = MAP_SLOT(cme); cg = MAP_GEN(cme); pc = CO_WORD
        fi;
        cme = 0
       }
    :: d_step {                             /* claim_once: acquire load of the word, CAS loop */
        pc == CO_WORD ->
        cw = word[cv];
        if
        :: KEY(cw) != k || GEN(cw) != cg -> cr = C_ENOTRES     /* evicted since */
        :: else ->
            if
            :: ST(cw) == LOADING -> cws = cv; cww = cw; cr = C_EAGAIN
            :: ST(cw) == FAILED ->
#ifdef CHECK_UNPIN
                frep[cv] = 1;
#endif
#ifdef FIXES
                /* proposed fix: the claim that reports the failure ends the
                 * demand pin, as a successful claim does */
                word[cv] = cw & ~W_DEMAND;
                check_slots();
#endif
                cr = C_EFAILED
            :: ST(cw) == READY || ST(cw) == CONSUMED ->
#ifdef BAD_TWO_STEP_CLAIM
                cr = C_NONE                 /* known bad: take the reference later */
#else
                /* CONSUMED, DEMAND off, refs + 1, in the CAS that checked it */
                word[cv] = ((cw & ~(W_STATE_MASK | W_DEMAND)) | CONSUMED) + W_REF_ONE;
                held[cv]++;
                check_slots();
                cr = C_OK
#endif
            :: else -> cr = C_ENOTRES
            fi
        fi;
        if
        :: cr == C_NONE -> pc = CO_INC
        :: else -> co_return()
        fi;
        cw = 0
       }
#ifdef BAD_TWO_STEP_CLAIM
    :: d_step {                             /* known bad: the reference, unconditionally */
        pc == CO_INC ->
        word[cv] = ((word[cv] & ~(W_STATE_MASK | W_DEMAND)) | CONSUMED) + W_REF_ONE;
        held[cv]++;
        /* the reference must be on the expert and load that were checked */
        assert(KEY(word[cv]) == k && GEN(word[cv]) == cg);
        check_slots();
        cr = C_OK;
        co_return()
       }
#endif
    :: d_step {
        /* No slot to park on (map[k] PENDING, or not resident and just
         * asked for): sched_yield and poll again. Polling while the entry
         * stays PENDING changes nothing: modelled as waiting for a change
         * (of the entry, or of stop, which the loop top reads). */
        pc == CW_YIELD && (map[k] != MAP_PENDING || stop) -> poll_again()
       }
    :: d_step {
        /* The spin phase: the first SMOE__CLAIM_SPINS rounds of
         * smoe_claim_wait poll again instead of parking. Modelled as one
         * round that may (more would only repeat states). */
        pc == CW_PARK && cspin -> cspin = 0; poll_again()
       }
    :: d_step {                             /* park_on_slot: seq_cst CAS setting WAITERS */
        pc == CW_PARK ->
        cspin = 0;
        if
        :: (cww & W_WAITERS) == 0 ->
            if
            :: word[cws] == cww ->
                word[cws] = cww | W_WAITERS;
                cww = cww | W_WAITERS;
                check_slots();
                pc = CW_STOP
            :: else -> poll_again()      /* the word moved: do not sleep */
            fi
        :: else ->                      /* WAITERS was set: straight to atomic_load(&stop) */
            if
            :: stop -> park_stopped()
            :: else -> pc = CW_FUTEX
            fi
        fi
       }
    :: d_step {                             /* park_on_slot: atomic_load(&stop) */
        pc == CW_STOP ->
        if
        :: stop -> park_stopped()
        :: else -> pc = CW_FUTEX
        fi
       }
#ifdef FIXES
    :: d_step {                             /* proposed fix: atomic_fetch_and(word, ~WAITERS) */
        pc == CW_STOPCLR ->
        if
        :: (word[cws] & W_WAITERS) != 0 ->
            word[cws] = word[cws] & ~W_WAITERS;
            check_slots();
            pc = CW_STOPWAKE
        :: else -> poll_again()
        fi
       }
    :: d_step {                             /* proposed fix: smoe__park_wake(low32(word)) */
        pc == CW_STOPWAKE -> wake_slot(cws); poll_again()
       }
#endif
    :: d_step {                             /* smoe__park_wait: sleep while low32 == expected */
        pc == CW_FUTEX ->
        if
        :: LOW(word[cws]) == LOW(cww) -> csleep[id] = cws + 1; pc = CW_SLEEP
        :: else -> poll_again()
        fi
       }
    :: d_step {                             /* woken */
        pc == CW_SLEEP && csleep[id] == 0 -> poll_again()
       }
#ifndef NO_BACKSTOP
    :: atomic {                             /* the 100 ms backstop */
        pc == CW_SLEEP && timeout -> csleep[id] = 0; poll_again()
       }
#endif

    /* ---- the caller reads the blob; smoe_release (claim.c) ---- */
    :: d_step {                             /* smoe_release: release CAS loop, refs - 1 */
        pc == RL_REL ->
        /* What the caller read before releasing: the slot still holds this
         * key and gen, and its bytes are the ones this load read. (Writes
         * to data[] assert that nobody holds a reference, so a check here
         * is as strong as one at every step in between.) */
        assert(KEY(word[cv]) == k && GEN(word[cv]) == cg);
        assert(data[cv] == DATA(k, cg));
        cw = word[cv];
        assert(GEN(cw) == cg && KEY(cw) == k && ST(cw) == CONSUMED && REFS(cw) > 0);
        word[cv] = cw - W_REF_ONE;
        held[cv]--;
        check_slots();
        cw = 0;
        pc = H_DONE
       }
    od
}

/* ------------------------------------------------------------------ */
/* worker (worker.c worker_main, run_request, smoe__slot_publish)       */
/* ------------------------------------------------------------------ */

#define W_TOP    1     /* loop top: load stop, pop a request */
#define W_IDLE   2     /* (WORKER_FUTEX) idle++, load work_seq */
#define W_POP2   3     /* (WORKER_FUTEX) pop once more */
#define W_STOP2  4     /* (WORKER_FUTEX) load stop */
#define W_FUTEX  5     /* (WORKER_FUTEX) futex wait on work_seq */
#define W_SLEEP  6     /* (WORKER_FUTEX) asleep until woken */
#define W_TAKE   7     /* run_request: LOADING -> LOADING|STARTED */
#define W_READ   8     /* the read writes the slot */
#define W_PUB    9     /* the read ends; smoe__slot_publish: the release CAS */
#define W_PUT    10    /* smoe__slot_publish: smoe__spec_put */
#define W_WAKE   11    /* smoe__slot_publish: wake the slot's waiters */
#define W_EXIT   12

/* pop_request: demand first, then speculative. */
inline pop_request()
{
    if
    :: len(dq) > 0 -> dq?wv,wg; got = 1
    :: else ->
        if
        :: len(sq) > 0 -> sq?wv,wg; got = 1
        :: else -> got = 0
        fi
    fi
}

/* smoe__slot_publish's release CAS loop: READY (or FAILED), STARTED and
 * WAITERS off; then the budget unit and the wake-up, as their own steps. */
inline publish()
{
    ww = word[wv];
    assert(ST(ww) == LOADING && (ww & W_STARTED) != 0 && GEN(ww) == wg);
#ifdef BAD_FAIL_RECYCLE
    if
    :: wfail ->                             /* known bad: the slot goes back to EMPTY */
        word[wv] = (ww & ~(W_STATE_MASK | W_STARTED | W_WAITERS | W_DEMAND | W_SPEC)) | EMPTY
    :: else -> word[wv] = (ww & ~(W_STATE_MASK | W_STARTED | W_WAITERS)) | READY
    fi;
#else
    word[wv] = (ww & ~(W_STATE_MASK | W_STARTED | W_WAITERS)) |
               (wfail -> FAILED : READY);
#endif
    check_slots();
    wfail = 0;
    if
    :: (ww & W_SPEC) != 0 && (ww & W_DEMAND) == 0 -> pc = W_PUT
    :: (ww & W_SPEC) == 0 || (ww & W_DEMAND) != 0 ->
        if
        :: (ww & W_WAITERS) != 0 -> pc = W_WAKE
        :: else -> ww = 0; wv = 0; wg = 0; pc = W_TOP
        fi
    fi
}

/*
 * Without -DWORKER_FUTEX an idle worker simply waits until a queue holds a
 * request or stop is set: the idle/work_seq parking protocol is taken as
 * correct. With it, the protocol is modelled step by step (a producer's
 * push, work_seq++, load of idle and wake are then separate steps too).
 */
proctype worker(byte id)
{
    byte pc = W_TOP, wv, wg;
    bit got, wfail;
    int ww;
#ifdef WORKER_FUTEX
    byte seq;
#endif

end_worker:                                 /* waiting for work is a valid end */
    do
    :: d_step {                             /* while (!atomic_load(&stop)) */
        pc == W_TOP && stop -> pc = W_EXIT
       }
#ifdef WORKER_FUTEX
    :: d_step {
        /* pop_request. The load of stop above and the pop are two steps
         * in C; shutdown does not touch the queues, so they commute. */
        pc == W_TOP && !stop ->
        pop_request();
        if
        :: got -> pc = W_TAKE
        :: else -> pc = W_IDLE
        fi
       }
    :: d_step {
        /* atomic_fetch_add(&idle, 1); seq = atomic_load(&work_seq). A
         * producer between the two also sees idle > 0: they commute. */
        pc == W_IDLE -> idle++; seq = work_seq; pc = W_POP2
       }
    :: d_step {                             /* pop_request; on success idle-- */
        pc == W_POP2 ->
        pop_request();
        if
        :: got -> idle--; seq = 0; pc = W_TAKE
        :: else -> pc = W_STOP2
        fi
       }
    :: d_step {                             /* atomic_load(&stop) */
        pc == W_STOP2 ->
        if
        :: stop -> idle--; seq = 0; pc = W_TOP
        :: else -> pc = W_FUTEX
        fi
       }
    :: d_step {                             /* smoe__park_wait(&work_seq, seq) */
        pc == W_FUTEX ->
        if
        :: work_seq == seq -> wsleep[id] = 1; pc = W_SLEEP
        :: else -> idle--; seq = 0; pc = W_TOP
        fi
       }
    :: d_step {                             /* woken; atomic_fetch_sub(&idle, 1) */
        pc == W_SLEEP && !wsleep[id] -> idle--; seq = 0; pc = W_TOP
       }
#else
    :: d_step {                             /* pop_request (waits for work) */
        pc == W_TOP && !stop && (len(dq) > 0 || len(sq) > 0) ->
        pop_request();
        pc = W_TAKE
       }
#endif
    :: d_step {                             /* run_request: acquire load + CAS loop to STARTED */
        pc == W_TAKE ->
        ww = word[wv];
        if
        :: ST(ww) == LOADING && GEN(ww) == wg && (ww & W_STARTED) == 0 ->
            word[wv] = ww | W_STARTED;
            check_slots();
            ww = 0;
            pc = W_READ
        :: else ->                          /* cancelled, taken by another worker, or stale */
            ww = 0; wv = 0; wg = 0; pc = W_TOP
        fi
       }
    :: d_step {                             /* smoe__io_read_full starts writing the slot */
        pc == W_READ -> assert(held[wv] == 0); data[wv] = TORN; pc = W_PUB
       }
    :: d_step {
        /* The read completes: the bytes of this load are in the slot;
         * publish READY. (Only a reference holder could tell the end of
         * the read from the publish, and there is none: asserted.) */
        pc == W_PUB ->
        assert(held[wv] == 0);
        data[wv] = DATA(KEY(word[wv]), wg);
        wfail = 0;
        publish()
       }
    :: d_step {
        /* The read fails (EIO, ETRUNC, ECHECKSUM, or stopped by shutdown):
         * err[v] is set; publish FAILED. */
        pc == W_PUB -> wfail = 1; publish()
       }
    :: d_step {                             /* smoe__slot_publish: smoe__spec_put */
        pc == W_PUT ->
        spec_put();
        if
        :: (ww & W_WAITERS) != 0 -> pc = W_WAKE
        :: else -> ww = 0; wv = 0; wg = 0; pc = W_TOP
        fi
       }
    :: d_step {                             /* smoe__park_wake(low32(word), INT_MAX) */
        pc == W_WAKE -> wake_slot(wv); ww = 0; wv = 0; wg = 0; pc = W_TOP
       }
    :: pc == W_EXIT -> break
    od
}

/* ------------------------------------------------------------------ */
/* smoe_shutdown (stream.c), or no shutdown at all                      */
/* ------------------------------------------------------------------ */
proctype shutdown()
{
    byte v;
    bit sw;

    if
    :: SHUTDOWN ->
        stop = 1;                           /* atomic_store(&stop, 1) */
#ifdef WORKER_FUTEX
        work_seq++;                         /* atomic_fetch_add(&work_seq, 1) */
        d_step {                            /* smoe__park_wake(&work_seq, INT_MAX) */
            ci = 0;
            do
            :: ci < NWORKERS -> wsleep[ci] = 0; ci++
            :: else -> break
            od;
            ci = 0
        }
#endif
        do
        :: d_step {                         /* atomic_fetch_and(&word[v], ~WAITERS) */
            v < NSLOTS && !sw ->
            sw = (word[v] & W_WAITERS) != 0;
            word[v] = word[v] & ~W_WAITERS;
            check_slots();
            if
            :: !sw -> v++
            :: else -> skip
            fi
           }
        :: d_step {                         /* smoe__park_wake(low32(&word[v]), INT_MAX) */
            sw -> wake_slot(v); sw = 0; v++
           }
        :: v >= NSLOTS && !sw -> break
        od
    :: skip
    fi
}

/*
 * Once nothing can move any more (every call returned, the workers
 * parked): without a shutdown no request may be left queued and no slot
 * left LOADING; either would be a lost worker wake-up.
 */
active proctype quiescent()
{
end_wait:
    timeout;
    d_step {
        assert(stop || (len(dq) == 0 && len(sq) == 0));
        ci = 0;
        cj = 0;
        do
        :: ci < NSLOTS ->
            assert(stop || ST(word[ci]) != LOADING);
            if
            :: ST(word[ci]) == LOADING && (word[ci] & W_SPEC) != 0 &&
               (word[ci] & W_DEMAND) == 0 -> cj++
            :: else -> skip
            fi;
            ci++
        :: else -> break
        od;
        /* the speculation budget: one unit per speculative read still
         * queued or in progress, none leaked */
        assert(spec_inflight == cj);
        ci = 0;
        cj = 0
    }
}

init
{
    atomic {
        run worker(0);
#if NWORKERS > 1
        run worker(1);
#endif
#if CFG == 1
        run host(0, OP_WAIT, 1, 1);
        run host(1, OP_WAIT, 1, 1);
#elif CFG == 2
        run host(0, OP_WAIT, 1, 1);
        run host(1, OP_WAIT, 1, 1);
        run host(2, OP_CLAIM, 1, 1);
#elif CFG == 3
        run host(0, OP_WAIT, 1, 1);
        run host(1, OP_WAIT, 1, 1);
        run host(2, OP_DEMAND | OP_SPEC, 1, 1);
#elif CFG == 4
        run host(0, OP_WAIT | OP_CLAIM, 1, 1);
        run host(1, OP_WAIT, 2, 1);
        run host(2, OP_SPEC | OP_DEMAND, 3, 1);
#elif CFG == 5
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_SPEC, 1, 1);                             /* spec A */
        run host(2, OP_DEMAND, 2, 1);                           /* prefetch B */
#elif CFG == 7
        run host(0, OP_WAIT, 1, 1);
#elif CFG == 6
        /* Experts 0 (A), 1 (B), 2 (X). It starts where a demand prefetch
         * of X has finished: X READY in slot 0, pinned until claimed. */
        word[0] = READY | W_DEMAND | (2 << W_KEY_SHIFT) | (1 << W_GEN_SHIFT);
        map[2] = MAP_MAKE(0, 1);
        data[0] = DATA(2, 1);
        run host(0, OP_WAIT, 1, 1);             /* claim_wait(A) */
        run host(1, OP_CLAIM, 1, 1);            /* claim(A), release */
        /* spec B, spec A, prefetch B */
        run host(2, OP_SPEC | (OP_SPEC << 4) | (OP_DEMAND << 8), 2 | (1 << 4) | (2 << 8), 3);
#endif
        run shutdown()
    }
}
