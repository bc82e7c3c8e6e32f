/*
 * pack_index.c - `smoe index`: an index vault (docs/vault-format.md,
 * "Version 2") for a planned checkpoint. Nothing of the model is copied:
 * each expert's components become extents (source file, offset, length),
 * each source file is named relative to the vault's directory with its
 * size, modification time and the XXH3 of its header, and each expert
 * gets the XXH3 of its components' bytes in order (one read of the
 * experts, unless no_hash).
 *
 * The vault is built in memory (it is small: about 100 bytes per expert),
 * written as "<out>.tmp.<pid>", fsynced and renamed; an error or an
 * interrupt leaves no output. A scout copy, when asked for, is written
 * first (pack_write.c) and removed again should the vault fail.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "os.h"
#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

#define HASH_CHUNK (8u << 20)

/* One source file as the vault records it. */
typedef struct ix_source {
    char *name;           /* relative to the vault's directory */
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t header_hash;
} ix_source;

typedef struct ictx {
    const pack_source *s;
    const pack_plan *p;
    const pack_index_opts *o;
    const smoe__io *io;
    ix_source *src;
    uint64_t *hash;         /* per (layer, expert) in plan order */
    char *meta;             /* key=value\n text */
    size_t meta_len, meta_cap;
    uint8_t *buf;
    pack_progress *pg;
    uint64_t read_bytes;
} ictx;

static int stopped(const ictx *c)
{
    if (c->o->stop && *c->o->stop)
        return smoe__fail(SMOE_ESHUTDOWN, "interrupted; no output was written");
    return 0;
}

/* ---- relative names -------------------------------------------------- */

/* The absolute, resolved directory holding path (which may not exist). */
static char *abs_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? tool_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *r = dir ? tool_os_realpath(dir) : NULL;
    free(dir);
    return r;
}

/* Split an absolute path into its components (no empty ones). */
static size_t split(char *path, char **parts, size_t max)
{
    size_t n = 0;
    for (char *tok = strtok(path, "/"); tok && n < max; tok = strtok(NULL, "/"))
        parts[n++] = tok;
    return n;
}

/* File `to` relative to directory `from`, both absolute and resolved:
 * "../" for each of from's components past the shared ones, then the rest
 * of to. */
static char *relative(const char *from, const char *to)
{
    enum { MAXP = PATH_MAX / 2 };
    char *f = strdup(from), *t = strdup(to), **fp = malloc(MAXP * sizeof *fp),
         **tp = malloc(MAXP * sizeof *tp), *r = NULL;
    if (f && t && fp && tp) {
        size_t nf = split(f, fp, MAXP), nt = split(t, tp, MAXP), common = 0;
        while (common < nf && common + 1 < nt && !strcmp(fp[common], tp[common]))
            common++;
        size_t len = (nf - common) * 3 + 1;
        for (size_t i = common; i < nt; i++)
            len += strlen(tp[i]) + 1;
        if ((r = malloc(len)) != NULL) {
            r[0] = 0;
            for (size_t i = common; i < nf; i++)
                strcat(r, "../");
            for (size_t i = common; i < nt; i++) {
                strcat(r, tp[i]);
                if (i + 1 < nt)
                    strcat(r, "/");
            }
        }
    }
    free(f);
    free(t);
    free(fp);
    free(tp);
    return r;
}

static int name_sources(ictx *c)
{
    const pack_source *s = c->s;
    char *dir = abs_dir_of(c->o->out);
    if (!dir)
        return smoe__fail(SMOE_ESYS, "%s: cannot resolve the directory of the vault: %s",
                          c->o->out, strerror(errno));
    int rc = 0;
    for (uint32_t i = 0; i < s->n_files && rc == 0; i++) {
        char *abs = tool_os_realpath(s->files[i].path);
        if (!abs) {
            rc = smoe__fail(SMOE_ESYS, "%s: cannot resolve: %s", s->files[i].path,
                            strerror(errno));
            break;
        }
        c->src[i].name = relative(dir, abs);
        free(abs);
        if (!c->src[i].name)
            rc = smoe__fail(SMOE_ENOMEM, "out of memory");
        else if (strlen(c->src[i].name) > SMOE__V2_NAME_MAX)
            rc = smoe__fail(SMOE_EINVAL, "%s: its path relative to the vault, '%s', is longer "
                            "than %u bytes", s->files[i].path, c->src[i].name,
                            SMOE__V2_NAME_MAX);
    }
    free(dir);
    return rc;
}

