/*
 * trace_rec.h - recording the demand prefetches of a live stream as a trace
 * (docs/trace-format.md), so users capture their own engine's routing.
 *
 * smoe__trace_rec_add() is called on the prefetch hot path: it appends to a
 * pre-allocated in-memory buffer with atomic operations only (no lock, no
 * allocation, no system call); a background thread writes the buffer out.
 * When the writer falls behind and the buffer is full, records are dropped
 * and counted, never waited for.
 */
#ifndef SMOE_TRACE_REC_H
#define SMOE_TRACE_REC_H

#include <stdint.h>

typedef struct smoe__trace_rec smoe__trace_rec;

/* Start recording to path (header comments name the vault's shape). */
int smoe__trace_rec_open(smoe__trace_rec **out, const char *path, uint32_t layers,
                         uint32_t experts, uint32_t top_k, const char *model);
/* Record one demand prefetch. Any thread; lock-free. */
void smoe__trace_rec_add(smoe__trace_rec *t, uint32_t layer, uint32_t expert);
/* Flush what is buffered, stop and join the writer, close, free. NULL ok. */
void smoe__trace_rec_close(smoe__trace_rec *t);
/* As smoe__trace_rec_open with a buffer of cap records (a power of two);
 * for tests, which need a small buffer to see records dropped. */
int smoe__trace_rec_open_cap(smoe__trace_rec **out, const char *path, uint32_t layers,
                             uint32_t experts, uint32_t top_k, const char *model,
                             uint32_t cap);
/* Records dropped because the buffer was full. */
uint64_t smoe__trace_rec_dropped(const smoe__trace_rec *t);

#endif
