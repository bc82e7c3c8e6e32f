/*
 * vault.h - reading and validating a vault (docs/vault-format.md).
 *
 * smoe__vault_load() checks every field before it trusts it and builds the
 * dense expert index: entry (layer, expert) is index[layer * experts +
 * expert], an O(1) lookup with no per-token scanning.
 */
#ifndef SMOE_VAULT_H
#define SMOE_VAULT_H

#include <stddef.h>
#include <stdint.h>

#include "smoe/smoe.h"
#include "hash.h"
#include "io.h"

#define SMOE__VAULT_MAGIC "\x89SMOE\r\n\x1a"
#define SMOE__VAULT_VERSION 1u
/* The index vault (docs/vault-format.md, "Version 2"): its experts are
 * extents of source files (vault_v2.c). */
#define SMOE__VAULT_VERSION_INDEX 2u
#define SMOE__VAULT_HEADER_SIZE 128u
#define SMOE__VAULT_ALIGN 16384u
#define SMOE__ENTRY_SIZE 48u
#define SMOE__LAYOUT_SIZE 16u
#define SMOE__COMPONENT_SIZE 128u
#define SMOE__META_MAX (1u << 20)
/* (layer, expert) pairs a vault may hold: bounded by the slot word's key bits. */
#define SMOE__MAX_EXPERTS_TOTAL (1u << 22)
/* Pairs a vault may declare for the entries it holds: smoe_open allocates
 * about 100 bytes per declared pair (index, residency map, counters) and
 * the histogram file is 8 bytes per pair, so the shape must be justified
 * by entries present: at most 64 pairs per entry, or 65536 in all. */
#define SMOE__PAIRS_PER_ENTRY 64u
#define SMOE__PAIRS_FREE 65536u
#define SMOE__MAX_LAYOUTS 65536u
#define SMOE__MAX_COMPONENTS (1u << 20)
/* Version 2 (vault_v2.c) */
#define SMOE__V2_ENTRY_SIZE 32u
#define SMOE__V2_EXTENT_SIZE 24u
#define SMOE__V2_SOURCE_SIZE 64u
#define SMOE__V2_MAX_SOURCES 65536u
#define SMOE__V2_NAME_MAX 4095u
#define SMOE__V2_MAX_ALIGN (1u << 20)
/* Header bytes a source may have hashed: GGUF headers with their
 * tokenizers run to tens of MiB; the tool refuses more than 1 GiB. */
#define SMOE__V2_HEADER_MAX (1ull << 30)
enum {
    SMOE__V2_NO_HASH = 1u << 0, /* header flags: entries carry no hash */
    SMOE__V2_KIND_SAFETENSORS = 1, SMOE__V2_KIND_GGUF = 2
};

typedef struct smoe__vault_entry {
    uint64_t offset;  /* file offset, multiple of 16 KiB (index vault: 0) */
    uint64_t size;    /* payload bytes; an index vault's: its slot image (extent.h) */
    uint64_t padded;  /* multiple of 16 KiB; 0 means absent */
    uint64_t hash;    /* XXH3-64 of the payload (index vault: of its components) */
    uint32_t layout;
    uint32_t present; /* 1 if the vault has this (layer, expert) */
} smoe__vault_entry;

typedef struct smoe__vault_layout {
    uint32_t first;     /* index of its first component */
    uint32_t n;         /* component count */
    uint64_t min_bytes; /* end of its last component */
} smoe__vault_layout;

/* An index vault's source file (docs/vault-format.md, "Source record"). */
typedef struct smoe__vault_source {
    char *name;            /* as recorded: relative to the vault's directory */
    uint64_t size;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint32_t kind;         /* SMOE__V2_KIND_* */
    uint64_t header_bytes; /* the prefix header_hash covers */
    uint64_t header_hash;
    uint32_t align;        /* every extent offset in the file is a multiple */
} smoe__vault_source;

/* An extent: one component's bytes in a source file. */
typedef struct smoe__vault_xt {
    uint64_t offset, length;
    uint32_t source;
} smoe__vault_xt;

/* A read that fills part of a slot (extent.c): bytes [file_off, file_off +
 * len) of a source, rounded out to the read alignment, land at slot_off. */
typedef struct smoe__vault_seg {
    uint64_t file_off, len, slot_off;
    uint32_t source;
} smoe__vault_seg;

/* Per (layer, expert) of an index vault, beside its entry. */
typedef struct smoe__vault_xentry {
    uint32_t first_extent; /* its extents: one per component, in layout order */
    uint32_t first_seg;    /* its reads, in slot order (extent.c) */
    uint32_t n_seg;
} smoe__vault_xentry;

/* What the reader read through the page cache: the header and the tables,
 * each rounded out to 16 KiB (blobs fill whole 16 KiB units, so these
 * never hold a blob's byte). */
#define SMOE__VAULT_MAX_READS 8
typedef struct smoe__vault_extent {
    uint64_t off, len;
} smoe__vault_extent;

