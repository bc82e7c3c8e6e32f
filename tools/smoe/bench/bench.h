/*
 * bench.h - `smoe bench`: replay a routing trace against a vault through the
 * library and through the operating system's caches, side by side.
 *
 * Every mode runs in a child process (fork), so each has its own peak RSS
 * and CPU time and the page-cache modes can be put in a memory cgroup; the
 * child leaves its bench_result in memory it shares with the parent.
 */
#ifndef SMOE_TOOL_BENCH_H
#define SMOE_TOOL_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "tool.h"
#include "trace.h"

/* Memory the benchmark process itself needs inside a cgroup (binary,
 * libraries, stacks, scratch), on top of the cache budget. */
#define BENCH_PROCESS_SLACK (16ull << 20)

typedef enum bench_mode {
    BENCH_SMOE = 0,
    BENCH_SMOE_SPEC, /* the library with speculation (when asked for) */
    BENCH_PAGECACHE,
    BENCH_MMAP,
    BENCH_DIRECT,
    BENCH_SMOE_LRU,   /* the library under SMOE_EVICT_LRU (--sweep, or asked for) */
    BENCH_SMOE_REUSE, /* the library under SMOE_EVICT_REUSE */
    BENCH_SMOE_HINT,  /* the library with hints of a simulated predictor (--spec-recall),
                       * one run per recall: "smoe+recall=R" */
    BENCH_N_MODES
} bench_mode;

const char *bench_mode_name(bench_mode mode);
#define BENCH_MAX_RECALL 8

/* Access advice for the page-cache modes (--os-advice). */
typedef enum bench_advice {
    BENCH_ADVICE_NORMAL = 0, /* the kernel's default read-ahead */
    BENCH_ADVICE_RANDOM,     /* POSIX_FADV_RANDOM / MADV_RANDOM: no read-ahead */
    BENCH_ADVICE_WILLNEED    /* random, plus WILLNEED on each expert before reading it */
} bench_advice;
const char *bench_advice_name(bench_advice advice);

/* What the command line asked for. */
typedef struct bench_cfg {
    const char *vault;
    const char *trace_path;
    const char *json_path;
    const char *plot_path;
    unsigned modes;          /* bit per enum bench_mode */
    uint64_t memory;         /* cache bytes: ring, cgroup limit */
    uint32_t workers;        /* library workers and OS-mode reader threads */
    uint32_t compute_us;     /* simulated compute per (token, layer) */
    int compute_auto;        /* --compute-us auto: compute_us measured (bench_compute.c) */
    uint32_t spec;           /* speculative gate ranks per row */
    int spec_next_layer;     /* prefetch the previous token's next-layer experts */
    uint64_t max_tokens;     /* replay at most this many tokens (0: all) */
    uint32_t open_flags;     /* SMOE_OPEN_* */
    uint32_t verify;         /* SMOE_VERIFY_* */
    uint32_t chunk;          /* library read chunk (0: its default) */
    uint32_t eviction;       /* SMOE_EVICT_* of smoe and smoe+spec (0: the default) */
    int drop_caches;         /* drop the page cache before each mode (needs root) */
    int use_cgroup;          /* limit the page-cache modes (needs root) */
    int progress;            /* progress line on stderr */
    bench_advice os_advice;  /* pagecache/mmap */
    int cache_only;          /* cgroup limit also covers the OS modes' buffers */
    uint32_t idle_ms;        /* library: idle this long after open, then busy
                              * for the replay (0: no idle, busy never set) */
    double recall[BENCH_MAX_RECALL]; /* --spec-recall: the simulated predictors' recalls */
    int n_recall;
    uint64_t sweep[32];      /* --sweep: cache sizes in bytes */
    int n_sweep;
    tool_replicas replicas;  /* --replica: copies of the vault (library modes) */
} bench_cfg;

/* A range of a file the page-cache modes read for one expert: a packed
 * vault's blob, or one of an index vault's reads of its sources (the
 * library's, at a 4 KiB alignment: extent.h). */