/* ---- what is read: headers, experts ------------------------------------ */

/* Source i's header parsed as the library parses it at open (model_hdr.h):
 * a file whose tensors leave bytes between them, or whose header ends
 * elsewhere than the plan says, gets no vault (the library would refuse
 * it at open; docs/security.md). */
static int check_header(const ictx *c, uint32_t i, const uint8_t *b)
{
    const pack_file *f = &c->s->files[i];
    if (c->o->unchecked)
        return 0;
    smoe__model_hdr h;
    memset(&h, 0, sizeof h);
    uint32_t kind = f->kind == PACK_FMT_GGUF ? SMOE__V2_KIND_GGUF : SMOE__V2_KIND_SAFETENSORS;
    int rc = smoe__model_hdr_parse(kind, b, (size_t)f->header_bytes, f->size, &h);
    if (rc == 0 && h.header_end != f->header_bytes)
        rc = smoe__hdr_fail(&h, SMOE_EFORMAT, "its header ends at byte %" PRIu64
                            ", not at %" PRIu64, h.header_end, f->header_bytes);
    if (rc != 0)
        rc = smoe__fail(SMOE_EFORMAT, "%s: not indexed: %s (the library refuses such a "
                        "source at open)", f->path,
                        rc == SMOE__HDR_MORE ? "its header runs past its recorded end"
                                             : h.why);
    smoe__model_hdr_free(&h);
    return rc;
}

/* Source i's modification time and the XXH3 of its header, which is
 * checked as the library checks it. */
static int read_header(ictx *c, uint32_t i, XXH3_state_t *st)
{
    const pack_file *f = &c->s->files[i];
    smoe__io_stat fs;
    int fd = smoe__io_open_file(c->io, f->path, 0, NULL, &fs);
    if (fd < 0)
        return fd;
    int rc = 0;
    if (fs.size != f->size)
        rc = smoe__fail(SMOE_ESOURCE, "%s: its size changed while it was being indexed (%"
                        PRIu64 " bytes, then %" PRIu64 ")", f->path, f->size, fs.size);
    if (rc < 0 || f->header_bytes == 0 || f->header_bytes > SMOE__V2_HEADER_MAX) {
        smoe__io_close(c->io, fd);
        return rc < 0 ? rc : smoe__fail(SMOE_EFORMAT, "%s: header of %" PRIu64 " bytes, "
                                        "expected 1 to %llu", f->path, f->header_bytes,
                                        SMOE__V2_HEADER_MAX);
    }
    c->src[i].mtime_sec = fs.mtime_sec;
    c->src[i].mtime_nsec = fs.mtime_nsec;
    uint8_t *b = malloc((size_t)f->header_bytes);
    int err = 0;
    if (!b)
        rc = smoe__fail(SMOE_ENOMEM, "out of memory (%s: a header of %" PRIu64 " bytes)",
                        f->path, f->header_bytes);
    else if ((rc = smoe__io_read_full(c->io, fd, b, (size_t)f->header_bytes, 0, NULL, &err)) < 0)
        rc = smoe__fail(rc, "%s: reading its header failed: %s", f->path,
                        rc == SMOE_ETRUNC ? "the file ends first" : strerror(err));
    smoe__io_close(c->io, fd);
    if (rc == 0)
        rc = check_header(c, i, b);
    if (rc == 0) {
        XXH3_64bits_reset(st);
        XXH3_64bits_update(st, b, (size_t)f->header_bytes);
        c->src[i].header_hash = XXH3_64bits_digest(st);
        c->read_bytes += f->header_bytes;
    }
    free(b);
    return rc;
}

/* Every expert's XXH3 over its components in order, reading the plan's
 * slices in order with read-ahead. */
