/*
 * pack_fixtures.h - small model checkpoints written by the tests themselves
 * (safetensors and GGUF files with known bytes), for tests/test_pack.c.
 */
#ifndef SMOE_PACK_FIXTURES_H
#define SMOE_PACK_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

/* One tensor of a fixture. data is owned by the fixture (fx_free). */
typedef struct fx_tensor {
    char name[160];
    char dtype[16];        /* safetensors dtype ("BF16") */
    uint32_t ggml_type;    /* GGUF: ggml type */
    uint32_t ndim;
    uint64_t shape[8];     /* outermost first (GGUF writes it reversed) */
    uint8_t *data;
    uint64_t nbytes;
    /* Overrides for bad-input tests. */
    int64_t begin_override, end_override; /* safetensors data_offsets; -1: none */
    int64_t offset_override;              /* GGUF offset; -1: none */
} fx_tensor;

typedef struct fx_model {
    fx_tensor *t;
    size_t n, cap;
} fx_model;

/* Deterministic bytes: fill buf from a seed. */
void fx_fill(uint8_t *buf, size_t n, uint64_t seed);

/* Append a tensor with dtype, shape (ndim dims) and element size (bits),
 * data filled from seed. Returns it for tweaks. */
fx_tensor *fx_add(fx_model *m, const char *name, const char *dtype, uint32_t ndim,
                  const uint64_t *shape, uint32_t bits, uint64_t seed);
/* Append a GGUF tensor of ggml type with block size blk and block bytes. */
fx_tensor *fx_add_ggml(fx_model *m, const char *name, uint32_t type, uint32_t blk,
                       uint32_t blk_bytes, uint32_t ndim, const uint64_t *shape,
                       uint64_t seed);
const fx_tensor *fx_find(const fx_model *m, const char *name);
void fx_free(fx_model *m);

/* Write m as one safetensors file (tensors [first, first+count) of m);
 * header_override replaces the JSON header when non-NULL. 0 on success. */
int fx_write_st(const char *path, const fx_model *m, size_t first, size_t count,
                const char *header_override);

/* As fx_write_st, the header padded with spaces to a length of pad_to
 * modulo 8 (-1: to a multiple of 8, as the format asks): an odd pad_to
 * puts the data, and every tensor, at odd offsets. */
int fx_write_st_pad(const char *path, const fx_model *m, size_t first, size_t count,
                    const char *header_override, int pad_to);

/* A GGUF key-value: string or u32. */
typedef struct fx_kv {
    const char *key;
    const char *str;   /* non-NULL: a string */
    uint32_t u32;
} fx_kv;

/* Write m as a GGUF v3 file with the key-values kv[0..nkv) plus a string
 * array (a tokenizer stand-in); alignment 0 means the default 32. */
int fx_write_gguf(const char *path, const fx_model *m, const fx_kv *kv, size_t nkv,
                  uint32_t alignment);

/* The model families tests/test_pack.c and tests/test_index.c write. */
/* Qwen3-MoE style: layer 0 dense, layers 1-2 with `experts` experts each,
 * gate [8, 16], up [8, 16], down [16, 8] bf16, one tensor per expert. */
void fx_model_qwen(fx_model *m, uint32_t experts);
/* Mixtral: 2 layers x 8 experts, w1/w3 [8, 16], w2 [16, 8] f16. Returns
 * where to split it into two shards (layer 1's experts straddle them). */
size_t fx_model_mixtral(fx_model *m);
/* mlx-lm switch_mlp: 3 layers, 6 experts stacked, bf16. */
void fx_model_switch_mlp(fx_model *m);
/* gpt-oss style fused gate_up and down, with biases: 2 layers x 4. */
void fx_model_gpt_oss(fx_model *m);
/* mlx 4-bit, group 32: U32 weights with .scales and .biases, 2 layers x 4. */
void fx_model_mlx(fx_model *m);
/* GGUF: 2 layers x 4 experts, Q4_K gate/up/down (layer 1's down Q6_K
 * when mixed), with FX_GGUF_KV. */
void fx_model_gguf(fx_model *m, int mixed);
extern const fx_kv FX_GGUF_KV[4];
/* NVIDIA Nemotron-H: Mamba layers 0 and 2, MoE layers 1 and 3 of 4
 * experts with up [12, 16] and down [16, 12] only; per expert
 * (backbone.layers.L.mixer.experts.E.up_proj.weight) or stacked
 * (...mixer.experts.up_proj). */
void fx_model_nemotron_h(fx_model *m, int stacked);
/* JetMoE: 2 layers x 4 experts, stacked mlp.input_linear.weight
 * [4, 24, 16] (gate and up) and mlp.output_linear.weight [4, 16, 12],
 * plus attention experts that are no FFN experts. */
void fx_model_jetmoe(fx_model *m);

/* How a component maps to a model's tensors: {L} and {E} in the name;
 * stacked: the expert is the tensor's outermost dimension. */
typedef struct fx_expect {
    const char *comp;
    const char *tensor; /* name template */
    int stacked;
} fx_expect;
extern const fx_expect FX_QWEN_EX[3], FX_MIXTRAL_EX[3], FX_SWITCH_EX[3], FX_GPT_OSS_EX[4],
    FX_MLX_EX[9], FX_GGUF_EX[3];
/* A template's {L} and {E} replaced by layer and expert, into out. */
void fx_name(char *out, size_t n, const char *tmpl, uint32_t layer, uint32_t expert);

/* Write text to path. */
int fx_write_text(const char *path, const char *text);
/* Read a whole file (malloc'd); NULL on failure. */
uint8_t *fx_read_all(const char *path, size_t *n);
/* Cut path to n bytes. */
int fx_truncate(const char *path, uint64_t n);

#endif
