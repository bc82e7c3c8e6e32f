/*
 * vault_read.c - reading and validating a vault (docs/vault-format.md):
 * the header's common part and version 1; the layouts, components and
 * metadata both versions share (vault_int.h). An index vault's own tables
 * are vault_v2.c's.
 *
 * Invariants of smoe__vault_load():
 *  - No field is used before it is checked, in the order of the spec's
 *    "What the reader checks": header, counts, table locations, checksum,
 *    components and layouts, entries; then the metadata.
 *  - Every byte count passed to malloc or to a read is bounded by the
 *    file's actual size (checked in check_counts() before any table is
 *    allocated), except the dense index, which is bounded by the spec's
 *    limit layers x experts <= 2^22.
 *  - Every offset + size is computed only after checking it cannot wrap.
 *  - All file access goes through the smoe__io table the caller passes.
 *  - On failure *v is left all-zero and the detailed message names the
 *    file, the field, the record and the found and expected values.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "smoe/smoe.h"
#include "alloc.h"
#include "error.h"
#include "vault.h"
#include "vault_int.h"

#define DATA_OFFSET ((uint64_t)SMOE__VAULT_ALIGN)
#define MIN_COMPONENT_ALIGN 256u

typedef smoe__vhdr header;
typedef smoe__vregion region;
typedef smoe__vloader loader;

#define rd32 smoe__rd32
#define rd64 smoe__rd64
#define rd_hash smoe__rd_hash

uint64_t smoe__hash(const void *data, size_t n)
{
    return XXH3_64bits(data, n);
}

int smoe__vload_read(loader *L, void *buf, uint64_t n, uint64_t off, const char *what)
{
    int err_no = 0;
    if (n == 0)
        return 0;
    if (L->n_read < SMOE__VAULT_MAX_READS) {
        uint64_t lo = off / SMOE__VAULT_ALIGN * SMOE__VAULT_ALIGN;
        uint64_t hi = (off + n + SMOE__VAULT_ALIGN - 1) / SMOE__VAULT_ALIGN * SMOE__VAULT_ALIGN;
        L->read[L->n_read++] = (smoe__vault_extent){lo, hi - lo};
    }
    int rc = smoe__io_read_full(L->io, L->fd, buf, (size_t)n, off, NULL, &err_no);
    if (rc == SMOE_ETRUNC)
        return smoe__fail(SMOE_ETRUNC, "%s: %s: the file ended before %" PRIu64
                          " bytes at offset %" PRIu64 " could be read",
                          L->path, what, n, off);
    if (rc < 0)
        return smoe__fail(rc, "%s: %s: reading %" PRIu64 " bytes at offset %" PRIu64
                          " failed: %s", L->path, what, n, off, strerror(err_no));
    return 0;
}

/* ---- step 1: the header's fixed fields ------------------------------ */

