/*
 * park_linux.c - parking on a word with the futex system call (park.h).
 *
 * The kernel compares *addr with the expected value atomically with going
 * to sleep, so a waker that changes the word before calling wake can never
 * be missed.
 */
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "park.h"

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
