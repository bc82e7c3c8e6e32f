/*
 * budget_open.c - smoe_open's ring size: the options, the scout file's
 * size, the platform's memory probe and the computation (budget.c), the
 * warnings it logs, and the figures smoe_get_stats reports.
 */
#include <stdio.h>
#include <string.h>

#include "budget.h"
#include "error.h"
#include "internal.h"
#include "log.h"

static int scout_size(struct smoe_stream *s, const char *path, uint64_t *bytes)
{
    int fd = smoe__io_open(s->io, path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
    if (fd < 0)
        return smoe__fail(SMOE_ESYS, "open: scout file %s: %s", path, strerror(-fd));
    int r = smoe__io_size(s->io, fd, bytes);
    smoe__io_close(s->io, fd);
    if (r < 0)
        return smoe__fail(SMOE_ESYS, "open: scout file %s: cannot read its size: %s", path,
                          strerror(-r));
    return 0;
}

int smoe__budget_open(struct smoe_stream *s, const smoe_open_opts *o, uint64_t stride,
                      uint32_t *nslots)
{
    smoe__budget_in in;
    memset(&in, 0, sizeof in);
    in.slot_bytes = stride;
    in.cg_room = in.cg_limit = SMOE__NO_LIMIT;
    in.overhead_bytes = SMOE__BUDGET_OVERHEAD;
    in.layers = s->vault.layers;
    in.vault_entries = s->vault.entries;
    in.top_k = o->top_k;
    in.explicit_slots = o->ring_slots;
    if (!o->ring_slots) {
        int r;
        in.reserve_bytes = o->reserve_bytes;
        if (o->scout_bytes)
            in.scout_bytes = o->scout_bytes;
        else if (o->scout_path && (r = scout_size(s, o->scout_path, &in.scout_bytes)) < 0)
            return r;
        smoe__mem_probe p;
        smoe__mem_probe_read(s->io, &p);
        if (p.nomem) /* not a reason to size the ring blind */
            return smoe__fail(SMOE_ENOMEM, "open: out of memory reading the memory figures "
                              "(%s)", p.note);
        smoe__budget_in_probe(&in, &p);
        if (p.note[0])
            smoe__log(s, SMOE_LOG_WARN, "memory budget: %s", p.note);
    }
    int r = smoe__budget_compute(&in, &s->budget);
    if (r < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", smoe_last_error()); /* not in place */
        return smoe__fail(r, "open: %s: %s", s->vault.path, why);
    }
    if (s->budget.rules & SMOE_BUDGET_NO_MEMINFO)
        smoe__log(s, SMOE_LOG_WARN, "memory budget: free memory unknown; ring of %u slots",
                  s->budget.slots);
    if (s->budget.cliff)
        smoe__log(s, SMOE_LOG_WARN, "ring of %u slots holds less than one token's experts "
                  "(%u layers x top-%u = %llu): LRU retention will get almost no hits",
                  s->budget.slots, in.layers, in.top_k,
                  (unsigned long long)s->budget.working_set);
    *nslots = s->budget.slots;
    return 0;
}

void smoe__budget_stats(const struct smoe_stream *s, smoe_stats *st)
{
    const smoe__budget *b = &s->budget;
    st->budget_rules = b->rules;
    st->budget_mem_total = b->in.mem_total;
    st->budget_mem_available = b->in.mem_available;
    st->budget_cgroup_limit = b->in.cg_limit;
    st->budget_cgroup_usage = b->in.cg_usage;
    st->budget_free = b->free_bytes;
    st->budget_scout = b->in.scout_bytes;
    st->budget_overhead = (b->rules & SMOE_BUDGET_AUTO) ? b->in.overhead_bytes : 0;
    st->budget_reserve = b->in.reserve_bytes;
    st->budget_os_floor = b->os_floor;
    st->budget_bytes = b->budget_bytes;
    st->budget_slots = b->slots_budget;
    st->top_k = b->in.top_k;
    st->working_set_slots = b->working_set;
    st->cliff = (uint64_t)b->cliff;
}
