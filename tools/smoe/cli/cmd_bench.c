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
#if defined(__linux__)
#include <sys/sysmacros.h>
#endif
#endif
#include <unistd.h>

#include "smoe/smoe.h"
#include "args.h"
#include "bench.h"
#include "os.h"
#include "smoe_tier.h"
#include "sim.h"
#include "sim_policy.h"
#include "tool.h"

static void usage(FILE *f)
{
    fprintf(f,
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
        "  --compute-us N    simulated compute per token and layer (default 0); auto:\n"
        "                    the time of top-k float32 matrix-vector products over\n"
        "                    blobs of the slot size on this CPU, measured at start\n"
        "  --tokens N        replay only the first N tokens\n"
        "  --spec N          also run smoe with the next N gate ranks prefetched\n"
        "                    speculatively (when the trace has them)\n"
        "  --spec-next-layer also run smoe prefetching the previous token's experts of\n"
        "                    the next layer speculatively\n"
        "  --spec-recall LIST for each recall R of a comma list (in [0, 1], at most 8),\n"
        "                    also run smoe+recall=R: at each layer's demand, hints\n"
        "                    (smoe_prefetch_hint) of a simulated router lookahead for\n"
        "                    the next layer, each guess the true expert with\n"
        "                    probability R, else drawn from the layer's popularity,\n"
        "                    with calibrated probabilities (1: a perfect predictor)\n"
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
        "  --idle-ms N       leave the library idle N ms after open, with smoe_warmup\n"
        "                    filling the ring at the drive's speed (cancelled at the\n"
        "                    end) and pre-warm free to run, then mark it busy\n"
        "                    (smoe_set_busy) for the replay (default 0: no idle time,\n"
        "                    no warm-up, busy never set)\n"
        "  --allow-buffered  let the library fall back to buffered reads\n"
        "  --no-drop-caches  keep the page cache between modes\n"
        "  --no-cgroup       never limit the page-cache modes\n"
        "  --cache-only      equal cache rather than equal memory: the cgroup limit\n"
        "                    also covers pagecache's and mmap's per-layer buffers\n"
        "  --os-advice A     pagecache and mmap access advice: normal (default: the\n"
        "                    kernel's read-ahead), random (FADV/MADV_RANDOM: none), or\n"
        "                    willneed (random, plus WILLNEED of each expert's bytes\n"
        "                    just before reading it)\n"
        "  --replica PATH    a copy of the vault on another drive: the library's reads\n"
        "                    are spread over the vault and its copies (repeatable;\n"
        "                    docs/replicas.md)\n"
        "  --no-progress     no progress line on stderr\n");
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

static int add_mode(void *u, const char *m)
{
    static const char *const names[] = {"smoe", "pagecache", "mmap", "direct", "smoe-lru",
                                        "smoe-reuse"};
    static const unsigned bits[] = {1u << BENCH_SMOE, 1u << BENCH_PAGECACHE, 1u << BENCH_MMAP,
                                    1u << BENCH_DIRECT, 1u << BENCH_SMOE_LRU,
                                    1u << BENCH_SMOE_REUSE};
    unsigned *modes = u;
    if (!strcmp(m, "all")) {
        *modes |= bits[0] | bits[1] | bits[2] | bits[3];
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(m, names[i])) {
            *modes |= bits[i];
            return 0;
        }
    return -1;
}

static int parse_modes(const char *s, unsigned *modes)
{
    *modes = 0;
    return tool_each_item(s, add_mode, modes) || !*modes ? -1 : 0;
}

/* The files the page-cache modes read, and each blob's ranges in them: a
 * packed vault's blob, or an index vault's reads of its sources. */
static int bench_files(bench_env *env, const smoe__vault *v, const char *path)
{
    const int index = v->version == SMOE__VAULT_VERSION_INDEX;
    size_t n = (size_t)v->layers * v->experts;
    env->n_files = index ? v->n_sources : 1;
    env->files = calloc(env->n_files, sizeof *env->files);
    env->file_sizes = calloc(env->n_files, sizeof *env->file_sizes);
    env->blobs = calloc(n, sizeof *env->blobs);
    env->segs = calloc(index ? v->n_segs : v->entries, sizeof *env->segs);
    if (!env->files || !env->file_sizes || !env->blobs || !env->segs)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < env->n_files; i++) {
        char p[4096];
        if (index && smoe__source_path(v, i, p, sizeof p) < 0)
            return SMOE_EINVAL;
        /* The page-cache modes read the sources directly: only ones that
         * pass smoe_open's checks (docs/security.md). */
        smoe__source_state st;
        int rc = index ? smoe__source_check(v, i, smoe__io_get(), &st) : 0;
        if (rc < 0)
            return rc;
        if (!(env->files[i] = strdup(index ? p : path)))
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        env->file_sizes[i] = index ? v->sources[i].size : v->file_size;
    }
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const smoe__vault_entry *e = &v->index[i];
        bench_blob *b = &env->blobs[i];
        if (!e->present)
            continue;
        b->padded = e->padded;
        b->first_seg = k;
        if (!index) {
            env->segs[k++] = (bench_seg){0, e->offset, e->padded, 0};
        } else {
            const smoe__vault_xentry *x = &v->xent[i];
            for (uint32_t j = 0; j < x->n_seg; j++) {
                const smoe__vault_seg *sg = &v->segs[x->first_seg + j];
                env->segs[k++] = (bench_seg){sg->source, sg->file_off, sg->len, sg->slot_off};
            }
        }
        b->n_seg = k - b->first_seg;
        b->offset = env->segs[b->first_seg].off;
    }
    return 0;
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
    rc = bench_files(env, &v, path);
    smoe__vault_free(&v);
    if (rc < 0)
        return tool_error("bench", "%s", smoe_last_error()), -1;
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

