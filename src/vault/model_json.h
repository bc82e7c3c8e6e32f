/*
 * model_json.h - a small strict JSON scanner for a safetensors header
 * (model_st.c): it walks the text in place, keeps no tree, and says what
 * is wrong and at which byte through the model_hdr's why. Strings are
 * given as their raw bytes between the quotes (escapes checked, not
 * decoded); numbers are read only as non-negative integers.
 */
#ifndef SMOE_MODEL_JSON_H
#define SMOE_MODEL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "vault/model_hdr.h"

typedef struct smoe__jcur {
    const uint8_t *p; /* the JSON text */
    size_t n;         /* its bytes */
    size_t i;         /* the next byte */
    smoe__model_hdr *h;
} smoe__jcur;

/* Record what is wrong at the current byte; returns SMOE_EFORMAT. */
int smoe__json_fail(smoe__jcur *c, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Whitespace, then the byte ch ('{' or '['). 0 or SMOE_EFORMAT. */
int smoe__json_open(smoe__jcur *c, char ch);
/* Inside an object or array closed by `close`: 1 when another member
 * follows (its comma consumed unless *first), 0 when the container closed
 * or on an error (*rc set). */
int smoe__json_more(smoe__jcur *c, char close, int *first, int *rc);
/* A string: its raw bytes [*s, *s + *n). */
int smoe__json_string(smoe__jcur *c, const uint8_t **s, size_t *n);
/* An object's key and its colon. */
int smoe__json_key(smoe__jcur *c, const uint8_t **s, size_t *n);
/* An array of at most max non-negative integers into out; *got of them. */
int smoe__json_u64_array(smoe__jcur *c, uint64_t *out, uint32_t max, uint32_t *got,
                         const char *what);
/* Any value, nested at most a few levels below depth. */
int smoe__json_skip(smoe__jcur *c, int depth);
/* An object whose values are all strings. */
int smoe__json_string_object(smoe__jcur *c);
/* Nothing but whitespace left. */
int smoe__json_end(smoe__jcur *c);

#endif
