/*
 * dtype.c - names and byte sizes of component element types.
 *
 * Three ranges (include/smoe/smoe.h): plain element types 1..63, ggml types
 * at 0x100 + t numbered exactly as ggml's enum ggml_type, and mlx packed
 * quantisation at 0x200. Sizes follow docs/vault-format.md: plain types are
 * elements x element size; block types (ggml quantisations, F4, F6) hold a
 * fixed number of elements per block along the innermost dimension, so that
 * dimension must be a whole number of blocks; mlx packed components are
 * sized by their U32 word shape.
 */
#include <stddef.h>
#include <stdint.h>

#include "smoe/smoe.h"
#include "vault/vault.h"

typedef struct dtype_info {
    const char *name;
    uint32_t block;       /* elements per block (1 for plain element types) */
    uint32_t block_bytes; /* bytes per block */
} dtype_info;

/* Plain element types, indexed by SMOE_DTYPE_* value. */
static const dtype_info plain_types[] = {
    [SMOE_DTYPE_BOOL] = {"bool", 1, 1},
    [SMOE_DTYPE_U8] = {"u8", 1, 1},
    [SMOE_DTYPE_I8] = {"i8", 1, 1},
    [SMOE_DTYPE_U16] = {"u16", 1, 2},
    [SMOE_DTYPE_I16] = {"i16", 1, 2},
    [SMOE_DTYPE_F16] = {"f16", 1, 2},
    [SMOE_DTYPE_BF16] = {"bf16", 1, 2},
    [SMOE_DTYPE_U32] = {"u32", 1, 4},
    [SMOE_DTYPE_I32] = {"i32", 1, 4},
    [SMOE_DTYPE_F32] = {"f32", 1, 4},
    [SMOE_DTYPE_U64] = {"u64", 1, 8},
    [SMOE_DTYPE_I64] = {"i64", 1, 8},
    [SMOE_DTYPE_F64] = {"f64", 1, 8},
    [SMOE_DTYPE_F8_E4M3] = {"f8_e4m3", 1, 1},
    [SMOE_DTYPE_F8_E5M2] = {"f8_e5m2", 1, 1},
    [SMOE_DTYPE_F8_E8M0] = {"f8_e8m0", 1, 1},
    [SMOE_DTYPE_F4_E2M1] = {"f4_e2m1", 2, 1}, /* two values per byte */
    [SMOE_DTYPE_F6_E2M3] = {"f6_e2m3", 4, 3}, /* four values per three bytes */
    [SMOE_DTYPE_F6_E3M2] = {"f6_e3m2", 4, 3},
    [SMOE_DTYPE_C64] = {"c64", 1, 8},
};

/*
 * ggml types, indexed by enum ggml_type value; names are ggml's own
 * type names. Block sizes and bytes per block are those of ggml's block
 * structs (ggml-common.h). Ids ggml removed (4, 5: Q4_2, Q4_3; 31..33 and
 * 36..38: the repacked Q4_0_x_y and IQ4_NL_x_y layouts) stay unknown.
 */
