/*
 * vault_write.c - writing a vault (docs/vault-format.md): smoe_writer_*.
 *
 * The file is written as "<path>.tmp.<pid>": blobs are appended from
 * data_offset as they come, each straight from the caller's buffer and
 * followed by the zeros that pad it to a multiple of 16 KiB; the layouts,
 * components and metadata are kept in memory. smoe_writer_finish() appends
 * the tables and metadata, writes the header (with the checksum over
 * header, tables and metadata) last, fsyncs, renames the file into place
 * and fsyncs the directory. Until then no file at `path` looks complete.
 *
 * Every input is checked with the reader's rules (smoe__component_check)
 * before anything is written, so a finished vault always loads. A rejected
 * argument returns SMOE_EINVAL and changes nothing; a failed write makes the
 * writer fail every later call (smoe_writer_finish() then removes the
 * temporary file). smoe_writer_finish() frees the writer whether it
 * succeeds or not.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smoe/smoe.h"
#include "byteorder.h"
#include "error.h"
#include "io.h"
#include "vault/vault.h"

#define DEFAULT_COMPONENT_ALIGN 256u

typedef struct w_layout {
    uint32_t first, n;
    uint64_t extent;
} w_layout;

typedef struct w_meta {
    char *key, *value;
} w_meta;

struct smoe_writer {
    const smoe__io *io;
    char *path, *tmp;
    int fd;
    int failed;                /* 0, or the code of the write that failed */
    uint32_t layers, experts, component_align;
    uint64_t pos;              /* where the next blob goes */
    unsigned char *seen;       /* one bit per (layer, expert) */
    unsigned char *table;      /* expert table records, 48 bytes each */
    uint32_t entries, entries_cap;
    w_layout *layouts;
    uint32_t n_layouts, layouts_cap;
    smoe_component *comps;
    uint32_t n_comps, comps_cap;
    w_meta *meta;
    uint32_t n_meta, meta_cap;
    uint64_t meta_bytes;       /* serialised size of meta */
};

static const unsigned char zeros[SMOE__VAULT_ALIGN];

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* p grown to hold need elements of size sz (p itself when it already
 * does), or NULL (p untouched) when out of memory. */
static void *grow(void *p, uint32_t *cap, uint64_t need, size_t sz)
{
    if (need <= *cap)
        return p;
    uint64_t n = *cap ? (uint64_t)*cap * 2 : 16;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    if (n < need || n > SIZE_MAX / sz)
        return NULL;
    void *q = realloc(p, (size_t)n * sz);
    if (q)
        *cap = (uint32_t)n;
    return q;
}

static int write_at(smoe_writer *w, const void *buf, uint64_t n, uint64_t off,
                    const char *what)
{
    int err_no = 0;
    if (n == 0)
        return 0;
    int rc = smoe__io_write_full(w->io, w->fd, buf, (size_t)n, off, &err_no);
    if (rc < 0) {
        w->failed = SMOE_EIO;
        return smoe__fail(SMOE_EIO, "%s: writing %s (%" PRIu64 " bytes at offset %" PRIu64
                          ") failed: %s", w->tmp, what, n, off, strerror(err_no));
    }
    return 0;
}

static int check_usable(const smoe_writer *w, const char *fn)
{
    if (!w)
        return smoe__fail(SMOE_EINVAL, "%s: writer is NULL", fn);
    if (w->failed)
        return smoe__fail(w->failed, "%s: %s: an earlier write failed; the vault cannot be "
                          "completed", fn, w->path);
    return 0;
}

static void writer_free(smoe_writer *w)
{
    for (uint32_t i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->meta);
    free(w->comps);
    free(w->layouts);
    free(w->table);
    free(w->seen);
    free(w->tmp);
    free(w->path);
    free(w);
}

/* Close and remove the temporary file, then free w. */
static void writer_discard(smoe_writer *w)
{
    if (w->fd >= 0)
        smoe__io_close(w->io, w->fd);
    smoe__io_unlink(w->io, w->tmp);
    writer_free(w);
}