enum {
    OPT_PREWARM = 1, OPT_FREQ, OPT_ALLOW_BUFFERED, OPT_MODE, OPT_WORKERS, OPT_COMPUTE,
    OPT_IDLE, OPT_SPEC, OPT_TOKENS, OPT_ADVICE, OPT_EVICTION, OPT_VERIFY, OPT_RECALL, OPT_CHUNK,
    OPT_REPLICA
};

/* A word of a list of names: its value, or -1. */
static int word_of(const char *v, const char *const *names, const int *values, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return values[i];
    return -1;
}

/* Options that need converting: 0, or nonzero when the value is bad. */
/* One recall of --spec-recall's list, in [0, 1]. */
static int add_recall(void *u, const char *item)
{
    bench_cfg *c = u;
    char *end;
    double r = strtod(item, &end);
    if (end == item || *end || !(r >= 0.0 && r <= 1.0) || c->n_recall >= BENCH_MAX_RECALL)
        return 1;
    c->recall[c->n_recall++] = r;
    return 0;
}

static int convert(bench_cfg *c, int id, const char *v)
{
    static const char *const advice[] = {"normal", "random", "willneed"};
    static const int advice_v[] = {BENCH_ADVICE_NORMAL, BENCH_ADVICE_RANDOM,
                                   BENCH_ADVICE_WILLNEED};
    static const char *const evict[] = {"lru", "reuse"}, *const onoff[] = {"on", "off"};
    static const int evict_v[] = {SMOE_EVICT_LRU, SMOE_EVICT_REUSE},
                     onoff_v[] = {SMOE_VERIFY_ON, SMOE_VERIFY_OFF};
    uint32_t u32;
    uint64_t c64;
    int w;
    switch (id) {
    case OPT_MODE: return parse_modes(v, &c->modes);
    case OPT_WORKERS: return tool_parse_u32(v, 1, 256, &c->workers);
    case OPT_COMPUTE:
        if (strcmp(v, "auto") == 0)
            return !(c->compute_auto = 1);
        return tool_parse_u32(v, 0, 10000000, &c->compute_us);
    case OPT_IDLE: return tool_parse_u32(v, 0, 600000, &c->idle_ms);
    case OPT_SPEC: return tool_parse_u32(v, 0, TRACE_MAX_SPEC, &c->spec);
    case OPT_RECALL:
        c->n_recall = 0;
        return tool_each_item(v, add_recall, c) || !c->n_recall;
    case OPT_TOKENS:
        if (tool_parse_u32(v, 1, UINT32_MAX, &u32))
            return 1;
        c->max_tokens = u32;
        return 0;
    case OPT_ADVICE:
        if ((w = word_of(v, advice, advice_v, 3)) < 0)
            return 1;
        c->os_advice = w;
        return 0;
    case OPT_EVICTION:
        if ((w = word_of(v, evict, evict_v, 2)) < 0)
            return 1;
        c->eviction = (uint32_t)w;
        return 0;
    case OPT_VERIFY:
        if ((w = word_of(v, onoff, onoff_v, 2)) < 0)
            return 1;
        c->verify = (uint32_t)w;
        return 0;
    default: /* OPT_CHUNK */
        if (tool_parse_size(v, &c64) || c64 == 0 || c64 % 16384 || c64 > 0xFFFFC000ull)
            return 1;
        c->chunk = (uint32_t)c64;
        return 0;
    }
}

