/*
 * budget.c - the ring's slot count from the memory the machine can spare
 * (docs/budget.md): the computation, pure. The figures come from the
 * platform's probe (platform/mem.h); smoe_open's use is budget_open.c.
 */
#include <string.h>

#include "smoe/smoe.h"
#include "budget.h"
#include "error.h"

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

void smoe__budget_in_probe(smoe__budget_in *in, const smoe__mem_probe *p)
{
    in->have_mem = p->have_mem;
    in->mem_total = p->mem_total;
    in->mem_available = p->mem_available;
    in->cg_room = p->cg_room;
    in->cg_limit = p->cg_limit;
    in->cg_usage = p->cg_usage;
}

/* Steps 1 to 6 of docs/budget.md: free memory less the scout file, the
 * overhead, the reserve and the OS floor, in slots; the 25% fallback when
 * that is less. The count before the clamp. */
static uint64_t slots_of_free(const smoe__budget_in *in, smoe__budget *out)
{
    const uint64_t slot = in->slot_bytes;
    out->free_bytes = in->mem_available < in->cg_room ? in->mem_available : in->cg_room;
    uint64_t floor = in->mem_total / SMOE__BUDGET_OS_FLOOR_DIV;
    out->os_floor = floor > SMOE__BUDGET_OS_FLOOR_MIN ? floor : SMOE__BUDGET_OS_FLOOR_MIN;
    out->after[0] = sub0(out->free_bytes, in->scout_bytes);
    out->after[1] = sub0(out->after[0], in->overhead_bytes);
    out->after[2] = sub0(out->after[1], in->reserve_bytes);
    out->after[3] = sub0(out->after[2], out->os_floor);
    out->budget_bytes = out->after[3];
    out->slots_budget = out->budget_bytes / slot;
    /* floor(free x 25 / 100) without overflowing */
    out->slots_fallback = (out->free_bytes / 100 * SMOE__BUDGET_FALLBACK_PCT +
                           out->free_bytes % 100 * SMOE__BUDGET_FALLBACK_PCT / 100) /
                          slot;
    uint64_t n = out->slots_budget;
    if (n < out->slots_fallback) {
        n = out->slots_fallback;
        out->rules |= SMOE_BUDGET_FALLBACK;
    }
    return n;
}

/* The clamp to [64, 4096], then the caps: the container's room and the
 * vault's blob count. Each step's count is kept in out->step. */
static uint64_t clamp_and_cap(const smoe__budget_in *in, smoe__budget *out, uint64_t n)
{
    out->step[0] = n;
    if (n < SMOE__BUDGET_MIN_SLOTS) {
        n = SMOE__BUDGET_MIN_SLOTS;
        out->rules |= SMOE_BUDGET_CLAMP_MIN;
    }
    if (n > SMOE__BUDGET_MAX_SLOTS) {
        n = SMOE__BUDGET_MAX_SLOTS;
        out->rules |= SMOE_BUDGET_CLAMP_MAX;
    }
    out->step[1] = n;
    if (in->cg_room != SMOE__NO_LIMIT) {
        out->slots_cap = in->cg_room / in->slot_bytes;
        if (n > out->slots_cap) {
            n = out->slots_cap;
            out->rules |= SMOE_BUDGET_CAPPED;
        }
    }
    out->step[2] = n;
    /* A slot per blob holds the whole vault: more could never fill. */
    if (in->vault_entries && n > in->vault_entries) {
        n = in->vault_entries;
        out->rules |= SMOE_BUDGET_VAULT_CAP;
    }
    out->step[3] = n;
    return n;
}

/* The automatic slot count (*n). Only the clamp's minimum raises the count
 * past free memory (huge slots, little memory): never fault in a ring that
 * cannot fit. */
static int auto_slots(const smoe__budget_in *in, smoe__budget *out, uint64_t *n)
{
    const uint64_t slot = in->slot_bytes;
    out->rules |= SMOE_BUDGET_AUTO;
    if (in->have_mem) {
        *n = slots_of_free(in, out);
    } else {
        out->rules |= SMOE_BUDGET_NO_MEMINFO;
        *n = SMOE__BUDGET_MIN_SLOTS;
    }
    *n = clamp_and_cap(in, out, *n);
    if (in->have_mem && *n > out->free_bytes / slot) {
        out->slots = (uint32_t)*n;
        return smoe__fail(SMOE_ENOMEM, "budget: a ring of %llu slots (the clamp's "
                          "minimum of %u slots) x %llu bytes = %llu bytes is more than "
                          "the %llu bytes of free memory (25%% of it: %llu slots); "
                          "free memory, or choose opts.ring_slots",
                          (unsigned long long)*n, SMOE__BUDGET_MIN_SLOTS,
                          (unsigned long long)slot, (unsigned long long)(*n * slot),
                          (unsigned long long)out->free_bytes,
                          (unsigned long long)out->slots_fallback);
    }
    return 0;
}

int smoe__budget_compute(const smoe__budget_in *in, smoe__budget *out)
{
    memset(out, 0, sizeof *out);
    out->in = *in;
    out->slots_cap = UINT64_MAX;
    const uint64_t slot = in->slot_bytes;
    if (slot == 0)
        return smoe__fail(SMOE_EINVAL, "budget: slot size 0");
    out->working_set = (uint64_t)in->layers * in->top_k;

    uint64_t n = in->explicit_slots;
    int r;
    if (!n && (r = auto_slots(in, out, &n)) < 0)
        return r;
    out->slots = (uint32_t)n;
    if (n == 0)
        return smoe__fail(SMOE_ESMALLRING, "budget: the memory cgroup has %llu bytes of "
                          "room, less than one slot of %llu bytes",
                          (unsigned long long)in->cg_room, (unsigned long long)slot);
    if (in->top_k && n < in->top_k)
        return smoe__fail(SMOE_ESMALLRING, "budget: a ring of %llu slots cannot hold one "
                          "layer's top-%u experts; demand for a layer would deadlock on a "
                          "full ring (give it more memory, a smaller reserve, or at least "
                          "%u slots)",
                          (unsigned long long)n, in->top_k, in->top_k);
    out->cliff = out->working_set && n < out->working_set;
    return 0;
}