SMOE_API int smoe_writer_open(const char *path, const smoe_writer_opts *opts,
                              smoe_writer **out)
{
    static const char fn[] = "smoe_writer_open";
    if (!out)
        return smoe__fail(SMOE_EINVAL, "%s: out is NULL", fn);
    *out = NULL;
    if (!path || !*path)
        return smoe__fail(SMOE_EINVAL, "%s: path is NULL or empty", fn);
    if (!opts)
        return smoe__fail(SMOE_EINVAL, "%s: %s: opts is NULL (layers and experts are "
                          "required)", fn, path);
    size_t need = offsetof(smoe_writer_opts, experts) + sizeof opts->experts;
    if (opts->struct_size < need)
        return smoe__fail(SMOE_EINVAL, "%s: %s: opts->struct_size is %zu, expected at least "
                          "%zu (use SMOE_WRITER_OPTS_INIT)", fn, path, opts->struct_size, need);
    smoe_writer_opts o = SMOE_WRITER_OPTS_INIT;
    memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    if (o.layers < 1 || o.layers > 65536)
        return smoe__fail(SMOE_EINVAL, "%s: %s: layers is %" PRIu32 ", expected 1..65536",
                          fn, path, o.layers);
    if (o.experts < 1 || o.experts > 65536)
        return smoe__fail(SMOE_EINVAL, "%s: %s: experts is %" PRIu32 ", expected 1..65536",
                          fn, path, o.experts);
    uint64_t pairs = (uint64_t)o.layers * o.experts;
    if (pairs > SMOE__MAX_EXPERTS_TOTAL)
        return smoe__fail(SMOE_EINVAL, "%s: %s: layers x experts is %" PRIu64 ", expected at "
                          "most %u", fn, path, pairs, SMOE__MAX_EXPERTS_TOTAL);
    uint32_t ca = o.component_align ? o.component_align : DEFAULT_COMPONENT_ALIGN;
    if (ca < 256 || ca > SMOE__VAULT_ALIGN || (ca & (ca - 1)) != 0)
        return smoe__fail(SMOE_EINVAL, "%s: %s: component_align is %" PRIu32 ", expected 0 "
                          "or a power of two from 256 to %u", fn, path, ca, SMOE__VAULT_ALIGN);
    if (o.reserved0_ != 0)
        return smoe__fail(SMOE_EINVAL, "%s: %s: reserved0_ is %" PRIu32 ", expected 0",
                          fn, path, o.reserved0_);

    smoe_writer *w = calloc(1, sizeof *w);
    if (!w)
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, path);
    w->io = smoe__io_get();
    w->fd = -1;
    w->layers = o.layers;
    w->experts = o.experts;
    w->component_align = ca;
    w->pos = SMOE__VAULT_ALIGN;
    size_t tmp_len = strlen(path) + 32;
    w->path = dup_str(path);
    w->tmp = malloc(tmp_len);
    w->seen = calloc((size_t)((pairs + 7) / 8), 1);
    if (!w->path || !w->tmp || !w->seen) {
        writer_free(w);
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, path);
    }
    snprintf(w->tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());
    int fd = smoe__io_open(w->io, w->tmp, SMOE__IO_WRONLY);
    if (fd < 0) {
        int rc = smoe__fail(SMOE_ESYS, "%s: cannot create %s: %s", fn, w->tmp, strerror(-fd));
        writer_free(w);
        return rc;
    }
    w->fd = fd;
    *out = w;
    return 0;
}

