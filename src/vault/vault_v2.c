/*
 * vault_v2.c - reading and validating an index vault (docs/vault-format.md,
 * "Version 2"): a vault whose experts are extents of source files.
 *
 * Invariants of smoe__vload_v2(), as of version 1's reader (vault_read.c),
 * whose helpers it shares (vault_int.h):
 *  - No field is used before it is checked: header fields, counts, table
 *    locations, checksum, components and layouts, sources, extents, entries,
 *    then the metadata; the first failure wins.
 *  - Every allocation and read is bounded by the file's actual size
 *    (check_counts) but the dense index, bounded by layers x experts.
 *  - Every offset + size is computed only after checking it cannot wrap.
 *  - Source files are not opened here: this is the vault's own consistency.
 *    Whether the sources still match is source.c's (at open) and the
 *    per-expert hashes' (at load) business.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "alloc.h"
#include "error.h"
#include "vault/extent.h"
#include "vault/vault.h"
#include "vault/vault_int.h"


/* ---- header fields and counts ----------------------------------------- */

static int check_header(smoe__vloader *L)
{
    const char *p = L->path;
    smoe__vhdr *h = &L->h;
    const unsigned char *r = L->raw;
    h->sources = smoe__le32(r + 20);
    h->component_align = 1; /* components lie where their source put them */
    h->source_offset = smoe__le64(r + 80);
    h->extent_offset = smoe__le64(r + 96);
    h->extents = smoe__le32(r + 104);
    h->names_bytes = smoe__le32(r + 108);
    if (h->header_size != SMOE__VAULT_HEADER_SIZE)
        return smoe__fail(SMOE_EFORMAT, "%s: header field header_size: found %" PRIu32
                          ", expected %u", p, h->header_size, SMOE__VAULT_HEADER_SIZE);
    if (h->alignment != SMOE__VAULT_ALIGN)
        return smoe__fail(SMOE_EFORMAT, "%s: header field alignment: found %" PRIu32
                          ", expected %u", p, h->alignment, SMOE__VAULT_ALIGN);
    if (h->flags & ~(uint32_t)SMOE__V2_NO_HASH)
        return smoe__fail(SMOE_EFORMAT, "%s: header field flags: found 0x%" PRIx32
                          ", expected 0 or 0x1 (no hashes)", p, h->flags);
    for (unsigned i = 112; i < 120; i++)
        if (r[i] != 0)
            return smoe__fail(SMOE_EFORMAT, "%s: header field reserved: byte %u is 0x%02x, "
                              "expected 0", p, i, r[i]);
    return 0;
}

/* What a table of count records of rsize bytes (plus extra) needs, against
 * the file's actual size: this bounds every allocation that follows. */
static int table_fits(const smoe__vloader *L, const char *fields, uint64_t count,
                      uint64_t rsize, uint64_t extra)
{
    uint64_t bytes = count * rsize + extra; /* counts < 2^32, sizes < 2^8 */
    if (bytes <= L->actual)
        return 0;
    return smoe__fail(SMOE_ECOUNT, "%s: header field%s %s: %" PRIu64 " records need %" PRIu64
                      " bytes of tables, but the file has only %" PRIu64 " bytes", L->path,
                      strchr(fields, ',') ? "s" : "", fields, count, bytes, L->actual);
}

static int check_counts(smoe__vloader *L)
{
    const smoe__vhdr *h = &L->h;
    const char *p = L->path;
    int rc;
    if ((rc = smoe__vload_counts(L)) < 0 ||
        (rc = smoe__vload_count(L, "sources", h->sources, SMOE__V2_MAX_SOURCES)) < 0 ||
        (rc = smoe__vload_count(L, "extents", h->extents, UINT32_MAX)) < 0 ||
        (rc = smoe__vload_count(L, "names_bytes", h->names_bytes,
                                (uint64_t)h->sources * SMOE__V2_NAME_MAX)) < 0 ||
        (rc = smoe__vload_sizes(L)) < 0)
        return rc;
    if ((rc = table_fits(L, "entries", h->entries, SMOE__V2_ENTRY_SIZE, 0)) < 0 ||
        (rc = table_fits(L, "layouts, components", h->layouts, SMOE__LAYOUT_SIZE,
                         (uint64_t)h->components * SMOE__COMPONENT_SIZE)) < 0 ||
        (rc = table_fits(L, "extents", h->extents, SMOE__V2_EXTENT_SIZE, 0)) < 0 ||
        (rc = table_fits(L, "sources, names_bytes", h->sources, SMOE__V2_SOURCE_SIZE,
                         h->names_bytes)) < 0)
        return rc;
    if (h->meta_bytes > L->actual)
        return smoe__fail(SMOE_ECOUNT, "%s: header field meta_bytes: found %" PRIu64
                          ", but the file has only %" PRIu64 " bytes",
                          p, h->meta_bytes, L->actual);
    return 0;
}

