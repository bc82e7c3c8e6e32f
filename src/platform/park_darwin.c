/*
 * park_darwin.c - parking on a word with libSystem's __ulock (park.h).
 *
 * The kernel compares *addr with the expected value atomically with going
 * to sleep, so a waker that changes the word before calling wake can never
 * be missed. The ulock interface is stable since macOS 10.12 and used by
 * libc++ and Swift's runtime; os_sync_wait_on_address is its public
 * successor from macOS 14.4 on.
 */
#include <stdint.h>

#include "park.h"

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
