/*
 * bench_run.c - what the mode loops share: per-token wait accounting, the
 * progress line, CPU and memory readings, and running each mode in a child
 * process (inside a memory cgroup when asked).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tool.h"

const char *bench_mode_name(int mode)
{
    switch (mode) {
    case BENCH_SMOE: return "smoe";
    case BENCH_SMOE_SPEC: return "smoe+spec";
    case BENCH_PAGECACHE: return "pagecache";
    case BENCH_MMAP: return "mmap";
    case BENCH_DIRECT: return "direct";
    case BENCH_SMOE_LRU: return "smoe-lru";
    case BENCH_SMOE_REUSE: return "smoe-reuse";
    default: return "?";
    }
}

const char *bench_advice_name(int advice)
{
    switch (advice) {
    case BENCH_ADVICE_NORMAL: return "normal";
    case BENCH_ADVICE_RANDOM: return "random";
    case BENCH_ADVICE_WILLNEED: return "willneed";
    default: return "?";
    }
}

void bench_cpu_now(double *user, double *sys)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0) {
        *user = *sys = 0.0;
        return;
    }
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

void bench_spin_us(uint32_t us)
{
    if (!us)
        return;
    uint64_t end = tool_now_ns() + (uint64_t)us * 1000u;
    while (tool_now_ns() < end) {
    }
}

uint64_t bench_io_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    char line[128];
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %llu", &v) == 1)
            break;
    fclose(f);
    return v;
}

uint64_t bench_rss_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, rss = 0;
    int n = fscanf(f, "%llu %llu", &size, &rss);
    fclose(f);
    return n == 2 ? rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

int bench_clock_init(bench_clock *c, const bench_env *env, const char *label)
{
    memset(c, 0, sizeof *c);
    c->env = env;
    c->label = label;
    c->wait_ns = calloc(env->n_tokens ? env->n_tokens : 1, sizeof *c->wait_ns);
    if (!c->wait_ns)
        return -1;
    c->t_start = tool_now_ns();
    c->next_progress = c->t_start + 250000000ull;
    return 0;
}

void bench_clock_token(bench_clock *c, size_t tok)
{
    if (!c->env->cfg->progress)
        return;
    uint64_t now = tool_now_ns();
    if (now < c->next_progress && tok + 1 < c->env->n_tokens)
        return;
    c->next_progress = now + 250000000ull;
    double s = (double)(now - c->t_start) * 1e-9;
    fprintf(stderr, "\r%-10s token %zu/%zu  %.1f tok/s  hit rate %.3f   ", c->label, tok + 1,
            c->env->n_tokens, s > 0 ? (double)(tok + 1) / s : 0.0,
            c->requests ? (double)c->hits / (double)c->requests : 0.0);
    fflush(stderr);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const uint64_t *v, size_t n, double p)
{
    if (!n)
        return 0.0;
    size_t i = (size_t)(p * (double)n + 0.999999);
    if (i < 1)
        i = 1;
    if (i > n)
        i = n;
    return (double)v[i - 1];
}

void bench_clock_finish(bench_clock *c, bench_result *r, double cpu0_user, double cpu0_sys)
{
    uint64_t end = tool_now_ns();
    if (c->env->cfg->progress) {
        fprintf(stderr, "\r%79s\r", "");
        fflush(stderr);
    }
    size_t n = c->env->n_tokens;
    r->elapsed_s = (double)(end - c->t_start) * 1e-9;
    double u, s;
    bench_cpu_now(&u, &s);
    r->cpu_user_s = u - cpu0_user;
    r->cpu_sys_s = s - cpu0_sys;
    uint64_t sum = 0, first = 0;
    size_t n_first = n < 10 ? n : 10;
    for (size_t i = 0; i < n; i++) {
        sum += c->wait_ns[i];
        if (i < n_first)
            first += c->wait_ns[i];
    }
    r->wait_first_us = n ? (double)c->wait_ns[0] * 1e-3 : 0.0;
    r->wait_first10_us = n_first ? (double)first / (double)n_first * 1e-3 : 0.0;
    qsort(c->wait_ns, n, sizeof *c->wait_ns, cmp_u64);
    r->wait_total_s = (double)sum * 1e-9;
    r->wait_mean_us = n ? (double)sum / (double)n * 1e-3 : 0.0;
    r->wait_p50_us = pct(c->wait_ns, n, 0.50) * 1e-3;
    r->wait_p99_us = pct(c->wait_ns, n, 0.99) * 1e-3;
    r->tokens = n;
    r->peak_rss = tool_peak_rss();
    free(c->wait_ns);
    c->wait_ns = NULL;
}

static void run_in_child(const bench_env *env, int mode, uint64_t memory, bench_result *r)
{
    if (mode == BENCH_SMOE || mode == BENCH_SMOE_SPEC || mode == BENCH_SMOE_LRU ||
        mode == BENCH_SMOE_REUSE)
        bench_run_smoe(env, mode == BENCH_SMOE_SPEC, memory, r);
    else
        bench_run_os(env, mode, memory, r);
}

static int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

uint64_t bench_cgroup_limit(const bench_env *env, uint64_t memory)
{
    uint64_t limit = memory + BENCH_PROCESS_SLACK;
    if (env->cfg->cache_only) /* the per-layer read buffers come on top */
        limit += (uint64_t)env->max_k * env->slot_bytes;
    return limit;
}

