/*
 * fuzz_safetensors.c - `smoe pack`'s safetensors readers on arbitrary input:
 * the file header (pack_st_parse_header), and the two JSON documents that
 * come with sharded checkpoints (pack_st_parse_index for
 * model.safetensors.index.json, pack_config_parse for config.json).
 *
 * Input: a little-endian u32 W, then the bytes. W's top two bits choose the
 * reader: 0 or 1, a safetensors file whose first bytes are the input and
 * which is (W & 0x3fffffff) bytes longer than them (the tensor data is never
 * read, so seeds stop after the header); 2, an index document; 3, a
 * config.json.
 *
 * Oracle: besides the sanitizers, a header that parses gives tensors with
 * non-empty names, ranges inside the file's data section, not overlapping;
 * a parse that asks for more bytes happens only when the file has them.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "pack.h"

static void check_tensors(const pack_source *s, uint64_t data_start, uint64_t file_size)
{
    for (size_t i = 0; i < s->n_tensors; i++) {
        const pack_tensor *t = &s->tensors[i];
        if (!t->name || !t->name[0] || t->ndim > PACK_MAX_DIMS || t->offset < data_start ||
            t->offset > file_size || t->nbytes > file_size - t->offset)
            abort();
        for (size_t j = 0; j < i; j++) {
            const pack_tensor *u = &s->tensors[j];
            if (t->nbytes && u->nbytes && t->offset < u->offset + u->nbytes &&
                u->offset < t->offset + t->nbytes)
                abort();
        }
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
    switch (w >> 30) {
    case 2: {
        /* The parsers take text with its length: give them an exact copy. */
        char *text = malloc(n ? n : 1);
        if (!text)
            return 0;
        memcpy(text, buf, n);
        pack_st_index ix;
        memset(&ix, 0, sizeof ix);
        if (pack_st_parse_index(text, n, "fuzz.index.json", &ix) == 0) {
            for (size_t i = 0; i < ix.n_names; i++)
                if (ix.shard_of[i] >= ix.n_shards || !ix.names[i])
                    abort();
        }
        pack_st_index_free(&ix);
        free(text);
        return 0;
    }
    case 3: {
        char *text = malloc(n ? n : 1);
        if (!text)
            return 0;
        memcpy(text, buf, n);
        pack_meta m;
        memset(&m, 0, sizeof m);
        pack_config_parse(text, n, "fuzz.config.json", &m);
        free(m.arch);
        free(m.model);
        free(m.experts_from);
        free(text);
        return 0;
    }
    default:
        break;
    }
    uint64_t file_size = (uint64_t)n + (w & 0x3fffffffu);
    pack_source s;
    pack_source_init(&s);
    int rc = pack_st_parse_header(buf, n, file_size, "fuzz.safetensors", 0, &s);
    if (rc == PACK_NEED_MORE && n >= file_size)
        abort();
    if (rc == 0) {
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = hlen << 8 | buf[i];
        check_tensors(&s, 8 + hlen, file_size);
    }
    pack_source_free(&s);
    return 0;
}