typedef struct smoe__vault {
    char *path;
    uint32_t version;      /* 1, or SMOE__VAULT_VERSION_INDEX */
    uint32_t flags;        /* index vault: SMOE__V2_NO_HASH */
    uint32_t layers, experts, entries, n_layouts, n_components, component_align;
    uint32_t top_k; /* metadata "top_k", 0 if absent */
    uint64_t file_size;    /* actual size of the file */
    uint64_t max_padded, total_padded;
    uint64_t vault_id;     /* the header checksum */
    uint64_t dev, ino;     /* the file validated (st_dev, st_ino; 0, 0: unknown) */
    smoe__vault_entry *index;      /* layers * experts, dense */
    smoe__vault_layout *layouts;
    smoe_component *components;
    char *meta;                    /* raw "key=value\n" lines, NUL-terminated */
    uint64_t meta_bytes;
    smoe__vault_extent read[SMOE__VAULT_MAX_READS];
    uint32_t n_read;
    /* Index vaults only (NULL, 0 otherwise). */
    smoe__vault_source *sources;
    uint32_t n_sources;
    uint32_t n_extents;
    smoe__vault_xt *extents;
    /* The extents of source i, by offset: xt_by_source[xt_source_first[i]
     * .. xt_source_first[i + 1]) (n_sources + 1 entries), for checking them
     * against the file's tensors at open (source.c). */
    uint32_t *xt_by_source;
    uint32_t *xt_source_first;
    smoe__vault_xentry *xent;      /* layers * experts, beside index */
    /* The slot images at read alignment plan_align (extent.c) */
    smoe__vault_seg *segs;
    uint32_t n_segs, plan_align;
    uint64_t *comp_at;             /* per extent: its first byte's slot offset */
} smoe__vault;

/*
 * Read and validate the vault at path through io. On failure returns a
 * negative SMOE_E* code, sets smoe_last_error() to a message naming the
 * file and the field, and leaves *v empty (smoe__vault_free is still safe).
 */
int smoe__vault_load(smoe__vault *v, const char *path, const smoe__io *io);
/* smoe__vault_load drops the pages it read from the page cache (as
 * smoe__vault_drop_read does) unless flags has SMOE__VAULT_KEEP_CACHE:
 * smoe_open drops them itself, and only with direct I/O in effect. An
 * index vault's pages are always dropped here: no descriptor of the vault
 * stays open to drop them later. */
enum { SMOE__VAULT_KEEP_CACHE = 1u << 0 };
int smoe__vault_load_ex(smoe__vault *v, const char *path, const smoe__io *io, unsigned flags);
/* Drop the pages of v->read through fd, any descriptor of the vault. */
void smoe__vault_drop_read(const smoe__vault *v, const smoe__io *io, int fd);
void smoe__vault_free(smoe__vault *v);

/* Entry of (layer, expert) or NULL when out of range or absent. */
static inline const smoe__vault_entry *
smoe__vault_entry_of(const smoe__vault *v, uint32_t layer, uint32_t expert)
{
    if (layer >= v->layers || expert >= v->experts)
        return NULL;
    const smoe__vault_entry *e = &v->index[(size_t)layer * v->experts + expert];
    return e->present ? e : NULL;
}

/* Value of metadata key, or NULL. Pointer into v->meta's parsed copy. */
const char *smoe__vault_meta(const smoe__vault *v, const char *key);


/* Sum of element bytes for shape under dtype; 0 when not computable. */
uint64_t smoe__dtype_bytes(uint32_t dtype, const uint64_t *shape, uint32_t ndim,
                           uint32_t quant_group, uint32_t quant_bits);

/*
 * Check one component's own fields as the reader does (name terminated,
 * non-empty UTF-8; ndim; shape; quant fields; offset a multiple of
 * component_align; nbytes >= 1, no overflow, equal to what a known dtype and
 * shape give). The writer uses it too, so it never writes what the reader
 * rejects. `where` starts the message ("vault.smoe: component 3").
 * @return 0, SMOE_EFORMAT, SMOE_EALIGN or SMOE_EOVERFLOW.
 */
int smoe__component_check(const smoe_component *c, uint32_t component_align,
                          const char *where);
/*
 * Is layers x experts justified by entries (SMOE__PAIRS_PER_ENTRY,
 * SMOE__PAIRS_FREE)? Shared by the reader and the writer. `where` starts
 * the message. @return 0 or SMOE_ECOUNT.
 */
int smoe__shape_check(uint32_t layers, uint32_t experts, uint32_t entries,
                      const char *where);
/* Encode c as a 128-byte component record at p (both versions' writers);
 * name bytes after its NUL are written as they are: pass a zeroed name. */
void smoe__component_put(unsigned char *p, const smoe_component *c);
/* 1 if s[0..n) is well-formed UTF-8, else 0. */
int smoe__utf8_valid(const void *s, size_t n);

#endif
