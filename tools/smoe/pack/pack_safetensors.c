/*
 * pack_safetensors.c - reading Hugging Face safetensors files and sharded
 * sets (model.safetensors.index.json).
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of
 * JSON (an object: tensor name -> {"dtype", "shape", "data_offsets"}, plus
 * an optional "__metadata__" object of strings), then the data; offsets are
 * relative to the first byte after the header. The header is parsed with
 * json-c; every number is checked before use: the header length against the
 * file, each tensor's byte range against its dtype and shape and against the
 * file, and the ranges against each other.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

/* The largest header accepted; real ones are a few MiB. */
#define ST_HEADER_MAX (100ull << 20)

static const struct {
    const char *name;
    uint32_t dtype;
    uint32_t bits; /* per element */
} st_dtypes[] = {
    {"BOOL", SMOE_DTYPE_BOOL, 8},       {"U8", SMOE_DTYPE_U8, 8},
    {"I8", SMOE_DTYPE_I8, 8},           {"U16", SMOE_DTYPE_U16, 16},
    {"I16", SMOE_DTYPE_I16, 16},        {"F16", SMOE_DTYPE_F16, 16},
    {"BF16", SMOE_DTYPE_BF16, 16},      {"U32", SMOE_DTYPE_U32, 32},
    {"I32", SMOE_DTYPE_I32, 32},        {"F32", SMOE_DTYPE_F32, 32},
    {"U64", SMOE_DTYPE_U64, 64},        {"I64", SMOE_DTYPE_I64, 64},
    {"F64", SMOE_DTYPE_F64, 64},        {"F8_E4M3", SMOE_DTYPE_F8_E4M3, 8},
    {"F8_E5M2", SMOE_DTYPE_F8_E5M2, 8}, {"F8_E8M0", SMOE_DTYPE_F8_E8M0, 8},
    {"F4", SMOE_DTYPE_F4_E2M1, 4},      {"F6_E2M3", SMOE_DTYPE_F6_E2M3, 6},
    {"F6_E3M2", SMOE_DTYPE_F6_E3M2, 6}, {"C64", SMOE_DTYPE_C64, 64},
};

static int st_dtype(const char *name, uint32_t *dtype, uint32_t *bits)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(name, st_dtypes[i].name)) {
            *dtype = st_dtypes[i].dtype;
            *bits = st_dtypes[i].bits;
            return 0;
        }
    return -1;
}

/* A JSON integer >= 0 into *out; -1 if it is anything else. */
static int json_u64(struct json_object *o, uint64_t *out)
{
    if (!o || !json_object_is_type(o, json_type_int))
        return -1;
    if (json_object_get_int64(o) < 0)
        return -1;
    *out = json_object_get_uint64(o);
    return 0;
}

/*
 * Parse JSON text [0, n) that must be one object, followed by nothing but
 * whitespace. *out receives the object (put it with json_object_put).
 */
static int parse_object(const char *text, size_t n, const char *fname, const char *what,
                        struct json_object **out)
{
    *out = NULL;
    if (n > INT32_MAX)
        return smoe__fail(SMOE_EFORMAT, "%s: %s is too long", fname, what);
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    struct json_object *o = json_tokener_parse_ex(tok, text, (int)n);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!o || jerr != json_tokener_success) {
        if (o)
            json_object_put(o);
        return smoe__fail(SMOE_EFORMAT, "%s: %s is not valid JSON (%s near byte %zu)", fname,
                          what, jerr == json_tokener_continue ? "unexpected end"
                                                              : json_tokener_error_desc(jerr),
                          end);
    }
    for (size_t i = end; i < n; i++) {
        char c = text[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            json_object_put(o);
            return smoe__fail(SMOE_EFORMAT, "%s: %s has trailing bytes after the JSON "
                              "value (byte %zu)", fname, what, i);
        }
    }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return smoe__fail(SMOE_EFORMAT, "%s: %s is not a JSON object", fname, what);
    }
    *out = o;
    return 0;
}

