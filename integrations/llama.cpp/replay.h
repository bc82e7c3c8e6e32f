/*
 * replay.h - a recorded routing trace read whole, for routing replay
 * (measurement only): smoe-llama --replay-trace and libggml-smoe's
 * SMOE_REPLAY both route by it instead of by the model's router.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_LLAMA_REPLAY_H
#define SMOE_LLAMA_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_replay sl_replay;

/* Read the trace at path (docs/trace-format.md, uncompressed) into *out.
 * 0, or a negative SMOE_E* code with a message naming the file and line in
 * err[0..n). */
int sl_replay_read(const char *path, sl_replay **out, char *err, size_t n);
void sl_replay_free(sl_replay *r);
/* Write the trace's experts for (token, layer) into ids[0..k); token is
 * taken modulo the trace's tokens. 0, or -1 when the trace has no such
 * layer or another top-k. */
int sl_replay_get(const sl_replay *r, uint64_t token, uint32_t layer, int32_t *ids,
                  uint32_t k);
/* The trace's shape: layers, top-k, tokens. */
void sl_replay_shape(const sl_replay *r, uint32_t *layers, uint32_t *k, uint64_t *tokens);

#endif
