/*
 * smoe-llama-quantize IN.gguf OUT.gguf TYPE: quantize a GGUF with
 * llama.cpp's llama_model_quantize() (what llama-quantize runs), for the
 * tests' K-quant fixtures. TYPE is a llama_ftype name: Q4_K_M, Q6_K, Q8_0...
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "llama.h"

static const struct { const char *name; enum llama_ftype ftype; } types[] = {
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
    {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},     {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"F16", LLAMA_FTYPE_MOSTLY_F16},       {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
};

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: smoe-llama-quantize IN.gguf OUT.gguf TYPE\n");
        return 2;
    }
    struct llama_model_quantize_params p = llama_model_quantize_default_params();
    size_t i;
    for (i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcasecmp(argv[3], types[i].name))
            break;
    if (i == sizeof types / sizeof types[0]) {
        fprintf(stderr, "smoe-llama-quantize: unknown type %s\n", argv[3]);
        return 2;
    }
    p.ftype = types[i].ftype;
    llama_log_set(quiet, NULL);
    llama_backend_init();
    uint32_t r = llama_model_quantize(argv[1], argv[2], &p);
    llama_backend_free();
    if (r) {
        fprintf(stderr, "smoe-llama-quantize: %s -> %s failed\n", argv[1], argv[2]);
        return 1;
    }
    return 0;
}
