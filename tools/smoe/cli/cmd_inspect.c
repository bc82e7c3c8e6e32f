/*
 * cmd_inspect.c - `smoe inspect`: validate a vault and show its header,
 * counts, sizes, metadata and every layout with its components, as text or
 * as JSON (json-c); and the index of its scout file (docs/scout-format.md)
 * when one is named or found beside the vault. For an index vault, its
 * source files too, each checked: present, and unchanged since indexing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "smoe/smoe.h"
#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"
#include "vault_cmd.h"

static const char cmd[] = "inspect";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe inspect VAULT [--json] [--scout FILE | --no-scout]\n"
            "\n"
            "Validate VAULT's header and tables (not the blobs: see 'smoe verify') and\n"
            "show its header, counts, sizes, metadata and blob layouts, then the index\n"
            "of its scout file (the dense tensors 'smoe pack' wrote beside it). For an\n"
            "index vault ('smoe index'), each source file and whether it is present and\n"
            "unchanged since indexing (exit status 1 if any is not).\n"
            "\n"
            "  --json         print one JSON object instead of text\n"
            "  --scout FILE   the scout file (default: the one the vault's metadata\n"
            "                 names, or NAME.scout, when it exists beside the vault)\n"
            "  --no-scout     do not look for a scout file\n"
            "  --help         this text\n");
}

typedef struct facts {
    uint64_t table_offset, layout_offset, meta_offset;
    uint64_t source_offset, extent_offset; /* index vault */
    uint32_t version;
    uint64_t payload;  /* sum of blob sizes (index vault: of components) */
    uint64_t absent;   /* (layer, expert) pairs with no blob */
    uint64_t *used_by; /* blobs per layout */
    smoe__source_state *src; /* index vault: each source now */
    int *src_rc;       /* its check's result */
    uint32_t bad_sources;
} facts;

static int gather(const char *path, const smoe__vault *v, facts *f)
{
    unsigned char h[128];
    FILE *fp = fopen(path, "rb");
    if (!fp || fread(h, 1, sizeof h, fp) != sizeof h) {
        if (fp)
            fclose(fp);
        return tool_error(cmd, "%s: cannot re-read the header", path);
    }
    fclose(fp);
    f->version = smoe__le32(h + 8);
    f->table_offset = smoe__le64(h + 48);
    f->layout_offset = smoe__le64(h + 56);
    f->meta_offset = smoe__le64(h + 64);
    f->source_offset = smoe__le64(h + 80);
    f->extent_offset = smoe__le64(h + 96);
    f->used_by = calloc(v->n_layouts, sizeof *f->used_by);
    if (!f->used_by)
        return tool_error(cmd, "out of memory");
    for (uint64_t i = 0; i < (uint64_t)v->layers * v->experts; i++) {
        const smoe__vault_entry *e = &v->index[i];
        if (!e->present) {
            f->absent++;
            continue;
        }
        f->payload += v->n_sources ? v->layouts[e->layout].min_bytes : e->size;
        f->used_by[e->layout]++;
    }
    if (!v->n_sources)
        return 0;
    f->src = calloc(v->n_sources, sizeof *f->src);
    f->src_rc = calloc(v->n_sources, sizeof *f->src_rc);
    if (!f->src || !f->src_rc)
        return tool_error(cmd, "out of memory");
    for (uint32_t i = 0; i < v->n_sources; i++) {
        f->src_rc[i] = smoe__source_check(v, i, smoe__io_get(), &f->src[i]);
        if (f->src_rc[i] < 0) {
            fprintf(stderr, "smoe inspect: %s\n", smoe_last_error());
            f->bad_sources++;
        }
    }
    return 0;
}

static const char *kind_name(uint32_t kind)
{
    return kind == SMOE__V2_KIND_GGUF ? "gguf" : "safetensors";
}

