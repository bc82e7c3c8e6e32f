/*
 * expert_name.c - expert tensor names (blk.N.ffn_{gate,up,down,gate_up}
 * _exps.{weight,bias}) to layer and vault component.
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <string.h>

#include "expert_name.h"

const char *const sl_kind_component[SL_KINDS] = {
    "gate", "up", "down", "gate_up", "gate.bias", "up.bias", "down.bias", "gate_up.bias"};
static const char *const kind_tensor[SL_BASE_KINDS] = {"gate", "up", "down", "gate_up"};

int sl_parse_name(const char *name, uint32_t *layer, int *kind)
{
    unsigned l;
    int n = 0;
    if (sscanf(name, "blk.%u.ffn_%n", &l, &n) != 1 || n == 0)
        return -1;
    const char *p = name + n;
    for (int k = 0; k < SL_BASE_KINDS; k++) {
        size_t kl = strlen(kind_tensor[k]);
        if (strncmp(p, kind_tensor[k], kl) || strncmp(p + kl, "_exps.", 6))
            continue;
        const char *suf = p + kl + 6;
        if (!strcmp(suf, "weight") || !strcmp(suf, "bias")) {
            *layer = l;
            *kind = k + (suf[0] == 'b' ? SL_BASE_KINDS : 0);
            return 0;
        }
    }
    return -1;
}
