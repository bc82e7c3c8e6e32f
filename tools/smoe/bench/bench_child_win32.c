/*
 * bench_child_win32.c - bench_child.h on Windows: no fork, so each mode
 * runs in this process when it is started, one after another. A mode's
 * peak working set (bench_result.peak_rss) is then the process's peak so
 * far, not its own.
 */
#include <string.h>

#include "bench_child.h"

int bench_child_start(bench_child *c, const bench_env *env, bench_mode mode, uint64_t memory,
                      bench_child_fn fn, bench_result *r)
{
    (void)r;
    memset(c, 0, sizeof *c);
    c->env = env;
    c->mode = mode;
    c->memory = memory;
    c->fn = fn;
    return 0;
}

void bench_child_finish(bench_child *c, int limited, bench_result *r)
{
    (void)limited; /* no cgroups here */
    c->fn(c->env, c->mode, c->memory, r);
}
