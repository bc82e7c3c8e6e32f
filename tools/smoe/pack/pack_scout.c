/*
 * pack_scout.c - the scout file (docs/scout-format.md): the model's dense,
 * always-resident weights with an index of name, dtype, shape, offset, size
 * and hash. This file lays the index out, encodes it, and reads it back
 * with every field checked before use.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

static uint64_t record_size(size_t name_len)
{
    return (PACK_SCOUT_RECORD + name_len + 7) / 8 * 8;
}

void pack_scout_free(pack_scout *sc)
{
    if (!sc)
        return;
    for (uint32_t i = 0; i < sc->count; i++)
        free(sc->e[i].name);
    free(sc->e);
    memset(sc, 0, sizeof *sc);
}

int pack_scout_layout(pack_scout *sc, const pack_source *s, const uint32_t *tensors, size_t n)
{
    memset(sc, 0, sizeof *sc);
    if (n > PACK_SCOUT_MAX_TENSORS)
        return smoe__fail(SMOE_ECOUNT, "%zu dense tensors, more than a scout file holds (%u)",
                          n, PACK_SCOUT_MAX_TENSORS);
    sc->e = calloc(n ? n : 1, sizeof *sc->e);
    if (!sc->e)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    uint64_t index = 0;
    for (size_t i = 0; i < n; i++) {
        const pack_tensor *t = &s->tensors[tensors[i]];
        pack_scout_entry *e = &sc->e[i];
        if (!(e->name = strdup(t->name))) {
            pack_scout_free(sc);
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        }
        sc->count++;
        e->dtype = t->dtype;
        e->ndim = t->ndim;
        e->quant_group = t->quant_group;
        e->quant_bits = t->quant_bits;
        memcpy(e->shape, t->shape, sizeof e->shape);
        e->nbytes = t->nbytes;
        index += record_size(strlen(t->name));
    }
    if (index > PACK_SCOUT_MAX_INDEX) {
        pack_scout_free(sc);
        return smoe__fail(SMOE_ECOUNT, "scout index of %" PRIu64 " bytes is over the limit",
                          index);
    }
    sc->index_bytes = index;
    uint64_t off = (PACK_SCOUT_HEADER + index + PACK_SCOUT_ALIGN - 1) / PACK_SCOUT_ALIGN *
                   PACK_SCOUT_ALIGN;
    sc->data_offset = off;
    for (size_t i = 0; i < n; i++) {
        sc->e[i].offset = off;
        uint64_t padded = (sc->e[i].nbytes + PACK_SCOUT_ALIGN - 1) / PACK_SCOUT_ALIGN *
                          PACK_SCOUT_ALIGN;
        if (pack_add(off, padded, &off)) {
            pack_scout_free(sc);
            return smoe__fail(SMOE_EOVERFLOW, "scout file size overflows");
        }
    }
    sc->file_size = off;
    return 0;
}

int pack_scout_encode(const pack_scout *sc, uint8_t **out, size_t *len)
{
    size_t n = (size_t)(PACK_SCOUT_HEADER + sc->index_bytes);
    uint8_t *b = calloc(n, 1);
    if (!b)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    memcpy(b, PACK_SCOUT_MAGIC, 8);
    smoe__put_le32(b + 8, PACK_SCOUT_VERSION);
    smoe__put_le32(b + 12, PACK_SCOUT_HEADER);
    smoe__put_le32(b + 16, sc->count);
    smoe__put_le32(b + 20, 0);
    smoe__put_le64(b + 24, PACK_SCOUT_HEADER);
    smoe__put_le64(b + 32, sc->index_bytes);
    smoe__put_le64(b + 40, sc->data_offset);
    smoe__put_le64(b + 48, sc->file_size);
    uint8_t *r = b + PACK_SCOUT_HEADER;
    for (uint32_t i = 0; i < sc->count; i++) {
        const pack_scout_entry *e = &sc->e[i];
        size_t nl = strlen(e->name);
        smoe__put_le64(r + 0, e->offset);
        smoe__put_le64(r + 8, e->nbytes);
        smoe__hash_put(r + 16, e->hash);
        smoe__put_le32(r + 24, e->dtype);
        smoe__put_le32(r + 28, e->ndim);
        smoe__put_le32(r + 32, e->quant_group);
        smoe__put_le32(r + 36, e->quant_bits);
        for (int d = 0; d < PACK_MAX_DIMS; d++)
            smoe__put_le64(r + 40 + 8 * d, e->shape[d]);
        smoe__put_le32(r + 104, (uint32_t)nl);
        memcpy(r + PACK_SCOUT_RECORD, e->name, nl);
        r += record_size(nl);
    }
    const smoe__bytes parts[] = {{b, 56}, {b + PACK_SCOUT_HEADER, (size_t)sc->index_bytes}};
    uint64_t sum;
    if (smoe__hash_parts(parts, 2, &sum) < 0) {
        free(b);
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    smoe__hash_put(b + 56, sum);
    *out = b;
    *len = n;
    return 0;
}

typedef struct name_ref {
    const char *name;
    uint32_t index;
} name_ref;

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

/* Record i at r (`room` bytes of the index left) into sc->e[i]; *size gets
 * its length. sc->count counts the records whose names were taken. */
