/*
 * bench_clock.c - what the mode loops share: their names, per-token wait
 * accounting, the progress line, and CPU, I/O and memory readings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "os.h"
#include "tool.h"

const char *bench_mode_name(bench_mode mode)
{
    switch (mode) {
    case BENCH_SMOE: return "smoe";
    case BENCH_SMOE_SPEC: return "smoe+spec";
    case BENCH_PAGECACHE: return "pagecache";
    case BENCH_MMAP: return "mmap";
    case BENCH_DIRECT: return "direct";
    case BENCH_SMOE_LRU: return "smoe-lru";
    case BENCH_SMOE_REUSE: return "smoe-reuse";
    case BENCH_SMOE_HINT: return "smoe+recall";
    default: return "?";
    }
}

const char *bench_result_name(const bench_result *r)
{
    return r->name[0] ? r->name : bench_mode_name(r->mode);
}

const char *bench_advice_name(bench_advice advice)
{
    switch (advice) {
    case BENCH_ADVICE_NORMAL: return "normal";
    case BENCH_ADVICE_RANDOM: return "random";
    case BENCH_ADVICE_WILLNEED: return "willneed";
    default: return "?";
    }
}

void bench_spin_us(uint32_t us)
{
    if (!us)
        return;
    uint64_t end = tool_now_ns() + (uint64_t)us * 1000u;
    while (tool_now_ns() < end) {
    }
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
    tool_os_cpu(&u, &s);
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
    r->peak_rss = tool_os_peak_rss();
    free(c->wait_ns);
    c->wait_ns = NULL;
}
