/* aligned_posix.c - aligned_alloc, released by free (aligned.h). */
#include <stdlib.h>

#include "aligned.h"

void *smoe__os_aligned_alloc(size_t align, size_t n)
{
    return aligned_alloc(align, n);
}

void smoe__aligned_free(void *p)
{
    free(p);
}
