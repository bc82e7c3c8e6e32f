/*
 * pack_gguf.c - reading llama.cpp's GGUF files (versions 2 and 3,
 * little-endian).
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 key-value count, the
 * typed key-value pairs, the tensor infos (name, u32 n_dims, u64 ne[n_dims]
 * innermost first, u32 ggml type, u64 offset relative to the data section),
 * then the data section at the next multiple of general.alignment (32 by
 * default). The parser reads only what it has checked lies in the buffer;
 * when the buffer ends before the tensor infos do and the file is longer,
 * it returns PACK_NEED_MORE and the caller reads more.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "pack.h"

#define GGUF_DEFAULT_ALIGN 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_KEY_MAX 65535u
#define GGUF_STRING_MAX (64ull << 20)
#define GGUF_ARRAY_DEPTH 4
/* Largest header (key-values and tensor infos) read into memory. */
#define GGUF_HEADER_MAX ((size_t)1 << 30)

enum {
    GT_U8 = 0, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL,
    GT_STRING, GT_ARRAY, GT_U64, GT_I64, GT_F64, GT_COUNT_
};

static const uint8_t scalar_size[GT_COUNT_] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct cur {
    const uint8_t *b;
    size_t n;
    size_t pos;
    uint64_t file_size;
    const char *fname;
} cur;

/*
 * Make sure k more bytes are in the buffer: 0 when they are, PACK_NEED_MORE
 * when the file holds them but the buffer does not, SMOE_ETRUNC when the
 * file ends first.
 */
static int need(cur *c, uint64_t k, const char *what)
{
    if (k <= c->n - c->pos)
        return 0;
    if (k <= c->file_size - c->pos && c->n < c->file_size)
        return PACK_NEED_MORE;
    return smoe__fail(SMOE_ETRUNC, "%s: file ends at byte %" PRIu64 " inside %s",
                      c->fname, c->file_size, what);
}

