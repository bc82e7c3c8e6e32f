/* alloc.c - see alloc.h. */
#include <stdatomic.h>
#include <stdlib.h>

#include "alloc.h"
#include "platform/aligned.h"

/* Set by tests while no stream is open; read at every counted allocation. */
static _Atomic uint64_t calls, fail_nth;
static atomic_int fail_from;

int smoe__alloc_refused(void)
{
    /* relaxed: a test's failure point; no data depends on the count */
    uint64_t n = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) + 1;
    uint64_t at = atomic_load_explicit(&fail_nth, memory_order_relaxed);
    return at && (n == at ||
                  (n > at && atomic_load_explicit(&fail_from, memory_order_relaxed)));
}

void *smoe__malloc(size_t n)
{
    return smoe__alloc_refused() ? NULL : malloc(n);
}

void *smoe__calloc(size_t n, size_t size)
{
    return smoe__alloc_refused() ? NULL : calloc(n, size);
}

void *smoe__realloc(void *p, size_t n)
{
    return smoe__alloc_refused() ? NULL : realloc(p, n);
}

void *smoe__aligned_alloc(size_t align, size_t n)
{
    return smoe__alloc_refused() ? NULL : smoe__os_aligned_alloc(align, n);
}

void smoe__aligned_free(void *p)
{
    smoe__os_aligned_free(p);
}

void smoe__alloc_fail(uint64_t nth, int from)
{
    /* relaxed: set while no other thread allocates (see alloc.h) */
    atomic_store_explicit(&fail_nth, 0, memory_order_relaxed);
    atomic_store_explicit(&calls, 0, memory_order_relaxed);
    atomic_store_explicit(&fail_from, from, memory_order_relaxed);
    atomic_store_explicit(&fail_nth, nth, memory_order_relaxed);
}

uint64_t smoe__alloc_calls(void)
{
    /* relaxed: read by the test after the allocations it counts returned */
    return atomic_load_explicit(&calls, memory_order_relaxed);
}
