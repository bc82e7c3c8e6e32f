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

#include "smoe_tier.h"
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

/* One layer being planned: its records r[0..n) (sorted by component), the
 * distinct components in blob order, and which record gives each expert
 * each component (cells[e * nc + c], -1 for none). */
typedef struct layer_plan {
    pack_plan *p;
    const pack_source *s;
    uint32_t layer;
    const rec *r;
    size_t n;
    int32_t *cells;
    uint32_t nc;
    size_t first_of[MAX_COMPS]; /* first record of each component */
    smoe_component comps[MAX_COMPS];
} layer_plan;

static const char *tensor_name(const layer_plan *lp, size_t record)
{
    return lp->s->tensors[lp->r[record].tensor].name;
}

/* The distinct components of the layer, each from one pattern only. */
static int find_components(layer_plan *lp)
{
    const rec *r = lp->r;
    for (size_t i = 0; i < lp->n; i++) {
        if (i && !strcmp(r[i].m.comp, r[i - 1].m.comp))
            continue;
        if (lp->nc == MAX_COMPS)
            return smoe__fail(SMOE_ECOUNT, "%s: layer %" PRIu32 " has more than %u expert "
                              "components", lp->s->path, lp->layer, MAX_COMPS);
        for (uint32_t c = 0; c < lp->nc; c++)
            if (!strcmp(r[lp->first_of[c]].m.comp, r[i].m.comp))
                return smoe__fail(SMOE_EDUP, "layer %" PRIu32 ": component '%s' comes from "
                                  "both '%s' and '%s' (two patterns give the same name)",
                                  lp->layer, r[i].m.comp, tensor_name(lp, lp->first_of[c]),
                                  tensor_name(lp, i));
        lp->first_of[lp->nc++] = i;
    }
    return 0;
}

/* Which record gives each (expert, component); a second one is an error. */
static int fill_cells(layer_plan *lp)
{
    const uint32_t E = lp->p->experts, nc = lp->nc;
    for (size_t k = 0; k < (size_t)E * nc; k++)
        lp->cells[k] = -1;
    for (size_t i = 0, c = 0; i < lp->n; i++) {
        while (c + 1 < nc && lp->first_of[c + 1] <= i)
            c++;
        const pack_match *m = &lp->r[i].m;
        uint32_t lo = m->kind == PACK_PAT_EXPERT ? m->expert : 0;
        uint32_t hi = m->kind == PACK_PAT_EXPERT ? lo + 1 : E;
        for (uint32_t e = lo; e < hi; e++) {
            int32_t *cell = &lp->cells[(size_t)e * nc + c];
            if (*cell >= 0)
                return smoe__fail(SMOE_EDUP, "layer %" PRIu32 ", expert %" PRIu32 ": component "
                                  "'%s' comes from both '%s' and '%s'", lp->layer, e, m->comp,
                                  tensor_name(lp, (size_t)*cell), tensor_name(lp, i));
            *cell = (int32_t)i;
        }
    }
    return 0;
}

/* Completeness: every expert has every component. */
static int check_complete(const layer_plan *lp)
{
    const uint32_t E = lp->p->experts, nc = lp->nc;
    const pack_source *s = lp->s;
    for (uint32_t e = 0; e < E; e++) {
        uint32_t have = 0, miss = 0;
        for (uint32_t c = 0; c < nc; c++) {
            if (lp->cells[(size_t)e * nc + c] >= 0)
                have++;
            else if (!miss)
                miss = c + 1;
        }
        if (have == nc)
            continue;
        /* Name a tensor of another expert for the message. */
        const char *example = "?";
        for (uint32_t o = 0; o < E; o++) {
            int32_t cell = lp->cells[(size_t)o * nc + (miss ? miss - 1 : 0)];
            if (cell >= 0) {
                example = tensor_name(lp, (size_t)cell);
                break;
            }
        }
        if (have == 0)
            return smoe__fail(SMOE_ENOENT, "%s: layer %" PRIu32 ": expert %" PRIu32 " is "
                              "missing (expected %" PRIu32 " experts%s%s; other experts have "
                              "e.g. '%s')", s->path, lp->layer, e, E,
                              s->meta.experts_from ? " from " : "",
                              s->meta.experts_from ? s->meta.experts_from : "", example);
        return smoe__fail(SMOE_ENOENT, "%s: layer %" PRIu32 ", expert %" PRIu32 ": no tensor "
                          "for component '%s' (other experts have e.g. '%s')", s->path,
                          lp->layer, e, lp->r[lp->first_of[miss - 1]].m.comp, example);
    }
    return 0;
}

