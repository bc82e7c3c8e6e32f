/* pack_fixtures.c - writers of small safetensors and GGUF test checkpoints. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pack_fixtures.h"

void fx_fill(uint8_t *buf, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        /* splitmix64, one byte per step: cheap and different per seed */
        x += 0x9E3779B97F4A7C15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        buf[i] = (uint8_t)(z ^ (z >> 31));
    }
}

static fx_tensor *push(fx_model *m)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        fx_tensor *t = realloc(m->t, cap * sizeof *t);
        if (!t)
            abort();
        m->t = t;
        m->cap = cap;
    }
    fx_tensor *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    t->begin_override = t->end_override = t->offset_override = -1;
    return t;
}

static fx_tensor *add_common(fx_model *m, const char *name, uint32_t ndim,
                             const uint64_t *shape, uint64_t nbytes, uint64_t seed)
{
    fx_tensor *t = push(m);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    t->nbytes = nbytes;
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->data)
        abort();
    fx_fill(t->data, nbytes, seed);
    return t;
}

fx_tensor *fx_add(fx_model *m, const char *name, const char *dtype, uint32_t ndim,
                  const uint64_t *shape, uint32_t bits, uint64_t seed)
{
    uint64_t elems = 1;
    for (uint32_t i = 0; i < ndim; i++)
        elems *= shape[i];
    fx_tensor *t = add_common(m, name, ndim, shape, elems * bits / 8, seed);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    return t;
}

fx_tensor *fx_add_ggml(fx_model *m, const char *name, uint32_t type, uint32_t blk,
                       uint32_t blk_bytes, uint32_t ndim, const uint64_t *shape,
                       uint64_t seed)
{
    uint64_t rows = 1;
    for (uint32_t i = 0; i + 1 < ndim; i++)
        rows *= shape[i];
    uint64_t nbytes = rows * (shape[ndim - 1] / blk) * blk_bytes;
    fx_tensor *t = add_common(m, name, ndim, shape, nbytes, seed);
    t->ggml_type = type;
    return t;
}

const fx_tensor *fx_find(const fx_model *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name))
            return &m->t[i];
    return NULL;
}

void fx_free(fx_model *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->t[i].data);
    free(m->t);
    memset(m, 0, sizeof *m);
}

/* A growing text buffer for the JSON header. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->p && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np)
            abort();
        b->p = np;
        b->cap = cap;
    }
}

static int write_all(FILE *f, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -1;
}

int fx_write_st(const char *path, const fx_model *m, size_t first, size_t count,
                const char *header_override)
{
    return fx_write_st_pad(path, m, first, count, header_override, -1);
}

int fx_write_st_pad(const char *path, const fx_model *m, size_t first, size_t count,
                    const char *header_override, int pad_to)
{
    sbuf h = {0};
    uint64_t off = 0;
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = first; i < first + count; i++) {
        const fx_tensor *t = &m->t[i];
        sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (uint32_t d = 0; d < t->ndim; d++)
            sb_printf(&h, "%s%" PRIu64, d ? "," : "", t->shape[d]);
        uint64_t b = t->begin_override >= 0 ? (uint64_t)t->begin_override : off;
        uint64_t e = t->end_override >= 0 ? (uint64_t)t->end_override : off + t->nbytes;
        sb_printf(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", b, e);
        off += t->nbytes;
    }
    sb_printf(&h, "}");
    const char *hdr = header_override ? header_override : h.p;
    size_t hl = strlen(hdr);
    /* the reference writer pads with spaces to a multiple of 8 */
    size_t pad = pad_to < 0 ? (8 - hl % 8) % 8 : (8 + (size_t)pad_to - hl % 8) % 8;
    FILE *f = fopen(path, "wb");
    int rc = f ? 0 : -1;
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)(hl + pad) >> (8 * i));
    if (rc == 0)
        rc = write_all(f, len, 8) | write_all(f, hdr, hl) | write_all(f, "        ", pad);
    for (size_t i = first; rc == 0 && i < first + count; i++)
        rc = write_all(f, m->t[i].data, (size_t)m->t[i].nbytes);
    if (f && fclose(f) != 0)
        rc = -1;
    free(h.p);
    return rc;
}

static void put_u32(FILE *f, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fwrite(b, 1, 4, f);
}

static void put_u64(FILE *f, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fwrite(b, 1, 8, f);
}

