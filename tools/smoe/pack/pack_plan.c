/*
 * pack_plan.c - from a tensor list to blobs: which bytes go into which
 * (layer, expert) blob, at which offset, and what goes to the scout file.
 *
 * Rules (docs/packing.md):
 *  - a tensor that no pattern matches goes to the scout file;
 *  - the expert count is the source's own (config.json, GGUF metadata) when
 *    it gives one, else the largest found; a layer either has all experts
 *    with all components, or none (a dense layer: no vault entries);
 *  - within a layer every expert's component has the same dtype, shape and
 *    size; layers may differ (mixed quantisation), giving several layouts;
 *  - components are ordered as their pattern's map lists them (gate, up,
 *    down, each followed by its companions) and aligned to component_align.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pack.h"

#define MAX_COMPS 64u

typedef struct rec {
    uint32_t tensor;
    pack_match m;
} rec;

static int rec_cmp(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->m.layer != y->m.layer)
        return x->m.layer < y->m.layer ? -1 : 1;
    if (x->m.order != y->m.order)
        return x->m.order < y->m.order ? -1 : 1;
    int c = strcmp(x->m.comp, y->m.comp);
    if (c)
        return c;
    return x->m.expert < y->m.expert ? -1 : x->m.expert > y->m.expert;
}

typedef struct name_ix {
    const char *name;
    uint32_t tensor;
} name_ix;

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const name_ix *)a)->name, ((const name_ix *)b)->name);
}

typedef struct scout_key {
    uint32_t file;
    uint64_t offset;
    uint32_t tensor;
} scout_key;

static int scout_cmp(const void *a, const void *b)
{
    const scout_key *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

void pack_plan_free(pack_plan *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n_layouts; i++)
        free(p->layouts[i].comps);
    free(p->layouts);
    free(p->layer_layout);
    free(p->slices);
    free(p->layer_slice0);
    free(p->scout);
    memset(p, 0, sizeof *p);
}

static const char *file_of(const pack_source *s, const pack_tensor *t)
{
    return t->file < s->n_files ? s->files[t->file].path : s->path;
}

/* Tensor named name (via the sorted index), or NULL. */
static const pack_tensor *lookup(const pack_source *s, const name_ix *ix, const char *name)
{
    name_ix key = {name, 0};
    const name_ix *r = bsearch(&key, ix, s->n_tensors, sizeof *ix, name_cmp);
    return r ? &s->tensors[r->tensor] : NULL;
}

/*
 * mlx packs quantised weights into U32 words with a companion "<x>.scales"
 * (and "<x>.biases"); with the bits and group size from config.json such a
 * weight becomes SMOE_DTYPE_MLX_PACKED. Checks that the widths agree.
 */
static int mlx_check(const pack_meta *m, const char *what, const uint64_t *wshape, uint32_t wnd,
                     const uint64_t *sshape, uint32_t snd)
{
    if (!wnd || wnd != snd)
        return smoe__fail(SMOE_EFORMAT, "%s: packed weight has %" PRIu32 " dimensions, its "
                          "scales %" PRIu32, what, wnd, snd);
    uint64_t words = wshape[wnd - 1], groups = sshape[snd - 1], a, b;
    if (pack_mul(words, 32, &a) || pack_mul(groups, m->quant_group, &b) ||
        pack_mul(b, m->quant_bits, &b) || a != b)
        return smoe__fail(SMOE_EFORMAT, "%s: %" PRIu64 " packed words per row do not hold %"
                          PRIu64 " groups of %" PRIu32 " %" PRIu32 "-bit values (config.json "
                          "'quantization')", what, words, groups, m->quant_group, m->quant_bits);
    return 0;
}

