/*
 * model_st.c - a safetensors file's header as the library checks an index
 * vault's source (model_hdr.h): an 8-byte little-endian length N (at most
 * 100 MiB, the format's own limit), then N bytes of JSON: one object
 * mapping each tensor's name to {"dtype", "shape", "data_offsets"}, and
 * perhaps "__metadata__" (an object of strings); the data follows, offsets
 * relative to its first byte. The header is the 8 bytes and the JSON.
 *
 * The JSON is read by a small strict scanner (model_json.c) rather than a
 * JSON library: it reads only the N bytes, keeps no tree, nests at most a
 * few levels, takes integers only where offsets and dimensions go, and
 * refuses a field twice in a tensor's object. Fields it does not know are
 * skipped, as the format's reference reader does. Messages say where and
 * what was expected; they quote no byte of a file that is not plainly a
 * safetensors file (a length in bounds, then a JSON object).
 */
#include <inttypes.h>
#include <string.h>

#include "smoe/smoe.h"
#include "byteorder.h"
#include "vault/model_hdr.h"
#include "vault/model_json.h"

#define ST_HEADER_MAX (100ull << 20)
#define ST_MAX_DIMS 8

static const struct {
    const char *name;
    uint32_t bits;
} st_dtypes[] = {
    {"BOOL", 8}, {"U8", 8}, {"I8", 8}, {"U16", 16}, {"I16", 16}, {"F16", 16}, {"BF16", 16},
    {"U32", 32}, {"I32", 32}, {"F32", 32}, {"U64", 64}, {"I64", 64}, {"F64", 64},
    {"F8_E4M3", 8}, {"F8_E5M2", 8}, {"F8_E8M0", 8}, {"F4", 4}, {"F6_E2M3", 6},
    {"F6_E3M2", 6}, {"C64", 64},
};

static uint32_t dtype_bits(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strlen(st_dtypes[i].name) == n && !memcmp(st_dtypes[i].name, s, n))
            return st_dtypes[i].bits;
    return 0;
}

/* What one tensor's object says. */
typedef struct st_tensor {
    uint32_t bits, ndim;
    uint64_t shape[ST_MAX_DIMS], begin, end;
    unsigned seen; /* 1 dtype, 2 shape, 4 data_offsets */
} st_tensor;

static int field(smoe__jcur *c, const uint8_t *k, size_t kn, st_tensor *t)
{
    static const char *names[] = {"dtype", "shape", "data_offsets"};
    unsigned f = 0;
    while (f < 3 && !(strlen(names[f]) == kn && !memcmp(names[f], k, kn)))
        f++;
    if (f == 3)
        return smoe__json_skip(c, 1);
    if (t->seen & (1u << f))
        return smoe__json_fail(c, "field '%s' twice", names[f]);
    t->seen |= 1u << f;
    if (f == 0) {
        const uint8_t *s;
        size_t n;
        int rc = smoe__json_string(c, &s, &n);
        if (rc == 0 && !(t->bits = dtype_bits(s, n)))
            rc = smoe__json_fail(c, "unknown dtype '%.*s'", (int)(n > 32 ? 32 : n),
                                 (const char *)s);
        return rc;
    }
    uint64_t *out = f == 1 ? t->shape : &t->begin;
    uint32_t max = f == 1 ? ST_MAX_DIMS : 2, got;
    int rc = smoe__json_u64_array(c, out, max, &got, f == 1 ? "shape" : "data_offsets");
    if (rc == 0 && f == 1)
        t->ndim = got;
    else if (rc == 0 && got != 2)
        rc = smoe__json_fail(c, "data_offsets holds %" PRIu32 " numbers, expected 2", got);
    if (rc == 0 && f == 2)
        t->end = out[1];
    return rc;
}

