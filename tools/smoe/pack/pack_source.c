/*
 * pack_source.c - the tensor list every source reader fills, and the range
 * checks the readers share.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "pack.h"

void pack_source_init(pack_source *s)
{
    memset(s, 0, sizeof *s);
}

void pack_source_free(pack_source *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n_files; i++)
        free(s->files[i].path);
    free(s->files);
    for (size_t i = 0; i < s->n_tensors; i++)
        free(s->tensors[i].name);
    free(s->tensors);
    free(s->meta.arch);
    free(s->meta.model);
    free(s->meta.experts_from);
    free(s->path);
    memset(s, 0, sizeof *s);
}

int pack_meta_set(char **field, const char *value)
{
    char *c = strdup(value);
    if (!c)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    free(*field);
    *field = c;
    return 0;
}

int pack_source_add_file(pack_source *s, const char *path, uint64_t size,
                         uint32_t *index)
{
    pack_file *f = realloc(s->files, (s->n_files + 1) * sizeof *f);
    if (!f)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    s->files = f;
    f[s->n_files].path = strdup(path);
    if (!f[s->n_files].path)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    f[s->n_files].size = size;
    *index = s->n_files++;
    return 0;
}

int pack_source_add_tensor(pack_source *s, const pack_tensor *t)
{
    if (s->n_tensors == s->cap_tensors) {
        size_t cap = s->cap_tensors ? s->cap_tensors * 2 : 256;
        pack_tensor *n = realloc(s->tensors, cap * sizeof *n);
        if (!n)
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        s->tensors = n;
        s->cap_tensors = cap;
    }
    pack_tensor *d = &s->tensors[s->n_tensors];
    *d = *t;
    d->name = strdup(t->name);
    if (!d->name)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    s->n_tensors++;
    return 0;
}

void pack_source_truncate(pack_source *s, size_t n)
{
    while (s->n_tensors > n)
        free(s->tensors[--s->n_tensors].name);
}

typedef struct range {
    uint64_t offset, nbytes;
    size_t index;
} range;

static int by_offset(const void *a, const void *b)
{
    const range *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

int pack_source_check_ranges(const pack_source *s, size_t first, size_t count,
                             uint64_t data_start, uint64_t file_size,
                             const char *fname)
{
    for (size_t i = first; i < first + count; i++) {
        const pack_tensor *t = &s->tensors[i];
        uint64_t end;
        if (pack_add(t->offset, t->nbytes, &end))
            return smoe__fail(SMOE_EOVERFLOW,
                              "%s: tensor '%s': offset %" PRIu64 " plus size %" PRIu64
                              " overflows", fname, t->name, t->offset, t->nbytes);
        if (t->offset < data_start || end > file_size)
            return smoe__fail(SMOE_ERANGE,
                              "%s: tensor '%s': bytes [%" PRIu64 ", %" PRIu64
                              ") lie outside the file's data [%" PRIu64 ", %" PRIu64 ")",
                              fname, t->name, t->offset, end, data_start, file_size);
    }
    if (count < 2)
        return 0;
    range *ord = malloc(count * sizeof *ord);
    if (!ord)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        ord[i].offset = s->tensors[first + i].offset;
        ord[i].nbytes = s->tensors[first + i].nbytes;
        ord[i].index = first + i;
    }
    qsort(ord, count, sizeof *ord, by_offset);
    int rc = 0;
    const range *prev = NULL;
    for (size_t i = 0; i < count; i++) {
        /* Empty tensors occupy no bytes and overlap nothing. */
        if (!ord[i].nbytes)
            continue;
        if (prev && ord[i].offset < prev->offset + prev->nbytes) {
            const pack_tensor *a = &s->tensors[prev->index], *b = &s->tensors[ord[i].index];
            rc = smoe__fail(SMOE_EOVERLAP,
                            "%s: tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64
                            ", %" PRIu64 ") overlap", fname, a->name, a->offset,
                            a->offset + a->nbytes, b->name, b->offset, b->offset + b->nbytes);
            break;
        }
        if (!prev || ord[i].offset + ord[i].nbytes > prev->offset + prev->nbytes)
            prev = &ord[i];
    }
    free(ord);
    return rc;
}

const char *pack_shape_str(const uint64_t *shape, uint32_t ndim, char *buf, size_t n)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (uint32_t i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}
