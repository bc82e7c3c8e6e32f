/*
 * park_generic.c - parking on a word where the kernel has no wait on an
 * address (park.h): poll with a short sleep. Correct, not idle-free.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "park.h"

void smoe__park_wait(const void *addr, uint32_t expected, uint64_t timeout_ns)
{
    if (atomic_load((const _Atomic uint32_t *)addr) != expected)
        return;
    uint64_t ns = timeout_ns < 200000 ? timeout_ns : 200000;
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
}

void smoe__park_wake(const void *addr, int n)
{
    (void)addr;
    (void)n;
}
