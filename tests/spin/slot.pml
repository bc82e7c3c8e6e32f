/*
 * slot.pml - the slot protocol of libsmoe_stream as a Promela model,
 * checked with spin by tests/spin/run.sh. docs/internals/slot-protocol.md
 * explains the model, the properties and how to run it.
 *
 * Shared state, and where it is in the C code:
 *   word[v]   the packed slot word (src/slot.h): state, STARTED, WAITERS,
 *             SPEC, pins, refs, key, gen.
 *   map[k]    the residency map entry (src/slot.h): NONE, PENDING, or
 *             (slot, gen).
 *   err[v], cnext[v], cleft[v]
 *             ring.err, ring.chunk_next (the arming: gen and attempt; its
 *             chunk size; the next chunk to hand out) and ring.chunk_left
 *             (chunks not landed) of the load in progress (src/slot.h;
 *             every move of them is src/slot.c's).
 *   dq, sq    the demand and speculative queues (src/mpmc.h): FIFO
 *             channels of chunk tokens (slot, gen). sq stands for every
 *             class of src/scheduler.c below demand (hint bands, plain
 *             speculation, the idle top-up): the slot protocol treats
 *             their tokens alike, and a worker takes them only when dq
 *             is empty, as it takes sq's here.
 *   droom, sroom
 *             (ROOM) the room reserved in each queue (src/mpmc.h).
 *   data[v*NU+u]
 *             what unit u of slot v holds: DATA(key, gen) once that load's
 *             read of it succeeded, TORN after a failed one.
 *   stop, work_seq, idle, spec_inflight: the stream's fields of those names.
 *
 * Processes: host (a thread calling smoe_prefetch, smoe_claim_wait,
 * smoe_claim, smoe_release, smoe_cancel), worker (src/worker.c), shutdown
 * (smoe_shutdown in src/stream.c, smoe__slots_shutdown in src/slot.c),
 * quiescent (checks the final state).
 *
 * Steps. Every process is a loop over a program counter `pc`; each option
 * of the loop is one step: one atomic operation of the C code on shared
 * state (a load, a store, a CAS, an RMW, a queue push or pop, a futex wait
 * or wake) together with the thread-local work that follows it up to the
 * next shared access. Each step is commented with the C function it
 * models. A C CAS loop whose every iteration reloads the word and decides
 * again from it, with no other effect between iterations (smoe__slot_claim,
 * smoe__slot_join, smoe__slot_release, smoe__slot_start, the STARTED clear
 * of smoe__slot_arm, smoe__slot_cancel, smoe__slot_publish), is one atomic
 * read-modify-write step: the loop ends with the CAS that succeeds (or a
 * decision on a value loaded), and that is the step. A CAS from a word
 * seen earlier (the victim CAS of smoe__slot_reserve, the WAITERS CAS of
 * smoe__slot_park, the map CASes) stays a CAS from that older value; so
 * does smoe__slot_take_chunk's CAS, whose chunk size comes from the value loaded
 * (with two workers, or OLD_CHUNK_REARM, the load and the CAS are steps of
 * their own). Where two operations of one thread are merged into one step,
 * the comment of the step says why no other thread can tell.
 *
 * Futexes: a parked thread sleeps until a wake on its address clears its
 * csleep / wsleep entry; the wait compares the word with the value it
 * expects in the same step as falling asleep, as the kernel does. The
 * 100 ms backstop of smoe__slot_park (SMOE__PARK_MAX_NS) is left out, so a
 * lost wake-up is an invalid end state (a thread asleep for ever); with
 * -DBACKSTOP it is a wake-up that comes once nothing else can move.
 *
 * Not modelled: LRU ticks (within a victim class either slot may win),
 * empty_hint (the scan starts at slot 0), statistics and t_queued,
 * verification of the blob's checksum (a chunk's read fails instead),
 * pre-warm (SMOE__W_TOPUP, smoe__evict_pick_topup), the claim_wait
 * timeout, SMOE_EREFS (pins stop at 3: asserted never reached), queue room
 * outside the ROOM configuration (their queues never fill: asserted),
 * which error code a failed read reports (err is 0 or the key and gen of
 * the load that failed), the fault record (its seqlock keeps a copy of
 * one failure: tests/test_slot_races.c, error_and_fault_of_one_failure),
 * and memory orders (spin explores sequentially consistent interleavings).
 * Busy-waits that only re-read until something changes (PENDING) are
 * waits for the change.
 *
 * Switches (spin -D...):
 *   CFG=n                 the configuration: slots, experts, workers and
 *                         the calls each host makes (below, and in init).
 *   WORKER_FUTEX          model the workers' idle/work_seq futex protocol
 *                         step by step; without it an idle worker waits
 *                         for a token or stop.
 *   BACKSTOP              add smoe__slot_park's 100 ms backstop.
 *   ROOM                  model the queues' room reservations (set by the
 *                         configurations that limit the room, cfg16).
 * Known-bad variants, each of which spin must reject:
 *   BAD_FAIL_RECYCLE      a failed read gives its slot back as EMPTY instead
 *                         of publishing FAILED: a claim_wait asks for the
 *                         expert again and again while the read keeps
 *                         failing (non-progress cycle).
 *   BAD_TWO_STEP_CLAIM    a claim loads the word, sees READY, and takes its
 *                         reference with a second, unconditional RMW: an
 *                         evictor slips in between and the claimer holds a
 *                         reference to another expert's slot (assertion).
 *   BAD_ARM_UNSTARTED     a reservation does not set STARTED until its load
 *                         is armed: an evictor (or smoe_cancel) cancels the
 *                         load before the arming, the slot is re-armed for
 *                         another expert, and the late arming stores of the
 *                         first overwrite the chunk counters of the second,
 *                         whose load is stranded in LOADING (invalid end
 *                         state).
 *   BAD_UNTAGGED_CHUNKS   chunk_next holds the chunk index only, without
 *                         the generation: a token that arrives before its
 *                         load is armed takes a chunk of whatever load the
 *                         counters were left at (assertion).
 * Earlier behaviours of the C code, each of which spin must reject:
 *   OLD_STOP_PARK         smoe__slot_park returns on stop without clearing
 *                         WAITERS: a second claimer sleeps through the
 *                         shutdown (invalid end state).
 *   OLD_ASK_ONCE          smoe_claim_wait asks (upgrades a speculative read)
 *                         once per call, and an eviction wakes nobody: a
 *                         claimer parked on a speculative read sleeps
 *                         through its cancellation (invalid end state).
 *   PIN_FAILED            a claim that reports a FAILED slot's error leaves
 *                         its pin on it: the slot stays pinned and a load of
 *                         another expert finds no room (assertion).
 *   FAILED_ERR_ONCE       a claim that sees FAILED returns the error it
 *                         then reads, also 0 when a retry re-armed the slot
 *                         in between: success without a reference
 *                         (assertion).
 *   UNPIN_BEFORE_ERR      a claim that sees a FAILED demand read removes
 *                         its pin before it reads the error: an evictor takes
 *                         the unpinned slot in between and re-arms it for
 *                         another expert (err 0), the claim looks again,
 *                         finds its expert gone and asks for it again; two
 *                         claim_waits whose reads keep failing do that to
 *                         each other for ever (non-progress cycle). The
 *                         model reads the error first, while the pin still
 *                         holds the slot, and then removes it by a CAS from
 *                         the word it read the error under.
 *   OLD_CHUNK_REARM       (issue 14, item 1) chunk_next holds the gen and
 *                         the index only and the chunk size is a field of
 *                         its own: a worker stalled between its load of
 *                         chunk_next (and of the size) and its CAS, while
 *                         the load fails and a retry re-arms it under the
 *                         same gen in another chunk size, takes a chunk of
 *                         the new arming in the old size and publishes the
 *                         load while its read is in flight (assertion).
 *   OLD_DEMAND_BIT        (issue 14, item 3) one DEMAND bit instead of a pin
 *                         count: two demand prefetches share one pin, the
 *                         first claim ends it, and the slot is evicted
 *                         before the second prefetch's claim (assertion).
 *   OLD_QUEUE_WAIT        (issue 14, item 2) no room reservations: a
 *                         speculative read's tokens are pushed into a
 *                         queue that a cancelled read's tokens fill (the C
 *                         code waited there for a worker; assertion).
 *   OLD_FAILED_UNPINNED   (F1) a claim that saw a FAILED word without pins
 *                         reports the error it then reads, without checking
 *                         its gen or loading the word again: another
 *                         expert's load takes the slot in between and
 *                         fails, and the claim reports that error as its
 *                         own expert's (assertion).
 */

#ifndef CFG
#define CFG 1
#endif

/*
 * Blobs and chunks: every blob is NU units; demand loads (and retries) are
 * read in chunks of CH_D units, speculative ones in chunks of CH_S units
 * (s->chunk and s->spec_chunk), so a blob has NCH_D or NCH_S chunks. The
 * configurations up to cfg13 have one size (two chunks of one unit each).
 */
#define NU 2

/*
 * Configurations: slots, experts, workers, hosts (threads calling the
 * API); the calls each host makes are in init, at the end.
 */
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
/* one slot, one expert: claim_wait, claim, and a speculative or a demand
 * prefetch: joins, upgrades (duplicate tokens), same-gen retries of failed
 * reads under claimers that saw the failure */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 4
