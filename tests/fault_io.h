/*
 * fault_io.h - a smoe__io table for tests: passes every call to the OS and
 * can fail, shorten, interrupt, delay or hold chosen calls, kill the process
 * at one, refuse unnamed files and run a hook before every open, and
 * records the offsets of the reads it saw.
 *
 * Counting: every call increments its class's counter and the total; a
 * fault aimed at the Nth call of a class (or, with FIO_ANY, the Nth call of
 * any class) fires on exactly that call, whichever thread makes it. The
 * settings may be changed while streams run (they are atomics); a test sets
 * the other fields first and `mode` last.
 */
#ifndef SMOE_TEST_FAULT_IO_H
#define SMOE_TEST_FAULT_IO_H

#include <stdatomic.h>
#include <stdint.h>

#include "smoe_tier.h"

enum fio_call { FIO_OPEN, FIO_CLOSE, FIO_PREAD, FIO_PWRITE, FIO_FSYNC, FIO_RENAME,
                FIO_UNLINK, FIO_SIZE, FIO_STAT, FIO_LINK, FIO_NCALLS,
                FIO_ANY = FIO_NCALLS /* `call`: count calls of every class together */ };

enum fio_mode {
    FIO_OFF = 0,
    FIO_FAIL_ONCE,       /* the Nth call of `call` fails with err, once */
    FIO_FAIL_FROM,       /* the Nth call and every later one fail */
    FIO_SHORT,           /* reads/writes from the Nth on move at most `short_bytes` */
    FIO_SHORT_ONCE,      /* only the Nth read/write moves at most `short_bytes` */
    FIO_EINTR_ALL,       /* every call of `call` returns -EINTR once before it is made
                          * (close: after it is made, as Linux does) */
    FIO_FAIL_OFFSET,     /* preads at file offset `offset` fail with err (persistent) */
    FIO_FAIL_RANDOM,     /* each call of `call` fails with err with probability nth/1000 */
    FIO_KILL             /* the Nth call of `call` kills the process (SIGKILL) before it
                          * is made: kill -9 at a chosen point */
};

struct fault_io {
    smoe__io io;                 /* first: the table handed to smoe__io_set */
    _Atomic int mode;            /* enum fio_mode */
    _Atomic int call;            /* enum fio_call */
    _Atomic uint64_t nth;        /* 1-based */
    _Atomic int err;             /* positive errno */
    _Atomic uint64_t offset;
    _Atomic uint64_t short_bytes;
    _Atomic uint64_t count[FIO_NCALLS];
    _Atomic uint64_t total;      /* calls of every class */
    _Atomic uint64_t fired;      /* faults injected */
    _Atomic uint64_t rng;        /* FIO_FAIL_RANDOM's sequence */
    _Atomic int hold;            /* while set, preads wait (to queue work behind a busy worker) */
    _Atomic int holding;         /* a pread is currently held */
    _Atomic uint32_t delay_us;   /* added to every pread */
    _Atomic int refuse_direct;   /* 1: direct opens fail EINVAL; 2: their preads do */
    /* Nonzero: direct I/O emulated on any file system, as O_DIRECT behaves
     * on Linux: direct opens are made without O_DIRECT, and their preads
     * whose offset, length or buffer is not a multiple of this many bytes
     * fail with EINVAL (checked after an injected fault, before a short
     * read is cut). */
    _Atomic uint32_t fake_direct;
    _Atomic int open_fds;        /* descriptors opened through this table, not yet closed */
    _Atomic unsigned char direct_fd[1024];
    _Atomic uint64_t log[4096];  /* offsets of preads, in order */
    _Atomic uint64_t log_thread[4096]; /* the calling thread of each */
    _Atomic uint32_t nlog;
    _Atomic int refuse_tmpfile;  /* unnamed-file opens fail EOPNOTSUPP (no O_TMPFILE) */
    /* Called at every open before it is made (set it before streams open). */
    void (*on_open)(struct fault_io *f, const char *path, unsigned flags);
    void *on_open_arg;
    /* Faults aimed at one file (a vault's replica): the descriptors opened
     * on path `target` (set before streams open). While target_fail is set
     * their preads fail with EIO; target_delay_us is added to each, and
     * with target_serial set they are served one at a time, as a drive
     * of bounded bandwidth serves them. */
    const char *target;
    _Atomic int target_serial;
    _Atomic int target_fail;
    _Atomic uint32_t target_delay_us;
    _Atomic uint64_t target_reads;   /* preads of target's descriptors */
    _Atomic uint64_t target_fired;   /* of which failed */
    _Atomic unsigned char target_fd[1024];
};

/* Reset f to pass-through and install it. */
void fault_io_install(struct fault_io *f);
/* Restore the OS table. */
void fault_io_remove(void);
/* Set a fault: fail (FIO_FAIL_*) or shorten (FIO_SHORT*) the nth call of
 * `call`, with errno err (failures) or to `arg` bytes (short reads). Counts
 * and `fired` restart from 0. */
void fault_io_arm(struct fault_io *f, enum fio_mode mode, enum fio_call call, uint64_t nth,
                  int err, uint64_t arg);
/* Back to pass-through; counts are kept. */
void fault_io_disarm(struct fault_io *f);

#endif
