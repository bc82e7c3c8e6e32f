/*
 * moe_model.c - the synthetic MoE model of moe_model.h: weights, packing,
 * lookup in a claimed blob and the CPU reference.
 *
 * SPDX-License-Identifier: MIT
 */
#include "moe_model.h"
#include "synth.h" /* splitmix64: tools/smoe/common/synth.h */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const moe_mat_name[MOE_NMAT] = {"gate", "up", "down"};

static const uint32_t mat_rows[MOE_NMAT] = {MOE_FFN, MOE_FFN, MOE_HIDDEN};
static const uint32_t mat_cols[MOE_NMAT] = {MOE_HIDDEN, MOE_HIDDEN, MOE_FFN};

#define ROUTER_MAT 3u   /* salt of the router's weights */
#define EMBED_MAT 4u    /* salt of the token inputs */
#define ALIGN 256u      /* component alignment inside a blob */

static uint64_t key_of(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = seed;
    s ^= synth_splitmix64(&s) + a;
    s ^= synth_splitmix64(&s) + b;
    s ^= synth_splitmix64(&s) + c;
    return synth_splitmix64(&s);
}

/* Round to nearest even; the values here are finite and small. */
static uint16_t float_to_bf16(float f)
{
    union { float f; uint32_t u; } v = {f};
    v.u += 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)(v.u >> 16);
}

/* Uniform values in [-a, a) from 16 random bits each. */
static void fill_uniform_bf16(uint16_t *w, size_t n, uint64_t state, float a)
{
    const float scale = a / 32768.0f;
    size_t i = 0;
    while (i < n) {
        uint64_t r = synth_splitmix64(&state);
        for (int j = 0; j < 4 && i < n; j++, i++, r >>= 16)
            w[i] = float_to_bf16(((float)(r & 0xffffu) - 32768.0f + 0.5f) * scale);
    }
}

void moe_fill_matrix(uint16_t *w, uint32_t rows, uint32_t cols, uint64_t seed,
                     uint32_t layer, uint32_t expert, uint32_t mat)
{
    /* Variance 1 / fan_in: unit-variance inputs give unit-variance outputs. */
    float a = sqrtf(3.0f / (float)cols);
    fill_uniform_bf16(w, (size_t)rows * cols, key_of(seed, layer, expert, mat), a);
}

void moe_fill_router(uint16_t *w, const moe_model *m, uint32_t layer)
{
    moe_fill_matrix(w, m->experts, MOE_HIDDEN, m->seed, layer, 0, ROUTER_MAT);
}

void moe_next_embedding(float *e, uint64_t seed, uint64_t token, float rho)
{
    uint64_t state = key_of(seed, token, 0, EMBED_MAT);
    float keep = rho, fresh = sqrtf(1.0f - rho * rho);
    for (uint32_t i = 0; i < MOE_HIDDEN; i += 4) {
        uint64_t r = synth_splitmix64(&state);
        for (uint32_t j = 0; j < 4; j++, r >>= 16) {
            float u = ((float)(r & 0xffffu) - 32768.0f + 0.5f) / 32768.0f; /* [-1, 1) */
            e[i + j] = keep * e[i + j] + fresh * 1.7320508f * u;          /* unit variance */
        }
    }
}

/* ---- packing ------------------------------------------------------------- */

static int writer_fail(smoe_writer *w, const char *what, int rc)
{
    fprintf(stderr, "moe_pack: %s: %s (%s)\n", what, smoe_last_error(), smoe_err_name(rc));
    smoe_writer_abort(w);
    return rc;
}

/* The blob's layout: the MOE_NMAT matrices in order, each aligned. Returns
 * the blob's size. */
