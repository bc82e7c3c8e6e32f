/*
 * mem_linux_parse.c - parsers of the text of /proc/meminfo,
 * /proc/self/cgroup, /proc/self/mountinfo and the memory cgroup files
 * (mem_linux.h). Pure: text in, numbers out, so every input case is tested
 * with fixture text (tests/test_budget.c); mem_linux.c reads the files.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "smoe/smoe.h"
#include "error.h"
#include "mem_linux.h"

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