static int check_header(loader *L)
{
    const char *p = L->path;
    header *h = &L->h;
    if (L->actual < SMOE__VAULT_HEADER_SIZE)
        return smoe__fail(SMOE_ETRUNC, "%s: header: the file is %" PRIu64
                          " bytes, shorter than the %u-byte header",
                          p, L->actual, SMOE__VAULT_HEADER_SIZE);
    int rc = smoe__vload_read(L, L->raw, SMOE__VAULT_HEADER_SIZE, 0, "header");
    if (rc < 0)
        return rc;
    const unsigned char *r = L->raw;
    if (memcmp(r, SMOE__VAULT_MAGIC, 8) != 0)
        return smoe__fail(SMOE_EMAGIC, "%s: header field magic: found %02x %02x %02x %02x "
                          "%02x %02x %02x %02x, expected 89 53 4d 4f 45 0d 0a 1a "
                          "(not a vault, or mangled by a text-mode transfer)", p,
                          r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    h->version = rd32(r + 8);
    h->header_size = rd32(r + 12);
    h->alignment = rd32(r + 16);
    h->component_align = rd32(r + 20);
    h->layers = rd32(r + 24);
    h->experts = rd32(r + 28);
    h->entries = rd32(r + 32);
    h->layouts = rd32(r + 36);
    h->components = rd32(r + 40);
    h->flags = rd32(r + 44);
    h->table_offset = rd64(r + 48);
    h->layout_offset = rd64(r + 56);
    h->meta_offset = rd64(r + 64);
    h->meta_bytes = rd64(r + 72);
    h->data_offset = rd64(r + 80);
    h->file_size = rd64(r + 88);
    h->checksum = rd_hash(r + 120);

    if (h->version == SMOE__VAULT_VERSION_INDEX)
        return 0; /* the rest is vault_v2.c's */
    if (h->version != SMOE__VAULT_VERSION)
        return smoe__fail(SMOE_EVERSION, "%s: header field version: found %" PRIu32
                          ", expected %u or %u (the versions this library reads)",
                          p, h->version, SMOE__VAULT_VERSION, SMOE__VAULT_VERSION_INDEX);
    if (h->header_size != SMOE__VAULT_HEADER_SIZE)
        return smoe__fail(SMOE_EFORMAT, "%s: header field header_size: found %" PRIu32
                          ", expected %u", p, h->header_size, SMOE__VAULT_HEADER_SIZE);
    if (h->alignment != SMOE__VAULT_ALIGN)
        return smoe__fail(SMOE_EFORMAT, "%s: header field alignment: found %" PRIu32
                          ", expected %u", p, h->alignment, SMOE__VAULT_ALIGN);
    uint32_t ca = h->component_align;
    if (ca < MIN_COMPONENT_ALIGN || ca > SMOE__VAULT_ALIGN || (ca & (ca - 1)) != 0)
        return smoe__fail(SMOE_EFORMAT, "%s: header field component_align: found %" PRIu32
                          ", expected a power of two from %u to %u",
                          p, ca, MIN_COMPONENT_ALIGN, SMOE__VAULT_ALIGN);
    if (h->flags != 0)
        return smoe__fail(SMOE_EFORMAT, "%s: header field flags: found 0x%" PRIx32
                          ", expected 0", p, h->flags);
    if (h->data_offset != DATA_OFFSET)
        return smoe__fail(SMOE_EFORMAT, "%s: header field data_offset: found %" PRIu64
                          ", expected %" PRIu64, p, h->data_offset, DATA_OFFSET);
    for (unsigned i = 96; i < 120; i++)
        if (r[i] != 0)
            return smoe__fail(SMOE_EFORMAT, "%s: header field reserved: byte %u is 0x%02x, "
                              "expected 0", p, i, r[i]);
    return 0;
}

/* ---- step 2: counts ------------------------------------------------- */

int smoe__vload_count(const loader *L, const char *field, uint64_t v, uint64_t max)
{
    if (v >= 1 && v <= max)
        return 0;
    return smoe__fail(SMOE_ECOUNT, "%s: header field %s: found %" PRIu64
                      ", expected 1..%" PRIu64, L->path, field, v, max);
}

static int check_counts(loader *L)
{
    const header *h = &L->h;
    const char *p = L->path;
    int rc;
    if ((rc = smoe__vload_count(L, "layers", h->layers, 65536)) < 0 ||
        (rc = smoe__vload_count(L, "experts", h->experts, 65536)) < 0)
        return rc;
    uint64_t pairs = (uint64_t)h->layers * h->experts;
    if (pairs > SMOE__MAX_EXPERTS_TOTAL)
        return smoe__fail(SMOE_ECOUNT, "%s: header fields layers x experts: found %" PRIu32
                          " x %" PRIu32 " = %" PRIu64 ", expected at most %u",
                          p, h->layers, h->experts, pairs, SMOE__MAX_EXPERTS_TOTAL);
    if ((rc = smoe__vload_count(L, "entries", h->entries, pairs)) < 0 ||
        (rc = smoe__vload_count(L, "layouts", h->layouts, SMOE__MAX_LAYOUTS)) < 0 ||
        (rc = smoe__vload_count(L, "components", h->components, SMOE__MAX_COMPONENTS)) < 0)
        return rc;
    if (h->meta_bytes > SMOE__META_MAX)
        return smoe__fail(SMOE_ECOUNT, "%s: header field meta_bytes: found %" PRIu64
                          ", expected at most %u", p, h->meta_bytes, SMOE__META_MAX);
    /* A file shorter than it was written is truncated, whatever its counts
     * say: a cut copy would otherwise read as tables too large for it. */
    if (L->actual < h->file_size)
        return smoe__fail(SMOE_ETRUNC, "%s: header field file_size: the vault was written "
                          "with %" PRIu64 " bytes but the file has only %" PRIu64
                          " (truncated copy?)", p, h->file_size, L->actual);
    /* Table sizes against the real file: this bounds every allocation. */
    uint64_t tbytes = (uint64_t)h->entries * SMOE__ENTRY_SIZE;
    if (tbytes > L->actual)
        return smoe__fail(SMOE_ECOUNT, "%s: header field entries: %" PRIu32 " entries need a %"
                          PRIu64 "-byte expert table, but the file has only %" PRIu64 " bytes",
                          p, h->entries, tbytes, L->actual);
    uint64_t lbytes = (uint64_t)h->layouts * SMOE__LAYOUT_SIZE +
                      (uint64_t)h->components * SMOE__COMPONENT_SIZE;
    if (lbytes > L->actual)
        return smoe__fail(SMOE_ECOUNT, "%s: header fields layouts, components: %" PRIu32
                          " layouts and %" PRIu32 " components need %" PRIu64
                          " bytes of tables, but the file has only %" PRIu64 " bytes",
                          p, h->layouts, h->components, lbytes, L->actual);
    if (h->meta_bytes > L->actual)
        return smoe__fail(SMOE_ECOUNT, "%s: header field meta_bytes: found %" PRIu64
                          ", but the file has only %" PRIu64 " bytes",
                          p, h->meta_bytes, L->actual);
    return 0;
}

/* ---- step 3: where the tables are ------------------------------------ */

int smoe__vload_regions(loader *L, uint64_t floor)
{
    const header *h = &L->h;
    const char *p = L->path;
    const char *floor_name = h->version == SMOE__VAULT_VERSION ? "data_offset" : "header_size";
    for (uint32_t i = 0; i < L->n_reg; i++) {
        const region *g = &L->reg[i];
        if (g->off > UINT64_MAX - g->len)
            return smoe__fail(SMOE_EOVERFLOW, "%s: header field %s: %s offset %" PRIu64
                              " plus its size %" PRIu64 " overflows", p, g->field, g->what,
                              g->off, g->len);
        if (g->off % 8 != 0)
            return smoe__fail(SMOE_EALIGN, "%s: header field %s: %s offset %" PRIu64
                              " is not a multiple of 8", p, g->field, g->what, g->off);
        if (g->off < floor)
            return smoe__fail(SMOE_ERANGE, "%s: header field %s: %s offset %" PRIu64
                              " lies in the header area, expected at least %s %" PRIu64,
                              p, g->field, g->what, g->off, floor_name, floor);
        if (g->off + g->len > h->file_size)
            return smoe__fail(SMOE_ERANGE, "%s: header field %s: %s [%" PRIu64 ", %" PRIu64
                              ") ends past file_size %" PRIu64, p, g->field, g->what,
                              g->off, g->off + g->len, h->file_size);
    }
    for (uint32_t i = 0; i < L->n_reg; i++)
        for (uint32_t j = i + 1; j < L->n_reg; j++) {
            const region *a = &L->reg[i], *b = &L->reg[j];
            if (a->len && b->len && a->off < b->off + b->len && b->off < a->off + a->len)
                return smoe__fail(SMOE_EOVERLAP, "%s: header fields %s and %s: the %s [%"
                                  PRIu64 ", %" PRIu64 ") overlaps the %s [%" PRIu64 ", %"
                                  PRIu64 ")", p, a->field, b->field, a->what, a->off,
                                  a->off + a->len, b->what, b->off, b->off + b->len);
        }
    return 0;
}

static int check_locations(loader *L)
{
    const header *h = &L->h;
    L->reg[0] = (region){"table_offset", "expert table", h->table_offset,
                         (uint64_t)h->entries * SMOE__ENTRY_SIZE};
    L->reg[1] = (region){"layout_offset", "layout and component tables", h->layout_offset,
                         (uint64_t)h->layouts * SMOE__LAYOUT_SIZE +
                             (uint64_t)h->components * SMOE__COMPONENT_SIZE};
    L->reg[2] = (region){"meta_offset", "metadata", h->meta_offset, h->meta_bytes};
    L->n_reg = 3;
    return smoe__vload_regions(L, h->data_offset);
}

/* ---- step 4: read the tables, compare the checksum ------------------- */

int smoe__vload_tables(loader *L, unsigned char **bufs[SMOE__VREGIONS])
{
    const header *h = &L->h;
    /* Sizes were bounded by the file's size before; on a 32-bit machine
     * that can still exceed what one allocation may hold. */
    for (uint32_t i = 0; i < L->n_reg; i++)
        if (L->reg[i].len > SIZE_MAX / 2)
            return smoe__fail(SMOE_ENOMEM, "%s: the vault's tables are too large for this "
                              "machine", L->path);
    for (uint32_t i = 0; i < L->n_reg; i++) {
        *bufs[i] = smoe__malloc(L->reg[i].len ? (size_t)L->reg[i].len : 1);
        if (!*bufs[i])
            return smoe__fail(SMOE_ENOMEM, "%s: no memory for the vault's tables", L->path);
    }
    int rc;
    for (uint32_t i = 0; i < L->n_reg; i++)
        if ((rc = smoe__vload_read(L, *bufs[i], L->reg[i].len, L->reg[i].off,
                                   L->reg[i].what)) < 0)
            return rc;

    XXH3_state_t *st = smoe__alloc_refused() ? NULL : XXH3_createState();
    if (!st)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the checksum state", L->path);
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, L->raw, 120);
    for (uint32_t i = 0; i < L->n_reg; i++)
        XXH3_64bits_update(st, *bufs[i], (size_t)L->reg[i].len);
    uint64_t sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
#ifndef SMOE_FUZZING
    /* Fuzzing builds skip only this comparison, so that mutated inputs reach
     * the semantic checks below instead of all stopping here. */
    if (sum != h->checksum)
        return smoe__fail(SMOE_EHDRSUM, "%s: header field checksum: stored %016" PRIx64
                          ", computed %016" PRIx64 " over the header, tables and metadata "
                          "(corrupt header or tables)", L->path, h->checksum, sum);
#else
    (void)sum;
    (void)h;
#endif
    return 0;
}