static void put_str(FILE *f, const char *s)
{
    put_u64(f, strlen(s));
    fwrite(s, 1, strlen(s), f);
}

int fx_write_gguf(const char *path, const fx_model *m, const fx_kv *kv, size_t nkv,
                  uint32_t alignment)
{
    uint32_t align = alignment ? alignment : 32;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite("GGUF", 1, 4, f);
    put_u32(f, 3);
    put_u64(f, m->n);
    put_u64(f, nkv + 1 + (alignment ? 1 : 0));
    for (size_t i = 0; i < nkv; i++) {
        put_str(f, kv[i].key);
        if (kv[i].str) {
            put_u32(f, 8);
            put_str(f, kv[i].str);
        } else {
            put_u32(f, 4);
            put_u32(f, kv[i].u32);
        }
    }
    if (alignment) {
        put_str(f, "general.alignment");
        put_u32(f, 4);
        put_u32(f, alignment);
    }
    /* A string array, as tokenizers are stored. */
    put_str(f, "tokenizer.ggml.tokens");
    put_u32(f, 9);
    put_u32(f, 8);
    put_u64(f, 3);
    put_str(f, "<s>");
    put_str(f, "hello");
    put_str(f, "</s>");

    uint64_t off = 0;
    for (size_t i = 0; i < m->n; i++) {
        const fx_tensor *t = &m->t[i];
        put_str(f, t->name);
        put_u32(f, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++)
            put_u64(f, t->shape[t->ndim - 1 - d]); /* ggml: innermost first */
        put_u32(f, t->ggml_type);
        put_u64(f, t->offset_override >= 0 ? (uint64_t)t->offset_override : off);
        off += (t->nbytes + align - 1) / align * align;
    }
    long pos = ftell(f);
    static const uint8_t zeros[4096];
    fwrite(zeros, 1, (size_t)((align - (uint64_t)pos % align) % align), f);
    for (size_t i = 0; i < m->n; i++) {
        fwrite(m->t[i].data, 1, (size_t)m->t[i].nbytes, f);
        fwrite(zeros, 1, (size_t)((align - m->t[i].nbytes % align) % align), f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int fx_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = write_all(f, text, strlen(text));
    return fclose(f) == 0 ? rc : -1;
}

uint8_t *fx_read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(size > 0 ? (size_t)size : 1);
    if (b && size > 0 && fread(b, 1, (size_t)size, f) != (size_t)size) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b)
        *n = (size_t)size;
    return b;
}

int fx_truncate(const char *path, uint64_t n)
{
    return truncate(path, (off_t)n);
}

/* ---- the model families the tests write -------------------------------- */

static const uint64_t S_GATE[] = {8, 16}, S_DOWN[] = {16, 8};