/* Component c's shape, the same for every expert. */
static int component_shape(layer_plan *lp, uint32_t c)
{
    const uint32_t E = lp->p->experts, nc = lp->nc;
    const pack_source *s = lp->s;
    uint64_t slice;
    const rec *r0 = &lp->r[lp->cells[c]];
    int rc = comp_of(s, r0, E, &lp->comps[c], &slice);
    for (uint32_t e = 1; e < E && rc == 0; e++) {
        const rec *re = &lp->r[lp->cells[(size_t)e * nc + c]];
        if (re->tensor == r0->tensor)
            continue;
        smoe_component ce;
        if ((rc = comp_of(s, re, E, &ce, &slice)) < 0)
            return rc;
        if (!same_comp(&lp->comps[c], &ce)) {
            char a[160], b[160];
            const smoe_component *c0 = &lp->comps[c];
            return smoe__fail(SMOE_EFORMAT, "%s: layer %" PRIu32 ", component '%s': "
                              "inconsistent expert shapes: expert 0 ('%s') is %s %s, "
                              "expert %" PRIu32 " ('%s') is %s %s",
                              file_of(s, &s->tensors[re->tensor]), lp->layer, c0->name,
                              s->tensors[r0->tensor].name, smoe_dtype_name(c0->dtype),
                              pack_shape_str(c0->shape, c0->ndim, a, sizeof a), e,
                              s->tensors[re->tensor].name, smoe_dtype_name(ce.dtype),
                              pack_shape_str(ce.shape, ce.ndim, b, sizeof b));
        }
    }
    return rc;
}

/* mlx packed weights: U32 with a ".scales" companion. */
static int mark_mlx_packed(layer_plan *lp)
{
    const pack_source *s = lp->s;
    for (uint32_t c = 0; c < lp->nc && s->meta.quant_bits; c++) {
        smoe_component *w = &lp->comps[c];
        if (w->dtype != SMOE_DTYPE_U32)
            continue;
        char sc[SMOE_COMPONENT_NAME_MAX + 8];
        snprintf(sc, sizeof sc, "%.*s.scales", SMOE_COMPONENT_NAME_MAX - 1, w->name);
        for (uint32_t d = 0; d < lp->nc; d++) {
            if (strcmp(lp->comps[d].name, sc))
                continue;
            char what[PACK_NAME_MAX + 64];
            const pack_tensor *t = &s->tensors[lp->r[lp->cells[c]].tensor];
            snprintf(what, sizeof what, "%s: tensor '%s'", file_of(s, t), t->name);
            int rc = mlx_check(&s->meta, what, w->shape, w->ndim, lp->comps[d].shape,
                               lp->comps[d].ndim);
            if (rc < 0)
                return rc;
            w->dtype = SMOE_DTYPE_MLX_PACKED;
            w->quant_bits = s->meta.quant_bits;
            w->quant_group = s->meta.quant_group;
        }
    }
    return 0;
}

/* Component offsets at the plan's alignment; *extent gets the blob size. */
static int place_components(layer_plan *lp, uint64_t *extent)
{
    uint64_t off = 0, a = lp->p->component_align;
    for (uint32_t c = 0; c < lp->nc; c++) {
        off = (off + a - 1) / a * a;
        lp->comps[c].offset = off;
        if (pack_add(off, lp->comps[c].nbytes, &off))
            return smoe__fail(SMOE_EOVERFLOW, "layer %" PRIu32 ": blob size overflows",
                              lp->layer);
    }
    if (off == 0)
        return smoe__fail(SMOE_EFORMAT, "%s: layer %" PRIu32 ": the experts' tensors are "
                          "empty", lp->s->path, lp->layer);
    *extent = off;
    return 0;
}

/* Where each expert's component bytes are. */
static void record_slices(layer_plan *lp)
{
    pack_plan *p = lp->p;
    const uint32_t E = p->experts, nc = lp->nc;
    size_t base = p->layer_slice0[lp->layer];
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t c = 0; c < nc; c++) {
            const rec *re = &lp->r[lp->cells[(size_t)e * nc + c]];
            const pack_tensor *t = &lp->s->tensors[re->tensor];
            pack_slice *sl = &p->slices[base + (size_t)e * nc + c];
            sl->tensor = re->tensor;
            sl->file = t->file;
            sl->nbytes = lp->comps[c].nbytes;
            sl->offset = t->offset + (re->m.kind == PACK_PAT_STACKED ? e * sl->nbytes : 0);
        }
}