static int bench_opt(void *ctx, const tool_opt *o, const char *v)
{
    bench_cfg *c = ctx;
    if (o->id == OPT_PREWARM)
        c->open_flags &= ~(uint32_t)SMOE_OPEN_NO_PREWARM;
    else if (o->id == OPT_FREQ)
        c->open_flags &= ~(uint32_t)SMOE_OPEN_NO_FREQ;
    else if (o->id == OPT_ALLOW_BUFFERED)
        c->open_flags |= SMOE_OPEN_ALLOW_BUFFERED;
    else if (o->id == OPT_REPLICA)
        return tool_replica_add(&c->replicas, "bench", v);
    else if (convert(c, o->id, v))
        return tool_error("bench", "%s '%s': out of range or malformed (see --help)", o->name,
                          v) + 1;
    return -1;
}

/* The command line into cfg; *mem and *sweep get --memory and --sweep as
 * written (they are sized against the vault later). */
static int parse_args(int argc, char **argv, bench_cfg *cfg, const char **mem,
                      const char **sweep)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->workers = 16;
    cfg->modes = 1u << BENCH_SMOE;
    cfg->open_flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_EXTENTS;
    cfg->progress = isatty(2);
    cfg->drop_caches = cfg->use_cgroup = tool_os_privileged();
    *mem = "25%";
    *sweep = NULL;
    const tool_opt opts[] = {
        TOOL_FLAG("--spec-next-layer", &cfg->spec_next_layer, 1),
        TOOL_FLAG("--no-drop-caches", &cfg->drop_caches, 0),
        TOOL_FLAG("--no-cgroup", &cfg->use_cgroup, 0),
        TOOL_FLAG("--cache-only", &cfg->cache_only, 1),
        TOOL_FLAG("--no-progress", &cfg->progress, 0),
        TOOL_CALL("--prewarm", OPT_PREWARM),
        TOOL_CALL("--freq", OPT_FREQ),
        TOOL_CALL("--allow-buffered", OPT_ALLOW_BUFFERED),
        TOOL_TEXT("--vault", &cfg->vault),
        TOOL_TEXT("--trace", &cfg->trace_path),
        TOOL_TEXT("--json", &cfg->json_path),
        TOOL_TEXT("--plot", &cfg->plot_path),
        TOOL_TEXT("--memory", mem),
        TOOL_TEXT("--sweep", sweep),
        TOOL_VALUE("--mode", OPT_MODE),
        TOOL_VALUE("--workers", OPT_WORKERS),
        TOOL_VALUE("--compute-us", OPT_COMPUTE),
        TOOL_VALUE("--idle-ms", OPT_IDLE),
        TOOL_VALUE("--spec", OPT_SPEC),
        TOOL_VALUE("--spec-recall", OPT_RECALL),
        TOOL_VALUE("--tokens", OPT_TOKENS),
        TOOL_VALUE("--os-advice", OPT_ADVICE),
        TOOL_VALUE("--eviction", OPT_EVICTION),
        TOOL_VALUE("--verify", OPT_VERIFY),
        TOOL_VALUE("--chunk", OPT_CHUNK),
        TOOL_VALUE("--replica", OPT_REPLICA),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = "bench", .usage = usage, .opts = opts,
        .no_value = "%s: expected a value (see --help)",
        .unknown = "unknown option '%s' (see --help)",
        .unexpected = "unknown option '%s' (see --help)",
    };
    int rc = tool_args_parse(&cli, argc, argv, bench_opt, cfg);
    if (rc < 0 && (!cfg->vault || !cfg->trace_path))
        rc = tool_error("bench", "--vault and --trace are required (see --help)") + 1;
    return rc;
}

typedef struct sweep_list {
    const bench_env *env;
    bench_cfg *cfg;
} sweep_list;

static int add_sweep(void *u, const char *item)
{
    sweep_list *sl = u;
    bench_cfg *cfg = sl->cfg;
    if (cfg->n_sweep == 32 || parse_mem(item, sl->env->total_padded, &cfg->sweep[cfg->n_sweep]))
        return -1;
    cfg->n_sweep++;
    return 0;
}

