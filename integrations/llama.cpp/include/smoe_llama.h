/*
 * smoe_llama: libsmoe_stream as the expert store of a llama.cpp model.
 *
 * The expert tensors of a MoE GGUF (blk.N.ffn_{gate,up,down,gate_up}_exps
 * .{weight,bias}) are placed in a host buffer type of this library through
 * llama_model_params.tensor_buft_overrides: address space only, the loader's
 * writes into it are dropped. The context's eval callback sees each layer's
 * routing (the ffn_moe_topk-N tensor) before that layer's expert matmuls;
 * there the chosen experts are read from the vault through the ring
 * (smoe_prefetch, smoe_claim_wait), copied into their slices of the expert
 * tensors and released (or, with SMOE_LLAMA_MAP, the ring's pages mapped
 * over the slices and released once the layer is done). The expert tensors of all layers share one
 * layer's worth of staging memory. llama.cpp itself is not patched.
 *
 * Use, in this order:
 *   smoe_llama_open(gguf, vault, &opts, &h);
 *   llama_model_params mp = llama_model_default_params();
 *   smoe_llama_model_params(h, &mp);            overrides, no extra bufts
 *   model = llama_model_load_from_file(gguf, mp);
 *   smoe_llama_attach(h, model);                 checks vault against GGUF
 *   llama_context_params cp = llama_context_default_params();
 *   smoe_llama_context_params(h, &cp);           eval and abort callbacks
 *   ctx = llama_init_from_model(model, cp);
 *   ... llama_decode(ctx, batch): a non-zero return after a failed expert
 *       read; smoe_llama_error(h) names the expert ...
 *   llama_free(ctx); llama_model_free(model); smoe_llama_close(h);
 *
 * One handle serves one model and one context at a time; llama_decode()
 * calls for it must not overlap (llama.cpp's own rule for a context).
 * Expert tensors are computed by the CPU backend (llama.cpp's --cpu-moe
 * placement); the dense part may be on another backend (untested).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_LLAMA_H
#define SMOE_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include <smoe/smoe.h>

#ifdef __cplusplus
extern "C" {
#endif

struct llama_model;
struct llama_model_params;
struct llama_context_params;

typedef struct smoe_llama smoe_llama;

/* smoe_llama_opts.flags */
enum {
    /* Map ring pages over expert slices instead of copying them, where a
     * slice is whole pages at a page boundary (others are copied): opens
     * the ring with SMOE_OPEN_SHAREABLE (libsmoe_stream 1.1; SMOE_ENOTSUP
     * where the system has no memory file). A mapped expert keeps its slot
     * claimed until the next layer's routing (docs/llama.cpp.md). */
    SMOE_LLAMA_MAP = 1u << 0,
    /* Keep the GGUF's pages of expert tensors: by default they are dropped
     * from this process and the page cache once the model is attached. */
    SMOE_LLAMA_KEEP_PAGES = 1u << 1,
    /* Router lookahead: at layer L's routing, apply layer L+1's router to
     * the hidden state at hand and pass its top-k to smoe_prefetch_hint()
     * (libsmoe_stream 1.1), so that their reads overlap layer L's expert
     * matmuls. Reads the routers from the GGUF at attach (float32 copies:
     * stats.lookahead_bytes). docs/llama.cpp.md, "Router lookahead". */
    SMOE_LLAMA_LOOKAHEAD = 1u << 2
};

typedef struct smoe_llama_opts {
    size_t struct_size;          /* sizeof(smoe_llama_opts) */
    uint32_t ring_slots;         /* 0: sized by the library's memory budget */
    uint32_t workers;            /* I/O workers; 0: the library's default */
    uint32_t verify;             /* SMOE_VERIFY_* */
    uint32_t flags;              /* SMOE_LLAMA_* */
    uint32_t open_flags;         /* SMOE_OPEN_*, passed on to smoe_open() */
    uint32_t claim_timeout_ms;   /* a read not done by then is an error; 0: 120000 */
    /* Measurement only (bench/llama): replace the router's choice by the
     * experts of this routing trace (docs/trace-format.md), token by token.
     * The output is then not the model's. NULL: off. */
    const char *replay_trace;
    smoe_log_fn log_fn;          /* warnings; NULL: silent */
    void *log_user;
} smoe_llama_opts;

