/*
 * expert_name.h - the expert tensors of a MoE GGUF and the vault components
 * that hold them (docs/packing.md): shared by smoe-llama and libggml-smoe.
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_EXPERT_NAME_H
#define SMOE_EXPERT_NAME_H

#include <stdint.h>

/* The expert tensor kinds a vault packed from a GGUF holds. */
enum { SL_GATE, SL_UP, SL_DOWN, SL_GATE_UP, SL_BASE_KINDS };
#define SL_KINDS (2 * SL_BASE_KINDS) /* each as .weight and as .bias */

/* Tensor name to (layer, kind); -1 if it is not an expert tensor name. */
int sl_parse_name(const char *name, uint32_t *layer, int *kind);
/* Vault component name of each kind ("gate", ..., "gate_up.bias"). */
extern const char *const sl_kind_component[SL_KINDS];

#endif
