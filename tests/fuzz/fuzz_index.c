/*
 * fuzz_index.c - the index vault's reader (smoe__vault_load on version 2,
 * src/vault/vault_v2.c, and the slot plan of src/vault/extent.c) on arbitrary input.
 *
 * An index vault is small and its tables lie anywhere from byte 128 on,
 * so the input is the file itself after one control byte:
 *
 *   byte 0     bit 6: reads return at most 1021 bytes; bit 7: every third
 *              read is interrupted (EINTR); bits 0..5: the read alignment
 *              the slots are planned at again after loading, 512 << (b % 6)
 *   bytes 1..  the vault
 *
 * Built with SMOE_FUZZING, where the reader skips only the header checksum
 * comparison, so mutated inputs reach the checks behind it.
 *
 * Oracle: besides the sanitizers, a vault that loads must satisfy what the
 * streamer relies on: every extent inside its source's recorded size and
 * past its header, as long as its component, aligned as its source says;
 * every entry's reads aligned, end to end, inside its slot, each component
 * inside one of them; metadata lookups in bounds; no descriptor left open.
 */
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "fuzz.h"
#include "mem_io.h"

static void check_plan(const smoe__vault *v)
{
    const uint64_t A = v->plan_align;
    uint64_t total = 0, max = 0;
    for (uint64_t key = 0; key < (uint64_t)v->layers * v->experts; key++) {
        const smoe__vault_entry *e = &v->index[key];
        if (!e->present)
            continue;
        const smoe__vault_xentry *xe = &v->xent[key];
        const smoe__vault_layout *lo = &v->layouts[e->layout];
        if (e->layout >= v->n_layouts || xe->first_extent + (uint64_t)lo->n > v->n_extents ||
            xe->first_seg + (uint64_t)xe->n_seg > v->n_segs || xe->n_seg == 0 ||
            xe->n_seg > lo->n)
            abort();
        uint64_t at = 0;
        for (uint32_t j = 0; j < xe->n_seg; j++) {
            const smoe__vault_seg *sg = &v->segs[xe->first_seg + j];
            if (sg->slot_off != at || sg->len == 0 || sg->len % A || sg->file_off % A ||
                sg->source >= v->n_sources)
                abort();
            at += sg->len;
        }
        if (at != e->size || e->padded % 16384 || e->padded < e->size ||
            e->padded - e->size >= 16384)
            abort();
        for (uint32_t k = 0; k < lo->n; k++) {
            const smoe__vault_xt *x = &v->extents[xe->first_extent + k];
            const smoe__vault_source *s = &v->sources[x->source];
            const smoe_component *c = &v->components[lo->first + k];
            if (x->length != c->nbytes || x->offset < s->header_bytes ||
                x->offset + x->length > s->size || x->offset % s->align)
                abort();
            uint64_t slot = smoe__extent_comp_at(v, (uint32_t)key, k);
            int inside = 0;
            for (uint32_t j = 0; j < xe->n_seg; j++) {
                const smoe__vault_seg *sg = &v->segs[xe->first_seg + j];
                if (sg->source == x->source && slot >= sg->slot_off &&
                    slot + x->length <= sg->slot_off + sg->len &&
                    slot - sg->slot_off == x->offset - sg->file_off)
                    inside = 1;
            }
            if (!inside)
                abort();
        }
        total += e->padded;
        if (e->padded > max)
            max = e->padded;
    }
    if (total != v->total_padded || max != v->max_padded)
        abort();
}

static void check_loaded(const smoe__vault *v)
{
    if (v->version != SMOE__VAULT_VERSION_INDEX || !v->n_sources || !v->sources || !v->xent)
        abort();
    for (uint32_t i = 0; i < v->n_sources; i++) {
        const smoe__vault_source *s = &v->sources[i];
        size_t len = strlen(s->name);
        if (len == 0 || len > SMOE__V2_NAME_MAX || s->name[0] == '/' || !s->align ||
            (s->align & (s->align - 1)) || s->header_bytes > s->size ||
            strstr(s->name, "/./") || strstr(s->name, "//") || !strcmp(s->name, ".."))
            abort();
    }
    /* Each source's extents by offset, every extent once (source_hdr.c
     * checks them against the file's tensors in this order). */
    if (v->xt_source_first[0] != 0 || v->xt_source_first[v->n_sources] != v->n_extents)
        abort();
    for (uint32_t i = 0; i < v->n_sources; i++)
        for (uint32_t k = v->xt_source_first[i]; k < v->xt_source_first[i + 1]; k++) {
            const smoe__vault_xt *x = &v->extents[v->xt_by_source[k]];
            if (v->xt_by_source[k] >= v->n_extents || x->source != i ||
                (k > v->xt_source_first[i] &&
                 x->offset < v->extents[v->xt_by_source[k - 1]].offset))
                abort();
        }
    check_plan(v);
    static const char *const keys[] = {"model", "top_k", "quant", "source_format", "="};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *val = smoe__vault_meta(v, keys[i]);
        if (val && strlen(val) > v->meta_bytes)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 + 128)
        return 0;
    uint8_t ctl = data[0];
    const tu_mem_seg segs[1] = {{0, size - 1, data + 1}};
    tu_mem m;
    memset(&m, 0, sizeof m);
    m.size = size - 1;
    m.segs = segs;
    m.nsegs = 1;
    m.max_chunk = (ctl & 64) ? 1021 : 0;
    m.eintr_every = (ctl & 128) ? 3 : 0;
    smoe__io io = tu_mem_io(&m);
    smoe__vault v;
    if (smoe__vault_load(&v, "fuzz.smoe", &io) == 0) {
        if (v.version == SMOE__VAULT_VERSION_INDEX) {
            check_loaded(&v);
            if (smoe__extent_plan(&v, 512u << ((ctl & 63) % 6)) == 0)
                check_loaded(&v);
        }
        smoe__vault_free(&v);
    } else if (v.index || v.meta || v.layouts || v.components || v.sources || v.extents) {
        abort(); /* a failed load leaves nothing behind */
    }
    if (m.open_fds != 0)
        abort();
    return 0;
}