/* A source's state in a few words. */
static const char *source_status(const facts *f, uint32_t i)
{
    const smoe__source_state *st = &f->src[i];
    if (!st->present)
        return f->src_rc[i] == SMOE_ESOURCE ? "missing" : "cannot be opened";
    if (f->src_rc[i] == SMOE_EINVAL)
        return "not a regular file";
    if (!st->size_ok)
        return "changed (size)";
    if (f->src_rc[i] < 0 && !st->kind_ok && f->src_rc[i] == SMOE_ESOURCE)
        return "not the file recorded (kind or header size)";
    if (f->src_rc[i] < 0 && !st->header_hash)
        return "unreadable";
    if (!st->header_ok)
        return "changed (header)";
    if (!st->extents_ok)
        return "extents outside its tensors";
    return st->mtime_ok ? "present, unchanged" : "present, unchanged (but modified since)";
}

static void print_sources_text(const smoe__vault *v, const facts *f)
{
    printf("sources          %" PRIu32 " file%s, named relative to the vault's directory; "
           "per-expert hashes %s\n", v->n_sources, v->n_sources == 1 ? "" : "s",
           v->flags & SMOE__V2_NO_HASH ? "not recorded (--no-hash): verification is off"
                                        : "recorded");
    for (uint32_t i = 0; i < v->n_sources; i++) {
        const smoe__vault_source *s = &v->sources[i];
        printf("  %3" PRIu32 " %s\n      %s, %" PRIu64 " bytes, aligned to %" PRIu32
               ", header %" PRIu64 " bytes: %s\n", i, s->name, kind_name(s->kind), s->size,
               s->align, s->header_bytes, source_status(f, i));
    }
}

static void shape_text(char *buf, size_t n, const smoe_component *c)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (uint32_t d = 0; d < c->ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRIu64, d ? ", " : "",
                                 c->shape[d]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
}

/* Each metadata line: calls fn(key, key_len, value, value_len). */
static void each_meta(const smoe__vault *v,
                      void (*fn)(void *u, const char *k, int kl, const char *val, int vl),
                      void *u)
{
    const char *s = v->meta;
    while (s && *s) {
        const char *nl = strchr(s, '\n'), *eq = strchr(s, '=');
        if (!nl || !eq || eq > nl)
            break; /* the reader guarantees key=value\n lines */
        fn(u, s, (int)(eq - s), eq + 1, (int)(nl - eq - 1));
        s = nl + 1;
    }
}

static void meta_text(void *u, const char *k, int kl, const char *val, int vl)
{
    (void)u;
    printf("  %.*s = %.*s\n", kl, k, vl, val);
}

static void dtype_text(char *dt, size_t n, uint32_t dtype, uint32_t bits, uint32_t group);

