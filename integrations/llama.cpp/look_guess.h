/*
 * look_guess.h - the router lookahead's guess: score a token's hidden
 * state with the next layer's router, take its top-k with calibrated
 * probabilities, pass them to smoe_prefetch_hint, and count how many the
 * next routing then demanded (recall). Shared by smoe-llama (lookahead.c,
 * routers read from the GGUF) and libggml-smoe (plugin/plugin_look.c,
 * routers found in the graph).
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_LOOK_GUESS_H
#define SMOE_LOOK_GUESS_H

#include <stdint.h>

#include <smoe/smoe.h>

#include "ggml.h"

#define SL_LOOK_MAX_K 512 /* ranks calibrated (MAX_ROW of stage.c) */

/* llama.cpp's expert_gating_func values. */
enum { SL_GATING_SOFTMAX = 1, SL_GATING_SIGMOID = 2, SL_GATING_SQRT_SOFTPLUS = 4 };

/* One layer's router as float32. */
typedef struct sl_router {
    const float *gate;   /* [n_expert][n_embd]: ffn_gate_inp */
    const float *gate_b; /* [n_expert]: ffn_gate_inp.bias (gpt-oss) or NULL */
    const float *sel_b;  /* [n_expert]: exp_probs_b, selection only, or NULL */
    int gating;          /* SL_GATING_*: how probabilities come from logits */
} sl_router;

typedef struct sl_look_counts {
    uint64_t hints, reads, skipped; /* hints the stream accepted; of which queued, dropped */
    uint64_t layers;                /* routings that hints were made for */
    uint64_t demanded, truth;       /* experts those routings chose; of which hinted */
    uint64_t renormed, unseen;      /* ffn_inp renormalised with L+1's norm; no router input */
    uint64_t ns, hint_ns;           /* time guessing and hinting; of which in the stream */
    uint64_t rows, runs;            /* token rows scored; routings the lookahead ran at */
} sl_look_counts;

typedef struct sl_guess {
    uint32_t n_expert, n_embd;
    float *row, *xn;      /* [n_embd]: a token's state, renormalised */
    float *score;         /* [n_expert] */
    float *pmiss;         /* [n_expert]: prod of (1 - p) over the ubatch's guesses */
    uint16_t *rank;       /* [n_expert]: best rank + 1 among the pending hints, 0: none */
    uint32_t *hlist;      /* [n_expert]: the pending hints */
    uint64_t *seen;       /* [n_expert]: routing call that last demanded it */
    uint32_t n_hint;
    uint32_t hint_layer;  /* layer of the pending hints */
    uint64_t hint_call;   /* the routing call they are for */
    int pending, checking;
    uint64_t rank_hints[SL_LOOK_MAX_K], rank_true[SL_LOOK_MAX_K];
    sl_look_counts n;
} sl_guess;

/* Size g's buffers (nothing is allocated after): 0, or -1 out of memory. */
int sl_guess_init(sl_guess *g, uint32_t n_expert, uint32_t n_embd);
void sl_guess_free(sl_guess *g);

/* Routing call `call` of layer l begins: is it the one the pending hints
 * were made for? Then sl_guess_demand() counts each expert it chose
 * (e < n_expert), and sl_guess_end() learns each rank's share of hints
 * that came true and forgets the hints. */
void sl_guess_begin(sl_guess *g, uint32_t l, uint64_t call);
void sl_guess_demand(sl_guess *g, uint32_t e, uint64_t call);
void sl_guess_end(sl_guess *g, uint64_t call);

/* Layer l's routing (topk, the router's choice) has been issued: guess
 * layer l+1's experts for each token from the state behind it, with router
 * `next`, and pass them to the stream as hints to be checked at routing
 * call `call`. The state is layer l's router input, RMSNorm(ffn_inp) x w;
 * where it has that shape, ffn_inp renormalised with norm_for(user, name
 * of w) (l+1's norm weight of that kind, or NULL: the router input as it
 * is). Counted in g->n: runs, rows, renormed, unseen (the router input was
 * not found or not readable: no hint), ns. */
typedef const float *(*sl_norm_fn)(void *user, const char *wname);
void sl_guess_next(sl_guess *g, smoe_stream *s, const struct ggml_tensor *topk, uint32_t l,
                   const sl_router *next, sl_norm_fn norm_for, void *user, uint64_t call);

/* A node that layer l's routing (topk, the router's choice) derives from,
 * a few nodes up, of op `op` whose source src_i is named "blk.<l>.<suffix>";
 * NULL if none. The search is bounded: a graph of another shape costs
 * little. */
const struct ggml_tensor *sl_find_from(const struct ggml_tensor *topk, uint32_t l,
                                       const char *suffix, enum ggml_op op, int src_i);
#endif