static uint64_t le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int rd_u32(cur *c, uint32_t *v, const char *what)
{
    int rc = need(c, 4, what);
    if (rc)
        return rc;
    *v = (uint32_t)le(c->b + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cur *c, uint64_t *v, const char *what)
{
    int rc = need(c, 8, what);
    if (rc)
        return rc;
    *v = le(c->b + c->pos, 8);
    c->pos += 8;
    return 0;
}

/* A string: u64 length then bytes. *s points into the buffer (no NUL). */
static int rd_str(cur *c, const char **s, uint64_t *len, uint64_t max, const char *what)
{
    int rc = rd_u64(c, len, what);
    if (rc)
        return rc;
    if (*len > max)
        return smoe__fail(SMOE_EFORMAT, "%s: %s: string length %" PRIu64 " over the limit "
                          "of %" PRIu64 " at byte %zu", c->fname, what, *len, max, c->pos - 8);
    if ((rc = need(c, *len, what)))
        return rc;
    *s = (const char *)c->b + c->pos;
    c->pos += (size_t)*len;
    return 0;
}

/* Skip a value of type t (arrays recursively, to a bounded depth). */
static int skip_value(cur *c, uint32_t t, int depth, const char *key)
{
    if (t < GT_COUNT_ && scalar_size[t]) {
        int rc = need(c, scalar_size[t], key);
        if (rc == 0)
            c->pos += scalar_size[t];
        return rc;
    }
    if (t == GT_STRING) {
        const char *s;
        uint64_t len;
        return rd_str(c, &s, &len, GGUF_STRING_MAX, key);
    }
    if (t != GT_ARRAY)
        return smoe__fail(SMOE_EFORMAT, "%s: key '%s': unknown value type %" PRIu32,
                          c->fname, key, t);
    if (depth >= GGUF_ARRAY_DEPTH)
        return smoe__fail(SMOE_EFORMAT, "%s: key '%s': arrays nested deeper than %d",
                          c->fname, key, GGUF_ARRAY_DEPTH);
    uint32_t et;
    uint64_t count;
    int rc = rd_u32(c, &et, key);
    if (rc == 0)
        rc = rd_u64(c, &count, key);
    if (rc)
        return rc;
    if (et < GT_COUNT_ && scalar_size[et]) {
        uint64_t bytes;
        if (pack_mul(count, scalar_size[et], &bytes) || bytes > c->file_size)
            return smoe__fail(SMOE_ECOUNT, "%s: key '%s': array of %" PRIu64 " elements "
                              "is larger than the file", c->fname, key, count);
        if ((rc = need(c, bytes, key)))
            return rc;
        c->pos += (size_t)bytes;
        return 0;
    }
    /* Strings and arrays take at least 8 bytes each. */
    if (count > c->file_size / 8)
        return smoe__fail(SMOE_ECOUNT, "%s: key '%s': array of %" PRIu64 " elements is "
                          "larger than the file", c->fname, key, count);
    for (uint64_t i = 0; i < count; i++)
        if ((rc = skip_value(c, et, depth + 1, key)))
            return rc;
    return 0;
}

/* An integer value of any integer type, for the keys we read. */
static int rd_int(cur *c, uint32_t t, uint64_t *v, const char *key)
{
    if (t >= GT_COUNT_ || !scalar_size[t] || t == GT_F32 || t == GT_F64 || t == GT_BOOL)
        return smoe__fail(SMOE_EFORMAT, "%s: key '%s': expected an integer, found type %" PRIu32,
                          c->fname, key, t);
    int rc = need(c, scalar_size[t], key);
    if (rc)
        return rc;
    uint64_t x = le(c->b + c->pos, scalar_size[t]);
    int neg = 0;
    switch (t) {
    case GT_I8: neg = (x & 0x80u) != 0; break;
    case GT_I16: neg = (x & 0x8000u) != 0; break;
    case GT_I32: neg = (x & 0x80000000u) != 0; break;
    case GT_I64: neg = (x >> 63) != 0; break;
    default: break;
    }
    if (neg)
        return smoe__fail(SMOE_EFORMAT, "%s: key '%s': negative value", c->fname, key);
    c->pos += scalar_size[t];
    *v = x;
    return 0;
}

/* Copy a string for metadata, replacing control characters. */
static int meta_str(char **field, const char *s, uint64_t len)
{
    if (len > 256)
        len = 256;
    char buf[257];
    for (uint64_t i = 0; i < len; i++)
        buf[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    buf[len] = 0;
    return pack_meta_set(field, buf);
}

#define MAX_ARCH_KEYS 8

typedef struct kv_state {
    uint32_t alignment;
    char arch[257];
    struct {
        char prefix[128];
        uint32_t value;
        int used; /* expert_used_count rather than expert_count */
    } ek[MAX_ARCH_KEYS];
    int n_ek;
} kv_state;

static int parse_kv(cur *c, pack_source *s, kv_state *st, uint64_t index)
{
    const char *key;
    uint64_t klen;
    char what[64];
    snprintf(what, sizeof what, "key %" PRIu64, index);
    int rc = rd_str(c, &key, &klen, GGUF_KEY_MAX, what);
    if (rc)
        return rc;
    if (klen == 0)
        return smoe__fail(SMOE_EFORMAT, "%s: key %" PRIu64 " is empty", c->fname, index);
    char k[GGUF_KEY_MAX + 1];
    memcpy(k, key, (size_t)klen);
    k[klen] = 0;
    uint32_t t;
    if ((rc = rd_u32(c, &t, k)))
        return rc;

    size_t kl = strlen(k);
    static const char ec[] = ".expert_count", euc[] = ".expert_used_count";
    int is_ec = kl > sizeof ec - 1 && !strcmp(k + kl - (sizeof ec - 1), ec);
    int is_euc = kl > sizeof euc - 1 && !strcmp(k + kl - (sizeof euc - 1), euc);

    if (!strcmp(k, "general.alignment")) {
        uint64_t v;
        if ((rc = rd_int(c, t, &v, k)))
            return rc;
        if (v == 0 || v > (1u << 20) || (v & (v - 1)))
            return smoe__fail(SMOE_EFORMAT, "%s: general.alignment %" PRIu64 ": expected a "
                              "power of two up to 1 MiB", c->fname, v);
        st->alignment = (uint32_t)v;
    } else if (!strcmp(k, "general.architecture") || !strcmp(k, "general.name")) {
        if (t != GT_STRING)
            return smoe__fail(SMOE_EFORMAT, "%s: key '%s': expected a string", c->fname, k);
        const char *v;
        uint64_t len;
        if ((rc = rd_str(c, &v, &len, GGUF_STRING_MAX, k)))
            return rc;
        if (!strcmp(k, "general.name"))
            return meta_str(&s->meta.model, v, len);
        if (len == 0 || len > 256)
            return smoe__fail(SMOE_EFORMAT, "%s: general.architecture: %" PRIu64 " bytes, "
                              "expected 1 to 256", c->fname, len);
        memcpy(st->arch, v, (size_t)len);
        st->arch[len] = 0;
        return meta_str(&s->meta.arch, v, len);
    } else if (!strcmp(k, "split.count")) {
        uint64_t v;
        if ((rc = rd_int(c, t, &v, k)))
            return rc;
        if (v > 1)
            return smoe__fail(SMOE_ENOTSUP, "%s: one part of a split GGUF (%" PRIu64 " parts); "
                              "merge them first (llama-gguf-split --merge)", c->fname, v);
    } else if (is_ec || is_euc) {
        uint64_t v;
        if ((rc = rd_int(c, t, &v, k)))
            return rc;
        if (v == 0 || v > 65536)
            return smoe__fail(SMOE_EFORMAT, "%s: key '%s': %" PRIu64 ": expected 1 to 65536",
                              c->fname, k, v);
        size_t pl = kl - (is_ec ? sizeof ec : sizeof euc) + 1;
        if (st->n_ek < MAX_ARCH_KEYS && pl < sizeof st->ek[0].prefix) {
            memcpy(st->ek[st->n_ek].prefix, k, pl);
            st->ek[st->n_ek].prefix[pl] = 0;
            st->ek[st->n_ek].value = (uint32_t)v;
            st->ek[st->n_ek].used = is_euc;
            st->n_ek++;
        }
    } else {
        return skip_value(c, t, 0, k);
    }
    return 0;
}

static int parse_tensor_info(cur *c, pack_source *s, uint32_t file, uint64_t index,
                             uint32_t alignment)
{
    char what[64];
    snprintf(what, sizeof what, "tensor info %" PRIu64, index);
    const char *name;
    uint64_t nlen;
    int rc = rd_str(c, &name, &nlen, PACK_NAME_MAX - 1, what);
    if (rc)
        return rc;
    if (nlen == 0)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor info %" PRIu64 ": empty name", c->fname,
                          index);
    /* A NUL inside the name would cut it short everywhere it is used. */
    if (memchr(name, 0, (size_t)nlen))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor info %" PRIu64 ": name holds a NUL byte",
                          c->fname, index);
    char nm[PACK_NAME_MAX];
    memcpy(nm, name, (size_t)nlen);
    nm[nlen] = 0;
    uint32_t nd;
    if ((rc = rd_u32(c, &nd, nm)))
        return rc;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': %" PRIu32 " dimensions, expected 1 "
                          "to %u", c->fname, nm, nd, GGUF_MAX_DIMS);
    pack_tensor t;
    memset(&t, 0, sizeof t);
    t.name = nm;
    t.file = file;
    t.ndim = nd;
    uint64_t elems = 1;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t ne;
        if ((rc = rd_u64(c, &ne, nm)))
            return rc;
        if (ne >> 62)
            return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': dimension %" PRIu32 " is %" PRIu64,
                              c->fname, nm, i, ne);
        t.shape[nd - 1 - i] = ne; /* ggml lists the innermost dimension first */
        if (pack_mul(elems, ne, &elems))
            return smoe__fail(SMOE_EOVERFLOW, "%s: tensor '%s': element count overflows",
                              c->fname, nm);
    }
    uint32_t type;
    uint64_t off;
    if ((rc = rd_u32(c, &type, nm)) || (rc = rd_u64(c, &off, nm)))
        return rc;
    if (type >= 0x100)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': unknown ggml type %" PRIu32,
                          c->fname, nm, type);
    t.dtype = SMOE_DTYPE_GGML(type);
    char sb[160];
    if (!strcmp(smoe_dtype_name(t.dtype), "?"))
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': unknown ggml type %" PRIu32,
                          c->fname, nm, type);
    t.nbytes = elems ? smoe__dtype_bytes(t.dtype, t.shape, t.ndim, 0, 0) : 0;
    if (elems && !t.nbytes)
        return smoe__fail(SMOE_EFORMAT, "%s: tensor '%s': shape %s is not a whole number of "
                          "%s blocks (or its size overflows)", c->fname, nm,
                          pack_shape_str(t.shape, t.ndim, sb, sizeof sb),
                          smoe_dtype_name(t.dtype));
    if (off % alignment)
        return smoe__fail(SMOE_EALIGN, "%s: tensor '%s': offset %" PRIu64 " is not a multiple "
                          "of the alignment %" PRIu32, c->fname, nm, off, alignment);
    t.offset = off; /* relative for now: the data section's start is not known yet */
    return pack_source_add_tensor(s, &t);
}