/* --memory and --sweep against the vault; each size must hold a layer. */
static int size_caches(bench_env *env, bench_cfg *cfg, const char *mem, const char *sweep)
{
    if (parse_mem(mem, env->total_padded, &cfg->memory) < 0)
        return tool_error("bench", "--memory '%s': expected bytes (300M, 4G) or a share "
                          "(10%%)", mem);
    sweep_list sl = {env, cfg};
    if (sweep && tool_each_item(sweep, add_sweep, &sl))
        return tool_error("bench", "--sweep '%s': expected up to 32 sizes or shares, "
                          "comma-separated", sweep);
    uint64_t need = (uint64_t)env->max_k * env->slot_bytes;
    for (int i = -1; i < cfg->n_sweep; i++) {
        uint64_t m = i < 0 ? cfg->memory : cfg->sweep[i];
        if (m < need)
            return tool_error("bench", "a cache of %llu bytes holds %llu slots of %llu bytes; "
                              "one layer needs %u", (unsigned long long)m,
                              (unsigned long long)(m / env->slot_bytes),
                              (unsigned long long)env->slot_bytes, env->max_k);
    }
    return 0;
}

/* The trace, the vault and the cache sizes: 0, or 1 after saying why. */
static int load_env(bench_env *env, bench_cfg *cfg, const char *mem, const char *sweep)
{
    memset(env, 0, sizeof *env);
    env->cfg = cfg;
    char err[700];
    if (tool_trace_load(&env->trace, cfg->trace_path, err, sizeof err))
        return tool_error("bench", "%s", err);
    env->n_tokens = env->trace.n_tokens;
    if (cfg->max_tokens && cfg->max_tokens < env->n_tokens)
        env->n_tokens = cfg->max_tokens;
    env->requests = env->trace.row_off[env->trace.tok_row[env->n_tokens]];
    env->max_k = env->trace.max_k;
    env->overlap = tool_trace_overlap(&env->trace, env->n_tokens);
    if (load_vault(env, cfg->vault) < 0)
        return 1;
    env->read_ahead_kb = read_ahead_kb(env->files[0]);
    if (size_caches(env, cfg, mem, sweep))
        return 1;
    if (cfg->compute_auto)
        cfg->compute_us = bench_measure_compute_us(env->slot_bytes, env->max_k);
    if ((cfg->spec || cfg->spec_next_layer) && (cfg->modes & 1u << BENCH_SMOE))
        cfg->modes |= 1u << BENCH_SMOE_SPEC;
    if (cfg->spec && !env->trace.max_spec)
        fprintf(stderr, "smoe bench: --spec %u: trace %s has no speculative ranks; only "
                "--spec-next-layer can speculate on it\n", cfg->spec, cfg->trace_path);
    return 0;
}

/* What the header says about the page-cache modes' memory limit. */
static void cgroup_note(const bench_env *env, char *note, size_t n)
{
    const bench_cfg *cfg = env->cfg;
    if (cfg->use_cgroup)
        snprintf(note, n, "pagecache and mmap run in a memory cgroup limited to %.1f MiB (the "
                 "budget plus %llu MiB for the process%s)",
                 (double)bench_cgroup_limit(env, cfg->memory) / 1048576.0,
                 (unsigned long long)(BENCH_PROCESS_SLACK >> 20),
                 cfg->cache_only ? " plus their read buffers" : "");
    else if (!tool_os_privileged())
        snprintf(note, n, "%s: cannot limit pagecache and mmap, which run with all free "
                 "memory (marked NONE)",
#if defined(__linux__)
                 "not root"
#else
                 "no memory cgroups on this system"
#endif
        );
    else
        snprintf(note, n, "--no-cgroup: pagecache and mmap run with all free memory (marked "
                 "NONE)");
}

/* The offline replays every simulate() call shares. */
typedef struct sim_input {
    uint32_t *keys;
    size_t n_keys;
    simp_steps steps;
} sim_input;

static int sim_input_build(const bench_env *env, sim_input *in)
{
    memset(in, 0, sizeof *in);
    in->n_keys = sim_trace_keys(&env->trace, env->n_tokens, &in->keys);
    simp_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.tok_end = env->n_tokens;
    if (!in->keys || simp_steps_from_trace(&env->trace, &shape, &in->steps) < 0)
        return tool_error("bench", "out of memory");
    return 0;
}