void fx_model_qwen(fx_model *m, uint32_t experts)
{
    static const uint64_t emb[] = {32, 16}, norm[] = {16}, router[] = {4, 16};
    uint64_t seed = 1;
    fx_add(m, "model.embed_tokens.weight", "BF16", 2, emb, 16, seed++);
    fx_add(m, "model.layers.0.mlp.gate_proj.weight", "BF16", 2, S_GATE, 16, seed++);
    fx_add(m, "model.layers.0.mlp.up_proj.weight", "BF16", 2, S_GATE, 16, seed++);
    fx_add(m, "model.layers.0.mlp.down_proj.weight", "BF16", 2, S_DOWN, 16, seed++);
    for (uint32_t l = 1; l < 3; l++) {
        char n[160];
        snprintf(n, sizeof n, "model.layers.%u.input_layernorm.weight", l);
        fx_add(m, n, "F32", 1, norm, 32, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.gate.weight", l);
        fx_add(m, n, "BF16", 2, router, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.shared_expert.gate_proj.weight", l);
        fx_add(m, n, "BF16", 2, S_GATE, 16, seed++);
        for (uint32_t e = 0; e < experts; e++) {
            snprintf(n, sizeof n, "model.layers.%u.mlp.experts.%u.gate_proj.weight", l, e);
            fx_add(m, n, "BF16", 2, S_GATE, 16, seed++);
            snprintf(n, sizeof n, "model.layers.%u.mlp.experts.%u.up_proj.weight", l, e);
            fx_add(m, n, "BF16", 2, S_GATE, 16, seed++);
            snprintf(n, sizeof n, "model.layers.%u.mlp.experts.%u.down_proj.weight", l, e);
            fx_add(m, n, "BF16", 2, S_DOWN, 16, seed++);
        }
    }
    fx_add(m, "model.norm.weight", "F32", 1, norm, 32, seed++);
}

size_t fx_model_mixtral(fx_model *m)
{
    static const uint64_t emb[] = {32, 16}, router[] = {8, 16};
    uint64_t seed = 100;
    fx_add(m, "model.embed_tokens.weight", "F16", 2, emb, 16, seed++);
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t e = 0; e < 8; e++) {
            char n[160];
            static const char *const w[] = {"w1", "w2", "w3"};
            for (int k = 0; k < 3; k++) {
                snprintf(n, sizeof n, "model.layers.%u.block_sparse_moe.experts.%u.%s.weight", l,
                         e, w[k]);
                fx_add(m, n, "F16", 2, k == 1 ? S_DOWN : S_GATE, 16, seed++);
            }
            if (e == 0) {
                snprintf(n, sizeof n, "model.layers.%u.block_sparse_moe.gate.weight", l);
                fx_add(m, n, "F16", 2, router, 16, seed++);
            }
        }
    return m->n / 2 + 5;
}

void fx_model_switch_mlp(fx_model *m)
{
    static const uint64_t emb[] = {32, 16}, g[] = {6, 8, 16}, d[] = {6, 16, 8};
    uint64_t seed = 200;
    fx_add(m, "model.embed_tokens.weight", "BF16", 2, emb, 16, seed++);
    for (uint32_t l = 0; l < 3; l++) {
        char n[160];
        snprintf(n, sizeof n, "model.layers.%u.mlp.switch_mlp.gate_proj.weight", l);
        fx_add(m, n, "BF16", 3, g, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.switch_mlp.up_proj.weight", l);
        fx_add(m, n, "BF16", 3, g, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.switch_mlp.down_proj.weight", l);
        fx_add(m, n, "BF16", 3, d, 16, seed++);
    }
}

void fx_model_gpt_oss(fx_model *m)
{
    static const uint64_t gu[] = {4, 16, 32}, gub[] = {4, 32}, dn[] = {4, 16, 16},
                          dnb[] = {4, 16};
    uint64_t seed = 300;
    for (uint32_t l = 0; l < 2; l++) {
        char n[160];
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.gate_up_proj", l);
        fx_add(m, n, "BF16", 3, gu, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.gate_up_proj_bias", l);
        fx_add(m, n, "BF16", 2, gub, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.down_proj", l);
        fx_add(m, n, "BF16", 3, dn, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.experts.down_proj_bias", l);
        fx_add(m, n, "BF16", 2, dnb, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.router.weight", l);
        fx_add(m, n, "BF16", 2, dnb, 16, seed++);
    }
}

void fx_model_mlx(fx_model *m)
{
    /* 4-bit, group 32: a row of 64 values is 8 words and 2 groups. */
    static const uint64_t w[] = {4, 8, 8}, sg[] = {4, 8, 2}, ew[] = {32, 8}, es[] = {32, 2};
    uint64_t seed = 400;
    fx_add(m, "model.embed_tokens.weight", "U32", 2, ew, 32, seed++);
    fx_add(m, "model.embed_tokens.scales", "BF16", 2, es, 16, seed++);
    fx_add(m, "model.embed_tokens.biases", "BF16", 2, es, 16, seed++);
    for (uint32_t l = 0; l < 2; l++) {
        static const char *const c[] = {"gate", "up", "down"};
        for (int k = 0; k < 3; k++) {
            char n[160];
            snprintf(n, sizeof n, "model.layers.%u.mlp.switch_mlp.%s_proj.weight", l, c[k]);
            fx_add(m, n, "U32", 3, w, 32, seed++);
            snprintf(n, sizeof n, "model.layers.%u.mlp.switch_mlp.%s_proj.scales", l, c[k]);
            fx_add(m, n, "BF16", 3, sg, 16, seed++);
            snprintf(n, sizeof n, "model.layers.%u.mlp.switch_mlp.%s_proj.biases", l, c[k]);
            fx_add(m, n, "BF16", 3, sg, 16, seed++);
        }
    }
}

enum { GGML_F32 = 0, GGML_Q4_K = 12, GGML_Q6_K = 14, GGML_Q8_0 = 8 };

void fx_model_gguf(fx_model *m, int mixed)
{
    static const uint64_t emb[] = {32, 256}, norm[] = {256}, router[] = {4, 256},
                          g[] = {4, 8, 256}, d[] = {4, 8, 256};
    uint64_t seed = 500;
    fx_add_ggml(m, "token_embd.weight", GGML_Q8_0, 32, 34, 2, emb, seed++);
    for (uint32_t l = 0; l < 2; l++) {
        char n[160];
        snprintf(n, sizeof n, "blk.%u.attn_norm.weight", l);
        fx_add_ggml(m, n, GGML_F32, 1, 4, 1, norm, seed++);
        snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.weight", l);
        fx_add_ggml(m, n, GGML_F32, 1, 4, 2, router, seed++);
        snprintf(n, sizeof n, "blk.%u.ffn_gate_exps.weight", l);
        fx_add_ggml(m, n, GGML_Q4_K, 256, 144, 3, g, seed++);
        snprintf(n, sizeof n, "blk.%u.ffn_up_exps.weight", l);
        fx_add_ggml(m, n, GGML_Q4_K, 256, 144, 3, g, seed++);
        snprintf(n, sizeof n, "blk.%u.ffn_down_exps.weight", l);
        if (mixed && l == 1) /* llama.cpp's _M mixes: down in Q6_K on some layers */
            fx_add_ggml(m, n, GGML_Q6_K, 256, 210, 3, d, seed++);
        else
            fx_add_ggml(m, n, GGML_Q4_K, 256, 144, 3, d, seed++);
    }
    fx_add_ggml(m, "output_norm.weight", GGML_F32, 1, 4, 1, norm, seed++);
}

const fx_kv FX_GGUF_KV[4] = {
    {"general.architecture", "qwen3moe", 0},
    {"general.name", "Tiny MoE", 0},
    {"qwen3moe.expert_count", NULL, 4},
    {"qwen3moe.expert_used_count", NULL, 2},
};

void fx_model_nemotron_h(fx_model *m, int stacked)
{
    /* Nemotron-H: Mamba layers (0, 2) without experts; MoE layers (1, 3)
     * with up and down projections only (no gate), and shared experts. */
    static const uint64_t up[] = {12, 16}, down[] = {16, 12}, sup[] = {4, 12, 16},
                          sdown[] = {4, 16, 12}, router[] = {4, 16}, emb[] = {32, 16},
                          conv[] = {24, 1, 4};
    uint64_t seed = 700;
    fx_add(m, "backbone.embeddings.weight", "BF16", 2, emb, 16, seed++);
    for (uint32_t l = 0; l < 4; l++) {
        char n[160];
        if (l % 2 == 0) {
            snprintf(n, sizeof n, "backbone.layers.%u.mixer.conv1d.weight", l);
            fx_add(m, n, "BF16", 3, conv, 16, seed++);
            continue;
        }
        snprintf(n, sizeof n, "backbone.layers.%u.mixer.gate.weight", l);
        fx_add(m, n, "F32", 2, router, 32, seed++);
        snprintf(n, sizeof n, "backbone.layers.%u.mixer.shared_experts.up_proj.weight", l);
        fx_add(m, n, "BF16", 2, up, 16, seed++);
        snprintf(n, sizeof n, "backbone.layers.%u.mixer.shared_experts.down_proj.weight", l);
        fx_add(m, n, "BF16", 2, down, 16, seed++);
        if (stacked) {
            snprintf(n, sizeof n, "backbone.layers.%u.mixer.experts.up_proj", l);
            fx_add(m, n, "BF16", 3, sup, 16, seed++);
            snprintf(n, sizeof n, "backbone.layers.%u.mixer.experts.down_proj", l);
            fx_add(m, n, "BF16", 3, sdown, 16, seed++);
            continue;
        }
        for (uint32_t e = 0; e < 4; e++) {
            snprintf(n, sizeof n, "backbone.layers.%u.mixer.experts.%u.up_proj.weight", l, e);
            fx_add(m, n, "BF16", 2, up, 16, seed++);
            snprintf(n, sizeof n, "backbone.layers.%u.mixer.experts.%u.down_proj.weight", l, e);
            fx_add(m, n, "BF16", 2, down, 16, seed++);
        }
    }
}

void fx_model_jetmoe(fx_model *m)
{
    /* JetMoE: stacked [experts, out, in] input_linear (gate and up fused)
     * and output_linear; the attention experts (MoA) are not FFN experts. */
    static const uint64_t in[] = {4, 24, 16}, out[] = {4, 16, 12}, moa_in[] = {4, 8, 16},
                          moa_out[] = {4, 16, 8}, router[] = {4, 16}, bias[] = {16};
    uint64_t seed = 800;
    for (uint32_t l = 0; l < 2; l++) {
        char n[160];
        snprintf(n, sizeof n, "model.layers.%u.self_attention.experts.input_linear.weight", l);
        fx_add(m, n, "BF16", 3, moa_in, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.self_attention.experts.output_linear.weight", l);
        fx_add(m, n, "BF16", 3, moa_out, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.router.layer.weight", l);
        fx_add(m, n, "BF16", 2, router, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.bias", l);
        fx_add(m, n, "BF16", 1, bias, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.input_linear.weight", l);
        fx_add(m, n, "BF16", 3, in, 16, seed++);
        snprintf(n, sizeof n, "model.layers.%u.mlp.output_linear.weight", l);
        fx_add(m, n, "BF16", 3, out, 16, seed++);
    }
}

const fx_expect FX_QWEN_EX[3] = {
    {"gate", "model.layers.{L}.mlp.experts.{E}.gate_proj.weight", 0},
    {"up", "model.layers.{L}.mlp.experts.{E}.up_proj.weight", 0},
    {"down", "model.layers.{L}.mlp.experts.{E}.down_proj.weight", 0},
};
const fx_expect FX_MIXTRAL_EX[3] = {
    {"gate", "model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight", 0},
    {"up", "model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight", 0},
    {"down", "model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight", 0},
};
const fx_expect FX_SWITCH_EX[3] = {
    {"gate", "model.layers.{L}.mlp.switch_mlp.gate_proj.weight", 1},
    {"up", "model.layers.{L}.mlp.switch_mlp.up_proj.weight", 1},
    {"down", "model.layers.{L}.mlp.switch_mlp.down_proj.weight", 1},
};
const fx_expect FX_GPT_OSS_EX[4] = {
    {"gate_up", "model.layers.{L}.mlp.experts.gate_up_proj", 1},
    {"gate_up.bias", "model.layers.{L}.mlp.experts.gate_up_proj_bias", 1},
    {"down", "model.layers.{L}.mlp.experts.down_proj", 1},
    {"down.bias", "model.layers.{L}.mlp.experts.down_proj_bias", 1},
};
const fx_expect FX_MLX_EX[9] = {
    {"gate", "model.layers.{L}.mlp.switch_mlp.gate_proj.weight", 1},
    {"gate.scales", "model.layers.{L}.mlp.switch_mlp.gate_proj.scales", 1},
    {"gate.biases", "model.layers.{L}.mlp.switch_mlp.gate_proj.biases", 1},
    {"up", "model.layers.{L}.mlp.switch_mlp.up_proj.weight", 1},
    {"up.scales", "model.layers.{L}.mlp.switch_mlp.up_proj.scales", 1},
    {"up.biases", "model.layers.{L}.mlp.switch_mlp.up_proj.biases", 1},
    {"down", "model.layers.{L}.mlp.switch_mlp.down_proj.weight", 1},
    {"down.scales", "model.layers.{L}.mlp.switch_mlp.down_proj.scales", 1},
    {"down.biases", "model.layers.{L}.mlp.switch_mlp.down_proj.biases", 1},
};
const fx_expect FX_GGUF_EX[3] = {
    {"gate", "blk.{L}.ffn_gate_exps.weight", 1},
    {"up", "blk.{L}.ffn_up_exps.weight", 1},
    {"down", "blk.{L}.ffn_down_exps.weight", 1},
};

void fx_name(char *out, size_t n, const char *tmpl, uint32_t l, uint32_t e)
{
    size_t k = 0;
    for (const char *p = tmpl; *p && k + 12 < n;) {
        if (!strncmp(p, "{L}", 3) || !strncmp(p, "{E}", 3)) {
            k += (size_t)snprintf(out + k, n - k, "%" PRIu32, p[1] == 'L' ? l : e);
            p += 3;
        } else {
            out[k++] = *p++;
        }
    }
    out[k] = 0;
}