#define SMOE_LLAMA_OPTS_INIT {sizeof(smoe_llama_opts), 0, 0, 0, 0, 0, 0, NULL, NULL, NULL}

/* Counters since open. */
typedef struct smoe_llama_stats {
    size_t struct_size;
    uint64_t layers;          /* routing callbacks handled (layer x ubatch) */
    uint64_t experts;         /* experts made present (copied or mapped) */
    uint64_t staged_hits;     /* experts already present from the same layer's last ubatch */
    uint64_t bytes_copied;
    uint64_t copy_ns;         /* time in memcpy from the ring */
    uint64_t wait_ns;         /* time waiting for reads (smoe_claim_wait) */
    uint64_t waves;           /* layers whose union did not fit the ring at once */
    uint64_t max_union;       /* largest union of experts of one layer and ubatch */
    uint64_t stage_bytes;     /* staging memory the expert tensors share */
    uint64_t experts_mapped;  /* of experts, those with any slice mapped (SMOE_LLAMA_MAP) */
    uint64_t bytes_mapped;
    uint64_t map_ns;          /* time mapping ring pages and unmapping them on release */
    /* SMOE_LLAMA_LOOKAHEAD */
    uint64_t lookahead_bytes;     /* router and norm weights kept as float32 */
    uint64_t lookahead_hints;     /* smoe_prefetch_hint calls the stream accepted */
    uint64_t lookahead_reads;     /* of which queued a read (SMOE_QUEUED) */
    uint64_t lookahead_skipped;   /* of which dropped by the stream (SMOE_SKIPPED) */
    uint64_t lookahead_layers;    /* routings that hints were made for */
    uint64_t lookahead_demanded;  /* experts those routings chose (union per routing) */
    uint64_t lookahead_true;      /* of which hinted: recall = true / demanded */
    uint64_t lookahead_renormed;  /* lookaheads from ffn_inp renormalised with L+1's norm */
    uint64_t lookahead_unseen;    /* routings whose router input was not found: no hint */
    uint64_t lookahead_ns;        /* time computing the lookahead and hinting */
    uint64_t lookahead_hint_ns;   /* of which in smoe_prefetch_hint */
    uint64_t lookahead_rows;      /* token rows the lookahead scored */
    uint64_t lookahead_runs;      /* routings the lookahead ran at (has a next MoE layer) */
} smoe_llama_stats;

/*
 * Open the vault for the GGUF at gguf_path: reads the GGUF's header (expert
 * tensors, their types and file offsets) and opens the stream. With
 * vault_path NULL and opts->replay_trace set, the handle only replays the
 * trace's routing into stock llama.cpp (nothing is streamed; measurement).
 * @return 0, or a negative SMOE_E* code with smoe_llama_open_error() set.
 */
int smoe_llama_open(const char *gguf_path, const char *vault_path,
                    const smoe_llama_opts *opts, smoe_llama **out);
/* Message for the calling thread's last failed smoe_llama_open(). */
const char *smoe_llama_open_error(void);

/* Set the expert overrides and use_extra_bufts = false on *mp. The
 * override list lives in h. */
void smoe_llama_model_params(smoe_llama *h, struct llama_model_params *mp);

/*
 * After llama_model_load_from_file(): check that every expert tensor of the
 * model was placed in this library's buffer and that the vault holds the
 * same tensors (layers, experts, types, shapes, and the bytes of a sample
 * of experts); drop the GGUF's expert pages. @return 0, or a negative code
 * with smoe_llama_error() saying what differs.
 */
int smoe_llama_attach(smoe_llama *h, struct llama_model *model);

/* Set cb_eval and abort_callback on *cp (an abort callback already set
 * there is still called). n_ubatch is left as it is. */
void smoe_llama_context_params(smoe_llama *h, struct llama_context_params *cp);

/* The error that stopped a llama_decode() (a failed read names the expert),
 * or of the last failing call; NULL when none. */
const char *smoe_llama_error(const smoe_llama *h);

int smoe_llama_get_stats(const smoe_llama *h, smoe_llama_stats *st);
smoe_stream *smoe_llama_stream(smoe_llama *h);

/* Close the stream and free h; after llama_free and llama_model_free.
 * NULL is a no-op. */
void smoe_llama_close(smoe_llama *h);

#ifdef __cplusplus
}
#endif
#endif /* SMOE_LLAMA_H */