static double hit_rate(const bench_result *r)
{
    return r->requests ? (double)r->hits / (double)r->requests : 0.0;
}

/* One point of --sweep: simulated and measured, printed as a table row. */
static int sweep_point(const bench_env *env, const sim_input *in, int i, bench_point *p)
{
    const bench_cfg *cfg = env->cfg;
    memset(p, 0, sizeof *p);
    if (simulate(env, in->keys, in->n_keys, &in->steps, cfg->sweep[i], &p->sim) < 0)
        return -1;
    bench_run_mode(env, BENCH_SMOE_LRU, cfg->sweep[i], &p->lru);
    bench_run_mode(env, BENCH_SMOE_REUSE, cfg->sweep[i], &p->reuse);
    bench_run_mode(env, BENCH_PAGECACHE, cfg->sweep[i], &p->pagecache);
    int ok = p->lru.ok && p->reuse.ok && p->pagecache.ok;
    if (i == 0)
        printf("\nsweep: hit rates; simulated: LRU, decayed LFU, reuse, Belady; measured: "
               "the library under lru and reuse, the page cache\n"
               "       %-10s %6s %7s %7s %7s %7s %9s %10s %9s\n", "MiB", "slots", "LRU",
               "LFU", "reuse", "Belady", "smoe-lru", "smoe-reuse", "pagecache");
    printf("       %-10.1f %6u %7.3f %7.3f %7.3f %7.3f %9.3f %10.3f %9.3f%s\n",
           (double)cfg->sweep[i] / 1048576.0, p->sim.slots, p->sim.lru, p->sim.lfu,
           p->sim.reuse, p->sim.opt, hit_rate(&p->lru), hit_rate(&p->reuse),
           hit_rate(&p->pagecache), ok ? "" : "  (a run failed, see the JSON)");
    fflush(stdout);
    return ok;
}

/* Every mode asked for, then every sweep point; all_ok or 0; -1 when the
 * simulators run out of memory. */
static int run_all(const bench_env *env, const sim_input *in, const char *cg_note)
{
    const bench_cfg *cfg = env->cfg;
    bench_sim sim;
    if (simulate(env, in->keys, in->n_keys, &in->steps, cfg->memory, &sim) < 0)
        return -1;
    bench_print_header(env, &sim, cg_note);
    bench_result res[BENCH_N_MODES + BENCH_MAX_RECALL];
    bench_point pts[32];
    int n_res = 0, n_pts = 0, all_ok = 1;
    for (bench_mode m = 0; m < BENCH_N_MODES; m++) {
        if (!(cfg->modes & 1u << m))
            continue;
        bench_run_mode(env, m, cfg->memory, &res[n_res]);
        all_ok &= res[n_res].ok;
        n_res++;
    }
    for (int i = 0; i < cfg->n_recall; i++) {
        bench_run_recall(env, cfg->recall[i], cfg->memory, &res[n_res]);
        all_ok &= res[n_res].ok;
        n_res++;
    }
    bench_print_table(env, res, n_res);
    for (int i = 0; i < cfg->n_sweep; i++) {
        int ok = sweep_point(env, in, i, &pts[n_pts++]);
        if (ok < 0)
            return -1;
        all_ok &= ok;
    }
    if (bench_write_json(env, &sim, res, n_res, pts, n_pts, cg_note) < 0)
        all_ok = 0;
    if (bench_write_plot(env, pts, n_pts) < 0)
        all_ok = 0;
    return all_ok;
}

int cmd_bench(int argc, char **argv)
{
    bench_cfg cfg;
    const char *mem, *sweep;
    int rc = parse_args(argc, argv, &cfg, &mem, &sweep);
    if (rc >= 0)
        return rc;
    bench_env env;
    sim_input in;
    memset(&in, 0, sizeof in);
    rc = 1;
    if (load_env(&env, &cfg, mem, sweep) == 0 && sim_input_build(&env, &in) == 0) {
        char cg_note[256];
        cgroup_note(&env, cg_note, sizeof cg_note);
        rc = run_all(&env, &in, cg_note) == 1 ? 0 : 1;
    }
    simp_steps_free(&in.steps);
    free(in.keys);
    free(env.blobs);
    free(env.segs);
    for (uint32_t i = 0; env.files && i < env.n_files; i++)
        free(env.files[i]);
    free(env.files);
    free(env.file_sizes);
    tool_trace_free(&env.trace);
    return rc;
}
