/*
 * model_gguf.c - a GGUF file's header as the library checks an index
 * vault's source (model_hdr.h): "GGUF", version 2 or 3 (little-endian),
 * u64 tensor count, u64 key-value count, the typed key-values (only
 * general.alignment is read; the rest are skipped by their types), then
 * per tensor its name, u32 n_dims (1..4), u64 dims innermost first, u32
 * ggml type (one dtype.c sizes) and u64 offset (a multiple of the
 * alignment) from the data section, which starts at the first multiple of
 * the alignment after the tensor infos. The header ends with the last
 * tensor info: what smoe index records as header_bytes.
 */
#include <inttypes.h>
#include <string.h>

#include "smoe/smoe.h"
#include "vault/model_hdr.h"
#include "vault/vault.h"

#define GGUF_DEFAULT_ALIGN 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_KEY_MAX 65535u
#define GGUF_NAME_MAX 4095u
#define GGUF_STRING_MAX (64ull << 20)
#define GGUF_ARRAY_DEPTH 4

enum { GT_U8, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL, GT_STRING, GT_ARRAY,
       GT_U64, GT_I64, GT_F64, GT_COUNT_ };
static const uint8_t scalar_size[GT_COUNT_] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct gcur {
    const uint8_t *b;
    size_t n, pos;
    uint64_t fsize;
    smoe__model_hdr *h;
} gcur;

/* k more bytes: 0 when in the buffer, SMOE__HDR_MORE when only the file
 * has them, SMOE_ETRUNC when it ends first. */
static int need(gcur *c, uint64_t k, const char *what)
{
    if (k <= c->n - c->pos)
        return 0;
    if (k <= c->fsize - c->pos && c->n < c->fsize)
        return SMOE__HDR_MORE;
    return smoe__hdr_fail(c->h, SMOE_ETRUNC, "the file (%" PRIu64 " bytes) ends inside %s "
                          "at byte %zu", c->fsize, what, c->pos);
}

