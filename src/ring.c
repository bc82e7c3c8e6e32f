/*
 * ring.c - the ring's memory: one 16 KiB-aligned region holding every
 * slot, faulted in at open so its cost comes there and not mid-token, and
 * the dense arrays of slot words, ticks, errors and their causes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Transparent huge page size on x86-64 and arm64 Linux. */
#define SMOE__HUGE_ALIGN (2u << 20)

#include "alloc.h"
#include "error.h"
#include "internal.h"

int smoe__ring_init(smoe__ring *r, uint32_t nslots, uint64_t stride, int lock)
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

    /* Over-allocate and align the base: 16 KiB always; 2 MiB for a ring of
     * that size or more on Linux, so transparent huge pages can back it
     * (fewer pages for direct I/O to pin per read, fewer TLB misses). */
    uint64_t align = SMOE__ALIGN;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (r->len >= SMOE__HUGE_ALIGN)
        align = SMOE__HUGE_ALIGN;
#endif
    r->map_len = r->len + align;
    void *p = MAP_FAILED;
    if (smoe__alloc_refused())
        errno = ENOMEM;
    else
        p = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return smoe__fail(SMOE_ENOMEM, "ring: cannot map %llu bytes (%u slots x %llu): %s",
                          (unsigned long long)r->len, nslots, (unsigned long long)stride,
                          strerror(errno));
    r->map_addr = p;
    uintptr_t base = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    r->base = (uint8_t *)base;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == SMOE__HUGE_ALIGN)
        madvise(r->base, r->len, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    /* Fault every page in now, so the cost comes at open, not mid-token. */
    int populated = 0;
#if defined(MADV_POPULATE_WRITE)
    if (madvise(r->base, r->len, MADV_POPULATE_WRITE) == 0) {
        populated = 1;
    } else if (errno == ENOMEM) { /* touching the pages would meet the OOM killer */
        smoe__ring_free(r);
        return smoe__fail(SMOE_ENOMEM, "ring: cannot fault in %llu bytes (%u slots x %llu): "
                          "%s", (unsigned long long)(uint64_t)nslots * stride, nslots,
                          (unsigned long long)stride, strerror(ENOMEM));
    }
#endif
    for (uint64_t off = 0; !populated && off < r->len; off += 4096)
        r->base[off] = 0;
    if (lock) {
        if (mlock(r->base, r->len) < 0) {
            int e = errno;
            smoe__ring_free(r);
            return smoe__fail(SMOE_ENOMEM, "ring: mlock of %llu bytes failed: %s",
                              (unsigned long long)(uint64_t)nslots * stride, strerror(e));
        }
        r->locked = 1;
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
        atomic_init(&r->word[i], SMOE__EMPTY);
        atomic_init(&r->tick[i], 0);
        atomic_init(&r->err[i], 0);
        atomic_init(&r->fault[i].what, SMOE__FAULT_NONE);
        atomic_init(&r->fault[i].eno, 0);
        atomic_init(&r->fault[i].tries, 0);
        atomic_init(&r->fault[i].off, 0);
        atomic_init(&r->fault[i].len, 0);
        atomic_init(&r->chunk_next[i], 0);
        atomic_init(&r->chunk_left[i], 0);
        atomic_init(&r->t_queued[i], 0);
    }
    return 0;
}

void smoe__ring_free(smoe__ring *r)
{
    if (r->map_addr) {
        if (r->locked)
            munlock(r->base, r->len);
        munmap(r->map_addr, r->map_len);
    }
    free(r->word);
    free(r->tick);
    free(r->err);
    free(r->fault);
    free(r->chunk_next);
    free(r->chunk_left);
    free(r->t_queued);
    memset(r, 0, sizeof *r);
}
