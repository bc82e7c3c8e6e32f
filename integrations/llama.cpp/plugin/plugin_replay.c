/*
 * plugin_replay.c - SMOE_REPLAY=TRACE, for measurement only: the routing
 * ids of every node that reads an expert tensor are overwritten with a
 * recorded trace's experts (replay.c reads it) before the experts are
 * claimed and computed, so that a model with random weights streams like
 * a real one. The model's outputs then differ from stock llama.cpp's: a
 * benchmark setting, never one to serve with.
 *
 * Each MoE layer counts its own replay tokens: the first node of layer l
 * in a graph part takes the next ubatch-rows tokens of that layer (trace
 * token t mod the trace's tokens), and the layer's other nodes of the same
 * part (gate, up, down, biases), which read the same ids tensor, find it
 * written already. The scheduler gives a MoE layer's expert nodes to one
 * graph part (they and the GLU between them are all this backend's).
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../replay.h"
#include "plugin.h"

static struct {
    sl_replay *r;
    const char *path;
    uint32_t layers, k;
    uint64_t tokens;
    uint64_t *next;    /* [layers]: the layer's next replay token */
    uint64_t *part_of; /* [layers]: the graph part (sp_g.graphs) that last wrote it */
} rp;

int sp_replay_init(const char *path)
{
    char err[768];
    if (sl_replay_read(path, &rp.r, err, sizeof err) < 0) {
        snprintf(sp_g.err, sizeof sp_g.err, "SMOE_REPLAY: %s", err);
        return -1;
    }
    sl_replay_shape(rp.r, &rp.layers, &rp.k, &rp.tokens);
    rp.next = calloc(rp.layers, sizeof *rp.next);
    rp.part_of = calloc(rp.layers, sizeof *rp.part_of);
    if (!rp.next || !rp.part_of) {
        snprintf(sp_g.err, sizeof sp_g.err, "SMOE_REPLAY=%s: out of memory", path);
        return -1;
    }
    rp.path = path;
    fprintf(stderr, "smoe: SMOE_REPLAY=%s: routing replayed from a trace of %" PRIu64
            " tokens, %" PRIu32 " layers, top-%" PRIu32 " (measurement only: outputs are not "
            "the model's)\n", path, rp.tokens, rp.layers, rp.k);
    return 0;
}

int sp_replay_on(void)
{
    return rp.r != NULL;
}

uint64_t sp_replay_tokens(void)
{
    return rp.next ? rp.next[0] : 0;
}

int sp_replay_node(struct ggml_tensor *ids, uint32_t layer)
{
    if (!rp.r)
        return 0;
    int64_t k = ids->ne[0];
    if (layer >= rp.layers || k != (int64_t)rp.k) {
        sp_log_error("SMOE_REPLAY=%s: the trace has %" PRIu32 " layers of top-%" PRIu32
                     ", the model's layer %" PRIu32 " routes to %" PRId64 " experts",
                     rp.path, rp.layers, rp.k, layer, k);
        return -1;
    }
    if (rp.part_of[layer] == sp_g.graphs)
        return 0; /* this part wrote the layer's ids already */
    rp.part_of[layer] = sp_g.graphs;
    int32_t e[64];
    for (int64_t t = 0; t < ids->ne[1]; t++) {
        sl_replay_get(rp.r, rp.next[layer] + (uint64_t)t, layer, e, rp.k);
        for (int64_t j = 0; j < k; j++) {
            if (e[j] < 0 || (uint32_t)e[j] >= sp_g.n_expert) {
                sp_log_error("SMOE_REPLAY=%s: expert %" PRId32 " of layer %" PRIu32
                             " is not below the vault's %" PRIu32 " experts", rp.path, e[j],
                             layer, sp_g.n_expert);
                return -1;
            }
            memcpy((char *)ids->data + t * ids->nb[1] + j * ids->nb[0], &e[j], sizeof e[j]);
        }
    }
    rp.next[layer] += (uint64_t)ids->ne[1];
    return 0;
}

void sp_replay_free(void)
{
    sl_replay_free(rp.r);
    free(rp.next);
    free(rp.part_of);
    memset(&rp, 0, sizeof rp);
}
