/*
 * lookahead.c - the router lookahead (SMOE_LLAMA_LOOKAHEAD): when layer L's
 * routing arrives, guess layer L+1's experts from the hidden state at hand
 * and pass them to the library as hints (smoe_prefetch_hint), so that their
 * reads overlap layer L's expert matmuls and layer L+1's attention.
 *
 * The hidden state: at ffn_moe_topk-L the graph has computed layer L's
 * router input, RMSNorm(ffn_inp_L) x w_L, where ffn_inp_L is the residual
 * stream after layer L's attention (alive until layer L's residual add, so
 * still readable). L+1's router really sees RMSNorm(ffn_inp_L + moe_L +
 * attn_L+1) x w_L+1; the lookahead applies L+1's norm weight and router to
 * ffn_inp_L, leaving out the two contributions not yet computed. It is
 * taken there, not from l_out-L (the residual after layer L, one step
 * closer), because l_out-L exists only after layer L's experts have run:
 * a hint made there could overlap only L+1's attention, while one made at
 * L's routing overlaps L's expert matmuls too, which dominate a decoded
 * token on the CPU. Where the router input is not RMSNorm x weight, the
 * router input of L itself is used.
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
 * Weights: the routers, their biases and the norm weights are read from
 * the GGUF at attach and kept as float32 (n_layers x n_expert x n_embd x 4
 * bytes: stats.lookahead_bytes). Everything the callback uses is allocated
 * there: the hot path allocates nothing.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "gguf.h"
#include "internal.h"

static const char *const norm_names[SL_LOOK_NORMS] = {"ffn_norm.weight",
                                                      "post_attention_norm.weight"};

enum { GATING_SOFTMAX = 1, GATING_SIGMOID = 2, GATING_SQRT_SOFTPLUS = 4 };

/* Tensor "blk.<l>.<suffix>" of g as n float32 values into *out (NULL if
 * absent). n_rows x n_cols, n_cols innermost. */
static int load(smoe_llama *h, struct gguf_context *g, FILE *f, uint32_t l, const char *suffix,
                uint64_t n_cols, uint64_t n_rows, float **out)
{
    char name[GGML_MAX_NAME + 16];
    snprintf(name, sizeof name, "blk.%" PRIu32 ".%s", l, suffix);
    *out = NULL;
    int64_t id = gguf_find_tensor(g, name);
    if (id < 0)
        return 0;
    const int64_t *ne = gguf_get_tensor_ne(g, id);
    enum ggml_type type = gguf_get_tensor_type(g, id);
    const struct ggml_type_traits *tt = ggml_get_type_traits(type);
    if ((uint64_t)ne[0] != n_cols || (uint64_t)ne[1] != n_rows || ne[2] != 1 ||
        (type != GGML_TYPE_F32 && !tt->to_float))
        return sl_fail(h, SMOE_EFORMAT, "lookahead: %s: expected %" PRIu64 " x %" PRIu64
                       " values of a type ggml converts to float, found [%" PRId64 ", %" PRId64
                       ", %" PRId64 "] %s", name, n_cols, n_rows, ne[0], ne[1], ne[2],
                       ggml_type_name(type));
    size_t bytes = gguf_get_tensor_size(g, id);
    float *dst = malloc(sizeof *dst * n_cols * n_rows);
    void *raw = malloc(bytes ? bytes : 1);
    int r = 0;
    if (!dst || !raw)
        r = sl_fail(h, SMOE_ENOMEM, "out of memory");
    else if (fseeko(f, (off_t)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id)),
                    SEEK_SET) != 0 || fread(raw, 1, bytes, f) != bytes)
        r = sl_fail(h, SMOE_EIO, "lookahead: %s: cannot read tensor %s", h->gguf_path, name);
    else if (type == GGML_TYPE_F32)
        memcpy(dst, raw, bytes);
    else
        tt->to_float(raw, dst, (int64_t)(n_cols * n_rows));
    free(raw);
    if (r < 0) {
        free(dst);
        return r;
    }
    *out = dst;
    h->st.lookahead_bytes += sizeof *dst * n_cols * n_rows;
    return 0;
}

