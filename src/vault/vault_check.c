/*
 * vault_check.c - the checks of one component record that the reader and
 * the writer share (docs/vault-format.md, "Component record"), so the
 * writer never writes a component the reader rejects.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "smoe/smoe.h"
#include "byteorder.h"
#include "error.h"
#include "vault/vault.h"

int smoe__utf8_valid(const void *str, size_t n)
{
    const unsigned char *s = str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

int smoe__shape_check(uint32_t layers, uint32_t experts, uint32_t entries,
                      const char *where)
{
    uint64_t pairs = (uint64_t)layers * experts;
    uint64_t most = (uint64_t)entries * SMOE__PAIRS_PER_ENTRY;
    if (most < SMOE__PAIRS_FREE)
        most = SMOE__PAIRS_FREE;
    if (pairs <= most)
        return 0;
    return smoe__fail(SMOE_ECOUNT, "%s: header fields layers x experts: %" PRIu32 " x %"
                      PRIu32 " = %" PRIu64 " pairs for %" PRIu32 " entries, expected at "
                      "most %" PRIu64 " (%u per entry present, or %u in all: memory and the "
                      "histogram are sized by the declared shape)", where, layers, experts,
                      pairs, entries, most, SMOE__PAIRS_PER_ENTRY, SMOE__PAIRS_FREE);
}

static void shape_str(char *buf, size_t n, const smoe_component *c)
{
    size_t used = 0;
    buf[0] = 0;
    for (uint32_t d = 0; d < c->ndim && d < SMOE_MAX_DIMS && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%" PRIu64, d ? ", " : "[",
                                 c->shape[d]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
}

int smoe__component_check(const smoe_component *c, uint32_t component_align,
                          const char *where)
{
    const char *nul = memchr(c->name, 0, SMOE_COMPONENT_NAME_MAX);
    if (!nul)
        return smoe__fail(SMOE_EFORMAT, "%s: field name is not NUL-terminated within its %d "
                          "bytes", where, SMOE_COMPONENT_NAME_MAX);
    size_t len = (size_t)(nul - c->name);
    if (len == 0)
        return smoe__fail(SMOE_EFORMAT, "%s: field name is empty", where);
    if (!smoe__utf8_valid(c->name, len))
        return smoe__fail(SMOE_EFORMAT, "%s: field name is not valid UTF-8", where);
    const char *nm = c->name;
    if (c->ndim < 1 || c->ndim > SMOE_MAX_DIMS)
        return smoe__fail(SMOE_EFORMAT, "%s (%s): field ndim: found %" PRIu32
                          ", expected 1..%d", where, nm, c->ndim, SMOE_MAX_DIMS);
    for (uint32_t d = 0; d < SMOE_MAX_DIMS; d++) {
        if (d < c->ndim && c->shape[d] == 0)
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field shape[%" PRIu32 "] is 0, "
                              "expected at least 1", where, nm, d);
        if (d >= c->ndim && c->shape[d] != 0)
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field shape[%" PRIu32 "] is %" PRIu64
                              ", expected 0 past ndim %" PRIu32, where, nm, d, c->shape[d],
                              c->ndim);
    }
    if (c->dtype == SMOE_DTYPE_MLX_PACKED) {
        uint32_t b = c->quant_bits;
        if (!(b == 2 || b == 3 || b == 4 || b == 5 || b == 6 || b == 8))
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field quant_bits: found %" PRIu32
                              ", expected 2, 3, 4, 5, 6 or 8", where, nm, b);
        if (c->quant_group == 0)
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field quant_group: found 0, expected "
                              "at least 1", where, nm);
    } else if (c->quant_group != 0 || c->quant_bits != 0) {
        return smoe__fail(SMOE_EFORMAT, "%s (%s): fields quant_group, quant_bits: found %"
                          PRIu32 ", %" PRIu32 ", expected 0 for dtype %s", where, nm,
                          c->quant_group, c->quant_bits, smoe_dtype_name(c->dtype));
    }
    if (c->offset % component_align != 0)
        return smoe__fail(SMOE_EALIGN, "%s (%s): field offset: %" PRIu64 " is not a multiple "
                          "of component_align %" PRIu32, where, nm, c->offset, component_align);
    if (c->nbytes == 0)
        return smoe__fail(SMOE_EFORMAT, "%s (%s): field nbytes is 0, expected at least 1",
                          where, nm);
    if (c->offset > UINT64_MAX - c->nbytes)
        return smoe__fail(SMOE_EOVERFLOW, "%s (%s): fields offset + nbytes: %" PRIu64 " + %"
                          PRIu64 " overflows", where, nm, c->offset, c->nbytes);
    if (strcmp(smoe_dtype_name(c->dtype), "?") != 0) {
        uint64_t want = smoe__dtype_bytes(c->dtype, c->shape, c->ndim, c->quant_group,
                                          c->quant_bits);
        char sh[128];
        shape_str(sh, sizeof sh, c);
        if (want == 0)
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field shape: %s cannot be stored as %s "
                              "(the innermost dimension must be a whole number of blocks or "
                              "packed groups, and the size must fit 64 bits)",
                              where, nm, sh, smoe_dtype_name(c->dtype));
        if (want != c->nbytes)
            return smoe__fail(SMOE_EFORMAT, "%s (%s): field nbytes: found %" PRIu64
                              ", expected %" PRIu64 " for %s %s", where, nm, c->nbytes, want,
                              smoe_dtype_name(c->dtype), sh);
    }
    return 0;
}

void smoe__component_put(unsigned char *p, const smoe_component *c)
{
    memcpy(p, c->name, SMOE_COMPONENT_NAME_MAX);
    smoe__put_le32(p + 64, c->dtype);
    smoe__put_le32(p + 68, c->ndim);
    for (int d = 0; d < SMOE_MAX_DIMS; d++)
        smoe__put_le64(p + 72 + 8 * d, c->shape[d]);
    smoe__put_le64(p + 104, c->offset);
    smoe__put_le64(p + 112, c->nbytes);
    smoe__put_le32(p + 120, c->quant_group);
    smoe__put_le32(p + 124, c->quant_bits);
}
