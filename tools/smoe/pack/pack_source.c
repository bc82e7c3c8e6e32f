/*
 * pack_source.c - the tensor list every source reader fills, range checks
 * shared by the readers, and the choice of reader for a SOURCE argument.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "error.h"
#include "io.h"
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

const pack_tensor *pack_source_find(const pack_source *s, const char *name)
{
    for (size_t i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, name))
            return &s->tensors[i];
    return NULL;
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

uint64_t pack_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

int pack_read_prefix(int fd, uint8_t *buf, size_t n, const char *path)
{
    const smoe__io *io = smoe__io_get();
    int err = 0;
    int rc = smoe__io_read_full(io, fd, buf, n, 0, NULL, &err);
    if (rc == SMOE_EIO)
        return smoe__fail(SMOE_EIO, "%s: read failed: %s", path, strerror(err));
    if (rc == SMOE_ETRUNC)
        return smoe__fail(SMOE_ETRUNC, "%s: file is shorter than %zu bytes", path, n);
    return rc;
}

int pack_open_read(const char *path, int *fd, uint64_t *size)
{
    const smoe__io *io = smoe__io_get();
    *fd = smoe__io_open(io, path, SMOE__IO_RDONLY);
    if (*fd < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot open: %s", path, strerror(-*fd));
    int rc = smoe__io_size(io, *fd, size);
    if (rc < 0) {
        smoe__io_close(io, *fd);
        *fd = -1;
        return smoe__fail(SMOE_ESYS, "%s: cannot stat: %s", path, strerror(-rc));
    }
    return 0;
}

int pack_read_small_file(const char *path, uint64_t max, char **out, size_t *n)
{
    const smoe__io *io = smoe__io_get();
    *out = NULL;
    *n = 0;
    int fd;
    uint64_t size = 0;
    int rc = pack_open_read(path, &fd, &size);
    if (rc < 0)
        return rc;
    if (size > max) {
        io->close(io, fd);
        return smoe__fail(SMOE_ERANGE, "%s: %" PRIu64 " bytes, more than the %" PRIu64
                          " a JSON file may have", path, size, max);
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        io->close(io, fd);
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    rc = pack_read_prefix(fd, (uint8_t *)buf, (size_t)size, path);
    io->close(io, fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[size] = 0;
    *out = buf;
    *n = (size_t)size;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Read config.json in dir when present; its absence is not an error. */
static int load_config(pack_source *s, const char *dir)
{
    char *p = path_join(dir, "config.json");
    if (!p)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    int rc = 0;
    if (is_file(p)) {
        char *json;
        size_t n;
        rc = pack_read_small_file(p, 64u << 20, &json, &n);
        if (rc == 0) {
            rc = pack_config_parse(json, n, p, &s->meta);
            free(json);
        }
    }
    free(p);
    return rc;
}

/* The single *.gguf in dir, or an error when there are none or several. */
static int find_gguf(const char *dir, char **out)
{
    DIR *d = opendir(dir);
    if (!d)
        return smoe__fail(SMOE_ESYS, "%s: cannot read directory: %s", dir, strerror(errno));
    char *found = NULL;
    int rc = 0, count = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!ends_with(de->d_name, ".gguf"))
            continue;
        if (++count == 1 && !(found = path_join(dir, de->d_name)))
            rc = smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    closedir(d);
    if (rc == 0 && count == 0)
        rc = smoe__fail(SMOE_ENOENT, "%s: holds no model.safetensors.index.json, "
                        "*.safetensors or *.gguf file", dir);
    if (rc == 0 && count > 1)
        rc = smoe__fail(SMOE_EINVAL, "%s: holds %d .gguf files; name the one to pack",
                        dir, count);
    if (rc < 0) {
        free(found);
        return rc;
    }
    *out = found;
    return 0;
}

static int dir_has_suffix(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL)
        found = ends_with(de->d_name, suffix);
    closedir(d);
    return found;
}

int pack_source_open(pack_source *s, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return smoe__fail(SMOE_ESYS, "%s: %s", path, strerror(errno));
    if (pack_meta_set(&s->path, path) < 0)
        return SMOE_ENOMEM;
    int rc;
    if (S_ISDIR(st.st_mode)) {
        char *ix = path_join(path, "model.safetensors.index.json");
        if (!ix)
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        if (is_file(ix)) {
            rc = pack_st_load_index(s, ix);
        } else if (dir_has_suffix(path, ".safetensors")) {
            rc = pack_st_load_dir(s, path);
        } else {
            char *g = NULL;
            rc = find_gguf(path, &g);
            if (rc == 0)
                rc = pack_gguf_load_file(s, g);
            free(g);
            free(ix);
            return rc;
        }
        free(ix);
        return rc < 0 ? rc : load_config(s, path);
    }
    if (!S_ISREG(st.st_mode))
        return smoe__fail(SMOE_EINVAL, "%s: not a file or directory", path);

    if (ends_with(path, ".gguf"))
        return pack_gguf_load_file(s, path);
    if (ends_with(path, ".json"))
        rc = pack_st_load_index(s, path);
    else if (ends_with(path, ".safetensors"))
        rc = pack_st_load_file(s, path);
    else {
        /* No telling suffix: GGUF has a magic number, safetensors has not. */
        const smoe__io *io = smoe__io_get();
        uint8_t magic[4] = {0};
        int fd = io->open(io, path, SMOE__IO_RDONLY);
        if (fd < 0)
            return smoe__fail(SMOE_ESYS, "%s: cannot open: %s", path, strerror(-fd));
        int err;
        int r = smoe__io_read_full(io, fd, magic, 4, 0, NULL, &err);
        io->close(io, fd);
        if (r == 0 && !memcmp(magic, "GGUF", 4))
            return pack_gguf_load_file(s, path);
        rc = pack_st_load_file(s, path);
    }
    if (rc < 0)
        return rc;
    char *dir = dir_of(path);
    if (!dir)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    rc = load_config(s, dir);
    free(dir);
    return rc;
}