static int decode_record(const uint8_t *r, uint64_t room, const char *fname, pack_scout *sc,
                         uint32_t i, uint64_t *size)
{
    if (room < PACK_SCOUT_RECORD)
        return smoe__fail(SMOE_EFORMAT, "%s: index record %" PRIu32 " runs past the index "
                          "(%" PRIu64 " bytes)", fname, i, sc->index_bytes);
    uint32_t nl = smoe__le32(r + 104);
    if (nl == 0 || nl >= PACK_NAME_MAX || record_size(nl) > room)
        return smoe__fail(SMOE_EFORMAT, "%s: index record %" PRIu32 ": name length %" PRIu32
                          " (expected 1 to %d, inside the index)", fname, i, nl,
                          PACK_NAME_MAX - 1);
    if (memchr(r + PACK_SCOUT_RECORD, 0, nl))
        return smoe__fail(SMOE_EFORMAT, "%s: index record %" PRIu32 ": name holds a NUL",
                          fname, i);
    pack_scout_entry *e = &sc->e[i];
    if (!(e->name = tool_strndup((const char *)r + PACK_SCOUT_RECORD, nl)))
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    sc->count = i + 1;
    e->offset = smoe__le64(r);
    e->nbytes = smoe__le64(r + 8);
    e->hash = smoe__hash_get(r + 16);
    e->dtype = smoe__le32(r + 24);
    e->ndim = smoe__le32(r + 28);
    e->quant_group = smoe__le32(r + 32);
    e->quant_bits = smoe__le32(r + 36);
    for (int d = 0; d < PACK_MAX_DIMS; d++)
        e->shape[d] = smoe__le64(r + 40 + 8 * d);
    *size = record_size(nl);
    if (smoe__le32(r + 108))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': reserved field is not zero",
                          fname, e->name);
    return 0;
}

/* An entry's fields against each other and the file: its shape, its bytes
 * (aligned, after the data before it, inside the file, the size its dtype
 * and shape give). */
static int check_entry(const pack_scout_entry *e, const char *fname, uint64_t prev_end,
                       uint64_t file_size)
{
    if (e->ndim > PACK_MAX_DIMS)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': ndim %" PRIu32 ", expected 0 to %d",
                          fname, e->name, e->ndim, PACK_MAX_DIMS);
    for (uint32_t d = e->ndim; d < PACK_MAX_DIMS; d++)
        if (e->shape[d])
            return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': shape[%" PRIu32 "] past ndim "
                              "is not zero", fname, e->name, d);
    uint64_t end;
    if (pack_add(e->offset, e->nbytes, &end))
        return smoe__fail(SMOE_EOVERFLOW, "%s: tensor '%s': offset plus size overflows",
                          fname, e->name);
    if (e->offset % PACK_SCOUT_ALIGN)
        return smoe__fail(SMOE_EALIGN, "%s: tensor '%s': offset %" PRIu64 " is not a "
                          "multiple of %u", fname, e->name, e->offset, PACK_SCOUT_ALIGN);
    if (e->offset < prev_end)
        return smoe__fail(SMOE_EOVERLAP, "%s: tensor '%s': offset %" PRIu64 " is before the "
                          "end of the data before it (%" PRIu64 ")", fname, e->name,
                          e->offset, prev_end);
    if (end > file_size)
        return smoe__fail(SMOE_ERANGE, "%s: tensor '%s': bytes [%" PRIu64 ", %" PRIu64
                          ") lie past the end of the file (%" PRIu64 ")", fname, e->name,
                          e->offset, end, file_size);
    uint64_t want = e->ndim >= 1 && e->ndim <= SMOE_MAX_DIMS
                        ? smoe__dtype_bytes(e->dtype, e->shape, e->ndim, e->quant_group,
                                            e->quant_bits)
                        : 0;
    if (want && want != e->nbytes)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': %s of this shape is %" PRIu64
                          " bytes, the index says %" PRIu64, fname, e->name,
                          smoe_dtype_name(e->dtype), want, e->nbytes);
    return 0;
}