static int hash_experts(ictx *c, XXH3_state_t *st)
{
    const pack_plan *p = c->p;
    pack_feed feed;
    int rc = pack_feed_open(&feed, c->s, p, 0);
    size_t n = 0;
    for (uint32_t l = 0; l < p->layers && rc == 0; l++) {
        uint32_t id = p->layer_layout[l];
        if (id == UINT32_MAX)
            continue;
        const pack_layout *lay = &p->layouts[id];
        for (uint32_t e = 0; e < p->experts && rc == 0; e++) {
            if ((rc = stopped(c)) < 0)
                break;
            const pack_slice *sl = &p->slices[p->layer_slice0[l] + (size_t)e * lay->n];
            XXH3_64bits_reset(st);
            for (uint32_t k = 0; k < lay->n && rc == 0; k++)
                for (uint64_t done = 0; done < sl[k].nbytes && rc == 0;) {
                    size_t m = sl[k].nbytes - done < HASH_CHUNK ? (size_t)(sl[k].nbytes - done)
                                                                : HASH_CHUNK;
                    rc = pack_feed_read(&feed, sl[k].file, c->buf, m, sl[k].offset + done,
                                        c->s->tensors[sl[k].tensor].name);
                    XXH3_64bits_update(st, c->buf, m);
                    pack_progress_add(c->pg, m);
                    c->read_bytes += m;
                    done += m;
                }
            c->hash[n++] = XXH3_64bits_digest(st);
        }
    }
    pack_feed_close(&feed);
    return rc;
}

/* ---- the vault's bytes -------------------------------------------------- */

static int meta_put(void *u, const char *key, const char *value)
{
    ictx *c = u;
    if (strchr(value, '\n'))
        return smoe__fail(SMOE_EINVAL, "metadata %s: the value holds a newline", key);
    size_t need = strlen(key) + strlen(value) + 2;
    if (c->meta_len + need + 1 > c->meta_cap) {
        size_t cap = (c->meta_len + need + 1) * 2;
        char *m = realloc(c->meta, cap);
        if (!m)
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        c->meta = m;
        c->meta_cap = cap;
    }
    c->meta_len += (size_t)snprintf(c->meta + c->meta_len, c->meta_cap - c->meta_len, "%s=%s\n",
                                    key, value);
    return 0;
}

static uint64_t up8(uint64_t x)
{
    return (x + 7) / 8 * 8;
}

static void put_hash(unsigned char *p, uint64_t h)
{
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, h);
    memcpy(p, c.digest, sizeof c.digest);
}

/* Where each table goes: the source table and names, the layout and
 * component tables, the expert table, the extent table, the metadata. */
typedef struct ix_layout {
    uint64_t src, names, lct, table, xts, meta, end;
    uint64_t names_bytes, extents, components;
} ix_layout;

static void lay_out(const ictx *c, ix_layout *L)
{
    const pack_plan *p = c->p;
    const pack_source *s = c->s;
    memset(L, 0, sizeof *L);
    for (uint32_t i = 0; i < s->n_files; i++)
        L->names_bytes += strlen(c->src[i].name);
    for (uint32_t j = 0; j < p->n_layouts; j++)
        L->components += p->layouts[j].n;
    for (uint32_t l = 0; l < p->layers; l++)
        if (p->layer_layout[l] != UINT32_MAX)
            L->extents += (uint64_t)p->experts * p->layouts[p->layer_layout[l]].n;
    L->src = SMOE__VAULT_HEADER_SIZE;
    L->names = L->src + (uint64_t)s->n_files * SMOE__V2_SOURCE_SIZE;
    L->lct = up8(L->names + L->names_bytes);
    L->table = L->lct + (uint64_t)p->n_layouts * SMOE__LAYOUT_SIZE +
               L->components * SMOE__COMPONENT_SIZE;
    L->xts = L->table + (uint64_t)p->entries * SMOE__V2_ENTRY_SIZE;
    L->meta = L->xts + L->extents * SMOE__V2_EXTENT_SIZE;
    L->end = L->meta + c->meta_len;
}

/* Source i's alignment as the vault records it: what every extent in it
 * keeps. A file's own (GGUF's general.alignment) can be more than a
 * stacked tensor's expert slices keep (a Q6_K slice of 1680 bytes). */