static int parse(cur *c, uint32_t file, pack_source *s)
{
    int rc;
    if (c->file_size < 24)
        return smoe__fail(SMOE_ETRUNC, "%s: %" PRIu64 " bytes, too short for a GGUF header",
                          c->fname, c->file_size);
    if ((rc = need(c, 24, "the header")))
        return rc;
    if (memcmp(c->b, "GGUF", 4))
        return smoe__fail(SMOE_EMAGIC, "%s: no GGUF magic number", c->fname);
    uint32_t version = (uint32_t)le(c->b + 4, 4);
    if (version == 0x02000000u || version == 0x03000000u)
        return smoe__fail(SMOE_ENOTSUP, "%s: big-endian GGUF is not supported", c->fname);
    if (version != 2 && version != 3)
        return smoe__fail(SMOE_EVERSION, "%s: GGUF version %" PRIu32 ", expected 2 or 3",
                          c->fname, version);
    uint64_t n_tensors = le(c->b + 8, 8), n_kv = le(c->b + 16, 8);
    c->pos = 24;
    /* A key-value pair takes at least 13 bytes, a tensor info at least 33. */
    if (n_kv > c->file_size / 13 || n_tensors > c->file_size / 33)
        return smoe__fail(SMOE_ECOUNT, "%s: %" PRIu64 " tensors and %" PRIu64 " keys cannot "
                          "fit in %" PRIu64 " bytes", c->fname, n_tensors, n_kv, c->file_size);

    kv_state st;
    memset(&st, 0, sizeof st);
    st.alignment = GGUF_DEFAULT_ALIGN;
    for (uint64_t i = 0; i < n_kv; i++)
        if ((rc = parse_kv(c, s, &st, i)))
            return rc;

    size_t first = s->n_tensors;
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((rc = parse_tensor_info(c, s, file, i, st.alignment)))
            return rc;

    if (file < s->n_files) {
        s->files[file].kind = PACK_FMT_GGUF;
        s->files[file].align = st.alignment;
        s->files[file].header_bytes = c->pos; /* the header and tensor infos */
    }
    uint64_t data = ((uint64_t)c->pos + st.alignment - 1) / st.alignment * st.alignment;
    if (n_tensors && data > c->file_size)
        return smoe__fail(SMOE_ETRUNC, "%s: data section would start at %" PRIu64 ", past the "
                          "end of the file (%" PRIu64 " bytes)", c->fname, data, c->file_size);
    for (size_t i = first; i < s->n_tensors; i++) {
        pack_tensor *t = &s->tensors[i];
        if (pack_add(t->offset, data, &t->offset))
            return smoe__fail(SMOE_EOVERFLOW, "%s: tensor '%s': offset overflows", c->fname,
                              t->name);
    }
    if ((rc = pack_source_check_ranges(s, first, s->n_tensors - first, data, c->file_size,
                                       c->fname)))
        return rc;

    for (int i = 0; i < st.n_ek; i++) {
        if (strcmp(st.ek[i].prefix, st.arch))
            continue;
        if (st.ek[i].used) {
            s->meta.top_k = st.ek[i].value;
        } else {
            char what[400];
            s->meta.experts = st.ek[i].value;
            snprintf(what, sizeof what, "%s '%s.expert_count'", c->fname, st.arch);
            if ((rc = pack_meta_set(&s->meta.experts_from, what)))
                return rc;
        }
    }
    return 0;
}

