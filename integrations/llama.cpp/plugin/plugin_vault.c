/*
 * plugin_vault.c - open the vault once the loader has placed the expert
 * tensors, check that it belongs to the model, write the counters at exit.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static int fail(const char *fmt, ...) SP_PRINTF(1, 2);
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sp_g.err, sizeof sp_g.err, fmt, ap);
    va_end(ap);
    sp_g.failed = 1;
    sp_log_error("%s", sp_g.err);
    return -1;
}

/* Slots for SMOE_RING_MB: a blob holds one expert of each kind of a layer
 * (each component 256-aligned), in 16 KiB-padded slots. */
static uint32_t slots_for_mb(uint64_t mb)
{
    uint64_t per_layer[1024] = {0}, blob = 0;
    for (uint32_t i = 0; i < sp_g.n_w; i++) {
        const sp_weight *w = &sp_g.w[i];
        uint32_t l = w->layer % 1024;
        per_layer[l] += (w->slice + 255) / 256 * 256;
        if (per_layer[l] > blob)
            blob = per_layer[l];
    }
    blob = (blob + 16383) / 16384 * 16384;
    uint64_t n = blob ? (mb << 20) / blob : 0;
    return n ? (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n) : 1;
}

static int read_tables(void)
{
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    smoe_vault_info_get(sp_g.s, &vi);
    sp_g.n_layers = vi.layers;
    sp_g.n_expert = vi.experts;
    sp_g.rr = (smoe_ring_region)SMOE_RING_REGION_INIT;
    smoe_ring_region_get(sp_g.s, &sp_g.rr);
    sp_g.held = calloc(vi.experts ? vi.experts : 1, sizeof *sp_g.held);
    sp_g.mark = calloc(vi.experts ? vi.experts : 1, 1);
    sp_g.hlist = calloc(vi.experts ? vi.experts : 1, sizeof *sp_g.hlist);
    if (!sp_g.held || !sp_g.mark || !sp_g.hlist)
        return fail("out of memory");
    if (sp_g.conf.lookahead && sp_look_open() < 0)
        return fail("SMOE_LOOKAHEAD: out of memory for the routers' float32 copies");
    snprintf(sp_g.desc, sizeof sp_g.desc, "smoe_stream: vault %s, ring %" PRIu32 " slots of "
             "%" PRIu64 " KiB (%" PRIu64 " MiB), lookahead %s", sp_g.conf.vault, sp_g.rr.slots,
             sp_g.rr.slot_stride >> 10, sp_g.rr.length >> 20, sp_look_on() ? "on" : "off");
    fprintf(stderr, "smoe: %s\n", sp_g.desc);
    return 0;
}

int sp_open(void)
{
    pthread_mutex_lock(&sp_g.lock);
    int r = 0;
    if (sp_g.failed)
        r = -1;
    else if (!sp_g.s) {
        smoe_open_opts so = SMOE_OPEN_OPTS_INIT;
        so.ring_slots = sp_g.conf.ring_slots;
        if (!so.ring_slots && sp_g.conf.ring_mb)
            so.ring_slots = slots_for_mb(sp_g.conf.ring_mb);
        so.workers = sp_g.conf.workers;
        so.verify = sp_g.conf.verify;
        /* Components are found per claimed blob (smoe_blob_find): an index
         * vault (`smoe index`) opens too. */
        so.flags = SMOE_OPEN_ALLOW_BUFFERED | SMOE_OPEN_EXTENTS;
        int e = smoe_open(sp_g.conf.vault, &so, &sp_g.s);
        if (e < 0) {
            sp_g.s = NULL;
            r = fail("SMOE_VAULT=%s: cannot open the vault: %s (%s)", sp_g.conf.vault,
                     smoe_strerror(e), smoe_last_error());
        } else {
            r = read_tables();
        }
    }
    pthread_mutex_unlock(&sp_g.lock);
    return r;
}