/* The checksum covers the regions in this order. */
static int read_tables(smoe__vloader *L)
{
    const smoe__vhdr *h = &L->h;
    L->reg[0] = (smoe__vregion){"table_offset", "expert table", h->table_offset,
                                (uint64_t)h->entries * SMOE__V2_ENTRY_SIZE};
    L->reg[1] = (smoe__vregion){"layout_offset", "layout and component tables",
                                h->layout_offset,
                                (uint64_t)h->layouts * SMOE__LAYOUT_SIZE +
                                    (uint64_t)h->components * SMOE__COMPONENT_SIZE};
    L->reg[2] = (smoe__vregion){"extent_offset", "extent table", h->extent_offset,
                                (uint64_t)h->extents * SMOE__V2_EXTENT_SIZE};
    L->reg[3] = (smoe__vregion){"source_offset", "source table and names", h->source_offset,
                                (uint64_t)h->sources * SMOE__V2_SOURCE_SIZE + h->names_bytes};
    L->reg[4] = (smoe__vregion){"meta_offset", "metadata", h->meta_offset, h->meta_bytes};
    L->n_reg = 5;
    int rc = smoe__vload_regions(L, SMOE__VAULT_HEADER_SIZE);
    if (rc < 0)
        return rc;
    unsigned char **bufs[SMOE__VREGIONS] = {&L->table, &L->lct, &L->xts, &L->srcs, &L->meta};
    return smoe__vload_tables(L, bufs);
}

/* ---- components: contiguous, in order ---------------------------------- */

/* Each layout's components follow one another without gaps from offset 0:
 * the offsets are where each lies in the bytes the expert's hash covers. */
static int check_contiguous(const smoe__vloader *L, const smoe__vault *v)
{
    for (uint32_t j = 0; j < v->n_layouts; j++) {
        const smoe__vault_layout *lo = &v->layouts[j];
        uint64_t at = 0;
        for (uint32_t k = 0; k < lo->n; k++) {
            const smoe_component *c = &v->components[lo->first + k];
            if (c->offset != at)
                return smoe__fail(SMOE_EFORMAT, "%s: layout %" PRIu32 ": component %" PRIu32
                                  " (%s): field offset: found %" PRIu64 ", expected %" PRIu64
                                  " (an index vault's components follow one another from 0)",
                                  L->path, j, lo->first + k, c->name, c->offset, at);
            at += c->nbytes; /* end checked against overflow with the component */
        }
    }
    return 0;
}

/* ---- sources ------------------------------------------------------------ */

static int cmp_name(const void *a, const void *b)
{
    const smoe__vault_source *x = *(const smoe__vault_source *const *)a;
    const smoe__vault_source *y = *(const smoe__vault_source *const *)b;
    return strcmp(x->name, y->name);
}

#define SRC_FMT "%s: source %" PRIu32 ": "

/* What is wrong with a source name's form, or NULL: `smoe index` writes
 * "../" once per directory up from the vault, then the path down to the
 * file; nothing else is read (docs/security.md). */
static const char *name_form(const char *nm, uint32_t len)
{
    int down = 0; /* a component other than ".." seen */
    for (uint32_t at = 0; at <= len;) {
        const char *slash = memchr(nm + at, '/', len - at);
        uint32_t end = slash ? (uint32_t)(slash - nm) : len, n = end - at;
        if (n == 0)
            return "an empty component";
        if (n == 1 && nm[at] == '.')
            return "a '.' component";
        if (n == 2 && nm[at] == '.' && nm[at + 1] == '.') {
            if (down)
                return "a '..' after a downward component";
        } else {
            down = 1;
        }
        at = end + 1;
    }
    return down ? NULL : "no file after its '..' components";
}

