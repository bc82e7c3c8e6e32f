/*
 * mem.h - the machine's memory figures, which the ring's budget
 * (budget.h, docs/budget.md) is computed from: RAM, the memory available,
 * and the room under each memory cgroup that limits the process.
 * mem_linux.c reads /proc and the cgroup files (through the smoe__io
 * table), mem_darwin.c sysctl, mem_generic.c nothing.
 */
#ifndef SMOE_MEM_H
#define SMOE_MEM_H

#include <stdint.h>

#include "io.h"

/* A limit that does not limit ("max", or cgroup v1's huge default). */
#define SMOE__NO_LIMIT UINT64_MAX
/* cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712
 * with 4 KiB pages); anything at or over 2^62 bytes is treated as none. */
#define SMOE__CG_V1_UNLIMITED (1ull << 62)

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

#endif
