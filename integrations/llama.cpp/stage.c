/*
 * stage.c - the eval callback: make each layer's chosen experts present in
 * the expert tensors before that layer's matmuls read them.
 *
 * llama.cpp's scheduler asks the callback about every node; this one wants
 * only ffn_moe_topk-N, the router's choice for layer N ([k, n_tokens] I32,
 * rows strided). When that node is computed, and before any MUL_MAT_ID of
 * layer N runs, the callback:
 *   1. takes the union of the experts the ubatch's tokens chose;
 *   2. fetches them in waves: demand-prefetches as many as the ring takes
 *      (smoe_prefetch answers SMOE_EFULL when it is full), claims whichever
 *      has arrived (else waits for the oldest), copies its components into
 *      its slices, releases it, and prefetches more. A wave never needs
 *      more than one free slot, so a union larger than the ring is fetched
 *      all the same, and nothing is held across the callback.
 * With SMOE_LLAMA_LOOKAHEAD it then guesses layer N+1's experts from the
 * state behind layer N's routing and hints them (lookahead.c), after
 * layer N's experts are present, so that those reads come first.
 * On a failed read the callback records an error naming the expert and the
 * abort callback stops llama_decode(), which returns non-zero; the layer's
 * matmuls never run on missing bytes.
 *
 * Every layer's tensor of one kind (gate, up, down...) points at the same
 * staging region (attach.c), so the copies of one layer overwrite the
 * previous layer's: the experts take one layer's worth of memory besides
 * the ring, and the pages stay populated (no page faults per copy). This
 * relies on llama.cpp computing the layers in order: layer N's matmuls are
 * done before layer N+1's routing is.
 *
 * The callback runs on the thread that called llama_decode(); it allocates
 * nothing and makes no system call besides the library's (the union and
 * staged lists, and the lookahead's buffers and weights, are sized at
 * attach).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define TOPK_NAME "ffn_moe_topk-"
#define MAX_ROW 512 /* ids per row read at once from a non-host tensor */

/* Another layer's experts are about to take the staged experts' place:
 * unmap the ring pages of those mapped and release their claims (in that
 * order: a slice never shows a released slot). */
void sl_unstage(smoe_llama *h)
{
    for (uint32_t i = 0; i < h->n_staged; i++) {
        uint32_t e = h->staged[i];
        h->umark[e] = 0;
        if (h->is_held && h->is_held[e]) {
            sl_unmap_expert(h, h->staged_layer, &h->held[e]);
            smoe_release(h->s, &h->held[e]);
            h->is_held[e] = 0;
        }
    }
    h->n_staged = 0;
}

/* Make claimed blob b (h->held[expert]) present; keep the claim while its
 * pages are mapped.
 * Mapping holds a slot for the rest of the layer, so only once the whole
 * union is prefetched (hold): while a wave waits for room, each blob is
 * copied and released at once, and the union of a layer never needs more
 * slots than the ring has. */
static int present(smoe_llama *h, uint32_t l, smoe_blob *b, int hold)
{
    int mapped = 0;
    int r = sl_place(h, l, b, hold, &mapped);
    if (r < 0) /* a failed MAP_FIXED may leave a hole: make it readable */
        sl_unmap_expert(h, l, b);
    if (r < 0 || !mapped) {
        smoe_release(h->s, b);
        return r;
    }
    h->is_held[b->expert] = 1;
    return 0;
}

static int read_failed(smoe_llama *h, uint32_t l, uint32_t e, int r)
{
    return sl_fail(h, r, "reading expert %" PRIu32 " of layer %" PRIu32 " from the vault "
                   "failed: %s (%s)", e, l, smoe_strerror(r), smoe_last_error());
}

/* Claim what is left of a failed wave, so that no demand pin outlives it. */
static void drain(smoe_llama *h, uint32_t l, const uint32_t *list, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        if (smoe_cancel(h->s, l, list[i]) == 0)
            continue;
        smoe_blob b;
        if (smoe_claim_wait(h->s, l, list[i], h->claim_timeout_ns, &b) >= 0)
            smoe_release(h->s, &b);
    }
}

