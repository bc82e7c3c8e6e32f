/*
 * cmd_bench.c - `smoe bench`: options, checks, and the order of the runs.
 * The loops are in bench_smoe.c and bench_os.c, the child processes and
 * cgroups in bench_run.c and bench_cgroup.c, the output in bench_report.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/sysmacros.h>
#endif
#include <unistd.h>

#include "smoe/smoe.h"
#include "bench.h"
#include "io.h"
#include "sim.h"
#include "sim_policy.h"
#include "tool.h"
#include "vault.h"

static int usage(void)
{
    fprintf(stderr,
        "usage: smoe bench --vault V --trace T [--mode M] [--memory BYTES|P%%] [options]\n"
        "Replay a routing trace (docs/trace-format.md) against a vault and compare the\n"
        "library with the operating system's caches at equal memory.\n"
        "  --mode M          smoe, pagecache, mmap, direct, or all (default smoe);\n"
        "                    a comma list runs several; smoe-lru and smoe-reuse run\n"
        "                    the library under one eviction policy\n"
        "  --eviction P      the policy of smoe and smoe+spec: lru or reuse (default:\n"
        "                    the library's, docs/eviction.md)\n"
        "  --memory SIZE     cache budget: bytes (4G, 300M) or a share of the vault\n"
        "                    (10%%); the ring gets SIZE / slot size slots, and as root\n"
        "                    pagecache and mmap run in a cgroup limited to SIZE plus\n"
        "                    16 MiB for the process (default 25%%)\n"
        "  --workers N       library workers and OS-mode reader threads (default 16)\n"
        "  --compute-us N    simulated compute per token and layer (default 0)\n"
        "  --tokens N        replay only the first N tokens\n"
        "  --spec N          also run smoe with the next N gate ranks prefetched\n"
        "                    speculatively (when the trace has them)\n"
        "  --spec-next-layer also run smoe prefetching the previous token's experts of\n"
        "                    the next layer speculatively\n"
        "  --sweep LIST      at each size of a comma list (e.g. 5%%,10%%,25%%,50%%), also\n"
        "                    run the library under lru and under reuse and the page\n"
        "                    cache, and simulate LRU, decayed LFU, reuse and Belady\n"
        "  --json FILE       write every figure as JSON\n"
        "  --plot FILE.png   plot hit rate against cache size (needs --sweep, gnuplot)\n"
        "  --verify on|off   check blob hashes in the library (default: its default)\n"
        "  --chunk BYTES     library read chunk, a multiple of 16 KiB (default: its\n"
        "                    default; the slot size or more reads whole blobs)\n"
        "  --prewarm         let the library pre-warm (off by default)\n"
        "  --freq            let the library load and save its histogram (off)\n"
        "  --idle-ms N       leave the library idle N ms after open, so pre-warm can\n"
        "                    run before the first token, then mark it busy\n"
        "                    (smoe_set_busy) for the replay (default 0: no idle time,\n"
        "                    busy never set)\n"
        "  --allow-buffered  let the library fall back to buffered reads\n"
        "  --no-drop-caches  keep the page cache between modes\n"
        "  --no-cgroup       never limit the page-cache modes\n"
        "  --cache-only      equal cache rather than equal memory: the cgroup limit\n"
        "                    also covers pagecache's and mmap's per-layer buffers\n"
        "  --os-advice A     pagecache and mmap access advice: normal (default: the\n"
        "                    kernel's read-ahead), random (FADV/MADV_RANDOM: none), or\n"
        "                    willneed (random, plus WILLNEED of each expert's bytes\n"
        "                    just before reading it)\n"
        "  --no-progress     no progress line on stderr\n");
    return 2;
}

/* "25%" of total, or a size. */
static int parse_mem(const char *s, uint64_t total, uint64_t *out)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%') {
        char *end;
        double p = strtod(s, &end);
        if (end != s + n - 1 || !(p > 0.0 && p <= 1000.0))
            return -1;
        *out = (uint64_t)((double)total * p / 100.0);
        return 0;
    }
    return tool_parse_size(s, out);
}