/* one slot, two experts: claim_wait of each, a demand or speculative
 * prefetch of one: eviction, cancellation by an evictor, stale map
 * entries, EFULL */
#define NSLOTS 1
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 5
/* one slot, one expert, two workers: a claim_wait's ask upgrades a
 * speculative read, whose chunks two workers race for */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 2
#define NHOSTS 2
#elif CFG == 6
/* two slots, two experts: two prefetches of one expert racing for a slot
 * while a speculative read of the other takes one */
#define NSLOTS 2
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 7
/* one slot, one expert: one claim_wait caller, shutdown */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 1
#elif CFG == 8
/* one slot, two experts: smoe_cancel of a speculative read racing its
 * arming, the slot re-armed for another expert that a claim_wait waits on */
#define NSLOTS 1
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 9
/* one slot, two experts: claim_wait of each, nothing else (two waiters
 * evicting each other's failed slot) */
#define NSLOTS 1
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 2
#elif CFG == 10
/* one slot, one expert: claim_wait, and a speculative then a demand
 * prefetch from one thread */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 2
#elif CFG == 11
/* two slots, two experts, two workers: claim_wait and a speculative
 * prefetch of one, a demand prefetch of the other (run.sh --extended) */
#define NSLOTS 2
#define NKEYS 2
#define NWORKERS 2
#define NHOSTS 3
#elif CFG == 12
/* one slot, one expert: two claim_wait callers, and a speculative then a
 * demand prefetch (run.sh --extended) */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 13
/* two slots, three experts: a claim_wait parked on a speculative read that
 * a demand prefetch cancels, reachable only with OLD_ASK_ONCE (run.sh
 * --extended) */
#define NSLOTS 2
#define NKEYS 3
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 14
/* one slot, two experts: two threads each demand-prefetch A and claim it
 * (one waits, one polls), a third waits for B, which needs A's slot: A
 * stays pinned until both prefetches are honoured (issue 14, item 3) */
#define NSLOTS 1
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 3
#elif CFG == 15
/* one slot, one expert, two workers, two chunk sizes: a speculative read
 * in two chunks, upgraded and then retried by demand prefetches in one
 * chunk (the re-arming of issue 14, item 1) */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 2
#define NHOSTS 2
#define CH_D 2
#define CH_S 1
#elif CFG == 16
/* one slot, one expert, queues with room for 2 tokens (demand: 1): a
 * speculative read, cancelled, asked for again while its tokens are still
 * queued; a claim_wait whose ask finds no room for an upgrade's tokens
 * (issue 14, item 2) */
#define NSLOTS 1
#define NKEYS 1
#define NWORKERS 1
#define NHOSTS 2
#define CH_D 2
#define CH_S 1
#define ROOM
#define QCAP 2
#define SROOM 2
#define DROOM 1
#elif CFG == 17
/* one slot, two experts: claim_wait(A) and claim(A), claim_wait(B): A's
 * failed read reported and unpinned, a claim of A between its load of the
 * word and of the error while B takes the slot and fails (F1) */
#define NSLOTS 1
#define NKEYS 2
#define NWORKERS 1
#define NHOSTS 3
#endif

/*
 * Blobs and chunks (continued): the chunk sizes in units, unless the
 * configuration sets them.
 */
#ifndef CH_D
#define CH_D 1
#endif
#ifndef CH_S
#define CH_S 1
#endif
#define NCH_D (NU / CH_D)
#define NCH_S (NU / CH_S)

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
#ifndef QCAP
#define QCAP 8
#endif

/* ---- the slot word (src/slot.h) ---- */
#define EMPTY    0
#define LOADING  1
#define READY    2
#define CONSUMED 3
#define FAILED   4

#define W_STATE_MASK 7
#define W_STARTED    8    /* SMOE__W_STARTED: not cancellable (reserved, or a worker took a chunk) */
#define W_WAITERS    16   /* SMOE__W_WAITERS: a claimer is parked */
#define W_SPEC       32   /* SMOE__W_SPEC: speculative read */
#define W_PIN_ONE    64   /* pins: bits 6..7 (SMOE__W_PIN_ONE): demand prefetches awaiting a claim */
#define W_PIN_MASK   192
#define W_REF_ONE    256  /* refs: bits 8..11 */
#define W_KEY_SHIFT  12   /* key: bits 12..15 */
#define W_GEN_SHIFT  16   /* gen: bits 16.. */

#define ST(w)    ((w) & W_STATE_MASK)
#define PINS(w)  (((w) >> 6) & 3)
#define REFS(w)  (((w) >> 8) & 15)
#define KEY(w)   (((w) >> W_KEY_SHIFT) & 15)
#define GEN(w)   ((w) >> W_GEN_SHIFT)
/* A demand prefetch adds a pin, a claim (that takes a reference or reports
 * a failed read) removes one if there is any. OLD_DEMAND_BIT: one DEMAND
 * bit that any number of demand prefetches set and the first claim
 * clears. The model's pins saturate at 3 (asserted never reached; the C
 * code's limit, SMOE_EREFS, is not modelled). */
#ifdef OLD_DEMAND_BIT
#define PIN_ADD(w)  ((w) | W_PIN_ONE)
#define PIN_DROP(w) ((w) & ~W_PIN_MASK)
#else
#define PIN_ADD(w)  ((w) + W_PIN_ONE)
#define PIN_DROP(w) (PINS(w) != 0 -> (w) - W_PIN_ONE : (w))
#endif
/* What a futex on the word compares: the C code parks on its low 32 bits
 * (state, flags, pins, refs, the key's low bits); the gen is above them. */
#define LOW(w)   ((w) & 65535)
/* A queued speculative read nobody has begun: what smoe_cancel and a
 * demand evictor may cancel (evict.c victim_class, prefetch.c smoe_cancel). */
#define CANCELLABLE(w) \
    (ST(w) == LOADING && ((w) & W_STARTED) == 0 && PINS(w) == 0 && ((w) & W_SPEC) != 0)
/* smoe__w_new_load: LOADING, flags, no refs, the new key, gen + 1. The C
 * gen wraps at 2^20, this one at GEN_MOD; the configurations load far
 * fewer times than that (asserted where a gen is bumped), except the
 * variants whose reloads are unbounded (BAD_FAIL_RECYCLE,
 * UNPIN_BEFORE_ERR): there the wrap closes the loop into a cycle of states
 * that spin can find. */
#define GEN_MOD 16
#if defined(BAD_FAIL_RECYCLE) || defined(UNPIN_BEFORE_ERR)
#define GEN_WRAPS
#endif
#define NEW_LOAD(old, k, flags) \
    (LOADING | (flags) | ((k) << W_KEY_SHIFT) | \
     (((GEN(old) + 1) % GEN_MOD) << W_GEN_SHIFT))
/* What a reservation adds (smoe__slot_reserve, smoe__slot_join's retry):
 * STARTED until smoe__slot_arm has armed the chunk counters. */
#ifdef BAD_ARM_UNSTARTED
#define W_RESERVED 0
#else
#define W_RESERVED W_STARTED
#endif

/* ---- the residency map entry (src/slot.h) ---- */
#define MAP_NONE    0
#define MAP_PENDING 1
#define MAP_MAKE(v, g) (((g) << 8) | ((v) + 2))
#define MAP_SLOT(m)    (((m) & 255) - 2)
#define MAP_GEN(m)     ((m) >> 8)

/*
 * ---- chunk_next (src/slot.h): gen, attempt, SPEC_CHUNK, next chunk; here
 * gen << 6 | attempt << 3 | spec_chunk << 2 | chunk ----
 * OLD_CHUNK_REARM: the earlier protocol, gen << 6 | chunk only (attempt and
 * size bit 0), with the chunk size in a field of its own (csize, the C
 * ring.chunk_size) that the arming stores before chunk_next and a worker
 * reads between its load of chunk_next and its CAS.
 */
#define CN_MAKE(g, a, f) (((g) << 6) | (((a) & 7) << 3) | ((f) << 2))
#define CN_IDX(c)   ((c) & 3)
#define CN_FLAG(c)  (((c) >> 2) & 1)
#define CN_ATT(c)   (((c) >> 3) & 7)
#define CN_GEN(c)   ((c) >> 6)
#define CN_TAG(c)   ((c) >> 3)          /* the arming: gen and attempt */
#ifdef BAD_UNTAGGED_CHUNKS
#define CN_TAG_OK(c, g) true
#else
#define CN_TAG_OK(c, g) (CN_GEN(c) == (g))
#endif
/* chunks of a load armed with the demand (f 0) or the speculative size */
#define NCH_OF(f)   ((f) -> NCH_S : NCH_D)
#define CH_OF(f)    ((f) -> CH_S : CH_D)

/* ---- ring.err (src/slot.h): an error and the load that set it. The C
 * word carries the arming (gen, attempt); the model names the load by its
 * key and gen, so that a claim can be checked to report its own
 * expert's error. ---- */
#define ERRV(k, g)  ((((g) << 4) | (k)) + 1)
#define ERRKEY(e)   (((e) - 1) & 15)
#define ERRGEN(e)   (((e) - 1) >> 4)
#ifdef OLD_FAILED_UNPINNED
#define ERR_OF_GEN(e, w) true
#else
#define ERR_OF_GEN(e, w) (ERRGEN(e) == GEN(w))
#endif

