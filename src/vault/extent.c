/*
 * extent.c - planning an index vault's slot images at open (extent.h); a
 * worker reads their chunks in chunk_read.c.
 *
 * Invariants of a plan at alignment A:
 *  - every segment's file_off, len and slot_off are multiples of A, so
 *    cutting a segment every `chunk` bytes (a multiple of 16 KiB, which A
 *    divides) cuts it at multiples of A: every read is aligned in the file
 *    and in the 16 KiB-aligned slot, as direct I/O needs;
 *  - an entry's segments are in slot order, end to end from 0; its image
 *    (entry size) is their sum, its padded size that rounded to 16 KiB;
 *  - each extent lies inside one segment of its entry (the segment that
 *    holds its first byte holds all of it: segments only grow to cover
 *    the extents merged into them);
 *  - two segments of an entry in the same file are more than
 *    SMOE__EXTENT_GAP bytes apart there (nearer ones are one segment, the
 *    bytes between them read too).
 *
 * A load's chunks (extent.h) are its segments cut every `chunk` bytes:
 * each chunk is one read of one range of one file, so the ranges of an
 * expert spread over the idle workers as a packed blob's chunks do.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "vault/extent.h"

typedef struct ord {
    uint32_t source, k;
    uint64_t offset;
} ord;

static int cmp_ord(const void *a, const void *b)
{
    const ord *x = a, *y = b;
    if (x->source != y->source)
        return x->source < y->source ? -1 : 1;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* One entry's segments from its n extents xt[0..n), appended at
 * segs[*n_segs]; comp_at[k] for each; *image its slot image. */
static int plan_entry(const char *path, const smoe__vault_xt *xt, uint32_t n, uint64_t A,
                      ord *o, smoe__vault_seg *segs, uint32_t *n_segs, uint64_t *comp_at,
                      uint64_t *image)
{
    for (uint32_t k = 0; k < n; k++)
        o[k] = (ord){xt[k].source, k, xt[k].offset};
    qsort(o, n, sizeof *o, cmp_ord);
    smoe__vault_seg *cur = NULL;
    uint64_t end_slot = 0;
    for (uint32_t i = 0; i < n; i++) {
        const smoe__vault_xt *x = &xt[o[i].k];
        uint64_t end = x->offset + x->length; /* checked by the reader */
        if (end > UINT64_MAX - A)
            return smoe__fail(SMOE_EOVERFLOW, "%s: extent at %llu: rounding its end "
                              "overflows", path, (unsigned long long)x->offset);
        uint64_t lo = x->offset / A * A, hi = (end + A - 1) / A * A;
        uint64_t cur_end = cur ? cur->file_off + cur->len : 0;
        if (cur && cur->source == x->source &&
            (lo <= cur_end || lo - cur_end <= SMOE__EXTENT_GAP)) {
            if (hi > cur_end)
                cur->len = hi - cur->file_off;
        } else {
            cur = &segs[(*n_segs)++];
            *cur = (smoe__vault_seg){lo, hi - lo, end_slot, x->source};
        }
        if (cur->len > UINT64_MAX - cur->slot_off - 16384)
            return smoe__fail(SMOE_EOVERFLOW, "%s: an expert's slot image overflows", path);
        end_slot = cur->slot_off + cur->len;
        comp_at[o[i].k] = cur->slot_off + (x->offset - cur->file_off);
    }
    *image = end_slot;
    return 0;
}

int smoe__extent_plan(smoe__vault *v, uint32_t align)
{
    if (v->version != SMOE__VAULT_VERSION_INDEX)
        return 0;
    uint32_t max_n = 1;
    for (uint32_t j = 0; j < v->n_layouts; j++)
        if (v->layouts[j].n > max_n)
            max_n = v->layouts[j].n;
    smoe__vault_seg *segs = smoe__malloc((size_t)v->n_extents * sizeof *segs);
    uint64_t *comp_at = smoe__malloc((size_t)v->n_extents * sizeof *comp_at);
    ord *o = smoe__malloc((size_t)max_n * sizeof *o);
    if (!segs || !comp_at || !o) {
        free(segs);
        free(comp_at);
        free(o);
        return smoe__fail(SMOE_ENOMEM, "%s: no memory for the expert reads", v->path);
    }
    uint32_t n_segs = 0;
    uint64_t max_padded = 0, total = 0;
    int rc = 0;
    size_t keys = (size_t)v->layers * v->experts;
    for (size_t key = 0; key < keys && rc == 0; key++) {
        smoe__vault_entry *e = &v->index[key];
        if (!e->present)
            continue;
        smoe__vault_xentry *xe = &v->xent[key];
        uint32_t n = v->layouts[e->layout].n, first_seg = n_segs;
        uint64_t image = 0;
        rc = plan_entry(v->path, &v->extents[xe->first_extent], n, align, o, segs, &n_segs,
                        &comp_at[xe->first_extent], &image);
        xe->first_seg = first_seg;
        xe->n_seg = n_segs - first_seg;
        e->size = image;
        e->padded = (image + 16383) / 16384 * 16384;
        if (e->padded > max_padded)
            max_padded = e->padded;
        total += e->padded;
    }
    free(o);
    if (rc < 0) {
        free(segs);
        free(comp_at);
        return rc;
    }
    free(v->segs);
    free(v->comp_at);
    v->segs = segs;
    v->comp_at = comp_at;
    v->n_segs = n_segs;
    v->plan_align = align;
    v->max_padded = max_padded;
    v->total_padded = total;
    return 0;
}

uint32_t smoe__extent_max_chunks(const smoe__vault *v, uint32_t chunk)
{
    if (v->version != SMOE__VAULT_VERSION_INDEX)
        return (uint32_t)((v->max_padded + chunk - 1) / chunk);
    uint32_t max = 1;
    size_t keys = (size_t)v->layers * v->experts;
    for (size_t key = 0; key < keys; key++) {
        uint32_t n = v->index[key].present ? smoe__extent_chunks(v, (uint32_t)key, chunk) : 0;
        if (n > max)
            max = n;
    }
    return max;
}
