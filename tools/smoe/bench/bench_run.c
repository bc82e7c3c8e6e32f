/*
 * bench_run.c - run each mode apart (bench_child.h: a child process, inside
 * a memory cgroup when asked) and bring its result back: the dispatcher
 * above the mode loops of bench_smoe.c and bench_os.c.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bench_child.h"

/* The recall of the next smoe+recall run (bench_run_recall); the child
 * inherits it. */
static double run_recall;

static void run_in_child(const bench_env *env, bench_mode mode, uint64_t memory, bench_result *r)
{
    if (mode == BENCH_SMOE_HINT)
        r->recall = run_recall;
    if (mode == BENCH_SMOE || mode == BENCH_SMOE_SPEC || mode == BENCH_SMOE_LRU ||
        mode == BENCH_SMOE_REUSE || mode == BENCH_SMOE_HINT)
        bench_run_smoe(env, mode == BENCH_SMOE_SPEC, memory, r);
    else
        bench_run_os(env, mode, memory, r);
}

uint64_t bench_cgroup_limit(const bench_env *env, uint64_t memory)
{
    uint64_t limit = memory + BENCH_PROCESS_SLACK;
    if (env->cfg->cache_only) /* the per-layer read buffers come on top */
        limit += (uint64_t)env->max_k * env->slot_bytes;
    return limit;
}

/* The page-cache modes' cgroup, when asked for and it can be made: 1, else
 * 0 with the reason on stderr (the mode then runs unlimited). */
static int make_cgroup(const bench_env *env, bench_mode mode, uint64_t memory, bench_cgroup *cg)
{
    char err[512];
    if (!env->cfg->use_cgroup || (mode != BENCH_PAGECACHE && mode != BENCH_MMAP))
        return 0;
    if (bench_cgroup_create(cg, bench_cgroup_limit(env, memory), err, sizeof err) == 0)
        return 1;
    fprintf(stderr, "smoe bench: %s: running %s without a memory limit\n", err,
            bench_mode_name(mode));
    return 0;
}

void bench_run_mode(const bench_env *env, bench_mode mode, uint64_t memory, bench_result *r)
{
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->memory = memory;
    char err[512];
    int dropped = 0;
    if (env->cfg->drop_caches) {
        if (bench_drop_caches(err, sizeof err) == 0)
            dropped = 1;
        else
            fprintf(stderr, "smoe bench: %s\n", err);
    }
    bench_cgroup cg;
    int limited = make_cgroup(env, mode, memory, &cg);
    bench_child c;
    if (bench_child_start(&c, env, mode, memory, run_in_child, r) == 0) {
        if (limited && bench_cgroup_attach(&cg, (int)c.pid, err, sizeof err) < 0) {
            fprintf(stderr, "smoe bench: %s: running %s without a memory limit\n", err,
                    bench_mode_name(mode));
            bench_cgroup_remove(&cg);
            limited = 0;
        }
        bench_child_finish(&c, limited, r);
        r->caches_dropped = dropped;
        r->memory_limited = limited;
        if (limited) {
            r->cgroup_limit = bench_cgroup_limit(env, memory);
            r->cgroup_peak = bench_cgroup_peak(&cg);
        }
    }
    if (limited)
        bench_cgroup_remove(&cg);
}

void bench_run_recall(const bench_env *env, double recall, uint64_t memory, bench_result *r)
{
    run_recall = recall;
    bench_run_mode(env, BENCH_SMOE_HINT, memory, r);
    r->recall = recall;
    snprintf(r->name, sizeof r->name, "smoe+recall=%g", recall);
}
