/*
 * freq_tmp.c - the histogram's temporary files (docs/freq-format.md,
 * "Writing"): where the file system has unnamed files (Linux O_TMPFILE) a
 * save writes one and names it PATH.tmp.<pid>.<n> only to rename it over
 * PATH, so a process killed during a save leaves nothing behind but in
 * that last instant; elsewhere the file has that name from the start. At
 * open, such files of processes that no longer exist are removed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fill/freq.h"
#include "platform/proc.h"

int smoe__freq_dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    int n;
    if (!slash)
        n = snprintf(dir, cap, ".");
    else if (slash == path)
        n = snprintf(dir, cap, "/");
    else
        n = snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

char *smoe__freq_tmp_name(const char *path)
{
    static _Atomic uint32_t seq;
    /* relaxed: only makes names unique within the process */
    uint32_t n = atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
    size_t len = strlen(path) + 48;
    char *t = smoe__malloc(len);
    if (t)
        snprintf(t, len, "%s.tmp.%ld.%u", path, smoe__proc_self(), n);
    return t;
}

int smoe__freq_open_unnamed(const smoe__io *io, const char *path)
{
    char dir[4096];
    int r = smoe__freq_dir_of(path, dir, sizeof dir);
    return r < 0 ? r : smoe__io_open(io, dir, SMOE__IO_TMPFILE);
}

int smoe__freq_probe_writable(const smoe__io *io, const char *path)
{
    /* An unnamed file leaves no name behind, even if the process dies now. */
    int fd = smoe__freq_open_unnamed(io, path);
    if (fd >= 0) {
        smoe__io_close(io, fd);
        return 0;
    }
    char *t = smoe__freq_tmp_name(path);
    if (!t)
        return -ENOMEM;
    fd = smoe__io_open(io, t, SMOE__IO_WRONLY);
    if (fd >= 0) {
        smoe__io_close(io, fd);
        smoe__io_unlink(io, t);
    }
    free(t);
    return fd < 0 ? fd : 0;
}

/* The pid of "<base>.tmp.<pid>.<n>", or 0 when name is not of that form. */
static long tmp_pid(const char *name, const char *base, size_t bl)
{
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0)
        return 0;
    const char *p = name + bl + 5, *q;
    long pid = 0;
    for (q = p; *q >= '0' && *q <= '9' && pid <= 0x7fffffffL; q++)
        pid = pid * 10 + (*q - '0');
    if (q == p || *q != '.' || pid <= 0 || pid > 0x7fffffffL)
        return 0;
    const char *r = ++q;
    while (*q >= '0' && *q <= '9')
        q++;
    return q > r && *q == 0 ? pid : 0;
}

/* What a sweep looks for, and where. */
typedef struct sweep {
    const smoe__io *io;
    const char *dir, *base;
    size_t bl;
    long self;
} sweep;

static void sweep_entry(void *u, const char *name)
{
    const sweep *w = u;
    long pid = tmp_pid(name, w->base, w->bl);
    /* Ours may be a save in progress; a process that cannot be told gone
     * (another user's) may be one too. */
    if (!pid || pid == w->self || !smoe__proc_gone(pid))
        return;
    char full[4096 + 256 + 2];
    snprintf(full, sizeof full, "%s/%s", w->dir, name);
    smoe__io_unlink(w->io, full);
}

void smoe__freq_sweep(const smoe__io *io, const char *path)
{
    char dir[4096];
    if (smoe__freq_dir_of(path, dir, sizeof dir) < 0)
        return;
    const char *slash = strrchr(path, '/');
    sweep w = {io, dir, slash ? slash + 1 : path, 0, smoe__proc_self()};
    w.bl = strlen(w.base);
    /* best effort, as the files it would remove are */
    (void)smoe__dir_each(dir, sweep_entry, &w);
}