typedef struct bench_seg {
    uint32_t file;     /* index into bench_env.files */
    uint64_t off, len;
    uint64_t dst;      /* where in the expert's buffer */
} bench_seg;

/* One (layer, expert) of the vault as the replay needs it. */
typedef struct bench_blob {
    uint64_t offset;   /* its first range's offset */
    uint64_t padded;   /* bytes the library's slot holds; 0: absent */
    uint32_t first_seg, n_seg;
} bench_blob;

/* What every mode shares: the trace, the vault's geometry. */
typedef struct bench_env {
    const bench_cfg *cfg;
    tool_trace trace;
    size_t n_tokens;          /* tokens replayed */
    uint64_t requests;        /* ranked expert requests in those tokens */
    uint32_t layers, experts; /* the vault's shape */
    uint32_t max_k;           /* most experts in one row */
    uint64_t slot_bytes;      /* the vault's largest padded blob */
    uint64_t total_padded;
    uint64_t file_size;
    bench_blob *blobs;        /* layers x experts; padded 0 when absent */
    bench_seg *segs;          /* the blobs' ranges */
    char **files;             /* what the page-cache modes read: the vault, or an
                                 index vault's source files */
    uint64_t *file_sizes;
    uint32_t n_files;
    double overlap;
    int read_ahead_kb;        /* the vault's block device read-ahead, -1 unknown */
} bench_env;

/* One run of one mode. Plain data: the child leaves it in shared memory. */
typedef struct bench_result {
    bench_mode mode;
    int ok;
    char error[512];
    uint64_t memory;          /* cache bytes this run was given */
    uint32_t slots;           /* ring slots (smoe), equivalent slots otherwise */
    uint64_t tokens, requests;
    uint64_t hits, joins, misses;
    uint64_t bytes_read;      /* from the device: exact (smoe, direct) or
                               * the kernel's per-process count (others) */
    uint64_t bytes_requested; /* requests x padded size: what the engine got */
    double elapsed_s;
    double cpu_user_s, cpu_sys_s;
    double wait_mean_us, wait_p50_us, wait_p99_us; /* per token */
    double wait_first_us;     /* the first token's wait */
    double wait_first10_us;   /* mean wait of the first 10 tokens (or all, if fewer) */
    double wait_total_s;
    uint64_t peak_rss, start_rss;
    int memory_limited;       /* ran inside a cgroup limited to cgroup_limit */
    uint64_t cgroup_limit;
    uint64_t cgroup_peak;     /* the cgroup's peak usage (0 if unknown) */
    int caches_dropped;
    char hit_method[16];      /* "library", "mincore", "none" */
    /* library only */
    uint64_t io_mode, verify, workers, full, claim_waits;
    uint64_t spec_issued, spec_queued, spec_skipped, spec_used, spec_wasted_bytes;
    uint64_t spec_upgraded, spec_cancelled, evictions;
    uint64_t eviction;        /* SMOE_EVICT_* in effect */
    uint64_t evict_scans, evict_scanned;
    uint64_t chunk_bytes;     /* time from prefetch to READY, per load: */
    uint64_t ready_demand_p50_ns, ready_demand_p99_ns, ready_spec_p50_ns, ready_spec_p99_ns;
    uint64_t freq_status;     /* SMOE_FREQ_*: the histogram found at open */
    uint64_t prewarm_slots, prewarm_passes, prewarm_reads, prewarm_hits;
    uint64_t prewarm_reads_idle; /* pre-warm reads queued before the first token */
    uint64_t warmup_loaded_idle; /* experts smoe_warmup loaded before the first token */
    uint64_t warmup_bytes_idle;  /* and their bytes */
    uint64_t copies;          /* the vault and its replicas */
    uint64_t copy_reads[16], copy_failed[16]; /* per copy (smoe_get_replica_stats) */
    /* smoe+recall=R: the simulated predictor's hints (bench_predict.h) */
    char name[32];            /* "smoe+recall=R"; empty: the mode's name */
    double recall;            /* R asked for */
    uint64_t hints_issued;    /* smoe_prefetch_hint calls */
    uint64_t hints_true;      /* of which the expert was in the next row */
    uint64_t hint_rows_truth; /* true experts of the rows hinted for */
    uint64_t hint_cancelled;  /* the library's: hinted reads cancelled */
} bench_result;

