/*
 * mem_io.h - a read-only smoe__io table over a memory buffer, for
 * smoe__vault_load in tests and fuzz targets.
 */
#ifndef SMOE_TEST_MEM_IO_H
#define SMOE_TEST_MEM_IO_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

/*
 * A read-only, memory-backed file for smoe__vault_load: every path opens
 * it. Faults: the fail_at-th pread (1-based) returns -fail_errno; reads
 * return at most max_chunk bytes; every eintr_every-th pread returns -EINTR.
 */
typedef struct tu_mem {
    unsigned char *data;
    uint64_t size;
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