static uint32_t extent_align(const pack_plan *p, const pack_file *f, uint32_t i)
{
    uint32_t a = f->align ? f->align : 1;
    for (uint32_t l = 0; l < p->layers; l++) {
        if (p->layer_layout[l] == UINT32_MAX)
            continue;
        const size_t n = (size_t)p->experts * p->layouts[p->layer_layout[l]].n;
        for (size_t k = 0; k < n; k++) {
            const pack_slice *sl = &p->slices[p->layer_slice0[l] + k];
            while (sl->file == i && sl->offset % a)
                a /= 2;
        }
    }
    return a;
}

static void put_sources(const ictx *c, const ix_layout *L, unsigned char *b)
{
    uint64_t name_at = 0;
    for (uint32_t i = 0; i < c->s->n_files; i++) {
        const pack_file *f = &c->s->files[i];
        unsigned char *r = b + L->src + (size_t)i * SMOE__V2_SOURCE_SIZE;
        size_t nl = strlen(c->src[i].name);
        smoe__put_le64(r, f->size);
        smoe__put_le64(r + 8, (uint64_t)c->src[i].mtime_sec);
        smoe__put_le32(r + 16, c->src[i].mtime_nsec);
        smoe__put_le32(r + 20, f->kind == PACK_FMT_GGUF ? SMOE__V2_KIND_GGUF
                                                        : SMOE__V2_KIND_SAFETENSORS);
        smoe__put_le64(r + 24, f->header_bytes);
        put_hash(r + 32, c->src[i].header_hash);
        smoe__put_le32(r + 40, extent_align(c->p, f, i));
        smoe__put_le32(r + 44, (uint32_t)nl);
        smoe__put_le64(r + 48, name_at);
        memcpy(b + L->names + name_at, c->src[i].name, nl);
        name_at += nl;
    }
}

/* Layouts with their components end to end from 0 (each component where it
 * lies in the bytes the expert's hash covers). */
static void put_layouts(const ictx *c, const ix_layout *L, unsigned char *b)
{
    const pack_plan *p = c->p;
    unsigned char *r = b + L->lct;
    unsigned char *cr = r + (size_t)p->n_layouts * SMOE__LAYOUT_SIZE;
    uint32_t first = 0;
    for (uint32_t j = 0; j < p->n_layouts; j++, r += SMOE__LAYOUT_SIZE) {
        uint64_t at = 0;
        for (uint32_t k = 0; k < p->layouts[j].n; k++, cr += SMOE__COMPONENT_SIZE) {
            smoe_component comp = p->layouts[j].comps[k];
            comp.offset = at;
            at += comp.nbytes;
            smoe__component_put(cr, &comp);
        }
        smoe__put_le32(r, first);
        smoe__put_le32(r + 4, p->layouts[j].n);
        smoe__put_le64(r + 8, at);
        first += p->layouts[j].n;
    }
}

static void put_entries(const ictx *c, const ix_layout *L, unsigned char *b)
{
    const pack_plan *p = c->p;
    unsigned char *r = b + L->table, *x = b + L->xts;
    uint64_t next = 0;
    size_t n = 0;
    for (uint32_t l = 0; l < p->layers; l++) {
        uint32_t id = p->layer_layout[l];
        if (id == UINT32_MAX)
            continue;
        const pack_layout *lay = &p->layouts[id];
        for (uint32_t e = 0; e < p->experts; e++, r += SMOE__V2_ENTRY_SIZE) {
            const pack_slice *sl = &p->slices[p->layer_slice0[l] + (size_t)e * lay->n];
            smoe__put_le32(r, l);
            smoe__put_le32(r + 4, e);
            smoe__put_le32(r + 8, id);
            smoe__put_le64(r + 16, next);
            put_hash(r + 24, c->o->no_hash ? 0 : c->hash[n]);
            n++;
            for (uint32_t k = 0; k < lay->n; k++, x += SMOE__V2_EXTENT_SIZE) {
                smoe__put_le32(x, sl[k].file);
                smoe__put_le64(x + 8, sl[k].offset);
                smoe__put_le64(x + 16, sl[k].nbytes);
            }
            next += lay->n;
        }
    }
}

