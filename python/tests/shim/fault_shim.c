/*
 * fault_shim.c - a test-only build of libsmoe_stream with the fault seam
 * (tests/fault_io.c) reachable from Python through ctypes.
 *
 * libsmoe_stream_pyfault.so holds the library's objects, which export the
 * public smoe_* functions as the real library does, plus the functions
 * below. It is built for the Python tests only and never installed: the
 * public ABI has no fault hooks. A test loads it through
 * SMOE_STREAM_LIBRARY in a process of its own.
 */
#include "fault_io.h"

#define SHIM_API __attribute__((visibility("default")))

SHIM_API void pyfault_install(void);
SHIM_API void pyfault_remove(void);
SHIM_API void pyfault_arm(int mode, int call, unsigned long long nth, int err,
                          unsigned long long arg);
SHIM_API void pyfault_fail_offset(unsigned long long offset, int err);
SHIM_API void pyfault_disarm(void);
SHIM_API void pyfault_hold(int on);
SHIM_API unsigned long long pyfault_fired(void);
SHIM_API int pyfault_holding(void);

static struct fault_io F;

void pyfault_install(void)
{
    fault_io_install(&F);
}

void pyfault_remove(void)
{
    fault_io_remove();
}

void pyfault_arm(int mode, int call, unsigned long long nth, int err, unsigned long long arg)
{
    fault_io_arm(&F, (enum fio_mode)mode, (enum fio_call)call, nth, err, arg);
}

void pyfault_fail_offset(unsigned long long offset, int err)
{
    atomic_store(&F.offset, offset);
    atomic_store(&F.err, err);
    atomic_store(&F.call, FIO_PREAD);
    atomic_store(&F.mode, FIO_FAIL_OFFSET);
}

void pyfault_disarm(void)
{
    fault_io_disarm(&F);
}

void pyfault_hold(int on)
{
    atomic_store(&F.hold, on);
}

unsigned long long pyfault_fired(void)
{
    return atomic_load(&F.fired);
}

/* 1 while a worker's pread is held (pyfault_hold): its read has started. */
int pyfault_holding(void)
{
    return atomic_load(&F.holding);
}
