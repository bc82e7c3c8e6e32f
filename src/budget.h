/*
 * budget.h - sizing the ring from the memory the machine can spare
 * (docs/budget.md).
 *
 * Two halves. The parsers and smoe__budget_compute() are pure: they take
 * text and numbers and touch nothing else, so every input case is tested
 * with fixture text. smoe__mem_probe() is the small platform reader that
 * feeds them: /proc/meminfo, /proc/self/cgroup and /proc/self/mountinfo
 * and the memory cgroup files on Linux (through the smoe__io table),
 * sysctl on macOS.
 */
#ifndef SMOE_BUDGET_H
#define SMOE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"

struct smoe_stream;
struct smoe_open_opts;
struct smoe_stats;

/* The constants of docs/budget.md. */
#define SMOE__BUDGET_OVERHEAD (1ull << 30)      /* fixed engine overhead: 1 GiB */
#define SMOE__BUDGET_OS_FLOOR_MIN (4ull << 30)  /* OS floor: max(RAM / 8, 4 GiB) */
#define SMOE__BUDGET_OS_FLOOR_DIV 8u
#define SMOE__BUDGET_FALLBACK_PCT 25u           /* floor: 25% of free memory */
#define SMOE__BUDGET_MIN_SLOTS 64u
#define SMOE__BUDGET_MAX_SLOTS 4096u

/* A limit that does not limit ("max", or cgroup v1's huge default). */
#define SMOE__NO_LIMIT UINT64_MAX
/* cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712
 * with 4 KiB pages); anything at or over 2^62 bytes is treated as none. */
#define SMOE__CG_V1_UNLIMITED (1ull << 62)

/* ---- pure parsers ----------------------------------------------------- */

/*
 * /proc/meminfo text: MemTotal and MemAvailable in bytes.
 * @return 0; SMOE_EFORMAT when either is missing or not "<n> kB".
 */
int smoe__parse_meminfo(const char *text, uint64_t *total, uint64_t *available);

/*
 * One cgroup value file ("4294967296\n", cgroup v2 "max\n"): bytes, or
 * SMOE__NO_LIMIT for "max" and for values at or over SMOE__CG_V1_UNLIMITED.
 * @return 0; SMOE_EFORMAT for anything else (empty, garbage, negative,
 * trailing text, overflow).
 */
int smoe__parse_cg_value(const char *text, uint64_t *value);

/*
 * /proc/self/cgroup text: the path of the cgroup v1 hierarchy that has the
 * memory controller, and of the cgroup v2 unified hierarchy ("0::/path").
 * @return bit 1: v1 memory found; bit 2: v2 found (0: neither).
 */
int smoe__parse_proc_cgroup(const char *text, char *v1, size_t v1_cap, char *v2,
                            size_t v2_cap);

/* Where a cgroup hierarchy is mounted: its root inside the hierarchy and
 * the mount point. */
typedef struct smoe__cg_mount {
    char root[256];
    char point[256];
    int found;
} smoe__cg_mount;

/*
 * /proc/self/mountinfo text: the cgroup v1 mount carrying the memory
 * controller and the cgroup2 mount (first of each; octal escapes such as
 * \040 decoded). Malformed lines are skipped.
 */
void smoe__parse_mountinfo(const char *text, smoe__cg_mount *v1, smoe__cg_mount *v2);

/*
 * The directory of cgroup `path` under a mount: point + (path minus root).
 * @return 0; -1 when path is not under root or the result does not fit.
 */
int smoe__cg_dir(const smoe__cg_mount *m, const char *path, char *out, size_t cap);

/* ---- the platform reader ---------------------------------------------- */

#define SMOE__CG_MAX_LEVELS 16

/* One memory cgroup on the way from the process's own up to its mount. */
typedef struct smoe__cg_level {
    char dir[320];
    int version;        /* 1 or 2 */
    uint64_t limit;     /* SMOE__NO_LIMIT: none */
    uint64_t usage;
} smoe__cg_level;

