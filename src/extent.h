/*
 * extent.h - an index vault's experts as reads of their source files
 * (docs/internals/vault.md, "Index vaults").
 *
 * An expert's components lie in extents of source files. Its slot is
 * filled by segments: the extents sorted by (source, offset), each rounded
 * out to the read alignment (a multiple of the file system's direct I/O
 * alignment that divides 16 KiB), merged where they touch, laid end to end
 * from the slot's start. A component then starts at its segment's slot
 * offset plus its distance from the segment's first byte: aligned, in
 * memory, as its file offset is, up to the read alignment.
 */
#ifndef SMOE_EXTENT_H
#define SMOE_EXTENT_H

#include <stdint.h>

#include "io.h"
#include "vault.h"

/* The read alignment a vault is planned at until smoe_open knows its
 * descriptors': a page, what macOS's F_NOCACHE wants and every common
 * Linux file system's O_DIRECT accepts. */
#define SMOE__EXTENT_ALIGN 4096u

/*
 * Plan every entry's segments at read alignment align (a power of two from
 * 512 to 16384; smoe_open's is 4096 or more): v->segs, v->xent[].first_seg and n_seg, v->comp_at, each
 * entry's size (its slot image) and padded, v->max_padded and
 * total_padded. Replaces an earlier plan. A packed vault: nothing to do.
 * @return 0; SMOE_ENOMEM; SMOE_EOVERFLOW (an image past 2^64).
 */
int smoe__extent_plan(smoe__vault *v, uint32_t align);

/* Offset in the slot of component k of entry key (an index vault). */
static inline uint64_t smoe__extent_comp_at(const smoe__vault *v, uint32_t key, uint32_t k)
{
    return v->comp_at[v->xent[key].first_extent + k];
}

struct smoe_stream;
struct smoe__worker;

/*
 * Read bytes [off, off + len) of slot `slot`'s image of entry key (a
 * chunk: off and len multiples of 16 KiB, but the last chunk's end). A
 * packed vault: one read of the vault through the worker's descriptor.
 * An index vault: the part of each segment in the range, from the
 * worker's descriptor of its source. *got: the bytes asked of the disk.
 * Hot path: no allocation, no lock; only the reads.
 * @return 0 or the first read's error (*why says where).
 */
int smoe__extent_read(struct smoe_stream *s, const struct smoe__worker *wk, uint32_t slot,
                      uint32_t key, uint64_t off, uint64_t len, uint64_t *got,
                      smoe__io_fail *why);

/*
 * The hash a loaded slot is checked against: XXH3-64 of a packed blob's
 * payload, or of an index vault's components in layout order (through the
 * worker's preallocated state). Hot path: no allocation.
 */
uint64_t smoe__extent_hash(struct smoe_stream *s, const struct smoe__worker *wk, uint32_t key,
                           const uint8_t *data);

#endif
