/*
 * mem_io.h - a read-only smoe__io table over a memory buffer, for
 * smoe__vault_load in tests and fuzz targets.
 */
#ifndef SMOE_TEST_MEM_IO_H
#define SMOE_TEST_MEM_IO_H

#include <stddef.h>
#include <stdint.h>

#include "smoe_tier.h"

/* A piece of a sparse file: len bytes at file offset off. */
typedef struct tu_mem_seg {
    uint64_t off, len;
    const unsigned char *data;
} tu_mem_seg;

/*
 * A read-only, memory-backed file for smoe__vault_load: every path opens
 * it. Its size bytes are data[0..size), or, when nsegs > 0, zeros except
 * for the segments (which must not overlap). Faults: the fail_at-th pread
 * (1-based) returns -fail_errno; reads return at most max_chunk bytes;
 * every eintr_every-th pread returns -EINTR.
 */
typedef struct tu_mem {
    unsigned char *data;
    uint64_t size;
    const tu_mem_seg *segs;
    int nsegs;
    int fail_at, fail_errno;
    size_t max_chunk;
    int eintr_every;
    uint64_t report_size; /* nonzero: size() reports this, not size */
    int preads;     /* pread calls so far */
    int open_fds;   /* opened and not yet closed */
} tu_mem;

/* The table for m (its user pointer is m). */
smoe__io tu_mem_io(tu_mem *m);

#endif