typedef struct smoe__mem_probe {
    int have_mem;            /* mem_total and mem_available were read */
    uint64_t mem_total;      /* RAM */
    uint64_t mem_available;  /* MemAvailable; macOS: memorystatus_level x memsize */
    const char *mem_source;  /* "/proc/meminfo", "sysctl" or NULL */
    uint32_t n_levels;       /* cgroups read, the process's own first */
    smoe__cg_level level[SMOE__CG_MAX_LEVELS];
    int cg_version;          /* of the tightest limit; 0: no limit found */
    uint64_t cg_limit;       /* tightest: smallest limit - usage; SMOE__NO_LIMIT: none */
    uint64_t cg_usage;
    uint64_t cg_room;        /* cg_limit - cg_usage (0 if over); SMOE__NO_LIMIT: none */
    char note[640];          /* what could not be read, or "" */
    int nomem;               /* a file went unread for want of memory */
} smoe__mem_probe;

/*
 * Read the machine's memory figures through io (Linux) or sysctl (macOS).
 * Never fails: what cannot be read is left out (have_mem 0, no cgroup
 * level) and said in note; nomem says when memory was what it lacked.
 */
void smoe__mem_probe_read(const smoe__io *io, smoe__mem_probe *p);

/* ---- the computation -------------------------------------------------- */

typedef struct smoe__budget_in {
    uint64_t slot_bytes;     /* the slot stride (16 KiB multiple) */
    int have_mem;
    uint64_t mem_total, mem_available;
    uint64_t cg_room;        /* SMOE__NO_LIMIT: no container limit */
    uint64_t cg_limit, cg_usage; /* reported only */
    uint64_t scout_bytes, overhead_bytes, reserve_bytes;
    uint32_t layers;
    uint32_t vault_entries;  /* blobs in the vault: no use for more slots; 0: no cap */
    uint32_t top_k;          /* 0: unknown */
    uint32_t explicit_slots; /* 0: automatic */
} smoe__budget_in;

typedef struct smoe__budget {
    smoe__budget_in in;
    unsigned rules;          /* SMOE_BUDGET_* */
    uint64_t free_bytes;     /* min(mem_available, cg_room) */
    uint64_t os_floor;       /* max(mem_total / 8, 4 GiB) */
    uint64_t after[4];       /* free minus scout, overhead, reserve, floor (>= 0) */
    uint64_t budget_bytes;   /* after[3] */
    uint64_t slots_budget;   /* budget_bytes / slot_bytes */
    uint64_t slots_fallback; /* 25% of free / slot_bytes */
    uint64_t slots_cap;      /* cg_room / slot_bytes; UINT64_MAX: none */
    uint64_t step[4];        /* slots after the floor, the clamp, the cgroup cap and
                              * the vault cap */
    uint32_t slots;          /* the ring */
    uint64_t working_set;    /* layers x top_k; 0: unknown */
    int cliff;               /* slots < working_set */
} smoe__budget;

/*
 * Slots for the ring (docs/budget.md): explicit, or free memory minus the
 * scout file, the engine overhead, the engine's reserve and the OS floor,
 * divided by the slot size; then raised to the 25% fallback, clamped to
 * [64, 4096], capped at the container's room and at the vault's blob
 * count. Pure.
 * @return 0 (out filled, cliff set when the ring holds less than one
 * token's working set); SMOE_ESMALLRING when it holds less than one
 * layer's top-k (or no slot at all), with a message naming both counts.
 */
int smoe__budget_compute(const smoe__budget_in *in, smoe__budget *out);
/* Copy a probe's memory and cgroup figures into in. */
void smoe__budget_in_probe(smoe__budget_in *in, const smoe__mem_probe *p);

/* ---- the stream's use ------------------------------------------------- */

/*
 * smoe_open: choose the slot count for slot size `stride` from the options
 * (probing memory when ring_slots is 0), fail below one layer's top-k, log
 * the cliff. The result stays in s->budget for smoe_get_stats.
 */
int smoe__budget_open(struct smoe_stream *s, const struct smoe_open_opts *o,
                      uint64_t stride, uint32_t *nslots);
/* Copy the budget figures into a stats snapshot. */
void smoe__budget_stats(const struct smoe_stream *s, struct smoe_stats *st);

#endif
