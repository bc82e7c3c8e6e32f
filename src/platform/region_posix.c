/*
 * region_posix.c - the ring's memory through mmap (region.h), with the
 * advice a system has: transparent huge pages and MADV_POPULATE_WRITE on
 * Linux, a write to every page elsewhere. A shareable region maps a memory
 * file (memfile.h) over an aligned reservation.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfile.h"
#include "region.h"

#define SMOE__REGION_ALIGN 16384u
/* Transparent huge page size on x86-64 and arm64 Linux. */
#define SMOE__HUGE_ALIGN (2u << 20)

/* Over-allocate and align the base: 16 KiB always; 2 MiB for a region of
 * that size or more where huge pages can back it (fewer pages for direct
 * I/O to pin per read, fewer TLB misses). */
static uint64_t region_align(uint64_t len)
{
#if defined(MADV_HUGEPAGE)
    if (len >= SMOE__HUGE_ALIGN)
        return SMOE__HUGE_ALIGN;
#endif
    (void)len;
    return SMOE__REGION_ALIGN;
}

/* Reserve len + align bytes with protection prot and set g's base. */
static int reserve(smoe__region *g, uint64_t len, int prot)
{
    uint64_t align = region_align(len);
    void *p = mmap(NULL, len + align, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    g->addr = p;
    g->map_len = len + align;
    g->len = len;
    g->base = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    return 0;
}

static void advise_huge(smoe__region *g)
{
#if defined(MADV_HUGEPAGE)
    if (region_align(g->len) == SMOE__HUGE_ALIGN)
        madvise(g->base, g->len, MADV_HUGEPAGE); /* advice only: failure is harmless */
#else
    (void)g;
#endif
}

int smoe__region_map(smoe__region *g, uint64_t len)
{
    memset(g, 0, sizeof *g);
    int e = reserve(g, len, PROT_READ | PROT_WRITE);
    if (e < 0)
        return e;
    advise_huge(g);
    return 0;
}

int smoe__region_map_shared(smoe__region *g, uint64_t len)
{
    memset(g, 0, sizeof *g);
    int fd = smoe__memfile_open(len);
    if (fd < 0)
        return fd;
    /* The reservation gives an aligned base; the file's pages replace it
     * there, and the unmap of the whole reservation removes both. */
    int e = reserve(g, len, PROT_NONE);
    if (e == 0 && mmap(g->base, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
                      MAP_FAILED) {
        e = -errno;
        munmap(g->addr, g->map_len);
    }
    if (e < 0) {
        close(fd);
        memset(g, 0, sizeof *g);
        return e;
    }
    g->shared = 1;
    g->fd = fd;
    advise_huge(g); /* shmem takes it where the system allows */
    return 0;
}

int smoe__region_populate(smoe__region *g)
{
#if defined(MADV_POPULATE_WRITE)
    if (madvise(g->base, g->len, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno == ENOMEM) /* touching the pages would meet the OOM killer */
        return -ENOMEM;
#endif
    for (uint64_t off = 0; off < g->len; off += 4096)
        g->base[off] = 0;
    return 0;
}

int smoe__region_lock(smoe__region *g)
{
    if (mlock(g->base, g->len) < 0)
        return -errno;
    g->locked = 1;
    return 0;
}

void smoe__region_unmap(smoe__region *g)
{
    if (g->addr) {
        if (g->locked)
            munlock(g->base, g->len);
        munmap(g->addr, g->map_len);
    }
    if (g->shared)
        close(g->fd);
    memset(g, 0, sizeof *g);
}