/* Plan one layer from its records r[0..n) (sorted by component). */
static int plan_layer(pack_plan *p, const pack_source *s, uint32_t layer,
                      const rec *r, size_t n, int32_t *cells)
{
    layer_plan lp;
    memset(&lp, 0, sizeof lp);
    lp.p = p;
    lp.s = s;
    lp.layer = layer;
    lp.r = r;
    lp.n = n;
    lp.cells = cells;
    int rc;
    uint64_t extent = 0;
    uint32_t id = 0;
    if ((rc = find_components(&lp)) < 0 || (rc = fill_cells(&lp)) < 0 ||
        (rc = check_complete(&lp)) < 0)
        return rc;
    for (uint32_t c = 0; c < lp.nc; c++)
        if ((rc = component_shape(&lp, c)) < 0)
            return rc;
    if ((rc = mark_mlx_packed(&lp)) < 0 || (rc = place_components(&lp, &extent)) < 0 ||
        (rc = add_layout(p, lp.comps, lp.nc, extent, &id)) < 0)
        return rc;
    p->layer_layout[layer] = id;
    record_slices(&lp);
    p->expert_bytes += (uint64_t)p->experts * extent;
    p->entries += p->experts;
    return 0;
}

/* What pack_plan_build works from: the names sorted, the expert records. */
typedef struct plan_in {
    pack_source *s;
    const pack_patterns *ps;
    name_ix *ix;         /* every tensor, by name */
    rec *recs;           /* the expert tensors' matches */
    size_t nr;
    uint8_t *is_expert;  /* per tensor */
    uint32_t max_layer, max_e;
} plan_in;

/* The names sorted for lookup; names are unique across every file. */
static int index_names(plan_in *in)
{
    const pack_source *s = in->s;
    for (size_t i = 0; i < s->n_tensors; i++) {
        in->ix[i].name = s->tensors[i].name;
        in->ix[i].tensor = (uint32_t)i;
    }
    qsort(in->ix, s->n_tensors, sizeof *in->ix, name_cmp);
    for (size_t i = 1; i < s->n_tensors; i++)
        if (!strcmp(in->ix[i].name, in->ix[i - 1].name))
            return smoe__fail(SMOE_EDUP, "tensor '%s' appears twice: in %s and %s",
                              in->ix[i].name, file_of(s, &s->tensors[in->ix[i - 1].tensor]),
                              file_of(s, &s->tensors[in->ix[i].tensor]));
    return 0;
}

/* A tensor a pattern matched: check its layer and expert (or its expert
 * dimension) and record it. */
static int add_expert(plan_in *in, size_t i, const pack_match *m)
{
    const pack_tensor *t = &in->s->tensors[i];
    const char *f = file_of(in->s, t);
    if (m->layer >= 65536 || (m->kind == PACK_PAT_EXPERT && m->expert >= 65536))
        return smoe__fail(SMOE_ECOUNT, "%s: tensor '%s': layer %" PRIu32 ", expert %" PRIu32
                          ": at most 65536 of each", f, t->name, m->layer, m->expert);
    if (m->kind == PACK_PAT_STACKED) {
        if (t->ndim < 1 || t->shape[0] == 0 || t->shape[0] > 65536)
            return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s' matches stacked pattern '%s' but "
                              "has no expert dimension (outermost of 1 to 65536)", f, t->name,
                              in->ps->p[m->pattern].spec);
        if (t->shape[0] > in->max_e)
            in->max_e = (uint32_t)t->shape[0];
    } else if (m->expert + 1 > in->max_e) {
        in->max_e = m->expert + 1;
    }
    if (m->layer > in->max_layer)
        in->max_layer = m->layer;
    in->recs[in->nr].tensor = (uint32_t)i;
    in->recs[in->nr].m = *m;
    in->nr++;
    in->is_expert[i] = 1;
    return 0;
}

/* Name the experts: every tensor a pattern matches. */
static int find_experts(plan_in *in)
{
    const pack_source *s = in->s;
    for (size_t i = 0; i < s->n_tensors; i++) {
        pack_match m;
        if (!pack_patterns_match(in->ps, s->tensors[i].name, &m))
            continue;
        int rc = add_expert(in, i, &m);
        if (rc < 0)
            return rc;
    }
    if (in->nr == 0)
        return smoe__fail(SMOE_ENOENT, "%s: no expert tensors among its %zu tensors (no name "
                          "pattern matches; see 'smoe pack --help' for --pattern)", s->path,
                          s->n_tensors);
    return 0;
}

/* The model's expert count E: every record must fit it, stacked ones
 * exactly. */
