/* clock_posix.c - the monotonic clock (park.h): clock_gettime, which the
 * vDSO (Linux) or the commpage (macOS) serves without entering the kernel. */
#include <stdint.h>
#include <time.h>

#include "park.h"

uint64_t smoe__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