static void print_text(const char *path, const smoe__vault *v, const facts *f)
{
    printf("vault            %s\n", path);
    printf("file size        %" PRIu64 " bytes (%.1f MiB)\n", v->file_size,
           (double)v->file_size / (1 << 20));
    if (v->n_sources)
        printf("format version   %" PRIu32 " (index vault: %" PRIu32 " extents in %" PRIu32
               " source file%s)\n", f->version, v->n_extents, v->n_sources,
               v->n_sources == 1 ? "" : "s");
    else
        printf("format version   %" PRIu32 "\n", f->version);
    printf("vault id         %016" PRIx64 "\n", v->vault_id);
    printf("layers           %" PRIu32 "\n", v->layers);
    printf("experts          %" PRIu32 " per layer\n", v->experts);
    printf("entries          %" PRIu32 " (%" PRIu64 " absent)\n", v->entries, f->absent);
    if (v->top_k)
        printf("top_k            %" PRIu32 "\n", v->top_k);
    else
        printf("top_k            unknown\n");
    if (v->n_sources) {
        printf("expert bytes     %" PRIu64 " in components; slots of %" PRIu64 " bytes in all, "
               "largest %" PRIu64 ", at a %" PRIu32 "-byte read alignment\n", f->payload,
               v->total_padded, v->max_padded, v->plan_align);
        printf("alignment        16384 (slots); components as in their source file\n");
        printf("tables           expert table at %" PRIu64 ", layouts at %" PRIu64
               ", extents at %" PRIu64 ", sources at %" PRIu64 ", metadata at %" PRIu64
               " (%" PRIu64 " bytes)\n", f->table_offset, f->layout_offset, f->extent_offset,
               f->source_offset, f->meta_offset, v->meta_bytes);
        print_sources_text(v, f);
    } else {
        printf("blob bytes       %" PRIu64 " payload, %" PRIu64 " padded, largest padded %"
               PRIu64 "\n", f->payload, v->total_padded, v->max_padded);
        printf("alignment        16384 (blobs), %" PRIu32 " (components)\n",
               v->component_align);
        printf("tables           expert table at %" PRIu64 ", layouts at %" PRIu64
               ", metadata at %" PRIu64 " (%" PRIu64 " bytes)\n", f->table_offset,
               f->layout_offset, f->meta_offset, v->meta_bytes);
    }
    printf("metadata\n");
    each_meta(v, meta_text, NULL);
    printf("layouts          %" PRIu32 " (%" PRIu32 " components)\n", v->n_layouts,
           v->n_components);
    for (uint32_t j = 0; j < v->n_layouts; j++) {
        const smoe__vault_layout *lo = &v->layouts[j];
        printf("  layout %" PRIu32 ": %" PRIu32 " components, extent %" PRIu64
               " bytes, used by %" PRIu64 " blobs\n", j, lo->n, lo->min_bytes, f->used_by[j]);
        printf("    %-24s %-14s %-24s %12s %12s\n", "name", "dtype", "shape", "offset", "bytes");
        for (uint32_t k = 0; k < lo->n; k++) {
            const smoe_component *c = &v->components[lo->first + k];
            char sh[128], dt[64];
            shape_text(sh, sizeof sh, c);
            dtype_text(dt, sizeof dt, c->dtype, c->quant_bits, c->quant_group);
            printf("    %-24s %-14s %-24s %12" PRIu64 " %12" PRIu64 "\n", c->name, dt, sh,
                   c->offset, c->nbytes);
        }
    }
}

static void dtype_text(char *dt, size_t n, uint32_t dtype, uint32_t bits, uint32_t group)
{
    if (dtype == SMOE_DTYPE_MLX_PACKED)
        snprintf(dt, n, "mlx_packed/%" PRIu32 "b/g%" PRIu32, bits, group);
    else if (!strcmp(smoe_dtype_name(dtype), "?"))
        snprintf(dt, n, "?(0x%" PRIx32 ")", dtype);
    else
        snprintf(dt, n, "%s", smoe_dtype_name(dtype));
}

static void print_scout_text(const char *path, const pack_scout *sc)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < sc->count; i++)
        bytes += sc->e[i].nbytes;
    printf("scout            %s\n", path);
    printf("  %" PRIu32 " tensors, %" PRIu64 " bytes of data (file %" PRIu64 " bytes, data at %"
           PRIu64 ", 64-byte aligned)\n", sc->count, bytes, sc->file_size, sc->data_offset);
    printf("    %-48s %-14s %-24s %12s %12s\n", "name", "dtype", "shape", "offset", "bytes");
    for (uint32_t i = 0; i < sc->count; i++) {
        const pack_scout_entry *e = &sc->e[i];
        char sh[160], dt[64];
        pack_shape_str(e->shape, e->ndim, sh, sizeof sh);
        dtype_text(dt, sizeof dt, e->dtype, e->quant_bits, e->quant_group);
        printf("    %-48s %-14s %-24s %12" PRIu64 " %12" PRIu64 "\n", e->name, dt, sh,
               e->offset, e->nbytes);
    }
}