static int check_expert_count(const plan_in *in, uint32_t E)
{
    const pack_source *s = in->s;
    for (size_t i = 0; i < in->nr; i++) {
        const pack_tensor *t = &s->tensors[in->recs[i].tensor];
        int stacked = in->recs[i].m.kind == PACK_PAT_STACKED;
        uint64_t got = stacked ? t->shape[0] : in->recs[i].m.expert + 1;
        if ((stacked && got != E) || got > E)
            return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s' %s %" PRIu64 " but the model has "
                              "%" PRIu32 " experts (%s)", file_of(s, t), t->name,
                              stacked ? "stacks" : "is expert", stacked ? got : got - 1, E,
                              s->meta.experts_from ? s->meta.experts_from
                                                   : "the largest expert dimension found");
    }
    return 0;
}

/* Count components per layer to size the slice array; *max_cells gets the
 * most (expert, component) cells of one layer. */
static int size_slices(pack_plan *p, const plan_in *in, size_t *max_cells)
{
    p->layer_layout = malloc(p->layers * sizeof *p->layer_layout);
    p->layer_slice0 = calloc(p->layers, sizeof *p->layer_slice0);
    if (!p->layer_layout || !p->layer_slice0)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    size_t total = 0;
    *max_cells = 0;
    for (size_t i = 0; i < in->nr;) {
        size_t j = i;
        uint32_t nc = 0;
        while (j < in->nr && in->recs[j].m.layer == in->recs[i].m.layer) {
            if (j == i || strcmp(in->recs[j].m.comp, in->recs[j - 1].m.comp))
                nc++;
            j++;
        }
        p->layer_slice0[in->recs[i].m.layer] = total;
        total += (size_t)p->experts * nc;
        if ((size_t)p->experts * nc > *max_cells)
            *max_cells = (size_t)p->experts * nc;
        i = j;
    }
    p->slices = calloc(total ? total : 1, sizeof *p->slices);
    if (!p->slices)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (uint32_t l = 0; l < p->layers; l++)
        p->layer_layout[l] = UINT32_MAX;
    return 0;
}

/* Every layer with experts, from its run of the sorted records. */
static int plan_layers(pack_plan *p, const plan_in *in, int32_t *cells)
{
    for (size_t i = 0; i < in->nr;) {
        size_t j = i;
        while (j < in->nr && in->recs[j].m.layer == in->recs[i].m.layer)
            j++;
        int rc = plan_layer(p, in->s, in->recs[i].m.layer, in->recs + i, j - i, cells);
        if (rc < 0)
            return rc;
        i = j;
    }
    return 0;
}

/* Experts and layers from the records; the records sorted by layer. */
static int shape_plan(pack_plan *p, plan_in *in)
{
    uint32_t E = in->s->meta.experts ? in->s->meta.experts : in->max_e;
    int rc = check_expert_count(in, E);
    if (rc < 0)
        return rc;
    p->experts = E;
    p->layers = in->max_layer + 1;
    if ((uint64_t)p->layers * E > (1u << 22))
        return smoe__fail(SMOE_ECOUNT, "%s: %" PRIu32 " layers x %" PRIu32 " experts is more "
                          "than a vault holds (2^22)", in->s->path, p->layers, E);
    qsort(in->recs, in->nr, sizeof *in->recs, rec_cmp);
    return 0;
}

int pack_plan_build(pack_plan *p, pack_source *s, const pack_patterns *ps,
                    uint32_t component_align)
{
    memset(p, 0, sizeof *p);
    p->component_align = component_align ? component_align : 256;
    size_t n = s->n_tensors, max_cells = 0;
    plan_in in = {s, ps, malloc((n ? n : 1) * sizeof *in.ix),
                  malloc((n ? n : 1) * sizeof *in.recs), 0, calloc(n ? n : 1, 1), 0, 0};
    int32_t *cells = NULL;
    int rc;
    if (!in.ix || !in.recs || !in.is_expert)
        rc = smoe__fail(SMOE_ENOMEM, "out of memory");
    else if ((rc = index_names(&in)) == 0 && (rc = find_experts(&in)) == 0 &&
             (rc = shape_plan(p, &in)) == 0 && (rc = size_slices(p, &in, &max_cells)) == 0) {
        cells = malloc((max_cells ? max_cells : 1) * sizeof *cells);
        if (!cells)
            rc = smoe__fail(SMOE_ENOMEM, "out of memory");
        else if ((rc = plan_layers(p, &in, cells)) == 0)
            rc = plan_scout(p, s, in.ix, in.is_expert);
    }
    free(in.ix);
    free(in.recs);
    free(in.is_expert);
    free(cells);
    if (rc < 0)
        pack_plan_free(p);
    return rc;
}
