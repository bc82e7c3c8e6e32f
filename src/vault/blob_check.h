/*
 * blob_check.h - checking a landed blob against its hash and its padding,
 * and with replicas, finding a copy whose own bytes pass (blob_check.c).
 */
#ifndef SMOE_BLOB_CHECK_H
#define SMOE_BLOB_CHECK_H

#include <stdint.h>

#include "vault/vault.h"

struct smoe_stream;
struct smoe__worker;

/*
 * Check slot v's blob, entry e of key, every chunk of its load (arming)
 * landed and read by nobody else: its XXH3 against e->hash and, for a
 * packed vault, its padding zero. With replicas, a blob that fails is read
 * again into the slot from each copy alone: the first copy whose bytes pass
 * is kept, and each copy's verdict counts toward setting it aside
 * (smoe__replica_checked). On failure the slot's fault record says which
 * copies did not pass.
 * Called by the worker that finishes the load; no lock, no allocation (the
 * failure path reads the copies again).
 * @return 0, SMOE_ECHECKSUM, or SMOE_ESHUTDOWN (stopped while reading again).
 */
int smoe__blob_check(struct smoe_stream *s, const struct smoe__worker *wk, uint32_t v,
                     uint32_t key, uint32_t arming, const smoe__vault_entry *e);

#endif