/* Compare expert e of w, at data (the tensor's bytes from off), with the vault. */
static int check_expert(sp_weight *w, const uint8_t *data, size_t off, uint32_t e)
{
    smoe_blob b;
    int r = smoe_claim_wait(sp_g.s, w->layer, e, 120000000000ull, &b);
    if (r < 0)
        return fail("reading expert %" PRIu32 " of layer %" PRIu32 " from SMOE_VAULT=%s to "
                    "check it against tensor %s failed: %s (%s)", e, w->layer,
                    sp_g.conf.vault, w->t->name, smoe_strerror(r), smoe_last_error());
    smoe_component c;
    int same = smoe_blob_find(sp_g.s, &b, sl_kind_component[w->kind], &c) == 0 &&
               c.offset + w->slice <= b.size &&
               !memcmp((const uint8_t *)b.data + c.offset,
                       data + (uint64_t)e * w->slice - off, w->slice);
    smoe_release(sp_g.s, &b);
    if (!same)
        return fail("SMOE_VAULT=%s does not belong to this model: expert %" PRIu32 " of "
                    "tensor %s differs from the vault's blob (layer %" PRIu32 ", component "
                    "%s)", sp_g.conf.vault, e, w->t->name, w->layer,
                    sl_kind_component[w->kind]);
    return 0;
}

int sp_check(sp_weight *w, const void *data, size_t off, size_t size)
{
    if (w->layer >= sp_g.n_layers || w->n_expert != sp_g.n_expert)
        return fail("SMOE_VAULT=%s does not belong to this model: tensor %s is in layer "
                    "%" PRIu32 " with %" PRIu32 " experts, the vault has %" PRIu32
                    " layers of %" PRIu32 " experts", sp_g.conf.vault, w->t->name,
                    w->layer, w->n_expert, sp_g.n_layers, sp_g.n_expert);
    uint32_t last = w->n_expert - 1, ex[2] = {0, last};
    for (int i = 0; i < (last ? 2 : 1); i++) {
        uint64_t a = (uint64_t)ex[i] * w->slice;
        if (a < off || a + w->slice > off + size)
            continue;
        if (check_expert(w, data, off, ex[i]) < 0)
            return -1;
        w->checked = 1;
    }
    return 0;
}

void sp_write_stats(void)
{
    if (!sp_g.conf.stats || !sp_g.s)
        return;
    smoe_stats st = SMOE_STATS_INIT;
    smoe_get_stats(sp_g.s, &st);
    FILE *f = fopen(sp_g.conf.stats, "w");
    if (!f) {
        sp_log_error("SMOE_STATS=%s: cannot write the counters", sp_g.conf.stats);
        return;
    }
    uint64_t demand = st.hits + st.joins + st.misses;
    fprintf(f, "{\"vault\": \"%s\", \"slots\": %" PRIu64 ", \"slot_bytes\": %" PRIu64
            ", \"hits\": %" PRIu64 ", \"joins\": %" PRIu64 ", \"misses\": %" PRIu64
            ", \"hit_rate\": %.6f, \"claims\": %" PRIu64 ", \"bytes_read\": %" PRIu64
            ", \"reads_failed\": %" PRIu64 ", \"wait_ns\": %" PRIu64 ", \"copy_ns\": 0"
            ", \"expert_nodes\": %" PRIu64 ", \"token_groups\": %" PRIu64
            ", \"graphs\": %" PRIu64 ", \"offset_passes\": %" PRIu64
            ", \"freq_status\": %" PRIu64 ", \"prewarm_slots\": %" PRIu64
            ", \"prewarm_passes\": %" PRIu64 ", \"prewarm_reads\": %" PRIu64
            ", \"prewarm_hits\": %" PRIu64 ", \"hit_claims\": %" PRIu64
            ", \"hit_ns\": %" PRIu64 ", \"miss_wait_ns\": %" PRIu64 ", \"replay_tokens\": %" PRIu64,
            sp_g.conf.vault, st.slots, st.slot_bytes, st.hits, st.joins, st.misses,
            demand ? (double)st.hits / (double)demand : 0.0, st.claims, st.bytes_read,
            st.reads_failed, sp_g.wait_ns, sp_g.expert_nodes, sp_g.groups, sp_g.graphs,
            sp_g.offset_passes, st.freq_status, st.prewarm_slots, st.prewarm_passes,
            st.prewarm_reads, st.prewarm_hits, sp_g.hit_claims, sp_g.hit_ns, sp_g.miss_wait_ns,
            sp_replay_tokens());
    sp_look_json(f);
    fprintf(f, "}\n");
    fclose(f);
}
