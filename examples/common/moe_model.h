/*
 * moe_model.h - a small synthetic MoE model for the GPU examples: experts at
 * Qwen3-30B-A3B's per-expert shapes (hidden 2048, expert FFN 768, bf16) with
 * pseudo-random weights that are a pure function of (seed, layer, expert,
 * matrix), packed into a vault with the public writer API; the lookup of
 * the three matrices in a claimed blob; and a CPU reference of the router
 * and of one expert's FFN for checking a GPU's results.
 *
 * Every function that can fail prints what went wrong to stderr and returns
 * non-zero (a negative SMOE_E* code where the library reported it).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MOE_MODEL_H
#define MOE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <smoe/smoe.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_HIDDEN 2048u     /* model width */
#define MOE_FFN 768u         /* expert FFN width */
#define MOE_MAX_EXPERTS 1024u
#define MOE_MAX_TOP_K 32u

/* Matrices of one expert, in blob order. */
enum { MOE_GATE = 0, MOE_UP = 1, MOE_DOWN = 2, MOE_NMAT = 3 };
extern const char *const moe_mat_name[MOE_NMAT]; /* "gate", "up", "down" */

typedef struct moe_model {
    uint32_t layers, experts, top_k;
    uint64_t seed;
} moe_model;

/* Where the three matrices lie in a blob of one layout. */
typedef struct moe_expert_view {
    uint64_t offset[MOE_NMAT]; /* byte offsets inside the blob */
    uint64_t extent;           /* a blob must hold at least this many bytes */
} moe_expert_view;

/*
 * Write the vault of m to path: one blob per (layer, expert) holding
 * "gate" [768, 2048], "up" [768, 2048] and "down" [2048, 768], bf16, at
 * 256-byte alignment (9 MiB per expert), and metadata naming the shapes,
 * top_k and the seed. Progress goes to stderr when it is a terminal.
 */
int moe_pack(const char *path, const moe_model *m);

/*
 * Read m back from an open vault's metadata, and check that its shapes are
 * the ones this model generates (hidden_size, moe_intermediate_size).
 */
int moe_model_get(smoe_stream *s, moe_model *m);

/*
 * Find "gate", "up" and "down" in layout `layout` with smoe_layout_find and
 * check their dtype (bf16), shapes and 16-byte alignment.
 */
int moe_view_get(smoe_stream *s, uint32_t layout, moe_expert_view *v);

/* Pseudo-random bf16 weights of (layer, expert, mat): rows x cols, row-major. */
void moe_fill_matrix(uint16_t *w, uint32_t rows, uint32_t cols, uint64_t seed,
                     uint32_t layer, uint32_t expert, uint32_t mat);
/* The router of a layer: experts x MOE_HIDDEN bf16 (not in the vault). */
void moe_fill_router(uint16_t *w, const moe_model *m, uint32_t layer);
/*
 * The input of the next token: e <- rho * e + sqrt(1 - rho^2) * noise, so
 * that adjacent tokens route alike to the degree rho. e holds MOE_HIDDEN
 * floats; start it at zero.
 */
void moe_next_embedding(float *e, uint64_t seed, uint64_t token, float rho);

static inline float moe_bf16_to_float(uint16_t h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

/* ---- CPU reference, double accumulation ------------------------------- */

/* x = h / sqrt(mean(h^2) + 1e-6), MOE_HIDDEN values. */
void moe_ref_rmsnorm(const float *h, float *x);
/* logits[e] = router[e] . x for e < experts. */
void moe_ref_logits(const uint16_t *router, const float *x, uint32_t experts, double *logits);
/*
 * y += weight * down(silu(gate x) * up x) for one expert whose matrices
 * are regenerated from the seed (not read from the vault).
 */
int moe_ref_expert(const moe_model *m, uint32_t layer, uint32_t expert, const float *x,
                   double weight, double *y);

#ifdef __cplusplus
}
#endif
#endif