static int check_source(const smoe__vloader *L, smoe__vault_source *s, uint32_t i)
{
    const char *p = L->path;
    const smoe__vhdr *h = &L->h;
    const unsigned char *r = L->srcs + (size_t)i * SMOE__V2_SOURCE_SIZE;
    const unsigned char *names = L->srcs + (size_t)h->sources * SMOE__V2_SOURCE_SIZE;
    s->size = smoe__le64(r);
    s->mtime_sec = (int64_t)smoe__le64(r + 8);
    s->mtime_nsec = smoe__le32(r + 16);
    s->kind = smoe__le32(r + 20);
    s->header_bytes = smoe__le64(r + 24);
    s->header_hash = smoe__hash_get(r + 32);
    s->align = smoe__le32(r + 40);
    uint32_t name_len = smoe__le32(r + 44);
    uint64_t name_off = smoe__le64(r + 48);
    if (s->mtime_nsec > 999999999u)
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "field mtime_nsec: found %" PRIu32
                          ", expected 0..999999999", p, i, s->mtime_nsec);
    if (s->kind != SMOE__V2_KIND_SAFETENSORS && s->kind != SMOE__V2_KIND_GGUF)
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "field kind: found %" PRIu32 ", expected 1 "
                          "(safetensors) or 2 (GGUF)", p, i, s->kind);
    if (s->header_bytes == 0 || s->header_bytes > SMOE__V2_HEADER_MAX)
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "field header_bytes: found %" PRIu64
                          ", expected 1..%llu", p, i, s->header_bytes, SMOE__V2_HEADER_MAX);
    if (s->header_bytes > s->size)
        return smoe__fail(SMOE_ERANGE, SRC_FMT "field header_bytes: %" PRIu64 " is past the "
                          "end of the file (size %" PRIu64 ")", p, i, s->header_bytes, s->size);
    if (s->align == 0 || s->align > SMOE__V2_MAX_ALIGN || (s->align & (s->align - 1)))
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "field align: found %" PRIu32 ", expected "
                          "a power of two from 1 to %u", p, i, s->align, SMOE__V2_MAX_ALIGN);
    if (name_len == 0 || name_len > SMOE__V2_NAME_MAX)
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "field name_len: found %" PRIu32
                          ", expected 1..%u", p, i, name_len, SMOE__V2_NAME_MAX);
    if (name_off > h->names_bytes || name_len > h->names_bytes - name_off)
        return smoe__fail(SMOE_ERANGE, SRC_FMT "fields name_offset, name_len: %" PRIu32
                          " bytes at %" PRIu64 " end past names_bytes %" PRIu32, p, i,
                          name_len, name_off, h->names_bytes);
    if (smoe__le64(r + 56) != 0)
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "field reserved: found %" PRIu64
                          ", expected 0", p, i, smoe__le64(r + 56));
    const unsigned char *nm = names + name_off;
    if (memchr(nm, 0, name_len) || !smoe__utf8_valid(nm, name_len))
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "name: holds a NUL byte or is not valid "
                          "UTF-8", p, i);
    if (nm[0] == '/')
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "name '%.*s': an absolute path, expected one "
                          "relative to the vault's directory", p, i, (int)name_len, nm);
    const char *bad = name_form((const char *)nm, name_len);
    if (bad)
        return smoe__fail(SMOE_EFORMAT, SRC_FMT "name '%.*s': %s, expected leading '..' "
                          "components, then a path downward, as smoe index writes it", p, i,
                          (int)name_len, nm, bad);
    if (!(s->name = smoe__malloc((size_t)name_len + 1)))
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the source names", p);
    memcpy(s->name, nm, name_len);
    s->name[name_len] = 0;
    return 0;
}

static int parse_sources(const smoe__vloader *L, smoe__vault *v)
{
    const uint32_t n = L->h.sources;
    v->sources = smoe__calloc(n, sizeof *v->sources);
    const smoe__vault_source **by = smoe__malloc((size_t)n * sizeof *by);
    int rc = 0;
    if (!v->sources || !by) {
        rc = smoe__fail(SMOE_ENOMEM, "%s: no memory for the source table", L->path);
        goto out;
    }
    v->n_sources = n;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rc = check_source(L, &v->sources[i], i);
        by[i] = &v->sources[i];
    }
    if (rc == 0) {
        qsort(by, n, sizeof *by, cmp_name);
        for (uint32_t k = 1; k < n; k++)
            if (!strcmp(by[k]->name, by[k - 1]->name)) {
                rc = smoe__fail(SMOE_EDUP, SRC_FMT "name '%s': also source %" PRIu32
                                ", expected each file named once", L->path,
                                (uint32_t)(by[k] - v->sources), by[k]->name,
                                (uint32_t)(by[k - 1] - v->sources));
                break;
            }
    }
out:
    free(by);
    return rc;
}

/* ---- extents ------------------------------------------------------------ */

#define XT_FMT "%s: extent %" PRIu32 " (source %" PRIu32 "): "

typedef struct xspan {
    uint32_t source, idx;
    uint64_t off, len;
} xspan;

