/*
 * bench_report.c - what `smoe bench` prints: the table on stdout, the JSON
 * file (json-c) and the hit-rate plot (gnuplot).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "smoe/smoe.h"
#include "bench.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

static double hit_rate(const bench_result *r)
{
    return ratio((double)r->hits, (double)r->requests);
}

static double cpu_per_gb(const bench_result *r)
{
    return ratio(r->cpu_user_s + r->cpu_sys_s, (double)r->bytes_requested / 1e9);
}

static int is_library(bench_mode mode)
{
    return mode == BENCH_SMOE || mode == BENCH_SMOE_SPEC || mode == BENCH_SMOE_LRU ||
           mode == BENCH_SMOE_REUSE || mode == BENCH_SMOE_HINT;
}

static const char *freq_name(uint64_t status)
{
    switch ((smoe_freq_status)status) {
    case SMOE_FREQ_OFF: return "off";
    case SMOE_FREQ_LOADED: return "loaded";
    case SMOE_FREQ_ABSENT: return "absent";
    case SMOE_FREQ_TRUNCATED: return "truncated";
    case SMOE_FREQ_CORRUPT: return "corrupt";
    case SMOE_FREQ_VERSION: return "version";
    case SMOE_FREQ_FOREIGN: return "foreign";
    case SMOE_FREQ_UNREADABLE: return "unreadable";
    }
    return "?";
}

static const bench_result *find(const bench_result *res, int n, bench_mode mode)
{
    for (int i = 0; i < n; i++)
        if (res[i].mode == mode && res[i].ok)
            return &res[i];
    return NULL;
}

void bench_print_header(const bench_env *env, const bench_sim *sim, const char *cg_note)
{
    const bench_cfg *cfg = env->cfg;
    const tool_trace *t = &env->trace;
    printf("smoe bench: vault %s: %u layers x %u experts, slot %.1f MiB, %.2f GiB of blobs\n",
           cfg->vault, env->layers, env->experts, (double)env->slot_bytes / MIB,
           (double)env->total_padded / GIB);
    printf("trace %s: %zu of %zu tokens, %llu requests, top-%u, adjacent-token overlap %.3f\n",
           cfg->trace_path, env->n_tokens, t->n_tokens, (unsigned long long)env->requests,
           t->top_k, env->overlap);
    printf("memory %.1f MiB (%.1f%% of the vault): ring of %u slots; %s\n",
           (double)cfg->memory / MIB, 100.0 * ratio((double)cfg->memory,
                                                    (double)env->total_padded),
           sim->slots, cg_note);
    printf("workers %u, compute %u us per layer%s, %s, device read-ahead %d KiB%s\n",
           cfg->workers, cfg->compute_us,
           cfg->compute_auto ? " (auto: top-k float32 matrix-vector products measured)" : "",
           cfg->drop_caches ? "page cache dropped before each mode"
                            : "page cache NOT dropped between modes",
           env->read_ahead_kb, cfg->os_advice == BENCH_ADVICE_NORMAL ? "" :
           cfg->os_advice == BENCH_ADVICE_RANDOM ? ", random-access advice (no read-ahead)" :
           ", random-access advice plus WILLNEED of each expert");
    int prewarm = !(cfg->open_flags & SMOE_OPEN_NO_PREWARM);
    int freq = !(cfg->open_flags & SMOE_OPEN_NO_FREQ);
    if (prewarm || freq || cfg->idle_ms) {
        printf("library: pre-warm %s, histogram %s, ", prewarm ? "on" : "off",
               freq ? "on (<vault>.freq: loaded at open, saved at close)" : "off");
        if (cfg->idle_ms)
            printf("idle %u ms after open (smoe_warmup running, cancelled at its end), then "
                   "busy for the replay\n", cfg->idle_ms);
        else
            printf("no idle time before the first token, busy never set\n");
    }
    printf("offline at %u slots: hit rate LRU %.3f, decayed LFU %.3f, reuse %.3f, optimal "
           "(Belady) %.3f\n", sim->slots, sim->lru, sim->lfu, sim->reuse, sim->opt);
}

static const char *eviction_name(uint64_t eviction)
{
    return eviction == SMOE_EVICT_LRU ? "lru" : eviction == SMOE_EVICT_REUSE ? "reuse" : "?";
}

static void print_rows(const bench_result *res, int n)
{
    printf("\n%-16s %8s %9s %9s %9s %6s %6s %9s %7s %7s %8s %7s\n", "mode", "tok/s",
           "wait/tok", "p50", "p99", "hit", "joins", "read", "GB/s", "CPU s", "peak RSS",
           "limit");
    printf("%-16s %8s %9s %9s %9s %6s %6s %9s %7s %7s %8s\n", "", "", "ms mean", "ms", "ms",
           "rate", "", "GiB", "read", "per GB", "MiB");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        if (!r->ok) {
            printf("%-16s FAILED: %s\n", bench_result_name(r), r->error);
            continue;
        }
        const char *lim = r->mode == BENCH_PAGECACHE || r->mode == BENCH_MMAP
                              ? (r->memory_limited ? "cgroup" : "NONE")
                              : (r->mode == BENCH_DIRECT ? "-" : "ring");
        printf("%-16s %8.2f %9.2f %9.2f %9.2f %6.3f %6.3f %9.2f %7.2f %7.3f %8.0f %7s\n",
               bench_result_name(r), ratio((double)r->tokens, r->elapsed_s),
               r->wait_mean_us / 1e3, r->wait_p50_us / 1e3, r->wait_p99_us / 1e3, hit_rate(r),
               ratio((double)r->joins, (double)r->requests), (double)r->bytes_read / GIB,
               ratio((double)r->bytes_read / 1e9, r->elapsed_s), cpu_per_gb(r),
               (double)r->peak_rss / MIB, lim);
    }
}

/* Every other mode against smoe, side by side. */
static void print_vs_smoe(const bench_result *res, int n, const bench_result *s)
{
    if (!s || s->wait_mean_us <= 0)
        return;
    int any = 0;
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        if (!r->ok || r->mode == BENCH_SMOE)
            continue;
        if (!any)
            printf("\nagainst smoe (wait per token: mode / smoe, > 1 means smoe waits "
                   "less; tok/s: smoe / mode):\n");
        any = 1;
        printf("  %-16s wait %.2fx   p99 %.2fx   tok/s %.2fx\n", bench_result_name(r),
               ratio(r->wait_mean_us, s->wait_mean_us), ratio(r->wait_p99_us, s->wait_p99_us),
               ratio(ratio((double)s->tokens, s->elapsed_s),
                     ratio((double)r->tokens, r->elapsed_s)));
    }
}