/* One tensor entry of the header: fill *t from object v. */
static int parse_tensor(const char *fname, const char *name, struct json_object *v,
                        uint64_t data_start, pack_tensor *t)
{
    if (!json_object_is_type(v, json_type_object))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': expected an object with dtype, "
                          "shape and data_offsets", fname, name);
    struct json_object *jd, *js, *jo;
    if (!json_object_object_get_ex(v, "dtype", &jd) || !json_object_is_type(jd, json_type_string))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': missing string field 'dtype'",
                          fname, name);
    if (!json_object_object_get_ex(v, "shape", &js) || !json_object_is_type(js, json_type_array))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': missing array field 'shape'",
                          fname, name);
    if (!json_object_object_get_ex(v, "data_offsets", &jo) ||
        !json_object_is_type(jo, json_type_array))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': missing array field 'data_offsets'",
                          fname, name);

    uint32_t bits;
    const char *dname = json_object_get_string(jd);
    if (st_dtype(dname, &t->dtype, &bits) < 0)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': unknown dtype '%.32s'", fname, name,
                          dname);

    size_t nd = json_object_array_length(js);
    if (nd > PACK_MAX_DIMS)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': %zu dimensions, at most %d supported",
                          fname, name, nd, PACK_MAX_DIMS);
    t->ndim = (uint32_t)nd;
    uint64_t elems = 1;
    int ovf = 0;
    for (size_t i = 0; i < nd; i++) {
        if (json_u64(json_object_array_get_idx(js, i), &t->shape[i]) < 0)
            return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': shape[%zu] is not a "
                              "non-negative integer", fname, name, i);
        ovf |= pack_mul(elems, t->shape[i], &elems);
    }
    uint64_t bitcount;
    ovf |= pack_mul(elems, bits, &bitcount);
    char sb[160];
    if (ovf)
        return smoe__fail(SMOE_EOVERFLOW, "%s: tensor '%s': shape %s overflows a byte count",
                          fname, name, pack_shape_str(t->shape, t->ndim, sb, sizeof sb));
    if (bitcount % 8)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': shape %s of %s is not a whole "
                          "number of bytes", fname, name,
                          pack_shape_str(t->shape, t->ndim, sb, sizeof sb), dname);

    uint64_t begin, end;
    if (json_object_array_length(jo) != 2 ||
        json_u64(json_object_array_get_idx(jo, 0), &begin) < 0 ||
        json_u64(json_object_array_get_idx(jo, 1), &end) < 0)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': data_offsets must be two "
                          "non-negative integers", fname, name);
    if (end < begin)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                          "] end before they begin", fname, name, begin, end);
    t->nbytes = end - begin;
    if (t->nbytes != bitcount / 8)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': shape %s of %s is %" PRIu64
                          " bytes but data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64,
                          fname, name, pack_shape_str(t->shape, t->ndim, sb, sizeof sb), dname,
                          bitcount / 8, begin, end, t->nbytes);
    if (pack_add(data_start, begin, &t->offset))
        return smoe__fail(SMOE_EOVERFLOW, "%s: tensor '%s': offset %" PRIu64 " overflows",
                          fname, name, begin);
    return 0;
}

static int check_metadata(const char *fname, struct json_object *v)
{
    if (!json_object_is_type(v, json_type_object))
        return smoe__fail(SMOE_EFORMAT, "%s: __metadata__ is not an object", fname);
    json_object_object_foreach(v, key, val) {
        if (!json_object_is_type(val, json_type_string))
            return smoe__fail(SMOE_EFORMAT, "%s: __metadata__ '%.64s' is not a string",
                              fname, key);
    }
    return 0;
}

