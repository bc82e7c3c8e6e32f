/*
 * aligned.h - aligned allocation as the system's C library has it, inline
 * so that every file compiling alloc.c (the fuzz targets too) has it:
 * aligned_alloc and free on POSIX systems; _aligned_malloc and
 * _aligned_free on Windows, whose C library has no aligned_alloc and whose
 * aligned blocks need their own free. Through alloc.h only.
 */
#ifndef SMOE_ALIGNED_H
#define SMOE_ALIGNED_H

#include <stddef.h>
#include <stdlib.h>
#if defined(_WIN32)
#include <malloc.h>
#endif

/* align: a power of 2; n: a multiple of it. */
static inline void *smoe__os_aligned_alloc(size_t align, size_t n)
{
#if defined(_WIN32)
    return _aligned_malloc(n, align);
#else
    return aligned_alloc(align, n);
#endif
}

static inline void smoe__os_aligned_free(void *p)
{
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}

#endif