int pack_gguf_parse(const uint8_t *buf, size_t n, uint64_t file_size, const char *fname,
                    uint32_t file, pack_source *s)
{
    cur c = {buf, n, 0, file_size, fname};
    if (n > file_size)
        c.n = (size_t)file_size;
    size_t first = s->n_tensors;
    int rc = parse(&c, file, s);
    if (rc)
        pack_source_truncate(s, first);
    else
        s->format = PACK_FMT_GGUF;
    return rc;
}

/* Tokenizer arrays make headers of tens of MiB: start at 4 MiB, double. */
static int parse_more(void *u, const char *path, uint32_t file, const uint8_t *buf, size_t n,
                      uint64_t size, size_t *want)
{
    int rc = pack_gguf_parse(buf, n, size, path, file, u);
    if (rc != PACK_NEED_MORE)
        return rc;
    if (n >= size || n >= GGUF_HEADER_MAX)
        return smoe__fail(SMOE_EFORMAT, "%s: header larger than %zu bytes", path, n);
    *want = n * 2 > size ? (size_t)size : n * 2;
    if (*want > GGUF_HEADER_MAX)
        *want = GGUF_HEADER_MAX;
    return rc;
}

int pack_gguf_load_file(pack_source *s, const char *path)
{
    return pack_read_header(path, 4u << 20, s, parse_more, s);
}
