/*
 * park_win32.c - parking on a word with WaitOnAddress (park.h), Windows 8
 * and later (synchronization library). Like a futex, the system compares
 * the word with the expected value before sleeping, so a waker that changes
 * the word before waking is never missed.
 */
#include <stdint.h>
#include <windows.h>

#include "park.h"

void smoe__park_wait(const void *addr, uint32_t expected, uint64_t timeout_ns)
{
    DWORD ms = INFINITE;
    if (timeout_ns != UINT64_MAX) {
        uint64_t m = (timeout_ns + 999999u) / 1000000u; /* round up: never a busy 0 */
        ms = m >= INFINITE ? INFINITE - 1 : (DWORD)m;
    }
    WaitOnAddress((volatile void *)addr, &expected, sizeof expected, ms);
}

void smoe__park_wake(const void *addr, int n)
{
    if (n == 1)
        WakeByAddressSingle((void *)addr);
    else if (n > 0)
        WakeByAddressAll((void *)addr);
}
