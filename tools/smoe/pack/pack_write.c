/*
 * pack_write.c - copying a planned pack: the scout file first, then every
 * (layer, expert) blob through the smoe_writer API.
 *
 * Both outputs are written under temporary names ("<path>.tmp.<pid>"). Only
 * when everything is written is the scout file renamed into place and the
 * vault finished (which renames it); should finishing the vault fail, the
 * new scout file is removed again. Any earlier failure, or an interrupt,
 * removes both temporary files: a pack never leaves a file that looks
 * complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

#define COPY_CHUNK (8u << 20)

typedef struct wctx {
    const pack_source *s;
    const pack_plan *p;
    const pack_opts *o;
    const smoe__io *io;
    pack_feed feed;        /* the sources, read in copy order (pack_feed.c) */
    pack_progress *pg;
    uint8_t *buf;          /* COPY_CHUNK bytes, or the largest blob */
    size_t cap;
    /* the outputs */
    char *scout_path, *tmp; /* the scout file, and its temporary name */
    int sfd;                /* tmp, open for writing */
    int scout_renamed;
    pack_scout sc;
    smoe_writer *w;
} wctx;

static int stopped(const wctx *c)
{
    if (c->o->stop && *c->o->stop)
        return smoe__fail(SMOE_ESHUTDOWN, "interrupted; no output was written");
    return 0;
}

static int read_src(wctx *c, uint32_t file, void *buf, size_t n, uint64_t off,
                    const char *tensor)
{
    return pack_feed_read(&c->feed, file, buf, n, off, tensor);
}

static int write_out(const wctx *c, int fd, const char *path, const void *buf, size_t n,
                     uint64_t off)
{
    int err = 0;
    if (smoe__io_write_full(c->io, fd, buf, n, off, &err) < 0)
        return smoe__fail(SMOE_EIO, "%s: write of %zu bytes at %" PRIu64 " failed: %s", path,
                          n, off, strerror(err));
    return 0;
}

/* Write the scout file's data, then its index and header, into fd. */
static int write_scout(wctx *c, pack_scout *sc, int fd, const char *tmp)
{
    static const uint8_t zeros[PACK_SCOUT_ALIGN];
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < c->p->n_scout && rc == 0; i++) {
        const pack_tensor *t = &c->s->tensors[c->p->scout[i]];
        pack_scout_entry *e = &sc->e[i];
        XXH3_64bits_reset(st);
        for (uint64_t done = 0; done < t->nbytes && rc == 0;) {
            size_t k = t->nbytes - done < c->cap ? (size_t)(t->nbytes - done) : c->cap;
            if ((rc = stopped(c)) < 0 ||
                (rc = read_src(c, t->file, c->buf, k, t->offset + done, t->name)) < 0 ||
                (rc = write_out(c, fd, tmp, c->buf, k, e->offset + done)) < 0)
                break;
            XXH3_64bits_update(st, c->buf, k);
            pack_progress_add(c->pg, k);
            done += k;
        }
        uint64_t pad = (PACK_SCOUT_ALIGN - e->nbytes % PACK_SCOUT_ALIGN) % PACK_SCOUT_ALIGN;
        if (rc == 0 && pad)
            rc = write_out(c, fd, tmp, zeros, (size_t)pad, e->offset + e->nbytes);
        e->hash = XXH3_64bits_digest(st);
    }
    XXH3_freeState(st);
    if (rc < 0)
        return rc;
    uint8_t *head;
    size_t hlen;
    if ((rc = pack_scout_encode(sc, &head, &hlen)) < 0)
        return rc;
    rc = write_out(c, fd, tmp, head, hlen, 0);
    free(head);
    /* Zeros between the index and the data (no holes in the file). */
    for (uint64_t off = hlen; rc == 0 && off < sc->data_offset;) {
        size_t k = sc->data_offset - off < sizeof zeros ? (size_t)(sc->data_offset - off)
                                                        : sizeof zeros;
        rc = write_out(c, fd, tmp, zeros, k, off);
        off += k;
    }
    if (rc == 0 && (rc = c->io->fsync(c->io, fd)) < 0)
        rc = smoe__fail(SMOE_EIO, "%s: fsync failed: %s", tmp, strerror(-rc));
    return rc;
}

