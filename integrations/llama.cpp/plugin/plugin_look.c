/*
 * plugin_look.c - the router lookahead in libggml-smoe (SMOE_LOOKAHEAD=1),
 * as smoe-llama's --lookahead runs it (lookahead.c; the guess itself and
 * its calibration: look_guess.c, shared by both).
 *
 * The plugin sees only its own nodes, but they lead to the router: a
 * MUL_MAT_ID's routing ids are the top-k of MUL_MAT(blk.L.ffn_gate_inp.
 * weight, cur), cur = RMS_NORM(ffn_inp_L) x blk.L.<norm>.weight, and the
 * graph keeps the sources' names and pointers (the scheduler copies a
 * source only where this backend refuses its buffer; it takes host ones).
 * The first routing of layer L learns L's router from there: the gate
 * weight, its bias (gpt-oss's ffn_gate_inp.bias), the selection bias
 * (exp_probs_b, glm4moe) with the gating that precedes it, and the norm
 * weight, converted to float32 into memory sized when the vault opens
 * (n_layers x (n_expert x n_embd + 2 n_expert + n_embd) x 4 bytes:
 * lookahead_bytes). A router in memory other than the host's, or in a
 * layout of the CPU backend's own (a repacked buffer), is not learned: no
 * hint for that layer. A warm-up decode (llama.cpp's default) learns
 * every layer before the first request.
 *
 * Then at each routing of layer L, once L's demand prefetches are issued
 * and before any of them is waited for, layer L+1's router is applied to
 * ffn_inp_L renormalised with L+1's norm weight, for each token of the
 * ubatch, and the top-k go to smoe_prefetch_hint. At L+1's routing the
 * experts it demands are counted against the hints (lookahead_recall).
 * All of it runs under sp_g.lock, in graph_compute, and allocates nothing.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../look_guess.h"
#include "plugin.h"

typedef struct look_layer {
    int state;                    /* 0: not seen yet, 1: learned, -1: not usable */
    float *gate, *gate_b, *sel_b; /* gate_b, sel_b: in the arena whether present or not */
    float *norm;
    int has_gate_b, has_sel_b, has_norm;
    int gating;                   /* SL_GATING_* before sel_b */
} look_layer;

static struct {
    int on;
    uint32_t n_embd;
    look_layer *layer; /* [sp_g.n_layers] */
    float *arena;
    uint64_t bytes;
    uint64_t call;     /* routings so far */
    uint32_t next;     /* the layer being guessed (next_norm's) */
    sl_guess g;
} lk;

/* The model's width, from the expert tensors: gate, up and gate_up take
 * n_embd (ne[0]), down gives it (ne[1]). */
static uint32_t width(void)
{
    for (uint32_t i = 0; i < sp_g.n_w; i++) {
        const sp_weight *w = &sp_g.w[i];
        if (w->kind == SL_GATE || w->kind == SL_UP || w->kind == SL_GATE_UP)
            return (uint32_t)w->t->ne[0];
    }
    for (uint32_t i = 0; i < sp_g.n_w; i++)
        if (sp_g.w[i].kind == SL_DOWN)
            return (uint32_t)sp_g.w[i].t->ne[1];
    return 0;
}

int sp_look_open(void)
{
    uint32_t d = width(), e = sp_g.n_expert, nl = sp_g.n_layers;
    uint64_t per = (uint64_t)e * d + 2u * e + d;
    if (!d || !e || !nl)
        return 0;
    lk.layer = calloc(nl, sizeof *lk.layer);
    lk.arena = calloc(per * nl, sizeof *lk.arena);
    if (!lk.layer || !lk.arena || sl_guess_init(&lk.g, e, d) < 0) {
        sp_look_free();
        return -1;
    }
    for (uint32_t l = 0; l < nl; l++) {
        float *p = lk.arena + per * l;
        lk.layer[l].gate = p;
        lk.layer[l].gate_b = p + (uint64_t)e * d;
        lk.layer[l].sel_b = lk.layer[l].gate_b + e;
        lk.layer[l].norm = lk.layer[l].sel_b + e;
    }
    lk.n_embd = d;
    lk.bytes = per * nl * sizeof *lk.arena;
    lk.on = 1;
    return 0;
}

void sp_look_free(void)
{
    free(lk.layer);
    free(lk.arena);
    sl_guess_free(&lk.g);
    lk.layer = NULL;
    lk.arena = NULL;
    lk.on = 0;
}

int sp_look_on(void)
{
    return lk.on;
}

/* Weight w, cols x rows of a type ggml converts, into dst as float32:
 * 0, or -1 where it is not readable here. */
static int to_f32(const struct ggml_tensor *w, int64_t cols, int64_t rows, float *dst)
{
    const struct ggml_type_traits *tt = ggml_get_type_traits(w->type);
    if (w->ne[0] != cols || w->ne[1] != rows || w->ne[2] != 1 || w->ne[3] != 1 ||
        !ggml_is_contiguous(w) || !w->data || w->extra || !w->buffer ||
        !ggml_backend_buffer_is_host(w->buffer) || (w->type != GGML_TYPE_F32 && !tt->to_float))
        return -1;
    if (w->type == GGML_TYPE_F32)
        memcpy(dst, w->data, sizeof *dst * (size_t)(cols * rows));
    else
        tt->to_float(w->data, dst, cols * rows);
    return 0;
}