static uint64_t blob_layout(smoe_component c[MOE_NMAT])
{
    memset(c, 0, sizeof(smoe_component) * MOE_NMAT);
    uint64_t off = 0;
    for (uint32_t i = 0; i < MOE_NMAT; i++) {
        snprintf(c[i].name, sizeof c[i].name, "%s", moe_mat_name[i]);
        c[i].dtype = SMOE_DTYPE_BF16;
        c[i].ndim = 2;
        c[i].shape[0] = mat_rows[i];
        c[i].shape[1] = mat_cols[i];
        c[i].offset = off;
        c[i].nbytes = (uint64_t)mat_rows[i] * mat_cols[i] * 2;
        off = (off + c[i].nbytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    return c[MOE_NMAT - 1].offset + c[MOE_NMAT - 1].nbytes;
}

/* The model's metadata. On failure the writer is aborted. */
static int write_meta(smoe_writer *w, const moe_model *m)
{
    char top_k[16], seed[32], hidden[16], ffn[16];
    snprintf(top_k, sizeof top_k, "%u", m->top_k);
    snprintf(seed, sizeof seed, "%" PRIu64, m->seed);
    snprintf(hidden, sizeof hidden, "%u", MOE_HIDDEN);
    snprintf(ffn, sizeof ffn, "%u", MOE_FFN);
    const char *meta[][2] = {
        {"model", "synthetic-moe-qwen3-30b-a3b-expert-shapes"},
        {"arch", "qwen3_moe"},
        {"quant", "bf16"},
        {"top_k", top_k},
        {"seed", seed},
        {"hidden_size", hidden},
        {"moe_intermediate_size", ffn},
    };
    int rc;
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
        if ((rc = smoe_writer_set_meta(w, meta[i][0], meta[i][1])) < 0)
            return writer_fail(w, "set metadata", rc);
    return 0;
}

/* Every expert's blob, layer by layer. On failure the writer is aborted. */
static int write_blobs(smoe_writer *w, const char *path, const moe_model *m,
                       const smoe_component c[MOE_NMAT], uint32_t layout, uint64_t blob_bytes)
{
    uint16_t *blob = calloc(1, (size_t)blob_bytes);
    if (!blob) {
        smoe_writer_abort(w);
        fprintf(stderr, "moe_pack: out of memory for a %" PRIu64 "-byte blob\n", blob_bytes);
        return SMOE_ENOMEM;
    }
    int rc, tty = isatty(STDERR_FILENO); /* progress only where someone watches */
    for (uint32_t l = 0; l < m->layers; l++) {
        for (uint32_t e = 0; e < m->experts; e++) {
            for (uint32_t i = 0; i < MOE_NMAT; i++)
                moe_fill_matrix(blob + c[i].offset / 2, mat_rows[i], mat_cols[i], m->seed, l,
                                e, i);
            if ((rc = smoe_writer_add_blob(w, l, e, layout, blob, blob_bytes)) < 0) {
                free(blob);
                return writer_fail(w, "add blob", rc);
            }
        }
        if (tty)
            fprintf(stderr, "\rmoe_pack: %s: layer %u/%u (%.2f GB)%s", path, l + 1, m->layers,
                    (double)blob_bytes * m->experts * (l + 1) / 1e9,
                    l + 1 == m->layers ? "\n" : "");
    }
    free(blob);
    return 0;
}

int moe_pack(const char *path, const moe_model *m)
{
    if (!m->layers || !m->experts || m->experts > MOE_MAX_EXPERTS || !m->top_k ||
        m->top_k > m->experts || m->top_k > MOE_MAX_TOP_K) {
        fprintf(stderr, "moe_pack: %u layers x %u experts, top-%u: expected at least one "
                "layer, 1..%u experts and top-k 1..min(experts, %u)\n", m->layers, m->experts,
                m->top_k, MOE_MAX_EXPERTS, MOE_MAX_TOP_K);
        return SMOE_EINVAL;
    }
    smoe_component c[MOE_NMAT];
    uint64_t blob_bytes = blob_layout(c);

    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = m->layers;
    wo.experts = m->experts;
    wo.component_align = ALIGN;
    smoe_writer *w = NULL;
    int rc = smoe_writer_open(path, &wo, &w);
    if (rc < 0) {
        fprintf(stderr, "moe_pack: %s (%s)\n", smoe_last_error(), smoe_err_name(rc));
        return rc;
    }
    uint32_t layout;
    if ((rc = smoe_writer_add_layout(w, c, MOE_NMAT, &layout)) < 0)
        return writer_fail(w, "add layout", rc);
    if ((rc = write_meta(w, m)) < 0 || (rc = write_blobs(w, path, m, c, layout, blob_bytes)) < 0)
        return rc;
    if ((rc = smoe_writer_finish(w)) < 0) {
        fprintf(stderr, "moe_pack: finish: %s (%s)\n", smoe_last_error(), smoe_err_name(rc));
        return rc;
    }
    return 0;
}

/* ---- reading it back ------------------------------------------------------- */

/* A metadata value as a number; 0 and *v set, or -1 with a message. */
static int meta_u64(smoe_stream *s, const char *key, uint64_t *v)
{
    const char *val = smoe_meta_get(s, key);
    if (!val) {
        fprintf(stderr, "moe_model: the vault has no \"%s\" metadata key: it was not packed "
                "by moe_pack()\n", key);
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(val, &end, 10);
    if (!*val || *end || errno || *val == '-') {
        fprintf(stderr, "moe_model: metadata key \"%s\": found \"%s\", expected a decimal "
                "number\n", key, val);
        return -1;
    }
    *v = x;
    return 0;
}

int moe_model_get(smoe_stream *s, moe_model *m)
{
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    int rc = smoe_vault_info_get(s, &vi);
    if (rc < 0) {
        fprintf(stderr, "moe_model: vault info: %s (%s)\n", smoe_last_error(),
                smoe_err_name(rc));
        return rc;
    }
    uint64_t hidden, ffn;
    if (meta_u64(s, "seed", &m->seed) || meta_u64(s, "hidden_size", &hidden) ||
        meta_u64(s, "moe_intermediate_size", &ffn))
        return SMOE_EFORMAT;
    if (hidden != MOE_HIDDEN || ffn != MOE_FFN) {
        fprintf(stderr, "moe_model: the vault's experts are hidden %" PRIu64 " x FFN %" PRIu64
                ", expected %u x %u\n", hidden, ffn, MOE_HIDDEN, MOE_FFN);
        return SMOE_EFORMAT;
    }
    m->layers = vi.layers;
    m->experts = vi.experts;
    m->top_k = vi.top_k;
    if (m->experts > MOE_MAX_EXPERTS || m->top_k == 0 || m->top_k > m->experts ||
        m->top_k > MOE_MAX_TOP_K) {
        fprintf(stderr, "moe_model: %u experts per layer, top-%u: expected at most %u "
                "experts and top-k 1..min(experts, %u)\n", m->experts, m->top_k,
                MOE_MAX_EXPERTS, MOE_MAX_TOP_K);
        return SMOE_EFORMAT;
    }
    return 0;
}

int moe_view_get(smoe_stream *s, uint32_t layout, moe_expert_view *v)
{
    v->extent = 0;
    for (uint32_t i = 0; i < MOE_NMAT; i++) {
        smoe_component c;
        int rc = smoe_layout_find(s, layout, moe_mat_name[i], &c);
        if (rc < 0) {
            fprintf(stderr, "moe_model: layout %u, component \"%s\": %s (%s)\n", layout,
                    moe_mat_name[i], smoe_last_error(), smoe_err_name(rc));
            return rc;
        }
        if (c.dtype != SMOE_DTYPE_BF16 || c.ndim != 2 || c.shape[0] != mat_rows[i] ||
            c.shape[1] != mat_cols[i] || c.nbytes != (uint64_t)mat_rows[i] * mat_cols[i] * 2 ||
            c.offset % 16) {
            fprintf(stderr, "moe_model: layout %u, component \"%s\": %s [%" PRIu64 ", %" PRIu64
                    "] at offset %" PRIu64 ", expected bf16 [%u, %u] at a multiple of 16\n",
                    layout, c.name, smoe_dtype_name(c.dtype), c.shape[0], c.shape[1],
                    c.offset, mat_rows[i], mat_cols[i]);
            return SMOE_EFORMAT;
        }
        v->offset[i] = c.offset;
        if (c.offset + c.nbytes > v->extent)
            v->extent = c.offset + c.nbytes;
    }
    return 0;
}

/* ---- CPU reference ------------------------------------------------------------ */

void moe_ref_rmsnorm(const float *h, float *x)
{
    double ss = 0;
    for (uint32_t i = 0; i < MOE_HIDDEN; i++)
        ss += (double)h[i] * h[i];
    double inv = 1.0 / sqrt(ss / MOE_HIDDEN + 1e-6);
    for (uint32_t i = 0; i < MOE_HIDDEN; i++)
        x[i] = (float)(h[i] * inv);
}

static double dot_bf16(const uint16_t *w, const float *x, uint32_t n)
{
    double acc = 0;
    for (uint32_t i = 0; i < n; i++)
        acc += (double)moe_bf16_to_float(w[i]) * x[i];
    return acc;
}

void moe_ref_logits(const uint16_t *router, const float *x, uint32_t experts, double *logits)
{
    for (uint32_t e = 0; e < experts; e++)
        logits[e] = dot_bf16(router + (size_t)e * MOE_HIDDEN, x, MOE_HIDDEN);
}

int moe_ref_expert(const moe_model *m, uint32_t layer, uint32_t expert, const float *x,
                   double weight, double *y)
{
    size_t n = (size_t)MOE_FFN * MOE_HIDDEN;
    uint16_t *w = malloc(3 * n * sizeof *w);
    float *act = malloc(MOE_FFN * sizeof *act);
    if (!w || !act) {
        free(w);
        free(act);
        fprintf(stderr, "moe_model: out of memory for the reference expert\n");
        return SMOE_ENOMEM;
    }
    for (uint32_t i = 0; i < MOE_NMAT; i++)
        moe_fill_matrix(w + i * n, mat_rows[i], mat_cols[i], m->seed, layer, expert, i);
    for (uint32_t r = 0; r < MOE_FFN; r++) {
        double g = dot_bf16(w + (size_t)r * MOE_HIDDEN, x, MOE_HIDDEN);
        double u = dot_bf16(w + n + (size_t)r * MOE_HIDDEN, x, MOE_HIDDEN);
        act[r] = (float)(g / (1.0 + exp(-g)) * u);
    }
    for (uint32_t r = 0; r < MOE_HIDDEN; r++)
        y[r] += weight * dot_bf16(w + 2 * n + (size_t)r * MOE_FFN, act, MOE_FFN);
    free(w);
    free(act);
    return 0;
}