/* Distinct dtypes of the weights (not companions) of every layout. */
static void quant_string(const pack_plan *p, char *out, size_t n)
{
    out[0] = 0;
    size_t used = 0;
    for (uint32_t l = 0; l < p->n_layouts; l++)
        for (uint32_t i = 0; i < p->layouts[l].n; i++) {
            const smoe_component *c = &p->layouts[l].comps[i];
            if (strchr(c->name, '.'))
                continue;
            char one[96];
            if (c->dtype == SMOE_DTYPE_MLX_PACKED)
                snprintf(one, sizeof one, "mlx_packed:%" PRIu32 "bit:g%" PRIu32, c->quant_bits,
                         c->quant_group);
            else
                snprintf(one, sizeof one, "%s", smoe_dtype_name(c->dtype));
            /* Already listed? Compare whole '+'-separated items. */
            int seen = 0;
            for (const char *q = out; *q && !seen;) {
                size_t len = strcspn(q, "+");
                seen = len == strlen(one) && !strncmp(q, one, len);
                q += len + (q[len] == '+');
            }
            if (!seen && used + strlen(one) + 2 < n)
                used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "+" : "", one);
        }
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int pack_plan_meta(const pack_source *s, const pack_plan *p, const char *scout_path,
                   int (*put)(void *u, const char *key, const char *value), void *u)
{
    const pack_meta *m = &s->meta;
    char quant[256], num[32];
    int rc = 0;
    if (m->arch)
        rc = put(u, "arch", m->arch);
    if (rc == 0 && m->model)
        rc = put(u, "model", m->model);
    if (rc == 0 && m->top_k) {
        if (m->top_k > p->experts)
            return smoe__fail(SMOE_EFORMAT, "%s: experts per token (%" PRIu32 ") is more than "
                              "the experts per layer (%" PRIu32 ")", s->path, m->top_k,
                              p->experts);
        snprintf(num, sizeof num, "%" PRIu32, m->top_k);
        rc = put(u, "top_k", num);
    }
    quant_string(p, quant, sizeof quant);
    if (rc == 0 && quant[0])
        rc = put(u, "quant", quant);
    if (rc == 0)
        rc = put(u, "source_format", s->format == PACK_FMT_GGUF ? "gguf" : "safetensors");
    if (rc == 0 && scout_path)
        rc = put(u, "scout", base_name(scout_path));
    return rc;
}

static int writer_put(void *u, const char *key, const char *value)
{
    return smoe_writer_set_meta(u, key, value);
}

static int write_blobs(wctx *c, smoe_writer *w)
{
    const pack_plan *p = c->p;
    for (uint32_t l = 0; l < p->layers; l++) {
        uint32_t id = p->layer_layout[l];
        if (id == UINT32_MAX)
            continue;
        const pack_layout *lay = &p->layouts[id];
        for (uint32_t e = 0; e < p->experts; e++) {
            int rc = stopped(c);
            if (rc < 0)
                return rc;
            const pack_slice *sl = &p->slices[p->layer_slice0[l] + (size_t)e * lay->n];
            uint64_t at = 0;
            for (uint32_t k = 0; k < lay->n; k++) {
                const smoe_component *comp = &lay->comps[k];
                if (comp->offset > at) /* alignment gap */
                    memset(c->buf + at, 0, (size_t)(comp->offset - at));
                rc = read_src(c, sl[k].file, c->buf + comp->offset, (size_t)sl[k].nbytes,
                              sl[k].offset, c->s->tensors[sl[k].tensor].name);
                if (rc < 0)
                    return rc;
                at = comp->offset + comp->nbytes;
            }
            if ((rc = smoe_writer_add_blob(w, l, e, id, c->buf, lay->extent)) < 0)
                return rc;
            pack_progress_add(c->pg, lay->extent);
        }
    }
    return 0;
}

/* path's identity through the platform layer (stat's st_ino is 0 for every
 * file on Windows); -1 when it cannot be opened. */