static int read_tables(loader *L)
{
    unsigned char **bufs[SMOE__VREGIONS] = {&L->table, &L->lct, &L->meta};
    return smoe__vload_tables(L, bufs);
}

/* ---- step 5a: components and layouts ----------------------------------- */

static int check_component(loader *L, smoe__vault *v, uint32_t i)
{
    const unsigned char *r = L->lct + (size_t)L->h.layouts * SMOE__LAYOUT_SIZE +
                             (size_t)i * SMOE__COMPONENT_SIZE;
    smoe_component *c = &v->components[i];
    char where[1100];
    snprintf(where, sizeof where, "%s: component %" PRIu32, L->path, i);
    memcpy(c->name, r, SMOE_COMPONENT_NAME_MAX);
    c->dtype = rd32(r + 64);
    c->ndim = rd32(r + 68);
    for (int d = 0; d < SMOE_MAX_DIMS; d++)
        c->shape[d] = rd64(r + 72 + 8 * d);
    c->offset = rd64(r + 104);
    c->nbytes = rd64(r + 112);
    c->quant_group = rd32(r + 120);
    c->quant_bits = rd32(r + 124);
    const char *nul = memchr(r, 0, SMOE_COMPONENT_NAME_MAX);
    for (size_t k = nul ? (size_t)(nul - (const char *)r) : SMOE_COMPONENT_NAME_MAX;
         k < SMOE_COMPONENT_NAME_MAX; k++)
        if (r[k] != 0)
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field name is not NUL-padded (byte %zu "
                              "is 0x%02x)", where, c->name, k, r[k]);
    return smoe__component_check(c, L->h.component_align, where);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct span {
    uint64_t off, len;
    uint32_t idx;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int smoe__vload_layouts(loader *L, smoe__vault *v)
{
    const char *p = L->path;
    const header *h = &L->h;
    int rc = 0;
    for (uint32_t i = 0; i < h->components; i++)
        if ((rc = check_component(L, v, i)) < 0)
            return rc;

    /* Layout records: their component ranges must not overlap each other,
     * so the checks below visit every component at most once. */
    span *sp = smoe__malloc((size_t)h->layouts * sizeof *sp);
    const char **names = smoe__malloc((size_t)h->components * sizeof *names);
    if (!sp || !names) {
        rc = smoe__fail(SMOE_ENOMEM, "%s: no memory to check the layouts", p);
        goto out;
    }
    for (uint32_t j = 0; j < h->layouts; j++) {
        const unsigned char *r = L->lct + (size_t)j * SMOE__LAYOUT_SIZE;
        smoe__vault_layout *lo = &v->layouts[j];
        lo->first = rd32(r);
        lo->n = rd32(r + 4);
        lo->min_bytes = rd64(r + 8);
        if (lo->n == 0) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: layout %" PRIu32 ": field n_components is 0, "
                            "expected at least 1", p, j);
            goto out;
        }
        if ((uint64_t)lo->first + lo->n > h->components) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: layout %" PRIu32 ": fields first_component + "
                            "n_components: %" PRIu32 " + %" PRIu32 " exceeds components %"
                            PRIu32, p, j, lo->first, lo->n, h->components);
            goto out;
        }
        sp[j] = (span){lo->first, lo->n, j};
    }
    qsort(sp, h->layouts, sizeof *sp, cmp_span);
    for (uint32_t k = 1; k < h->layouts; k++)
        if (sp[k].off < sp[k - 1].off + sp[k - 1].len) {
            rc = smoe__fail(SMOE_EOVERLAP, "%s: layout %" PRIu32 ": components [%" PRIu64
                            ", %" PRIu64 ") overlap those of layout %" PRIu32 " [%" PRIu64
                            ", %" PRIu64 ")", p, sp[k].idx, sp[k].off, sp[k].off + sp[k].len,
                            sp[k - 1].idx, sp[k - 1].off, sp[k - 1].off + sp[k - 1].len);
            goto out;
        }

    for (uint32_t j = 0; j < h->layouts; j++) {
        const smoe__vault_layout *lo = &v->layouts[j];
        const smoe_component *c = &v->components[lo->first];
        for (uint32_t k = 1; k < lo->n; k++)
            if (c[k].offset < c[k - 1].offset + c[k - 1].nbytes) {
                rc = smoe__fail(SMOE_EOVERLAP, "%s: layout %" PRIu32 ": component %" PRIu32
                                " (%s) at offset %" PRIu64 " overlaps or precedes component %"
                                PRIu32 " (%s) ending at %" PRIu64 ", expected increasing, "
                                "non-overlapping offsets", p, j, lo->first + k, c[k].name,
                                c[k].offset, lo->first + k - 1, c[k - 1].name,
                                c[k - 1].offset + c[k - 1].nbytes);
                goto out;
            }
        uint64_t end = c[lo->n - 1].offset + c[lo->n - 1].nbytes;
        if (lo->min_bytes != end) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: layout %" PRIu32 ": field extent: found %" PRIu64
                            ", expected %" PRIu64 " (end of its last component)",
                            p, j, lo->min_bytes, end);
            goto out;
        }
        for (uint32_t k = 0; k < lo->n; k++)
            names[k] = c[k].name;
        qsort(names, lo->n, sizeof *names, cmp_str_ptr);
        for (uint32_t k = 1; k < lo->n; k++)
            if (strcmp(names[k], names[k - 1]) == 0) {
                rc = smoe__fail(SMOE_EFORMAT, "%s: layout %" PRIu32 ": component name \"%s\" "
                                "appears twice, expected unique names", p, j, names[k]);
                goto out;
            }
    }
