/* clock_win32.c - the monotonic clock (park.h): QueryPerformanceCounter. */
#include <stdint.h>
#include <windows.h>

#include "park.h"

uint64_t smoe__now_ns(void)
{
    static _Atomic uint64_t freq; /* counts per second; fixed at boot */
    LARGE_INTEGER c;
    /* relaxed: every thread computes and stores the same value */
    uint64_t f = atomic_load_explicit(&freq, memory_order_relaxed);
    if (!f) {
        LARGE_INTEGER q;
        QueryPerformanceFrequency(&q);
        f = (uint64_t)q.QuadPart;
        atomic_store_explicit(&freq, f, memory_order_relaxed); /* relaxed: as above */
    }
    QueryPerformanceCounter(&c);
    uint64_t t = (uint64_t)c.QuadPart;
    return t / f * 1000000000ull + t % f * 1000000000ull / f;
}
