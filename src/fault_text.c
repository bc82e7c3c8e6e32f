/*
 * fault_text.c - the words a claim's error adds to its code (fault_text.h):
 * where a read failed and in which file, which copies of a packed vault
 * hold wrong bytes, which source files an index vault's blob comes from.
 * Runs on the claimer's failure path: formatting only, from the fault
 * record and the vault's tables.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "fault_text.h"
#include "internal.h"
#include "vault/source.h"

/* Append to buf[*k..n) like snprintf; *k stops at n. */
static void put(char *buf, size_t n, size_t *k, const char *fmt, ...) SMOE__PRINTF(4, 5);

static void put(char *buf, size_t n, size_t *k, const char *fmt, ...)
{
    if (*k >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *k, n - *k, fmt, ap);
    va_end(ap);
    *k = w < 0 ? n : *k + (size_t)w;
}

/* The copies in mask, "copy 0 (the vault file), replica 2 (/p)", when the
 * vault has replicas; nothing otherwise. */
static void put_copies(const struct smoe_stream *s, uint32_t mask, char *buf, size_t n,
                       size_t *k, const char *lead)
{
    if (s->rep.n < 2 || !mask)
        return;
    put(buf, n, k, "%s", lead);
    const char *sep = "";
    for (uint32_t i = 0; i < s->rep.n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (i == 0)
            put(buf, n, k, "%scopy 0 (the vault file)", sep);
        else
            put(buf, n, k, "%sreplica %u (%s)", sep, i, s->rep.r[i].path);
        sep = ", ";
    }
}

/* An index vault's entry key: the sources its components come from,
 * each once, as "source 1 'name' (path)". */
static void put_sources(const struct smoe_stream *s, uint32_t key, char *buf, size_t n,
                        size_t *k)
{
    const smoe__vault *v = &s->vault;
    const smoe__vault_xt *xt = &v->extents[v->xent[key].first_extent];
    const uint32_t nx = v->layouts[v->index[key].layout].n;
    const char *sep = ": its bytes come from ";
    for (uint32_t j = 0; j < nx; j++) {
        uint32_t src = xt[j].source, seen = 0;
        for (uint32_t q = 0; q < j && !seen; q++)
            seen = xt[q].source == src;
        if (seen || src >= v->n_sources)
            continue;
        char path[1024];
        if (smoe__source_path(v, src, path, sizeof path) < 0)
            snprintf(path, sizeof path, "beside the vault");
        put(buf, n, k, "%ssource %u '%s' (%s)", sep, src, v->sources[src].name, path);
        sep = " and ";
    }
}

/* A failed read: what, where, in which file or copy. */
static void put_read(const struct smoe_stream *s, int r, const smoe__io_fail *f, char *buf,
                     size_t n, size_t *k)
{
    char num[16];
    if (f->eno)
        put(buf, n, k, ": %s (%s) at offset %llu, %llu bytes", smoe__errno_name(f->eno, num),
            strerror(f->eno), (unsigned long long)f->off, (unsigned long long)f->len);
    else if (r == SMOE_ETRUNC)
        put(buf, n, k, ": the file ends at offset %llu, %llu bytes before the end of the read",
            (unsigned long long)f->off, (unsigned long long)f->len);
    else if (r == SMOE_EIO)
        put(buf, n, k, ": short direct reads made no progress at offset %llu, %llu bytes",
            (unsigned long long)f->off, (unsigned long long)f->len);
    else
        return;
    if (f->file && f->file <= s->vault.n_sources)
        put(buf, n, k, " of source %u '%s'", f->file - 1, s->vault.sources[f->file - 1].name);
    put_copies(s, f->copy, buf, n, k, ", in ");
    if (f->tries >= SMOE__IO_MAX_STALLS)
        put(buf, n, k, ", after %u attempts (retries used up)", f->tries);
    if (s->rep.n > 1 && f->copy)
        put(buf, n, k, " (the last copy tried: every copy failed this read)");
}

void smoe__fault_text(const struct smoe_stream *s, uint32_t key, int r, const smoe__fault *why,
                      char *buf, size_t n)
{
    const smoe__io_fail *f = &why->io;
    size_t k = 0;
    buf[0] = 0;
    switch (why->what) {
    case SMOE__FAULT_PADDING:
        put(buf, n, &k, ": the padding is not zero (byte %llu of the blob, file offset %llu)",
            (unsigned long long)(f->off - s->vault.index[key].offset),
            (unsigned long long)f->off);
        put_copies(s, f->copy, buf, n, &k, ", read again from each copy alone, in: ");
        break;
    case SMOE__FAULT_CHECKSUM:
        if (s->src.n)
            put_sources(s, key, buf, n, &k);
        else
            put_copies(s, f->copy, buf, n, &k, ": read again from each copy alone, these do "
                       "not match its hash: ");
        break;
    case SMOE__FAULT_READ:
        put_read(s, r, f, buf, n, &k);
        break;
    default:
        break;
    }
}