static int cmp_xspan(const void *a, const void *b)
{
    const xspan *x = a, *y = b;
    if (x->source != y->source)
        return x->source < y->source ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int check_extent(const smoe__vloader *L, const smoe__vault *v, uint32_t i,
                        smoe__vault_xt *x)
{
    const char *p = L->path;
    const unsigned char *r = L->xts + (size_t)i * SMOE__V2_EXTENT_SIZE;
    x->source = smoe__le32(r);
    x->offset = smoe__le64(r + 8);
    x->length = smoe__le64(r + 16);
    if (x->source >= v->n_sources)
        return smoe__fail(SMOE_EFORMAT, "%s: extent %" PRIu32 ": field source: found %" PRIu32
                          ", expected less than sources %" PRIu32, p, i, x->source,
                          v->n_sources);
    const smoe__vault_source *s = &v->sources[x->source];
    if (smoe__le32(r + 4) != 0)
        return smoe__fail(SMOE_EFORMAT, XT_FMT "field flags: found 0x%" PRIx32 ", expected 0",
                          p, i, x->source, smoe__le32(r + 4));
    if (x->length == 0)
        return smoe__fail(SMOE_EFORMAT, XT_FMT "field length is 0, expected at least 1", p, i,
                          x->source);
    if (x->offset > UINT64_MAX - x->length)
        return smoe__fail(SMOE_EOVERFLOW, XT_FMT "fields offset + length: %" PRIu64 " + %"
                          PRIu64 " overflows", p, i, x->source, x->offset, x->length);
    if (x->offset < s->header_bytes)
        return smoe__fail(SMOE_ERANGE, XT_FMT "field offset: %" PRIu64 " lies in the header "
                          "of '%s' (%" PRIu64 " bytes)", p, i, x->source, x->offset, s->name,
                          s->header_bytes);
    if (x->offset + x->length > s->size)
        return smoe__fail(SMOE_ERANGE, XT_FMT "fields offset, length: [%" PRIu64 ", %" PRIu64
                          ") ends past the end of '%s' (size %" PRIu64 ")", p, i, x->source,
                          x->offset, x->offset + x->length, s->name, s->size);
    if (x->offset % s->align)
        return smoe__fail(SMOE_EALIGN, XT_FMT "field offset: %" PRIu64 " is not a multiple of "
                          "the alignment %" PRIu32 " of '%s'", p, i, x->source, x->offset,
                          s->align, s->name);
    return 0;
}

/* Each source's extents by offset (sp sorted so), for the checks against
 * the source's tensors at open. */
static int keep_order(const smoe__vloader *L, smoe__vault *v, const xspan *sp)
{
    const uint32_t n = v->n_extents;
    v->xt_by_source = smoe__malloc((size_t)(n ? n : 1) * sizeof *v->xt_by_source);
    v->xt_source_first = smoe__calloc((size_t)v->n_sources + 1, sizeof *v->xt_source_first);
    if (!v->xt_by_source || !v->xt_source_first)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the extent table", L->path);
    for (uint32_t k = 0; k < n; k++) {
        v->xt_by_source[k] = sp[k].idx;
        v->xt_source_first[sp[k].source + 1]++;
    }
    for (uint32_t i = 0; i < v->n_sources; i++)
        v->xt_source_first[i + 1] += v->xt_source_first[i];
    return 0;
}

static int parse_extents(const smoe__vloader *L, smoe__vault *v)
{
    const uint32_t n = L->h.extents;
    v->extents = smoe__malloc((size_t)n * sizeof *v->extents);
    xspan *sp = smoe__malloc((size_t)n * sizeof *sp);
    int rc = 0;
    if (!v->extents || !sp) {
        rc = smoe__fail(SMOE_ENOMEM, "%s: no memory for the extent table", L->path);
        goto out;
    }
    v->n_extents = n;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rc = check_extent(L, v, i, &v->extents[i]);
        sp[i] = (xspan){v->extents[i].source, i, v->extents[i].offset, v->extents[i].length};
    }
    if (rc < 0)
        goto out;
    /* No byte of a source belongs to two extents (two experts, or two
     * components of one). */
    qsort(sp, n, sizeof *sp, cmp_xspan);
    for (uint32_t k = 1; k < n; k++) {
        const xspan *a = &sp[k - 1], *b = &sp[k];
        if (a->source == b->source && b->off < a->off + a->len) {
            rc = smoe__fail(SMOE_EOVERLAP, XT_FMT "fields offset, length: [%" PRIu64 ", %"
                            PRIu64 ") overlaps extent %" PRIu32 " at [%" PRIu64 ", %" PRIu64
                            ") in '%s'", L->path, b->idx, b->source, b->off, b->off + b->len,
                            a->idx, a->off, a->off + a->len, v->sources[b->source].name);
            break;
        }
    }
    if (rc == 0)
        rc = keep_order(L, v, sp);
out:
    free(sp);
    return rc;
}

