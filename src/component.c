/*
 * component.c - where a claimed blob's components lie: at the layout's
 * offsets in a packed vault, at the expert's own in an index vault
 * (extent.h).
 */
#include <string.h>

#include "error.h"
#include "vault/extent.h"
#include "internal.h"

/* The layout record of blob's layout, or NULL (message set). */
static const smoe__vault_layout *blob_layout(smoe_stream *s, const smoe_blob *blob,
                                             const void *out, const char *fn, uint32_t *key)
{
    if (!s || !blob || !out) {
        smoe__fail(SMOE_EINVAL, "%s: NULL argument", fn);
        return NULL;
    }
    const smoe__vault *v = &s->vault;
    const smoe__vault_entry *e = smoe__vault_entry_of(v, blob->layer, blob->expert);
    if (!blob->held || blob->slot >= s->ring.nslots || !e || e->layout != blob->layout) {
        smoe__fail(SMOE_EINVAL, "%s: the descriptor holds no reference (released already, "
                   "or never claimed)", fn);
        return NULL;
    }
    /* Another stream's blob would be read through this vault's plan. (A
     * copy of the descriptor is fine: this only reads it.) */
    if (blob->reserved_[0] != s->id) {
        smoe__fail(SMOE_EINVAL, "%s: the descriptor of (layer %u, expert %u) was claimed on "
                   "another stream", fn, blob->layer, blob->expert);
        return NULL;
    }
    *key = blob->layer * v->experts + blob->expert;
    return &v->layouts[e->layout];
}

static void place(const smoe_stream *s, uint32_t key, const smoe__vault_layout *lo, uint32_t k,
                  smoe_component *out)
{
    const smoe__vault *v = &s->vault;
    *out = v->components[lo->first + k];
    if (v->version == SMOE__VAULT_VERSION_INDEX)
        out->offset = smoe__extent_comp_at(v, key, k);
}

SMOE_API int smoe_blob_component(smoe_stream *s, const smoe_blob *blob, uint32_t index,
                                 smoe_component *out)
{
    uint32_t key;
    const smoe__vault_layout *lo = blob_layout(s, blob, out, "blob_component", &key);
    if (!lo)
        return SMOE_EINVAL;
    if (index >= lo->n)
        return smoe__fail(SMOE_ENOENT, "blob_component: component %u of layout %u (%u "
                          "components)", index, blob->layout, lo->n);
    place(s, key, lo, index, out);
    return 0;
}

SMOE_API int smoe_blob_find(smoe_stream *s, const smoe_blob *blob, const char *name,
                            smoe_component *out)
{
    uint32_t key;
    const smoe__vault_layout *lo = blob_layout(s, blob, name ? out : NULL, "blob_find", &key);
    if (!lo)
        return SMOE_EINVAL;
    const smoe_component *c = &s->vault.components[lo->first];
    for (uint32_t k = 0; k < lo->n; k++)
        if (!strncmp(c[k].name, name, sizeof c[k].name)) {
            place(s, key, lo, k, out);
            return 0;
        }
    return smoe__fail(SMOE_ENOENT, "blob_find: no component '%s' in layout %u", name,
                      blob->layout);
}