int pack_st_parse_header(const uint8_t *buf, size_t n, uint64_t file_size,
                         const char *fname, uint32_t file, pack_source *s)
{
    if (file_size < 8)
        return smoe__fail(SMOE_ETRUNC, "%s: %" PRIu64 " bytes, too short for the 8-byte "
                          "header length of a safetensors file", fname, file_size);
    if (n < 8)
        return n < file_size ? PACK_NEED_MORE
                             : smoe__fail(SMOE_ETRUNC, "%s: truncated", fname);
    uint64_t hlen = smoe__le64(buf);
    if (hlen > ST_HEADER_MAX)
        return smoe__fail(SMOE_EFORMAT, "%s: header length %" PRIu64 " is over the %llu-byte "
                          "limit (not a safetensors file?)", fname, hlen, ST_HEADER_MAX);
    if (8 + hlen > file_size)
        return smoe__fail(SMOE_ETRUNC, "%s: header length %" PRIu64 " runs past the end of "
                          "the file (%" PRIu64 " bytes)", fname, hlen, file_size);
    if (n < 8 + hlen)
        return PACK_NEED_MORE;
    if (hlen < 2 || buf[8] != '{')
        return smoe__fail(SMOE_EFORMAT, "%s: header is not a JSON object", fname);

    struct json_object *root;
    int rc = parse_object((const char *)buf + 8, (size_t)hlen, fname, "header", &root);
    if (rc < 0)
        return rc;
    size_t first = s->n_tensors;
    uint64_t data_start = 8 + hlen;
    json_object_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if ((rc = check_metadata(fname, val)) < 0)
                break;
            continue;
        }
        size_t klen = strlen(key);
        if (klen == 0 || klen >= PACK_NAME_MAX) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: tensor name of %zu bytes (expected 1 to %d)",
                            fname, klen, PACK_NAME_MAX - 1);
            break;
        }
        pack_tensor t;
        memset(&t, 0, sizeof t);
        t.name = key;
        t.file = file;
        if ((rc = parse_tensor(fname, key, val, data_start, &t)) < 0)
            break;
        if ((rc = pack_source_add_tensor(s, &t)) < 0)
            break;
    }
    json_object_put(root);
    if (rc < 0)
        return rc;
    if ((rc = pack_source_check_ranges(s, first, s->n_tensors - first, data_start, file_size,
                                       fname)) < 0)
        return rc;
    if (file < s->n_files) {
        /* The data's alignment: 8 as the format asks, less when the header
         * length leaves the data (or a tensor) off it. */
        uint32_t align = 8;
        for (size_t i = first; i < s->n_tensors; i++)
            while (s->tensors[i].nbytes && s->tensors[i].offset % align)
                align /= 2;
        s->files[file].kind = PACK_FMT_SAFETENSORS;
        s->files[file].align = align;
        s->files[file].header_bytes = data_start;
    }
    return 0;
}

/* The first 8 bytes give the header length: then read exactly what it
 * asks for (the parser has checked it is in bounds). */
static int parse_more(void *u, const char *path, uint32_t file, const uint8_t *buf, size_t n,
                      uint64_t size, size_t *want)
{
    pack_source *s = u;
    s->format = PACK_FMT_SAFETENSORS;
    int rc = pack_st_parse_header(buf, n, size, path, file, s);
    if (rc == PACK_NEED_MORE)
        *want = n < 8 ? 8 : (size_t)(8 + smoe__le64(buf));
    return rc;
}

int pack_st_load_file(pack_source *s, const char *path)
{
    return pack_read_header(path, 8, s, parse_more, s);
}

/* ---- sharded sets ------------------------------------------------------ */

void pack_st_index_free(pack_st_index *ix)
{
    if (!ix)
        return;
    for (uint32_t i = 0; i < ix->n_shards; i++)
        free(ix->shards[i]);
    for (size_t i = 0; i < ix->n_names; i++)
        free(ix->names[i]);
    free(ix->shards);
    free(ix->names);
    free(ix->shard_of);
    memset(ix, 0, sizeof *ix);
}

/* A shard name must be a relative path inside the checkpoint's directory. */
static int bad_shard_name(const char *f)
{
    return !*f || f[0] == '/' || strstr(f, "..") || strlen(f) >= PACK_NAME_MAX;
}

/* Shard f's index in out->shards, added when new. seen maps each name to
 * its index (json-c's hash table, keys owned by out->shards): linear in
 * the entries, where a search of the list was quadratic in the shards. */