static int load_layers(smoe_llama *h, struct gguf_context *g, FILE *f)
{
    sl_look *lk = &h->look;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        sl_look_layer *ly = &lk->layer[l];
        char name[64];
        snprintf(name, sizeof name, "blk.%" PRIu32 ".ffn_gate_inp.weight", l);
        int64_t id = gguf_find_tensor(g, name);
        if (id < 0)
            continue;
        if (!lk->n_embd)
            lk->n_embd = (uint32_t)gguf_get_tensor_ne(g, id)[0];
        int r;
        if ((r = load(h, g, f, l, "ffn_gate_inp.weight", lk->n_embd, h->n_expert, &ly->gate)) < 0 ||
            (r = load(h, g, f, l, "ffn_gate_inp.bias", h->n_expert, 1, &ly->gate_b)) < 0 ||
            (r = load(h, g, f, l, "exp_probs_b.bias", h->n_expert, 1, &ly->sel_b)) < 0)
            return r;
        for (int k = 0; k < SL_LOOK_NORMS; k++)
            if ((r = load(h, g, f, l, norm_names[k], lk->n_embd, 1, &ly->norm[k])) < 0)
                return r;
    }
    return 0;
}

int sl_look_attach(smoe_llama *h)
{
    sl_look *lk = &h->look;
    struct gguf_init_params gp = {true, NULL};
    struct gguf_context *g = gguf_init_from_file(h->gguf_path, gp);
    if (!g)
        return sl_fail(h, SMOE_EFORMAT, "%s: cannot read its GGUF header", h->gguf_path);
    lk->gating = GATING_SOFTMAX;
    int64_t ak = gguf_find_key(g, "general.architecture");
    if (ak >= 0 && gguf_get_kv_type(g, ak) == GGUF_TYPE_STRING) {
        char key[256];
        snprintf(key, sizeof key, "%s.expert_gating_func", gguf_get_val_str(g, ak));
        int64_t kk = gguf_find_key(g, key);
        if (kk >= 0 && gguf_get_kv_type(g, kk) == GGUF_TYPE_UINT32)
            lk->gating = (int)gguf_get_val_u32(g, kk);
    }
    FILE *f = fopen(h->gguf_path, "rb");
    lk->layer = calloc(h->n_layers ? h->n_layers : 1, sizeof *lk->layer);
    lk->n_layers_alloc = lk->layer ? h->n_layers : 0;
    int r = f && lk->layer ? load_layers(h, g, f)
                           : sl_fail(h, SMOE_ENOMEM, "lookahead: cannot open %s", h->gguf_path);
    if (f)
        fclose(f);
    gguf_free(g);
    if (r < 0)
        return r;
    if (!lk->n_embd)
        return sl_fail(h, SMOE_ENOENT, "lookahead: %s has no router weights "
                       "(blk.N.ffn_gate_inp.weight)", h->gguf_path);
    lk->row = malloc(sizeof *lk->row * lk->n_embd);
    lk->xn = malloc(sizeof *lk->xn * lk->n_embd);
    lk->score = malloc(sizeof *lk->score * h->n_expert);
    lk->pmiss = malloc(sizeof *lk->pmiss * h->n_expert);
    lk->rank = calloc(h->n_expert, sizeof *lk->rank);
    lk->hlist = malloc(sizeof *lk->hlist * h->n_expert);
    lk->seen = calloc(h->n_expert, sizeof *lk->seen);
    if (!lk->row || !lk->xn || !lk->score || !lk->pmiss || !lk->rank || !lk->hlist || !lk->seen)
        return sl_fail(h, SMOE_ENOMEM, "out of memory");
    lk->on = 1;
    return 0;
}

void sl_look_free(sl_look *lk)
{
    for (uint32_t l = 0; lk->layer && l < lk->n_layers_alloc; l++) {
        free(lk->layer[l].gate);
        free(lk->layer[l].gate_b);
        free(lk->layer[l].sel_b);
        for (int k = 0; k < SL_LOOK_NORMS; k++)
            free(lk->layer[l].norm[k]);
    }
    free(lk->layer);
    free(lk->row);
    free(lk->xn);
    free(lk->score);
    free(lk->pmiss);
    free(lk->rank);
    free(lk->hlist);
    free(lk->seen);
}

/* Layer l's routing arrived (call h->st.layers): is it the one the
 * pending hints were made for? Then sl_look_demand() counts its experts. */
void sl_look_begin(smoe_llama *h, uint32_t l)
{
    sl_look *lk = &h->look;
    lk->checking = lk->pending && lk->hint_layer == l && lk->hint_call == h->st.layers;
    h->st.lookahead_layers += (uint64_t)lk->checking;
}