/* Its bytes from dtype and shape against its data_offsets. */
static int tensor_size(smoe__jcur *c, const st_tensor *t)
{
    uint64_t bits = t->bits;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] && bits > UINT64_MAX / t->shape[i])
            return smoe__json_fail(c, "its shape overflows a byte count");
        bits *= t->shape[i];
    }
    if (bits % 8)
        return smoe__json_fail(c, "its shape is not a whole number of bytes");
    if (t->end < t->begin || t->end - t->begin != bits / 8)
        return smoe__json_fail(c, "data_offsets [%" PRIu64 ", %" PRIu64 "] do not hold the %"
                               PRIu64 " bytes its dtype and shape give", t->begin, t->end,
                               bits / 8);
    return 0;
}

/* A tensor's object; its data into the spans. */
static int tensor(smoe__jcur *c, smoe__model_hdr *h, uint64_t data, uint64_t fsize)
{
    st_tensor t;
    memset(&t, 0, sizeof t);
    int first = 1, rc = smoe__json_open(c, '{');
    while (rc == 0 && smoe__json_more(c, '}', &first, &rc)) {
        const uint8_t *k;
        size_t kn;
        if ((rc = smoe__json_key(c, &k, &kn)) || (rc = field(c, k, kn, &t)))
            return rc;
    }
    if (rc)
        return rc;
    if (t.seen != 7)
        return smoe__json_fail(c, "a tensor without dtype, shape and data_offsets");
    if ((rc = tensor_size(c, &t)))
        return rc;
    if (t.end > fsize - data)
        return smoe__hdr_fail(h, SMOE_ERANGE, "a tensor's data_offsets [%" PRIu64 ", %" PRIu64
                              "] end past the end of the file (%" PRIu64 " bytes, data from %"
                              PRIu64 ")", t.begin, t.end, fsize, data);
    return smoe__hdr_add(h, data + t.begin, data + t.end);
}

/* The top object: tensors, and __metadata__. */
static int top(smoe__jcur *c, smoe__model_hdr *h, uint64_t data, uint64_t fsize)
{
    int first = 1, rc = smoe__json_open(c, '{');
    while (rc == 0 && smoe__json_more(c, '}', &first, &rc)) {
        const uint8_t *k;
        size_t kn;
        if ((rc = smoe__json_key(c, &k, &kn)))
            return rc;
        if (kn == 12 && !memcmp(k, "__metadata__", 12))
            rc = smoe__json_string_object(c);
        else if (kn == 0)
            rc = smoe__json_fail(c, "a tensor with an empty name");
        else
            rc = tensor(c, h, data, fsize);
        if (rc)
            return rc;
    }
    return rc ? rc : smoe__json_end(c);
}

int smoe__st_hdr_parse(const uint8_t *b, size_t n, uint64_t file_size, smoe__model_hdr *h)
{
    if (file_size < 8)
        return smoe__hdr_fail(h, SMOE_ETRUNC, "%" PRIu64 " bytes, too short for the 8-byte "
                              "header length", file_size);
    if (n < 8)
        return SMOE__HDR_MORE;
    uint64_t len = smoe__le64(b);
    if (len > ST_HEADER_MAX)
        return smoe__hdr_fail(h, SMOE_EFORMAT, "its first 8 bytes give a header length over "
                              "the format's limit of %llu bytes", ST_HEADER_MAX);
    if (len > file_size - 8)
        return smoe__hdr_fail(h, SMOE_ETRUNC, "its first 8 bytes give a header length that "
                              "runs past the end of the file (%" PRIu64 " bytes)", file_size);
    /* Its first byte now: a file that only starts like one is not read on. */
    if (len < 2 || (n > 8 && b[8] != '{'))
        return smoe__hdr_fail(h, SMOE_EFORMAT, "its header (%" PRIu64 " bytes from byte 8) "
                              "is not a JSON object", len);
    h->header_end = 8 + len;
    if (n < 8 + len)
        return SMOE__HDR_MORE;
    smoe__jcur c = {b + 8, (size_t)len, 0, h};
    h->data_at = 8 + len;
    h->pad = 1;
    h->to_eof = 1; /* the format's byte buffer "cannot contain holes" */
    return top(&c, h, 8 + len, file_size);
}