/* ---- entries ------------------------------------------------------------ */

#define ENTRY_FMT SMOE__ENTRY_FMT

/* Entry i's extents: one per component of its layout, each as long. */
static int check_entry_extents(const smoe__vloader *L, const smoe__vault *v, uint32_t i,
                               uint32_t layer, uint32_t expert, uint64_t first,
                               const smoe__vault_layout *lo)
{
    for (uint32_t k = 0; k < lo->n; k++) {
        const smoe__vault_xt *x = &v->extents[first + k];
        const smoe_component *c = &v->components[lo->first + k];
        if (x->length != c->nbytes)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "extent %" PRIu64 " holds %" PRIu64
                              " bytes, expected the %" PRIu64 " of component '%s'", L->path,
                              i, layer, expert, first + k, x->length, c->nbytes, c->name);
    }
    return 0;
}

static int check_entries(const smoe__vloader *L, smoe__vault *v)
{
    const char *p = L->path;
    const smoe__vhdr *h = &L->h;
    uint64_t next = 0; /* the extent the next entry starts at */
    for (uint32_t i = 0; i < h->entries; i++) {
        smoe__ventry_head eh;
        int rc = smoe__vload_entry_head(L, v, i, SMOE__V2_ENTRY_SIZE, &eh);
        if (rc < 0)
            return rc; /* range, flags, duplicates */
        const uint32_t layer = eh.layer, expert = eh.expert, layout = eh.layout;
        uint64_t first = smoe__le64(eh.r + 16), hash = smoe__hash_get(eh.r + 24);
        size_t key = (size_t)layer * h->experts + expert;
        smoe__vault_entry *e = eh.e;
        const smoe__vault_layout *lo = &v->layouts[layout];
        if (first != next)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field first_extent: found %" PRIu64
                              ", expected %" PRIu64 " (each entry's extents follow the "
                              "previous entry's)", p, i, layer, expert, first, next);
        if (lo->n > h->extents - first)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "fields first_extent, layout: its %"
                              PRIu32 " extents from %" PRIu64 " run past the %" PRIu32
                              " of the extent table", p, i, layer, expert, lo->n, first,
                              h->extents);
        if ((h->flags & SMOE__V2_NO_HASH) && hash != 0)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field hash: found %016" PRIx64
                              ", expected 0 (header flag: no hashes)", p, i, layer, expert,
                              hash);
        rc = check_entry_extents(L, v, i, layer, expert, first, lo);
        if (rc < 0)
            return rc;
        next = first + lo->n;
        e->size = lo->min_bytes;
        e->hash = hash;
        e->layout = layout;
        e->present = 1;
        v->xent[key].first_extent = (uint32_t)first;
    }
    if (next != h->extents)
        return smoe__fail(SMOE_EFORMAT, "%s: header field extents: found %" PRIu32
                          ", but the entries use %" PRIu64, p, h->extents, next);
    return 0;
}

/* ---- the whole ------------------------------------------------------------ */

int smoe__vload_v2(smoe__vloader *L, smoe__vault *v)
{
    int rc;
    if ((rc = check_header(L)) < 0 || (rc = check_counts(L)) < 0 ||
        (rc = smoe__shape_check(L->h.layers, L->h.experts, L->h.entries, L->path)) < 0 ||
        (rc = read_tables(L)) < 0 || (rc = smoe__vload_alloc(L, v)) < 0)
        return rc;
    v->flags = L->h.flags;
    v->xent = smoe__calloc((size_t)L->h.layers * L->h.experts, sizeof *v->xent);
    if (!v->xent)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the vault's index", L->path);
    if ((rc = smoe__vload_layouts(L, v)) < 0 || (rc = check_contiguous(L, v)) < 0 ||
        (rc = parse_sources(L, v)) < 0 || (rc = parse_extents(L, v)) < 0 ||
        (rc = check_entries(L, v)) < 0 || (rc = smoe__vload_meta(L, v)) < 0)
        return rc;
    /* Slot sizes at the usual read alignment; smoe_open plans again with
     * the one its descriptors need. */
    return smoe__extent_plan(v, SMOE__EXTENT_ALIGN);
}