/* The bias added at an ADD node found behind topk, if any: *has, and 0 or
 * -1 (present and unreadable). */
static int bias(const struct ggml_tensor *topk, uint32_t l, const char *suffix, float *dst,
                int *has, const struct ggml_tensor **add)
{
    *add = sl_find_from(topk, l, suffix, GGML_OP_ADD, 1);
    *has = *add != NULL;
    return *add ? to_f32((*add)->src[1], sp_g.n_expert, 1, dst) : 0;
}

/* Layer l's router, from its first routing (ids = topk). */
static void learn(const struct ggml_tensor *topk, uint32_t l)
{
    look_layer *ly = &lk.layer[l];
    ly->state = -1;
    const struct ggml_tensor *logits =
        sl_find_from(topk, l, "ffn_gate_inp.weight", GGML_OP_MUL_MAT, 0);
    const struct ggml_tensor *add;
    if (!logits || to_f32(logits->src[0], lk.n_embd, sp_g.n_expert, ly->gate) < 0 ||
        bias(topk, l, "ffn_gate_inp.bias", ly->gate_b, &ly->has_gate_b, &add) < 0 ||
        bias(topk, l, "exp_probs_b.bias", ly->sel_b, &ly->has_sel_b, &add) < 0)
        return;
    ly->gating = SL_GATING_SOFTMAX;
    if (ly->has_sel_b) { /* how the probabilities that sel_b is added to came */
        const struct ggml_tensor *p = add->src[0];
        if (p->op == GGML_OP_UNARY && ggml_get_unary_op(p) == GGML_UNARY_OP_SIGMOID)
            ly->gating = SL_GATING_SIGMOID;
        else if (p->op == GGML_OP_SQRT)
            ly->gating = SL_GATING_SQRT_SOFTPLUS;
        else if (p->op != GGML_OP_SOFT_MAX)
            return;
    }
    const struct ggml_tensor *x = logits->src[1];
    ly->has_norm = x->op == GGML_OP_MUL && x->src[0] && x->src[0]->op == GGML_OP_RMS_NORM &&
                   x->src[1] && to_f32(x->src[1], lk.n_embd, 1, ly->norm) == 0;
    ly->state = 1;
}

void sp_look_route(const struct ggml_tensor *ids, uint32_t l)
{
    if (!lk.on || l >= sp_g.n_layers)
        return;
    lk.call++;
    if (!lk.layer[l].state)
        learn(ids, l);
    sl_guess_begin(&lk.g, l, lk.call);
    for (int64_t t = 0; t < ids->ne[1]; t++)
        for (int64_t j = 0; j < ids->ne[0]; j++) {
            int32_t e = sp_id_at(ids, j, t);
            if (e >= 0 && (uint32_t)e < sp_g.n_expert)
                sl_guess_demand(&lk.g, (uint32_t)e, lk.call);
        }
    sl_guess_end(&lk.g, lk.call);
}

/* Layer l+1's norm weight: whichever feeds its router. */
static const float *next_norm(void *user, const char *wname)
{
    (void)user, (void)wname;
    const look_layer *ly = &lk.layer[lk.next];
    return ly->has_norm ? ly->norm : NULL;
}

void sp_look_hint(const struct ggml_tensor *ids, uint32_t l)
{
    if (!lk.on || l + 1 >= sp_g.n_layers || lk.layer[l + 1].state != 1)
        return;
    const look_layer *ly = &lk.layer[l + 1];
    sl_router r = {ly->gate, ly->has_gate_b ? ly->gate_b : NULL,
                   ly->has_sel_b ? ly->sel_b : NULL, ly->gating};
    lk.next = l + 1;
    sl_guess_next(&lk.g, sp_g.s, ids, l, &r, next_norm, NULL, lk.call + 1);
}

void sp_look_json(FILE *f)
{
    if (!lk.on) {
        fprintf(f, ", \"lookahead\": false");
        return;
    }
    const sl_look_counts *n = &lk.g.n;
    uint32_t learned = 0;
    for (uint32_t l = 0; l < sp_g.n_layers; l++)
        learned += lk.layer[l].state == 1;
    fprintf(f, ", \"lookahead\": true, \"lookahead_recall\": %.6f, \"lookahead_hints\": %"
            PRIu64 ", \"lookahead_reads\": %" PRIu64 ", \"lookahead_skipped\": %" PRIu64
            ", \"lookahead_layers\": %" PRIu64 ", \"lookahead_demanded\": %" PRIu64
            ", \"lookahead_true\": %" PRIu64 ", \"lookahead_renormed\": %" PRIu64
            ", \"lookahead_unseen\": %" PRIu64 ", \"lookahead_runs\": %" PRIu64
            ", \"lookahead_rows\": %" PRIu64 ", \"lookahead_ns\": %" PRIu64
            ", \"lookahead_hint_ns\": %" PRIu64 ", \"lookahead_routers\": %" PRIu32
            ", \"lookahead_bytes\": %" PRIu64,
            n->demanded ? (double)n->truth / (double)n->demanded : 0.0, n->hints, n->reads,
            n->skipped, n->layers, n->demanded, n->truth, n->renormed, n->unseen, n->runs,
            n->rows, n->ns, n->hint_ns, learned, lk.bytes);
}
