/*
 * replica.h - the copies of a packed vault that reads are spread over
 * (docs/replicas.md).
 *
 * Copy 0 is the vault itself, read through the workers' own descriptors;
 * copies 1 .. n-1 are opts.replicas, checked at open against the vault
 * (vault id, which is the checksum over the header, its declared size and
 * every table) and opened once per worker. A chunk goes to the copy whose
 * queue drains soonest by what each copy has delivered; a read that fails
 * is tried on every other copy before its error is reported, and a blob
 * that fails its checksum is read again from each copy alone
 * (blob_check.c); a copy that fails SMOE__REPLICA_STREAK reads in a row, or
 * whose own bytes fail SMOE__REPLICA_STREAK checksums in a row, is set
 * aside (logged) and tried again retry_ns later, one probing read at a
 * time.
 */
#ifndef SMOE_REPLICA_H
#define SMOE_REPLICA_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "smoe/smoe.h"
#include "io.h"
#include "vault/replica_state.h"

struct smoe_stream;
struct smoe__worker;

/*
 * Check and open opts->replicas, after the workers' descriptors of the
 * vault are open. SMOE_EINVAL: a bad list, or a copy that is not the
 * vault's (the message names it); SMOE_ENOTSUP: an index vault; the
 * loader's code for a copy that is not a valid vault; SMOE_ESYS,
 * SMOE_EDIRECTIO, SMOE_ENOMEM.
 */
int smoe__replicas_open(struct smoe_stream *s, const smoe_open_opts *o);
/* Close the copies' descriptors (after the workers are joined). */
void smoe__replicas_close(struct smoe_stream *s);

/* The boundary a direct read of fd cut short goes on from
 * (smoe__io_read_full_ex); 0 for buffered reads. */
uint32_t smoe__read_align(const struct smoe_stream *s, int fd);

/*
 * Read n bytes at off of the packed vault into buf from one copy, and on
 * failure from each other copy in turn. Hot path: no lock, no allocation;
 * besides the reads, the clock (vDSO) and a log line when a copy is set
 * aside or back in use.
 * sequential: the read continues this worker's own contiguous run (a
 * warm-up share): it goes first to the copy of the worker's id modulo the
 * copies, if that one is in use, so that each drive sees whole sequential
 * streams rather than alternate pieces of every stream.
 * @return 0, SMOE_ESHUTDOWN, or the last copy's error (*why says where).
 */
int smoe__replica_read(struct smoe_stream *s, const struct smoe__worker *wk, void *buf,
                       uint64_t n, uint64_t off, int sequential, smoe__io_fail *why);

/*
 * Read n bytes at off from copy i alone, counted as smoe__replica_read
 * counts a read there (a failure toward setting it aside). For a blob that
 * failed its check, read again copy by copy (blob_check.c): the failure
 * path, not the hot path, but still no lock and no allocation.
 * @return 0, SMOE_ESHUTDOWN, or the copy's error (*why says where, its copy
 * set).
 */
int smoe__replica_read_copy(struct smoe_stream *s, const struct smoe__worker *wk, uint32_t i,
                            void *buf, uint64_t n, uint64_t off, smoe__io_fail *why);
/*
 * The blob at off read from copy i alone passed its check (ok) or did not:
 * SMOE__REPLICA_STREAK failures in a row set the copy aside (logged), as
 * failed reads do; each counts as a failed read in its statistics.
 */
void smoe__replica_checked(struct smoe_stream *s, uint32_t i, int ok, uint64_t off);

/* Count a read of an index vault (one copy: its sources). */
void smoe__replica_count(struct smoe_stream *s, uint64_t bytes, int failed);

#endif