/* ---- the slots' bytes ---- */
#define TORN (-1)
#define DATA(k, g) (((g) << 4) | (k))

/* ---- victim classes (src/policy/evict.c victim_class); NEVER: not a victim ---- */
#define NEVER 9
#define VCLASS(w, dem) \
    ((REFS(w) != 0 || PINS(w) != 0) -> NEVER : \
     (ST(w) == FAILED -> 0 : \
      (ST(w) == CONSUMED -> 1 : \
       (ST(w) == READY -> (((w) & W_SPEC) != 0 -> 2 : NEVER) : \
        (ST(w) == LOADING -> \
            ((((w) & W_STARTED) != 0 || ((w) & W_SPEC) == 0 || !(dem)) -> NEVER : 3) : \
         NEVER)))))

/* ---- results ---- */
#define NOSLOT 255
#define P_NONE      0
#define P_QUEUED    1   /* SMOE_QUEUED */
#define P_RESIDENT  2   /* SMOE_RESIDENT */
#define P_INFLIGHT  3   /* SMOE_INFLIGHT */
#define P_SKIPPED   4   /* SMOE_SKIPPED */
#define P_EFULL     5   /* SMOE_EFULL */

#define C_NONE      0
#define C_OK        1   /* SMOE_READY or SMOE_HIT (a claim: one reference taken) */
#define C_EAGAIN    2   /* SMOE_EAGAIN */
#define C_ENOTRES   3   /* SMOE_ENOTRESIDENT */
#define C_EFAILED   4   /* SMOE_EIO, SMOE_ETRUNC, SMOE_ECHECKSUM */
#define C_ESHUTDOWN 5   /* SMOE_ESHUTDOWN */
#define C_EFULL     6   /* SMOE_EFULL from claim_wait's demand prefetch */
#define C_EBUSY     7   /* smoe_cancel: SMOE_EBUSY */

/* ---- what a host may call (8 bits per call) ---- */
#define OP_DEMAND  1    /* smoe_prefetch(layer, expert, 0) */
#define OP_SPEC    2    /* smoe_prefetch(..., SMOE_PREFETCH_SPECULATIVE) */
#define OP_WAIT    4    /* smoe_claim_wait(..., UINT64_MAX), then smoe_release */
#define OP_CLAIM   8    /* smoe_claim, then smoe_release */
#define OP_CANCEL  16   /* smoe_cancel */

/* ---- shared state ---- */
int word[NSLOTS];          /* ring.word */
int map[NKEYS];            /* s->map */
short err[NSLOTS];         /* ring.err: 0, or the error of a load, ERRV(key, gen) */
short cnext[NSLOTS];       /* ring.chunk_next (CN_MAKE) */
#ifdef OLD_CHUNK_REARM
byte csize[NSLOTS];        /* ring.chunk_size of the earlier protocol: units per chunk */
#endif
byte cleft[NSLOTS];        /* ring.chunk_left */
short data[NSLOTS * NU];   /* the slots' bytes, unit by unit */
bool stop;                 /* s->stop */
byte spec_inflight;        /* s->spec_inflight */
byte work_seq;             /* s->work_seq */
byte idle;                 /* s->idle */
bool wsleep[NWORKERS];     /* worker i is parked on work_seq */
byte csleep[NHOSTS];       /* host i is parked on slot csleep[i] - 1 (0: awake) */
/* ghosts */
byte held[NSLOTS];         /* references the hosts hold */
bool frep[NSLOTS];         /* a claim has taken on this FAILED slot's error */
byte armt[NSLOTS];         /* the arming last made in the slot: CN_TAG (gen, attempt) */
bit rd[NSLOTS * NU];       /* unit u of the armed load has been read */
byte taken[NSLOTS];        /* chunks of the armed load handed out */
byte owe[NKEYS];           /* demand prefetches (and asks) of k not yet honoured by a claim */
#ifdef ROOM
byte droom, sroom;         /* queue room reserved (demand_q.reserved, spec_q.reserved) */
#endif
chan dq = [QCAP] of { byte, byte };   /* s->demand_q: (slot, gen) */
chan sq = [QCAP] of { byte, byte };   /* s->spec_q */
hidden byte ci, cj;        /* loop counters inside d_steps only */

/*
 * Invariants of the slot words, checked in every step that changes one:
 * the references in a word are those the hosts hold (none lost, none
 * negative); WAITERS and STARTED only on LOADING; a LOADING or READY slot
 * is demand or speculative (pinned or evictable, never leaked); references
 * only on CONSUMED; no two slots hold one key; a load that a worker has
 * taken a chunk of is not cancellable.
 */
