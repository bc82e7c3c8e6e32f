/*
 * model_hdr.h - the header of an index vault's source file, parsed by the
 * library itself at open (docs/security.md): a GGUF's header, key-values
 * and tensor infos, or a safetensors file's 8-byte length and JSON. What
 * it gives: where the header ends (what the vault's header_bytes must be)
 * and where each tensor's data lies, so that no extent can name a byte
 * that is not tensor data of a real model file.
 *
 * The parsers read only the buffer they are given, check every number
 * before using it, and allocate no more than the tensors the buffer holds.
 */
#ifndef SMOE_MODEL_HDR_H
#define SMOE_MODEL_HDR_H

#include <stddef.h>
#include <stdint.h>

/* A tensor's data: file offsets [begin, end), end > begin. */
typedef struct smoe__tspan {
    uint64_t begin, end;
} smoe__tspan;

typedef struct smoe__model_hdr {
    uint64_t header_end; /* the header's bytes (0 until known) */
    smoe__tspan *spans;  /* after a parse: sorted, disjoint; empty tensors left out */
    size_t n, cap;
    uint64_t data_at;    /* where the data section begins (set by the parser) */
    uint32_t pad;        /* each tensor's data padded to this: GGUF's alignment, or 1 */
    int to_eof;          /* the last tensor ends the file (safetensors) */
    char why[320];       /* after a failure: what is wrong, for the caller's message */
} smoe__model_hdr;

/* A parse's answer beside 0 and the negative SMOE_E* codes: the header
 * runs past the buffer, and the file has the bytes (header_end may be set
 * already: a safetensors file says its length in its first 8 bytes). */
#define SMOE__HDR_MORE 1

/*
 * Parse the header of a file of file_size bytes whose first n bytes are b,
 * as kind says (SMOE__V2_KIND_*). @return 0 (h->header_end and h->spans
 * set), SMOE__HDR_MORE, or SMOE_EFORMAT, SMOE_EMAGIC, SMOE_EVERSION,
 * SMOE_ETRUNC, SMOE_ERANGE, SMOE_EOVERFLOW, SMOE_EOVERLAP, SMOE_ENOMEM with
 * h->why saying what (nothing goes to smoe_last_error). Call again with
 * more bytes on a cleared h (smoe__model_hdr_free).
 */
int smoe__model_hdr_parse(uint32_t kind, const uint8_t *b, size_t n, uint64_t file_size,
                          smoe__model_hdr *h);
int smoe__gguf_hdr_parse(const uint8_t *b, size_t n, uint64_t file_size, smoe__model_hdr *h);
int smoe__st_hdr_parse(const uint8_t *b, size_t n, uint64_t file_size, smoe__model_hdr *h);
void smoe__model_hdr_free(smoe__model_hdr *h);

/* For the parsers: record a failure (returns code), add a tensor's data
 * (empty ones are dropped; end <= file size checked by the caller), and
 * sort the spans and refuse any two that overlap. */
int smoe__hdr_fail(smoe__model_hdr *h, int code, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int smoe__hdr_add(smoe__model_hdr *h, uint64_t begin, uint64_t end);
int smoe__hdr_finish(smoe__model_hdr *h);

/* The tensors' data tile the data section as the format's own reader
 * requires: from h->data_at, each tensor's data right after the previous
 * one's (padded to h->pad), and with h->to_eof the last ending the file.
 * No byte between two tensors belongs to none, so the aligned, merged
 * reads of an expert (extent.h) bring no such byte into its slot. After
 * smoe__hdr_finish. 0 or SMOE_EFORMAT. */
int smoe__hdr_tiled(smoe__model_hdr *h, uint64_t file_size);

/* The span holding [off, off + len), or NULL when no one tensor holds it
 * all. h->spans sorted and disjoint. */
const smoe__tspan *smoe__hdr_find(const smoe__model_hdr *h, uint64_t off, uint64_t len);

#endif
