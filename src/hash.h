/*
 * hash.h - the checksums of the file formats (a vault's blobs and header,
 * the popularity histogram, the scout file): XXH3-64 values, stored in
 * xxHash's canonical form (big-endian, XXH64_canonicalFromHash). xxhash.h
 * stays in the .c files that hash (docs/vault-format.md).
 */
#ifndef SMOE_HASH_H
#define SMOE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* XXH3-64 of a payload, as a vault's expert table stores it. */
uint64_t smoe__hash(const void *data, size_t n);
/* Store h at p (8 bytes) in canonical form. */
void smoe__hash_put(unsigned char *p, uint64_t h);
/* The hash stored at p (8 bytes) in canonical form. */
uint64_t smoe__hash_get(const unsigned char *p);

/* A byte range, one part of what a checksum covers. */
typedef struct smoe__bytes {
    const void *p;
    size_t n;
} smoe__bytes;
/*
 * XXH3-64 of n byte ranges taken as one stream (a header's checksummed
 * fields, then the tables after it). The hashing state counts as an
 * allocation (alloc.h). @return 0, or SMOE_ENOMEM when it cannot be had.
 */
int smoe__hash_parts(const smoe__bytes *part, unsigned n, uint64_t *h);

#endif
