/*
 * cmd_verify.c - `smoe verify`: validate a vault's header and tables, then
 * read every blob (in file order, buffered, with a sequential-access hint)
 * and check its XXH3 checksum and that its padding is zero; then the same
 * for the scout file beside it, when there is one (docs/scout-format.md).
 * An index vault: every source file against its record (its kind, header
 * and extents as smoe_open checks them: nothing is read from a source that
 * fails), then every expert's components read from the sources and
 * hashed in order.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "smoe/smoe.h"
#include "fadvise.h"
#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"
#include "vault_cmd.h"

static const char cmd[] = "verify";

#define CHUNK (8u << 20)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe verify VAULT [--scout FILE | --no-scout]\n"
            "\n"
            "Validate VAULT's header and tables, then read every blob and check its\n"
            "checksum and zero padding. Each bad blob is reported on stderr as\n"
            "'layer L expert E: ...'; the exit status is 1 if any is bad. Then check\n"
            "the scout file's index and every tensor's checksum. For an index vault\n"
            "(smoe index), first check each source file (present, size, header), then\n"
            "read every expert's components from them and check its checksum.\n"
            "\n"
            "  --scout FILE   the scout file (default: the one the vault's metadata\n"
            "                 names, or NAME.scout, when it exists beside the vault)\n"
            "  --no-scout     do not look for a scout file\n"
            "  --help         this text\n");
}

/* One blob: where its bytes lie and what it is. */
typedef struct item {
    const smoe__vault_entry *e;
    uint32_t layer, expert;
} item;

/* What every blob's check uses. */
typedef struct checker {
    const char *path;
    int fd;
    unsigned char *buf; /* CHUNK bytes */
    XXH3_state_t *st;
    uint64_t bytes;     /* read so far */
} checker;

/* Read n bytes at off; 0, or it says on stderr what failed and returns 1. */
static int read_at(checker *c, const item *it, size_t n, uint64_t off)
{
    int err = 0;
    int rc = smoe__io_read_full(&smoe__io_os, c->fd, c->buf, n, off, NULL, &err);
    if (rc == 0)
        return 0;
    fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32
            ": reading %zu bytes at offset %" PRIu64 " failed: %s\n", c->path, it->layer,
            it->expert, n, off, rc == SMOE_ETRUNC ? strerror(EIO) : strerror(err));
    return 1;
}

/* Check one blob; prints its problem and returns 1 if it is bad. */
static int check_blob(checker *c, const item *it)
{
    const smoe__vault_entry *e = it->e;
    XXH3_64bits_reset(c->st);
    uint64_t nonzero = UINT64_MAX;
    for (uint64_t done = 0; done < e->padded;) {
        size_t n = e->padded - done < CHUNK ? (size_t)(e->padded - done) : CHUNK;
        if (read_at(c, it, n, e->offset + done))
            return 1;
        c->bytes += n;
        size_t payload = done < e->size ? (size_t)(e->size - done < n ? e->size - done : n) : 0;
        XXH3_64bits_update(c->st, c->buf, payload);
        for (size_t i = payload; i < n && nonzero == UINT64_MAX; i++)
            if (c->buf[i])
                nonzero = done + i;
        done += n;
    }
    uint64_t h = XXH3_64bits_digest(c->st);
    int bad = 0;
    if (h != e->hash) {
        fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32
                ": checksum mismatch: stored %016" PRIx64 ", computed %016" PRIx64
                " over %" PRIu64 " bytes at offset %" PRIu64 "\n", c->path, it->layer,
                it->expert, e->hash, h, e->size, e->offset);
        bad = 1;
    }
    if (nonzero != UINT64_MAX) {
        fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32
                ": padding byte %" PRIu64 " of the blob (file offset %" PRIu64
                ") is not zero\n", c->path, it->layer, it->expert, nonzero,
                e->offset + nonzero);
        bad = 1;
    }
    return bad;
}

/* Check every blob in file order, with a progress line; the number of bad
 * blobs, or -1 when out of memory. */
static int64_t check_blobs(checker *c, const smoe__vault *v, uint32_t *n)
{
    uint32_t *keys = vault_keys_by_offset(v, n);
    if (!keys)
        return -1;
    tool_progress pg;
    tool_progress_start(&pg, cmd);
    int64_t bad = 0;
    for (uint32_t i = 0; i < *n; i++) {
        item it = {&v->index[keys[i]], keys[i] / v->experts, keys[i] % v->experts};
        bad += check_blob(c, &it);
        tool_progress_blobs(&pg, i + 1, *n, c->bytes);
    }
    free(keys);
    return bad;
}