static int plan_scout(pack_plan *p, pack_source *s, const name_ix *ix, const uint8_t *is_expert)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_tensors; i++)
        n += !is_expert[i];
    scout_key *k = malloc((n ? n : 1) * sizeof *k);
    p->scout = malloc((n ? n : 1) * sizeof *p->scout);
    if (!k || !p->scout) {
        free(k);
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    size_t j = 0;
    for (size_t i = 0; i < s->n_tensors; i++) {
        if (is_expert[i])
            continue;
        pack_tensor *t = &s->tensors[i];
        k[j].file = t->file;
        k[j].offset = t->offset;
        k[j].tensor = (uint32_t)i;
        j++;
        p->scout_bytes += t->nbytes;
        /* mlx-quantised dense weights (embeddings, attention). */
        size_t nl = strlen(t->name);
        if (s->meta.quant_bits && t->dtype == SMOE_DTYPE_U32 && nl > 7 &&
            !strcmp(t->name + nl - 7, ".weight")) {
            char sc[PACK_NAME_MAX + 8];
            memcpy(sc, t->name, nl - 7);
            memcpy(sc + nl - 7, ".scales", 8);
            const pack_tensor *st = lookup(s, ix, sc);
            if (st) {
                char what[PACK_NAME_MAX + 64];
                snprintf(what, sizeof what, "%s: tensor '%s'", file_of(s, t), t->name);
                int rc = mlx_check(&s->meta, what, t->shape, t->ndim, st->shape, st->ndim);
                if (rc < 0) {
                    free(k);
                    return rc;
                }
                t->dtype = SMOE_DTYPE_MLX_PACKED;
                t->quant_bits = s->meta.quant_bits;
                t->quant_group = s->meta.quant_group;
            }
        }
    }
    qsort(k, n, sizeof *k, scout_cmp);
    for (size_t i = 0; i < n; i++)
        p->scout[i] = k[i].tensor;
    p->n_scout = n;
    free(k);
    return 0;
}

/* The component a source tensor gives one expert: dtype, shape, bytes. */
static int comp_of(const pack_source *s, const rec *r, uint32_t experts, smoe_component *c,
                   uint64_t *slice)
{
    const pack_tensor *t = &s->tensors[r->tensor];
    memset(c, 0, sizeof *c);
    memcpy(c->name, r->m.comp, strlen(r->m.comp) + 1);
    c->dtype = t->dtype;
    const uint64_t *shape = t->shape;
    uint32_t nd = t->ndim;
    uint64_t nbytes = t->nbytes;
    if (r->m.kind == PACK_PAT_STACKED) {
        /* Checked by the caller: nd >= 1, shape[0] == experts. */
        if (nbytes % experts)
            return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': %" PRIu64 " bytes do not split "
                              "into %" PRIu32 " equal experts", file_of(s, t), t->name, nbytes,
                              experts);
        nbytes /= experts;
        shape++;
        nd--;
    }
    if (nd > SMOE_MAX_DIMS)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': an expert's slice has %" PRIu32
                          " dimensions, a component at most %d", file_of(s, t), t->name, nd,
                          SMOE_MAX_DIMS);
    if (nd == 0) { /* a scalar per expert */
        c->ndim = 1;
        c->shape[0] = 1;
    } else {
        c->ndim = nd;
        memcpy(c->shape, shape, nd * sizeof *shape);
    }
    c->nbytes = nbytes;
    *slice = nbytes;
    return 0;
}

static int same_comp(const smoe_component *a, const smoe_component *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
           !memcmp(a->shape, b->shape, sizeof a->shape);
}

/* Find or add the layout made of comps[0..n). */
static int add_layout(pack_plan *p, const smoe_component *comps, uint32_t n, uint64_t extent,
                      uint32_t *id)
{
    for (uint32_t i = 0; i < p->n_layouts; i++)
        if (p->layouts[i].n == n && !memcmp(p->layouts[i].comps, comps, n * sizeof *comps)) {
            *id = i;
            return 0;
        }
    pack_layout *nl = realloc(p->layouts, (p->n_layouts + 1) * sizeof *nl);
    if (!nl)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    p->layouts = nl;
    smoe_component *c = malloc(n * sizeof *c);
    if (!c)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    memcpy(c, comps, n * sizeof *c);
    nl[p->n_layouts].comps = c;
    nl[p->n_layouts].n = n;
    nl[p->n_layouts].extent = extent;
    *id = p->n_layouts++;
    return 0;
}

