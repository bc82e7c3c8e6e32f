/*
 * look_guess.c - the router lookahead's selection and calibration
 * (look_guess.h), shared by smoe-llama and libggml-smoe.
 *
 * The selection follows build_moe_ffn: logits = W_gate_inp x (+ the
 * router's bias, gpt-oss); without a selection bias every gating function
 * (softmax, sigmoid, softmax of the chosen weights) keeps the logits'
 * order, so the top-k of the logits; with exp_probs_b (glm4moe, DeepSeek
 * V3) the top-k of gating(logits) + b. Expert groups (n_expert_groups > 1)
 * are not modelled.
 *
 * The probability passed with each hint is calibrated by the lookahead's
 * own record: for a guess of rank r (0: the token's highest score), the
 * share of earlier guesses of that rank that the next layer then demanded,
 * (true + 1) / (hints + 2); an expert several tokens of the ubatch guess
 * gets 1 - prod(1 - p_r). The router's softmax weights are not used: they
 * say how much an expert is weighted, not how often the guess comes true.
 *
 * Nothing here allocates but sl_guess_init.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "look_guess.h"

int sl_guess_init(sl_guess *g, uint32_t n_expert, uint32_t n_embd)
{
    memset(g, 0, sizeof *g);
    g->n_expert = n_expert;
    g->n_embd = n_embd;
    g->row = malloc(sizeof *g->row * (n_embd ? n_embd : 1));
    g->xn = malloc(sizeof *g->xn * (n_embd ? n_embd : 1));
    g->score = malloc(sizeof *g->score * n_expert);
    g->pmiss = malloc(sizeof *g->pmiss * n_expert);
    g->rank = calloc(n_expert, sizeof *g->rank);
    g->hlist = malloc(sizeof *g->hlist * n_expert);
    g->seen = calloc(n_expert, sizeof *g->seen);
    return g->row && g->xn && g->score && g->pmiss && g->rank && g->hlist && g->seen ? 0 : -1;
}

void sl_guess_free(sl_guess *g)
{
    free(g->row);
    free(g->xn);
    free(g->score);
    free(g->pmiss);
    free(g->rank);
    free(g->hlist);
    free(g->seen);
    g->row = g->xn = g->score = g->pmiss = NULL;
    g->rank = NULL;
    g->hlist = NULL;
    g->seen = NULL;
}

void sl_guess_begin(sl_guess *g, uint32_t l, uint64_t call)
{
    g->checking = g->pending && g->hint_layer == l && g->hint_call == call;
    g->n.layers += (uint64_t)g->checking;
}

void sl_guess_demand(sl_guess *g, uint32_t e, uint64_t call)
{
    if (!g->checking || g->seen[e] == call)
        return;
    g->seen[e] = call;
    g->n.demanded++;
    g->n.truth += g->rank[e] != 0;
}

void sl_guess_end(sl_guess *g, uint64_t call)
{
    for (uint32_t i = 0; i < g->n_hint; i++) {
        uint32_t e = g->hlist[i];
        if (g->checking) {
            g->rank_hints[g->rank[e] - 1]++;
            g->rank_true[g->rank[e] - 1] += g->seen[e] == call;
        }
        g->rank[e] = 0;
    }
    g->n_hint = 0;
    g->pending = 0;
    g->checking = 0;
}

static float gating(int kind, float x)
{
    switch (kind) {
    case SL_GATING_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case SL_GATING_SQRT_SOFTPLUS: return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    default: return x; /* softmax: applied over the row by the caller */
    }
}

/* The selection scores of router r for state x (already renormalised). */
static void score(sl_guess *g, const sl_router *r, const float *x)
{
    const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu(GGML_TYPE_F32);
    uint32_t d = g->n_embd, n = g->n_expert;
    for (uint32_t e = 0; e < n; e++) {
        float s;
        tc->vec_dot((int)d, &s, 0, r->gate + (size_t)e * d, 0, x, 0, 1);
        g->score[e] = r->gate_b ? s + r->gate_b[e] : s;
    }
    if (!r->sel_b)
        return; /* every gating keeps the logits' order */
    if (r->gating == SL_GATING_SIGMOID || r->gating == SL_GATING_SQRT_SOFTPLUS) {
        for (uint32_t e = 0; e < n; e++)
            g->score[e] = gating(r->gating, g->score[e]) + r->sel_b[e];
        return;
    }
    float mx = g->score[0], sum = 0;
    for (uint32_t e = 1; e < n; e++)
        mx = g->score[e] > mx ? g->score[e] : mx;
    for (uint32_t e = 0; e < n; e++)
        sum += g->score[e] = expf(g->score[e] - mx);
    for (uint32_t e = 0; e < n; e++)
        g->score[e] = g->score[e] / sum + r->sel_b[e];
}

/* Add the k best of g->score to the hint list, rank by rank. */
static void take_top(sl_guess *g, uint32_t k)
{
    for (uint32_t r = 0; r < k && r < SL_LOOK_MAX_K; r++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t e = 0; e < g->n_expert; e++)
            if (g->score[e] > -INFINITY && (best == UINT32_MAX || g->score[e] > g->score[best]))
                best = e;
        if (best == UINT32_MAX)
            return;
        g->score[best] = -INFINITY;
        double p = (g->rank_true[r] + 1.0) / (g->rank_hints[r] + 2.0);
        if (!g->rank[best]) {
            g->hlist[g->n_hint++] = best;
            g->pmiss[best] = 1.0f;
            g->rank[best] = (uint16_t)(r + 1);
        } else if (g->rank[best] > r + 1) {
            g->rank[best] = (uint16_t)(r + 1);
        }
        g->pmiss[best] *= (float)(1.0 - p);
    }
}

