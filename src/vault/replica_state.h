/*
 * replica_state.h - the copies of a packed vault (replica.h): their state,
 * embedded in struct smoe_stream: plain data below internal.h, so that the
 * stream object includes no header of the code that runs on it.
 */
#ifndef SMOE_REPLICA_STATE_H
#define SMOE_REPLICA_STATE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#define SMOE__MAX_REPLICAS 16u  /* copies, the vault included */
#define SMOE__REPLICA_STREAK 3u /* failed reads in a row that set a copy aside */
#define SMOE__REPLICA_RETRY_NS 1000000000ull
#define SMOE__REPLICA_WINDOW_NS 20000000ull /* busy time per throughput sample */

typedef struct smoe__replica {
    /* counters and the learned cost, written by workers: relaxed, statistics
     * and hints only (no data depends on them) */
    alignas(64) _Atomic uint64_t reads, bytes, failed, set_aside;
    /* What it delivers: bytes over the time it had reads in flight, per
     * window of SMOE__REPLICA_WINDOW_NS busy, averaged (replica_read.c) */
    _Atomic uint64_t ns_per_mib;  /* 0: nothing learned yet */
    _Atomic uint64_t last_event;  /* when a read last started or ended on it */
    _Atomic uint64_t win_ns, win_bytes; /* the window being measured */
    _Atomic uint64_t inflight_bytes;
    _Atomic uint64_t aside_until; /* now_ns before which it takes no read; 0: in use */
    _Atomic uint32_t inflight;    /* reads on it now */
    _Atomic uint32_t streak;      /* failed reads in a row */
    _Atomic uint32_t sum_streak;  /* blobs read from it alone that failed their checksum,
                                     in a row (smoe__replica_checked) */
    char *path;                  /* owned (copy 0: the vault's path, not owned) */
    int *fd;                     /* per worker; copy 0's are the workers' own */
    uint32_t *align;             /* per worker: its direct I/O boundary; 0: buffered */
} smoe__replica;

typedef struct smoe__replicas {
    uint32_t n;       /* copies; 0 until smoe__replicas_open */
    uint64_t retry_ns;
    smoe__replica *r; /* n of them */
} smoe__replicas;

#endif