/* Plan one layer from its records r[0..n) (sorted by component). */
static int plan_layer(pack_plan *p, const pack_source *s, uint32_t layer,
                      const rec *r, size_t n, int32_t *cells)
{
    uint32_t E = p->experts;
    /* Distinct components, in blob order. */
    uint32_t nc = 0;
    size_t first_of[MAX_COMPS];
    for (size_t i = 0; i < n; i++) {
        if (i && !strcmp(r[i].m.comp, r[i - 1].m.comp))
            continue;
        if (nc == MAX_COMPS)
            return smoe__fail(SMOE_ECOUNT, "%s: layer %" PRIu32 " has more than %u expert "
                              "components", s->path, layer, MAX_COMPS);
        for (uint32_t c = 0; c < nc; c++)
            if (!strcmp(r[first_of[c]].m.comp, r[i].m.comp))
                return smoe__fail(SMOE_EDUP, "layer %" PRIu32 ": component '%s' comes from "
                                  "both '%s' and '%s' (two patterns give the same name)",
                                  layer, r[i].m.comp, s->tensors[r[first_of[c]].tensor].name,
                                  s->tensors[r[i].tensor].name);
        first_of[nc++] = i;
    }
    for (size_t k = 0; k < (size_t)E * nc; k++)
        cells[k] = -1;
    for (size_t i = 0, c = 0; i < n; i++) {
        while (c + 1 < nc && first_of[c + 1] <= i)
            c++;
        const pack_tensor *t = &s->tensors[r[i].tensor];
        uint32_t lo = 0, hi = E;
        if (r[i].m.kind == PACK_PAT_EXPERT) {
            lo = r[i].m.expert;
            hi = lo + 1;
        }
        for (uint32_t e = lo; e < hi; e++) {
            int32_t *cell = &cells[(size_t)e * nc + c];
            if (*cell >= 0)
                return smoe__fail(SMOE_EDUP, "layer %" PRIu32 ", expert %" PRIu32 ": component "
                                  "'%s' comes from both '%s' and '%s'", layer, e, r[i].m.comp,
                                  s->tensors[r[*cell].tensor].name, t->name);
            *cell = (int32_t)i;
        }
    }
    /* Completeness: every expert, every component. */
    for (uint32_t e = 0; e < E; e++) {
        uint32_t have = 0, miss = 0;
        for (uint32_t c = 0; c < nc; c++) {
            if (cells[(size_t)e * nc + c] >= 0)
                have++;
            else if (!miss)
                miss = c + 1;
        }
        if (have == nc)
            continue;
        /* Name a tensor of another expert for the message. */
        const char *example = "?";
        for (uint32_t o = 0; o < E; o++) {
            int32_t cell = cells[(size_t)o * nc + (miss ? miss - 1 : 0)];
            if (cell >= 0) {
                example = s->tensors[r[cell].tensor].name;
                break;
            }
        }
        if (have == 0)
            return smoe__fail(SMOE_ENOENT, "%s: layer %" PRIu32 ": expert %" PRIu32 " is "
                              "missing (expected %" PRIu32 " experts%s%s; other experts have "
                              "e.g. '%s')", s->path, layer, e, E,
                              s->meta.experts_from ? " from " : "",
                              s->meta.experts_from ? s->meta.experts_from : "", example);
        return smoe__fail(SMOE_ENOENT, "%s: layer %" PRIu32 ", expert %" PRIu32 ": no tensor "
                          "for component '%s' (other experts have e.g. '%s')", s->path, layer,
                          e, r[first_of[miss - 1]].m.comp, example);
    }

    /* Component shapes, the same for every expert. */
    smoe_component comps[MAX_COMPS];
    uint64_t off = 0;
    for (uint32_t c = 0; c < nc; c++) {
        uint64_t slice;
        const rec *r0 = &r[cells[c]];
        int rc = comp_of(s, r0, E, &comps[c], &slice);
        if (rc < 0)
            return rc;
        for (uint32_t e = 1; e < E; e++) {
            const rec *re = &r[cells[(size_t)e * nc + c]];
            if (re->tensor == r0->tensor)
                continue;
            smoe_component ce;
            if ((rc = comp_of(s, re, E, &ce, &slice)) < 0)
                return rc;
            if (!same_comp(&comps[c], &ce)) {
                char a[160], b[160];
                return smoe__fail(SMOE_EFORMAT, "%s: layer %" PRIu32 ", component '%s': "
                                  "inconsistent expert shapes: expert 0 ('%s') is %s %s, "
                                  "expert %" PRIu32 " ('%s') is %s %s",
                                  file_of(s, &s->tensors[re->tensor]), layer, comps[c].name,
                                  s->tensors[r0->tensor].name, smoe_dtype_name(comps[c].dtype),
                                  pack_shape_str(comps[c].shape, comps[c].ndim, a, sizeof a),
                                  e, s->tensors[re->tensor].name, smoe_dtype_name(ce.dtype),
                                  pack_shape_str(ce.shape, ce.ndim, b, sizeof b));
            }
        }
    }
    /* mlx packed weights: U32 with a ".scales" companion. */
    for (uint32_t c = 0; c < nc && s->meta.quant_bits; c++) {
        if (comps[c].dtype != SMOE_DTYPE_U32)
            continue;
        char sc[SMOE_COMPONENT_NAME_MAX + 8];
        snprintf(sc, sizeof sc, "%.*s.scales", SMOE_COMPONENT_NAME_MAX - 1, comps[c].name);
        for (uint32_t d = 0; d < nc; d++) {
            if (strcmp(comps[d].name, sc))
                continue;
            char what[PACK_NAME_MAX + 64];
            const pack_tensor *t = &s->tensors[r[cells[c]].tensor];
            snprintf(what, sizeof what, "%s: tensor '%s'", file_of(s, t), t->name);
            int rc = mlx_check(&s->meta, what, comps[c].shape, comps[c].ndim, comps[d].shape,
                               comps[d].ndim);
            if (rc < 0)
                return rc;
            comps[c].dtype = SMOE_DTYPE_MLX_PACKED;
            comps[c].quant_bits = s->meta.quant_bits;
            comps[c].quant_group = s->meta.quant_group;
        }
    }
    for (uint32_t c = 0; c < nc; c++) {
        uint64_t a = p->component_align;
        off = (off + a - 1) / a * a;
        comps[c].offset = off;
        if (pack_add(off, comps[c].nbytes, &off))
            return smoe__fail(SMOE_EOVERFLOW, "layer %" PRIu32 ": blob size overflows", layer);
    }
    if (off == 0)
        return smoe__fail(SMOE_EFORMAT, "%s: layer %" PRIu32 ": the experts' tensors are "
                          "empty", s->path, layer);
    uint32_t id = 0;
    int rc = add_layout(p, comps, nc, off, &id);
    if (rc < 0)
        return rc;
    p->layer_layout[layer] = id;

    /* Where each expert's component bytes are. */
    size_t base = p->layer_slice0[layer];
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t c = 0; c < nc; c++) {
            const rec *re = &r[cells[(size_t)e * nc + c]];
            const pack_tensor *t = &s->tensors[re->tensor];
            pack_slice *sl = &p->slices[base + (size_t)e * nc + c];
            sl->tensor = re->tensor;
            sl->file = t->file;
            sl->nbytes = comps[c].nbytes;
            sl->offset = t->offset + (re->m.kind == PACK_PAT_STACKED ? e * sl->nbytes : 0);
        }
    p->expert_bytes += (uint64_t)E * off;
    p->entries += E;
    return 0;
}

