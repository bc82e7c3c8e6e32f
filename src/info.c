/*
 * info.c - read-only queries: ring region, vault shape, blob layouts,
 * metadata.
 */
#include <string.h>

#include "error.h"
#include "internal.h"
#include "sized.h"

SMOE_API int smoe_ring_region_get(smoe_stream *s, smoe_ring_region *r)
{
    if (!s || !r)
        return smoe__fail(SMOE_EINVAL, "ring_region_get: NULL argument");
    const smoe__region *m = &s->ring.mem;
    smoe_ring_region full = {sizeof full, s->ring.base, s->ring.len, s->ring.stride,
                             s->ring.nslots, 0, m->shared ? m->fd : -1, 0, 0};
    return smoe__sized_out(r, &full, sizeof full, sizeof(size_t), "ring_region_get",
                           "smoe_ring_region");
}

SMOE_API int smoe_vault_info_get(smoe_stream *s, smoe_vault_info *vi)
{
    if (!s || !vi)
        return smoe__fail(SMOE_EINVAL, "vault_info_get: NULL argument");
    const smoe__vault *v = &s->vault;
    smoe_vault_info full = {sizeof full, v->layers, v->experts, v->n_layouts, v->top_k,
                            v->max_padded, v->total_padded, v->file_size, v->vault_id};
    return smoe__sized_out(vi, &full, sizeof full, sizeof(size_t), "vault_info_get",
                           "smoe_vault_info");
}

SMOE_API int smoe_layout_count(smoe_stream *s, uint32_t layout)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "layout_count: NULL stream");
    if (layout >= s->vault.n_layouts)
        return smoe__fail(SMOE_ENOENT, "layout_count: layout %u of %u", layout,
                          s->vault.n_layouts);
    return (int)s->vault.layouts[layout].n;
}

SMOE_API int smoe_layout_component(smoe_stream *s, uint32_t layout, uint32_t index,
                                   smoe_component *out)
{
    int n = smoe_layout_count(s, layout);
    if (n < 0)
        return n;
    if (!out || index >= (uint32_t)n)
        return smoe__fail(out ? SMOE_ENOENT : SMOE_EINVAL,
                          "layout_component: component %u of layout %u (%d components)",
                          index, layout, n);
    *out = s->vault.components[s->vault.layouts[layout].first + index];
    return 0;
}

SMOE_API int smoe_layout_find(smoe_stream *s, uint32_t layout, const char *name,
                              smoe_component *out)
{
    int n = smoe_layout_count(s, layout);
    if (n < 0)
        return n;
    if (!name || !out)
        return smoe__fail(SMOE_EINVAL, "layout_find: NULL argument");
    const smoe_component *c = &s->vault.components[s->vault.layouts[layout].first];
    for (int i = 0; i < n; i++)
        if (!strncmp(c[i].name, name, sizeof c[i].name)) {
            *out = c[i];
            return 0;
        }
    return smoe__fail(SMOE_ENOENT, "layout_find: no component '%s' in layout %u", name,
                      layout);
}

SMOE_API const char *smoe_meta_get(smoe_stream *s, const char *key)
{
    return s && key ? smoe__vault_meta(&s->vault, key) : NULL;
}