/* Names are unique. */
static int check_names(const pack_scout *sc, const char *fname)
{
    name_ref *refs = malloc((sc->count ? sc->count : 1) * sizeof *refs);
    if (!refs)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < sc->count; i++) {
        refs[i].name = sc->e[i].name;
        refs[i].index = i;
    }
    qsort(refs, sc->count, sizeof *refs, name_cmp);
    int rc = 0;
    for (uint32_t i = 1; i < sc->count && rc == 0; i++)
        if (!strcmp(refs[i].name, refs[i - 1].name))
            rc = smoe__fail(SMOE_EDUP, "%s: tensor '%s' is listed twice", fname, refs[i].name);
    free(refs);
    return rc;
}

/* Parse `total` records; sc->count counts those parsed (and to be freed). */
static int parse_records(const uint8_t *ix, const char *fname, pack_scout *sc, uint32_t total)
{
    uint64_t pos = 0, prev_end = sc->data_offset, size = 0;
    for (uint32_t i = 0; i < total; i++) {
        int rc = decode_record(ix + pos, sc->index_bytes - pos, fname, sc, i, &size);
        if (rc == 0)
            rc = check_entry(&sc->e[i], fname, prev_end, sc->file_size);
        if (rc < 0)
            return rc;
        prev_end = sc->e[i].offset + sc->e[i].nbytes;
        pos += size;
    }
    if (pos != sc->index_bytes)
        return smoe__fail(SMOE_EFORMAT, "%s: index is %" PRIu64 " bytes but its records take %"
                          PRIu64, fname, sc->index_bytes, pos);
    return check_names(sc, fname);
}

int pack_scout_parse(const uint8_t *buf, size_t n, uint64_t file_size, const char *fname,
                     pack_scout *out)
{
    memset(out, 0, sizeof *out);
    if (file_size < PACK_SCOUT_HEADER)
        return smoe__fail(SMOE_ETRUNC, "%s: %" PRIu64 " bytes, shorter than the %u-byte scout "
                          "header", fname, file_size, PACK_SCOUT_HEADER);
    if (n < PACK_SCOUT_HEADER)
        return n < file_size ? PACK_NEED_MORE
                             : smoe__fail(SMOE_ETRUNC, "%s: truncated header", fname);
    if (memcmp(buf, PACK_SCOUT_MAGIC, 8))
        return smoe__fail(SMOE_EMAGIC, "%s: not a scout file (bad magic number)", fname);
    uint32_t version = smoe__le32(buf + 8);
    if (version != PACK_SCOUT_VERSION)
        return smoe__fail(SMOE_EVERSION, "%s: scout version %" PRIu32 ", expected %u", fname,
                          version, PACK_SCOUT_VERSION);
    uint32_t hsize = smoe__le32(buf + 12), count = smoe__le32(buf + 16);
    uint32_t flags = smoe__le32(buf + 20);
    uint64_t ixoff = smoe__le64(buf + 24), ixbytes = smoe__le64(buf + 32);
    uint64_t data = smoe__le64(buf + 40), size = smoe__le64(buf + 48);
    if (hsize != PACK_SCOUT_HEADER || flags || ixoff != PACK_SCOUT_HEADER)
        return smoe__fail(SMOE_EFORMAT, "%s: header_size %" PRIu32 ", flags %" PRIu32
                          ", index_offset %" PRIu64 ": expected 64, 0, 64", fname, hsize, flags,
                          ixoff);
    if (count > PACK_SCOUT_MAX_TENSORS || ixbytes > PACK_SCOUT_MAX_INDEX ||
        (uint64_t)count * PACK_SCOUT_RECORD > ixbytes || ixbytes % 8)
        return smoe__fail(SMOE_ECOUNT, "%s: %" PRIu32 " tensors in an index of %" PRIu64
                          " bytes", fname, count, ixbytes);
    if (data % PACK_SCOUT_ALIGN || data < PACK_SCOUT_HEADER + ixbytes || data > size)
        return smoe__fail(SMOE_EFORMAT, "%s: data_offset %" PRIu64 ": expected a multiple of "
                          "%u from %" PRIu64 " to the file size %" PRIu64, fname, data,
                          PACK_SCOUT_ALIGN, PACK_SCOUT_HEADER + ixbytes, size);
    if (file_size < size)
        return smoe__fail(SMOE_ETRUNC, "%s: %" PRIu64 " bytes, the header says %" PRIu64,
                          fname, file_size, size);
    if (n < PACK_SCOUT_HEADER + ixbytes)
        return PACK_NEED_MORE;

    const smoe__bytes parts[] = {{buf, 56}, {buf + PACK_SCOUT_HEADER, (size_t)ixbytes}};
    uint64_t sum;
    if (smoe__hash_parts(parts, 2, &sum) < 0)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    if (sum != smoe__hash_get(buf + 56))
        return smoe__fail(SMOE_EHDRSUM, "%s: header and index checksum mismatch", fname);

    out->index_bytes = ixbytes;
    out->data_offset = data;
    out->file_size = size;
    out->checksum = sum;
    out->e = calloc(count ? count : 1, sizeof *out->e);
    if (!out->e)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    int rc = parse_records(buf + PACK_SCOUT_HEADER, fname, out, count);
    if (rc < 0)
        pack_scout_free(out);
    return rc;
}