/* The library runs: eviction scans, chunks, time from prefetch to READY. */
static void print_library(const bench_result *res, int n)
{
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        if (!r->ok || !is_library(r->mode))
            continue;
        printf("%s: %s eviction, %.1f slots scanned per scan; %llu KiB chunks; prefetch to "
               "READY: demand p50 %.2f ms, p99 %.2f ms", bench_result_name(r),
               eviction_name(r->eviction),
               ratio((double)r->evict_scanned, (double)r->evict_scans),
               (unsigned long long)r->chunk_bytes / 1024, r->ready_demand_p50_ns / 1e6,
               r->ready_demand_p99_ns / 1e6);
        if (r->mode == BENCH_SMOE_SPEC)
            printf("; speculative p50 %.2f ms, p99 %.2f ms", r->ready_spec_p50_ns / 1e6,
                   r->ready_spec_p99_ns / 1e6);
        printf("\n");
    }
}

/* The first tokens' waits, and the library's histogram and pre-warm. */
static void print_first_tokens(const bench_result *res, int n)
{
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        if (!r->ok)
            continue;
        printf("%s: first token wait %.2f ms, first %llu tokens %.2f ms mean",
               bench_result_name(r), r->wait_first_us / 1e3,
               (unsigned long long)(r->tokens < 10 ? r->tokens : 10), r->wait_first10_us / 1e3);
        if (is_library(r->mode))
            printf("; histogram %s; pre-warm %llu reads (%llu before the first token), "
                   "%llu claimed, %llu passes",
                   freq_name(r->freq_status), (unsigned long long)r->prewarm_reads,
                   (unsigned long long)r->prewarm_reads_idle,
                   (unsigned long long)r->prewarm_hits, (unsigned long long)r->prewarm_passes);
        if (is_library(r->mode) && r->warmup_loaded_idle)
            printf("; warm-up %llu experts (%.1f MiB) before the first token",
                   (unsigned long long)r->warmup_loaded_idle,
                   (double)r->warmup_bytes_idle / 1048576.0);
        printf("\n");
    }
}

