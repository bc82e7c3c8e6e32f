/*
 * internal.h - state shared by the files of the llama.cpp integration.
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_LLAMA_INTERNAL_H
#define SMOE_LLAMA_INTERNAL_H

#include <stdint.h>

#include "expert_name.h"
#include "look_guess.h"
#include "ggml-backend-impl.h"
#include "llama.h"
#include "replay.h"
#include "smoe_llama.h"


/* One expert tensor: a stack of n_expert slices in the reserved range. */
typedef struct sl_tensor {
    char name[GGML_MAX_NAME];
    struct ggml_tensor *tensor;
    uint8_t *base;            /* tensor data: the kind's staging region after attach */
    const uint8_t *loaded;    /* where the loader's bytes were (mmap), or NULL */
    uint64_t slice;           /* bytes of one expert */
    uint32_t n_expert;
    uint32_t layer;
    int kind;                 /* SL_* (+ SL_BASE_KINDS for .bias) */
    enum ggml_type type;
    int64_t ne[GGML_MAX_DIMS];
} sl_tensor;

typedef struct sl_layer {
    int present;
    sl_tensor *t[SL_KINDS];   /* NULL where the layer has no such tensor */
} sl_layer;


/* The router lookahead (lookahead.c; the guess itself: look_guess.c). */
#define SL_LOOK_NORMS 2   /* norm weights that can feed a router: ffn_norm, post_attention_norm */
typedef struct sl_look_layer {
    float *gate;              /* [n_expert][n_embd]: ffn_gate_inp, NULL: no router */
    float *gate_b;            /* [n_expert]: ffn_gate_inp.bias or NULL */
    float *sel_b;             /* [n_expert]: exp_probs_b (selection only) or NULL */
    float *norm[SL_LOOK_NORMS];
} sl_look_layer;

typedef struct sl_look {
    int on;
    int gating;               /* the GGUF's expert_gating_func; 1 (softmax) if absent */
    uint32_t n_embd;
    uint32_t n_layers_alloc;
    sl_look_layer *layer;     /* [n_layers] */
    const sl_look_layer *next; /* the layer being guessed (the norm callback's) */
    sl_guess g;
} sl_look;

struct smoe_llama {
    smoe_stream *s;
    char *gguf_path;
    uint32_t flags;
    uint64_t claim_timeout_ns;
    smoe_log_fn log_fn;
    void *log_user;

    /* the buffer type and what the loader put in it */
    struct ggml_backend_buffer_type buft;
    struct llama_model_tensor_buft_override ov[2];
    sl_tensor *tensors;
    uint32_t n_tensors, cap_tensors;

    /* filled by attach */
    uint32_t n_layers;        /* the vault's */
    uint32_t n_expert;
    uint32_t n_layouts;
    sl_layer *layers;         /* [n_layers] */
    uint64_t *comp_off;       /* [n_layouts][SL_KINDS]: offset in the blob, UINT64_MAX: none */
    uint8_t *compat;          /* [n_layers][n_layouts]: layout fits the layer's tensors */
    uint32_t *ulist;          /* [n_expert]: the union being fetched */
    uint8_t *umark;           /* [n_expert]: 1 in the union, 2 staged */
    uint32_t *staged;         /* [n_expert]: experts present in the tensors */
    uint32_t n_staged;
    uint32_t staged_layer;
    int attached;

    /* SMOE_LLAMA_MAP: ring pages mapped over page-aligned slices (place.c) */
    int map;
    int ring_fd;              /* the ring's memory file (SMOE_OPEN_SHAREABLE) */
    uint64_t ring_fd_off;
    uint64_t page;
    smoe_blob *held;          /* [n_expert]: claims kept while their pages are mapped */
    uint8_t *is_held;         /* [n_expert] */

    /* the eval callback's state */
    int failed;               /* set by the callback; read by the abort callback */
    char err[768];
    ggml_abort_callback user_abort;
    void *user_abort_data;
    sl_replay *replay;
    sl_look look;
    uint32_t last_layer;
    uint64_t ubatch_token;    /* replay: trace token of the ubatch's first row */
    uint64_t ubatch_rows;     /* tokens of the current ubatch */

    smoe_llama_stats st;
};

/* base.c: the error record (h->err, and the log callback), and the clock */
int sl_fail(smoe_llama *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t sl_now_ns(void);

/* buft.c */
void sl_buft_init(smoe_llama *h);
void sl_buft_free(smoe_llama *h);

/* stage.c: the eval callback and what it does */
bool sl_eval_cb(struct ggml_tensor *t, bool ask, void *user);
bool sl_abort_cb(void *user);
void sl_unstage(smoe_llama *h);
/* Make expert `e` of layer l present: claim (waiting), copy, release. */
int sl_fetch(smoe_llama *h, uint32_t l, const uint32_t *list, uint32_t n);

/* place.c: a claimed blob into its slices, copied or mapped */
/* Can component k of layout lo be mapped over tensor t's slices? */
int sl_mappable(const smoe_llama *h, const sl_tensor *t, uint32_t lo, int k);
/* Copy blob b's components into expert b->expert's slices of layer l, or
 * where may_map and mappable, map them. *mapped: 1 when any page was
 * mapped, so that b must stay claimed until sl_unmap_expert(). */
int sl_place(smoe_llama *h, uint32_t l, const smoe_blob *b, int may_map, int *mapped);
/* Replace the ring pages mapped for b with fresh anonymous memory: from
 * then on no slice shows the slot, whatever it holds next. */
void sl_unmap_expert(smoe_llama *h, uint32_t l, const smoe_blob *b);

/* lookahead.c */
int sl_look_attach(smoe_llama *h);
void sl_look_free(sl_look *lk);
void sl_look_begin(smoe_llama *h, uint32_t l);
void sl_look_demand(smoe_llama *h, uint32_t e);
void sl_look_end(smoe_llama *h);
void sl_look_hint(smoe_llama *h, struct ggml_tensor *topk, uint32_t l);
/* The lookahead's counters into st's lookahead_* fields. */
void sl_look_stats(const sl_look *lk, smoe_llama_stats *st);

/* attach.c: read the replay trace into h->replay (replay.h). */
int sl_replay_open(smoe_llama *h, const char *path);

#endif
