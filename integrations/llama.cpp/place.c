/*
 * place.c - make a claimed blob's components present in their expert
 * slices: copied from the ring slot, or with SMOE_LLAMA_MAP the slot's
 * pages mapped over the slice (zero-copy).
 *
 * Mapping needs the ring's memory file (SMOE_OPEN_SHAREABLE), and both the
 * slice's address and the component's offset in the file at page
 * boundaries, with the slice a whole number of pages: mmap places pages,
 * and a partial page would show the next component's bytes. Slices that
 * are not (gpt-oss's MXFP4 2880 x 2880: 4,406,400 bytes; Q8_0 of most
 * shapes; biases) are copied, as without the flag.
 *
 * A mapped slice shows whatever the slot holds, so the blob stays claimed
 * while its pages are mapped: until the layer's matmuls are done
 * (stage.c). Before the claim is released the slice is replaced with
 * fresh anonymous memory, so no slice ever shows a slot that was evicted
 * and refilled; the range stays readable (the scheduler may read a little
 * past the last expert it uses), as zeros.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

int sl_mappable(const smoe_llama *h, const sl_tensor *t, uint32_t lo, int k)
{
    uint64_t off = h->comp_off[(size_t)lo * SL_KINDS + k];
    return h->map && off != UINT64_MAX && t->slice && t->slice % h->page == 0 &&
           off % h->page == 0 && (uintptr_t)t->base % h->page == 0;
}

static int map_one(smoe_llama *h, const sl_tensor *t, const smoe_blob *b, uint64_t off)
{
    void *at = t->base + (uint64_t)b->expert * t->slice;
    /* Populated now: a fault per page while the matmul reads would cost
     * more than the copy this replaces. */
    void *p = mmap(at, t->slice, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_POPULATE, h->ring_fd,
                   (off_t)(h->ring_fd_off + b->ring_offset + off));
    if (p == MAP_FAILED)
        return sl_fail(h, SMOE_ESYS, "mapping expert %" PRIu32 " of %s from the ring: %s",
                       b->expert, t->name, strerror(errno));
    h->st.bytes_mapped += t->slice;
    return 0;
}

static void unmap_one(smoe_llama *h, const sl_tensor *t, uint32_t e)
{
    void *at = t->base + (uint64_t)e * t->slice;
    /* Cannot fail short of address space exhaustion: the range is ours and
     * the same size; if it did, the ring pages would stay, so say so. */
    if (mmap(at, t->slice, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED &&
        h->log_fn)
        h->log_fn(h->log_user, SMOE_LOG_ERROR, "smoe_llama: cannot unmap ring pages from an "
                  "expert slice");
}

int sl_place(smoe_llama *h, uint32_t l, const smoe_blob *b, int may_map, int *mapped)
{
    *mapped = 0;
    if (b->layout >= h->n_layouts || !h->compat[(size_t)l * h->n_layouts + b->layout])
        return sl_fail(h, SMOE_EFORMAT, "vault blob of layer %" PRIu32 " expert %" PRIu32
                       " has layout %" PRIu32 ", which does not match the GGUF's expert "
                       "tensors of that layer", l, b->expert, b->layout);
    const sl_layer *ly = &h->layers[l];
    const uint64_t *off = &h->comp_off[(size_t)b->layout * SL_KINDS];
    for (int k = 0; k < SL_KINDS; k++) {
        const sl_tensor *t = ly->t[k];
        if (!t)
            continue;
        uint64_t t0 = sl_now_ns();
        if (may_map && sl_mappable(h, t, b->layout, k)) {
            int r = map_one(h, t, b, off[k]);
            h->st.map_ns += sl_now_ns() - t0;
            if (r < 0)
                return r; /* the caller unmaps what was mapped */
            *mapped = 1;
            continue;
        }
        memcpy(t->base + (uint64_t)b->expert * t->slice, (const uint8_t *)b->data + off[k],
               t->slice);
        h->st.bytes_copied += t->slice;
        h->st.copy_ns += sl_now_ns() - t0;
    }
    h->st.experts++;
    h->st.experts_mapped += (uint64_t)*mapped;
    return 0;
}

void sl_unmap_expert(smoe_llama *h, uint32_t l, const smoe_blob *b)
{
    if (b->layout >= h->n_layouts)
        return; /* refused by sl_place before anything was mapped */
    const sl_layer *ly = &h->layers[l];
    uint64_t t0 = sl_now_ns();
    for (int k = 0; k < SL_KINDS; k++)
        if (ly->t[k] && sl_mappable(h, ly->t[k], b->layout, k))
            unmap_one(h, ly->t[k], b->expert);
    h->st.map_ns += sl_now_ns() - t0;
}