SMOE_API int smoe_writer_add_layout(smoe_writer *w, const smoe_component *comps,
                                    uint32_t n, uint32_t *id)
{
    static const char fn[] = "smoe_writer_add_layout";
    int rc = check_usable(w, fn);
    if (rc < 0)
        return rc;
    if (!comps || n == 0)
        return smoe__fail(SMOE_EINVAL, "%s: %s: a layout needs at least one component",
                          fn, w->path);
    if (w->n_layouts >= SMOE__MAX_LAYOUTS)
        return smoe__fail(SMOE_EINVAL, "%s: %s: already %" PRIu32 " layouts, the most a "
                          "vault holds", fn, w->path, w->n_layouts);
    if ((uint64_t)w->n_comps + n > SMOE__MAX_COMPONENTS)
        return smoe__fail(SMOE_EINVAL, "%s: %s: %" PRIu32 " more components would exceed the "
                          "limit of %u", fn, w->path, n, SMOE__MAX_COMPONENTS);
    char where[1100];
    for (uint32_t i = 0; i < n; i++) {
        const smoe_component *c = &comps[i];
        snprintf(where, sizeof where, "%s: %s: component %" PRIu32 " of the new layout",
                 fn, w->path, i);
        if (smoe__component_check(c, w->component_align, where) < 0)
            return SMOE_EINVAL; /* the message says what is wrong */
        if (i > 0 && c->offset < comps[i - 1].offset + comps[i - 1].nbytes)
            return smoe__fail(SMOE_EINVAL, "%s (%s): field offset: %" PRIu64 " overlaps or "
                              "precedes component %" PRIu32 " (%s) ending at %" PRIu64
                              "; expected increasing, non-overlapping offsets", where,
                              c->name, c->offset, i - 1, comps[i - 1].name,
                              comps[i - 1].offset + comps[i - 1].nbytes);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(c->name, comps[j].name) == 0)
                return smoe__fail(SMOE_EINVAL, "%s: field name: \"%s\" is also the name of "
                                  "component %" PRIu32 "; expected unique names",
                                  where, c->name, j);
    }
    smoe_component *nc = grow(w->comps, &w->comps_cap, (uint64_t)w->n_comps + n,
                              sizeof *w->comps);
    if (nc)
        w->comps = nc;
    w_layout *nl = grow(w->layouts, &w->layouts_cap, (uint64_t)w->n_layouts + 1,
                        sizeof *w->layouts);
    if (nl)
        w->layouts = nl;
    if (!nc || !nl)
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, w->path);
    for (uint32_t i = 0; i < n; i++) {
        /* Copy and normalise: the name is NUL-padded, whatever followed it. */
        smoe_component *d = &w->comps[w->n_comps + i];
        *d = comps[i];
        size_t len = strlen(comps[i].name);
        memset(d->name + len, 0, SMOE_COMPONENT_NAME_MAX - len);
    }
    const smoe_component *last = &comps[n - 1];
    w->layouts[w->n_layouts] = (w_layout){w->n_comps, n, last->offset + last->nbytes};
    w->n_comps += n;
    if (id)
        *id = w->n_layouts;
    w->n_layouts++;
    return 0;
}

static uint64_t meta_line_bytes(const char *key, const char *value)
{
    return strlen(key) + 1 + strlen(value) + 1; /* key=value\n */
}

