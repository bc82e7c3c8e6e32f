/*
 * extent.h - an index vault's experts as reads of their source files
 * (docs/internals/vault.md, "Index vaults").
 *
 * An expert's components lie in extents of source files. Its slot is
 * filled by segments: the extents sorted by (source, offset), each rounded
 * out to the read alignment (a multiple of the file system's direct I/O
 * alignment that divides 16 KiB), merged where they touch or lie within
 * SMOE__EXTENT_GAP, laid end to end from the slot's start; a load reads
 * them in chunks of one range each (smoe__extent_chunks). A component
 * then starts at its segment's slot offset plus its distance from the
 * segment's first byte: aligned, in memory, as its file offset is, up to
 * the read alignment.
 */
#ifndef SMOE_EXTENT_H
#define SMOE_EXTENT_H

#include <stdint.h>

#include "io.h"
#include "vault/vault.h"

/* The read alignment a vault is planned at until smoe_open knows its
 * descriptors': a page, what macOS's F_NOCACHE wants and every common
 * Linux file system's O_DIRECT accepts. */
#define SMOE__EXTENT_ALIGN 4096u

/* Extents of one file this near (after rounding out) are read as one
 * range, the bytes between them too: about what one more request costs
 * in transfer time, at a few GB/s. */
#define SMOE__EXTENT_GAP (32u << 10)

/*
 * Plan every entry's segments at read alignment align (a power of two from
 * 512 to 16384; smoe_open's is 4096 or more): v->segs, v->xent[].first_seg
 * and n_seg, v->comp_at, each entry's size (its slot image) and padded,
 * v->max_padded and total_padded. Replaces an earlier plan. A packed vault: nothing to do.
 * @return 0; SMOE_ENOMEM; SMOE_EOVERFLOW (an image past 2^64).
 */
int smoe__extent_plan(smoe__vault *v, uint32_t align);

/* Offset in the slot of component k of entry key (an index vault). */
static inline uint64_t smoe__extent_comp_at(const smoe__vault *v, uint32_t key, uint32_t k)
{
    return v->comp_at[v->xent[key].first_extent + k];
}

/*
 * The chunks of a load of entry key, read at most `chunk` bytes each (a
 * multiple of 16 KiB). A packed blob: its padded size cut every `chunk`
 * bytes. An index vault's entry: each segment cut every `chunk` bytes from
 * its start, so that each chunk is one read of one range of one source
 * file and the workers take an expert's ranges in parallel. Hot path
 * (prefetch, a worker taking a chunk): no allocation, a walk of the
 * entry's few segments.
 */
static inline uint32_t smoe__extent_chunks(const smoe__vault *v, uint32_t key, uint32_t chunk)
{
    if (v->version != SMOE__VAULT_VERSION_INDEX)
        return (uint32_t)((v->index[key].padded + chunk - 1) / chunk);
    const smoe__vault_xentry *xe = &v->xent[key];
    uint32_t n = 0;
    for (uint32_t j = 0; j < xe->n_seg; j++)
        n += (uint32_t)((v->segs[xe->first_seg + j].len + chunk - 1) / chunk);
    return n;
}

/* Chunk i (below smoe__extent_chunks) of entry key: bytes [*off, *off +
 * *len) of its slot image. */
static inline void smoe__extent_chunk_at(const smoe__vault *v, uint32_t key, uint32_t chunk,
                                         uint32_t i, uint64_t *off, uint64_t *len)
{
    uint64_t end;
    if (v->version != SMOE__VAULT_VERSION_INDEX) {
        *off = (uint64_t)i * chunk;
        end = v->index[key].padded;
    } else {
        const smoe__vault_seg *sg = &v->segs[v->xent[key].first_seg];
        uint64_t p;
        while (i >= (p = (sg->len + chunk - 1) / chunk)) {
            i -= (uint32_t)p;
            sg++;
        }
        *off = sg->slot_off + (uint64_t)i * chunk;
        end = sg->slot_off + sg->len;
    }
    *len = end - *off < chunk ? end - *off : chunk;
}

/* The most chunks of any load at chunk size `chunk` (queue capacity). */
uint32_t smoe__extent_max_chunks(const smoe__vault *v, uint32_t chunk);

#endif
