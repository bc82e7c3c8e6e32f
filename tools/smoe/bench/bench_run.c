/*
 * bench_run.c - run each mode in a child process (inside a memory cgroup
 * when asked) and bring its result back: the dispatcher above the mode
 * loops of bench_smoe.c and bench_os.c.
 *
 * The child waits for one byte on a pipe, sent once the parent has moved it
 * into its cgroup, and leaves its bench_result in a shared anonymous
 * mapping; the parent takes it only when the child exited with status 0,
 * so a child that was killed half way reports why instead of half a result.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

typedef struct child {
    pid_t pid;
    int go;               /* write end of the start pipe */
    bench_result *shared; /* the child's result */
} child;

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

/* The child: wait for the start byte, run the mode into the shared result. */
static void child_main(const bench_env *env, bench_mode mode, uint64_t memory, int go,
                       bench_result *shared)
{
    char b;
    ssize_t n;
    while ((n = read(go, &b, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1)
        _exit(3); /* the parent gave up before starting us */
    shared->mode = mode;
    shared->memory = memory;
    run_in_child(env, mode, memory, shared);
    _exit(0);
}

/* Fork the child of one run; 0, or -1 with why in r->error. */
static int start_child(const bench_env *env, bench_mode mode, uint64_t memory, child *c,
                       bench_result *r)
{
    void *m = mmap(NULL, sizeof *c->shared, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        snprintf(r->error, sizeof r->error, "mmap: %s", strerror(errno));
        return -1;
    }
    c->shared = m;
    memset(c->shared, 0, sizeof *c->shared);
    int go[2];
    if (pipe(go) < 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        munmap(c->shared, sizeof *c->shared);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    c->pid = fork();
    if (c->pid == 0) {
        close(go[1]);
        child_main(env, mode, memory, go[0], c->shared);
    }
    close(go[0]);
    if (c->pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(go[1]);
        munmap(c->shared, sizeof *c->shared);
        return -1;
    }
    c->go = go[1];
    return 0;
}

/* Start the child, wait for it, and take its result or say how it ended. */
static void finish_child(child *c, bench_mode mode, int limited, bench_result *r)
{
    ssize_t n;
    while ((n = write(c->go, "g", 1)) < 0 && errno == EINTR) {
    }
    close(c->go);
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (n == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        *r = *c->shared;
    else if (WIFSIGNALED(status))
        snprintf(r->error, sizeof r->error, "the %s run was killed by signal %d%s",
                 bench_mode_name(mode), WTERMSIG(status),
                 limited && WTERMSIG(status) == SIGKILL
                     ? " (out of memory inside the cgroup limit?)" : "");
    else
        snprintf(r->error, sizeof r->error, "the %s run exited with status %d",
                 bench_mode_name(mode), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    munmap(c->shared, sizeof *c->shared);
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
    child c;
    if (start_child(env, mode, memory, &c, r) == 0) {
        if (limited && bench_cgroup_attach(&cg, c.pid, err, sizeof err) < 0) {
            fprintf(stderr, "smoe bench: %s: running %s without a memory limit\n", err,
                    bench_mode_name(mode));
            bench_cgroup_remove(&cg);
            limited = 0;
        }
        finish_child(&c, mode, limited, r);
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