static int put_header(const ictx *c, const ix_layout *L, unsigned char *b)
{
    const pack_plan *p = c->p;
    memcpy(b, SMOE__VAULT_MAGIC, 8);
    smoe__put_le32(b + 8, SMOE__VAULT_VERSION_INDEX);
    smoe__put_le32(b + 12, SMOE__VAULT_HEADER_SIZE);
    smoe__put_le32(b + 16, SMOE__VAULT_ALIGN);
    smoe__put_le32(b + 20, c->s->n_files);
    smoe__put_le32(b + 24, p->layers);
    smoe__put_le32(b + 28, p->experts);
    smoe__put_le32(b + 32, p->entries);
    smoe__put_le32(b + 36, p->n_layouts);
    smoe__put_le32(b + 40, (uint32_t)L->components);
    smoe__put_le32(b + 44, c->o->no_hash ? SMOE__V2_NO_HASH : 0);
    smoe__put_le64(b + 48, L->table);
    smoe__put_le64(b + 56, L->lct);
    smoe__put_le64(b + 64, L->meta);
    smoe__put_le64(b + 72, c->meta_len);
    smoe__put_le64(b + 80, L->src);
    smoe__put_le64(b + 88, L->end);
    smoe__put_le64(b + 96, L->xts);
    smoe__put_le32(b + 104, (uint32_t)L->extents);
    smoe__put_le32(b + 108, (uint32_t)L->names_bytes);
    /* The checksum: header bytes 0..119, then the tables in the reader's
     * order (vault_v2.c): experts, layouts and components, extents,
     * sources and names, metadata. */
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b, 120);
    XXH3_64bits_update(st, b + L->table, (size_t)(L->xts - L->table));
    XXH3_64bits_update(st, b + L->lct, (size_t)(L->table - L->lct));
    XXH3_64bits_update(st, b + L->xts, (size_t)(L->meta - L->xts));
    XXH3_64bits_update(st, b + L->src, (size_t)(L->names + L->names_bytes - L->src));
    XXH3_64bits_update(st, b + L->meta, (size_t)(L->end - L->meta));
    put_hash(b + 120, XXH3_64bits_digest(st));
    XXH3_freeState(st);
    return 0;
}

static void sync_dir(const smoe__io *io, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? tool_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int fd = dir ? smoe__io_open(io, dir, SMOE__IO_RDONLY) : -1;
    if (fd >= 0) {
        smoe__io_fsync(io, fd); /* best effort: some file systems refuse */
        smoe__io_close(io, fd);
    }
    free(dir);
}