out:
    free(sp);
    free(names);
    return rc;
}

/* ---- step 5b: expert table entries ------------------------------------ */

/* Index of the first entry before `limit` holding (layer, expert). */
static uint32_t first_entry_of(const loader *L, uint32_t layer, uint32_t expert,
                               uint32_t limit)
{
    for (uint32_t i = 0; i < limit; i++) {
        const unsigned char *r = L->table + (size_t)i * SMOE__ENTRY_SIZE;
        if (rd32(r) == layer && rd32(r + 4) == expert)
            return i;
    }
    return limit;
}

#define ENTRY_FMT SMOE__ENTRY_FMT

static int check_entries(loader *L, smoe__vault *v, span *sp)
{
    const char *p = L->path;
    const header *h = &L->h;
    for (uint32_t i = 0; i < h->entries; i++) {
        const unsigned char *r = L->table + (size_t)i * SMOE__ENTRY_SIZE;
        uint32_t layer = rd32(r), expert = rd32(r + 4), layout = rd32(r + 8);
        uint32_t flags = rd32(r + 12);
        uint64_t off = rd64(r + 16), size = rd64(r + 24), padded = rd64(r + 32);

        /* range */
        if (layer >= h->layers)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field layer: found %" PRIu32
                              ", expected less than layers %" PRIu32,
                              p, i, layer, expert, layer, h->layers);
        if (expert >= h->experts)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field expert: found %" PRIu32
                              ", expected less than experts %" PRIu32,
                              p, i, layer, expert, expert, h->experts);
        if (layout >= h->layouts)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field layout: found %" PRIu32
                              ", expected less than layouts %" PRIu32,
                              p, i, layer, expert, layout, h->layouts);
        if (flags != 0)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field flags: found 0x%" PRIx32
                              ", expected 0", p, i, layer, expert, flags);
        /* duplicates */
        smoe__vault_entry *e = &v->index[(size_t)layer * h->experts + expert];
        if (e->present)
            return smoe__fail(SMOE_EDUP, ENTRY_FMT "fields layer, expert: the pair already "
                              "appears in entry %" PRIu32, p, i, layer, expert,
                              first_entry_of(L, layer, expert, i));
        /* alignment */
        if (off % SMOE__VAULT_ALIGN != 0)
            return smoe__fail(SMOE_EALIGN, ENTRY_FMT "field offset: %" PRIu64 " is not a "
                              "multiple of %u", p, i, layer, expert, off, SMOE__VAULT_ALIGN);
        if (padded % SMOE__VAULT_ALIGN != 0)
            return smoe__fail(SMOE_EALIGN, ENTRY_FMT "field padded: %" PRIu64 " is not a "
                              "multiple of %u", p, i, layer, expert, padded, SMOE__VAULT_ALIGN);
        if (off < h->data_offset)
            return smoe__fail(SMOE_ERANGE, ENTRY_FMT "field offset: %" PRIu64 " lies in the "
                              "header area, expected at least data_offset %" PRIu64,
                              p, i, layer, expert, off, h->data_offset);
        /* sizes */
        if (size == 0 || size > padded)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field size: found %" PRIu64
                              ", expected 1..padded (%" PRIu64 ")",
                              p, i, layer, expert, size, padded);
        if (padded - size >= SMOE__VAULT_ALIGN)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field padded: found %" PRIu64
                              ", expected less than size + %u (%" PRIu64 " + %u)",
                              p, i, layer, expert, padded, SMOE__VAULT_ALIGN, size,
                              SMOE__VAULT_ALIGN);
        if (size < v->layouts[layout].min_bytes)
            return smoe__fail(SMOE_EFORMAT, ENTRY_FMT "field size: found %" PRIu64
                              ", expected at least the extent %" PRIu64 " of layout %" PRIu32,
                              p, i, layer, expert, size, v->layouts[layout].min_bytes, layout);
        /* overflow */
        if (off > UINT64_MAX - padded)
            return smoe__fail(SMOE_EOVERFLOW, ENTRY_FMT "fields offset + padded: %" PRIu64
                              " + %" PRIu64 " overflows", p, i, layer, expert, off, padded);
        /* file coverage */
        if (off + padded > h->file_size)
            return smoe__fail(SMOE_ETRUNC, ENTRY_FMT "fields offset, padded: the blob [%"
                              PRIu64 ", %" PRIu64 ") ends past the end of the file "
                              "(file_size %" PRIu64 ")", p, i, layer, expert, off,
                              off + padded, h->file_size);
        e->offset = off;
        e->size = size;
        e->padded = padded;
        e->hash = rd_hash(r + 40);
        e->layout = layout;
        e->present = 1;
        sp[i] = (span){off, padded, i};
        if (padded > v->max_padded)
            v->max_padded = padded;
        v->total_padded += padded;
    }

    /* overlap: between blobs (sorted by offset), then with the tables */
    qsort(sp, h->entries, sizeof *sp, cmp_span);
    for (uint32_t k = 0; k < h->entries; k++) {
        const unsigned char *r = L->table + (size_t)sp[k].idx * SMOE__ENTRY_SIZE;
        uint32_t layer = rd32(r), expert = rd32(r + 4);
        if (k > 0 && sp[k].off < sp[k - 1].off + sp[k - 1].len) {
            const unsigned char *q = L->table + (size_t)sp[k - 1].idx * SMOE__ENTRY_SIZE;
            return smoe__fail(SMOE_EOVERLAP, ENTRY_FMT "fields offset, padded: the blob [%"
                              PRIu64 ", %" PRIu64 ") overlaps entry %" PRIu32 " (layer %"
                              PRIu32 ", expert %" PRIu32 ") at [%" PRIu64 ", %" PRIu64 ")",
                              p, sp[k].idx, layer, expert, sp[k].off, sp[k].off + sp[k].len,
                              sp[k - 1].idx, rd32(q), rd32(q + 4), sp[k - 1].off,
                              sp[k - 1].off + sp[k - 1].len);
        }
        for (int t = 0; t < 3; t++) {
            const region *g = &L->reg[t];
            if (g->len && sp[k].off < g->off + g->len && g->off < sp[k].off + sp[k].len)
                return smoe__fail(SMOE_EOVERLAP, ENTRY_FMT "fields offset, padded: the blob [%"
                                  PRIu64 ", %" PRIu64 ") overlaps the %s [%" PRIu64 ", %"
                                  PRIu64 ") (header field %s)", p, sp[k].idx, layer, expert,
                                  sp[k].off, sp[k].off + sp[k].len, g->what, g->off,
                                  g->off + g->len, g->field);
        }
    }
    return 0;
}