/* Expert e (checked < n_expert) is among the routing's choices. */
void sl_look_demand(smoe_llama *h, uint32_t e)
{
    sl_look *lk = &h->look;
    if (!lk->checking || lk->seen[e] == h->st.layers)
        return;
    lk->seen[e] = h->st.layers;
    h->st.lookahead_demanded++;
    h->st.lookahead_true += lk->rank[e] != 0;
}

/* The routing's choices are all seen: learn each rank's share of hints
 * that came true, and forget the hints. */
void sl_look_end(smoe_llama *h)
{
    sl_look *lk = &h->look;
    for (uint32_t i = 0; i < lk->n_hint; i++) {
        uint32_t e = lk->hlist[i];
        if (lk->checking) {
            lk->rank_hints[lk->rank[e] - 1]++;
            lk->rank_true[lk->rank[e] - 1] += lk->seen[e] == h->st.layers;
        }
        lk->rank[e] = 0;
    }
    lk->n_hint = 0;
    lk->pending = 0;
    lk->checking = 0;
}

/* The tensor computing layer l's router logits, found from its topk: a
 * MUL_MAT whose weight is blk.<l>.ffn_gate_inp.weight, a few nodes up
 * (4 to 6 in the tested architectures). The search is bounded (depth and
 * nodes looked at), so a graph of another shape costs little. */
static struct ggml_tensor *find_logits(struct ggml_tensor *topk, uint32_t l)
{
    char want[64];
    snprintf(want, sizeof want, "blk.%" PRIu32 ".ffn_gate_inp.weight", l);
    struct ggml_tensor *stack[64];
    int depth[64], n = 0, budget = 256;
    stack[n] = topk;
    depth[n++] = 0;
    while (n > 0 && budget-- > 0) {
        struct ggml_tensor *t = stack[--n];
        int d = depth[n];
        if (t->op == GGML_OP_MUL_MAT && t->src[0] && !strcmp(t->src[0]->name, want))
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

/* Row `row` of x (F32, ne[0] = n_embd) into out. */
static void get_row(const struct ggml_tensor *x, int64_t row, float *out, uint32_t n)
{
    const struct ggml_tensor *src = x->view_src ? x->view_src : x;
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer))
        ggml_backend_tensor_get(x, out, (size_t)(row * x->nb[1]), sizeof *out * n);
    else
        memcpy(out, (const char *)x->data + row * x->nb[1], sizeof *out * n);
}

static float gating(int g, float x)
{
    switch (g) {
    case GATING_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case GATING_SQRT_SOFTPLUS: return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    default: return x; /* softmax: applied over the row by the caller */
    }
}

/* One token: scores of layer nl's experts for hidden state lk->row. */
static void score_row(smoe_llama *h, const sl_look_layer *ly, const float *norm, float eps)
{
    sl_look *lk = &h->look;
    const float *x = lk->row;
    uint32_t d = lk->n_embd;
    if (norm) {
        double ss = 0;
        for (uint32_t i = 0; i < d; i++)
            ss += (double)x[i] * x[i];
        float scale = 1.0f / sqrtf((float)(ss / d) + eps);
        for (uint32_t i = 0; i < d; i++)
            lk->xn[i] = x[i] * scale * norm[i];
        x = lk->xn;
    }
    const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu(GGML_TYPE_F32);
    for (uint32_t e = 0; e < h->n_expert; e++) {
        float s;
        tc->vec_dot((int)d, &s, 0, ly->gate + (size_t)e * d, 0, x, 0, 1);
        lk->score[e] = ly->gate_b ? s + ly->gate_b[e] : s;
    }
    if (!ly->sel_b)
        return; /* every gating keeps the logits' order */
    if (lk->gating == GATING_SIGMOID || lk->gating == GATING_SQRT_SOFTPLUS) {
        for (uint32_t e = 0; e < h->n_expert; e++)
            lk->score[e] = gating(lk->gating, lk->score[e]) + ly->sel_b[e];
        return;
    }
    float mx = lk->score[0], sum = 0;
    for (uint32_t e = 1; e < h->n_expert; e++)
        mx = lk->score[e] > mx ? lk->score[e] : mx;
    for (uint32_t e = 0; e < h->n_expert; e++)
        sum += lk->score[e] = expf(lk->score[e] - mx);
    for (uint32_t e = 0; e < h->n_expert; e++)
        lk->score[e] = lk->score[e] / sum + ly->sel_b[e];
}

