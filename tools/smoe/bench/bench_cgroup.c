/*
 * bench_cgroup.c - a temporary memory cgroup for the page-cache modes, and
 * dropping the page cache between modes. Linux only; both need root.
 *
 * cgroup v1: a child of this process's memory cgroup, limited with
 * memory.limit_in_bytes; page cache the child reads is charged to it, so
 * the kernel reclaims it at the limit. cgroup v2: a child of the root of
 * the unified hierarchy (a non-root cgroup that holds processes cannot
 * delegate controllers), limited with memory.max. The version is taken
 * from /proc/self/mounts and /proc/self/cgroup.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static int put_file(const char *dir, const char *name, const char *val, char *err,
                    size_t errlen)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", p, strerror(errno));
        return -1;
    }
    int ok = fputs(val, f) >= 0;
    ok &= fclose(f) == 0; /* the kernel reports a refused value at close */
    if (!ok) {
        snprintf(err, errlen, "%s: writing '%s': %s", p, val, strerror(errno));
        return -1;
    }
    return 0;
}

static uint64_t get_u64(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

#if defined(__linux__) /* cgroups exist on Linux only */
/* Mount point of the v1 memory controller or of cgroup2; 1 or 2, 0 if none. */
static int find_mount(char *mnt, size_t len)
{
    FILE *f = fopen("/proc/self/mounts", "r");
    if (!f)
        return 0;
    char dev[256], dir[4096], type[64], opts[1024];
    int v2 = 0;
    char v2dir[4096] = "";
    while (fscanf(f, "%255s %4095s %63s %1023s %*d %*d", dev, dir, type, opts) == 4) {
        if (!strcmp(type, "cgroup")) {
            char *o = opts, *tok;
            while ((tok = strtok(o, ",")) != NULL) {
                o = NULL;
                if (!strcmp(tok, "memory")) {
                    snprintf(mnt, len, "%s", dir);
                    fclose(f);
                    return 1;
                }
            }
        } else if (!strcmp(type, "cgroup2") && !v2) {
            v2 = 1;
            snprintf(v2dir, sizeof v2dir, "%s", dir);
        }
    }
    fclose(f);
    if (v2)
        snprintf(mnt, len, "%s", v2dir);
    return v2 ? 2 : 0;
}

/* This process's cgroup path in the v1 memory hierarchy ("/" if unknown). */
static void self_v1_path(char *out, size_t len)
{
    snprintf(out, len, "/");
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return;
    char line[4400];
    while (fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *ctrl = c1 + 1, *tok, *save = NULL;
        int mem = 0;
        for (tok = strtok_r(ctrl, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            mem |= !strcmp(tok, "memory");
        if (mem) {
            char *path = c2 + 1;
            path[strcspn(path, "\n")] = '\0';
            snprintf(out, len, "%s", path);
            break;
        }
    }
    fclose(f);
}

#endif /* __linux__ */

int bench_cgroup_create(bench_cgroup *cg, uint64_t limit, char *err, size_t errlen)
{
    memset(cg, 0, sizeof *cg);
#if !defined(__linux__)
    (void)limit;
    snprintf(err, errlen, "memory cgroups need Linux");
    return -1;
#else
    if (geteuid() != 0) {
        snprintf(err, errlen, "not root: cannot create a memory cgroup");
        return -1;
    }
    char mnt[4096];
    int v = find_mount(mnt, sizeof mnt);
    if (!v) {
        snprintf(err, errlen, "no cgroup memory controller or cgroup2 mount found");
        return -1;
    }
    static unsigned seq;
    char name[64];
    snprintf(name, sizeof name, "smoe-bench-%d-%u", (int)getpid(), seq++);
    char val[32];
    snprintf(val, sizeof val, "%llu", (unsigned long long)limit);
    int n;
    if (v == 1) {
        char self[4096];
        self_v1_path(self, sizeof self);
        n = snprintf(cg->path, sizeof cg->path, "%s%s/%s", mnt, strcmp(self, "/") ? self : "",
                     name);
    } else {
        n = snprintf(cg->path, sizeof cg->path, "%s/%s", mnt, name);
    }
    if (n < 0 || (size_t)n >= sizeof cg->path) {
        snprintf(err, errlen, "cgroup path too long");
        cg->path[0] = '\0';
        return -1;
    }
    if (v == 2) {
        /* the root delegates memory to its children (often already on) */
        char e2[256];
        if (put_file(mnt, "cgroup.subtree_control", "+memory", e2, sizeof e2) < 0) {
            snprintf(err, errlen, "cgroup v2: cannot enable the memory controller: %s", e2);
            return -1;
        }
    }
    cg->version = v;
    if (mkdir(cg->path, 0755) < 0) {
        snprintf(err, errlen, "mkdir %s: %s", cg->path, strerror(errno));
        cg->path[0] = '\0';
        return -1;
    }
    int rc = v == 1 ? put_file(cg->path, "memory.limit_in_bytes", val, err, errlen)
                    : put_file(cg->path, "memory.max", val, err, errlen);
    if (rc == 0 && v == 2) {
        char e2[256]; /* no swapping instead of dropping cache; absent without swap */
        (void)put_file(cg->path, "memory.swap.max", "0", e2, sizeof e2);
    }
    if (rc < 0) {
        bench_cgroup_remove(cg);
        return -1;
    }
    return 0;
#endif
}

int bench_cgroup_attach(const bench_cgroup *cg, int pid, char *err, size_t errlen)
{
    char val[32];
    snprintf(val, sizeof val, "%d", pid);
    return put_file(cg->path, "cgroup.procs", val, err, errlen);
}

uint64_t bench_cgroup_peak(const bench_cgroup *cg)
{
    if (!cg->path[0])
        return 0;
    return cg->version == 1 ? get_u64(cg->path, "memory.max_usage_in_bytes")
                            : get_u64(cg->path, "memory.peak");
}

void bench_cgroup_remove(bench_cgroup *cg)
{
    if (!cg->path[0])
        return;
    /* The child has exited; its page cache may still be charged here. v1
     * can empty it first; either way rmdir succeeds once no task is left,
     * which can take a moment after the exit. */
    if (cg->version == 1) {
        char e[64];
        (void)put_file(cg->path, "memory.force_empty", "0", e, sizeof e);
    }
    int i;
    for (i = 0; i < 200; i++) {
        if (rmdir(cg->path) == 0 || errno == ENOENT)
            break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (i == 200)
        fprintf(stderr, "smoe bench: could not remove the cgroup %s: %s\n", cg->path,
                strerror(errno));
    cg->path[0] = '\0';
}

int bench_drop_caches(char *err, size_t errlen)
{
#if !defined(__linux__)
    snprintf(err, errlen, "dropping the page cache needs Linux");
    return -1;
#else
    sync();
    if (geteuid() != 0) {
        snprintf(err, errlen, "not root: the page cache was not dropped");
        return -1;
    }
    return put_file("/proc/sys/vm", "drop_caches", "3", err, errlen);
#endif
}
