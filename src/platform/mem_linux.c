/*
 * mem_linux.c - the machine's memory figures on Linux (mem.h):
 * /proc/meminfo, then the memory cgroups from the process's own up to the
 * mount of each hierarchy (v1 and v2), read through the smoe__io table so
 * that tests can give it any files; the text is parsed by
 * mem_linux_parse.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "mem.h"
#include "mem_linux.h"

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

#define READ_MAX (1u << 20) /* mountinfo of a busy host stays far below */

/*
 * A whole text file through io, NUL-terminated, malloc()ed. /proc and
 * cgroup files report size 0, so read until end of file. NULL on failure
 * with *err the negative errno: -ENOMEM, -EFBIG when too big, or the read's.
 * (Not SMOE_* codes: their values meet errnos', SMOE_ENOMEM is -ENOENT.)
 */
static char *read_text(const smoe__io *io, const char *path, int *err)
{
    int fd = smoe__io_open(io, path, SMOE__IO_RDONLY);
    if (fd < 0) {
        *err = fd;
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = smoe__malloc(cap);
    int interrupted = 0; /* in a row, as smoe__io_read_full counts them */
    *err = 0;
    while (buf) {
        if (cap - len < 2) {
            if (cap >= READ_MAX) {
                *err = -EFBIG;
                break;
            }
            char *nb = smoe__realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = io->pread(io, fd, buf + len, cap - len - 1, len);
        if (r == -EINTR && ++interrupted < SMOE__IO_MAX_STALLS)
            continue;
        if (r < 0) {
            *err = (int)r;
            break;
        }
        if (r == 0) {
            smoe__io_close(io, fd);
            buf[len] = 0;
            return buf;
        }
        len += (size_t)r;
        interrupted = 0;
    }
    if (!buf || !*err)
        *err = -ENOMEM;
    smoe__io_close(io, fd);
    free(buf);
    return NULL;
}

static void note_unread(smoe__mem_probe *p, const char *fmt, const char *path, int err)
{
    if (err == -ENOMEM)
        p->nomem = 1;
    if (p->note[0])
        return; /* the first problem is the one worth reading */
    char what[96];
    snprintf(what, sizeof what, "%s", err ? strerror(-err) : "malformed");
    snprintf(p->note, sizeof p->note, fmt, path, what);
}

/* Read one cgroup's limit and usage; 1 if it has a limit file. */
static int read_level(const smoe__io *io, smoe__mem_probe *p, const char *dir, int version)
{
    char lpath[400], upath[400];
    snprintf(lpath, sizeof lpath, "%s/%s", dir,
             version == 2 ? "memory.max" : "memory.limit_in_bytes");
    snprintf(upath, sizeof upath, "%s/%s", dir,
             version == 2 ? "memory.current" : "memory.usage_in_bytes");
    int err;
    char *lt = read_text(io, lpath, &err);
    if (!lt) {
        /* No such file: the v2 root, or no memory controller there. */
        if (err != -ENOENT)
            note_unread(p, "%s: %s", lpath, err);
        return 0;
    }
    uint64_t limit, usage = 0;
    int bad = smoe__parse_cg_value(lt, &limit) < 0;
    free(lt);
    if (bad) {
        note_unread(p, "%s: %s", lpath, 0);
        return 0;
    }
    char *ut = read_text(io, upath, &err);
    if (!ut || smoe__parse_cg_value(ut, &usage) < 0 || usage == SMOE__NO_LIMIT) {
        note_unread(p, "%s: %s", upath, ut ? 0 : err);
        free(ut);
        if (limit != SMOE__NO_LIMIT)
            usage = limit; /* a limit with unknown usage: assume no room left */
        else
            usage = 0;
    } else {
        free(ut);
    }
    if (p->n_levels < SMOE__CG_MAX_LEVELS) {
        smoe__cg_level *lv = &p->level[p->n_levels++];
        snprintf(lv->dir, sizeof lv->dir, "%s", dir);
        lv->version = version;
        lv->limit = limit;
        lv->usage = usage;
    }
    if (limit != SMOE__NO_LIMIT) {
        uint64_t room = sub0(limit, usage);
        if (p->cg_room == SMOE__NO_LIMIT || room < p->cg_room) {
            p->cg_room = room;
            p->cg_limit = limit;
            p->cg_usage = usage;
            p->cg_version = version;
        }
    }
    return 1;
}

/* The process's cgroup under mount m, then each ancestor up to the mount. */
static void walk_levels(const smoe__io *io, smoe__mem_probe *p, const smoe__cg_mount *m,
                        const char *path, int version)
{
    char dir[320];
    if (smoe__cg_dir(m, path, dir, sizeof dir) < 0)
        snprintf(dir, sizeof dir, "%s", m->point); /* outside our view: the mount's own */
    size_t floor = strlen(m->point);
    for (int guard = 0; guard < 64; guard++) {
        read_level(io, p, dir, version);
        size_t len = strlen(dir);
        if (len <= floor)
            break;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < floor)
            break;
        *slash = 0;
        if (strlen(dir) < floor)
            break;
    }
}

void smoe__mem_probe_read(const smoe__io *io, smoe__mem_probe *p)
{
    memset(p, 0, sizeof *p);
    p->cg_limit = p->cg_room = SMOE__NO_LIMIT;
    int err;
    char *t = read_text(io, "/proc/meminfo", &err);
    if (!t) {
        note_unread(p, "%s: %s", "/proc/meminfo", err);
    } else if (smoe__parse_meminfo(t, &p->mem_total, &p->mem_available) < 0) {
        note_unread(p, "%s: %s", "/proc/meminfo", 0);
    } else {
        p->have_mem = 1;
        p->mem_source = "/proc/meminfo";
    }
    free(t);

    char *cg = read_text(io, "/proc/self/cgroup", &err);
    char *mi = cg ? read_text(io, "/proc/self/mountinfo", &err) : NULL;
    if (!cg || !mi) {
        note_unread(p, "%s: %s", cg ? "/proc/self/mountinfo" : "/proc/self/cgroup", err);
    } else {
        char v1[256], v2[256];
        int found = smoe__parse_proc_cgroup(cg, v1, sizeof v1, v2, sizeof v2);
        smoe__cg_mount m1, m2;
        smoe__parse_mountinfo(mi, &m1, &m2);
        if ((found & 1) && m1.found)
            walk_levels(io, p, &m1, v1, 1);
        if ((found & 2) && m2.found)
            walk_levels(io, p, &m2, v2, 2);
    }
    free(cg);
    free(mi);
}