/* Every source file of an index vault against its record; the number of
 * bad ones (each said on stderr), their descriptors in fds (-1: none). */
static int check_sources(const smoe__vault *v, int *fds)
{
    smoe__source_state st;
    int bad = 0;
    for (uint32_t i = 0; i < v->n_sources; i++) {
        fds[i] = -1;
        if (smoe__source_check(v, i, smoe__io_get(), &st) < 0) {
            tool_error(cmd, "%s", smoe_last_error());
            bad++;
            continue;
        }
        if (!st.mtime_ok)
            fprintf(stderr, "smoe verify: %s: source %" PRIu32 " '%s': modified since it was "
                    "indexed, but its size and header are unchanged\n", v->path, i,
                    v->sources[i].name);
        fds[i] = smoe__io_open(&smoe__io_os, st.path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
        if (fds[i] < 0) {
            tool_error(cmd, "%s: source %" PRIu32 " '%s' (%s): cannot open it after its check: "
                       "%s", v->path, i, v->sources[i].name, st.path, strerror(-fds[i]));
            fds[i] = -1;
            bad++;
            continue;
        }
        /* Only the file just checked is read: not one put in its place. */
        smoe__io_stat fs;
        if (smoe__io_fstat(&smoe__io_os, fds[i], &fs) != 0 || fs.dev != st.dev ||
            fs.ino != st.ino) {
            tool_error(cmd, "%s: source %" PRIu32 " '%s' (%s) was replaced while it was "
                       "checked", v->path, i, v->sources[i].name, st.path);
            smoe__io_close(&smoe__io_os, fds[i]);
            fds[i] = -1;
            bad++;
            continue;
        }
        tool_advise_sequential(fds[i]);
    }
    return bad;
}

/* One expert of an index vault: its components from the sources, hashed
 * in order; prints its problem and returns 1 if it is bad. */
static int check_expert(checker *c, const smoe__vault *v, const int *fds, const item *it,
                        uint32_t key)
{
    const uint32_t first = v->xent[key].first_extent, n = v->layouts[it->e->layout].n;
    XXH3_64bits_reset(c->st);
    for (uint32_t k = 0; k < n; k++) {
        const smoe__vault_xt *x = &v->extents[first + k];
        c->fd = fds[x->source];
        if (c->fd < 0)
            return 1; /* said with the source */
        for (uint64_t done = 0; done < x->length;) {
            size_t m = x->length - done < CHUNK ? (size_t)(x->length - done) : CHUNK;
            if (read_at(c, it, m, x->offset + done))
                return 1;
            XXH3_64bits_update(c->st, c->buf, m);
            c->bytes += m;
            done += m;
        }
    }
    uint64_t h = XXH3_64bits_digest(c->st);
    if (h == it->e->hash)
        return 0;
    fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32 ": checksum mismatch: "
            "stored %016" PRIx64 ", computed %016" PRIx64 " over its %" PRIu32 " components in "
            "'%s'...\n", c->path, it->layer, it->expert, it->e->hash, h, n,
            v->sources[v->extents[first].source].name);
    return 1;
}

/* An index vault: its sources, then (unless it has no hashes) every
 * expert; 0, 1 when anything is bad, -1 when out of memory. */
