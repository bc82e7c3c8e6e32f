/*
 * vault_int.h - what the two halves of the vault reader share:
 * vault_read.c (the header's common part, version 1, layouts, components,
 * metadata) and vault_v2.c (the index vault's tables). Nothing else
 * includes it.
 */
#ifndef SMOE_VAULT_INT_H
#define SMOE_VAULT_INT_H

#include <stdint.h>
#include <string.h>

#include "byteorder.h"
#include "hash.h"
#include "vault/vault.h"

typedef struct smoe__vhdr {
    uint32_t version, header_size, alignment, component_align;
    uint32_t layers, experts, entries, layouts, components, flags;
    uint64_t table_offset, layout_offset, meta_offset, meta_bytes;
    uint64_t data_offset, file_size, checksum;
    /* version 2 */
    uint32_t sources, extents, names_bytes;
    uint64_t source_offset, extent_offset;
} smoe__vhdr;

/* A table region, for range and overlap checks. */
typedef struct smoe__vregion {
    const char *field; /* header field naming its offset */
    const char *what;
    uint64_t off, len;
} smoe__vregion;

#define SMOE__VREGIONS 5

typedef struct smoe__vloader {
    const char *path;
    const smoe__io *io;
    int fd;
    uint64_t actual; /* the file's size now */
    smoe__vhdr h;
    unsigned char raw[SMOE__VAULT_HEADER_SIZE];
    unsigned char *table;  /* the expert table */
    unsigned char *lct;    /* layouts x 16, then components x 128 */
    unsigned char *meta;   /* meta_bytes */
    unsigned char *xts;    /* version 2: the extent table */
    unsigned char *srcs;   /* version 2: the source table, then the names */
    smoe__vregion reg[SMOE__VREGIONS];
    uint32_t n_reg;
    smoe__vault_extent read[SMOE__VAULT_MAX_READS]; /* read so far (vault.h) */
    uint32_t n_read;
} smoe__vloader;

/* A byte range of the file and the record it belongs to, for overlap
 * checks; smoe__vspan_cmp orders them by offset, then record (qsort). */
typedef struct smoe__vspan {
    uint64_t off, len;
    uint32_t idx;
} smoe__vspan;
int smoe__vspan_cmp(const void *a, const void *b);

/* Read n bytes at off into buf, remembering the pages for the cache drop;
 * `what` names the table in the message. */
int smoe__vload_read(smoe__vloader *L, void *buf, uint64_t n, uint64_t off, const char *what);
/* Count in 1..max, else SMOE_ECOUNT naming the header field. */
int smoe__vload_count(const smoe__vloader *L, const char *field, uint64_t v, uint64_t max);
/* The counts both versions have (layers, experts and their product,
 * entries, layouts, components): SMOE_ECOUNT naming the field. */
int smoe__vload_counts(const smoe__vloader *L);
/* The metadata's size limit, and a file shorter than it was written
 * (SMOE_ETRUNC). */
int smoe__vload_sizes(const smoe__vloader *L);
/* The fields both versions' expert table entries begin with. */
typedef struct smoe__ventry_head {
    const unsigned char *r; /* the record */
    smoe__vault_entry *e;   /* its index entry */
    uint32_t layer, expert, layout;
} smoe__ventry_head;
/* Entry i (of rsize-byte records): its layer, expert and layout in range,
 * flags 0, the pair not seen before (SMOE_EDUP names the first entry
 * holding it), in the spec's order. */
int smoe__vload_entry_head(const smoe__vloader *L, smoe__vault *v, uint32_t i, size_t rsize,
                           smoe__ventry_head *out);
/* Regions reg[0..n_reg): overflow, 8-alignment, at or after `floor`,
 * inside file_size, no two overlapping. */
int smoe__vload_regions(smoe__vloader *L, uint64_t floor);
/* Read the regions, allocating each; compare the header checksum over
 * header bytes 0..119 and the regions in order. */
int smoe__vload_tables(smoe__vloader *L, unsigned char **bufs[SMOE__VREGIONS]);
/* Components and layouts (version 1's rules, components aligned to
 * h.component_align). */
int smoe__vload_layouts(smoe__vloader *L, smoe__vault *v);
/* The metadata text. */
int smoe__vload_meta(smoe__vloader *L, smoe__vault *v);
/* Fill v's common fields and allocate its index, layouts and components. */
int smoe__vload_alloc(smoe__vloader *L, smoe__vault *v);

/* vault_v2.c: the rest of an index vault, after the header's magic and
 * version. */
int smoe__vload_v2(smoe__vloader *L, smoe__vault *v);

#define SMOE__ENTRY_FMT "%s: expert table entry %" PRIu32 " (layer %" PRIu32 ", expert %" PRIu32 "): "

#endif
