/*
 * budget.c - the ring's slot count from the memory the machine can spare
 * (docs/budget.md): pure parsers of /proc and cgroup text, the pure
 * computation, the platform reader that feeds them, and smoe_open's use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include "alloc.h"
#include "budget.h"
#include "error.h"
#include "internal.h"

/* ---- pure parsers ----------------------------------------------------- */

/* Decimal digits at *p into *v; 0 on success, -1 on none or overflow. */
static int parse_u64(const char **p, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *p = s;
    *v = x;
    return 0;
}

/* The value of "Key:   <n> kB" on a line of its own, in bytes. */
static int meminfo_field(const char *text, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, kl) != 0 || l[kl] != ':')
            continue;
        const char *p = l + kl + 1;
        while (*p == ' ' || *p == '\t')
            p++;
        uint64_t kb;
        if (parse_u64(&p, &kb) < 0)
            return -1;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "kB", 2) != 0 || (p[2] && p[2] != '\n' && p[2] != ' '))
            return -1;
        if (kb > UINT64_MAX / 1024)
            return -1;
        *out = kb * 1024;
        return 0;
    }
    return -1;
}

int smoe__parse_meminfo(const char *text, uint64_t *total, uint64_t *available)
{
    if (!text || meminfo_field(text, "MemTotal", total) < 0)
        return smoe__fail(SMOE_EFORMAT, "/proc/meminfo: no \"MemTotal: <n> kB\" line");
    if (meminfo_field(text, "MemAvailable", available) < 0)
        return smoe__fail(SMOE_EFORMAT, "/proc/meminfo: no \"MemAvailable: <n> kB\" line");
    return 0;
}

int smoe__parse_cg_value(const char *text, uint64_t *value)
{
    if (!text)
        return SMOE_EFORMAT;
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    if (n == 3 && !memcmp(text, "max", 3)) {
        *value = SMOE__NO_LIMIT;
        return 0;
    }
    const char *p = text;
    uint64_t v;
    if (parse_u64(&p, &v) < 0 || (size_t)(p - text) != n)
        return SMOE_EFORMAT;
    *value = v >= SMOE__CG_V1_UNLIMITED ? SMOE__NO_LIMIT : v;
    return 0;
}

static void copy_field(char *dst, size_t cap, const char *src, size_t n)
{
    if (cap == 0)
        return;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* 1 if the comma-separated list [s, s+n) contains word. */
static int list_has(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    const char *end = s + n;
    while (s < end) {
        const char *c = memchr(s, ',', (size_t)(end - s));
        size_t len = c ? (size_t)(c - s) : (size_t)(end - s);
        if (len == wl && !memcmp(s, word, wl))
            return 1;
        s += len + 1;
    }
    return 0;
}

int smoe__parse_proc_cgroup(const char *text, char *v1, size_t v1_cap, char *v2, size_t v2_cap)
{
    int found = 0;
    if (v1_cap)
        v1[0] = 0;
    if (v2_cap)
        v2[0] = 0;
    for (const char *l = text; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        const char *c1 = memchr(l, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - l)) : NULL;
        if (c2) {
            const char *path = c2 + 1;
            size_t plen = len - (size_t)(path - l);
            size_t idlen = (size_t)(c1 - l), ctlen = (size_t)(c2 - c1 - 1);
            if (idlen == 1 && l[0] == '0' && ctlen == 0 && plen > 0 && path[0] == '/') {
                if (!(found & 2))
                    copy_field(v2, v2_cap, path, plen);
                found |= 2;
            } else if (list_has(c1 + 1, ctlen, "memory") && plen > 0 && path[0] == '/') {
                if (!(found & 1))
                    copy_field(v1, v1_cap, path, plen);
                found |= 1;
            }
        }
        l = nl ? nl + 1 : NULL;
    }
    return found;
}

/* Copy a mountinfo field, decoding its octal escapes (\040 is a space). */
static void unescape(char *dst, size_t cap, const char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (src[i] == '\\' && i + 3 < n && src[i + 1] >= '0' && src[i + 1] <= '3' &&
            src[i + 2] >= '0' && src[i + 2] <= '7' && src[i + 3] >= '0' &&
            src[i + 3] <= '7') {
            dst[o++] = (char)((src[i + 1] - '0') * 64 + (src[i + 2] - '0') * 8 +
                              (src[i + 3] - '0'));
            i += 3;
        } else {
            dst[o++] = src[i];
        }
    }
    if (cap)
        dst[o] = 0;
}