SMOE_API int smoe_writer_set_meta(smoe_writer *w, const char *key, const char *value)
{
    static const char fn[] = "smoe_writer_set_meta";
    int rc = check_usable(w, fn);
    if (rc < 0)
        return rc;
    if (!key || !*key)
        return smoe__fail(SMOE_EINVAL, "%s: %s: key is NULL or empty", fn, w->path);
    if (!value)
        return smoe__fail(SMOE_EINVAL, "%s: %s: key \"%s\": value is NULL", fn, w->path, key);
    if (strpbrk(key, "=\n"))
        return smoe__fail(SMOE_EINVAL, "%s: %s: key \"%s\" contains '=' or a newline",
                          fn, w->path, key);
    if (strchr(value, '\n'))
        return smoe__fail(SMOE_EINVAL, "%s: %s: key \"%s\": the value contains a newline",
                          fn, w->path, key);
    if (!smoe__utf8_valid(key, strlen(key)) || !smoe__utf8_valid(value, strlen(value)))
        return smoe__fail(SMOE_EINVAL, "%s: %s: key \"%s\": key or value is not valid UTF-8",
                          fn, w->path, key);
    if (strcmp(key, "top_k") == 0) {
        const char *c = value;
        uint64_t k = 0;
        for (; *c >= '0' && *c <= '9' && k <= w->experts; c++)
            k = k * 10 + (uint64_t)(*c - '0');
        if (c == value || *c || k < 1 || k > w->experts)
            return smoe__fail(SMOE_EINVAL, "%s: %s: top_k is \"%s\", expected a decimal "
                              "number from 1 to experts (%" PRIu32 ")", fn, w->path, value,
                              w->experts);
    }
    uint32_t at = w->n_meta;
    for (uint32_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[i].key, key) == 0)
            at = i;
    uint64_t old = at < w->n_meta ? meta_line_bytes(key, w->meta[at].value) : 0;
    uint64_t total = w->meta_bytes - old + meta_line_bytes(key, value);
    if (total > SMOE__META_MAX)
        return smoe__fail(SMOE_EINVAL, "%s: %s: key \"%s\": the metadata would be %" PRIu64
                          " bytes, more than the limit of %u", fn, w->path, key, total,
                          SMOE__META_MAX);
    char *v = dup_str(value);
    if (!v)
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, w->path);
    if (at < w->n_meta) {
        free(w->meta[at].value);
        w->meta[at].value = v;
    } else {
        char *k = dup_str(key);
        w_meta *nm = grow(w->meta, &w->meta_cap, (uint64_t)w->n_meta + 1, sizeof *w->meta);
        if (nm)
            w->meta = nm;
        if (!k || !nm) {
            free(k);
            free(v);
            return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, w->path);
        }
        w->meta[w->n_meta++] = (w_meta){k, v};
    }
    w->meta_bytes = total;
    return 0;
}

SMOE_API int smoe_writer_add_blob(smoe_writer *w, uint32_t layer, uint32_t expert,
                                  uint32_t layout, const void *data, uint64_t size)
{
    static const char fn[] = "smoe_writer_add_blob";
    int rc = check_usable(w, fn);
    if (rc < 0)
        return rc;
    if (layer >= w->layers)
        return smoe__fail(SMOE_EINVAL, "%s: %s: layer %" PRIu32 " is out of range, expected "
                          "less than layers %" PRIu32, fn, w->path, layer, w->layers);
    if (expert >= w->experts)
        return smoe__fail(SMOE_EINVAL, "%s: %s: layer %" PRIu32 ": expert %" PRIu32 " is out "
                          "of range, expected less than experts %" PRIu32,
                          fn, w->path, layer, expert, w->experts);
    size_t key = (size_t)layer * w->experts + expert;
    if (w->seen[key / 8] & (1u << (key % 8)))
        return smoe__fail(SMOE_EINVAL, "%s: %s: (layer %" PRIu32 ", expert %" PRIu32 ") "
                          "was already added", fn, w->path, layer, expert);
    if (layout >= w->n_layouts)
        return smoe__fail(SMOE_EINVAL, "%s: %s: (layer %" PRIu32 ", expert %" PRIu32 "): "
                          "layout %" PRIu32 " does not exist (%" PRIu32 " added)",
                          fn, w->path, layer, expert, layout, w->n_layouts);
    if (!data || size == 0)
        return smoe__fail(SMOE_EINVAL, "%s: %s: (layer %" PRIu32 ", expert %" PRIu32 "): "
                          "no data", fn, w->path, layer, expert);
    if (size < w->layouts[layout].extent)
        return smoe__fail(SMOE_EINVAL, "%s: %s: (layer %" PRIu32 ", expert %" PRIu32 "): "
                          "size %" PRIu64 " is smaller than the extent %" PRIu64 " of layout %"
                          PRIu32, fn, w->path, layer, expert, size,
                          w->layouts[layout].extent, layout);
    if (size > SIZE_MAX || size > (UINT64_MAX >> 2) - w->pos)
        return smoe__fail(SMOE_EINVAL, "%s: %s: (layer %" PRIu32 ", expert %" PRIu32 "): "
                          "size %" PRIu64 " is too large", fn, w->path, layer, expert, size);
    unsigned char *nt = grow(w->table, &w->entries_cap, (uint64_t)w->entries + 1,
                             SMOE__ENTRY_SIZE);
    if (!nt)
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, w->path);
    w->table = nt;

    uint64_t padded = (size + SMOE__VAULT_ALIGN - 1) / SMOE__VAULT_ALIGN * SMOE__VAULT_ALIGN;
    if ((rc = write_at(w, data, size, w->pos, "a blob")) < 0 ||
        (rc = write_at(w, zeros, padded - size, w->pos + size, "a blob's padding")) < 0)
        return rc;
    unsigned char *r = w->table + (size_t)w->entries * SMOE__ENTRY_SIZE;
    smoe__put_le32(r, layer);
    smoe__put_le32(r + 4, expert);
    smoe__put_le32(r + 8, layout);
    smoe__put_le32(r + 12, 0);
    smoe__put_le64(r + 16, w->pos);
    smoe__put_le64(r + 24, size);
    smoe__put_le64(r + 32, padded);
    smoe__hash_put(r + 40, smoe__hash(data, (size_t)size));
    w->entries++;
    w->seen[key / 8] |= (unsigned char)(1u << (key % 8));
    w->pos += padded;
    return 0;
}