static int parse_modes(const char *s, unsigned *modes)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *modes = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "all"))
            *modes |= 1u << BENCH_SMOE | 1u << BENCH_PAGECACHE | 1u << BENCH_MMAP |
                      1u << BENCH_DIRECT;
        else if (!strcmp(tok, "smoe"))
            *modes |= 1u << BENCH_SMOE;
        else if (!strcmp(tok, "pagecache"))
            *modes |= 1u << BENCH_PAGECACHE;
        else if (!strcmp(tok, "mmap"))
            *modes |= 1u << BENCH_MMAP;
        else if (!strcmp(tok, "direct"))
            *modes |= 1u << BENCH_DIRECT;
        else if (!strcmp(tok, "smoe-lru"))
            *modes |= 1u << BENCH_SMOE_LRU;
        else if (!strcmp(tok, "smoe-reuse"))
            *modes |= 1u << BENCH_SMOE_REUSE;
        else
            return -1;
    }
    return *modes ? 0 : -1;
}

/* The vault's geometry, and every (layer, expert) the replay will ask for. */
static int load_vault(bench_env *env, const char *path)
{
    smoe__vault v;
    int rc = smoe__vault_load(&v, path, smoe__io_get());
    if (rc < 0) {
        tool_error("bench", "%s: %s", path, smoe_last_error());
        smoe__vault_free(&v);
        return -1;
    }
    const tool_trace *t = &env->trace;
    if (v.layers < t->layers || v.experts < t->experts) {
        tool_error("bench", "vault %s is %u layers x %u experts but trace %s is %u x %u: the "
                   "vault needs at least the trace's layers and experts", path, v.layers,
                   v.experts, env->cfg->trace_path, t->layers, t->experts);
        smoe__vault_free(&v);
        return -1;
    }
    env->layers = v.layers;
    env->experts = v.experts;
    env->slot_bytes = v.max_padded;
    env->total_padded = v.total_padded;
    env->file_size = v.file_size;
    size_t n = (size_t)v.layers * v.experts;
    env->blobs = calloc(n, sizeof *env->blobs);
    if (!env->blobs) {
        smoe__vault_free(&v);
        return tool_error("bench", "out of memory"), -1;
    }
    for (size_t i = 0; i < n; i++)
        if (v.index[i].present) {
            env->blobs[i].offset = v.index[i].offset;
            env->blobs[i].padded = v.index[i].padded;
        }
    smoe__vault_free(&v);
    for (size_t row = 0; row < t->tok_row[env->n_tokens]; row++)
        for (uint32_t i = t->row_off[row]; i < t->row_off[row + 1]; i++) {
            uint32_t l = t->row_layer[row], e = t->ids[i];
            if (!env->blobs[(size_t)l * env->experts + e].padded)
                return tool_error("bench", "trace %s asks for layer %u expert %u, which vault "
                                  "%s does not hold", env->cfg->trace_path, l, e, path), -1;
        }
    return 0;
}

