/*
 * chunk_read.h - reading a chunk of a slot image in a worker (chunk_read.c).
 */
#ifndef SMOE_CHUNK_READ_H
#define SMOE_CHUNK_READ_H

#include <stdint.h>

#include "io.h"

struct smoe_stream;
struct smoe__worker;

/*
 * Read chunk [off, off + len) of slot `slot`'s image of entry key
 * (smoe__extent_chunk_at): one read. A packed vault: of the vault through
 * the worker's descriptor. An index vault: of the chunk's segment, from
 * the worker's descriptor of its source. *got: the bytes asked of the
 * disk.
 * Hot path: no allocation, no lock; only the reads.
 * @return 0 or the first read's error (*why says where).
 */
int smoe__chunk_read(struct smoe_stream *s, const struct smoe__worker *wk, uint32_t slot,
                      uint32_t key, uint64_t off, uint64_t len, uint64_t *got,
                      smoe__io_fail *why);

/*
 * The hash a loaded slot is checked against: XXH3-64 of a packed blob's
 * payload, or of an index vault's components in layout order (through the
 * worker's preallocated state). Hot path: no allocation.
 */
uint64_t smoe__chunk_hash(struct smoe_stream *s, const struct smoe__worker *wk, uint32_t key,
                           const uint8_t *data);

#endif