static json_object *scout_json(const char *path, const pack_scout *sc)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "file_size", json_object_new_uint64(sc->file_size));
    json_object_object_add(o, "data_offset", json_object_new_uint64(sc->data_offset));
    json_object_object_add(o, "count", json_object_new_uint64(sc->count));
    json_object *ts = json_object_new_array();
    for (uint32_t i = 0; i < sc->count; i++) {
        const pack_scout_entry *e = &sc->e[i];
        json_object *t = json_object_new_object();
        json_object_object_add(t, "name", json_object_new_string(e->name));
        json_object_object_add(t, "dtype", json_object_new_string(smoe_dtype_name(e->dtype)));
        json_object_object_add(t, "dtype_id", json_object_new_uint64(e->dtype));
        json_object *sh = json_object_new_array();
        for (uint32_t d = 0; d < e->ndim; d++)
            json_object_array_add(sh, json_object_new_uint64(e->shape[d]));
        json_object_object_add(t, "shape", sh);
        json_object_object_add(t, "offset", json_object_new_uint64(e->offset));
        json_object_object_add(t, "bytes", json_object_new_uint64(e->nbytes));
        if (e->dtype == SMOE_DTYPE_MLX_PACKED) {
            json_object_object_add(t, "quant_group", json_object_new_uint64(e->quant_group));
            json_object_object_add(t, "quant_bits", json_object_new_uint64(e->quant_bits));
        }
        json_object_array_add(ts, t);
    }
    json_object_object_add(o, "tensors", ts);
    return o;
}

static void meta_json(void *u, const char *k, int kl, const char *val, int vl)
{
    char *key = malloc((size_t)kl + 1);
    if (!key)
        return;
    memcpy(key, k, (size_t)kl);
    key[kl] = 0;
    json_object_object_add((json_object *)u, key, json_object_new_string_len(val, vl));
    free(key);
}

static json_object *u64(uint64_t v)
{
    return json_object_new_uint64(v);
}

static json_object *index_json(const smoe__vault *v, const facts *f)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "hashes", json_object_new_boolean(!(v->flags & SMOE__V2_NO_HASH)));
    json_object_object_add(o, "extents", u64(v->n_extents));
    json_object_object_add(o, "extent_offset", u64(f->extent_offset));
    json_object_object_add(o, "source_offset", u64(f->source_offset));
    json_object_object_add(o, "read_align", u64(v->plan_align));
    json_object *a = json_object_new_array();
    for (uint32_t i = 0; i < v->n_sources; i++) {
        const smoe__vault_source *s = &v->sources[i];
        const smoe__source_state *st = &f->src[i];
        json_object *j = json_object_new_object();
        json_object_object_add(j, "name", json_object_new_string(s->name));
        json_object_object_add(j, "path", json_object_new_string(st->path));
        json_object_object_add(j, "kind", json_object_new_string(kind_name(s->kind)));
        json_object_object_add(j, "size", u64(s->size));
        json_object_object_add(j, "align", u64(s->align));
        json_object_object_add(j, "header_bytes", u64(s->header_bytes));
        json_object_object_add(j, "present", json_object_new_boolean(st->present));
        json_object_object_add(j, "unchanged", json_object_new_boolean(f->src_rc[i] == 0));
        json_object_object_add(j, "mtime_unchanged", json_object_new_boolean(st->mtime_ok));
        json_object_object_add(j, "status", json_object_new_string(source_status(f, i)));
        json_object_array_add(a, j);
    }
    json_object_object_add(o, "sources", a);
    return o;
}