void bench_run_mode(const bench_env *env, int mode, uint64_t memory, bench_result *r)
{
    const bench_cfg *cfg = env->cfg;
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->memory = memory;
    char err[512] = "";
    int dropped = 0;

    if (cfg->drop_caches) {
        if (bench_drop_caches(err, sizeof err) == 0)
            dropped = 1;
        else
            fprintf(stderr, "smoe bench: %s\n", err);
    }

    bench_cgroup cg;
    int limited = 0;
    if (cfg->use_cgroup && (mode == BENCH_PAGECACHE || mode == BENCH_MMAP)) {
        uint64_t limit = bench_cgroup_limit(env, memory);
        if (bench_cgroup_create(&cg, limit, err, sizeof err) == 0) {
            limited = 1;
        } else {
            fprintf(stderr, "smoe bench: %s: running %s without a memory limit\n", err,
                    bench_mode_name(mode));
        }
    }

    int res_pipe[2], go_pipe[2];
    if (pipe(res_pipe) < 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        goto out;
    }
    if (pipe(go_pipe) < 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        close(res_pipe[0]);
        close(res_pipe[1]);
        goto out;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(res_pipe[0]);
        close(res_pipe[1]);
        close(go_pipe[0]);
        close(go_pipe[1]);
        goto out;
    }
    if (pid == 0) {
        close(res_pipe[0]);
        close(go_pipe[1]);
        char go;
        /* wait until the parent has moved us into the cgroup */
        if (read_all(go_pipe[0], &go, 1) < 0)
            _exit(3);
        bench_result cr;
        memset(&cr, 0, sizeof cr);
        cr.mode = mode;
        cr.memory = memory;
        run_in_child(env, mode, memory, &cr);
        _exit(write_all(res_pipe[1], &cr, sizeof cr) < 0 ? 4 : 0);
    }
    close(res_pipe[1]);
    close(go_pipe[0]);
    if (limited && bench_cgroup_attach(&cg, pid, err, sizeof err) < 0) {
        fprintf(stderr, "smoe bench: %s: running %s without a memory limit\n", err,
                bench_mode_name(mode));
        bench_cgroup_remove(&cg);
        limited = 0;
    }
    int got = write_all(go_pipe[1], "g", 1) == 0 && read_all(res_pipe[0], r, sizeof *r) == 0;
    close(go_pipe[1]);
    close(res_pipe[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!got) {
        memset(r, 0, sizeof *r);
        r->mode = mode;
        r->memory = memory;
        if (WIFSIGNALED(status))
            snprintf(r->error, sizeof r->error, "the %s run was killed by signal %d%s",
                     bench_mode_name(mode), WTERMSIG(status),
                     limited && WTERMSIG(status) == SIGKILL
                         ? " (out of memory inside the cgroup limit?)" : "");
        else
            snprintf(r->error, sizeof r->error, "the %s run exited with status %d",
                     bench_mode_name(mode), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    r->caches_dropped = dropped;
    r->memory_limited = limited;
    if (limited) {
        r->cgroup_limit = bench_cgroup_limit(env, memory);
        r->cgroup_peak = bench_cgroup_peak(&cg);
    }
out:
    if (limited)
        bench_cgroup_remove(&cg);
}
