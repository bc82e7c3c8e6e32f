/*
 * pack_open.c - the choice of reader for a SOURCE argument: a file by its
 * suffix (or GGUF's magic number), a directory by what it holds; then the
 * config.json beside a safetensors checkpoint.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

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
    return tool_strndup(path, (size_t)(slash - path));
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
        smoe__io_stat fst;
        int fd = smoe__io_open_file(io, path, 0, NULL, &fst);
        if (fd < 0)
            return fd;
        int err;
        int r = smoe__io_read_full(io, fd, magic, 4, 0, NULL, &err);
        smoe__io_close(io, fd);
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