int pack_plan_build(pack_plan *p, pack_source *s, const pack_patterns *ps,
                    uint32_t component_align)
{
    memset(p, 0, sizeof *p);
    p->component_align = component_align ? component_align : 256;
    size_t n = s->n_tensors;
    int rc = 0;
    name_ix *ix = malloc((n ? n : 1) * sizeof *ix);
    rec *recs = malloc((n ? n : 1) * sizeof *recs);
    uint8_t *is_expert = calloc(n ? n : 1, 1);
    int32_t *cells = NULL;
    if (!ix || !recs || !is_expert) {
        rc = smoe__fail(SMOE_ENOMEM, "out of memory");
        goto out;
    }
    /* Names are unique across every file of the source. */
    for (size_t i = 0; i < n; i++) {
        ix[i].name = s->tensors[i].name;
        ix[i].tensor = (uint32_t)i;
    }
    qsort(ix, n, sizeof *ix, name_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(ix[i].name, ix[i - 1].name)) {
            rc = smoe__fail(SMOE_EDUP, "tensor '%s' appears twice: in %s and %s", ix[i].name,
                            file_of(s, &s->tensors[ix[i - 1].tensor]),
                            file_of(s, &s->tensors[ix[i].tensor]));
            goto out;
        }

    /* Name the experts. */
    size_t nr = 0;
    uint32_t max_layer = 0, max_e = 0;
    for (size_t i = 0; i < n; i++) {
        pack_match m;
        const pack_tensor *t = &s->tensors[i];
        if (!pack_patterns_match(ps, t->name, &m))
            continue;
        if (m.layer >= 65536 || (m.kind == PACK_PAT_EXPERT && m.expert >= 65536)) {
            rc = smoe__fail(SMOE_ECOUNT, "%s: tensor '%s': layer %" PRIu32 ", expert %" PRIu32
                            ": at most 65536 of each", file_of(s, t), t->name, m.layer,
                            m.expert);
            goto out;
        }
        if (m.kind == PACK_PAT_STACKED) {
            if (t->ndim < 1 || t->shape[0] == 0 || t->shape[0] > 65536) {
                rc = smoe__fail(SMOE_EFORMAT, "%s: tensor '%s' matches stacked pattern '%s' "
                                "but has no expert dimension (outermost of 1 to 65536)",
                                file_of(s, t), t->name, ps->p[m.pattern].spec);
                goto out;
            }
            if (t->shape[0] > max_e)
                max_e = (uint32_t)t->shape[0];
        } else if (m.expert + 1 > max_e) {
            max_e = m.expert + 1;
        }
        if (m.layer > max_layer)
            max_layer = m.layer;
        recs[nr].tensor = (uint32_t)i;
        recs[nr].m = m;
        nr++;
        is_expert[i] = 1;
    }
    if (nr == 0) {
        rc = smoe__fail(SMOE_ENOENT, "%s: no expert tensors among its %zu tensors (no name "
                        "pattern matches; see 'smoe pack --help' for --pattern)", s->path, n);
        goto out;
    }
    uint32_t E = s->meta.experts ? s->meta.experts : max_e;
    for (size_t i = 0; i < nr; i++) {
        const pack_tensor *t = &s->tensors[recs[i].tensor];
        uint64_t got = recs[i].m.kind == PACK_PAT_STACKED ? t->shape[0] : recs[i].m.expert + 1;
        if ((recs[i].m.kind == PACK_PAT_STACKED && got != E) || got > E) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: tensor '%s' %s %" PRIu64 " but the model has "
                            "%" PRIu32 " experts (%s)", file_of(s, t), t->name,
                            recs[i].m.kind == PACK_PAT_STACKED ? "stacks" : "is expert",
                            recs[i].m.kind == PACK_PAT_STACKED ? got : got - 1, E,
                            s->meta.experts_from ? s->meta.experts_from
                                                 : "the largest expert dimension found");
            goto out;
        }
    }
    p->experts = E;
    p->layers = max_layer + 1;
    if ((uint64_t)p->layers * E > (1u << 22)) {
        rc = smoe__fail(SMOE_ECOUNT, "%s: %" PRIu32 " layers x %" PRIu32 " experts is more than "
                        "a vault holds (2^22)", s->path, p->layers, E);
        goto out;
    }
    qsort(recs, nr, sizeof *recs, rec_cmp);

    p->layer_layout = malloc(p->layers * sizeof *p->layer_layout);
    p->layer_slice0 = calloc(p->layers, sizeof *p->layer_slice0);
    if (!p->layer_layout || !p->layer_slice0) {
        rc = smoe__fail(SMOE_ENOMEM, "out of memory");
        goto out;
    }
    /* Count components per layer to size the slice array. */
    size_t total = 0, max_cells = 0;
    for (size_t i = 0; i < nr;) {
        size_t j = i;
        uint32_t nc = 0;
        while (j < nr && recs[j].m.layer == recs[i].m.layer) {
            if (j == i || strcmp(recs[j].m.comp, recs[j - 1].m.comp))
                nc++;
            j++;
        }
        p->layer_slice0[recs[i].m.layer] = total;
        total += (size_t)E * nc;
        if ((size_t)E * nc > max_cells)
            max_cells = (size_t)E * nc;
        i = j;
    }
    p->slices = calloc(total ? total : 1, sizeof *p->slices);
    cells = malloc((max_cells ? max_cells : 1) * sizeof *cells);
    if (!p->slices || !cells) {
        rc = smoe__fail(SMOE_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t l = 0; l < p->layers; l++)
        p->layer_layout[l] = UINT32_MAX;
    for (size_t i = 0; i < nr;) {
        size_t j = i;
        while (j < nr && recs[j].m.layer == recs[i].m.layer)
            j++;
        if ((rc = plan_layer(p, s, recs[i].m.layer, recs + i, j - i, cells)) < 0)
            goto out;
        i = j;
    }
    rc = plan_scout(p, s, ix, is_expert);
out:
    free(ix);
    free(recs);
    free(is_expert);
    free(cells);
    if (rc < 0)
        pack_plan_free(p);
    return rc;
}
