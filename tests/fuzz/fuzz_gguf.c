/*
 * fuzz_gguf.c - `smoe pack`'s GGUF reader (pack_gguf_parse) on arbitrary
 * input.
 *
 * Input: a little-endian u32 T, then the first bytes of a GGUF file that
 * is T bytes longer than them (the tensor data is never read, so seeds stop
 * after the tensor infos and the reader's "need more" path is reachable).
 *
 * Oracle: besides the sanitizers, a file that parses gives tensors with
 * non-empty names, at most 4 dimensions, ranges inside the file and not
 * overlapping, and a failed parse leaves no tensor behind; a parse that
 * asks for more bytes happens only when the file has them.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t tail = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                    (uint32_t)data[3] << 24;
    const uint8_t *buf = data + 4;
    size_t n = size - 4;
    uint64_t file_size = (uint64_t)n + tail;
    pack_source s;
    pack_source_init(&s);
    int rc = pack_gguf_parse(buf, n, file_size, "fuzz.gguf", 0, &s);
    if (rc == PACK_NEED_MORE && n >= file_size)
        abort();
    if (rc == 0) {
        for (size_t i = 0; i < s.n_tensors; i++) {
            const pack_tensor *t = &s.tensors[i];
            if (!t->name || !t->name[0] || t->ndim > 4 || t->offset > file_size ||
                t->nbytes > file_size - t->offset)
                abort();
            for (size_t j = 0; j < i; j++) {
                const pack_tensor *u = &s.tensors[j];
                if (t->nbytes && u->nbytes && t->offset < u->offset + u->nbytes &&
                    u->offset < t->offset + t->nbytes)
                    abort();
            }
        }
    } else if (rc < 0 && s.n_tensors) {
        abort(); /* a failed parse leaves no tensors behind */
    }
    pack_source_free(&s);
    return 0;
}
