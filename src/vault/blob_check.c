/*
 * blob_check.c - verification of a landed blob (blob_check.h).
 *
 * A packed vault's chunks may come from several copies, so a blob that
 * fails its check says nothing of which copy is at fault. With replicas,
 * it is then read again whole from every copy alone, each copy's bytes
 * checked: the copies whose bytes fail are the ones at fault (each such
 * verdict counts toward setting the copy aside, as a failed read does),
 * and the slot keeps the bytes of a copy that passed, so that one intact
 * copy keeps every claim served. Every copy is read, not only until one
 * passes: a copy with wrong bytes is blamed only by its own, and must be
 * blamed to be set aside.
 */
#include <string.h>

#include "vault/blob_check.h"
#include "vault/chunk_read.h"
#include "vault/extent.h"
#include "internal.h"
#include "vault/replica.h"

enum { CHECK_OK = 0, CHECK_HASH, CHECK_PADDING };

/* Offset in the blob of the first byte of its padding, data[size, padded),
 * that is not zero; UINT64_MAX when all are. */
static uint64_t padding_dirt(const uint8_t *data, uint64_t size, uint64_t padded)
{
    const uint8_t *t = data + size;
    const size_t n = (size_t)(padded - size);
    /* every byte equal to the next and the first zero: one memcmp */
    if (n == 0 || (t[0] == 0 && memcmp(t, t + 1, n - 1) == 0))
        return UINT64_MAX;
    size_t i = 0;
    while (t[i] == 0)
        i++;
    return size + i;
}

/* The slot's bytes against the entry: CHECK_*; *dirt, the first byte of
 * padding that is not zero. */
static int check_bytes(struct smoe_stream *s, const smoe__worker *wk, uint32_t key,
                       const uint8_t *data, const smoe__vault_entry *e, uint64_t *dirt)
{
    if (smoe__chunk_hash(s, wk, key, data) != e->hash)
        return CHECK_HASH;
    /* The format promises zero padding (`smoe verify` checks it too):
     * bytes there mean the blob is not what was written. */
    if (!s->src.n && (*dirt = padding_dirt(data, e->size, e->padded)) != UINT64_MAX)
        return CHECK_PADDING;
    return CHECK_OK;
}

/* Read the blob from copy i alone into the slot and check it: CHECK_*, or
 * a negative code when the read failed (counted by the read). */
static int check_copy(struct smoe_stream *s, const smoe__worker *wk, uint32_t i, uint8_t *data,
                      uint32_t key, const smoe__vault_entry *e, uint64_t *dirt)
{
    smoe__io_fail why;
    int err = smoe__replica_read_copy(s, wk, i, data, e->padded, e->offset, &why);
    if (err)
        return err;
    int r = check_bytes(s, wk, key, data, e, dirt);
    smoe__replica_checked(s, i, r == CHECK_OK, e->offset);
    return r;
}

/* Every copy alone (the file comment): CHECK_OK with the slot
 * holding a copy that passed, else how the last one failed, *bad the
 * copies whose bytes failed; SMOE_ESHUTDOWN when stopped. */
static int recheck_copies(struct smoe_stream *s, const smoe__worker *wk, uint8_t *data,
                          uint32_t key, const smoe__vault_entry *e, uint32_t *bad,
                          uint64_t *dirt)
{
    uint32_t good = UINT32_MAX;
    int worst = CHECK_HASH, held_ok = 0;
    *bad = 0;
    for (uint32_t i = 0; i < s->rep.n; i++) {
        int r = check_copy(s, wk, i, data, key, e, dirt);
        if (r == SMOE_ESHUTDOWN)
            return r;
        held_ok = r == CHECK_OK; /* a failed read leaves the slot's bytes unknown */
        if (r == CHECK_OK)
            good = i;
        else if (r == CHECK_HASH || r == CHECK_PADDING) {
            *bad |= 1u << i;
            worst = r;
        }
    }
    if (good == UINT32_MAX)
        return worst;
    if (held_ok)
        return CHECK_OK;
    /* a later copy's bytes are in the slot: the good one's again */
    int r = check_copy(s, wk, good, data, key, e, dirt);
    return r == SMOE_ESHUTDOWN ? r : r == CHECK_OK ? CHECK_OK : worst;
}

int smoe__blob_check(struct smoe_stream *s, const smoe__worker *wk, uint32_t v, uint32_t key,
                     uint32_t arming, const smoe__vault_entry *e)
{
    uint8_t *data = smoe__slot_data(&s->ring, v);
    uint64_t dirt = UINT64_MAX;
    uint32_t bad = 0;
    int r = check_bytes(s, wk, key, data, e, &dirt);
    if (r != CHECK_OK && s->rep.n > 1 && !s->src.n)
        r = recheck_copies(s, wk, data, key, e, &bad, &dirt);
    if (r == CHECK_OK)
        return 0;
    if (r == SMOE_ESHUTDOWN) {
        smoe__slot_note_fault(s, v, arming, SMOE__FAULT_NONE, NULL);
        return r;
    }
    const smoe__io_fail at = {r == CHECK_PADDING ? e->offset + dirt : e->offset, 0, 0, 0, 0,
                              bad};
    smoe__slot_note_fault(s, v, arming, r == CHECK_PADDING ? SMOE__FAULT_PADDING
                                                           : SMOE__FAULT_CHECKSUM, &at);
    return SMOE_ECHECKSUM;
}