/* ---- metadata ------------------------------------------------------------ */

/*
 * v->meta holds the raw text, a NUL, then a parsed copy of the same length
 * in which each line's first '=' and its '\n' are NULs: key\0value\0...
 */
int smoe__vload_meta(loader *L, smoe__vault *v)
{
    const char *p = L->path;
    size_t n = (size_t)L->h.meta_bytes;
    char *m = smoe__malloc(2 * n + 2);
    if (!m)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the metadata", p);
    memcpy(m, L->meta, n);
    m[n] = 0;
    char *kv = m + n + 1;
    memcpy(kv, L->meta, n);
    kv[n] = 0;
    v->meta = m;
    v->meta_bytes = n;

    if (memchr(L->meta, 0, n))
        return smoe__fail(SMOE_EFORMAT, "%s: metadata: contains a NUL byte, expected "
                          "key=value text lines", p);
    if (!smoe__utf8_valid(L->meta, n))
        return smoe__fail(SMOE_EFORMAT, "%s: metadata: not valid UTF-8", p);
    if (n > 0 && kv[n - 1] != '\n')
        return smoe__fail(SMOE_EFORMAT, "%s: metadata: the last line does not end with a "
                          "newline", p);
    unsigned line = 0;
    for (char *s = kv; s < kv + n; line++) {
        char *nl = memchr(s, '\n', (size_t)(kv + n - s));
        char *eq = memchr(s, '=', (size_t)(nl - s));
        if (!eq)
            return smoe__fail(SMOE_EFORMAT, "%s: metadata line %u: no '=', expected key=value",
                              p, line + 1);
        if (eq == s)
            return smoe__fail(SMOE_EFORMAT, "%s: metadata line %u: empty key", p, line + 1);
        *eq = 0;
        *nl = 0;
        if (smoe__vault_meta(v, s) != eq + 1)
            return smoe__fail(SMOE_EFORMAT, "%s: metadata line %u: key \"%s\" appears twice",
                              p, line + 1, s);
        s = nl + 1;
    }
    /* smoe__vault_meta() found each key at its own line above, so it now
     * sees every line; keys are unique. */
    const char *tk = smoe__vault_meta(v, "top_k");
    if (tk) {
        uint64_t k = 0;
        const char *c = tk;
        for (; *c >= '0' && *c <= '9' && k <= L->h.experts; c++)
            k = k * 10 + (uint64_t)(*c - '0');
        if (c == tk || *c != 0 || k < 1 || k > L->h.experts)
            return smoe__fail(SMOE_EFORMAT, "%s: metadata key top_k: found \"%s\", expected "
                              "a decimal number from 1 to experts (%" PRIu32 ")",
                              p, tk, L->h.experts);
        v->top_k = (uint32_t)k;
    }
    return 0;
}