int sl_fetch(smoe_llama *h, uint32_t l, const uint32_t *clist, uint32_t n)
{
    uint32_t *list = (uint32_t *)clist; /* reordered in place: h->ulist */
    uint32_t head = 0, tail = 0;        /* claimed < head <= prefetched < tail */
    int waved = 0, r;
    while (head < n) {
        while (tail < n) {
            r = smoe_prefetch(h->s, l, list[tail], SMOE_PREFETCH_DEMAND);
            if (r == SMOE_EFULL) {
                waved = 1;
                break;
            }
            if (r < 0) {
                drain(h, l, list, head, tail);
                return read_failed(h, l, list[tail], r);
            }
            tail++;
        }
        /* Claimed into held[expert]: a mapped expert's claim is released
         * later, by that descriptor (release refuses copies). */
        r = SMOE_EAGAIN;
        /* Whichever has arrived first; else wait for the oldest. */
        for (uint32_t i = head; i < tail && r == SMOE_EAGAIN; i++) {
            r = smoe_claim(h->s, l, list[i], &h->held[list[i]]);
            if (r != SMOE_EAGAIN) {
                uint32_t x = list[i];
                list[i] = list[head];
                list[head] = x;
            }
        }
        if (r == SMOE_EAGAIN || head == tail) {
            /* Nothing arrived yet, or the ring was full before this wave
             * could start (speculative or pre-warm reads in flight):
             * claim_wait prefetches it itself when needed. */
            uint64_t t0 = sl_now_ns();
            for (;;) {
                r = smoe_claim_wait(h->s, l, list[head], h->claim_timeout_ns,
                                    &h->held[list[head]]);
                if (r != SMOE_EFULL || sl_now_ns() - t0 > h->claim_timeout_ns)
                    break;
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
            }
            h->st.wait_ns += sl_now_ns() - t0;
            if (head == tail && r >= 0)
                tail++;
        }
        if (r < 0) {
            drain(h, l, list, head + 1, tail);
            if (r == SMOE_ETIMEDOUT || r == SMOE_EFULL)
                return sl_fail(h, r, "expert %" PRIu32 " of layer %" PRIu32 " did not arrive "
                               "within %" PRIu64 " ms: %s", list[head], l,
                               h->claim_timeout_ns / 1000000, smoe_strerror(r));
            return read_failed(h, l, list[head], r);
        }
        r = present(h, l, &h->held[list[head]], tail == n);
        if (r < 0) {
            drain(h, l, list, head + 1, tail);
            return r;
        }
        h->staged[h->n_staged++] = list[head];
        h->umark[list[head]] = 2;
        head++;
    }
    h->st.waves += waved;
    return 0;
}

/* Read row `row` of the ids (k entries) into out. */
static void read_ids(const struct ggml_tensor *t, int64_t row, int32_t *out)
{
    int64_t k = t->ne[0];
    const struct ggml_tensor *src = t->view_src ? t->view_src : t;
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer)) {
        for (int64_t i = 0; i < k; i++)
            ggml_backend_tensor_get(t, &out[i], (size_t)(row * t->nb[1] + i * t->nb[0]), 4);
        return;
    }
    const char *p = (const char *)t->data + row * t->nb[1];
    for (int64_t i = 0; i < k; i++)
        memcpy(&out[i], p + i * t->nb[0], 4);
}

static void write_ids(struct ggml_tensor *t, int64_t row, const int32_t *in)
{
    int64_t k = t->ne[0];
    const struct ggml_tensor *src = t->view_src ? t->view_src : t;
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer)) {
        for (int64_t i = 0; i < k; i++)
            ggml_backend_tensor_set(t, &in[i], (size_t)(row * t->nb[1] + i * t->nb[0]), 4);
        return;
    }
    char *p = (char *)t->data + row * t->nb[1];
    for (int64_t i = 0; i < k; i++)
        memcpy(p + i * t->nb[0], &in[i], 4);
}

