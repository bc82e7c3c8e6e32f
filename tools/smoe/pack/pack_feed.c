/*
 * pack_feed.c - reading a plan's source bytes in the order the writers
 * consume them, with read-ahead: every source file open, and the next
 * FEED_WINDOW bytes of the ranges to come advised to the kernel
 * (POSIX_FADV_WILLNEED, in pieces of FEED_PIECE), so the disk streams
 * while the caller hashes and writes. The order: the scout tensors (when
 * asked for), then every blob's slices by (layer, expert, component).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "fadvise.h"
#include "pack.h"

#define FEED_WINDOW (64ull << 20)
#define FEED_PIECE (4ull << 20)

/* The range at cursor k: 1 and its place, or 0 past the end. */
static int feed_range(const pack_feed *f, const pack_feed_cursor *k, uint32_t *file,
                      uint64_t *off, uint64_t *len)
{
    const pack_plan *p = f->p;
    if (k->scout < f->n_scout) {
        const pack_tensor *t = &f->s->tensors[p->scout[k->scout]];
        *file = t->file;
        *off = t->offset;
        *len = t->nbytes;
        return 1;
    }
    for (uint32_t l = k->layer; l < p->layers; l++) {
        uint32_t id = p->layer_layout[l];
        if (id == UINT32_MAX)
            continue;
        const pack_layout *lay = &p->layouts[id];
        uint32_t e = l == k->layer ? k->expert : 0, comp = l == k->layer ? k->comp : 0;
        if (e >= p->experts)
            continue;
        const pack_slice *sl = &p->slices[p->layer_slice0[l] + (size_t)e * lay->n + comp];
        *file = sl->file;
        *off = sl->offset;
        *len = sl->nbytes;
        return 1;
    }
    return 0;
}

static void feed_next(const pack_feed *f, pack_feed_cursor *k)
{
    const pack_plan *p = f->p;
    k->done = 0;
    if (k->scout < f->n_scout) {
        k->scout++;
        return;
    }
    /* Move to the layer feed_range found, then one component on. */
    while (k->layer < p->layers && p->layer_layout[k->layer] == UINT32_MAX)
        k->layer++, k->expert = 0, k->comp = 0;
    if (k->layer >= p->layers)
        return;
    if (++k->comp == p->layouts[p->layer_layout[k->layer]].n) {
        k->comp = 0;
        if (++k->expert == p->experts) {
            k->expert = 0;
            k->layer++;
        }
    }
}

static void read_ahead(pack_feed *f)
{
    while (f->issued < f->consumed + FEED_WINDOW) {
        uint32_t file;
        uint64_t off, len;
        if (!feed_range(f, &f->ra, &file, &off, &len))
            return;
        uint64_t piece = len - f->ra.done < FEED_PIECE ? len - f->ra.done : FEED_PIECE;
        if (piece)
            tool_advise_willneed(f->fds[file], off + f->ra.done, piece);
        f->ra.done += piece;
        f->issued += piece;
        if (f->ra.done == len)
            feed_next(f, &f->ra);
    }
}

int pack_feed_open(pack_feed *f, const pack_source *s, const pack_plan *p, int with_scout)
{
    memset(f, 0, sizeof *f);
    f->s = s;
    f->p = p;
    f->io = smoe__io_get();
    f->n_scout = with_scout ? p->n_scout : 0;
    f->fds = malloc((s->n_files ? s->n_files : 1) * sizeof *f->fds);
    if (!f->fds)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < s->n_files; i++)
        f->fds[i] = -1;
    for (uint32_t i = 0; i < s->n_files; i++) {
        smoe__io_stat st;
        int fd = smoe__io_open_file(f->io, s->files[i].path, 0, NULL, &st);
        if (fd < 0)
            return fd;
        f->fds[i] = fd;
#if defined(POSIX_FADV_SEQUENTIAL)
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* a hint: larger read-ahead */
#endif
    }
    return 0;
}

int pack_feed_read(pack_feed *f, uint32_t file, void *buf, size_t n, uint64_t off,
                   const char *tensor)
{
    int err = 0;
    read_ahead(f);
    f->consumed += n;
    int rc = smoe__io_read_full(f->io, f->fds[file], buf, n, off, NULL, &err);
    if (rc == SMOE_ETRUNC)
        return smoe__fail(rc, "%s: tensor '%s': the file ends inside its bytes (it shrank "
                          "while reading?)", f->s->files[file].path, tensor);
    if (rc < 0)
        return smoe__fail(rc, "%s: tensor '%s': read failed: %s", f->s->files[file].path,
                          tensor, strerror(err));
    return 0;
}

void pack_feed_close(pack_feed *f)
{
    for (uint32_t i = 0; f->fds && i < f->s->n_files; i++)
        if (f->fds[i] >= 0)
            f->io->close(f->io, f->fds[i]);
    free(f->fds);
    f->fds = NULL;
}
