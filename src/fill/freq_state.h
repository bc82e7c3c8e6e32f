/*
 * freq_state.h - the popularity histogram's state (freq.h), embedded in
 * struct smoe_stream: plain data below internal.h, so that the stream
 * object includes no header of the code that runs on it.
 */
#ifndef SMOE_FREQ_STATE_H
#define SMOE_FREQ_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SMOE__FREQ_MAGIC "\x89SFREQ\r\n"
#define SMOE__FREQ_VERSION 1u
#define SMOE__FREQ_HEADER_SIZE 64u

typedef struct smoe__freq {
    _Atomic uint64_t *count;   /* layers x experts, 64-byte aligned; NULL until open */
    size_t n;
    char *path;                /* the file; NULL when off */
    int status;                /* SMOE_FREQ_*: what open found */
    int saving;                /* SMOE_FREQ_SAVE_* */
    int lock_init;
    pthread_mutex_t save_lock; /* serialises saves (never taken on the hot path) */
    _Atomic uint64_t saves, save_errors;
} smoe__freq;

/* What the file is bound to: the vault's shape and identity. */
typedef struct smoe__freq_id {
    uint32_t layers, experts;
    uint64_t vault_id;   /* the vault's header checksum */
    uint64_t vault_size; /* the vault's file size */
} smoe__freq_id;

#endif