inline check_slots()
{
    ci = 0;
    do
    :: ci < NSLOTS ->
        assert(REFS(word[ci]) == held[ci]);
        assert((word[ci] & W_WAITERS) == 0 || ST(word[ci]) == LOADING);
        assert((word[ci] & W_STARTED) == 0 || ST(word[ci]) == LOADING);
        assert(ST(word[ci]) != READY || (word[ci] & W_SPEC) != 0 || PINS(word[ci]) != 0);
        assert(ST(word[ci]) != LOADING || (word[ci] & W_SPEC) != 0 || PINS(word[ci]) != 0);
        assert(REFS(word[ci]) == 0 || ST(word[ci]) == CONSUMED);
        assert(ST(word[ci]) <= FAILED);
        assert(!CANCELLABLE(word[ci]) || (armt[ci] >> 3) != GEN(word[ci]) || taken[ci] == 0);
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

/*
 * smoe_prefetch's contract, in the terms of the API: each demand prefetch
 * of K (or claim_wait's own) that succeeds owes K a claim, and each claim
 * of K that takes a reference or reports a failed read pays one debt, if
 * there is any. A slot holding K is taken from it (evicted, or cancelled)
 * only when nothing is owed.
 */
inline owe_claim(K)
{
    owe[K]++
}
inline pay_claim(K)
{
    if
    :: owe[K] > 0 -> owe[K]--
    :: else -> skip
    fi
}
inline check_honoured(K)
{
    assert(owe[K] == 0)
}

/* internal.h smoe__spec_put: give a speculation budget unit back. */
inline spec_put()
{
    assert(spec_inflight > 0);
    spec_inflight--
}

/* platform/park_linux.c smoe__park_wake(&work_seq, n), n >= the number of workers here:
 * every parked worker. */
inline wake_workers()
{
    ci = 0;
    do
    :: ci < NWORKERS -> wsleep[ci] = 0; ci++
    :: else -> break
    od;
    ci = 0
}

/* platform/park_linux.c smoe__park_wake(low32(&word[V]), INT_MAX): every host parked on V. */
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
#define PF_BUDGET  13   /* load_into_new_slot: spec_budget_take */
#define PF_PICK    14   /* smoe__evict_pick: load word[ei] */
#define PF_TAKE    15   /* smoe__slot_reserve: the victim CAS */
#define PF_EVICTED 16   /* smoe__map_clear: the old key's entry */
#define PF_EVPUT   17   /* count_eviction: a cancelled read's budget unit */
#define PF_STORE   18   /* smoe__map_point: store map[k] = (slot, gen) */
#define PF_PUTUN   19   /* no_slot: no victim, give the budget unit back */
#define PF_UNPEND  20   /* smoe__map_unreserve: map[k] = NONE */
#define PF_FOUND   21   /* smoe__slot_join: load the word, CAS it */
#define PF_UPPUT   22   /* upgrade: the budget unit back */
#define PF_STALE   23   /* smoe__prefetch_key: clear a stale entry */
#define PF_EVWAKE  24   /* smoe__slot_wake_waiters: the old word's */
#define PF_ROOM    27   /* load_into_new_slot: smoe__mpmc_reserve (ROOM) */
#define AR_ARM     25   /* smoe__slot_arm: err, chunk_left, chunk_next */
#define AR_CLR     26   /* smoe__slot_arm: CAS loop clearing STARTED */
#define AR_NEXT    28   /* (OLD_CHUNK_REARM) smoe__slot_arm: store chunk_next */
#define Q_PUSH     30   /* smoe__workers_enqueue: smoe__mpmc_push, one token */
#define Q_SEQ      31   /* notify_workers: work_seq++ */
#define Q_IDLE     32   /* ... load idle */
#define Q_WAKE     33   /* ... futex wake n workers */
#define CW_TOP     40   /* smoe_claim_wait: loop top, load stop */
#define CO_MAP     42   /* claim_once: smoe__map_lookup */
#define CO_WORD    43   /* smoe__slot_claim: load the word, CAS loop */
#define CW_YIELD   44   /* smoe_claim_wait: sched_yield, poll again */
#define CW_PARK    45   /* smoe__slot_park: CAS WAITERS (or load stop) */
#define CW_STOP    46   /* smoe__slot_park: load stop */
#define CW_FUTEX   47   /* smoe__slot_park: futex wait: compare and sleep */
#define CW_SLEEP   48   /* ... asleep until woken */
#define CO_INC     49   /* (BAD_TWO_STEP_CLAIM) the separate increment */
#define CO_ERR     51   /* smoe__slot_claim, claim_failed: load err */
#define CO_UNPIN   54   /* smoe__slot_claim, claim_failed: CAS a pin off */
#define CO_RECHK   55   /* smoe__slot_claim, claim_failed: load the word again (no pin) */
#define CW_STOPCLR 52   /* smoe__slot_park saw stop: clear WAITERS */
#define CW_STOPWAKE 53  /* ... and wake the slot */
#define RL_REL     50   /* the caller reads the blob, smoe_release */
#define CA_MAP     60   /* smoe_cancel: load map[k] */
#define CA_WORD    61   /* smoe_cancel: load the word, CAS loop to EMPTY */
#define CA_MAPCLR  62   /* smoe_cancel: CAS map[k] -> NONE */
#define CA_PUT     63   /* smoe_cancel: smoe__spec_put */
#define CA_WAKE    64   /* smoe_cancel: wake the old word's waiters */

/* return addresses */
#define RET_TOP   0     /* prefetch: back to the caller of smoe_prefetch */
#define RET_WAIT  1     /* prefetch / claim_once: back into smoe_claim_wait */
#define RET_CLAIM 2     /* claim_once: back into smoe_claim */

/* Forget the prefetch's locals (smaller state space; they are dead). */
inline pf_clear()
{
    pme = 0; pv = 0; pg = 0; pw = 0; pnw = 0; ew = 0;
    ei = 0; eclass = 0; ebest = 0; ebw = 0; efailed = 0; qdem = 0; qv = 0; qg = 0; qn = 0;
    pr = P_NONE
}

/* A claim reports the failed read's error ce: it must be the claimed
 * expert's, of the load the claim found in the map (the same gen). */
inline report_failed()
{
    assert(ERRKEY(ce) == k && ERRGEN(ce) == cg);
    cr = C_EFAILED;
    co_return()
}

/* A claim returned cr: release path or done. A claim that reports success
 * holds a reference. */
inline claim_done()
{
    assert(cr != C_OK || cref);
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

/* The condition on which smoe_claim_wait asks (a demand prefetch): not
 * resident, or a read in flight that is not a demand read (which the ask
 * upgrades and pins). */
#ifdef OLD_ASK_ONCE
#define ASK_AGAIN (!casked)
#else
#define ASK_AGAIN true
#endif

/*
 * claim_once returned cr (cws/cww: a LOADING slot to park on). From
 * smoe_claim: done. From smoe_claim_wait: done unless EAGAIN or
 * ENOTRESIDENT; then ask, or park, or poll.
 */
inline co_return()
{
    if
    :: cret == RET_CLAIM -> claim_done()
    :: else ->
        if
        :: cr != C_EAGAIN && cr != C_ENOTRES -> claim_done()
        :: cr == C_ENOTRES ||
           (cr == C_EAGAIN && ASK_AGAIN && cws != NOSLOT && PINS(cww) == 0) ->
#ifdef OLD_ASK_ONCE
            casked = 1;
#endif
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
 * dead (it will look again). Without a shutdown stop stays 0, so the loads
 * of stop that are steps of their own (CW_TOP, CW_STOP) read a constant
 * and are left out. */
inline poll_again()
{
    cws = 0; cww = 0; cv = 0; cg = 0; cr = C_NONE;
#if SHUTDOWN
    pc = CW_TOP
#else
    pc = CO_MAP                             /* no shutdown: stop stays 0 */
#endif
}

/*
 * smoe__slot_park saw stop: clear WAITERS and wake the slot's sleepers (as
 * smoe_shutdown does), then return (the loop top returns ESHUTDOWN). This
 * claimer may have set WAITERS again after smoe_shutdown cleared it, under
 * a claimer that saw stop == 0 and is about to sleep.
 */
inline park_stopped()
{
#ifdef OLD_STOP_PARK
    poll_again()
#else
    pc = CW_STOPCLR
#endif
}

/* load_into_new_slot, the previous owner, after smoe__map_clear: a
 * cancelled speculative read gives its budget unit back (count_eviction);
 * then the old word's waiters are woken (smoe__slot_wake_waiters). */
inline evicted_wake()
{
    if
#ifndef OLD_ASK_ONCE
    :: (pw & W_WAITERS) != 0 -> pc = PF_EVWAKE
#endif
    :: else -> pc = PF_STORE
    fi
}
inline evicted_put()
{
    if
    :: ST(pw) == LOADING && (pw & W_SPEC) != 0 -> pc = PF_EVPUT
    :: else -> evicted_wake()
    fi
}

/* The scan of smoe__evict_pick starts over. */
inline pick_start()
{
    ei = 0; eclass = 4; ebest = NOSLOT; ebw = 0; ew = 0; efailed = 0
}

/* smoe__slot_arm(V, G, DEM), then smoe__workers_enqueue: arm the load,
 * then queue its tokens (one
 * per chunk: NCH_D, or NCH_S for a speculative load) on the demand queue
 * if DEM, else on the speculative one. Only the result pr is still needed
 * after that. */
inline load_start(DEM, V, G)
{
    qdem = DEM; qv = V; qg = G; qn = (DEM -> NCH_D : NCH_S); pc = AR_ARM;
    pme = 0; pv = 0; pg = 0; pw = 0; pnw = 0; ew = 0; ei = 0; eclass = 0; ebest = 0; ebw = 0;
    efailed = 0
}

/* smoe__workers_enqueue(V, G, NCH_S, 1): more demand tokens (an upgrade of a
 * load armed in speculative chunks). */
inline load_tokens(V, G)
{
    qdem = 1; qv = V; qg = G; qn = NCH_S; pc = Q_PUSH;
    pme = 0; pv = 0; pg = 0; pw = 0; pnw = 0
}

/*
 * Queue room (ROOM): the C code reserves room for a load's tokens before it
 * takes a slot (load_into_new_slot), a retry's before its CAS (join_slot),
 * an upgrade's after it (upgrade), and a worker gives one token's back
 * after its pop.
 * Configurations without ROOM never run out of room (their queues never
 * hold more than QCAP tokens: asserted at every push), so the counters
 * are left out there. A reservation, and the room a worker gives back, is
 * merged into the step next to it: a thread may see less room for a moment
 * in the C code than here, and be refused where the model is not; a
 * refusal is a return that changes nothing, which the ROOM configurations
 * check. OLD_QUEUE_WAIT: the earlier protocol, no reservations (a push
 * waited for room: the assertion at the push).
 */
#if defined(ROOM) && !defined(OLD_QUEUE_WAIT)
#define RESERVE 1
#endif

/*
 * A host thread makes nops calls. Call i (from 0) is any of the calls in
 * the 8-bit mask (ops >> 8i) & 255 (OP_*), for any of the experts in the
 * 4-bit mask (keys >> 4i) & 15.
 */
proctype host(byte id; int ops; int keys; byte nops)
{
    byte pc = H_NEXT, n, k;
    /* smoe__prefetch_key, smoe_cancel */
    bit pspec;
    byte pret, pr, pv, pg, ei, eclass, ebest;
    bit efailed;
    int pme, pw, pnw, ew, ebw;
    /* smoe__slot_arm, smoe__workers_enqueue */
    bit qdem;
    byte qv, qg, qn;
    /* claim */
    bit cspin, cref;
#ifdef OLD_ASK_ONCE
    bit casked;
#endif
    byte cret, cr, cv, cg, cws;
    int cme, cw, cww;
    short ce;                               /* the error a FAILED claim read */

    do
    /* ---- the next call ---- */
    :: atomic {
        /* Choose the call and its expert; every call but smoe_cancel
         * starts with atomic_load(&stop), done in this step (the choice
         * is local). */
        pc == H_NEXT && n < nops ->
        if
        :: (keys >> (4 * n)) & 1 -> k = 0
        :: (keys >> (4 * n)) & 2 -> k = 1
        :: (keys >> (4 * n)) & 4 -> k = 2
        fi;
        if
        :: (ops >> (8 * n)) & OP_DEMAND -> pspec = 0; pret = RET_TOP; pc = PF_MAP
        :: (ops >> (8 * n)) & OP_SPEC -> pspec = 1; pret = RET_TOP; pc = PF_MAP
        :: (ops >> (8 * n)) & OP_WAIT -> cspin = 1; cret = RET_WAIT; pc = CO_MAP
        :: (ops >> (8 * n)) & OP_CLAIM -> cret = RET_CLAIM; pc = CO_MAP
        :: (ops >> (8 * n)) & OP_CANCEL -> pc = CA_MAP
        fi;
        n++;
        if
        :: stop && pc != CA_MAP -> pc = H_DONE              /* SMOE_ESHUTDOWN */
        :: else -> skip
        fi
       }
    :: pc == H_NEXT && n >= nops -> break
    :: pc == H_DONE ->
progress_call:                              /* a call returned */
        atomic { pc = H_NEXT; k = 0; cr = C_NONE; cv = 0; cg = 0; cws = 0; cww = 0;
                 cret = 0; pret = 0; pspec = 0; cspin = 0; cref = 0; pf_clear();
#ifdef OLD_ASK_ONCE
                 casked = 0
#endif
        }

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
    :: d_step {                             /* smoe__map_try_reserve: CAS map[k] NONE -> PENDING */
        pc == PF_PEND ->
        if
        :: map[k] == MAP_NONE ->
            map[k] = MAP_PENDING;
            pick_start();
            if
            :: pspec -> pc = PF_BUDGET
            :: else -> pc = PF_ROOM
            fi
        :: else -> pc = PF_MAP
        fi
       }
    :: d_step {                             /* load_into_new_slot: spec_budget_take (CAS loop) */
        pc == PF_BUDGET ->
        if
        :: spec_inflight < SPEC_CAP -> spec_inflight++; pc = PF_ROOM
        :: else -> pr = P_SKIPPED; pc = PF_UNPEND
        fi
       }
    :: d_step {                             /* load_into_new_slot: smoe__mpmc_reserve of the load's tokens */
        pc == PF_ROOM ->
#ifdef RESERVE
        if
        :: pspec && sroom + NCH_S <= SROOM -> sroom = sroom + NCH_S; pc = PF_PICK
        :: !pspec && droom + NCH_D <= DROOM -> droom = droom + NCH_D; pc = PF_PICK
        :: pspec && sroom + NCH_S > SROOM -> pr = P_SKIPPED; pc = PF_PUTUN   /* before a slot */
        :: !pspec && droom + NCH_D > DROOM -> pr = P_EFULL; pc = PF_UNPEND
        fi
#else
        pc = PF_PICK
#endif
       }
    :: atomic {                             /* smoe__evict_pick: acquire load of word[ei] */
        pc == PF_PICK ->
        ew = word[ei];
        if
        :: ST(ew) == FAILED && frep[ei] -> efailed = 1
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
            /* FAILED slots are the first choice of eviction
             * (docs/decisions.md): once a claim has reported its error,
             * a FAILED slot may not keep a load from finding room */
            assert(!efailed);
#ifdef RESERVE
            if                              /* smoe__mpmc_unreserve */
            :: pspec -> sroom = sroom - NCH_S
            :: else -> droom = droom - NCH_D
            fi;
#endif
            if
            :: pspec -> pr = P_SKIPPED; pc = PF_PUTUN
            :: else -> pr = P_EFULL; pc = PF_UNPEND
            fi
        :: else -> skip
        fi;
        ew = 0
       }
    :: d_step {                             /* smoe__slot_reserve: acq_rel CAS word[v]: w -> new load */
        pc == PF_TAKE ->
#ifndef GEN_WRAPS
        assert(GEN(pw) + 1 < GEN_MOD);
#endif
        pnw = NEW_LOAD(pw, k, W_RESERVED | (pspec -> W_SPEC : W_PIN_ONE));
        if
        :: word[pv] == pw ->
            word[pv] = pnw;
            frep[pv] = 0;
            if
            :: ST(pw) != EMPTY -> check_honoured(KEY(pw))
            :: else -> skip
            fi;
            if
            :: !pspec -> owe_claim(k)
            :: else -> skip
            fi;
            check_slots();
            ei = 0; eclass = 0; ebest = 0; ebw = 0; efailed = 0;
            if
            :: ST(pw) != EMPTY -> pc = PF_EVICTED
            :: else -> pc = PF_STORE
            fi
        :: else -> pick_start(); pc = PF_PICK     /* the word moved: pick again */
        fi
       }
    :: d_step {                             /* smoe__map_clear: CAS map[old key] (v, old gen) -> NONE */
        pc == PF_EVICTED ->
        if
        :: map[KEY(pw)] == MAP_MAKE(pv, GEN(pw)) -> map[KEY(pw)] = MAP_NONE
        :: else -> skip
        fi;
        evicted_put()
       }
    :: d_step {                             /* count_eviction: smoe__spec_put (a cancelled read) */
        pc == PF_EVPUT -> spec_put(); evicted_wake()
       }
    :: d_step {                             /* smoe__slot_wake_waiters: the old word's */
        pc == PF_EVWAKE -> wake_slot(pv); pc = PF_STORE
       }
    :: d_step {                             /* smoe__map_point: release store map[k] = (v, gen) */
        pc == PF_STORE ->
        map[k] = MAP_MAKE(pv, GEN(pnw));
        pr = P_QUEUED;
        load_start(!pspec, pv, GEN(pnw))
       }
    :: d_step {                             /* no_slot: smoe__spec_put (no victim) */
        pc == PF_PUTUN -> spec_put(); pc = PF_UNPEND
       }
    :: d_step {                             /* smoe__map_unreserve: release store map[k] = NONE */
        pc == PF_UNPEND -> map[k] = MAP_NONE; pf_return()
       }
    :: d_step {                             /* smoe__slot_join: acquire load of the word, CAS loop */
        pc == PF_FOUND ->
        pw = word[pv];
        if
        :: KEY(pw) != k || GEN(pw) != pg || ST(pw) == EMPTY ->
            pc = PF_STALE                   /* -1: the slot went to another key */
#ifdef RESERVE
        :: KEY(pw) == k && GEN(pw) == pg && ST(pw) == FAILED && !pspec &&
           droom + NCH_D > DROOM ->         /* a retry with no room: SMOE_EFULL */
            pr = P_EFULL; pf_return()
#endif
        :: else ->
            pnw = pw;
            if
            :: ST(pw) == READY || ST(pw) == CONSUMED ->
                if
                :: !pspec -> assert(PINS(pw) < 3); pnw = PIN_ADD(pw)   /* pinned until claimed */
                :: else -> skip
                fi;
                pr = P_RESIDENT
            :: ST(pw) == LOADING ->
                if
                :: !pspec ->
                    assert(PINS(pw) < 3);
                    pnw = PIN_ADD(pw);
                    if                      /* the first pin upgrades a speculative read */
                    :: PINS(pw) == 0 && (pw & W_STARTED) == 0 -> pnw = pnw & ~W_SPEC
                    :: else -> skip
                    fi
                :: else -> skip
                fi;
                pr = P_INFLIGHT
            :: ST(pw) == FAILED ->
                if
                :: pspec -> pr = P_SKIPPED             /* only demand retries */
                :: else ->                             /* retry: same slot, same gen */
                    assert(PINS(pw) < 3);
#ifdef RESERVE
                    droom = droom + NCH_D;             /* its room, before the CAS */
#endif
                    pnw = PIN_ADD((pw & ~(W_STATE_MASK | W_SPEC | W_STARTED | W_WAITERS)) |
                                  LOADING | W_RESERVED);
                    pr = P_QUEUED
                fi
            :: else -> assert(false)
            fi;
            word[pv] = pnw;
            if
            :: !pspec && ST(pw) != FAILED -> owe_claim(k)
            :: !pspec && ST(pw) == FAILED -> owe_claim(k); frep[pv] = 0
            :: else -> skip
            fi;
            check_slots();
            if
            :: ST(pw) == LOADING && !pspec && PINS(pw) == 0 -> pc = PF_UPPUT
            :: ST(pw) == FAILED && !pspec -> load_start(1, pv, pg)   /* re-arm */
            :: else -> pf_return()
            fi
        fi
       }
    :: d_step {
        /* upgrade: its smoe__spec_put; its chunk tokens wait
         * behind speculative work: queue them again on the demand queue,
         * if there is room (ROOM: reserved here); without room the read
         * goes on from its speculative tokens */
        pc == PF_UPPUT ->
        spec_put();
#ifdef RESERVE
        if
        :: droom + NCH_S <= DROOM -> droom = droom + NCH_S; load_tokens(pv, pg)
        :: else -> pf_return()
        fi
#else
        load_tokens(pv, pg)
#endif
       }
    :: d_step {                             /* smoe__map_clear: CAS map[k] stale -> NONE */
        pc == PF_STALE ->
        if
        :: map[k] == pme -> map[k] = MAP_NONE
        :: else -> skip
        fi;
        pf_clear();
        pc = PF_MAP
       }

    /* ---- smoe__slot_arm (slot.c), smoe__workers_enqueue and
     * notify_workers (worker.c) ---- */
#ifndef OLD_CHUNK_REARM
    :: d_step {
        /*
         * smoe__slot_arm: load chunk_next (the arming's attempt: one more
         * than the last arming's if it was of this gen, a retry; else 0),
         * store err = 0, chunk_left = the load's chunks, then the release
         * store of chunk_next = (gen, attempt, chunk size, 0). Nobody else
         * writes chunk_next while the slot is reserved (the last arming's
         * chunks were all taken before it was published, or none was before
         * it was cancelled). Only a worker's acquire CAS on chunk_next reads
         * the counters in order to take a chunk, and it sees all three
         * stores together; a claim's read of err does not care about the
         * order of the other two.
         */
        pc == AR_ARM ->
        ci = (CN_GEN(cnext[qv]) == qg -> CN_ATT(cnext[qv]) + 1 : 0);
        assert(ci < 8);                     /* the model's attempts wrap at 8 */
        err[qv] = 0;
        cleft[qv] = (qdem -> NCH_D : NCH_S);
        cnext[qv] = CN_MAKE(qg, ci, !qdem);
        armt[qv] = CN_TAG(cnext[qv]);
        taken[qv] = 0;
        ci = 0;
        do
        :: ci < NU -> rd[qv * NU + ci] = 0; ci++
        :: else -> break
        od;
        ci = 0;
#ifdef BAD_ARM_UNSTARTED
        pc = Q_PUSH                         /* known bad: no STARTED to clear */
#else
        pc = AR_CLR
#endif
       }
#else
    :: d_step {
        /* OLD_CHUNK_REARM: store err = 0, chunk_size and chunk_left (a
         * worker may read the size on its own, and count down, between
         * this and the next step) */
        pc == AR_ARM ->
        err[qv] = 0;
        csize[qv] = (qdem -> CH_D : CH_S);
        cleft[qv] = (qdem -> NCH_D : NCH_S);
        pc = AR_NEXT
       }
    :: d_step {                             /* OLD_CHUNK_REARM: release store chunk_next = (gen, 0) */
        pc == AR_NEXT ->
        cnext[qv] = CN_MAKE(qg, 0, 0);
        armt[qv] = CN_TAG(cnext[qv]);
        taken[qv] = 0;
        ci = 0;
        do
        :: ci < NU -> rd[qv * NU + ci] = 0; ci++
        :: else -> break
        od;
        ci = 0;
        pc = AR_CLR
       }
#endif
    :: d_step {
        /* smoe__slot_arm: armed: CAS loop clearing the STARTED the
         * reservation set, while the word is this LOADING gen with STARTED */
        pc == AR_CLR ->
        if
        :: GEN(word[qv]) == qg && ST(word[qv]) == LOADING && (word[qv] & W_STARTED) != 0 ->
            word[qv] = word[qv] & ~W_STARTED;
            check_slots()
        :: else -> skip
        fi;
        pc = Q_PUSH
       }
    :: d_step {                             /* smoe__workers_enqueue: smoe__mpmc_push */
        pc == Q_PUSH ->
        if
        :: qdem -> assert(len(dq) < QCAP); dq!qv,qg
        :: else -> assert(len(sq) < QCAP); sq!qv,qg
        fi;
        qn--;
        if
        :: qn > 0 -> skip
        :: else ->
#ifdef WORKER_FUTEX
            pc = Q_SEQ
#else
            pf_return()                     /* a worker waits for this (see worker) */
#endif
        fi
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
    :: d_step {                             /* smoe__park_wake(&work_seq, n) */
        pc == Q_WAKE -> wake_workers(); pf_return()
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
    :: d_step {                             /* claim_once: smoe__map_lookup, acquire */
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
    :: d_step {                             /* smoe__slot_claim: acquire load of the word, CAS loop */
        pc == CO_WORD ->
        cw = word[cv];
        if
        :: KEY(cw) != k || GEN(cw) != cg -> cr = C_ENOTRES     /* evicted since */
        :: else ->
            if
            :: ST(cw) == LOADING -> cws = cv; cww = cw; cr = C_EAGAIN
            :: ST(cw) == FAILED ->
#ifdef UNPIN_BEFORE_ERR
                /* the order of the C code: end the demand pin (CAS a pin
                 * off), then read the error */
                if
                :: PINS(cw) != 0 ->
                    word[cv] = PIN_DROP(cw);
                    pay_claim(k);
                    frep[cv] = PINS(word[cv]) == 0;
                    check_slots()
                :: else -> skip
                fi;
#endif
                cr = C_NONE                 /* read the error next */
            :: ST(cw) == READY || ST(cw) == CONSUMED ->
#ifdef BAD_TWO_STEP_CLAIM
                cr = C_NONE                 /* known bad: take the reference later */
#else
                /* CONSUMED, a pin off (if any), refs + 1, in the CAS that
                 * checked it */
                word[cv] = PIN_DROP(((cw & ~W_STATE_MASK) | CONSUMED) + W_REF_ONE);
                pay_claim(k);
                held[cv]++;
                cref = 1;
                check_slots();
                cr = C_OK
#endif
            :: else -> cr = C_ENOTRES
            fi
        fi;
        if
        :: cr == C_NONE && ST(cw) == FAILED -> pc = CO_ERR     /* keeps cw */
        :: cr == C_NONE && ST(cw) != FAILED -> pc = CO_INC; cw = 0
        :: else -> cw = 0; co_return()
        fi
       }
    :: d_step {
        /* smoe__slot_claim, FAILED (word cw): claim_failed loads err (ce).
         * 0: a prefetch has re-armed the slot for a retry since the word
         * was read; of another gen: the slot went to another load: look
         * again (acquire load of the word, the loop above). Else the error
         * is reported: a demand read's pin ends first, by a CAS from cw
         * (while pinned no evictor can take the slot, so the error read is
         * this load's); without a pin the word is loaded again and must
         * still be cw. OLD_FAILED_UNPINNED: the earlier code, which
         * reported the error of an unpinned word at once, and did not
         * check its gen. */
        pc == CO_ERR ->
        ce = err[cv];
        if
        :: !ce ->
#ifdef FAILED_ERR_ONCE
            cr = C_OK; co_return()          /* old: returns 0, SMOE_READY */
#else
            pc = CO_WORD
#endif
#ifndef OLD_FAILED_UNPINNED
        :: ce && ERRGEN(ce) != GEN(cw) -> pc = CO_WORD
        :: ce && ERRGEN(ce) == GEN(cw) && PINS(cw) == 0 -> pc = CO_RECHK
#else
        :: ce && PINS(cw) == 0 -> pay_claim(k); report_failed()
#endif
        :: ce && PINS(cw) != 0 && ERR_OF_GEN(ce, cw) ->
#if defined(UNPIN_BEFORE_ERR)
            report_failed()                 /* unpinned already */
#elif defined(PIN_FAILED)
            if                              /* old: the pin stays */
            :: word[cv] == cw -> frep[cv] = PINS(cw) == 1
            :: else -> skip
            fi;
            pay_claim(k);
            report_failed()
#else
            pc = CO_UNPIN
#endif
        fi;
        if
        :: pc != CO_UNPIN && pc != CO_RECHK -> cw = 0; ce = 0
        :: else -> skip
        fi
       }
    :: d_step {
        /* smoe__slot_claim, FAILED: CAS cw -> cw with one pin less, then return
         * the error; the CAS fails if the word moved: look again. frep:
         * every pin of the failed load has been honoured. */
        pc == CO_UNPIN ->
        if
        :: word[cv] == cw ->
            word[cv] = PIN_DROP(cw);
            pay_claim(k);
            frep[cv] = PINS(word[cv]) == 0;
            check_slots();
            report_failed()
        :: else -> pc = CO_WORD
        fi;
        cw = 0;
        ce = 0
       }
    :: d_step {
        /* smoe__slot_claim, FAILED without a pin: acquire load of the word
         * after the error (and the fault record): unchanged, the error is
         * this load's; moved: look again. */
        pc == CO_RECHK ->
        if
        :: word[cv] == cw -> pay_claim(k); report_failed()
        :: else -> pc = CO_WORD
        fi;
        cw = 0;
        ce = 0
       }
#ifdef BAD_TWO_STEP_CLAIM
    :: d_step {                             /* known bad: the reference, unconditionally */
        pc == CO_INC ->
        word[cv] = PIN_DROP(((word[cv] & ~W_STATE_MASK) | CONSUMED) + W_REF_ONE);
        pay_claim(k);
        held[cv]++;
        cref = 1;
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
    :: d_step {                             /* smoe__slot_park: seq_cst CAS setting WAITERS */
        pc == CW_PARK ->
        cspin = 0;
        if
        :: (cww & W_WAITERS) == 0 ->
            if
            :: word[cws] == cww ->
                word[cws] = cww | W_WAITERS;
                cww = cww | W_WAITERS;
                check_slots();
#if SHUTDOWN
                pc = CW_STOP
#else
                pc = CW_FUTEX                   /* no shutdown: stop stays 0 */
#endif
            :: else -> poll_again()      /* the word moved: do not sleep */
            fi
        :: else ->                      /* WAITERS was set: straight to atomic_load(&stop) */
            if
            :: stop -> park_stopped()
            :: else -> pc = CW_FUTEX
            fi
        fi
       }
    :: d_step {                             /* smoe__slot_park: atomic_load(&stop) */
        pc == CW_STOP ->
        if
        :: stop -> park_stopped()
        :: else -> pc = CW_FUTEX
        fi
       }
    :: d_step {                             /* smoe__slot_park: atomic_fetch_and(word, ~WAITERS) */
        pc == CW_STOPCLR ->
        if
        :: (word[cws] & W_WAITERS) != 0 ->
            word[cws] = word[cws] & ~W_WAITERS;
            check_slots();
            pc = CW_STOPWAKE
        :: else -> poll_again()
        fi
       }
    :: d_step {                             /* smoe__slot_park: smoe__park_wake(low32(word)) */
        pc == CW_STOPWAKE -> wake_slot(cws); poll_again()
       }
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
#ifdef BACKSTOP
    :: atomic {                             /* the 100 ms backstop */
        pc == CW_SLEEP && timeout -> csleep[id] = 0; poll_again()
       }
#endif

    /* ---- the caller reads the blob; smoe_release (claim.c) ---- */
    :: d_step {                             /* smoe__slot_release: release CAS loop, refs - 1 */
        pc == RL_REL ->
        /* What the caller read before releasing: the slot still holds this
         * key and gen, and every chunk's bytes are the ones this load read.
         * (Writes to data[] assert that nobody holds a reference, so a
         * check here is as strong as one at every step in between.) */
        assert(KEY(word[cv]) == k && GEN(word[cv]) == cg);
        ci = 0;
        do
        :: ci < NU -> assert(data[cv * NU + ci] == DATA(k, cg)); ci++
        :: else -> break
        od;
        ci = 0;
        cw = word[cv];
        assert(GEN(cw) == cg && KEY(cw) == k && ST(cw) == CONSUMED && REFS(cw) > 0);
        word[cv] = cw - W_REF_ONE;
        held[cv]--;
        check_slots();
        cw = 0;
        pc = H_DONE
       }

    /* ---- smoe_cancel (prefetch.c) ---- */
    :: d_step {                             /* smoe__map_lookup: acquire load of map[k] */
        pc == CA_MAP ->
        pme = map[k];
        if
        :: pme == MAP_NONE || pme == MAP_PENDING -> cr = C_ENOTRES; pf_clear(); pc = H_DONE
        :: else -> pv = MAP_SLOT(pme); pg = MAP_GEN(pme); pc = CA_WORD
        fi
       }
    :: d_step {                             /* smoe__slot_cancel: acquire load, CAS loop to EMPTY, gen + 1 */
        pc == CA_WORD ->
        pw = word[pv];
        if
        :: KEY(pw) != k || GEN(pw) != pg || ST(pw) != LOADING ->
            cr = C_ENOTRES; pf_clear(); pc = H_DONE
        :: (pw & W_STARTED) != 0 || PINS(pw) != 0 || (pw & W_SPEC) == 0 ->
            cr = C_EBUSY; pf_clear(); pc = H_DONE
        :: else ->
            assert(CANCELLABLE(pw));
#ifndef GEN_WRAPS
            assert(pg + 1 < GEN_MOD);
#endif
            word[pv] = (((pg + 1) % GEN_MOD) << W_GEN_SHIFT) | EMPTY;
            check_honoured(k);
            frep[pv] = 0;
            check_slots();
            pc = CA_MAPCLR
        fi
       }
    :: d_step {                             /* smoe__map_clear: CAS map[k] (v, gen) -> NONE */
        pc == CA_MAPCLR ->
        if
        :: map[k] == pme -> map[k] = MAP_NONE
        :: else -> skip
        fi;
        pc = CA_PUT
       }
    :: d_step {                             /* smoe__spec_put */
        pc == CA_PUT ->
        spec_put();
        if
        :: (pw & W_WAITERS) != 0 -> pc = CA_WAKE
        :: else -> pf_clear(); pc = H_DONE
        fi
       }
    :: d_step {                             /* smoe__slot_wake_waiters of the old word */
        pc == CA_WAKE -> wake_slot(pv); pf_clear(); pc = H_DONE
       }
    od
}

/* ------------------------------------------------------------------ */
/* worker (worker.c worker_main, run_request, load_done; slot.c        */
/* smoe__slot_start, _take_chunk, _chunk_landed, _publish)             */
/* ------------------------------------------------------------------ */

#define W_TOP    1     /* loop top: load stop, pop a token */
#define W_IDLE   2     /* (WORKER_FUTEX) idle++, load work_seq */
#define W_POP2   3     /* (WORKER_FUTEX) pop once more */
#define W_STOP2  4     /* (WORKER_FUTEX) load stop */
#define W_FUTEX  5     /* (WORKER_FUTEX) futex wait on work_seq */
#define W_SLEEP  6     /* (WORKER_FUTEX) asleep until woken */
#define W_TAKE   7     /* smoe__slot_start: check the word, set STARTED */
#define W_CHUNK  8     /* smoe__slot_take_chunk: load chunk_next (one worker: and take a chunk) */
#define W_CSIZE  14    /* (OLD_CHUNK_REARM) the worker: load chunk_size */
#define W_CCAS   15    /* smoe__slot_take_chunk: CAS chunk_next: take the chunk */
#define W_READ   9     /* the chunk's read, the first error, the countdown */
#define W_PUB    10    /* load_done, smoe__slot_publish: the release CAS */
#define W_PUT    11    /* smoe__slot_publish: smoe__spec_put */
#define W_WAKE   12    /* smoe__slot_publish: wake the slot's waiters */
#define W_EXIT   13

/* pop_request (smoe__sched_pop): demand first, then speculative; the
 * token's room is given back (ROOM). */
inline pop_request()
{
    if
    :: len(dq) > 0 ->
        dq?wv,wg; got = 1;
#ifdef RESERVE
        droom--
#endif
    :: else ->
        if
        :: len(sq) > 0 ->
            sq?wv,wg; got = 1;
#ifdef RESERVE
            sroom--
#endif
        :: else -> got = 0
        fi
    fi
}

/* Forget the token's locals. */
inline w_clear()
{
    ww = 0; wv = 0; wg = 0; wk = 0; wc = 0; wcn = 0; wsz = 0; wfail = 0; pc = W_TOP
}

/* smoe__slot_publish's release CAS loop: READY (or FAILED), STARTED and
 * WAITERS off; then the budget unit and the wake-up, as their own steps. */
inline publish()
{
    ww = word[wv];
    /* a load a worker has begun stays its load until published */
    assert(ST(ww) == LOADING && GEN(ww) == wg && KEY(ww) == wk && (armt[wv] >> 3) == wg);
    ci = 0;
    do
    :: ci < NU ->
        /* every unit of the arming was read exactly once ... */
        assert(rd[wv * NU + ci]);
        /* ... and a READY slot holds this key and gen in every unit */
        assert(wfail || data[wv * NU + ci] == DATA(wk, wg));
        ci++
    :: else -> break
    od;
    ci = 0;
#ifdef BAD_FAIL_RECYCLE
    if
    :: wfail ->                             /* known bad: the slot goes back to EMPTY */
        word[wv] = (ww & ~(W_STATE_MASK | W_STARTED | W_WAITERS | W_PIN_MASK | W_SPEC)) | EMPTY
    :: else -> word[wv] = (ww & ~(W_STATE_MASK | W_STARTED | W_WAITERS)) | READY
    fi;
#else
    word[wv] = (ww & ~(W_STATE_MASK | W_STARTED | W_WAITERS)) |
               (wfail -> FAILED : READY);
#endif
    check_slots();
    if
    :: (ww & W_SPEC) != 0 && PINS(ww) == 0 -> pc = W_PUT
    :: (ww & W_SPEC) == 0 || PINS(ww) != 0 ->
        if
        :: (ww & W_WAITERS) != 0 -> pc = W_WAKE
        :: else -> w_clear()
        fi
    fi
}

/*
 * smoe__slot_take_chunk's loop: acquire load of chunk_next (wcn); the chunk
 * size is the arming's, from the value itself (OLD_CHUNK_REARM: a load of
 * chunk_size, wsz, as its own step); a chunk is left if the tag is the
 * token's gen and the index is below the arming's chunk count; then the
 * CAS from wcn (failed: load again).
 */
inline cnext_load()
{
    wcn = cnext[wv];
#ifdef OLD_CHUNK_REARM
    pc = W_CSIZE
#else
    if
    :: CN_TAG_OK(wcn, wg) && CN_IDX(wcn) < NCH_OF(CN_FLAG(wcn)) ->
        wsz = CH_OF(CN_FLAG(wcn)); pc = W_CCAS
    :: else -> w_clear()                    /* not armed yet, or every chunk is taken */
    fi
#endif
}

#ifdef OLD_CHUNK_REARM
inline csize_load()
{
    wsz = csize[wv];
    if
    :: CN_TAG_OK(wcn, wg) && CN_IDX(wcn) < (wsz == 0 -> 0 : NU / wsz) -> pc = W_CCAS
    :: else -> w_clear()
    fi
}
#endif

/* The CAS from wcn succeeded: chunk CN_IDX(wcn), of wsz units, is ours. */
inline chunk_taken()
{
    wc = CN_IDX(wcn);
    cnext[wv] = wcn + 1;
    if
    :: CN_TAG(wcn) == armt[wv] -> taken[wv]++
    :: else -> skip
    fi;
    check_slots();
    pc = W_READ
}

inline chunk_cas()
{
    if
    :: cnext[wv] == wcn -> chunk_taken()
    :: else -> pc = W_CHUNK                 /* the value moved: load it again */
    fi
}

/* One worker: the load and the CAS as one step (see the worker). */
inline take_chunk()
{
    cnext_load();
    if
    :: pc == W_CCAS -> chunk_taken()
    :: else -> skip
    fi
}

/*
 * The chunk's read returned, having failed (FAIL) or not: its bytes, the
 * first error (CAS err 0 -> e), the acq_rel countdown. The read and the
 * countdown are one step: the bytes are seen only through the
 * publication, and only the last chunk's countdown is followed by a read
 * of err (smoe__slot_load_error in load_done, merged here too), which a
 * claimer's read of err (the only other one) commutes with. A failure is
 * EIO, a short read, a read stopped by shutdown, or (for the last chunk) a
 * checksum mismatch of the blob. Once a chunk of the load has failed, the
 * others are modelled as succeeding: a second error changes nothing that
 * can be seen (the first error wins, the slot's bytes are not published).
 */
inline read_chunk(FAIL)
{
    /* nobody reads a slot that a worker writes */
    assert(held[wv] == 0);
    /* a token reads only into its own load: the slot's current load, of
     * the token's gen, and a chunk of its current arming */
    assert(ST(word[wv]) == LOADING && GEN(word[wv]) == wg && KEY(word[wv]) == wk);
    assert(CN_TAG(wcn) == armt[wv]);
    /* each unit of the arming is read once */
    ci = wc * wsz;
    do
    :: ci < wc * wsz + wsz ->
        assert(ci < NU && !rd[wv * NU + ci]);
        rd[wv * NU + ci] = 1;
        data[wv * NU + ci] = (FAIL -> TORN : DATA(wk, wg));
        ci++
    :: else -> break
    od;
    ci = 0;
    if
    :: FAIL && !err[wv] -> err[wv] = ERRV(wk, wg)   /* the first error wins (CAS) */
    :: FAIL && err[wv] -> skip
    :: else -> skip
    fi;
    assert(cleft[wv] > 0);
    cleft[wv]--;
    if
    :: cleft[wv] == 0 -> wfail = (err[wv] != 0); pc = W_PUB
    :: else -> w_clear()
    fi
}

/*
 * smoe__slot_start: acquire load of the word; CAS loop setting STARTED unless
 * set (by the reservation, or by a worker that took a chunk of this load).
 * Not this gen or not LOADING: a token of a cancelled, evicted, published
 * or stale load: drop it.
 */
inline take_token()
{
    ww = word[wv];
    if
    :: ST(ww) == LOADING && GEN(ww) == wg ->
        if
        :: (ww & W_STARTED) == 0 -> word[wv] = ww | W_STARTED; check_slots()
        :: else -> skip
        fi;
        wk = KEY(ww);
        ww = 0;
        pc = W_CHUNK
    :: else -> w_clear()
    fi
}

/*
 * Without -DWORKER_FUTEX an idle worker simply waits until a queue holds a
 * token or stop is set: the idle/work_seq parking protocol is taken as
 * correct. With it, the protocol is modelled step by step (a producer's
 * push, work_seq++, load of idle and wake are then separate steps too).
 */
proctype worker(byte id)
{
    byte pc = W_TOP, wv, wg, wk, wc, wsz;
    bit got, wfail;
    int ww;
    short wcn;
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
#elif NWORKERS == 1
    :: d_step {
        /* pop_request (waits for work), and run_request's first step.
         * With one worker nothing else pops, and a pop commutes with every
         * step of the other threads (a push appends behind the token), so
         * the pop may as well happen just before the word is read. */
        pc == W_TOP && !stop && (len(dq) > 0 || len(sq) > 0) ->
        pop_request();
        take_token()
       }
#else
    :: d_step {                             /* pop_request (waits for work) */
        pc == W_TOP && !stop && (len(dq) > 0 || len(sq) > 0) ->
        pop_request();
        pc = W_TAKE
       }
#endif
    :: d_step {                             /* smoe__slot_start: the word (see take_token) */
        pc == W_TAKE -> take_token()
       }
#if NWORKERS > 1 || defined(OLD_CHUNK_REARM)
    /* The chunk loop step by step: the load of chunk_next (and, in the
     * earlier protocol, of chunk_size), then the CAS, then the read. */
    :: d_step {                             /* smoe__slot_take_chunk: load chunk_next (see cnext_load) */
        pc == W_CHUNK -> cnext_load()
       }
#ifdef OLD_CHUNK_REARM
    :: d_step {                             /* the worker: load chunk_size (see csize_load) */
        pc == W_CSIZE -> csize_load()
       }
#endif
    :: d_step {                             /* smoe__slot_take_chunk: CAS chunk_next (see chunk_cas) */
        pc == W_CCAS -> chunk_cas()
       }
    :: d_step {                             /* the chunk's read succeeds (see read_chunk) */
        pc == W_READ -> read_chunk(0)
       }
    :: d_step {                             /* the chunk's read fails (see read_chunk) */
        pc == W_READ && !err[wv] -> read_chunk(1)
       }
#else
    /* With one worker nothing else touches chunk_next between the load and
     * the CAS, nor while a chunk is in flight: an arming ends only after
     * its last countdown (asserted), and the value of a finished arming
     * never comes back (a new arming has another gen or attempt). So
     * loading it, taking the chunk and reading it are one step. */
    :: d_step {
        pc == W_CHUNK ->
        take_chunk();
        if
        :: pc == W_READ -> read_chunk(0)
        :: else -> skip
        fi
       }
    :: d_step {
        pc == W_CHUNK && CN_TAG_OK(cnext[wv], wg) &&
        CN_IDX(cnext[wv]) < NCH_OF(CN_FLAG(cnext[wv])) && !err[wv] ->
        take_chunk();
        read_chunk(1)
       }
#endif
    :: d_step {                             /* the last chunk: load_done, smoe__slot_publish */
        pc == W_PUB -> publish()
       }
    :: d_step {                             /* smoe__slot_publish: smoe__spec_put */
        pc == W_PUT ->
        spec_put();
        if
        :: (ww & W_WAITERS) != 0 -> pc = W_WAKE
        :: else -> w_clear()
        fi
       }
    :: d_step {                             /* smoe__park_wake(low32(word), INT_MAX) */
        pc == W_WAKE -> wake_slot(wv); w_clear()
       }
    :: pc == W_EXIT -> break
    od
}

/* ------------------------------------------------------------------ */
/* smoe_shutdown (stream.c, slot.c smoe__slots_shutdown), or none       */
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
            wake_workers()
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
 * parked): without a shutdown no token may be left queued and no slot
 * left LOADING; either would be a lost worker wake-up or a stranded load.
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
               PINS(word[ci]) == 0 -> cj++
            :: else -> skip
            fi;
            ci++
        :: else -> break
        od;
        /* the speculation budget: one unit per speculative read still
         * queued or in progress, none leaked */
        assert(spec_inflight == cj);
#ifdef RESERVE
        /* queue room: all of it given back once the queues are empty */
        assert(stop || (droom == 0 && sroom == 0));
#endif
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
        run host(1, OP_CLAIM, 1, 1);
        run host(2, OP_SPEC | OP_DEMAND, 1, 1);
#elif CFG == 4
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_WAIT, 2, 1);                             /* claim_wait(B) */
        run host(2, OP_SPEC | OP_DEMAND, 1, 1);                 /* A, either kind */
#elif CFG == 5
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_SPEC, 1, 1);                             /* spec A */
#elif CFG == 6
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_DEMAND, 1, 1);                           /* prefetch A */
        run host(2, OP_SPEC, 2, 1);                             /* spec B */
#elif CFG == 7
        run host(0, OP_WAIT, 1, 1);
#elif CFG == 8
        run host(0, OP_SPEC, 1, 1);                             /* spec A */
        run host(1, OP_CANCEL, 1, 1);                           /* cancel A */
        run host(2, OP_WAIT, 2, 1);                             /* claim_wait(B) */
#elif CFG == 9
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_WAIT, 2, 1);                             /* claim_wait(B) */
#elif CFG == 10
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_SPEC | (OP_DEMAND << 8), 1 | (1 << 4), 2);   /* spec A, prefetch A */
#elif CFG == 11
        run host(0, OP_WAIT, 1, 1);                             /* claim_wait(A) */
        run host(1, OP_SPEC, 1, 1);                             /* spec A */
        run host(2, OP_DEMAND, 2, 1);                           /* prefetch B */
#elif CFG == 12
        run host(0, OP_WAIT, 1, 1);
        run host(1, OP_WAIT, 1, 1);
        run host(2, OP_SPEC | (OP_DEMAND << 8), 1 | (1 << 4), 2);
#elif CFG == 13
        /* Experts 0 (A), 1 (B), 2 (X). It starts where a demand prefetch
         * of X has finished: X READY in slot 0, pinned until claimed. */
        word[0] = READY | W_PIN_ONE | (2 << W_KEY_SHIFT) | (1 << W_GEN_SHIFT);
        map[2] = MAP_MAKE(0, 1);
        owe[2] = 1;
        cnext[0] = CN_MAKE(1, 0, 0) + NCH_D;
        armt[0] = CN_TAG(CN_MAKE(1, 0, 0));
        taken[0] = NCH_D;
        ci = 0;
        do
        :: ci < NU -> data[ci] = DATA(2, 1); rd[ci] = 1; ci++
        :: else -> break
        od;
        ci = 0;
        run host(0, OP_WAIT, 1, 1);             /* claim_wait(A) */
        run host(1, OP_CLAIM, 1, 1);            /* claim(A), release */
        /* spec B, spec A, prefetch B */
        run host(2, OP_SPEC | (OP_SPEC << 8) | (OP_DEMAND << 16), 2 | (1 << 4) | (2 << 8), 3);
#elif CFG == 14
        run host(0, OP_DEMAND | (OP_WAIT << 8), 1 | (1 << 4), 2);     /* prefetch A, claim_wait(A) */
        run host(1, OP_DEMAND | (OP_CLAIM << 8), 1 | (1 << 4), 2);    /* prefetch A, claim(A) */
        run host(2, OP_WAIT, 2, 1);                                   /* claim_wait(B) */
#elif CFG == 15
        run host(0, OP_SPEC, 1, 1);                                   /* spec A */
        run host(1, OP_DEMAND | (OP_DEMAND << 8), 1 | (1 << 4), 2);   /* prefetch A, twice */
#elif CFG == 16
        run host(0, OP_SPEC | (OP_CANCEL << 8) | (OP_SPEC << 16), 1 | (1 << 4) | (1 << 8), 3);
        run host(1, OP_WAIT, 1, 1);                                   /* claim_wait(A) */
#elif CFG == 17
        run host(0, OP_WAIT, 1, 1);                                   /* claim_wait(A) */
        run host(1, OP_CLAIM, 1, 1);                                  /* claim(A) */
        run host(2, OP_WAIT, 2, 1);                                   /* claim_wait(B) */
#endif
        run shutdown()
    }
}
