/*
 * fuzz_model_hdr.c - the library's own readers of an index vault's source
 * headers (src/vault/model_gguf.c, model_st.c and the JSON scanner model_json.c,
 * through smoe__model_hdr_parse), on arbitrary input.
 *
 * Input: a little-endian u32 W, then the file's first bytes. W's top bit
 * chooses the kind (1 GGUF, 0 safetensors); its low 30 bits are how much
 * longer the file is than the input (tensor data is never read, so seeds
 * stop after the header). This is fuzz_gguf's and fuzz_safetensors' form,
 * so their seeds serve with the top bit set or clear.
 *
 * Oracle: besides the sanitizers, a parse that asks for more happens only
 * when the file has more; one that succeeds gives a header inside the
 * input, tensor spans non-empty, after the header, inside the file, sorted
 * and disjoint, each found by smoe__hdr_find; a failure says why.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "smoe_tier.h"

static void check(const smoe__model_hdr *h, size_t n, uint64_t file_size)
{
    if (h->header_end > n)
        abort();
    for (size_t k = 0; k < h->n; k++) {
        const smoe__tspan *t = &h->spans[k];
        if (t->begin >= t->end || t->begin < h->header_end || t->end > file_size)
            abort();
        if (k && t->begin < h->spans[k - 1].end)
            abort();
        if (smoe__hdr_find(h, t->begin, t->end - t->begin) != t ||
            smoe__hdr_find(h, t->end - 1, 1) != t)
            abort();
        if (smoe__hdr_find(h, t->begin, t->end - t->begin + 1)) /* one past its end */
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t w = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                 (uint32_t)data[3] << 24;
    const uint8_t *buf = data + 4;
    size_t n = size - 4;
    uint64_t file_size = (uint64_t)n + (w & 0x3fffffffu);
    uint32_t kind = w >> 31 ? SMOE__V2_KIND_GGUF : SMOE__V2_KIND_SAFETENSORS;
    smoe__model_hdr h;
    memset(&h, 0, sizeof h);
    int rc = smoe__model_hdr_parse(kind, buf, n, file_size, &h);
    if (rc == SMOE__HDR_MORE && n >= file_size)
        abort();
    if (rc == 0)
        check(&h, n, file_size);
    if (rc < 0 && !h.why[0])
        abort();
    smoe__model_hdr_free(&h);
    return 0;
}
