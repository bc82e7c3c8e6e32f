/*
 * region_win32.c - the ring's memory from VirtualAlloc (region.h): large
 * pages when the process holds SeLockMemoryPrivilege (the "Lock pages in
 * memory" user right), which it enables for the call; else normal pages.
 * Windows commits the memory at allocation, so a region that would exhaust
 * memory fails there, not at populate. No memory file: a shareable ring is
 * refused (-ENOTSUP), as memfile_generic.c does.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <windows.h>

#include "region.h"
#include "win32.h"

/* 1: SeLockMemoryPrivilege is in the token and now enabled. */
static int enable_lock_memory(void)
{
    HANDLE tok;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &tok))
        return 0;
    TOKEN_PRIVILEGES tp = {0};
    tp.PrivilegeCount = 1;
    tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
    int ok = LookupPrivilegeValueW(NULL, L"SeLockMemoryPrivilege", &tp.Privileges[0].Luid) &&
             AdjustTokenPrivileges(tok, FALSE, &tp, 0, NULL, NULL) &&
             GetLastError() == ERROR_SUCCESS; /* not ERROR_NOT_ALL_ASSIGNED */
    CloseHandle(tok);
    return ok;
}

/* Large pages: the whole region in them, or none. */
static void *map_large(uint64_t len, uint64_t *map_len)
{
    SIZE_T large = GetLargePageMinimum();
    if (!large || len < large || !enable_lock_memory())
        return NULL;
    uint64_t n = (len + large - 1) / large * large;
    void *p = VirtualAlloc(NULL, (SIZE_T)n, MEM_RESERVE | MEM_COMMIT | MEM_LARGE_PAGES,
                           PAGE_READWRITE);
    if (p)
        *map_len = n;
    return p;
}

int smoe__region_map(smoe__region *g, uint64_t len)
{
    memset(g, 0, sizeof *g);
    if (len > SIZE_MAX)
        return -ENOMEM;
    uint64_t map_len = len;
    /* VirtualAlloc's base is 64 KiB aligned (the allocation granularity),
     * above the 16 KiB region.h promises. */
    void *p = map_large(len, &map_len);
    if (!p)
        p = VirtualAlloc(NULL, (SIZE_T)len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (!p) {
        int e = smoe__win_last();
        return e == -EIO ? -ENOMEM : e;
    }
    g->addr = g->base = p;
    g->len = len;
    g->map_len = map_len;
    return 0;
}

int smoe__region_map_shared(smoe__region *g, uint64_t len)
{
    (void)len;
    memset(g, 0, sizeof *g);
    return -ENOTSUP;
}

int smoe__region_populate(smoe__region *g)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    for (uint64_t off = 0; off < g->len; off += si.dwPageSize)
        g->base[off] = 0;
    return 0;
}

int smoe__region_lock(smoe__region *g)
{
    /* VirtualLock is bounded by the working set's minimum: raise it by the
     * region first. */
    SIZE_T lo, hi;
    HANDLE self = GetCurrentProcess();
    if (GetProcessWorkingSetSize(self, &lo, &hi))
        SetProcessWorkingSetSize(self, lo + (SIZE_T)g->len, hi + (SIZE_T)g->len);
    if (!VirtualLock(g->base, (SIZE_T)g->len))
        return smoe__win_last();
    g->locked = 1;
    return 0;
}

void smoe__region_unmap(smoe__region *g)
{
    if (g->addr) {
        if (g->locked)
            VirtualUnlock(g->base, (SIZE_T)g->len);
        VirtualFree(g->addr, 0, MEM_RELEASE);
    }
    memset(g, 0, sizeof *g);
}