/* One token: score state x (renormalised with norm and eps first when
 * norm is not NULL) with router r; add its k best to the pending hints. */
static void guess_row(sl_guess *g, const sl_router *r, const float *x, const float *norm,
                  float eps, uint32_t k)
{
    uint32_t d = g->n_embd;
    if (norm) {
        double ss = 0;
        for (uint32_t i = 0; i < d; i++)
            ss += (double)x[i] * x[i];
        float scale = 1.0f / sqrtf((float)(ss / d) + eps);
        for (uint32_t i = 0; i < d; i++)
            g->xn[i] = x[i] * scale * norm[i];
        x = g->xn;
    }
    score(g, r, x);
    take_top(g, k);
    g->n.rows++;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Pass the pending hints to the stream as hints for layer l. */
static void send_hints(sl_guess *g, smoe_stream *s, uint32_t l, uint64_t call)
{
    uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < g->n_hint; i++) {
        uint32_t e = g->hlist[i];
        float p = 1.0f - g->pmiss[e];
        int r = smoe_prefetch_hint(s, l, e, p < 0 ? 0 : p > 1 ? 1 : p);
        g->n.hints += r >= 0;
        g->n.reads += r == SMOE_QUEUED;
        g->n.skipped += r == SMOE_SKIPPED;
    }
    g->pending = 1;
    g->hint_layer = l;
    g->hint_call = call;
    g->n.hint_ns += now_ns() - t0;
}

const struct ggml_tensor *sl_find_from(const struct ggml_tensor *topk, uint32_t l,
                                       const char *suffix, enum ggml_op op, int src_i)
{
    char want[GGML_MAX_NAME + 16];
    snprintf(want, sizeof want, "blk.%" PRIu32 ".%s", l, suffix);
    const struct ggml_tensor *stack[64];
    int depth[64], n = 0, budget = 256;
    stack[n] = topk;
    depth[n++] = 0;
    while (n > 0 && budget-- > 0) {
        const struct ggml_tensor *t = stack[--n];
        int d = depth[n];
        if (t->op == op && t->src[src_i] && !strcmp(t->src[src_i]->name, want))
            return t;
        if (d >= 12)
            continue;
        for (int i = -1; i < GGML_MAX_SRC && n < 64; i++) {
            struct ggml_tensor *s = i < 0 ? t->view_src : t->src[i];
            if (s && s->op != GGML_OP_NONE) {
                stack[n] = s;
                depth[n++] = d + 1;
            }
        }
    }
    return NULL;
}

/* The router's input x = RMS_NORM(r) x w? Then r (F32, rows of x), eps
 * and the name of w; else NULL. */
static struct ggml_tensor *rms_input(const struct ggml_tensor *x, float *eps, const char **wname)
{
    struct ggml_tensor *rms = x->op == GGML_OP_MUL ? x->src[0] : NULL;
    if (!rms || rms->op != GGML_OP_RMS_NORM || !x->src[1] || !rms->src[0])
        return NULL;
    struct ggml_tensor *r = rms->src[0];
    if (r->type != GGML_TYPE_F32 || r->nb[0] != sizeof(float) || r->ne[1] != x->ne[1] ||
        r->ne[0] != x->ne[0])
        return NULL;
    memcpy(eps, rms->op_params, sizeof *eps);
    *wname = x->src[1]->name;
    return r;
}

/* Row `row` of x (F32, contiguous rows of n) into out. */
static void get_row(const struct ggml_tensor *x, int64_t row, float *out, uint32_t n)
{
    const struct ggml_tensor *src = x->view_src ? x->view_src : x;
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer))
        ggml_backend_tensor_get(x, out, (size_t)(row * x->nb[1]), sizeof *out * n);
    else
        memcpy(out, (const char *)x->data + row * x->nb[1], sizeof *out * n);
}

void sl_guess_next(sl_guess *g, smoe_stream *s, const struct ggml_tensor *topk, uint32_t l,
                   const sl_router *next, sl_norm_fn norm_for, void *user, uint64_t call)
{
    uint64_t t0 = now_ns();
    g->n.runs++;
    const struct ggml_tensor *logits =
        sl_find_from(topk, l, "ffn_gate_inp.weight", GGML_OP_MUL_MAT, 0);
    struct ggml_tensor *x = logits ? logits->src[1] : NULL;
    if (!x || x->type != GGML_TYPE_F32 || x->ne[0] != (int64_t)g->n_embd ||
        x->ne[1] != topk->ne[1] || x->nb[0] != sizeof(float)) {
        g->n.unseen++;
        g->n.ns += now_ns() - t0;
        return;
    }
    float eps = 0;
    const char *wname = NULL;
    struct ggml_tensor *r = rms_input(x, &eps, &wname);
    const float *norm = r ? norm_for(user, wname) : NULL;
    if (norm)
        x = r;
    g->n.renormed += norm != NULL;
    for (int64_t row = 0; row < x->ne[1]; row++) {
        get_row(x, row, g->row, g->n_embd);
        guess_row(g, next, g->row, norm, eps, (uint32_t)topk->ne[0]);
    }
    send_hints(g, s, l + 1, call);
    g->n.ns += now_ns() - t0;
}
