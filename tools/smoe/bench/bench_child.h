/*
 * bench_child.h - one mode of smoe bench run apart from the others: in a
 * child process where the system forks (bench_child_posix.c; a memory
 * cgroup can then hold the child alone), else in this process, one mode
 * after another (bench_child_win32.c: Windows has no fork, and no cgroup
 * to put a child in).
 */
#ifndef SMOE_BENCH_CHILD_H
#define SMOE_BENCH_CHILD_H

#include <stdint.h>

#include "bench.h"

/* The run itself (bench_run.c): fills r. */
typedef void (*bench_child_fn)(const bench_env *env, bench_mode mode, uint64_t memory,
                               bench_result *r);

typedef struct bench_child {
    long pid;             /* the child process; 0 where the run is in this one */
    int go;               /* write end of the start pipe */
    bench_result *shared; /* the child's result */
    const bench_env *env;
    bench_mode mode;
    uint64_t memory;
    bench_child_fn fn;
} bench_child;

/* Make the child of one run, waiting to start; 0, or -1 with why in
 * r->error. */
int bench_child_start(bench_child *c, const bench_env *env, bench_mode mode, uint64_t memory,
                      bench_child_fn fn, bench_result *r);
/* Start it, wait for it, and take its result into r or say in r->error how
 * it ended (limited: it ran in a memory cgroup). */
void bench_child_finish(bench_child *c, int limited, bench_result *r);

#endif