/* r's name in tables and JSON: r->name, else its mode's. */
const char *bench_result_name(const bench_result *r);

/* Per-token wait accounting and the progress line, shared by the loops
 * (bench_clock.c). */
typedef struct bench_clock {
    const bench_env *env;
    const char *label;
    uint64_t *wait_ns;        /* per token */
    uint64_t t_start, next_progress;
    uint64_t hits, requests;
} bench_clock;

int bench_clock_init(bench_clock *c, const bench_env *env, const char *label);
void bench_clock_token(bench_clock *c, size_t tok); /* after token tok */
/* Fill the timing fields of r (elapsed, waits, CPU, RSS) and free c. */
void bench_clock_finish(bench_clock *c, bench_result *r, double cpu0_user,
                        double cpu0_sys);
void bench_spin_us(uint32_t us);
/* --compute-us auto: the median time of k float32 matrix-vector products
 * over blobs of blob_bytes, each its own buffer (bench_compute.c); 0 when
 * out of memory. */
uint32_t bench_measure_compute_us(uint64_t blob_bytes, uint32_t k);

/* The mode loops (bench_smoe.c, bench_os.c; run in the child). Fill r;
 * r->ok = 1 on success. */
void bench_run_smoe(const bench_env *env, int spec, uint64_t memory, bench_result *r);
void bench_run_os(const bench_env *env, bench_mode mode, uint64_t memory, bench_result *r);

/* The cgroup limit of the page-cache modes at a cache budget of memory. */
uint64_t bench_cgroup_limit(const bench_env *env, uint64_t memory);

/* Run one mode in a child (bench_run.c): drop caches, cgroup when asked,
 * collect. */
void bench_run_mode(const bench_env *env, bench_mode mode, uint64_t memory, bench_result *r);
/* The smoe+recall=R mode at recall R. */
void bench_run_recall(const bench_env *env, double recall, uint64_t memory, bench_result *r);

/* cgroups and the page cache (bench_cgroup.c). */
typedef struct bench_cgroup {
    char path[4096]; /* the cgroup's directory */
    int version;     /* 1 or 2 */
} bench_cgroup;

/* Create a memory cgroup limited to limit bytes; 0 or -1 with why in err. */
int bench_cgroup_create(bench_cgroup *cg, uint64_t limit, char *err, size_t errlen);
int bench_cgroup_attach(const bench_cgroup *cg, int pid, char *err, size_t errlen);
/* Peak usage if the controller tracks it (v1 max_usage, v2 memory.peak), else 0. */
uint64_t bench_cgroup_peak(const bench_cgroup *cg);
void bench_cgroup_remove(bench_cgroup *cg);
/* sync and drop the page cache; 0, or -1 with why in err. */
int bench_drop_caches(char *err, size_t errlen);

/* Offline simulation at one cache size. */
typedef struct bench_sim {
    uint64_t memory;
    uint32_t slots;
    double lru, opt;  /* every request in trace order (sim.h) */
    double lfu;       /* decayed LFU, replayed layer step by step (sim_policy.h) */
    double reuse;     /* the reuse policy, likewise */
} bench_sim;

/* One point of --sweep: the library under each policy, the page cache. */
typedef struct bench_point {
    bench_sim sim;
    bench_result lru, reuse, pagecache;
} bench_point;

/* Reports (bench_report.c). */
void bench_print_header(const bench_env *env, const bench_sim *sim, const char *cg_note);
void bench_print_table(const bench_env *env, const bench_result *res, int n);
int bench_write_json(const bench_env *env, const bench_sim *sim, const bench_result *res,
                     int n, const bench_point *pts, int n_pts, const char *cg_note);
int bench_write_plot(const bench_env *env, const bench_point *pts, int n_pts);

#endif