static uint64_t le(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int rd(gcur *c, unsigned bytes, uint64_t *v, const char *what)
{
    int rc = need(c, bytes, what);
    if (rc == 0) {
        *v = le(c->b + c->pos, bytes);
        c->pos += bytes;
    }
    return rc;
}

/* A string of at most max bytes: its length, then its bytes (skipped;
 * *s points at them). */
static int rd_str(gcur *c, uint64_t max, const uint8_t **s, uint64_t *len, const char *what)
{
    int rc = rd(c, 8, len, what);
    if (rc)
        return rc;
    if (*len > max)
        return smoe__hdr_fail(c->h, SMOE_EFORMAT, "%s: a string of %" PRIu64 " bytes at "
                              "byte %zu, over the %" PRIu64 " allowed", what, *len,
                              c->pos - 8, max);
    if ((rc = need(c, *len, what)))
        return rc;
    *s = c->b + c->pos;
    c->pos += (size_t)*len;
    return 0;
}

/* Skip a value of type t (arrays of bounded depth). */
static int skip_value(gcur *c, uint64_t t, int depth, const char *what)
{
    const uint8_t *s;
    uint64_t len, et, count;
    if (t < GT_COUNT_ && scalar_size[t]) {
        int rc = need(c, scalar_size[t], what);
        if (rc == 0)
            c->pos += scalar_size[t];
        return rc;
    }
    if (t == GT_STRING)
        return rd_str(c, GGUF_STRING_MAX, &s, &len, what);
    if (t != GT_ARRAY || depth >= GGUF_ARRAY_DEPTH)
        return smoe__hdr_fail(c->h, SMOE_EFORMAT, "%s: value type %" PRIu64 " at byte %zu, "
                              "expected 0..12 (arrays nested at most %d deep)", what, t,
                              c->pos, GGUF_ARRAY_DEPTH);
    int rc = rd(c, 4, &et, what);
    if (rc == 0)
        rc = rd(c, 8, &count, what);
    if (rc)
        return rc;
    if (et < GT_COUNT_ && scalar_size[et]) {
        if (count > c->fsize / scalar_size[et])
            return smoe__hdr_fail(c->h, SMOE_ECOUNT, "%s: an array of %" PRIu64 " values, "
                                  "larger than the file", what, count);
        if ((rc = need(c, count * scalar_size[et], what)) == 0)
            c->pos += (size_t)(count * scalar_size[et]);
        return rc;
    }
    if (count > c->fsize / 8) /* strings and arrays take 8 bytes at least */
        return smoe__hdr_fail(c->h, SMOE_ECOUNT, "%s: an array of %" PRIu64 " values, "
                              "larger than the file", what, count);
    for (uint64_t i = 0; i < count && rc == 0; i++)
        rc = skip_value(c, et, depth + 1, what);
    return rc;
}

/* One key-value; general.alignment into *align. */
static int key_value(gcur *c, uint32_t *align)
{
    const uint8_t *key;
    uint64_t klen, t, v;
    int rc = rd_str(c, GGUF_KEY_MAX, &key, &klen, "a key");
    if (rc == 0)
        rc = rd(c, 4, &t, "a key's type");
    if (rc)
        return rc;
    static const char al[] = "general.alignment";
    if (klen != sizeof al - 1 || memcmp(key, al, klen))
        return skip_value(c, t, 0, "a key's value");
    if (t >= GT_COUNT_ || !scalar_size[t] || t == GT_F32 || t == GT_F64 || t == GT_BOOL)
        return smoe__hdr_fail(c->h, SMOE_EFORMAT, "general.alignment: type %" PRIu64
                              ", expected an integer", t);
    if ((rc = rd(c, scalar_size[t], &v, al)))
        return rc;
    if (v == 0 || v > (1u << 20) || (v & (v - 1)))
        return smoe__hdr_fail(c->h, SMOE_EFORMAT, "general.alignment %" PRIu64 ", expected a "
                              "power of two up to 1 MiB", v);
    *align = (uint32_t)v;
    return 0;
}

/* One tensor info: its data [offset, offset + bytes) relative to the data
 * section, into *off and *bytes. */
static int tensor_info(gcur *c, uint64_t i, uint32_t align, uint64_t *off, uint64_t *bytes)
{
    const uint8_t *name;
    uint64_t nlen, nd, type, shape[GGUF_MAX_DIMS], elems = 1;
    int rc = rd_str(c, GGUF_NAME_MAX, &name, &nlen, "a tensor info");
    if (rc == 0)
        rc = rd(c, 4, &nd, "a tensor info");
    if (rc)
        return rc;
    if (nlen == 0 || memchr(name, 0, (size_t)nlen) || nd < 1 || nd > GGUF_MAX_DIMS)
        return smoe__hdr_fail(c->h, SMOE_EFORMAT, "tensor info %" PRIu64 ": a name of %" PRIu64
                              " bytes (1..%u, no NUL) and %" PRIu64 " dimensions (1..%u)", i,
                              nlen, GGUF_NAME_MAX, nd, GGUF_MAX_DIMS);
    for (uint64_t d = 0; d < nd; d++) {
        if ((rc = rd(c, 8, &shape[nd - 1 - d], "a tensor info")))
            return rc;
        uint64_t ne = shape[nd - 1 - d];
        if (ne >> 62 || (ne && elems > UINT64_MAX / ne))
            return smoe__hdr_fail(c->h, SMOE_EOVERFLOW, "tensor info %" PRIu64 " '%.*s': "
                                  "its element count overflows", i, (int)(nlen > 200 ? 200 : nlen),
                                  (const char *)name);
        elems *= ne;
    }
    if ((rc = rd(c, 4, &type, "a tensor info")) || (rc = rd(c, 8, off, "a tensor info")))
        return rc;
    uint32_t dtype = type < 0x100 ? SMOE_DTYPE_GGML((uint32_t)type) : SMOE_DTYPE_UNKNOWN;
    *bytes = elems ? smoe__dtype_bytes(dtype, shape, (uint32_t)nd, 0, 0) : 0;
    if (dtype == SMOE_DTYPE_UNKNOWN || !strcmp(smoe_dtype_name(dtype), "?") ||
        (elems && !*bytes))
        return smoe__hdr_fail(c->h, SMOE_EFORMAT, "tensor info %" PRIu64 " '%.*s': ggml type %"
                              PRIu64 " unknown, or its shape not whole blocks of it", i,
                              (int)(nlen > 200 ? 200 : nlen), (const char *)name, type);
    if (*off % align)
        return smoe__hdr_fail(c->h, SMOE_EALIGN, "tensor info %" PRIu64 ": offset %" PRIu64
                              " is not a multiple of the alignment %" PRIu32, i, *off, align);
    return 0;
}

/* The fixed part; *nt, *nkv its counts. */
static int fixed_header(gcur *c, uint64_t *nt, uint64_t *nkv)
{
    int rc = need(c, 24, "the 24-byte GGUF header");
    if (rc)
        return rc;
    if (memcmp(c->b, "GGUF", 4))
        return smoe__hdr_fail(c->h, SMOE_EMAGIC, "no GGUF magic number ('GGUF' at byte 0)");
    uint64_t version = le(c->b + 4, 4);
    if (version != 2 && version != 3)
        return smoe__hdr_fail(c->h, SMOE_EVERSION, "GGUF version %" PRIu64 ", expected 2 or 3 "
                              "(little-endian)", version);
    *nt = le(c->b + 8, 8);
    *nkv = le(c->b + 16, 8);
    c->pos = 24;
    /* A key-value takes 13 bytes at least, a tensor info 33. */
    if (*nkv > c->fsize / 13 || *nt > c->fsize / 33)
        return smoe__hdr_fail(c->h, SMOE_ECOUNT, "%" PRIu64 " tensors and %" PRIu64 " keys "
                              "cannot fit in %" PRIu64 " bytes", *nt, *nkv, c->fsize);
    return 0;
}

int smoe__gguf_hdr_parse(const uint8_t *b, size_t n, uint64_t file_size, smoe__model_hdr *h)
{
    gcur c = {b, n, 0, file_size, h};
    uint64_t nt = 0, nkv = 0;
    uint32_t align = GGUF_DEFAULT_ALIGN;
    int rc = fixed_header(&c, &nt, &nkv);
    for (uint64_t i = 0; rc == 0 && i < nkv; i++)
        rc = key_value(&c, &align);
    /* Offsets relative to the data section until its start is known. */
    for (uint64_t i = 0; rc == 0 && i < nt; i++) {
        uint64_t off = 0, bytes = 0;
        if ((rc = tensor_info(&c, i, align, &off, &bytes)) != 0)
            break;
        if (off > UINT64_MAX - bytes)
            return smoe__hdr_fail(h, SMOE_EOVERFLOW, "tensor info %" PRIu64 ": offset %" PRIu64
                                  " plus %" PRIu64 " bytes overflows", i, off, bytes);
        rc = smoe__hdr_add(h, off, off + bytes);
    }
    if (rc)
        return rc;
    h->header_end = c.pos;
    uint64_t data = c.pos + (align - c.pos % align) % align;
    for (size_t k = 0; k < h->n; k++) {
        smoe__tspan *t = &h->spans[k];
        if (t->end > file_size || data > file_size - t->end)
            return smoe__hdr_fail(h, SMOE_ERANGE, "a tensor's data [%" PRIu64 ", %" PRIu64
                                  ") from the data section at %" PRIu64 " ends past the end "
                                  "of the file (%" PRIu64 " bytes)", t->begin, t->end, data,
                                  file_size);
        t->begin += data;
        t->end += data;
    }
    h->data_at = data;
    h->pad = align;
    return 0;
}