/* Serialise layouts, components and metadata after the expert table. */
static void fill_tables(const smoe_writer *w, unsigned char *t)
{
    unsigned char *p = t + (size_t)w->entries * SMOE__ENTRY_SIZE;
    memcpy(t, w->table, (size_t)w->entries * SMOE__ENTRY_SIZE);
    for (uint32_t i = 0; i < w->n_layouts; i++, p += SMOE__LAYOUT_SIZE) {
        smoe__put_le32(p, w->layouts[i].first);
        smoe__put_le32(p + 4, w->layouts[i].n);
        smoe__put_le64(p + 8, w->layouts[i].extent);
    }
    for (uint32_t i = 0; i < w->n_comps; i++, p += SMOE__COMPONENT_SIZE)
        smoe__component_put(p, &w->comps[i]);
    for (uint32_t i = 0; i < w->n_meta; i++) {
        size_t kl = strlen(w->meta[i].key), vl = strlen(w->meta[i].value);
        memcpy(p, w->meta[i].key, kl);
        p[kl] = '=';
        memcpy(p + kl + 1, w->meta[i].value, vl);
        p[kl + 1 + vl] = '\n';
        p += kl + vl + 2;
    }
}

/* fsync the directory holding path, so the rename itself is durable. */
static void sync_dir(const smoe_writer *w)
{
    const char *slash = strrchr(w->path, '/');
    char *dir = slash ? dup_str(w->path) : dup_str(".");
    if (!dir)
        return;
    if (slash)
        dir[slash == w->path ? 1 : slash - w->path] = 0;
    int fd = smoe__io_open(w->io, dir, SMOE__IO_RDONLY);
    if (fd >= 0) {
        smoe__io_fsync(w->io, fd); /* best effort: some file systems refuse */
        smoe__io_close(w->io, fd);
    }
    free(dir);
}

/* The tables after the last blob, then the header with its checksum; fsync,
 * close, and rename the temporary file over the vault's path. */
