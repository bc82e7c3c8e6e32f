/*
 * ring.c - the ring's memory: one 16 KiB-aligned region holding every
 * slot (platform/region.h), faulted in at open so its cost comes there and
 * not mid-token, and the dense arrays of slot words, ticks, errors and
 * their causes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "internal.h"

/* Map and fault in the region of r->nslots slots of r->stride bytes. */
static int map_slots(smoe__ring *r, int lock, int shareable)
{
    const uint32_t nslots = r->nslots;
    const uint64_t stride = r->stride;
    int e = smoe__alloc_refused() ? -ENOMEM
            : shareable           ? smoe__region_map_shared(&r->mem, r->len)
                                  : smoe__region_map(&r->mem, r->len);
    if (e == -ENOTSUP)
        return smoe__fail(SMOE_ENOTSUP, "ring: SMOE_OPEN_SHAREABLE needs a memory file "
                          "(memfd_create, shm_open), which this system's build of "
                          "libsmoe_stream does not offer");
    if (e < 0)
        return smoe__fail(shareable && e != -ENOMEM ? SMOE_ESYS : SMOE_ENOMEM,
                          "ring: cannot map %llu bytes (%u slots x %llu): %s",
                          (unsigned long long)r->len, nslots, (unsigned long long)stride,
                          strerror(-e));
    r->base = r->mem.base;
    if (smoe__region_populate(&r->mem) < 0)
        return smoe__fail(SMOE_ENOMEM, "ring: cannot fault in %llu bytes (%u slots x %llu): "
                          "%s", (unsigned long long)(uint64_t)nslots * stride, nslots,
                          (unsigned long long)stride, strerror(ENOMEM));
    if (lock && (e = smoe__region_lock(&r->mem)) < 0)
        return smoe__fail(SMOE_ENOMEM, "ring: mlock of %llu bytes failed: %s",
                          (unsigned long long)(uint64_t)nslots * stride, strerror(-e));
    return 0;
}

int smoe__ring_init(smoe__ring *r, uint32_t nslots, uint64_t stride, int lock, int shareable)
{
    memset(r, 0, sizeof *r);
    if (nslots == 0 || stride == 0 || stride % SMOE__ALIGN)
        return smoe__fail(SMOE_EINVAL, "ring: %u slots of %llu bytes", nslots,
                          (unsigned long long)stride);
    if (stride > UINT64_MAX / nslots - SMOE__ALIGN)
        return smoe__fail(SMOE_ENOMEM, "ring: %u slots of %llu bytes overflow", nslots,
                          (unsigned long long)stride);
    r->nslots = nslots;
    r->stride = stride;
    r->len = (uint64_t)nslots * stride;
    if (r->len > SIZE_MAX - SMOE__ALIGN)
        return smoe__fail(SMOE_ENOMEM, "ring: %llu bytes do not fit the address space",
                          (unsigned long long)r->len);
    int e = map_slots(r, lock, shareable);
    if (e < 0) {
        smoe__ring_free(r);
        return e;
    }

    r->word = smoe__calloc(nslots, sizeof *r->word);
    r->tick = smoe__calloc(nslots, sizeof *r->tick);
    r->err = smoe__calloc(nslots, sizeof *r->err);
    r->fault = smoe__calloc(nslots, sizeof *r->fault);
    r->chunk_next = smoe__calloc(nslots, sizeof *r->chunk_next);
    r->chunk_left = smoe__calloc(nslots, sizeof *r->chunk_left);
    r->t_queued = smoe__calloc(nslots, sizeof *r->t_queued);
    if (!r->word || !r->tick || !r->err || !r->fault || !r->chunk_next || !r->chunk_left ||
        !r->t_queued) {
        smoe__ring_free(r);
        return smoe__fail(SMOE_ENOMEM, "ring: out of memory for %u slot words", nslots);
    }
    for (uint32_t i = 0; i < nslots; i++) {
        atomic_init(&r->tick[i], 0);
        atomic_init(&r->t_queued[i], 0);
    }
    smoe__slots_init(r);
    return 0;
}

void smoe__ring_free(smoe__ring *r)
{
    smoe__region_unmap(&r->mem);
    free(r->word);
    free(r->tick);
    free(r->err);
    free(r->fault);
    free(r->chunk_next);
    free(r->chunk_left);
    free(r->t_queued);
    memset(r, 0, sizeof *r);
}
