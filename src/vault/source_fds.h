/*
 * source_fds.h - an index vault's source descriptors (source.h), embedded
 * in struct smoe_stream and indexed by the workers: plain data below
 * internal.h, so that the stream object includes no header of the code
 * that runs on it.
 */
#ifndef SMOE_SOURCE_FDS_H
#define SMOE_SOURCE_FDS_H

#include <stddef.h>
#include <stdint.h>

/* The descriptors an open stream reads its sources through. Worker w reads
 * source i through fds[i * sets + w % sets]: a descriptor per source per
 * worker while the budget allows, else fewer, each shared by several
 * workers. Set up in smoe_open; the hot path only indexes it. */
typedef struct smoe__sources {
    uint32_t n;     /* source files; 0 for a packed vault */
    uint32_t sets;  /* descriptors per source */
    int *fds;       /* n x sets; -1 where not open */
    uint32_t align; /* the read alignment the vault is planned at (extent.h) */
    void **hash;    /* per worker: an XXH3 state for verification, or NULL */
    uint32_t n_hash;
} smoe__sources;

static inline int smoe__source_fd(const smoe__sources *src, uint32_t source, uint32_t worker)
{
    return src->fds[(size_t)source * src->sets + worker % src->sets];
}

#endif