void smoe__parse_mountinfo(const char *text, smoe__cg_mount *v1, smoe__cg_mount *v2)
{
    memset(v1, 0, sizeof *v1);
    memset(v2, 0, sizeof *v2);
    for (const char *l = text; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        /* Fields: id parent maj:min root point options [optional...] - type
         * source superoptions */
        const char *f[64];
        size_t fl[64];
        int nf = 0;
        for (size_t i = 0; i < len && nf < 64;) {
            while (i < len && l[i] == ' ')
                i++;
            if (i >= len)
                break;
            size_t j = i;
            while (j < len && l[j] != ' ')
                j++;
            f[nf] = l + i;
            fl[nf++] = j - i;
            i = j;
        }
        int dash = -1;
        for (int i = 6; i < nf; i++)
            if (fl[i] == 1 && f[i][0] == '-') {
                dash = i;
                break;
            }
        if (dash > 0 && dash + 3 <= nf) {
            const char *type = f[dash + 1], *super = f[dash + 3];
            size_t tl = fl[dash + 1], sl = fl[dash + 3];
            smoe__cg_mount *m = NULL;
            if (tl == 7 && !memcmp(type, "cgroup2", 7))
                m = v2;
            else if (tl == 6 && !memcmp(type, "cgroup", 6) && list_has(super, sl, "memory"))
                m = v1;
            if (m && !m->found) {
                unescape(m->root, sizeof m->root, f[3], fl[3]);
                unescape(m->point, sizeof m->point, f[4], fl[4]);
                m->found = 1;
            }
        }
        l = nl ? nl + 1 : NULL;
    }
}