static int verify_index(const char *path, const smoe__vault *v, uint64_t t0)
{
    int *fds = malloc(v->n_sources * sizeof *fds);
    checker c = {path, -1, malloc(CHUNK), XXH3_createState(), 0};
    int rc = 0;
    for (uint32_t i = 0; fds && i < v->n_sources; i++)
        fds[i] = -1;
    if (!fds || !c.buf || !c.st) {
        rc = -tool_error(cmd, "out of memory");
        goto out;
    }
    int bad_src = check_sources(v, fds);
    int64_t bad = 0;
    uint32_t n = 0;
    if (!(v->flags & SMOE__V2_NO_HASH)) {
        uint32_t *keys = vault_keys_by_offset(v, &n);
        if (!keys) {
            rc = -tool_error(cmd, "out of memory");
            goto out;
        }
        tool_progress pg;
        tool_progress_start(&pg, cmd);
        for (uint32_t i = 0; i < n; i++) {
            item it = {&v->index[keys[i]], keys[i] / v->experts, keys[i] % v->experts};
            bad += check_expert(&c, v, fds, &it, keys[i]);
            tool_progress_blobs(&pg, i + 1, n, c.bytes);
        }
        free(keys);
    }
    double secs = (double)(tool_now_ns() - t0) / 1e9;
    printf("%s: %" PRIu32 " source file%s checked%s", path, v->n_sources,
           v->n_sources == 1 ? "" : "s", bad_src ? "" : ", unchanged");
    if (v->flags & SMOE__V2_NO_HASH)
        printf("; no per-expert hashes (indexed with --no-hash): experts not checked\n");
    else
        printf("; %" PRIu32 " experts, %" PRIu64 " bytes read in %.2f s (%.1f MiB/s)%s\n", n,
               c.bytes, secs, secs > 0 ? (double)c.bytes / (1 << 20) / secs : 0.0,
               bad || bad_src ? "" : ": OK");
    if (bad_src)
        printf("%d bad source file%s\n", bad_src, bad_src == 1 ? "" : "s");
    if (bad)
        printf("%" PRId64 " bad expert%s\n", bad, bad == 1 ? "" : "s");
    rc = bad || bad_src ? 1 : 0;
out:
    for (uint32_t i = 0; fds && i < v->n_sources; i++)
        if (fds[i] >= 0)
            smoe__io_close(&smoe__io_os, fds[i]);
    free(fds);
    free(c.buf);
    if (c.st)
        XXH3_freeState(c.st);
    return rc;
}

/* The scout file's index and data; 0, or 1 when it is bad. */
static int check_scout(const char *scout)
{
    pack_scout sc;
    uint64_t s0 = tool_now_ns();
    int rc = pack_scout_load(scout, &sc);
    if (rc == 0) {
        rc = pack_scout_check_data(scout, &sc);
        double secs = (double)(tool_now_ns() - s0) / 1e9;
        if (rc == 0)
            printf("%s: %" PRIu32 " tensors, %" PRIu64 " bytes checked in %.2f s: OK\n", scout,
                   sc.count, sc.file_size, secs);
        pack_scout_free(&sc);
    }
    if (rc < 0) {
        tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
        return 1;
    }
    return 0;
}

/* Read every blob of the loaded vault; 0, 1 when any is bad, -1 when it
 * could not be read (said on stderr). */
static int verify_vault(const char *path, const smoe__vault *v, uint64_t t0)
{
    checker c = {path, smoe__io_open(&smoe__io_os, path, SMOE__IO_RDONLY), malloc(CHUNK),
                 XXH3_createState(), 0};
    int rc = 0;
    if (c.fd < 0 || !c.buf || !c.st) {
        rc = -(c.fd < 0 ? tool_error(cmd, "%s: %s", path, strerror(-c.fd))
                        : tool_error(cmd, "out of memory"));
    } else {
        tool_advise_sequential(c.fd);
        uint32_t n;
        int64_t bad = check_blobs(&c, v, &n);
        double secs = (double)(tool_now_ns() - t0) / 1e9;
        if (bad < 0) {
            rc = -tool_error(cmd, "out of memory");
        } else {
            printf("%s: %" PRIu32 " blobs, %" PRIu64 " bytes read in %.2f s (%.1f MiB/s): %s",
                   path, n, c.bytes, secs,
                   secs > 0 ? (double)c.bytes / (1 << 20) / secs : 0.0, bad ? "" : "OK\n");
            if (bad)
                printf("%" PRId64 " bad blob%s\n", bad, bad == 1 ? "" : "s");
            rc = bad ? 1 : 0;
        }
    }
    if (c.fd >= 0)
        smoe__io_close(&smoe__io_os, c.fd);
    if (c.st)
        XXH3_freeState(c.st);
    free(c.buf);
    return rc;
}

int cmd_verify(int argc, char **argv)
{
    vault_args a;
    int rc = vault_args_parse(cmd, usage, 0, argc, argv, &a);
    if (rc >= 0)
        return rc;
    uint64_t t0 = tool_now_ns();
    smoe__vault v;
    rc = smoe__vault_load(&v, a.path, smoe__io_get());
    if (rc < 0)
        return tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    rc = v.version == SMOE__VAULT_VERSION_INDEX ? verify_index(a.path, &v, t0)
                                                : verify_vault(a.path, &v, t0);
    if (rc >= 0) {
        char *scout = vault_args_scout(&a, &v);
        if (scout && check_scout(scout))
            rc = 1;
        free(scout);
    }
    smoe__vault_free(&v);
    return rc < 0 ? 1 : rc;
}
