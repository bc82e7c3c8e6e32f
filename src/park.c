/*
 * park.c - futex (Linux) and __ulock (macOS) wrappers.
 *
 * Both compare *addr with the expected value inside the kernel, atomically
 * with going to sleep, so a waker that changes the word before calling wake
 * can never be missed.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <time.h>

#include "park.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void smoe__park_wait(const void *addr, uint32_t expected, uint64_t timeout_ns)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns != UINT64_MAX) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
        tsp = &ts;
    }
    /* PRIVATE: the words live in this process only, which saves the kernel
     * a shared-mapping lookup. */
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
}

void smoe__park_wake(const void *addr, int n)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#elif defined(__APPLE__)
/* libSystem's ulock interface (stable since macOS 10.12, used by libc++
 * and Swift's runtime); os_sync_wait_on_address is its public successor
 * from macOS 14.4 on. */
extern int __ulock_wait(uint32_t operation, void *addr, uint64_t value, uint32_t timeout_us);
extern int __ulock_wake(uint32_t operation, void *addr, uint64_t wake_value);
#define SMOE_UL_COMPARE_AND_WAIT 1u
#define SMOE_ULF_WAKE_ALL 0x00000100u
#define SMOE_ULF_NO_ERRNO 0x01000000u

void smoe__park_wait(const void *addr, uint32_t expected, uint64_t timeout_ns)
{
    uint64_t us = timeout_ns == UINT64_MAX ? 0 : timeout_ns / 1000 + 1;
    if (us > UINT32_MAX)
        us = 0; /* 0 means no timeout */
    __ulock_wait(SMOE_UL_COMPARE_AND_WAIT | SMOE_ULF_NO_ERRNO, (void *)addr, expected,
                 (uint32_t)us);
}

void smoe__park_wake(const void *addr, int n)
{
    uint32_t op = SMOE_UL_COMPARE_AND_WAIT | SMOE_ULF_NO_ERRNO;
    if (n > 1)
        op |= SMOE_ULF_WAKE_ALL;
    __ulock_wake(op, (void *)addr, 0);
}

#else
/* No kernel wait-on-address: poll with a short sleep. Correct, not idle-free. */
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
#endif

uint64_t smoe__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
