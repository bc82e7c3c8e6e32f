/*
 * aligned.h - aligned allocation as the system's C library has it:
 * aligned_alloc and free (aligned_posix.c), _aligned_malloc and
 * _aligned_free on Windows (aligned_win32.c). Through alloc.h only.
 */
#ifndef SMOE_ALIGNED_H
#define SMOE_ALIGNED_H

#include <stddef.h>

/* align: a power of 2; n: a multiple of it. */
void *smoe__os_aligned_alloc(size_t align, size_t n);
/* Release what smoe__os_aligned_alloc returned (smoe__aligned_free, alloc.h). */
void smoe__aligned_free(void *p);

#endif