static int shard_index(pack_st_index *out, struct lh_table *seen, const char *f,
                       const char *fname, uint32_t *cap, uint32_t *k)
{
    void *v;
    if (lh_table_lookup_ex(seen, f, &v)) {
        *k = (uint32_t)(uintptr_t)v;
        return 0;
    }
    if (out->n_shards == PACK_MAX_SHARDS)
        return smoe__fail(SMOE_ECOUNT, "%s: weight_map names more than %u shard files, the "
                          "most a vault may have as sources (docs/vault-format.md)", fname,
                          PACK_MAX_SHARDS);
    if (out->n_shards == *cap) {
        uint32_t c = *cap ? *cap * 2 : 16;
        char **sh = realloc(out->shards, c * sizeof *sh);
        if (!sh)
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        out->shards = sh;
        *cap = c;
    }
    char *copy = strdup(f);
    if (!copy)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    *k = out->n_shards;
    out->shards[out->n_shards++] = copy;
    if (lh_table_insert(seen, copy, (void *)(uintptr_t)*k) != 0)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    return 0;
}

/* weight_map's entries into out (its arrays sized for them). */
static int parse_weight_map(struct json_object *wm, const char *fname, pack_st_index *out)
{
    struct lh_table *seen = lh_kchar_table_new(64, NULL);
    if (!seen)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    uint32_t cap = 0;
    int rc = 0;
    json_object_object_foreach(wm, key, val) {
        if (!json_object_is_type(val, json_type_string)) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: weight_map['%.200s'] is not a file name",
                            fname, key);
            break;
        }
        const char *f = json_object_get_string(val);
        if (bad_shard_name(f)) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: weight_map['%.200s']: shard name '%.200s' "
                            "must be a relative path inside the checkpoint", fname, key, f);
            break;
        }
        uint32_t k = 0;
        if ((rc = shard_index(out, seen, f, fname, &cap, &k)) < 0)
            break;
        if (!(out->names[out->n_names] = strdup(key))) {
            rc = smoe__fail(SMOE_ENOMEM, "out of memory");
            break;
        }
        out->shard_of[out->n_names++] = k;
    }
    lh_table_free(seen);
    return rc;
}

int pack_st_parse_index(const char *json, size_t n, const char *fname, pack_st_index *out)
{
    memset(out, 0, sizeof *out);
    struct json_object *root, *wm;
    int rc = parse_object(json, n, fname, "index", &root);
    if (rc < 0)
        return rc;
    if (!json_object_object_get_ex(root, "weight_map", &wm) ||
        !json_object_is_type(wm, json_type_object)) {
        json_object_put(root);
        return smoe__fail(SMOE_EFORMAT, "%s: no 'weight_map' object", fname);
    }
    size_t count = (size_t)json_object_object_length(wm);
    out->names = calloc(count ? count : 1, sizeof *out->names);
    out->shard_of = calloc(count ? count : 1, sizeof *out->shard_of);
    if (!out->names || !out->shard_of)
        rc = smoe__fail(SMOE_ENOMEM, "out of memory");
    else
        rc = parse_weight_map(wm, fname, out);
    json_object_put(root);
    if (rc == 0 && out->n_shards == 0)
        rc = smoe__fail(SMOE_EFORMAT, "%s: weight_map is empty", fname);
    if (rc < 0)
        pack_st_index_free(out);
    return rc;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    return tool_strndup(path, (size_t)(slash - path + 1));
}

typedef struct name_ref {
    const char *name;
    uint32_t file;
} name_ref;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