/* Encode and write the vault: temporary name, fsync, rename. */
static int write_vault(ictx *c, uint64_t *bytes)
{
    ix_layout L;
    lay_out(c, &L);
    if (L.extents > UINT32_MAX)
        return smoe__fail(SMOE_ECOUNT, "%s: %" PRIu64 " extents, more than an index vault "
                          "holds", c->o->out, L.extents);
    unsigned char *b = calloc(1, (size_t)L.end);
    if (!b)
        return smoe__fail(SMOE_ENOMEM, "out of memory (%" PRIu64 " bytes of tables)", L.end);
    put_sources(c, &L, b);
    put_layouts(c, &L, b);
    put_entries(c, &L, b);
    memcpy(b + L.meta, c->meta, c->meta_len);
    size_t tl = strlen(c->o->out) + 32;
    char *tmp = malloc(tl);
    int rc = 0, err = 0;
    if (!tmp || (rc = put_header(c, &L, b)) < 0) {
        free(b);
        free(tmp);
        return rc < 0 ? rc : smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    snprintf(tmp, tl, "%s.tmp.%ld", c->o->out, (long)getpid());
    int fd = smoe__io_open(c->io, tmp, SMOE__IO_WRONLY);
    if (fd < 0)
        rc = smoe__fail(SMOE_ESYS, "%s: cannot create: %s", tmp, strerror(-fd));
    else if (smoe__io_write_full(c->io, fd, b, (size_t)L.end, 0, &err) < 0)
        rc = smoe__fail(SMOE_EIO, "%s: write failed: %s", tmp, strerror(err));
    else if ((rc = smoe__io_fsync(c->io, fd)) < 0)
        rc = smoe__fail(SMOE_EIO, "%s: fsync failed: %s", tmp, strerror(-rc));
    if (fd >= 0 && smoe__io_close(c->io, fd) < 0 && rc == 0)
        rc = smoe__fail(SMOE_EIO, "%s: close failed", tmp);
    if (rc == 0 && (rc = stopped(c)) == 0 && (rc = smoe__io_rename(c->io, tmp, c->o->out)) < 0)
        rc = smoe__fail(SMOE_ESYS, "renaming %s to %s failed: %s", tmp, c->o->out,
                        strerror(-rc));
    if (rc < 0 && fd >= 0)
        smoe__io_unlink(c->io, tmp);
    if (rc == 0)
        sync_dir(c->io, c->o->out);
    *bytes = L.end;
    free(tmp);
    free(b);
    return rc;
}

/* The scout copy, written and renamed first (pack_write.c). */
static int write_scout(const ictx *c, pack_index_result *r)
{
    pack_opts so;
    memset(&so, 0, sizeof so);
    so.out = c->o->out;
    so.scout = c->o->scout;
    so.progress = c->o->progress;
    so.stop = c->o->stop;
    so.scout_only = 1;
    pack_result pr;
    int rc = pack_write(c->s, c->p, &so, &pr);
    r->n_scout = pr.n_scout;
    r->scout_bytes = pr.scout_bytes;
    return rc;
}

/* The experts' component bytes (without the gaps a packed blob has). */
static uint64_t expert_bytes(const pack_plan *p)
{
    uint64_t total = 0;
    for (uint32_t l = 0; l < p->layers; l++) {
        if (p->layer_layout[l] == UINT32_MAX)
            continue;
        const pack_layout *lay = &p->layouts[p->layer_layout[l]];
        for (uint32_t k = 0; k < lay->n; k++)
            total += (uint64_t)p->experts * lay->comps[k].nbytes;
    }
    return total;
}

static int index_all(ictx *c, pack_index_result *r)
{
    const pack_source *s = c->s;
    int rc;
    if ((rc = pack_check_not_source(s, c->o->out)) < 0 || (rc = name_sources(c)) < 0)
        return rc;
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < s->n_files && rc == 0; i++)
        rc = read_header(c, i, st);
    if (rc == 0 && !c->o->no_hash) {
        c->pg = pack_progress_new(expert_bytes(c->p), c->o->progress);
        rc = c->pg ? hash_experts(c, st) : smoe__fail(SMOE_ENOMEM, "out of memory");
        pack_progress_end(c->pg, rc == 0);
    }
    XXH3_freeState(st);
    if (rc < 0 || (rc = stopped(c)) < 0)
        return rc;
    if (c->o->scout && (rc = write_scout(c, r)) < 0)
        return rc;
    if ((rc = pack_plan_meta(s, c->p, c->o->scout, meta_put, c)) == 0)
        rc = write_vault(c, &r->vault_bytes);
    if (rc < 0 && c->o->scout)
        c->io->unlink(c->io, c->o->scout);
    return rc;
}

int pack_index_write(const pack_source *s, const pack_plan *p, const pack_index_opts *o,
                     pack_index_result *r)
{
    uint64_t t0 = tool_now_ns();
    memset(r, 0, sizeof *r);
    ictx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.p = p;
    c.o = o;
    c.io = smoe__io_get();
    c.src = calloc(s->n_files ? s->n_files : 1, sizeof *c.src);
    c.hash = calloc(p->entries ? p->entries : 1, sizeof *c.hash);
    c.buf = malloc(HASH_CHUNK);
    int rc = c.src && c.hash && c.buf ? index_all(&c, r) : smoe__fail(SMOE_ENOMEM, "out of memory");
    if (rc == 0) {
        r->layers = p->layers;
        r->experts = p->experts;
        r->entries = p->entries;
        r->layouts = p->n_layouts;
        r->sources = s->n_files;
        for (uint32_t i = 0; i < s->n_files; i++)
            r->model_bytes += s->files[i].size;
        r->expert_bytes = expert_bytes(p);
        r->hashed_bytes = c.read_bytes;
    }
    for (uint32_t i = 0; c.src && i < s->n_files; i++)
        free(c.src[i].name);
    free(c.src);
    free(c.hash);
    free(c.buf);
    free(c.meta);
    r->ns = tool_now_ns() - t0;
    return rc;
}