const char *smoe__vault_meta(const smoe__vault *v, const char *key)
{
    if (!v || !v->meta || !key)
        return NULL;
    const char *s = v->meta + v->meta_bytes + 1, *end = s + v->meta_bytes;
    /* Stops at the first line not yet split (during parsing): its key
     * would run to the end, past `end`. */
    while (s < end) {
        size_t kl = strlen(s);
        if (s + kl >= end)
            break;
        const char *val = s + kl + 1;
        size_t vl = strlen(val);
        if (val + vl > end)
            break;
        if (strcmp(s, key) == 0)
            return val;
        s = val + vl + 1;
    }
    return NULL;
}

/* ---- load and free ------------------------------------------------------- */

int smoe__vload_alloc(loader *L, smoe__vault *v)
{
    const header *h = &L->h;
    size_t plen = strlen(L->path) + 1;
    v->path = smoe__malloc(plen);
    if (v->path)
        memcpy(v->path, L->path, plen);
    v->components = smoe__calloc(h->components, sizeof *v->components);
    v->layouts = smoe__calloc(h->layouts, sizeof *v->layouts);
    v->index = smoe__calloc((size_t)h->layers * h->experts, sizeof *v->index);
    if (!v->path || !v->components || !v->layouts || !v->index)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the vault's index", L->path);
    v->version = h->version;
    v->layers = h->layers;
    v->experts = h->experts;
    v->entries = h->entries;
    v->n_layouts = h->layouts;
    v->n_components = h->components;
    v->component_align = h->component_align;
    v->file_size = L->actual;
    v->vault_id = h->checksum;
    return 0;
}