/* Add the k best of lk->score to the hint list, rank by rank. */
static void take_top(smoe_llama *h, uint32_t k)
{
    sl_look *lk = &h->look;
    for (uint32_t r = 0; r < k && r < SL_LOOK_MAX_K; r++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t e = 0; e < h->n_expert; e++)
            if (lk->score[e] > -INFINITY && (best == UINT32_MAX || lk->score[e] > lk->score[best]))
                best = e;
        if (best == UINT32_MAX)
            return;
        lk->score[best] = -INFINITY;
        double p = (lk->rank_true[r] + 1.0) / (lk->rank_hints[r] + 2.0);
        if (!lk->rank[best]) {
            lk->hlist[lk->n_hint++] = best;
            lk->pmiss[best] = 1.0f;
            lk->rank[best] = (uint16_t)(r + 1);
        } else if (lk->rank[best] > r + 1) {
            lk->rank[best] = (uint16_t)(r + 1);
        }
        lk->pmiss[best] *= (float)(1.0 - p);
    }
}

/* Layer l's experts are present: guess layer l+1's from the state behind
 * l's routing (topk) and hint them. */
void sl_look_hint(smoe_llama *h, struct ggml_tensor *topk, uint32_t l)
{
    sl_look *lk = &h->look;
    if (l + 1 >= h->n_layers || !lk->layer[l + 1].gate)
        return;
    uint64_t t0 = sl_now_ns();
    h->st.lookahead_runs++;
    const sl_look_layer *ly = &lk->layer[l + 1];
    struct ggml_tensor *logits = find_logits(topk, l);
    struct ggml_tensor *x = logits ? logits->src[1] : NULL;
    if (!x || x->type != GGML_TYPE_F32 || x->ne[0] != (int64_t)lk->n_embd ||
        x->ne[1] != topk->ne[1] || x->nb[0] != sizeof(float)) {
        h->st.lookahead_unseen++;
        h->st.lookahead_ns += sl_now_ns() - t0;
        return;
    }
    /* RMSNorm(ffn_inp) x w_l: renormalise ffn_inp with l+1's weight. */
    const float *norm = NULL;
    float eps = 0;
    struct ggml_tensor *rms = x->op == GGML_OP_MUL ? x->src[0] : NULL;
    if (rms && rms->op == GGML_OP_RMS_NORM && x->src[1] && rms->src[0] &&
        rms->src[0]->type == GGML_TYPE_F32 && rms->src[0]->nb[0] == sizeof(float) &&
        rms->src[0]->ne[1] == x->ne[1]) {
        const char *wn = x->src[1]->name;
        const char *w = strncmp(wn, "blk.", 4) ? NULL : strchr(wn + 4, '.');
        for (int k = 0; w && k < SL_LOOK_NORMS; k++)
            if (!strcmp(w + 1, norm_names[k]) && ly->norm[k]) {
                norm = ly->norm[k];
                memcpy(&eps, rms->op_params, sizeof eps);
                x = rms->src[0];
            }
    }
    h->st.lookahead_renormed += norm != NULL;
    for (int64_t row = 0; row < x->ne[1]; row++) {
        get_row(x, row, lk->row, lk->n_embd);
        score_row(h, ly, norm, eps);
        take_top(h, (uint32_t)topk->ne[0]);
    }
    uint64_t t1 = sl_now_ns();
    h->st.lookahead_rows += (uint64_t)x->ne[1];
    for (uint32_t i = 0; i < lk->n_hint; i++) {
        uint32_t e = lk->hlist[i];
        float p = 1.0f - lk->pmiss[e];
        int r = smoe_prefetch_hint(h->s, l + 1, e, p < 0 ? 0 : p > 1 ? 1 : p);
        h->st.lookahead_hints += r >= 0;
        h->st.lookahead_reads += r == SMOE_QUEUED;
        h->st.lookahead_skipped += r == SMOE_SKIPPED;
    }
    lk->pending = 1;
    lk->hint_layer = l + 1;
    lk->hint_call = h->st.layers + 1;
    uint64_t t2 = sl_now_ns();
    h->st.lookahead_ns += t2 - t0;
    h->st.lookahead_hint_ns += t2 - t1;
}
