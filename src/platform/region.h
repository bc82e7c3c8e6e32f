/*
 * region.h - the ring's memory: one anonymous private mapping, aligned,
 * faulted in at open and optionally locked (region_posix.c: mmap, madvise,
 * mlock).
 */
#ifndef SMOE_REGION_H
#define SMOE_REGION_H

#include <stdint.h>

typedef struct smoe__region {
    uint8_t *base; /* the region: len bytes, aligned */
    uint64_t len;
    void *addr;    /* the mapping, for unmapping */
    uint64_t map_len;
    int locked;
} smoe__region;

/*
 * Map len bytes (len <= SIZE_MAX - 16 KiB) at a 16 KiB boundary; at 2 MiB
 * where transparent huge pages can back a region that large (Linux).
 * @return 0, or -errno of the mapping (g is left empty).
 */
int smoe__region_map(smoe__region *g, uint64_t len);
/*
 * Fault every page in now, so that the cost comes at open and not
 * mid-token. @return 0, or -ENOMEM when the system says that touching the
 * pages would exhaust memory (the region stays mapped).
 */
int smoe__region_populate(smoe__region *g);
/* Lock the region in memory. @return 0 or -errno. */
int smoe__region_lock(smoe__region *g);
/* Unlock and unmap; g is left empty. An empty g is fine. */
void smoe__region_unmap(smoe__region *g);

#endif