static int load(loader *L, smoe__vault *v)
{
    int rc;
    /* Without blocking: a FIFO would wait for a writer forever. */
    int fd = smoe__io_open(L->io, L->path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
    if (fd < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot open the vault: %s", L->path, strerror(-fd));
    L->fd = fd;
    smoe__io_stat st;
    if ((rc = smoe__io_fstat(L->io, fd, &st)) < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot get the file's size: %s", L->path,
                          strerror(-rc));
    if (st.type != SMOE__IO_TYPE_REG && st.type != SMOE__IO_TYPE_BLK)
        return smoe__fail(SMOE_EINVAL, "%s: not a vault: %s, expected a regular file or a "
                          "block device", L->path, smoe__io_type_name(st.type));
    L->actual = st.size;
    v->dev = st.dev;
    v->ino = st.ino;
    if ((rc = check_header(L)) < 0)
        return rc;
    if (L->h.version == SMOE__VAULT_VERSION_INDEX)
        return smoe__vload_v2(L, v);
    if ((rc = check_counts(L)) < 0 ||
        (rc = smoe__shape_check(L->h.layers, L->h.experts, L->h.entries, L->path)) < 0 ||
        (rc = check_locations(L)) < 0 || (rc = read_tables(L)) < 0 ||
        (rc = smoe__vload_alloc(L, v)) < 0)
        return rc;
    span *sp = smoe__malloc((size_t)L->h.entries * sizeof *sp);
    if (!sp)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the vault's index", L->path);
    rc = smoe__vload_layouts(L, v);
    if (rc == 0)
        rc = check_entries(L, v, sp);
    free(sp);
    if (rc == 0)
        rc = smoe__vload_meta(L, v);
    return rc;
}

int smoe__vault_load(smoe__vault *v, const char *path, const smoe__io *io)
{
    return smoe__vault_load_ex(v, path, io, 0);
}

void smoe__vault_drop_read(const smoe__vault *v, const smoe__io *io, int fd)
{
    for (uint32_t i = 0; io->drop_cache && i < v->n_read; i++)
        io->drop_cache(io, fd, v->read[i].off, v->read[i].len);
}

int smoe__vault_load_ex(smoe__vault *v, const char *path, const smoe__io *io, unsigned flags)
{
    if (!v)
        return smoe__fail(SMOE_EINVAL, "smoe__vault_load: no vault to fill");
    memset(v, 0, sizeof *v);
    if (!path || !io)
        return smoe__fail(SMOE_EINVAL, "smoe__vault_load: %s is NULL", path ? "io" : "path");
    loader L;
    memset(&L, 0, sizeof L);
    L.path = path;
    L.io = io;
    L.fd = -1;
    int rc = load(&L, v);
    memcpy(v->read, L.read, sizeof v->read);
    v->n_read = L.n_read;
    if (L.fd >= 0) {
        /* The header and tables were read buffered; blobs never are. Leave
         * the page cache as it was: reading a vault must not grow it. Only
         * these pages: the blobs' may be cached for someone else. */
        if (!(flags & SMOE__VAULT_KEEP_CACHE) || L.h.version == SMOE__VAULT_VERSION_INDEX)
            smoe__vault_drop_read(v, io, L.fd);
        smoe__io_close(io, L.fd);
    }
    free(L.table);
    free(L.lct);
    free(L.meta);
    free(L.xts);
    free(L.srcs);
    if (rc < 0)
        smoe__vault_free(v);
    return rc < 0 ? rc : 0;
}

void smoe__vault_free(smoe__vault *v)
{
    if (!v)
        return;
    free(v->path);
    free(v->index);
    free(v->layouts);
    free(v->components);
    free(v->meta);
    for (uint32_t i = 0; v->sources && i < v->n_sources; i++)
        free(v->sources[i].name);
    free(v->sources);
    free(v->extents);
    free(v->xent);
    free(v->segs);
    free(v->comp_at);
    memset(v, 0, sizeof *v);
}