/* Every tensor the index lists must be in the shard it names. */
static int check_index(const pack_source *s, const pack_st_index *ix,
                       const uint32_t *file_of_shard, const char *fname)
{
    size_t n = s->n_tensors;
    name_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        refs[i].name = s->tensors[i].name;
        refs[i].file = s->tensors[i].file;
    }
    qsort(refs, n, sizeof *refs, by_name);
    int rc = 0;
    for (size_t i = 0; i < ix->n_names && rc == 0; i++) {
        name_ref key = {ix->names[i], 0};
        const name_ref *r = bsearch(&key, refs, n, sizeof *refs, by_name);
        uint32_t want = file_of_shard[ix->shard_of[i]];
        if (!r)
            rc = smoe__fail(SMOE_ENOENT, "%s: tensor '%s' is listed in shard %s but no shard "
                            "holds it", fname, ix->names[i], ix->shards[ix->shard_of[i]]);
        else if (r->file != want)
            rc = smoe__fail(SMOE_EFORMAT, "%s: tensor '%s' is listed in shard %s but found "
                            "in %s", fname, ix->names[i], ix->shards[ix->shard_of[i]],
                            s->files[r->file].path);
    }
    free(refs);
    return rc;
}

int pack_st_load_index(pack_source *s, const char *path)
{
    char *json;
    size_t n;
    int rc = pack_read_small_file(path, 256u << 20, &json, &n);
    if (rc < 0)
        return rc;
    pack_st_index ix;
    rc = pack_st_parse_index(json, n, path, &ix);
    free(json);
    if (rc < 0)
        return rc;
    char *dir = dir_of(path);
    uint32_t *file_of = malloc(ix.n_shards * sizeof *file_of);
    if (!dir || !file_of) {
        free(dir);
        free(file_of);
        pack_st_index_free(&ix);
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < ix.n_shards && rc == 0; k++) {
        size_t len = strlen(dir) + strlen(ix.shards[k]) + 1;
        char *shard = malloc(len);
        if (!shard) {
            rc = smoe__fail(SMOE_ENOMEM, "out of memory");
            break;
        }
        snprintf(shard, len, "%s%s", dir, ix.shards[k]);
        if (access(shard, F_OK) != 0) {
            const char *example = "?";
            for (size_t i = 0; i < ix.n_names; i++)
                if (ix.shard_of[i] == k) {
                    example = ix.names[i];
                    break;
                }
            rc = smoe__fail(SMOE_ENOENT, "%s: missing shard %s (it holds tensor '%s', "
                            "among others)", path, shard, example);
        } else {
            file_of[k] = s->n_files;
            rc = pack_st_load_file(s, shard);
        }
        free(shard);
    }
    if (rc == 0)
        rc = check_index(s, &ix, file_of, path);
    free(dir);
    free(file_of);
    pack_st_index_free(&ix);
    return rc;
}

static int is_st_name(const char *name)
{
    size_t n = strlen(name);
    return n > 12 && !strcmp(name + n - 12, ".safetensors");
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.safetensors names in dir, sorted (scandir with alphasort, which
 * Windows' C library lacks); -1 with errno when dir cannot be read. */
static int st_names(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **list = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_st_name(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **g = realloc(list, (size_t)cap * sizeof *list);
            if (!g)
                break;
            list = g;
        }
        if (!(list[n] = strdup(de->d_name)))
            break;
        n++;
    }
    int lost = de != NULL; /* out of memory before the end */
    closedir(d);
    if (lost) {
        while (n)
            free(list[--n]);
        free(list);
        errno = ENOMEM;
        return -1;
    }
    if (n)
        qsort(list, (size_t)n, sizeof *list, cmp_name);
    *out = list;
    return n;
}

int pack_st_load_dir(pack_source *s, const char *dir)
{
    char **list = NULL;
    int n = st_names(dir, &list);
    if (n < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot read directory: %s", dir, strerror(errno));
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0) {
            size_t len = strlen(dir) + strlen(list[i]) + 2;
            char *p = malloc(len);
            if (!p)
                rc = smoe__fail(SMOE_ENOMEM, "out of memory");
            else {
                snprintf(p, len, "%s/%s", dir, list[i]);
                rc = pack_st_load_file(s, p);
                free(p);
            }
        }
        free(list[i]);
    }
    free(list);
    if (rc == 0 && n == 0)
        rc = smoe__fail(SMOE_ENOENT, "%s: no .safetensors files", dir);
    return rc;
}
