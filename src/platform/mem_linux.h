/*
 * mem_linux.h - the parsers of Linux's memory files (mem_linux_parse.c),
 * pure: they take text and touch nothing else, so every input case is
 * tested with fixture text. mem_linux.c feeds them the files.
 */
#ifndef SMOE_MEM_LINUX_H
#define SMOE_MEM_LINUX_H

#include <stddef.h>
#include <stdint.h>

#include "mem.h"

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

#endif
