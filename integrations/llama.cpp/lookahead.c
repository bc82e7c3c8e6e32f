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
 * The selection (the top-k of the router's scores, build_moe_ffn's order)
 * and the calibrated probability passed with each hint are look_guess.c's,
 * shared with libggml-smoe.
 *
 * Weights: the routers, their biases and the norm weights are read from
 * the GGUF at attach and kept as float32 (n_layers x n_expert x n_embd x 4
 * bytes: stats.lookahead_bytes). Everything the callback uses is allocated
 * there: the hot path allocates nothing.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "internal.h"

static const char *const norm_names[SL_LOOK_NORMS] = {"ffn_norm.weight",
                                                      "post_attention_norm.weight"};

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
    lk->gating = SL_GATING_SOFTMAX;
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
    if (sl_guess_init(&lk->g, h->n_expert, lk->n_embd) < 0)
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
    sl_guess_free(&lk->g);
}

/* Layer l's routing arrived (call h->st.layers): is it the one the
 * pending hints were made for? Then sl_look_demand() counts its experts. */
void sl_look_begin(smoe_llama *h, uint32_t l)
{
    sl_guess_begin(&h->look.g, l, h->st.layers);
}

/* Expert e (checked < n_expert) is among the routing's choices. */
void sl_look_demand(smoe_llama *h, uint32_t e)
{
    sl_guess_demand(&h->look.g, e, h->st.layers);
}

/* The routing's choices are all seen: learn each rank's share of hints
 * that came true, and forget the hints. */
void sl_look_end(smoe_llama *h)
{
    sl_guess_end(&h->look.g, h->st.layers);
}

/* Layer l+1's norm weight of the kind (name) that feeds layer l's router. */
static const float *next_norm(void *user, const char *wname)
{
    const sl_look_layer *ly = ((const sl_look *)user)->next;
    const char *w = strncmp(wname, "blk.", 4) ? NULL : strchr(wname + 4, '.');
    for (int k = 0; w && k < SL_LOOK_NORMS; k++)
        if (!strcmp(w + 1, norm_names[k]))
            return ly->norm[k];
    return NULL;
}

/* Layer l's experts are present: guess layer l+1's from the state behind
 * l's routing (topk) and hint them. */
void sl_look_hint(smoe_llama *h, struct ggml_tensor *topk, uint32_t l)
{
    sl_look *lk = &h->look;
    if (l + 1 >= h->n_layers || !lk->layer[l + 1].gate)
        return;
    lk->next = &lk->layer[l + 1];
    sl_router r = {lk->next->gate, lk->next->gate_b, lk->next->sel_b, lk->gating};
    sl_guess_next(&lk->g, h->s, topk, l, &r, next_norm, lk, h->st.layers + 1);
}

void sl_look_stats(const sl_look *lk, smoe_llama_stats *st)
{
    const sl_look_counts *n = &lk->g.n;
    st->lookahead_hints = n->hints;
    st->lookahead_reads = n->reads;
    st->lookahead_skipped = n->skipped;
    st->lookahead_layers = n->layers;
    st->lookahead_demanded = n->demanded;
    st->lookahead_true = n->truth;
    st->lookahead_renormed = n->renormed;
    st->lookahead_unseen = n->unseen;
    st->lookahead_ns = n->ns;
    st->lookahead_hint_ns = n->hint_ns;
    st->lookahead_rows = n->rows;
    st->lookahead_runs = n->runs;
}
