/*
 * mem_generic.c - no memory probe for this system (mem.h): the budget
 * then sizes the ring without free memory (SMOE_BUDGET_NO_MEMINFO) and
 * says so in the log.
 */
#include <stdio.h>
#include <string.h>

#include "mem.h"

void smoe__mem_probe_read(const smoe__io *io, smoe__mem_probe *p)
{
    memset(p, 0, sizeof *p);
    p->cg_limit = p->cg_room = SMOE__NO_LIMIT;
    (void)io;
    snprintf(p->note, sizeof p->note, "no memory probe for this system");
}