static int on_topk(smoe_llama *h, struct ggml_tensor *t, uint32_t l)
{
    if (t->type != GGML_TYPE_I32 || t->ne[0] < 1 || t->ne[0] > MAX_ROW || t->ne[2] != 1 ||
        t->ne[3] != 1)
        return sl_fail(h, SMOE_EFORMAT, "%s: expected I32 [k, n_tokens] routing ids, found "
                       "type %s [%" PRId64 ", %" PRId64 ", %" PRId64 "]", t->name,
                       ggml_type_name(t->type), t->ne[0], t->ne[1], t->ne[2]);
    if (h->s && (l >= h->n_layers || !h->layers[l].present))
        return sl_fail(h, SMOE_ENOENT, "%s: layer %" PRIu32 " routes to experts, but the "
                       "GGUF has no streamed expert tensors for it", t->name, l);
    /* A new ubatch starts where the layers start over; replay counts the
     * previous ubatch's tokens. */
    if (h->st.layers && l <= h->last_layer)
        h->ubatch_token += h->ubatch_rows;
    h->ubatch_rows = (uint64_t)t->ne[1];
    h->last_layer = l;
    h->st.layers++;
    if (!h->s) { /* replay only: no expert is streamed */
        int32_t ids[MAX_ROW];
        for (int64_t row = 0; row < t->ne[1]; row++) {
            if (sl_replay_get(h->replay, h->ubatch_token + (uint64_t)row, l, ids,
                              (uint32_t)t->ne[0]) < 0)
                return sl_fail(h, SMOE_ENOENT, "replay trace: no record for layer %" PRIu32
                               " with %" PRId64 " experts", l, t->ne[0]);
            write_ids(t, row, ids);
        }
        return 0;
    }
    /* Mapped experts hold slots: give them back before a new union of the
     * same layer needs them. */
    if (h->staged_layer != l || h->map)
        sl_unstage(h);
    h->staged_layer = l;

    int32_t ids[MAX_ROW];
    uint32_t n = 0, k = (uint32_t)t->ne[0];
    if (h->look.on)
        sl_look_begin(h, l);
    for (int64_t row = 0; row < t->ne[1]; row++) {
        if (h->replay) {
            if (sl_replay_get(h->replay, h->ubatch_token + (uint64_t)row, l, ids, k) < 0)
                return sl_fail(h, SMOE_ENOENT, "replay trace: no record for layer %" PRIu32
                               " with %" PRIu32 " experts", l, k);
            write_ids(t, row, ids);
        } else {
            read_ids(t, row, ids);
        }
        for (uint32_t i = 0; i < k; i++) {
            if (ids[i] < 0 || (uint32_t)ids[i] >= h->n_expert)
                return sl_fail(h, SMOE_EFORMAT, "%s: token %" PRId64 " chose expert %" PRId32
                               ", not below the %" PRIu32 " experts", t->name, row, ids[i],
                               h->n_expert);
            uint32_t e = (uint32_t)ids[i];
            if (h->look.on)
                sl_look_demand(h, e);
            if (h->umark[e] == 2)
                h->st.staged_hits++;
            if (h->umark[e])
                continue;
            h->umark[e] = 1;
            h->ulist[n++] = e;
        }
    }
    if (n + h->n_staged > h->st.max_union)
        h->st.max_union = n + h->n_staged;
    if (!h->look.on)
        return sl_fetch(h, l, h->ulist, n);
    sl_look_end(h);
    int r = sl_fetch(h, l, h->ulist, n);
    if (r == 0) /* after: the hints' reads queue behind this layer's */
        sl_look_hint(h, t, l);
    return r;
}

bool sl_eval_cb(struct ggml_tensor *t, bool ask, void *user)
{
    smoe_llama *h = user;
    if (strncmp(t->name, TOPK_NAME, sizeof TOPK_NAME - 1))
        return false;
    if (ask)
        return true;
    if (h->failed)
        return true; /* the abort callback stops the graph */
    char *end;
    unsigned long l = strtoul(t->name + sizeof TOPK_NAME - 1, &end, 10);
    if (*end || on_topk(h, t, (uint32_t)l) < 0)
        h->failed = 1;
    return true;
}

bool sl_abort_cb(void *user)
{
    smoe_llama *h = user;
    if (h->failed)
        return true;
    return h->user_abort ? h->user_abort(h->user_abort_data) : false;
}