static int file_id(const char *path, smoe__io_stat *st)
{
    int fd = smoe__io_open(&smoe__io_os, path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
    if (fd < 0)
        return -1;
    int rc = smoe__io_fstat(&smoe__io_os, fd, st);
    smoe__io_close(&smoe__io_os, fd);
    return rc < 0 || (!st->dev && !st->ino) ? -1 : 0;
}

int pack_check_not_source(const pack_source *s, const char *out)
{
    smoe__io_stat o, f;
    if (file_id(out, &o) != 0)
        return 0; /* does not exist yet */
    for (uint32_t i = 0; i < s->n_files; i++)
        if (file_id(s->files[i].path, &f) == 0 && f.dev == o.dev && f.ino == o.ino)
            return smoe__fail(SMOE_EINVAL, "%s is one of the source files; choose another "
                              "output name", out);
    return 0;
}

/* The scout file's names, and checks that neither output is an input. */
static int name_outputs(wctx *c)
{
    const pack_opts *o = c->o;
    c->scout_path = o->scout ? strdup(o->scout) : pack_scout_path_for(o->out);
    size_t tl = c->scout_path ? strlen(c->scout_path) + 32 : 0;
    c->tmp = c->scout_path ? malloc(tl) : NULL;
    if (!c->scout_path || !c->tmp)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    snprintf(c->tmp, tl, "%s.tmp.%ld", c->scout_path, (long)getpid());
    if (!strcmp(c->scout_path, o->out))
        return smoe__fail(SMOE_EINVAL, "the scout file and the vault are both %s", o->out);
    int rc = pack_check_not_source(c->s, o->out);
    return rc < 0 ? rc : pack_check_not_source(c->s, c->scout_path);
}

/* The copy buffer (a chunk, or the largest blob) and every source file. */
static int open_sources(wctx *c)
{
    c->cap = COPY_CHUNK;
    for (uint32_t i = 0; i < c->p->n_layouts; i++)
        if (c->p->layouts[i].extent > c->cap)
            c->cap = (size_t)c->p->layouts[i].extent;
    if (!(c->buf = malloc(c->cap)))
        return smoe__fail(SMOE_ENOMEM, "out of memory (a %zu-byte blob buffer)", c->cap);
    return pack_feed_open(&c->feed, c->s, c->p, 1);
}

/* The vault's writer with the plan's layouts (their ids the plan's
 * indices) and metadata. */
static int open_vault(wctx *c)
{
    const pack_plan *p = c->p;
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = p->layers;
    wo.experts = p->experts;
    wo.component_align = p->component_align;
    int rc = smoe_writer_open(c->o->out, &wo, &c->w);
    for (uint32_t i = 0; i < p->n_layouts && rc >= 0; i++) {
        uint32_t id;
        if ((rc = smoe_writer_add_layout(c->w, p->layouts[i].comps, p->layouts[i].n, &id)) < 0)
            return rc;
        if (id != i) /* blobs name layouts by the plan's index */
            return smoe__fail(SMOE_EINVAL, "%s: layout %" PRIu32 " was given id %" PRIu32,
                              c->o->out, i, id);
    }
    return rc < 0 ? rc : pack_plan_meta(c->s, p, c->scout_path, writer_put, c->w);
}

/* Both outputs into place: the scout file renamed, then the vault finished
 * (renamed by the writer); should that fail, the new scout file goes. */
static int finish_outputs(wctx *c)
{
    int rc = c->io->close(c->io, c->sfd);
    c->sfd = -1;
    if (rc < 0)
        return smoe__fail(SMOE_EIO, "%s: close failed: %s", c->tmp, strerror(-rc));
    if ((rc = c->io->rename(c->io, c->tmp, c->scout_path)) < 0)
        return smoe__fail(SMOE_ESYS, "renaming %s to %s failed: %s", c->tmp, c->scout_path,
                          strerror(-rc));
    c->scout_renamed = 1;
    if (c->o->scout_only)
        return 0;
    rc = smoe_writer_finish(c->w); /* frees w, success or not */
    c->w = NULL;
    if (rc < 0)
        c->io->unlink(c->io, c->scout_path);
    return rc;
}

/* Every step in order; the caller cleans up. */
static int write_all(wctx *c)
{
    int rc;
    if ((rc = name_outputs(c)) < 0 || (rc = open_sources(c)) < 0 ||
        (rc = pack_scout_layout(&c->sc, c->s, c->p->scout, c->p->n_scout)) < 0)
        return rc;
    const int only = c->o->scout_only;
    c->pg = pack_progress_new(c->p->scout_bytes + (only ? 0 : c->p->expert_bytes),
                              c->o->progress);
    if (!c->pg)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    if (!only && (rc = open_vault(c)) < 0)
        return rc;
    c->sfd = c->io->open(c->io, c->tmp, SMOE__IO_WRONLY);
    if (c->sfd < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot create: %s", c->tmp, strerror(-c->sfd));
    if ((rc = write_scout(c, &c->sc, c->sfd, c->tmp)) < 0 ||
        (!only && (rc = write_blobs(c, c->w)) < 0))
        return rc;
    return finish_outputs(c);
}

static void cleanup(wctx *c, int rc)
{
    pack_progress_end(c->pg, rc == 0);
    if (c->w)
        smoe_writer_abort(c->w);
    if (c->sfd >= 0)
        c->io->close(c->io, c->sfd);
    if (rc < 0 && !c->scout_renamed && c->tmp)
        c->io->unlink(c->io, c->tmp);
    pack_feed_close(&c->feed);
    free(c->buf);
    free(c->tmp);
    free(c->scout_path);
    pack_scout_free(&c->sc);
}

int pack_write(const pack_source *s, const pack_plan *p, const pack_opts *o, pack_result *r)
{
    wctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.p = p;
    c.o = o;
    c.io = smoe__io_get();
    c.sfd = -1;
    uint64_t t0 = tool_now_ns();
    memset(r, 0, sizeof *r);
    int rc = write_all(&c);
    if (rc == 0) {
        r->layers = p->layers;
        r->experts = p->experts;
        r->entries = p->entries;
        r->layouts = p->n_layouts;
        r->n_scout = p->n_scout;
        r->scout_bytes = c.sc.file_size;
        r->source_bytes = p->scout_bytes + p->expert_bytes;
        smoe__io_stat st;
        if (file_id(o->out, &st) == 0)
            r->vault_bytes = st.size;
    }
    cleanup(&c, rc);
    r->ns = tool_now_ns() - t0;
    return rc;
}
