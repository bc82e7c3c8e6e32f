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

#include "smoe/smoe.h"
#include "alloc.h"
#include "error.h"
#include "vault/vault.h"
#include "vault/vault_int.h"

#define DATA_OFFSET ((uint64_t)SMOE__VAULT_ALIGN)
#define MIN_COMPONENT_ALIGN 256u

typedef smoe__vhdr header;
typedef smoe__vregion region;
typedef smoe__vloader loader;
typedef smoe__vspan span;

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
    h->version = smoe__le32(r + 8);
    h->header_size = smoe__le32(r + 12);
    h->alignment = smoe__le32(r + 16);
    h->component_align = smoe__le32(r + 20);
    h->layers = smoe__le32(r + 24);
    h->experts = smoe__le32(r + 28);
    h->entries = smoe__le32(r + 32);
    h->layouts = smoe__le32(r + 36);
    h->components = smoe__le32(r + 40);
    h->flags = smoe__le32(r + 44);
    h->table_offset = smoe__le64(r + 48);
    h->layout_offset = smoe__le64(r + 56);
    h->meta_offset = smoe__le64(r + 64);
    h->meta_bytes = smoe__le64(r + 72);
    h->data_offset = smoe__le64(r + 80);
    h->file_size = smoe__le64(r + 88);
    h->checksum = smoe__hash_get(r + 120);

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

static int check_counts(loader *L)
{
    const header *h = &L->h;
    const char *p = L->path;
    int rc;
    if ((rc = smoe__vload_counts(L)) < 0 || (rc = smoe__vload_sizes(L)) < 0)
        return rc;
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

static int read_tables(loader *L)
{
    unsigned char **bufs[SMOE__VREGIONS] = {&L->table, &L->lct, &L->meta};
    return smoe__vload_tables(L, bufs);
}

/* ---- step 5a: components and layouts ----------------------------------- */

/* ---- step 5b: expert table entries ------------------------------------ */

#define ENTRY_FMT SMOE__ENTRY_FMT

/* Check entry i's fields and fill its index entry: range, duplicates,
 * alignment, sizes, overflow, file coverage, in the spec's order. */
static int check_entry(loader *L, smoe__vault *v, span *sp, uint32_t i)
{
    const char *p = L->path;
    const header *h = &L->h;
    smoe__ventry_head eh;
    int rc = smoe__vload_entry_head(L, v, i, SMOE__ENTRY_SIZE, &eh);
    if (rc < 0)
        return rc; /* range, flags, duplicates */
    const unsigned char *r = eh.r;
    const uint32_t layer = eh.layer, expert = eh.expert, layout = eh.layout;
    smoe__vault_entry *e = eh.e;
    uint64_t off = smoe__le64(r + 16), size = smoe__le64(r + 24), padded = smoe__le64(r + 32);
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
    e->hash = smoe__hash_get(r + 40);
    e->layout = layout;
    e->present = 1;
    sp[i] = (span){off, padded, i};
    if (padded > v->max_padded)
        v->max_padded = padded;
    v->total_padded += padded;
    return 0;
}

/* No blob overlaps another (sp sorted by offset) or a table. */
static int check_overlaps(loader *L, span *sp)
{
    const char *p = L->path;
    const header *h = &L->h;
    qsort(sp, h->entries, sizeof *sp, smoe__vspan_cmp);
    for (uint32_t k = 0; k < h->entries; k++) {
        const unsigned char *r = L->table + (size_t)sp[k].idx * SMOE__ENTRY_SIZE;
        uint32_t layer = smoe__le32(r), expert = smoe__le32(r + 4);
        if (k > 0 && sp[k].off < sp[k - 1].off + sp[k - 1].len) {
            const unsigned char *q = L->table + (size_t)sp[k - 1].idx * SMOE__ENTRY_SIZE;
            return smoe__fail(SMOE_EOVERLAP, ENTRY_FMT "fields offset, padded: the blob [%"
                              PRIu64 ", %" PRIu64 ") overlaps entry %" PRIu32 " (layer %"
                              PRIu32 ", expert %" PRIu32 ") at [%" PRIu64 ", %" PRIu64 ")",
                              p, sp[k].idx, layer, expert, sp[k].off, sp[k].off + sp[k].len,
                              sp[k - 1].idx, smoe__le32(q), smoe__le32(q + 4), sp[k - 1].off,
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

/* Every entry (sp: a span per entry, for the overlap check). */
static int check_entries(loader *L, smoe__vault *v, span *sp)
{
    int rc;
    for (uint32_t i = 0; i < L->h.entries; i++)
        if ((rc = check_entry(L, v, sp, i)) < 0)
            return rc;
    return check_overlaps(L, sp);
}

/* ---- metadata ------------------------------------------------------------ */

/* ---- load and free ------------------------------------------------------- */

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
    free(v->xt_by_source);
    free(v->xt_source_first);
    free(v->xent);
    free(v->segs);
    free(v->comp_at);
    memset(v, 0, sizeof *v);
}