int smoe__cg_dir(const smoe__cg_mount *m, const char *path, char *out, size_t cap)
{
    const char *rest = path;
    size_t rl = strlen(m->root);
    if (!(rl == 1 && m->root[0] == '/')) {
        if (strncmp(path, m->root, rl) != 0 || (path[rl] != 0 && path[rl] != '/'))
            return -1;
        rest = path + rl;
    }
    while (rest[0] == '/' && rest[1] == '/')
        rest++;
    if (!strcmp(rest, "/"))
        rest = "";
    int n = snprintf(out, cap, "%s%s", m->point, rest);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* ---- the computation -------------------------------------------------- */

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

void smoe__budget_in_probe(smoe__budget_in *in, const smoe__mem_probe *p)
{
    in->have_mem = p->have_mem;
    in->mem_total = p->mem_total;
    in->mem_available = p->mem_available;
    in->cg_room = p->cg_room;
    in->cg_limit = p->cg_limit;
    in->cg_usage = p->cg_usage;
}

int smoe__budget_compute(const smoe__budget_in *in, smoe__budget *out)
{
    memset(out, 0, sizeof *out);
    out->in = *in;
    out->slots_cap = UINT64_MAX;
    const uint64_t slot = in->slot_bytes;
    if (slot == 0)
        return smoe__fail(SMOE_EINVAL, "budget: slot size 0");
    out->working_set = (uint64_t)in->layers * in->top_k;

    uint64_t n;
    if (in->explicit_slots) {
        n = in->explicit_slots;
    } else {
        out->rules |= SMOE_BUDGET_AUTO;
        if (in->have_mem) {
            out->free_bytes = in->mem_available < in->cg_room ? in->mem_available
                                                               : in->cg_room;
            uint64_t floor = in->mem_total / SMOE__BUDGET_OS_FLOOR_DIV;
            out->os_floor = floor > SMOE__BUDGET_OS_FLOOR_MIN ? floor
                                                              : SMOE__BUDGET_OS_FLOOR_MIN;
            out->after[0] = sub0(out->free_bytes, in->scout_bytes);
            out->after[1] = sub0(out->after[0], in->overhead_bytes);
            out->after[2] = sub0(out->after[1], in->reserve_bytes);
            out->after[3] = sub0(out->after[2], out->os_floor);
            out->budget_bytes = out->after[3];
            out->slots_budget = out->budget_bytes / slot;
            /* floor(free x 25 / 100) without overflowing */
            out->slots_fallback = (out->free_bytes / 100 * SMOE__BUDGET_FALLBACK_PCT +
                                   out->free_bytes % 100 * SMOE__BUDGET_FALLBACK_PCT / 100) /
                                  slot;
            n = out->slots_budget;
            if (n < out->slots_fallback) {
                n = out->slots_fallback;
                out->rules |= SMOE_BUDGET_FALLBACK;
            }
        } else {
            out->rules |= SMOE_BUDGET_NO_MEMINFO;
            n = SMOE__BUDGET_MIN_SLOTS;
        }
        out->step[0] = n;
        if (n < SMOE__BUDGET_MIN_SLOTS) {
            n = SMOE__BUDGET_MIN_SLOTS;
            out->rules |= SMOE_BUDGET_CLAMP_MIN;
        }
        if (n > SMOE__BUDGET_MAX_SLOTS) {
            n = SMOE__BUDGET_MAX_SLOTS;
            out->rules |= SMOE_BUDGET_CLAMP_MAX;
        }
        out->step[1] = n;
        if (in->cg_room != SMOE__NO_LIMIT) {
            out->slots_cap = in->cg_room / slot;
            if (n > out->slots_cap) {
                n = out->slots_cap;
                out->rules |= SMOE_BUDGET_CAPPED;
            }
        }
        out->step[2] = n;
        /* A slot per blob holds the whole vault: more could never fill. */
        if (in->vault_entries && n > in->vault_entries) {
            n = in->vault_entries;
            out->rules |= SMOE_BUDGET_VAULT_CAP;
        }
        out->step[3] = n;
        /* Only the clamp's minimum raises the count past free memory (huge
         * slots, little memory): never fault in a ring that cannot fit. */
        if (in->have_mem && n > out->free_bytes / slot) {
            out->slots = (uint32_t)n;
            return smoe__fail(SMOE_ENOMEM, "budget: a ring of %llu slots (the clamp's "
                              "minimum of %u slots) x %llu bytes = %llu bytes is more than "
                              "the %llu bytes of free memory (25%% of it: %llu slots); "
                              "free memory, or choose opts.ring_slots",
                              (unsigned long long)n, SMOE__BUDGET_MIN_SLOTS,
                              (unsigned long long)slot, (unsigned long long)(n * slot),
                              (unsigned long long)out->free_bytes,
                              (unsigned long long)out->slots_fallback);
        }
    }
    out->slots = (uint32_t)n;
    if (n == 0)
        return smoe__fail(SMOE_ESMALLRING, "budget: the memory cgroup has %llu bytes of "
                          "room, less than one slot of %llu bytes",
                          (unsigned long long)in->cg_room, (unsigned long long)slot);
    if (in->top_k && n < in->top_k)
        return smoe__fail(SMOE_ESMALLRING, "budget: a ring of %llu slots cannot hold one "
                          "layer's top-%u experts; demand for a layer would deadlock on a "
                          "full ring (give it more memory, a smaller reserve, or at least "
                          "%u slots)",
                          (unsigned long long)n, in->top_k, in->top_k);
    out->cliff = out->working_set && n < out->working_set;
    return 0;
}

/* ---- the platform reader ---------------------------------------------- */

/* Linux: /proc and cgroup files, read through the io table. */
#if defined(__linux__)
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

static void note(smoe__mem_probe *p, const char *fmt, const char *path, int err)
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
            note(p, "%s: %s", lpath, err);
        return 0;
    }
    uint64_t limit, usage = 0;
    int bad = smoe__parse_cg_value(lt, &limit) < 0;
    free(lt);
    if (bad) {
        note(p, "%s: %s", lpath, 0);
        return 0;
    }
    char *ut = read_text(io, upath, &err);
    if (!ut || smoe__parse_cg_value(ut, &usage) < 0 || usage == SMOE__NO_LIMIT) {
        note(p, "%s: %s", upath, ut ? 0 : err);
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

#endif /* __linux__ */

void smoe__mem_probe_read(const smoe__io *io, smoe__mem_probe *p)
{
    memset(p, 0, sizeof *p);
    p->cg_limit = p->cg_room = SMOE__NO_LIMIT;
#if defined(__APPLE__)
    (void)io;
    uint64_t memsize = 0;
    int level = 0;
    size_t n1 = sizeof memsize, n2 = sizeof level;
    if (sysctlbyname("hw.memsize", &memsize, &n1, NULL, 0) == 0 &&
        sysctlbyname("kern.memorystatus_level", &level, &n2, NULL, 0) == 0 && level >= 0 &&
        level <= 100 && memsize > 0) {
        p->have_mem = 1;
        p->mem_total = memsize;
        p->mem_available = memsize / 100 * (uint64_t)level;
        p->mem_source = "sysctl";
    } else {
        snprintf(p->note, sizeof p->note, "sysctl hw.memsize or kern.memorystatus_level "
                 "could not be read");
    }
#elif defined(__linux__)
    int err;
    char *t = read_text(io, "/proc/meminfo", &err);
    if (!t) {
        note(p, "%s: %s", "/proc/meminfo", err);
    } else if (smoe__parse_meminfo(t, &p->mem_total, &p->mem_available) < 0) {
        note(p, "%s: %s", "/proc/meminfo", 0);
    } else {
        p->have_mem = 1;
        p->mem_source = "/proc/meminfo";
    }
    free(t);

    char *cg = read_text(io, "/proc/self/cgroup", &err);
    char *mi = cg ? read_text(io, "/proc/self/mountinfo", &err) : NULL;
    if (!cg || !mi) {
        note(p, "%s: %s", cg ? "/proc/self/mountinfo" : "/proc/self/cgroup", err);
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
#else
    (void)io;
    snprintf(p->note, sizeof p->note, "no memory probe for this system");
#endif
}

/* ---- the stream's use ------------------------------------------------- */

static int scout_size(struct smoe_stream *s, const char *path, uint64_t *bytes)
{
    int fd = smoe__io_open(s->io, path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
    if (fd < 0)
        return smoe__fail(SMOE_ESYS, "open: scout file %s: %s", path, strerror(-fd));
    int r = smoe__io_size(s->io, fd, bytes);
    smoe__io_close(s->io, fd);
    if (r < 0)
        return smoe__fail(SMOE_ESYS, "open: scout file %s: cannot read its size: %s", path,
                          strerror(-r));
    return 0;
}

int smoe__budget_open(struct smoe_stream *s, const smoe_open_opts *o, uint64_t stride,
                      uint32_t *nslots)
{
    smoe__budget_in in;
    memset(&in, 0, sizeof in);
    in.slot_bytes = stride;
    in.cg_room = in.cg_limit = SMOE__NO_LIMIT;
    in.overhead_bytes = SMOE__BUDGET_OVERHEAD;
    in.layers = s->vault.layers;
    in.vault_entries = s->vault.entries;
    in.top_k = o->top_k;
    in.explicit_slots = o->ring_slots;
    if (!o->ring_slots) {
        int r;
        in.reserve_bytes = o->reserve_bytes;
        if (o->scout_bytes)
            in.scout_bytes = o->scout_bytes;
        else if (o->scout_path && (r = scout_size(s, o->scout_path, &in.scout_bytes)) < 0)
            return r;
        smoe__mem_probe p;
        smoe__mem_probe_read(s->io, &p);
        if (p.nomem) /* not a reason to size the ring blind */
            return smoe__fail(SMOE_ENOMEM, "open: out of memory reading the memory figures "
                              "(%s)", p.note);
        smoe__budget_in_probe(&in, &p);
        if (p.note[0])
            smoe__log(s, SMOE_LOG_WARN, "memory budget: %s", p.note);
    }
    int r = smoe__budget_compute(&in, &s->budget);
    if (r < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", smoe_last_error()); /* not in place */
        return smoe__fail(r, "open: %s: %s", s->vault.path, why);
    }
    if (s->budget.rules & SMOE_BUDGET_NO_MEMINFO)
        smoe__log(s, SMOE_LOG_WARN, "memory budget: free memory unknown; ring of %u slots",
                  s->budget.slots);
    if (s->budget.cliff)
        smoe__log(s, SMOE_LOG_WARN, "ring of %u slots holds less than one token's experts "
                  "(%u layers x top-%u = %llu): LRU retention will get almost no hits",
                  s->budget.slots, in.layers, in.top_k,
                  (unsigned long long)s->budget.working_set);
    *nslots = s->budget.slots;
    return 0;
}

void smoe__budget_stats(const struct smoe_stream *s, smoe_stats *st)
{
    const smoe__budget *b = &s->budget;
    st->budget_rules = b->rules;
    st->budget_mem_total = b->in.mem_total;
    st->budget_mem_available = b->in.mem_available;
    st->budget_cgroup_limit = b->in.cg_limit;
    st->budget_cgroup_usage = b->in.cg_usage;
    st->budget_free = b->free_bytes;
    st->budget_scout = b->in.scout_bytes;
    st->budget_overhead = (b->rules & SMOE_BUDGET_AUTO) ? b->in.overhead_bytes : 0;
    st->budget_reserve = b->in.reserve_bytes;
    st->budget_os_floor = b->os_floor;
    st->budget_bytes = b->budget_bytes;
    st->budget_slots = b->slots_budget;
    st->top_k = b->in.top_k;
    st->working_set_slots = b->working_set;
    st->cliff = (uint64_t)b->cliff;
}