static int write_tables_and_rename(smoe_writer *w)
{
    static const char fn[] = "smoe_writer_finish";
    if (w->entries == 0)
        return smoe__fail(SMOE_EINVAL, "%s: %s: no blobs were added", fn, w->path);
    char where[1100];
    snprintf(where, sizeof where, "%s: %s", fn, w->path);
    int bad = smoe__shape_check(w->layers, w->experts, w->entries, where);
    if (bad < 0)
        return bad; /* the reader would refuse it */

    uint64_t tbytes = (uint64_t)w->entries * SMOE__ENTRY_SIZE;
    uint64_t lbytes = (uint64_t)w->n_layouts * SMOE__LAYOUT_SIZE +
                      (uint64_t)w->n_comps * SMOE__COMPONENT_SIZE;
    uint64_t total = tbytes + lbytes + w->meta_bytes;
    if (total > SIZE_MAX)
        return smoe__fail(SMOE_ENOMEM, "%s: %s: tables too large", fn, w->path);
    unsigned char *t = malloc(total ? (size_t)total : 1);
    if (!t)
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, w->path);
    fill_tables(w, t);

    /* Tables start at w->pos, a multiple of 16 KiB; each table's size is a
     * multiple of 8, so the layout table and metadata are 8-aligned too. */
    unsigned char h[SMOE__VAULT_HEADER_SIZE];
    memset(h, 0, sizeof h);
    memcpy(h, SMOE__VAULT_MAGIC, 8);
    smoe__put_le32(h + 8, SMOE__VAULT_VERSION);
    smoe__put_le32(h + 12, SMOE__VAULT_HEADER_SIZE);
    smoe__put_le32(h + 16, SMOE__VAULT_ALIGN);
    smoe__put_le32(h + 20, w->component_align);
    smoe__put_le32(h + 24, w->layers);
    smoe__put_le32(h + 28, w->experts);
    smoe__put_le32(h + 32, w->entries);
    smoe__put_le32(h + 36, w->n_layouts);
    smoe__put_le32(h + 40, w->n_comps);
    smoe__put_le32(h + 44, 0);
    smoe__put_le64(h + 48, w->pos);
    smoe__put_le64(h + 56, w->pos + tbytes);
    smoe__put_le64(h + 64, w->pos + tbytes + lbytes);
    smoe__put_le64(h + 72, w->meta_bytes);
    smoe__put_le64(h + 80, SMOE__VAULT_ALIGN);
    smoe__put_le64(h + 88, w->pos + total);

    const smoe__bytes parts[] = {{h, 120}, {t, (size_t)total}};
    uint64_t sum;
    if (smoe__hash_parts(parts, 2, &sum) < 0) {
        free(t);
        return smoe__fail(SMOE_ENOMEM, "%s: %s: out of memory", fn, w->path);
    }
    smoe__hash_put(h + 120, sum);

    int rc = write_at(w, t, total, w->pos, "the tables");
    free(t);
    if (rc < 0 || (rc = write_at(w, h, sizeof h, 0, "the header")) < 0)
        return rc;
    if ((rc = smoe__io_fsync(w->io, w->fd)) < 0)
        return smoe__fail(SMOE_EIO, "%s: %s: fsync failed: %s", fn, w->tmp, strerror(-rc));
    rc = smoe__io_close(w->io, w->fd);
    w->fd = -1;
    if (rc < 0)
        return smoe__fail(SMOE_EIO, "%s: %s: close failed: %s", fn, w->tmp, strerror(-rc));
    if ((rc = smoe__io_rename(w->io, w->tmp, w->path)) < 0)
        return smoe__fail(SMOE_ESYS, "%s: renaming %s to %s failed: %s", fn, w->tmp, w->path,
                          strerror(-rc));
    sync_dir(w);
    return 0;
}

SMOE_API int smoe_writer_finish(smoe_writer *w)
{
    int rc = check_usable(w, "smoe_writer_finish");
    if (!w)
        return rc;
    if (rc == 0)
        rc = write_tables_and_rename(w);
    if (rc < 0) {
        writer_discard(w);
        return rc;
    }
    writer_free(w);
    return 0;
}

SMOE_API void smoe_writer_abort(smoe_writer *w)
{
    if (w)
        writer_discard(w);
}