static const dtype_info ggml_types[] = {
    [0] = {"ggml:f32", 1, 4},
    [1] = {"ggml:f16", 1, 2},
    [2] = {"ggml:q4_0", 32, 18},
    [3] = {"ggml:q4_1", 32, 20},
    [6] = {"ggml:q5_0", 32, 22},
    [7] = {"ggml:q5_1", 32, 24},
    [8] = {"ggml:q8_0", 32, 34},
    [9] = {"ggml:q8_1", 32, 36},
    [10] = {"ggml:q2_K", 256, 84},
    [11] = {"ggml:q3_K", 256, 110},
    [12] = {"ggml:q4_K", 256, 144},
    [13] = {"ggml:q5_K", 256, 176},
    [14] = {"ggml:q6_K", 256, 210},
    [15] = {"ggml:q8_K", 256, 292},
    [16] = {"ggml:iq2_xxs", 256, 66},
    [17] = {"ggml:iq2_xs", 256, 74},
    [18] = {"ggml:iq3_xxs", 256, 98},
    [19] = {"ggml:iq1_s", 256, 50},
    [20] = {"ggml:iq4_nl", 32, 18},
    [21] = {"ggml:iq3_s", 256, 110},
    [22] = {"ggml:iq2_s", 256, 82},
    [23] = {"ggml:iq4_xs", 256, 136},
    [24] = {"ggml:i8", 1, 1},
    [25] = {"ggml:i16", 1, 2},
    [26] = {"ggml:i32", 1, 4},
    [27] = {"ggml:i64", 1, 8},
    [28] = {"ggml:f64", 1, 8},
    [29] = {"ggml:iq1_m", 256, 56},
    [30] = {"ggml:bf16", 1, 2},
    [34] = {"ggml:tq1_0", 256, 54},
    [35] = {"ggml:tq2_0", 256, 66},
    [39] = {"ggml:mxfp4", 32, 17},
    [40] = {"ggml:nvfp4", 64, 36},
    [41] = {"ggml:q1_0", 128, 18},
    [42] = {"ggml:q2_0", 64, 18},
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The table row of dtype, or NULL for unknown values and mlx packed. */
static const dtype_info *lookup(uint32_t dtype)
{
    const dtype_info *d = NULL;
    if (dtype < COUNT_OF(plain_types))
        d = &plain_types[dtype];
    else if (dtype >= SMOE_DTYPE_GGML_BASE &&
             dtype - SMOE_DTYPE_GGML_BASE < COUNT_OF(ggml_types))
        d = &ggml_types[dtype - SMOE_DTYPE_GGML_BASE];
    return d && d->name ? d : NULL;
}

SMOE_API const char *smoe_dtype_name(uint32_t dtype)
{
    if (dtype == SMOE_DTYPE_MLX_PACKED)
        return "mlx_packed";
    const dtype_info *d = lookup(dtype);
    return d ? d->name : "?";
}

/* a * b, or 0 with *ok cleared when it overflows. */
static uint64_t mul_checked(uint64_t a, uint64_t b, int *ok)
{
    if (b != 0 && a > UINT64_MAX / b) {
        *ok = 0;
        return 0;
    }
    return a * b;
}

static int mlx_bits_valid(uint32_t bits)
{
    return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}

uint64_t smoe__dtype_bytes(uint32_t dtype, const uint64_t *shape, uint32_t ndim,
                           uint32_t quant_group, uint32_t quant_bits)
{
    if (!shape || ndim < 1 || ndim > SMOE_MAX_DIMS)
        return 0;
    for (uint32_t i = 0; i < ndim; i++)
        if (shape[i] == 0)
            return 0;
    uint64_t inner = shape[ndim - 1];
    uint64_t block = 1, block_bytes;

    if (dtype == SMOE_DTYPE_MLX_PACKED) {
        /* The shape counts U32 words; each row of `inner` words unpacks to
         * inner * 32 / bits values, a whole number of groups. */
        if (!mlx_bits_valid(quant_bits) || quant_group == 0)
            return 0;
        int ok = 1;
        uint64_t row_bits = mul_checked(inner, 32, &ok);
        if (!ok || row_bits % quant_bits != 0 || (row_bits / quant_bits) % quant_group != 0)
            return 0;
        block_bytes = 4;
    } else {
        const dtype_info *d = lookup(dtype);
        if (!d || quant_group != 0 || quant_bits != 0)
            return 0;
        block = d->block;
        block_bytes = d->block_bytes;
        if (inner % block != 0)
            return 0;
    }

    int ok = 1;
    uint64_t blocks = inner / block;
    for (uint32_t i = 0; i + 1 < ndim; i++)
        blocks = mul_checked(blocks, shape[i], &ok);
    uint64_t bytes = mul_checked(blocks, block_bytes, &ok);
    return ok ? bytes : 0;
}
