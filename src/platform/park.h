/*
 * park.h - parking a thread on a 32-bit word until another thread wakes it:
 * futex on Linux (park_linux.c), __ulock on macOS (park_darwin.c), a short
 * sleep elsewhere (park_generic.c). No mutex, no condition variable. Used
 * by idle workers, the pre-warm thread and smoe_claim_wait. And the clock
 * (clock_posix.c) and a spin loop's pause.
 */
#ifndef SMOE_PARK_H
#define SMOE_PARK_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Sleep while *addr == expected, at most timeout_ns (UINT64_MAX: no
 * limit). May return early (spuriously, on a signal, or on wake): callers
 * re-check their condition.
 */
void smoe__park_wait(const void *addr, uint32_t expected, uint64_t timeout_ns);
/* Wake up to n threads parked on addr (n = INT32_MAX: all). */
void smoe__park_wake(const void *addr, int n);

/* The address of the low 32 bits of a 64-bit atomic word. */
static inline const void *smoe__low32(const _Atomic uint64_t *w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (const char *)w + 4;
#else
    return w;
#endif
}

/* Monotonic clock in nanoseconds. */
uint64_t smoe__now_ns(void);

/* A pause instruction for spin loops. */
static inline void smoe__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