/* smoe+spec against smoe: coverage, reads, waste, wait. */
static void print_speculation(const bench_result *s, const bench_result *sp)
{
    if (!s || !sp)
        return;
    double c0 = ratio((double)(s->hits + s->joins), (double)s->requests);
    double c1 = ratio((double)(sp->hits + sp->joins), (double)sp->requests);
    printf("\nspeculation: coverage (hits + joins) %.3f -> %.3f (%+.3f); %llu speculative "
           "prefetches, %llu reads queued, %llu used, %.2f GiB wasted; mean wait per "
           "token %.2f -> %.2f ms (%+.1f%%)\n",
           c0, c1, c1 - c0, (unsigned long long)sp->spec_issued,
           (unsigned long long)sp->spec_queued, (unsigned long long)sp->spec_used,
           (double)sp->spec_wasted_bytes / GIB, s->wait_mean_us / 1e3,
           sp->wait_mean_us / 1e3, 100.0 * (ratio(sp->wait_mean_us, s->wait_mean_us) - 1));
}

/* Each smoe+recall=R run against smoe: wait, hit rate, the hints' fate. */
static void print_hints(const bench_result *res, int n, const bench_result *s)
{
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        if (!r->ok || r->mode != BENCH_SMOE_HINT)
            continue;
        printf("%s: wait per token %.3f of smoe's (%.2f -> %.2f ms), hit rate %.3f -> %.3f; "
               "%llu hints, %llu came true (recall %.3f), %llu cancelled unstarted, "
               "%.2f GiB wasted\n", bench_result_name(r),
               s ? ratio(r->wait_mean_us, s->wait_mean_us) : 0.0,
               s ? s->wait_mean_us / 1e3 : 0.0, r->wait_mean_us / 1e3, s ? hit_rate(s) : 0.0,
               hit_rate(r), (unsigned long long)r->hints_issued,
               (unsigned long long)r->hints_true,
               ratio((double)r->hints_true, (double)r->hint_rows_truth),
               (unsigned long long)r->hint_cancelled, (double)r->spec_wasted_bytes / GIB);
    }
}

void bench_print_table(const bench_env *env, const bench_result *res, int n)
{
    (void)env;
    const bench_result *s = find(res, n, BENCH_SMOE);
    print_rows(res, n);
    print_vs_smoe(res, n, s);
    print_library(res, n);
    print_first_tokens(res, n);
    print_speculation(s, find(res, n, BENCH_SMOE_SPEC));
    print_hints(res, n, s);
    fflush(stdout);
}

/* ---- JSON ------------------------------------------------------------ */

static void add_u64(json_object *o, const char *k, uint64_t v)
{
    json_object_object_add(o, k, json_object_new_uint64(v));
}

static void add_d(json_object *o, const char *k, double v)
{
    json_object_object_add(o, k, json_object_new_double(v));
}

