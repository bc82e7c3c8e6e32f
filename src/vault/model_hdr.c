/*
 * model_hdr.c - what both source header parsers share (model_hdr.h): the
 * list of tensor data spans, its ordering and overlap check, and the
 * lookup of the span holding an extent.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "alloc.h"
#include "vault/model_hdr.h"

int smoe__hdr_fail(smoe__model_hdr *h, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->why, sizeof h->why, fmt, ap);
    va_end(ap);
    return code;
}

int smoe__hdr_add(smoe__model_hdr *h, uint64_t begin, uint64_t end)
{
    if (end == begin)
        return 0; /* an empty tensor holds no byte */
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        smoe__tspan *p = smoe__realloc(h->spans, cap * sizeof *p);
        if (!p)
            return smoe__hdr_fail(h, SMOE_ENOMEM, "no memory for %zu tensors", cap);
        h->spans = p;
        h->cap = cap;
    }
    h->spans[h->n++] = (smoe__tspan){begin, end};
    return 0;
}

static int by_begin(const void *a, const void *b)
{
    const smoe__tspan *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

int smoe__hdr_finish(smoe__model_hdr *h)
{
    if (h->n > 1)
        qsort(h->spans, h->n, sizeof *h->spans, by_begin);
    for (size_t k = 1; k < h->n; k++)
        if (h->spans[k].begin < h->spans[k - 1].end)
            return smoe__hdr_fail(h, SMOE_EOVERLAP, "the data of two tensors overlap: [%"
                                  PRIu64 ", %" PRIu64 ") and [%" PRIu64 ", %" PRIu64 ")",
                                  h->spans[k - 1].begin, h->spans[k - 1].end,
                                  h->spans[k].begin, h->spans[k].end);
    return 0;
}

int smoe__hdr_tiled(smoe__model_hdr *h, uint64_t file_size)
{
    const uint64_t pad = h->pad ? h->pad : 1;
    uint64_t at = h->data_at; /* where the next tensor's data must begin */
    for (size_t k = 0; k < h->n; k++) {
        const smoe__tspan *t = &h->spans[k];
        if (t->begin != at)
            return smoe__hdr_fail(h, SMOE_EFORMAT, "bytes [%" PRIu64 ", %" PRIu64 ") are no "
                                  "tensor's data: expected each tensor's data right after the "
                                  "previous one's (padded to %" PRIu64 "), as the format's "
                                  "own reader requires", at, t->begin, pad);
        at = t->end > UINT64_MAX - (pad - 1) ? UINT64_MAX : (t->end + pad - 1) / pad * pad;
    }
    if (h->to_eof && at != file_size)
        return smoe__hdr_fail(h, SMOE_EFORMAT, "bytes [%" PRIu64 ", %" PRIu64 ") after the "
                              "last tensor are no tensor's data: expected the data to end the "
                              "file, as the format's own reader requires", at, file_size);
    return 0;
}

const smoe__tspan *smoe__hdr_find(const smoe__model_hdr *h, uint64_t off, uint64_t len)
{
    size_t lo = 0, hi = h->n; /* the first span beginning past off is at lo */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->spans[mid].begin <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const smoe__tspan *t = &h->spans[lo - 1];
    return off < t->end && len <= t->end - off ? t : NULL;
}

void smoe__model_hdr_free(smoe__model_hdr *h)
{
    free(h->spans);
    memset(h, 0, sizeof *h);
}
