/*
 * os_win32.c - os.h on Windows. Paths are UTF-8, converted for the wide
 * API by the platform layer's smoe__win_wpath. Windows has no call that says
 * whether a file's pages are in the system cache (QueryWorkingSetEx sees
 * only this process's working set): tool_os_can_probe is 0, and smoe
 * bench's page-cache modes report no hit rate there.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <windows.h>
#include <psapi.h>

#include "os.h"
#include "smoe_tier.h"

static double filetime_s(FILETIME t)
{
    return (double)((uint64_t)t.dwHighDateTime << 32 | t.dwLowDateTime) * 1e-7;
}

void tool_os_cpu(double *user, double *sys)
{
    FILETIME c, e, k, u;
    if (!GetProcessTimes(GetCurrentProcess(), &c, &e, &k, &u)) {
        *user = *sys = 0.0;
        return;
    }
    *user = filetime_s(u);
    *sys = filetime_s(k);
}

static int memory_counters(PROCESS_MEMORY_COUNTERS *pmc)
{
    return K32GetProcessMemoryInfo(GetCurrentProcess(), pmc, sizeof *pmc) != 0;
}

uint64_t tool_os_peak_rss(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    return memory_counters(&pmc) ? (uint64_t)pmc.PeakWorkingSetSize : 0;
}

uint64_t tool_os_rss_now(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    return memory_counters(&pmc) ? (uint64_t)pmc.WorkingSetSize : 0;
}

/* GetProcessIoCounters counts every byte ReadFile returned, from the
 * cache or not: not what the caller asks for. */
uint64_t tool_os_storage_read_bytes(void)
{
    return 0;
}

size_t tool_os_page(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize;
}

void *tool_os_map_file(const char *path, uint64_t len, int *err)
{
    wchar_t *w = smoe__win_wpath(path, err);
    if (!w)
        return NULL;
    HANDLE f = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    free(w);
    if (f == INVALID_HANDLE_VALUE) {
        *err = -smoe__win_last();
        return NULL;
    }
    /* a mapping of an empty file is refused: map nothing */
    HANDLE m = len ? CreateFileMappingW(f, NULL, PAGE_READONLY, 0, 0, NULL) : NULL;
    void *at = m ? MapViewOfFile(m, FILE_MAP_READ, 0, 0, (SIZE_T)len) : NULL;
    *err = at ? 0 : len ? -smoe__win_last() : EINVAL;
    if (m)
        CloseHandle(m); /* the view keeps the mapping */
    CloseHandle(f);
    return at;
}

void tool_os_unmap(void *m, uint64_t len)
{
    (void)len;
    UnmapViewOfFile(m);
}

int tool_os_can_probe(void)
{
    return 0;
}

int tool_os_resident(const void *at, uint64_t len, unsigned char *vec)
{
    (void)at, (void)len, (void)vec;
    return 0;
}

void tool_os_map_advise(void *at, uint64_t len, int willneed)
{
    if (!willneed || !len)
        return; /* no read-ahead switch for a mapping */
    WIN32_MEMORY_RANGE_ENTRY r = {at, (SIZE_T)len};
    (void)PrefetchVirtualMemory(GetCurrentProcess(), 1, &r, 0);
}

void *tool_os_aligned_alloc(size_t align, size_t n)
{
    return _aligned_malloc(n ? n : 1, align);
}

void tool_os_aligned_free(void *p)
{
    _aligned_free(p);
}

/* Dropping the cache and cgroups are Linux's: never asked for here. */
int tool_os_privileged(void)
{
    return 0;
}

void tool_os_on_interrupt(void (*fn)(int))
{
    signal(SIGINT, fn ? fn : SIG_DFL);
    signal(SIGTERM, fn ? fn : SIG_DFL);
}

char *tool_os_realpath(const char *path)
{
    char *r = _fullpath(NULL, path, 0);
    if (r && GetFileAttributesA(r) == INVALID_FILE_ATTRIBUTES) {
        free(r);
        errno = ENOENT;
        return NULL;
    }
    for (char *c = r; c && *c; c++) /* one separator for the callers to split on */
        if (*c == '\\')
            *c = '/';
    return r;
}
