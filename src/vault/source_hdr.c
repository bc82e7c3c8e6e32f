/*
 * source_hdr.c - a source file of an index vault against what the vault
 * says of it, beyond its size (source.h): the file is of the kind the
 * vault records (GGUF or safetensors, by its own header, not its name),
 * the recorded header_bytes are exactly its header's extent and their
 * XXH3 is the recorded one, and every extent of the source lies inside
 * the data of one tensor its header declares (docs/security.md).
 *
 * The header is read in growing chunks from 64 KiB, never past the
 * larger of that and the recorded header_bytes: a vault cannot make the
 * library hold more of a file than its own header or 64 KiB, nor more
 * than the record.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "alloc.h"
#include "error.h"
#include "vault/model_hdr.h"
#include "vault/source.h"

/* The first read of a header; doubled until the header is whole. */
#define FIRST_READ (1u << 16)

#define SRC_FMT "%s: source %" PRIu32 " '%s' (%s): "

static const char *kind_name(uint32_t kind)
{
    return kind == SMOE__V2_KIND_GGUF ? "GGUF" : "safetensors";
}

static const char *header_words(uint32_t kind)
{
    return kind == SMOE__V2_KIND_GGUF ? "its header, key-values and tensor infos"
                                      : "its 8-byte length and JSON";
}

/* Bytes [*have, want) of the file into *buf (grown to want). */
static int read_more(const smoe__vault *v, uint32_t i, const smoe__io *io, int fd,
                     const char *path, unsigned char **buf, size_t *have, size_t want)
{
    unsigned char *b = smoe__realloc(*buf, want);
    if (!b)
        return smoe__fail(SMOE_ENOMEM, "%s: no memory to check the header of source %" PRIu32,
                          v->path, i);
    *buf = b;
    int err = 0;
    int rc = smoe__io_read_full(io, fd, b + *have, want - *have, *have, NULL, &err);
    if (rc < 0)
        return smoe__fail(rc == SMOE_ETRUNC ? SMOE_ESOURCE : rc, SRC_FMT "reading its header "
                          "(%zu bytes at %zu) failed: %s", v->path, i, v->sources[i].name, path,
                          want - *have, *have,
                          rc == SMOE_ETRUNC ? "the file ends first" : strerror(err));
    *have = want;
    return 0;
}

/* The recorded header_bytes against the header's extent, known so far. */
static int extent_mismatch(const smoe__vault *v, uint32_t i, const char *path,
                           const smoe__model_hdr *h, int whole)
{
    const smoe__vault_source *s = &v->sources[i];
    if (whole || h->header_end)
        return smoe__fail(SMOE_ESOURCE, SRC_FMT "field header_bytes: recorded %" PRIu64 ", but "
                          "the file's header (%s) is %" PRIu64 " bytes; expected exactly its "
                          "header (changed since it was indexed, or not the file the vault "
                          "names)", v->path, i, s->name, path, s->header_bytes,
                          header_words(s->kind), h->header_end);
    return smoe__fail(SMOE_ESOURCE, SRC_FMT "field header_bytes: recorded %" PRIu64 ", but the "
                      "file's header (%s) runs past them; expected exactly its header "
                      "(changed since it was indexed, or not the file the vault names)",
                      v->path, i, s->name, path, s->header_bytes, header_words(s->kind));
}

/* Read and parse source i's header through fd into *h, no further than
 * the larger of 64 KiB and the recorded header_bytes; *buf holds what was
 * read. */
static int parse_header(const smoe__vault *v, uint32_t i, const smoe__io *io, int fd,
                        const char *path, unsigned char **buf, smoe__model_hdr *h)
{
    const smoe__vault_source *s = &v->sources[i];
    /* Enough to tell the kind even when the record claims a tiny header. */
    const size_t first = s->size < FIRST_READ ? (size_t)s->size : FIRST_READ;
    const size_t limit = s->header_bytes > first ? (size_t)s->header_bytes : first;
    size_t have = 0, want = first;
    for (;;) {
        int rc = read_more(v, i, io, fd, path, buf, &have, want);
        if (rc < 0)
            return rc;
        smoe__model_hdr_free(h);
        rc = smoe__model_hdr_parse(s->kind, *buf, have, s->size, h);
        if (rc == 0)
            return h->header_end == s->header_bytes ? 0 : extent_mismatch(v, i, path, h, 1);
        if (rc == SMOE_ENOMEM)
            return smoe__fail(rc, SRC_FMT "checking its header: %s", v->path, i, s->name, path,
                              h->why);
        if (rc < 0)
            return smoe__fail(SMOE_ESOURCE, SRC_FMT "not a %s file, "
                              "as the vault's field kind (%" PRIu32 ") says: %s", v->path, i,
                              s->name, path, kind_name(s->kind), s->kind, h->why);
        if ((h->header_end && h->header_end != s->header_bytes) || have == limit)
            return extent_mismatch(v, i, path, h, 0);
        /* A safetensors file has said its header's size: read just that. */
        want = h->header_end ? (size_t)h->header_end : have * 2 < limit ? have * 2 : limit;
    }
}

int smoe__source_header(const smoe__vault *v, uint32_t i, const smoe__io *io, int fd,
                        smoe__source_state *st, smoe__model_hdr *h)
{
    const smoe__vault_source *s = &v->sources[i];
    unsigned char *buf = NULL;
    int rc = parse_header(v, i, io, fd, st->path, &buf, h);
    st->kind_ok = rc == 0;
    if (rc == 0) {
        st->header_hash = XXH3_64bits(buf, (size_t)s->header_bytes);
        st->header_ok = st->header_hash == s->header_hash;
        if (!st->header_ok)
            rc = smoe__fail(SMOE_ESOURCE, SRC_FMT "changed since it was indexed: the XXH3 of "
                            "its header (the first %" PRIu64 " bytes) is %016" PRIx64
                            ", recorded %016" PRIx64 " (index it again)", v->path, i, s->name,
                            st->path, s->header_bytes, st->header_hash, s->header_hash);
    }
    if (io->drop_cache) /* what parse_header may have read */
        io->drop_cache(io, fd, 0, s->header_bytes > FIRST_READ ? s->header_bytes : FIRST_READ);
    free(buf);
    return rc;
}

int smoe__source_extents(const smoe__vault *v, uint32_t i, const smoe__model_hdr *h,
                         const char *path)
{
    const smoe__vault_source *s = &v->sources[i];
    for (uint32_t k = v->xt_source_first[i]; k < v->xt_source_first[i + 1]; k++) {
        const uint32_t j = v->xt_by_source[k];
        const smoe__vault_xt *x = &v->extents[j];
        if (smoe__hdr_find(h, x->offset, x->length))
            continue;
        return smoe__fail(SMOE_ERANGE, "%s: extent %" PRIu32 " (source %" PRIu32 " '%s' (%s)): "
                          "fields offset, length: [%" PRIu64 ", %" PRIu64 ") is not inside the "
                          "data of one tensor the file's header declares (%zu tensors); "
                          "expected a tensor's bytes", v->path, j, i, s->name, path, x->offset,
                          x->offset + x->length, h->n);
    }
    return 0;
}
