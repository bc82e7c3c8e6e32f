/*
 * alloc.h - the door every allocation of smoe_open goes through (and those
 * of the vault reader and the histogram), so that a test can make the Nth
 * one fail, as libuv's test-loop-oom does with its replaceable allocator.
 *
 * The functions behave as the C library's; memory is released with free(),
 * and smoe__aligned_alloc's with smoe__aligned_free() (Windows' C library
 * has no aligned_alloc, and its aligned blocks need their own free).
 * Memory the library does not allocate itself (the ring's mapping,
 * xxHash's hashing state) asks smoe__alloc_refused() first, so that the
 * same test reaches those failures too. Never used on the hot path.
 */
#ifndef SMOE_ALLOC_H
#define SMOE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *smoe__malloc(size_t n);
void *smoe__calloc(size_t n, size_t size);
void *smoe__realloc(void *p, size_t n);
void *smoe__aligned_alloc(size_t align, size_t n);
void smoe__aligned_free(void *p);
/* Counts as one allocation: 1 when it is to fail (then fail it). */
int smoe__alloc_refused(void);

/*
 * Tests only: restart the count, and make the nth allocation from now
 * (1-based) fail; with from set, that one and every later one. nth 0: none
 * fails.
 */
void smoe__alloc_fail(uint64_t nth, int from);
/* Allocations counted since the last smoe__alloc_fail. */
uint64_t smoe__alloc_calls(void);

#endif
