/*
 * mem_win32.c - the machine's memory figures on Windows (mem.h):
 * GlobalMemoryStatusEx for RAM and what is available, and, when the process
 * runs inside a job object with a memory limit, that limit as the one
 * level that limits the process (as a cgroup does on Linux). A job's limits
 * are on committed memory: the process's own (ProcessMemoryLimit, against
 * its private commit) or the whole job's (JobMemoryLimit, against the
 * job's commit). Nested jobs: the one Windows reports, the innermost.
 */
#include <stdio.h>
#include <string.h>
#include <windows.h>
#include <psapi.h>

#include "mem.h"

/* JOBOBJECT_MEMORY_USAGE_INFORMATION (Windows 10), not in every SDK. */
typedef struct {
    ULONG64 JobMemory;
    ULONG64 PeakJobMemoryUsed;
} job_usage;
#define SMOE__JOB_MEMORY_USAGE ((JOBOBJECTINFOCLASS)28)

static void add_level(smoe__mem_probe *p, const char *what, uint64_t limit, uint64_t usage)
{
    smoe__cg_level *l = &p->level[p->n_levels++];
    snprintf(l->dir, sizeof l->dir, "job object: %s", what);
    l->version = 0;
    l->limit = limit;
    l->usage = usage;
    uint64_t room = usage < limit ? limit - usage : 0;
    if (room < p->cg_room) {
        p->cg_room = room;
        p->cg_limit = limit;
        p->cg_usage = usage;
    }
}

static void read_job(smoe__mem_probe *p)
{
    BOOL in_job = FALSE;
    if (!IsProcessInJob(GetCurrentProcess(), NULL, &in_job) || !in_job)
        return;
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION x;
    if (!QueryInformationJobObject(NULL, JobObjectExtendedLimitInformation, &x, sizeof x,
                                   NULL)) {
        snprintf(p->note, sizeof p->note, "the job object's limits could not be read "
                 "(QueryInformationJobObject: Windows error %lu)", (unsigned long)GetLastError());
        return;
    }
    DWORD f = x.BasicLimitInformation.LimitFlags;
    if (f & JOB_OBJECT_LIMIT_PROCESS_MEMORY) {
        PROCESS_MEMORY_COUNTERS_EX pm;
        uint64_t used = 0;
        if (GetProcessMemoryInfo(GetCurrentProcess(), (PROCESS_MEMORY_COUNTERS *)&pm, sizeof pm))
            used = pm.PrivateUsage;
        add_level(p, "process memory limit", x.ProcessMemoryLimit, used);
    }
    if (f & JOB_OBJECT_LIMIT_JOB_MEMORY) {
        job_usage u = {0};
        if (!QueryInformationJobObject(NULL, SMOE__JOB_MEMORY_USAGE, &u, sizeof u, NULL))
            u.JobMemory = 0; /* older systems: the job's limit with no usage known */
        add_level(p, "job memory limit", x.JobMemoryLimit, u.JobMemory);
    }
}

void smoe__mem_probe_read(const smoe__io *io, smoe__mem_probe *p)
{
    (void)io;
    memset(p, 0, sizeof *p);
    p->cg_limit = p->cg_room = SMOE__NO_LIMIT;
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms) && ms.ullTotalPhys > 0) {
        p->have_mem = 1;
        p->mem_total = ms.ullTotalPhys;
        p->mem_available = ms.ullAvailPhys;
        p->mem_source = "GlobalMemoryStatusEx";
    } else {
        snprintf(p->note, sizeof p->note, "GlobalMemoryStatusEx failed (Windows error %lu)",
                 (unsigned long)GetLastError());
    }
    read_job(p);
}
