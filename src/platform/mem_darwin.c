/*
 * mem_darwin.c - the machine's memory figures on macOS (mem.h): sysctl
 * hw.memsize, and kern.memorystatus_level (the percentage of memory the
 * system considers free) for what is available. No container limits.
 */
#include <stdio.h>
#include <string.h>
#include <sys/sysctl.h>
#include <sys/types.h>

#include "mem.h"

void smoe__mem_probe_read(const smoe__io *io, smoe__mem_probe *p)
{
    memset(p, 0, sizeof *p);
    p->cg_limit = p->cg_room = SMOE__NO_LIMIT;
    (void)io;
    uint64_t memsize = 0;
    int level = 0;
    size_t n1 = sizeof memsize, n2 = sizeof level;
    if (sysctlbyname("hw.memsize", &memsize, &n1, NULL, 0) == 0 &&
        sysctlbyname("kern.memorystatus_level", &level, &n2, NULL, 0) == 0 && level >= 0 &&
        level <= 100 && memsize > 0) {
        p->have_mem = 1;
        p->mem_total = memsize;
        p->mem_available = memsize / 100 * (uint64_t)level;
        p->mem_source = "sysctl";
    } else {
        snprintf(p->note, sizeof p->note, "sysctl hw.memsize or kern.memorystatus_level "
                 "could not be read");
    }
}
