/*
 * source.h - an index vault's source files: found beside the vault, checked
 * against what the vault recorded, and opened for the workers
 * (docs/decisions.md, "Source descriptors").
 */
#ifndef SMOE_SOURCE_H
#define SMOE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "vault/vault.h"
#include "vault/source_fds.h"

/* What a source file is now, against the vault's record of it. */
typedef struct smoe__source_state {
    char path[4096];   /* the vault's directory joined with the recorded name */
    int present;       /* it could be opened */
    int size_ok, header_ok, mtime_ok;
    int kind_ok;       /* of the kind recorded, its header exactly header_bytes */
    int extents_ok;    /* all checks passed: every extent inside one tensor */
    uint64_t size;     /* now */
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t dev, ino;
    uint64_t header_hash; /* computed now (when present and the size matches) */
} smoe__source_state;

/*
 * Check source i of index vault v through io: open it (without blocking,
 * following symlinks), a regular file, its size as recorded, of the kind
 * recorded (its own header parsed: GGUF or safetensors), header_bytes
 * exactly its header, the hash of those bytes as recorded (also for a
 * vault without per-expert hashes), and every extent of it inside the
 * data of one tensor its header declares (docs/security.md). A
 * modification time that differs alone is not a failure (st->mtime_ok 0).
 * The header's pages are dropped from the page cache after hashing.
 * @return 0 (*st filled); SMOE_ESOURCE (missing, size or header changed,
 * not of the recorded kind, header_bytes not its header: the message
 * naming the vault, the source's index, name and path, the field and
 * what was expected); SMOE_ERANGE (an extent in no one tensor);
 * SMOE_EINVAL (not a regular file); SMOE_ESYS, SMOE_EIO, SMOE_ENOMEM. *st
 * is filled as far as the check got.
 */
int smoe__source_check(const smoe__vault *v, uint32_t i, const smoe__io *io,
                       smoe__source_state *st);

struct smoe__model_hdr;
/* smoe__source_check's parts (source_hdr.c): source i's header read
 * through fd and checked (kind, header_bytes, hash) into *h; then its
 * extents against h's tensors. */
int smoe__source_header(const smoe__vault *v, uint32_t i, const smoe__io *io, int fd,
                        smoe__source_state *st, struct smoe__model_hdr *h);
int smoe__source_extents(const smoe__vault *v, uint32_t i, const struct smoe__model_hdr *h,
                         const char *path);
/* The path of source i: the vault's directory and the recorded name, into
 * buf (n bytes). @return 0 or SMOE_EINVAL when it does not fit. */
int smoe__source_path(const smoe__vault *v, uint32_t i, char *buf, size_t n);

/* Descriptors per source for nworkers workers and n sources under a
 * descriptor budget (docs/decisions.md). */
uint32_t smoe__source_sets(uint32_t nworkers, uint32_t n, uint64_t budget);

struct smoe_stream;
/*
 * smoe_open's part for an index vault (nothing for a packed one): check
 * every source (a changed modification time is a warning through the log
 * callback), open the workers' descriptors, direct unless refused and
 * allowed, settle the read alignment and plan the slots at it, and, with
 * verification on, the workers' hash states. Sets s->io_mode.
 */
int smoe__sources_open(struct smoe_stream *s);
void smoe__sources_close(struct smoe_stream *s);

#endif
