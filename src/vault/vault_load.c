/*
 * vault_load.c - the reading steps both vault versions share
 * (vault_int.h): reads that remember their pages, counts and table
 * regions, the checksummed tables, the layouts and their components, the
 * metadata, the vault's index. vault_read.c (version 1) and vault_v2.c
 * (the index vault) call them; this file calls neither.
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

typedef smoe__vhdr header;
typedef smoe__vregion region;
typedef smoe__vloader loader;
typedef smoe__vspan span;

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

int smoe__vload_count(const loader *L, const char *field, uint64_t v, uint64_t max)
{
    if (v >= 1 && v <= max)
        return 0;
    return smoe__fail(SMOE_ECOUNT, "%s: header field %s: found %" PRIu64
                      ", expected 1..%" PRIu64, L->path, field, v, max);
}

int smoe__vload_counts(const loader *L)
{
    const header *h = &L->h;
    int rc;
    if ((rc = smoe__vload_count(L, "layers", h->layers, 65536)) < 0 ||
        (rc = smoe__vload_count(L, "experts", h->experts, 65536)) < 0)
        return rc;
    uint64_t pairs = (uint64_t)h->layers * h->experts;
    if (pairs > SMOE__MAX_EXPERTS_TOTAL)
        return smoe__fail(SMOE_ECOUNT, "%s: header fields layers x experts: found %" PRIu32
                          " x %" PRIu32 " = %" PRIu64 ", expected at most %u",
                          L->path, h->layers, h->experts, pairs, SMOE__MAX_EXPERTS_TOTAL);
    if ((rc = smoe__vload_count(L, "entries", h->entries, pairs)) < 0 ||
        (rc = smoe__vload_count(L, "layouts", h->layouts, SMOE__MAX_LAYOUTS)) < 0 ||
        (rc = smoe__vload_count(L, "components", h->components, SMOE__MAX_COMPONENTS)) < 0)
        return rc;
    return 0;
}

int smoe__vload_sizes(const loader *L)
{
    const header *h = &L->h;
    if (h->meta_bytes > SMOE__META_MAX)
        return smoe__fail(SMOE_ECOUNT, "%s: header field meta_bytes: found %" PRIu64
                          ", expected at most %u", L->path, h->meta_bytes, SMOE__META_MAX);
    /* A file shorter than it was written is truncated, whatever its counts
     * say: a cut copy would otherwise read as tables too large for it. */
    if (L->actual < h->file_size)
        return smoe__fail(SMOE_ETRUNC, "%s: header field file_size: the vault was written "
                          "with %" PRIu64 " bytes but the file has only %" PRIu64
                          " (truncated copy?)", L->path, h->file_size, L->actual);
    return 0;
}

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

    smoe__bytes parts[1 + SMOE__VREGIONS] = {{L->raw, 120}};
    for (uint32_t i = 0; i < L->n_reg; i++)
        parts[1 + i] = (smoe__bytes){*bufs[i], (size_t)L->reg[i].len};
    uint64_t sum;
    if (smoe__hash_parts(parts, 1 + L->n_reg, &sum) < 0)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the checksum state", L->path);
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

static int check_component(loader *L, smoe__vault *v, uint32_t i)
{
    const unsigned char *r = L->lct + (size_t)L->h.layouts * SMOE__LAYOUT_SIZE +
                             (size_t)i * SMOE__COMPONENT_SIZE;
    smoe_component *c = &v->components[i];
    char where[1100];
    snprintf(where, sizeof where, "%s: component %" PRIu32, L->path, i);
    memcpy(c->name, r, SMOE_COMPONENT_NAME_MAX);
    c->dtype = smoe__le32(r + 64);
    c->ndim = smoe__le32(r + 68);
    for (int d = 0; d < SMOE_MAX_DIMS; d++)
        c->shape[d] = smoe__le64(r + 72 + 8 * d);
    c->offset = smoe__le64(r + 104);
    c->nbytes = smoe__le64(r + 112);
    c->quant_group = smoe__le32(r + 120);
    c->quant_bits = smoe__le32(r + 124);
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

int smoe__vspan_cmp(const void *a, const void *b)
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
        lo->first = smoe__le32(r);
        lo->n = smoe__le32(r + 4);
        lo->min_bytes = smoe__le64(r + 8);
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
    qsort(sp, h->layouts, sizeof *sp, smoe__vspan_cmp);
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

/* Index of the first of entries [0, limit) holding (layer, expert). */
static uint32_t first_entry_of(const loader *L, size_t rsize, uint32_t layer, uint32_t expert,
                               uint32_t limit)
{
    for (uint32_t i = 0; i < limit; i++) {
        const unsigned char *r = L->table + (size_t)i * rsize;
        if (smoe__le32(r) == layer && smoe__le32(r + 4) == expert)
            return i;
    }
    return limit;
}

int smoe__vload_entry_head(const loader *L, smoe__vault *v, uint32_t i, size_t rsize,
                           smoe__ventry_head *out)
{
    const header *h = &L->h;
    const char *p = L->path;
    const unsigned char *r = L->table + (size_t)i * rsize;
    uint32_t layer = smoe__le32(r), expert = smoe__le32(r + 4), layout = smoe__le32(r + 8);
    uint32_t flags = smoe__le32(r + 12);
    if (layer >= h->layers)
        return smoe__fail(SMOE_EFORMAT, SMOE__ENTRY_FMT "field layer: found %" PRIu32
                          ", expected less than layers %" PRIu32,
                          p, i, layer, expert, layer, h->layers);
    if (expert >= h->experts)
        return smoe__fail(SMOE_EFORMAT, SMOE__ENTRY_FMT "field expert: found %" PRIu32
                          ", expected less than experts %" PRIu32,
                          p, i, layer, expert, expert, h->experts);
    if (layout >= h->layouts)
        return smoe__fail(SMOE_EFORMAT, SMOE__ENTRY_FMT "field layout: found %" PRIu32
                          ", expected less than layouts %" PRIu32,
                          p, i, layer, expert, layout, h->layouts);
    if (flags != 0)
        return smoe__fail(SMOE_EFORMAT, SMOE__ENTRY_FMT "field flags: found 0x%" PRIx32
                          ", expected 0", p, i, layer, expert, flags);
    smoe__vault_entry *e = &v->index[(size_t)layer * h->experts + expert];
    if (e->present)
        return smoe__fail(SMOE_EDUP, SMOE__ENTRY_FMT "fields layer, expert: the pair already "
                          "appears in entry %" PRIu32, p, i, layer, expert,
                          first_entry_of(L, rsize, layer, expert, i));
    *out = (smoe__ventry_head){r, e, layer, expert, layout};
    return 0;
}
