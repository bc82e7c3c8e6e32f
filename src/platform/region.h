/*
 * region.h - the ring's memory: one anonymous private mapping, or with
 * SMOE_OPEN_SHAREABLE a shared mapping of a memory file (memfile.h),
 * aligned, faulted in at open and optionally locked (region_posix.c: mmap,
 * madvise, mlock).
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
    int shared;    /* mapped from a memory file: fd is open */
    int fd;        /* the memory file; base is at offset 0 of it */
} smoe__region;

/*
 * Map len bytes (len <= SIZE_MAX - 16 KiB) at a 16 KiB boundary; at 2 MiB
 * where transparent huge pages can back a region that large (Linux).
 * @return 0, or -errno of the mapping (g is left empty).
 */
int smoe__region_map(smoe__region *g, uint64_t len);
/*
 * The same, backed by a new memory file of len bytes whose descriptor g->fd
 * maps the region's pages again (MAP_SHARED, offset 0 at g->base).
 * @return 0, or -errno (-ENOTSUP: the system has no memory file).
 */
int smoe__region_map_shared(smoe__region *g, uint64_t len);
/*
 * Fault every page in now, so that the cost comes at open and not
 * mid-token. @return 0, or -ENOMEM when the system says that touching the
 * pages would exhaust memory (the region stays mapped).
 */
int smoe__region_populate(smoe__region *g);
/* Lock the region in memory. @return 0 or -errno. */
int smoe__region_lock(smoe__region *g);
/* Unlock, unmap and close the memory file; g is left empty. An empty g is
 * fine. */
void smoe__region_unmap(smoe__region *g);

#endif
