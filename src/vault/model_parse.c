/*
 * model_parse.c - a source file's header parsed as the kind the vault
 * records (model_hdr.h): the GGUF or the safetensors parser, then the
 * tensors' spans ordered and checked against each other and against the
 * data section they must tile.
 */
#include "vault/model_hdr.h"
#include "vault/vault.h"

int smoe__model_hdr_parse(uint32_t kind, const uint8_t *b, size_t n, uint64_t file_size,
                          smoe__model_hdr *h)
{
    if (n > file_size)
        n = (size_t)file_size;
    int rc = kind == SMOE__V2_KIND_GGUF ? smoe__gguf_hdr_parse(b, n, file_size, h)
                                        : smoe__st_hdr_parse(b, n, file_size, h);
    if (rc == 0)
        rc = smoe__hdr_finish(h);
    return rc == 0 ? smoe__hdr_tiled(h, file_size) : rc;
}