static int print_json(const char *path, const smoe__vault *v, const facts *f,
                      const char *scout_path, const pack_scout *sc)
{
    json_object *o = json_object_new_object();
    char id[32];
    snprintf(id, sizeof id, "%016" PRIx64, v->vault_id);
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "file_size", u64(v->file_size));
    json_object_object_add(o, "version", u64(f->version));
    json_object_object_add(o, "vault_id", json_object_new_string(id));
    json_object_object_add(o, "layers", u64(v->layers));
    json_object_object_add(o, "experts", u64(v->experts));
    json_object_object_add(o, "entries", u64(v->entries));
    json_object_object_add(o, "absent", u64(f->absent));
    json_object_object_add(o, "top_k", u64(v->top_k));
    json_object_object_add(o, "payload_bytes", u64(f->payload));
    json_object_object_add(o, "total_padded", u64(v->total_padded));
    json_object_object_add(o, "max_padded", u64(v->max_padded));
    json_object_object_add(o, "alignment", u64(SMOE__VAULT_ALIGN));
    json_object_object_add(o, "component_align", u64(v->component_align));
    json_object_object_add(o, "data_offset", u64(SMOE__VAULT_ALIGN));
    json_object_object_add(o, "table_offset", u64(f->table_offset));
    json_object_object_add(o, "layout_offset", u64(f->layout_offset));
    json_object_object_add(o, "meta_offset", u64(f->meta_offset));
    json_object_object_add(o, "meta_bytes", u64(v->meta_bytes));
    if (v->n_sources)
        json_object_object_add(o, "index", index_json(v, f));
    json_object *meta = json_object_new_object();
    each_meta(v, meta_json, meta);
    json_object_object_add(o, "metadata", meta);
    json_object_object_add(o, "n_components", u64(v->n_components));
    json_object *layouts = json_object_new_array();
    for (uint32_t j = 0; j < v->n_layouts; j++) {
        const smoe__vault_layout *lo = &v->layouts[j];
        json_object *l = json_object_new_object();
        json_object_object_add(l, "index", u64(j));
        json_object_object_add(l, "extent", u64(lo->min_bytes));
        json_object_object_add(l, "used_by", u64(f->used_by[j]));
        json_object *cs = json_object_new_array();
        for (uint32_t k = 0; k < lo->n; k++) {
            const smoe_component *c = &v->components[lo->first + k];
            json_object *jc = json_object_new_object();
            json_object_object_add(jc, "name", json_object_new_string(c->name));
            json_object_object_add(jc, "dtype", json_object_new_string(smoe_dtype_name(c->dtype)));
            json_object_object_add(jc, "dtype_id", u64(c->dtype));
            json_object *sh = json_object_new_array();
            for (uint32_t d = 0; d < c->ndim; d++)
                json_object_array_add(sh, u64(c->shape[d]));
            json_object_object_add(jc, "shape", sh);
            json_object_object_add(jc, "offset", u64(c->offset));
            json_object_object_add(jc, "bytes", u64(c->nbytes));
            if (c->dtype == SMOE_DTYPE_MLX_PACKED) {
                json_object_object_add(jc, "quant_group", u64(c->quant_group));
                json_object_object_add(jc, "quant_bits", u64(c->quant_bits));
            }
            json_object_array_add(cs, jc);
        }
        json_object_object_add(l, "components", cs);
        json_object_array_add(layouts, l);
    }
    json_object_object_add(o, "layouts", layouts);
    if (sc)
        json_object_object_add(o, "scout", scout_json(scout_path, sc));
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    int ok = s && puts(s) >= 0;
    json_object_put(o);
    return ok ? 0 : tool_error(cmd, "cannot write the JSON output");
}

int cmd_inspect(int argc, char **argv)
{
    vault_args a;
    int rc = vault_args_parse(cmd, usage, 1, argc, argv, &a);
    if (rc >= 0)
        return rc;
    smoe__vault v;
    rc = smoe__vault_load(&v, a.path, smoe__io_get());
    if (rc < 0)
        return tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
    /* The scout file: named, or found beside the vault; it must be valid. */
    char *scout_path = vault_args_scout(&a, &v);
    pack_scout sc;
    memset(&sc, 0, sizeof sc);
    if (scout_path && (rc = pack_scout_load(scout_path, &sc)) < 0) {
        rc = tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));
        free(scout_path);
        smoe__vault_free(&v);
        return rc;
    }
    facts f;
    memset(&f, 0, sizeof f);
    rc = gather(a.path, &v, &f);
    if (rc == 0) {
        if (a.json) {
            rc = print_json(a.path, &v, &f, scout_path, scout_path ? &sc : NULL);
        } else {
            print_text(a.path, &v, &f);
            if (scout_path)
                print_scout_text(scout_path, &sc);
        }
    }
    pack_scout_free(&sc);
    free(scout_path);
    free(f.used_by);
    free(f.src);
    free(f.src_rc);
    if (rc == 0 && f.bad_sources)
        rc = tool_error(cmd, "%s: %" PRIu32 " of its %" PRIu32 " source files %s missing, "
                        "changed or not as the vault records them", a.path, f.bad_sources, v.n_sources,
                        f.bad_sources == 1 ? "is" : "are");
    smoe__vault_free(&v);
    if (rc == 0 && fflush(stdout) != 0)
        rc = tool_error(cmd, "cannot write the output");
    return rc;
}
