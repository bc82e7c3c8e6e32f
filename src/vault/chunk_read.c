/*
 * chunk_read.c - a worker's read of one chunk of a slot image, and the hash
 * the loaded image is checked against (chunk_read.h). Above the plan
 * (extent.h) and the source descriptors (source.h), which smoe_open sets up.
 */
#include <xxhash.h>

#include "hash.h"
#include "internal.h"
#include "vault/chunk_read.h"

int smoe__chunk_read(struct smoe_stream *s, const smoe__worker *wk, uint32_t slot,
                      uint32_t key, uint64_t off, uint64_t len, uint64_t *got,
                      smoe__io_fail *why)
{
    const smoe__vault *v = &s->vault;
    uint8_t *data = smoe__slot_data(&s->ring, slot);
    const smoe__vault_entry *e = &v->index[key];
    if (v->version != SMOE__VAULT_VERSION_INDEX) {
        *got = len;
        return smoe__io_read_full_ex(s->io, wk->fd, data + off, (size_t)len, e->offset + off,
                                     wk->align, &s->stop, why);
    }
    /* An index vault's chunk lies in one segment (smoe__extent_chunk_at):
     * one read of its source, from the worker's descriptor of it. */
    const smoe__vault_xentry *xe = &v->xent[key];
    const smoe__vault_seg *sg = &v->segs[xe->first_seg], *last = sg + xe->n_seg - 1;
    while (sg < last && off >= sg->slot_off + sg->len)
        sg++;
    const uint32_t align = s->io_mode == SMOE_IO_DIRECT ? s->src.align : 0;
    uint64_t foff = sg->file_off + (off - sg->slot_off);
    *got = len;
    int err = smoe__io_read_full_ex(s->io, smoe__source_fd(&s->src, sg->source, wk->id),
                                    data + off, (size_t)len, foff, align, &s->stop, why);
    /* The last segment of a file may be rounded out past its end: the file
     * ending there, after every byte an extent needs, is fine. */
    uint64_t need = v->sources[sg->source].size;
    if (err == SMOE_ETRUNC && why->off >= (foff + len < need ? foff + len : need))
        err = 0;
    if (err)
        why->file = sg->source + 1; /* for the claim's message */
    return err;
}

uint64_t smoe__chunk_hash(struct smoe_stream *s, const smoe__worker *wk, uint32_t key,
                           const uint8_t *data)
{
    const smoe__vault *v = &s->vault;
    const smoe__vault_entry *e = &v->index[key];
    if (v->version != SMOE__VAULT_VERSION_INDEX)
        return smoe__hash(data, (size_t)e->size);
    XXH3_state_t *st = s->src.hash[wk->id];
    const uint32_t first = v->xent[key].first_extent, n = v->layouts[e->layout].n;
    XXH3_64bits_reset(st);
    for (uint32_t k = 0; k < n; k++)
        XXH3_64bits_update(st, data + v->comp_at[first + k], (size_t)v->extents[first + k].length);
    return XXH3_64bits_digest(st);
}