/* read_ahead_kb of the block device holding path (Linux), -1 if unknown. */
static int read_ahead_kb(const char *path)
{
#if !defined(__linux__)
    (void)path;
    return -1;
#else
    struct stat st;
    if (stat(path, &st) < 0)
        return -1;
    char p[128];
    int v = -1;
    /* a partition's queue/ is its disk's: try both */
    const char *fmt[] = {"/sys/dev/block/%u:%u/queue/read_ahead_kb",
                         "/sys/dev/block/%u:%u/../queue/read_ahead_kb"};
    for (int i = 0; i < 2 && v < 0; i++) {
        snprintf(p, sizeof p, fmt[i], major(st.st_dev), minor(st.st_dev));
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
#endif
}

static double sim_rate(const sim_result *r)
{
    return r->requests ? (double)r->hits / (double)r->requests : 0.0;
}

static int simulate(const bench_env *env, const uint32_t *keys, size_t n,
                    const simp_steps *steps, uint64_t memory, bench_sim *out)
{
    out->memory = memory;
    uint64_t slots = memory / env->slot_bytes;
    out->slots = slots > UINT32_MAX ? UINT32_MAX : (uint32_t)slots;
    sim_result lru, opt;
    uint32_t n_keys = env->layers * env->experts;
    if (sim_lru_keys(keys, n, n_keys, out->slots, &lru) ||
        sim_opt_keys(keys, n, n_keys, out->slots, &opt))
        return tool_error("bench", "out of memory in the simulators"), -1;
    out->lru = sim_rate(&lru);
    out->opt = sim_rate(&opt);
    simp_params p;
    sim_result r;
    simp_params_default(&p, SIMP_LFU);
    if (simp_run(steps, out->slots, &p, &r, NULL, NULL))
        return tool_error("bench", "out of memory in the simulators"), -1;
    out->lfu = sim_rate(&r);
    simp_params_default(&p, SIMP_REUSE);
    if (simp_run(steps, out->slots, &p, &r, NULL, NULL))
        return tool_error("bench", "out of memory in the simulators"), -1;
    out->reuse = sim_rate(&r);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    simp_steps steps;
    memset(&steps, 0, sizeof steps);
    bench_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.workers = 16;
    cfg.modes = 1u << BENCH_SMOE;
    cfg.open_flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
    cfg.progress = isatty(2);
    int root = geteuid() == 0;
    cfg.drop_caches = root;
    cfg.use_cgroup = root;
    const char *mem_arg = "25%", *sweep_arg = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(), 0;
        if (!strcmp(a, "--spec-next-layer")) {
            cfg.spec_next_layer = 1;
            continue;
        }
        if (!strcmp(a, "--prewarm")) {
            cfg.open_flags &= ~(uint32_t)SMOE_OPEN_NO_PREWARM;
            continue;
        }
        if (!strcmp(a, "--freq")) {
            cfg.open_flags &= ~(uint32_t)SMOE_OPEN_NO_FREQ;
            continue;
        }
        if (!strcmp(a, "--allow-buffered")) {
            cfg.open_flags |= SMOE_OPEN_ALLOW_BUFFERED;
            continue;
        }
        if (!strcmp(a, "--no-drop-caches")) {
            cfg.drop_caches = 0;
            continue;
        }
        if (!strcmp(a, "--no-cgroup")) {
            cfg.use_cgroup = 0;
            continue;
        }
        if (!strcmp(a, "--cache-only")) {
            cfg.cache_only = 1;
            continue;
        }
        if (!strcmp(a, "--no-progress")) {
            cfg.progress = 0;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return tool_error("bench", "%s: expected a value (see --help)", a) + 1;
        i++;
        int bad = 0;
        uint32_t u32;
        if (!strcmp(a, "--vault"))
            cfg.vault = v;
        else if (!strcmp(a, "--trace"))
            cfg.trace_path = v;
        else if (!strcmp(a, "--json"))
            cfg.json_path = v;
        else if (!strcmp(a, "--plot"))
            cfg.plot_path = v;
        else if (!strcmp(a, "--memory"))
            mem_arg = v;
        else if (!strcmp(a, "--sweep"))
            sweep_arg = v;
        else if (!strcmp(a, "--mode"))
            bad = parse_modes(v, &cfg.modes);
        else if (!strcmp(a, "--workers"))
            bad = tool_parse_u32(v, 1, 256, &cfg.workers);
        else if (!strcmp(a, "--compute-us"))
            bad = tool_parse_u32(v, 0, 10000000, &cfg.compute_us);
        else if (!strcmp(a, "--idle-ms"))
            bad = tool_parse_u32(v, 0, 600000, &cfg.idle_ms);
        else if (!strcmp(a, "--spec"))
            bad = tool_parse_u32(v, 0, TRACE_MAX_SPEC, &cfg.spec);
        else if (!strcmp(a, "--tokens")) {
            bad = tool_parse_u32(v, 1, UINT32_MAX, &u32);
            cfg.max_tokens = u32;
        } else if (!strcmp(a, "--os-advice")) {
            if (!strcmp(v, "normal"))
                cfg.os_advice = BENCH_ADVICE_NORMAL;
            else if (!strcmp(v, "random"))
                cfg.os_advice = BENCH_ADVICE_RANDOM;
            else if (!strcmp(v, "willneed"))
                cfg.os_advice = BENCH_ADVICE_WILLNEED;
            else
                bad = 1;
        } else if (!strcmp(a, "--eviction")) {
            if (!strcmp(v, "lru"))
                cfg.eviction = SMOE_EVICT_LRU;
            else if (!strcmp(v, "reuse"))
                cfg.eviction = SMOE_EVICT_REUSE;
            else
                bad = 1;
        } else if (!strcmp(a, "--verify")) {
            if (!strcmp(v, "on"))
                cfg.verify = SMOE_VERIFY_ON;
            else if (!strcmp(v, "off"))
                cfg.verify = SMOE_VERIFY_OFF;
            else
                bad = 1;
        } else if (!strcmp(a, "--chunk")) {
            uint64_t c;
            bad = tool_parse_size(v, &c) || c == 0 || c % 16384 || c > 0xFFFFC000ull;
            cfg.chunk = bad ? 0 : (uint32_t)c;
        } else
            return tool_error("bench", "unknown option '%s' (see --help)", a) + 1;
        if (bad)
            return tool_error("bench", "%s '%s': out of range or malformed (see --help)", a,
                              v) + 1;
    }
    if (!cfg.vault || !cfg.trace_path)
        return tool_error("bench", "--vault and --trace are required (see --help)") + 1;

    bench_env env;
    memset(&env, 0, sizeof env);
    env.cfg = &cfg;
    char err[700];
    if (tool_trace_load(&env.trace, cfg.trace_path, err, sizeof err))
        return tool_error("bench", "%s", err);
    int rc = 1;
    uint32_t *keys = NULL;
    bench_result res[BENCH_N_MODES];
    bench_point pts[32];
    int n_res = 0, n_pts = 0;
    env.n_tokens = env.trace.n_tokens;
    if (cfg.max_tokens && cfg.max_tokens < env.n_tokens)
        env.n_tokens = cfg.max_tokens;
    env.requests = env.trace.row_off[env.trace.tok_row[env.n_tokens]];
    env.max_k = env.trace.max_k;
    env.overlap = tool_trace_overlap(&env.trace, env.n_tokens);
    if (load_vault(&env, cfg.vault) < 0)
        goto done;
    env.read_ahead_kb = read_ahead_kb(cfg.vault);

    if (parse_mem(mem_arg, env.total_padded, &cfg.memory) < 0) {
        tool_error("bench", "--memory '%s': expected bytes (300M, 4G) or a share (10%%)",
                   mem_arg);
        goto done;
    }
    if (sweep_arg) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", sweep_arg);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            if (cfg.n_sweep == 32 || parse_mem(tok, env.total_padded, &cfg.sweep[cfg.n_sweep])) {
                tool_error("bench", "--sweep '%s': expected up to 32 sizes or shares, "
                           "comma-separated", sweep_arg);
                goto done;
            }
            cfg.n_sweep++;
        }
    }
    uint64_t need = (uint64_t)env.max_k * env.slot_bytes;
    for (int i = -1; i < cfg.n_sweep; i++) {
        uint64_t m = i < 0 ? cfg.memory : cfg.sweep[i];
        if (m < need) {
            tool_error("bench", "a cache of %llu bytes holds %llu slots of %llu bytes; one "
                       "layer needs %u", (unsigned long long)m,
                       (unsigned long long)(m / env.slot_bytes),
                       (unsigned long long)env.slot_bytes, env.max_k);
            goto done;
        }
    }
    if ((cfg.spec || cfg.spec_next_layer) && (cfg.modes & 1u << BENCH_SMOE))
        cfg.modes |= 1u << BENCH_SMOE_SPEC;
    if (cfg.spec && !env.trace.max_spec)
        fprintf(stderr, "smoe bench: --spec %u: trace %s has no speculative ranks; only "
                "--spec-next-layer can speculate on it\n", cfg.spec, cfg.trace_path);

    size_t n_keys = sim_trace_keys(&env.trace, env.n_tokens, &keys);
    if (!keys) {
        tool_error("bench", "out of memory");
        goto done;
    }
    simp_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.tok_end = env.n_tokens;
    if (simp_steps_from_trace(&env.trace, &shape, &steps) < 0) {
        tool_error("bench", "out of memory");
        goto done;
    }
    bench_sim sim;
    if (simulate(&env, keys, n_keys, &steps, cfg.memory, &sim) < 0)
        goto done;

    char cg_note[256];
    if (cfg.use_cgroup)
        snprintf(cg_note, sizeof cg_note, "pagecache and mmap run in a memory cgroup limited "
                 "to %.1f MiB (the budget plus %llu MiB for the process%s)",
                 (double)bench_cgroup_limit(&env, cfg.memory) / 1048576.0,
                 (unsigned long long)(BENCH_PROCESS_SLACK >> 20),
                 cfg.cache_only ? " plus their read buffers" : "");
    else if (!root)
        snprintf(cg_note, sizeof cg_note, "not root: cannot limit pagecache and mmap, which "
                 "run with all free memory (marked NONE)");
    else
        snprintf(cg_note, sizeof cg_note, "--no-cgroup: pagecache and mmap run with all free "
                 "memory (marked NONE)");
    bench_print_header(&env, &sim, cg_note);

    int all_ok = 1;
    for (int m = 0; m < BENCH_N_MODES; m++) {
        if (!(cfg.modes & 1u << m))
            continue;
        bench_run_mode(&env, m, cfg.memory, &res[n_res]);
        all_ok &= res[n_res].ok;
        n_res++;
    }
    bench_print_table(&env, res, n_res);

    for (int i = 0; i < cfg.n_sweep; i++) {
        bench_point *p = &pts[n_pts++];
        memset(p, 0, sizeof *p);
        if (simulate(&env, keys, n_keys, &steps, cfg.sweep[i], &p->sim) < 0)
            goto done;
        bench_run_mode(&env, BENCH_SMOE_LRU, cfg.sweep[i], &p->lru);
        bench_run_mode(&env, BENCH_SMOE_REUSE, cfg.sweep[i], &p->reuse);
        bench_run_mode(&env, BENCH_PAGECACHE, cfg.sweep[i], &p->pagecache);
        all_ok &= p->lru.ok && p->reuse.ok && p->pagecache.ok;
        if (i == 0)
            printf("\nsweep: hit rates; simulated: LRU, decayed LFU, reuse, Belady; measured: "
                   "the library under lru and reuse, the page cache\n"
                   "       %-10s %6s %7s %7s %7s %7s %9s %10s %9s\n", "MiB", "slots", "LRU",
                   "LFU", "reuse", "Belady", "smoe-lru", "smoe-reuse", "pagecache");
        printf("       %-10.1f %6u %7.3f %7.3f %7.3f %7.3f %9.3f %10.3f %9.3f%s\n",
               (double)cfg.sweep[i] / 1048576.0, p->sim.slots, p->sim.lru, p->sim.lfu,
               p->sim.reuse, p->sim.opt,
               p->lru.requests ? (double)p->lru.hits / (double)p->lru.requests : 0.0,
               p->reuse.requests ? (double)p->reuse.hits / (double)p->reuse.requests : 0.0,
               p->pagecache.requests
                   ? (double)p->pagecache.hits / (double)p->pagecache.requests : 0.0,
               p->lru.ok && p->reuse.ok && p->pagecache.ok ? ""
                                                           : "  (a run failed, see the JSON)");
        fflush(stdout);
    }
    if (bench_write_json(&env, &sim, res, n_res, pts, n_pts, cg_note) < 0)
        all_ok = 0;
    if (bench_write_plot(&env, pts, n_pts) < 0)
        all_ok = 0;
    rc = all_ok ? 0 : 1;
done:
    simp_steps_free(&steps);
    free(keys);
    free(env.blobs);
    tool_trace_free(&env.trace);
    return rc;
}
