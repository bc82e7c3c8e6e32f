/* aligned_win32.c - the C library's _aligned_malloc, released by
 * _aligned_free (aligned.h). */
#include <malloc.h>

#include "aligned.h"

void *smoe__os_aligned_alloc(size_t align, size_t n)
{
    return _aligned_malloc(n, align);
}

void smoe__aligned_free(void *p)
{
    _aligned_free(p);
}