static int parse_more(void *u, const char *path, uint32_t file, const uint8_t *buf, size_t n,
                      uint64_t size, size_t *want)
{
    (void)file;
    int rc = pack_scout_parse(buf, n, size, path, u);
    /* The header is checked: the index size is bounded and in the file. */
    if (rc == PACK_NEED_MORE)
        *want = (size_t)(PACK_SCOUT_HEADER + smoe__le64(buf + 32));
    return rc;
}

int pack_scout_load(const char *path, pack_scout *out)
{
    memset(out, 0, sizeof *out);
    return pack_read_header(path, PACK_SCOUT_HEADER, NULL, parse_more, out);
}

int pack_scout_check_data(const char *path, const pack_scout *sc)
{
    const smoe__io *io = smoe__io_get();
    smoe__io_stat fst;
    int fd = smoe__io_open_file(io, path, 0, NULL, &fst);
    if (fd < 0)
        return fd;
    size_t cap = 8u << 20;
    uint8_t *buf = malloc(cap);
    XXH3_state_t *st = XXH3_createState();
    int rc = 0;
    if (!buf || !st)
        rc = smoe__fail(SMOE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < sc->count && rc == 0; i++) {
        const pack_scout_entry *e = &sc->e[i];
        XXH3_64bits_reset(st);
        for (uint64_t done = 0; done < e->nbytes && rc == 0;) {
            size_t k = e->nbytes - done < cap ? (size_t)(e->nbytes - done) : cap;
            int err = 0;
            rc = smoe__io_read_full(io, fd, buf, k, e->offset + done, NULL, &err);
            if (rc == SMOE_ETRUNC)
                rc = smoe__fail(rc, "%s: tensor '%s': file ends inside its bytes", path,
                                e->name);
            else if (rc < 0)
                rc = smoe__fail(rc, "%s: tensor '%s': read failed: %s", path, e->name,
                                strerror(err));
            else
                XXH3_64bits_update(st, buf, k);
            done += k;
        }
        if (rc == 0 && XXH3_64bits_digest(st) != e->hash)
            rc = smoe__fail(SMOE_ECHECKSUM, "%s: tensor '%s': checksum mismatch", path,
                            e->name);
    }
    XXH3_freeState(st);
    free(buf);
    io->close(io, fd);
    return rc;
}

char *pack_scout_path_for(const char *vault_path)
{
    size_t n = strlen(vault_path);
    size_t stem = n >= 5 && !strcmp(vault_path + n - 5, ".smoe") ? n - 5 : n;
    char *s = malloc(stem + 7);
    if (!s)
        return NULL;
    memcpy(s, vault_path, stem);
    memcpy(s + stem, ".scout", 7);
    return s;
}

char *pack_scout_find(const char *vault_path, const char *meta_scout)
{
    /* The name the vault's metadata gives, beside the vault. */
    if (meta_scout && *meta_scout && !strchr(meta_scout, '/')) {
        const char *slash = strrchr(vault_path, '/');
        size_t dl = slash ? (size_t)(slash - vault_path + 1) : 0;
        size_t n = dl + strlen(meta_scout) + 1;
        char *p = malloc(n);
        if (p) {
            memcpy(p, vault_path, dl);
            memcpy(p + dl, meta_scout, n - dl);
            if (access(p, F_OK) == 0)
                return p;
            free(p);
        }
    }
    char *p = pack_scout_path_for(vault_path);
    if (p && access(p, F_OK) == 0)
        return p;
    free(p);
    return NULL;
}