static void add_s(json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

static void add_b(json_object *o, const char *k, int v)
{
    json_object_object_add(o, k, json_object_new_boolean(v));
}

static json_object *library_json(const bench_result *r)
{
    json_object *l = json_object_new_object();
    add_s(l, "eviction", eviction_name(r->eviction));
    add_u64(l, "evict_scans", r->evict_scans);
    add_u64(l, "evict_scanned", r->evict_scanned);
    add_s(l, "io_mode", r->io_mode == 1 ? "direct" : r->io_mode == 2 ? "buffered" : "?");
    add_b(l, "verify", (int)r->verify);
    add_u64(l, "full", r->full);
    add_u64(l, "claim_waits", r->claim_waits);
    json_object *copies = json_object_new_array();
    for (uint64_t i = 0; i < r->copies; i++) {
        json_object *c = json_object_new_object();
        add_u64(c, "reads", r->copy_reads[i]);
        add_u64(c, "failed", r->copy_failed[i]);
        json_object_array_add(copies, c);
    }
    json_object_object_add(l, "replicas", copies);
    add_u64(l, "evictions", r->evictions);
    add_u64(l, "spec_issued", r->spec_issued);
    add_u64(l, "spec_queued", r->spec_queued);
    add_u64(l, "spec_skipped", r->spec_skipped);
    add_u64(l, "spec_used", r->spec_used);
    add_u64(l, "spec_upgraded", r->spec_upgraded);
    add_u64(l, "spec_cancelled", r->spec_cancelled);
    add_u64(l, "spec_wasted_bytes", r->spec_wasted_bytes);
    add_u64(l, "chunk_bytes", r->chunk_bytes);
    add_u64(l, "ready_demand_p50_ns", r->ready_demand_p50_ns);
    add_u64(l, "ready_demand_p99_ns", r->ready_demand_p99_ns);
    add_u64(l, "ready_spec_p50_ns", r->ready_spec_p50_ns);
    add_u64(l, "ready_spec_p99_ns", r->ready_spec_p99_ns);
    add_s(l, "freq_status", freq_name(r->freq_status));
    add_u64(l, "prewarm_slots", r->prewarm_slots);
    add_u64(l, "prewarm_passes", r->prewarm_passes);
    add_u64(l, "prewarm_reads", r->prewarm_reads);
    add_u64(l, "prewarm_reads_before_first_token", r->prewarm_reads_idle);
    add_u64(l, "warmup_experts_before_first_token", r->warmup_loaded_idle);
    add_u64(l, "warmup_bytes_before_first_token", r->warmup_bytes_idle);
    add_u64(l, "prewarm_hits", r->prewarm_hits);
    if (r->mode == BENCH_SMOE_HINT) {
        add_d(l, "recall", r->recall);
        add_u64(l, "hints_issued", r->hints_issued);
        add_u64(l, "hints_true", r->hints_true);
        add_d(l, "recall_measured", ratio((double)r->hints_true, (double)r->hint_rows_truth));
        add_u64(l, "hint_cancelled", r->hint_cancelled);
        add_u64(l, "wasted_bytes", r->spec_wasted_bytes);
    }
    return l;
}

static json_object *vs_smoe_json(const bench_result *r, const bench_result *smoe)
{
    json_object *v = json_object_new_object();
    add_d(v, "wait_mean", ratio(r->wait_mean_us, smoe->wait_mean_us));
    add_d(v, "wait_p50", ratio(r->wait_p50_us, smoe->wait_p50_us));
    add_d(v, "wait_p99", ratio(r->wait_p99_us, smoe->wait_p99_us));
    add_d(v, "smoe_speedup_tokens_per_s",
          ratio(ratio((double)smoe->tokens, smoe->elapsed_s),
                ratio((double)r->tokens, r->elapsed_s)));
    return v;
}

static json_object *waits_json(const bench_result *r)
{
    json_object *w = json_object_new_object();
    add_d(w, "mean", r->wait_mean_us);
    add_d(w, "p50", r->wait_p50_us);
    add_d(w, "p99", r->wait_p99_us);
    add_d(w, "first_token", r->wait_first_us);
    add_d(w, "first_10_mean", r->wait_first10_us);
    return w;
}

static json_object *result_json(const bench_result *r, const bench_result *smoe)
{
    json_object *o = json_object_new_object();
    add_s(o, "mode", bench_result_name(r));
    add_b(o, "ok", r->ok);
    if (!r->ok) {
        add_s(o, "error", r->error);
        return o;
    }
    add_u64(o, "memory_bytes", r->memory);
    add_u64(o, "slots", r->slots);
    add_u64(o, "tokens", r->tokens);
    add_d(o, "elapsed_s", r->elapsed_s);
    add_d(o, "tokens_per_s", ratio((double)r->tokens, r->elapsed_s));
    json_object_object_add(o, "wait_us_per_token", waits_json(r));
    add_d(o, "wait_total_s", r->wait_total_s);
    add_u64(o, "requests", r->requests);
    add_u64(o, "hits", r->hits);
    add_u64(o, "joins", r->joins);
    add_u64(o, "misses", r->misses);
    add_d(o, "hit_rate", hit_rate(r));
    add_d(o, "join_rate", ratio((double)r->joins, (double)r->requests));
    add_s(o, "hit_method", r->hit_method);
    add_u64(o, "bytes_read", r->bytes_read);
    add_u64(o, "bytes_requested", r->bytes_requested);
    add_d(o, "gb_per_s", ratio((double)r->bytes_read / 1e9, r->elapsed_s));
    add_d(o, "delivered_gb_per_s", ratio((double)r->bytes_requested / 1e9, r->elapsed_s));
    add_d(o, "cpu_user_s", r->cpu_user_s);
    add_d(o, "cpu_sys_s", r->cpu_sys_s);
    add_d(o, "cpu_s_per_gb", cpu_per_gb(r));
    add_u64(o, "peak_rss_bytes", r->peak_rss);
    add_u64(o, "start_rss_bytes", r->start_rss);
    add_b(o, "memory_limited", r->memory_limited);
    add_u64(o, "cgroup_limit_bytes", r->cgroup_limit);
    add_u64(o, "cgroup_peak_bytes", r->cgroup_peak);
    add_b(o, "caches_dropped", r->caches_dropped);
    add_u64(o, "workers", r->workers);
    if (is_library(r->mode))
        json_object_object_add(o, "library", library_json(r));
    if (smoe && r->mode != BENCH_SMOE)
        json_object_object_add(o, "vs_smoe", vs_smoe_json(r, smoe));
    return o;
}

static json_object *vault_json(const bench_env *env)
{
    json_object *v = json_object_new_object();
    add_s(v, "path", env->cfg->vault);
    add_u64(v, "layers", env->layers);
    add_u64(v, "experts", env->experts);
    add_u64(v, "slot_bytes", env->slot_bytes);
    add_u64(v, "total_padded_bytes", env->total_padded);
    add_u64(v, "file_bytes", env->file_size);
    return v;
}

static json_object *trace_json(const bench_env *env)
{
    const tool_trace *t = &env->trace;
    json_object *tr = json_object_new_object();
    add_s(tr, "path", env->cfg->trace_path);
    add_s(tr, "model", t->model);
    add_s(tr, "source", t->source);
    add_u64(tr, "layers", t->layers);
    add_u64(tr, "experts", t->experts);
    add_u64(tr, "top_k", t->top_k);
    add_u64(tr, "spec_ranks", t->max_spec);
    add_u64(tr, "tokens_in_file", t->n_tokens);
    add_u64(tr, "requests_in_file", t->n_requests);
    add_u64(tr, "tokens", env->n_tokens);
    add_u64(tr, "expert_requests", env->requests);
    add_d(tr, "adjacent_overlap", env->overlap);
    return tr;
}

static json_object *config_json(const bench_env *env, const bench_sim *sim,
                                const char *cg_note)
{
    const bench_cfg *cfg = env->cfg;
    json_object *c = json_object_new_object();
    add_u64(c, "memory_bytes", cfg->memory);
    add_d(c, "memory_fraction", ratio((double)cfg->memory, (double)env->total_padded));
    add_u64(c, "ring_slots", sim->slots);
    add_u64(c, "workers", cfg->workers);
    add_u64(c, "compute_us", cfg->compute_us);
    add_b(c, "compute_auto", cfg->compute_auto);
    add_u64(c, "spec", cfg->spec);
    add_b(c, "spec_next_layer", cfg->spec_next_layer);
    add_u64(c, "open_flags", cfg->open_flags);
    add_u64(c, "verify", cfg->verify);
    add_b(c, "drop_caches", cfg->drop_caches);
    add_b(c, "cgroup", cfg->use_cgroup);
    add_s(c, "os_advice", bench_advice_name(cfg->os_advice));
    add_b(c, "cache_only", cfg->cache_only);
    add_u64(c, "idle_ms", cfg->idle_ms);
    json_object_object_add(c, "read_ahead_kb", json_object_new_int(env->read_ahead_kb));
    add_s(c, "memory_note", cg_note);
    return c;
}

/* The simulated hit rates of one cache size into o. */
static void add_sim(json_object *o, const bench_sim *sim)
{
    add_d(o, "lru_hit_rate", sim->lru);
    add_d(o, "opt_hit_rate", sim->opt);
    add_d(o, "lfu_hit_rate", sim->lfu);
    add_d(o, "reuse_hit_rate", sim->reuse);
}

static json_object *sweep_json(const bench_point *pts, int n_pts)
{
    json_object *sw = json_object_new_array();
    for (int i = 0; i < n_pts; i++) {
        json_object *p = json_object_new_object();
        add_u64(p, "memory_bytes", pts[i].sim.memory);
        add_u64(p, "slots", pts[i].sim.slots);
        add_sim(p, &pts[i].sim);
        json_object_object_add(p, "smoe_lru", result_json(&pts[i].lru, NULL));
        json_object_object_add(p, "smoe_reuse", result_json(&pts[i].reuse, NULL));
        json_object_object_add(p, "pagecache", result_json(&pts[i].pagecache, NULL));
        json_object_array_add(sw, p);
    }
    return sw;
}

int bench_write_json(const bench_env *env, const bench_sim *sim, const bench_result *res,
                     int n, const bench_point *pts, int n_pts, const char *cg_note)
{
    const bench_cfg *cfg = env->cfg;
    if (!cfg->json_path)
        return 0;
    json_object *root = json_object_new_object();
    add_s(root, "tool", "smoe bench");
    add_s(root, "library_version", smoe_version_string());
    json_object_object_add(root, "vault", vault_json(env));
    json_object_object_add(root, "trace", trace_json(env));
    json_object_object_add(root, "config", config_json(env, sim, cg_note));
    json_object *off = json_object_new_object();
    add_u64(off, "slots", sim->slots);
    add_sim(off, sim);
    json_object_object_add(root, "offline", off);
    const bench_result *smoe = find(res, n, BENCH_SMOE);
    json_object *modes = json_object_new_array();
    for (int i = 0; i < n; i++)
        json_object_array_add(modes, result_json(&res[i], smoe));
    json_object_object_add(root, "modes", modes);
    if (n_pts)
        json_object_object_add(root, "sweep", sweep_json(pts, n_pts));
    int rc = json_object_to_file_ext(cfg->json_path, root,
                                     JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    json_object_put(root);
    if (rc < 0) {
        fprintf(stderr, "smoe bench: %s: cannot write the JSON: %s\n", cfg->json_path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- plot ------------------------------------------------------------ */

int bench_write_plot(const bench_env *env, const bench_point *pts, int n_pts)
{
    const bench_cfg *cfg = env->cfg;
    if (!cfg->plot_path)
        return 0;
    if (!n_pts) {
        fprintf(stderr, "smoe bench: --plot needs --sweep (hit rate against ring size)\n");
        return -1;
    }
    for (const char *c = cfg->plot_path; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n') {
            fprintf(stderr, "smoe bench: --plot %s: quotes, backslashes and newlines are "
                    "not allowed in the name\n", cfg->plot_path);
            return -1;
        }
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        fprintf(stderr, "smoe bench: cannot run gnuplot: %s\n", strerror(errno));
        return -1;
    }
    fprintf(g, "set terminal pngcairo size 900,600 noenhanced\n");
    fprintf(g, "set output \"%s\"\n", cfg->plot_path);
    fprintf(g, "set title \"hit rate against ring size: %zu tokens, %u x %u experts, "
               "slot %.1f MiB\"\n", env->n_tokens, env->layers, env->experts,
            (double)env->slot_bytes / MIB);
    fprintf(g, "set xlabel \"cache size (%% of the vault)\"\nset ylabel \"hit rate\"\n");
    fprintf(g, "set yrange [0:1]\nset grid\nset key left top\n");
    fprintf(g, "$d << EOD\n");
    for (int i = 0; i < n_pts; i++) {
        const bench_point *p = &pts[i];
        double x = 100.0 * ratio((double)p->sim.memory, (double)env->total_padded);
        fprintf(g, "%.4f %.5f %.5f %.5f ", x, p->sim.lru, p->sim.opt, p->sim.lfu);
        fprintf(g, p->lru.ok ? "%.5f " : "NaN ", hit_rate(&p->lru));
        fprintf(g, p->reuse.ok ? "%.5f " : "NaN ", hit_rate(&p->reuse));
        if (p->pagecache.ok)
            fprintf(g, "%.5f\n", hit_rate(&p->pagecache));
        else
            fprintf(g, "NaN\n");
    }
    fprintf(g, "EOD\n");
    fprintf(g, "plot $d using 1:3 with linespoints dt 3 title \"Belady (simulated)\", "
               "$d using 1:6 with linespoints lw 4 title \"smoe, reuse (measured)\", "
               "$d using 1:5 with linespoints lw 2 title \"smoe, lru (measured)\", "
               "$d using 1:4 with linespoints dt 2 title \"decayed LFU (simulated)\", "
               "$d using 1:2 with linespoints dt 2 pt 6 ps 2 title \"LRU (simulated)\", "
               "$d using 1:7 with linespoints title \"page cache (measured, mincore)\"\n");
    int rc = pclose(g);
    if (rc != 0) {
        fprintf(stderr, "smoe bench: gnuplot failed (status %d) writing %s\n", rc,
                cfg->plot_path);
        return -1;
    }
    return 0;
}
