/*
 * fault_io.h - a smoe__io table for tests: passes every call to the OS and
 * can fail, shorten, interrupt, delay or hold chosen calls, and records the
 * offsets of the reads it saw.
 */
#ifndef SMOE_TEST_FAULT_IO_H
#define SMOE_TEST_FAULT_IO_H

#include <stdatomic.h>
#include <stdint.h>

#include "io.h"

enum fio_call { FIO_OPEN, FIO_CLOSE, FIO_PREAD, FIO_PWRITE, FIO_FSYNC, FIO_RENAME,
                FIO_UNLINK, FIO_SIZE, FIO_NCALLS };

enum fio_mode {
    FIO_OFF = 0,
    FIO_FAIL_ONCE,       /* the Nth call of `call` fails with err, once */
    FIO_FAIL_FROM,       /* the Nth call and every later one fail */
    FIO_SHORT,           /* reads/writes from the Nth on move at most `short_bytes` */
    FIO_EINTR_ALL,       /* every call of `call` returns -EINTR once before succeeding */
    FIO_FAIL_OFFSET      /* preads at file offset `offset` fail with err (persistent) */
};

struct fault_io {
    smoe__io io;                 /* first: the table handed to smoe__io_set */
    enum fio_mode mode;
    enum fio_call call;
    uint64_t nth;                /* 1-based */
    int err;                     /* positive errno */
    uint64_t offset;
    uint64_t short_bytes;
    _Atomic uint64_t count[FIO_NCALLS];
    _Atomic uint64_t fired;      /* faults injected */
    _Atomic int hold;            /* while set, preads wait (to queue work behind a busy worker) */
    _Atomic int holding;         /* a pread is currently held */
    uint32_t delay_us;           /* added to every pread */
    int refuse_direct;           /* 1: direct opens fail EINVAL; 2: their preads do */
    unsigned char direct_fd[1024];
    _Atomic uint64_t log[4096];  /* offsets of preads, in order */
    _Atomic uint64_t log_thread[4096]; /* the calling thread of each */
    _Atomic uint32_t nlog;
};

/* Reset f to pass-through and install it. */
void fault_io_install(struct fault_io *f);
/* Restore the OS table. */
void fault_io_remove(void);

#endif
