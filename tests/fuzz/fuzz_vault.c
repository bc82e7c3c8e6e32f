/*
 * fuzz_vault.c - the vault reader (smoe__vault_load) on arbitrary input.
 *
 * The reader only ever reads the 128-byte header at offset 0 and tables at
 * offsets from 16384 on; bytes 128..16383 and the blobs are never read. So
 * an input is mapped to a file compactly:
 *
 *   byte 0          low 6 bits: T; when T > 0 the file is padded with zeros
 *                   to a multiple of 16 KiB and T x 16 KiB more zeros follow
 *                   (room for blobs); bit 6: reads return at most 1021 bytes;
 *                   bit 7: every third read is interrupted (EINTR)
 *   bytes 1..128    the header, at file offset 0
 *   bytes 129..     file offset 16384 on (zeros fill 128..16383)
 *
 * Built with SMOE_FUZZING, where the reader skips only the header checksum
 * comparison, so mutated inputs reach the checks behind it.
 *
 * Oracle: besides the sanitizers, a vault that loads must satisfy what the
 * streamer relies on (every blob aligned, inside the file, size within its
 * padding and covering its layout; metadata lookups stay in bounds), and
 * no descriptor stays open.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mem_io.h"
#include "smoe_tier.h"

#define HEADER_AREA 16384u
#define TAIL_UNIT 16384u

static void check_loaded(const smoe__vault *v)
{
    if (v->layers == 0 || v->experts == 0 ||
        (uint64_t)v->layers * v->experts > SMOE__MAX_EXPERTS_TOTAL)
        abort();
    uint64_t total = 0, max = 0;
    for (uint64_t k = 0; k < (uint64_t)v->layers * v->experts; k++) {
        const smoe__vault_entry *e = &v->index[k];
        if (!e->present)
            continue;
        if (e->offset % SMOE__VAULT_ALIGN || e->padded % SMOE__VAULT_ALIGN ||
            e->offset < HEADER_AREA || e->size == 0 || e->size > e->padded ||
            e->offset + e->padded > v->file_size || e->layout >= v->n_layouts ||
            e->size < v->layouts[e->layout].min_bytes)
            abort();
        total += e->padded;
        if (e->padded > max)
            max = e->padded;
    }
    if (total != v->total_padded || max != v->max_padded)
        abort();
    for (uint32_t j = 0; j < v->n_layouts; j++)
        if ((uint64_t)v->layouts[j].first + v->layouts[j].n > v->n_components ||
            v->layouts[j].n == 0)
            abort();
    static const char *const keys[] = {"model", "top_k", "quant", "", "="};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *val = smoe__vault_meta(v, keys[i]);
        if (val && strlen(val) > v->meta_bytes)
            abort();
    }
    if (v->top_k > v->experts)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 + 128)
        return 0;
    uint8_t ctl = data[0];
    size_t body = size - 1 - 128;
    uint64_t fsize = HEADER_AREA + body;
    if (ctl & 63)
        fsize = (fsize + TAIL_UNIT - 1) / TAIL_UNIT * TAIL_UNIT + (uint64_t)(ctl & 63) * TAIL_UNIT;
    /* A sparse file: no buffer of the file's size to fill per input. */
    const tu_mem_seg segs[2] = {{0, 128, data + 1}, {HEADER_AREA, body, data + 1 + 128}};
    tu_mem m;
    memset(&m, 0, sizeof m);
    m.size = fsize;
    m.segs = segs;
    m.nsegs = 2;
    m.max_chunk = (ctl & 64) ? 1021 : 0;
    m.eintr_every = (ctl & 128) ? 3 : 0;
    smoe__io io = tu_mem_io(&m);
    smoe__vault v;
    if (smoe__vault_load(&v, "fuzz.smoe", &io) == 0) {
        check_loaded(&v);
        smoe__vault_free(&v);
    } else if (v.index || v.meta || v.layouts || v.components) {
        abort(); /* a failed load leaves nothing behind */
    }
    if (m.open_fds != 0)
        abort();
    return 0;
}
