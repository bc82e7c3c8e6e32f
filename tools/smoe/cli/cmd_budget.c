/*
 * cmd_budget.c - `smoe budget`: show how smoe_open would size the ring for
 * a vault on this machine: every input read, each subtraction, the floor,
 * clamp and cap, the resulting slots and bytes, and the LRU cliff check
 * (docs/budget.md). Text or JSON (json-c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "smoe_tier.h"
#include "smoe/smoe.h"
#include "args.h"
#include "tool.h"

static const char cmd[] = "budget";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe budget VAULT [options]\n"
            "\n"
            "Show how the ring would be sized for VAULT on this machine: the memory\n"
            "figures read (/proc/meminfo, the memory cgroups), each subtraction, the\n"
            "floor, clamp and cap, and the resulting slots and bytes.\n"
            "\n"
            "  --scout FILE     the engine's scout file (resident dense weights)\n"
            "  --scout-bytes N  its size instead (k, M, G suffixes)\n"
            "  --reserve N      memory the engine keeps for KV cache and activations\n"
            "  --top-k K        experts per token per layer (default: the vault's top_k)\n"
            "  --slots N        an explicit slot count (no budget)\n"
            "  --slot-mb N      an explicit slot size in MiB\n"
            "  --replica PATH   a copy of the vault on another drive (repeatable): checked\n"
            "                   as smoe_open checks it; copies do not change the ring\n"
            "  --json           print one JSON object instead of text\n"
            "  --help           this text\n");
}

/* tool_human_bytes into one of 16 rotating buffers, so one printf can show
 * several. */
static const char *H(uint64_t b)
{
    static char buf[16][32];
    static unsigned next;
    char *p = buf[next++ % 16];
    return tool_human_bytes(p, sizeof buf[0], (double)b, 2);
}

typedef struct args {
    const char *vault, *scout;
    uint64_t scout_bytes, reserve, slot_mb;
    uint32_t top_k, slots;
    int have_top_k, json;
    tool_replicas rep;
} args;

enum { OPT_SCOUT_BYTES = 1, OPT_RESERVE, OPT_TOP_K, OPT_SLOTS, OPT_SLOT_MB, OPT_REPLICA };

static int budget_opt(void *ctx, const tool_opt *o, const char *v)
{
    args *a = ctx;
    uint32_t mb;
    switch (o->id) {
    case OPT_SCOUT_BYTES:
        if (tool_parse_size(v, &a->scout_bytes))
            return tool_error(cmd, "--scout-bytes: '%s' is not a size", v) + 1;
        break;
    case OPT_RESERVE:
        if (tool_parse_size(v, &a->reserve))
            return tool_error(cmd, "--reserve: '%s' is not a size", v) + 1;
        break;
    case OPT_TOP_K:
        if (tool_parse_u32(v, 1, 65536, &a->top_k))
            return tool_error(cmd, "--top-k: '%s' is not in 1..65536", v) + 1;
        a->have_top_k = 1;
        break;
    case OPT_REPLICA:
        return tool_replica_add(&a->rep, cmd, v);
    case OPT_SLOTS:
        if (tool_parse_u32(v, 1, 1u << 20, &a->slots))
            return tool_error(cmd, "--slots: '%s' is not in 1..1048576", v) + 1;
        break;
    default:
        if (tool_parse_u32(v, 1, 1u << 20, &mb))
            return tool_error(cmd, "--slot-mb: '%s' is not in 1..1048576", v) + 1;
        a->slot_mb = mb;
        break;
    }
    return -1;
}

static int parse(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    const tool_opt opts[] = {
        TOOL_FLAG("--json", &a->json, 1),
        TOOL_TEXT("--scout", &a->scout),
        TOOL_VALUE("--scout-bytes", OPT_SCOUT_BYTES),
        TOOL_VALUE("--reserve", OPT_RESERVE),
        TOOL_VALUE("--top-k", OPT_TOP_K),
        TOOL_VALUE("--slots", OPT_SLOTS),
        TOOL_VALUE("--slot-mb", OPT_SLOT_MB),
        TOOL_VALUE("--replica", OPT_REPLICA),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = cmd, .usage = usage, .opts = opts, .operand = &a->vault,
        .min_operands = 1, .max_operands = 1, .extra = "one vault only ('%s' and '%s')",
        .missing = "no vault given", .usage_on_error = 1,
    };
    return tool_args_parse(&cli, argc, argv, budget_opt, a);
}

static const char *const rule_names[] = {"auto",   "fallback",   "clamp_min", "clamp_max",
                                         "capped", "no_meminfo", "vault_cap"};

static json_object *u64j(uint64_t v)
{
    return json_object_new_uint64(v);
}

static json_object *limitj(uint64_t v)
{
    return v == SMOE__NO_LIMIT ? NULL : json_object_new_uint64(v);
}

static void print_json(const args *a, const smoe__vault *v, const smoe__mem_probe *p,
                       const smoe__budget *b, const char *top_k_src, const char *err)
{
    json_object *o = json_object_new_object(), *in = json_object_new_object();
    json_object *bud = json_object_new_object(), *cgs = json_object_new_array();
    json_object_object_add(o, "vault", json_object_new_string(a->vault));
    json_object *reps = json_object_new_array();
    for (uint32_t i = 0; i < a->rep.n; i++)
        json_object_array_add(reps, json_object_new_string(a->rep.path[i]));
    json_object_object_add(o, "replicas", reps);
    json_object_object_add(o, "layers", json_object_new_int64(v->layers));
    json_object_object_add(o, "experts", json_object_new_int64(v->experts));
    json_object_object_add(o, "max_padded", u64j(v->max_padded));
    json_object_object_add(o, "slot_bytes", u64j(b->in.slot_bytes));
    json_object_object_add(in, "mem_source",
                           p->mem_source ? json_object_new_string(p->mem_source) : NULL);
    json_object_object_add(in, "mem_total", p->have_mem ? u64j(p->mem_total) : NULL);
    json_object_object_add(in, "mem_available", p->have_mem ? u64j(p->mem_available) : NULL);
    for (uint32_t i = 0; i < p->n_levels; i++) {
        json_object *c = json_object_new_object();
        json_object_object_add(c, "dir", json_object_new_string(p->level[i].dir));
        json_object_object_add(c, "version", json_object_new_int(p->level[i].version));
        json_object_object_add(c, "limit", limitj(p->level[i].limit));
        json_object_object_add(c, "usage", u64j(p->level[i].usage));
        json_object_array_add(cgs, c);
    }
    json_object_object_add(in, "cgroups", cgs);
    json_object_object_add(in, "cgroup_limit", limitj(p->cg_limit));
    json_object_object_add(in, "cgroup_usage", p->cg_limit == SMOE__NO_LIMIT ? NULL
                                                                           : u64j(p->cg_usage));
    json_object_object_add(in, "cgroup_room", limitj(p->cg_room));
    json_object_object_add(in, "scout_path", a->scout ? json_object_new_string(a->scout) : NULL);
    json_object_object_add(in, "scout_bytes", u64j(b->in.scout_bytes));
    json_object_object_add(in, "reserve_bytes", u64j(b->in.reserve_bytes));
    json_object_object_add(in, "overhead_bytes", u64j(b->in.overhead_bytes));
    json_object_object_add(in, "top_k", json_object_new_int64(b->in.top_k));
    json_object_object_add(in, "top_k_source", json_object_new_string(top_k_src));
    json_object_object_add(in, "explicit_slots", json_object_new_int64(b->in.explicit_slots));
    json_object_object_add(in, "note", p->note[0] ? json_object_new_string(p->note) : NULL);
    json_object_object_add(o, "inputs", in);
    json_object_object_add(bud, "free", u64j(b->free_bytes));
    json_object_object_add(bud, "after_scout", u64j(b->after[0]));
    json_object_object_add(bud, "after_overhead", u64j(b->after[1]));
    json_object_object_add(bud, "after_reserve", u64j(b->after[2]));
    json_object_object_add(bud, "os_floor", u64j(b->os_floor));
    json_object_object_add(bud, "budget_bytes", u64j(b->budget_bytes));
    json_object_object_add(bud, "slots_budget", u64j(b->slots_budget));
    json_object_object_add(bud, "slots_fallback", u64j(b->slots_fallback));
    json_object_object_add(bud, "slots_cap", b->slots_cap == UINT64_MAX ? NULL
                                                                        : u64j(b->slots_cap));
    json_object_object_add(bud, "slots_after_floor", u64j(b->step[0]));
    json_object_object_add(bud, "slots_after_clamp", u64j(b->step[1]));
    json_object_object_add(bud, "slots_after_cgroup_cap", u64j(b->step[2]));
    json_object_object_add(bud, "slots_after_vault_cap", u64j(b->step[3]));
    json_object *rules = json_object_new_array();
    for (unsigned i = 0; i < sizeof rule_names / sizeof rule_names[0]; i++)
        if (b->rules & (1u << i))
            json_object_array_add(rules, json_object_new_string(rule_names[i]));
    json_object_object_add(bud, "rules", rules);
    json_object_object_add(o, "budget", bud);
    json_object_object_add(o, "slots", err ? NULL : json_object_new_int64(b->slots));
    json_object_object_add(o, "ring_bytes",
                           err ? NULL : u64j((uint64_t)b->slots * b->in.slot_bytes));
    json_object_object_add(o, "working_set_slots", u64j(b->working_set));
    json_object_object_add(o, "cliff", json_object_new_boolean(b->cliff));
    json_object_object_add(o, "error", err ? json_object_new_string(err) : NULL);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
}

static void row(const char *op, const char *label, const char *value, const char *tail)
{
    printf("  %s %-28s %12s  %s\n", op, label, value, tail);
}

static const char *eq(uint64_t v)
{
    static char buf[4][48];
    static unsigned next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "= %s", H(v));
    return p;
}

/* The figures read: memory, cgroups, the scout file, reserve, top-k. */
static void print_inputs(const args *a, const smoe__mem_probe *p, const smoe__budget *b,
                         const char *top_k_src)
{
    printf("inputs read\n");
    if (p->have_mem)
        printf("  %-14s MemTotal %s, %s %s\n", p->mem_source, H(p->mem_total),
               strcmp(p->mem_source, "sysctl") ? "MemAvailable" : "level x memsize",
               H(p->mem_available));
    else
        printf("  memory         unknown\n");
    if (!p->n_levels)
        printf("  memory cgroup  none found\n");
    for (uint32_t i = 0; i < p->n_levels; i++) {
        const smoe__cg_level *l = &p->level[i];
        if (l->limit == SMOE__NO_LIMIT)
            printf("  cgroup v%d      %s: limit none, usage %s\n", l->version, l->dir,
                   H(l->usage));
        else
            printf("  cgroup v%d      %s: limit %s, usage %s, room %s\n", l->version, l->dir,
                   H(l->limit), H(l->usage), H(l->limit > l->usage ? l->limit - l->usage : 0));
    }
    if (p->note[0])
        printf("  note           %s\n", p->note);
    if (a->scout)
        printf("  scout file     %s: %s\n", a->scout, H(b->in.scout_bytes));
    else
        printf("  scout file     %s\n", a->scout_bytes ? H(a->scout_bytes) : "none (--scout)");
    printf("  reserve        %s%s\n", H(b->in.reserve_bytes), a->reserve ? "" : " (--reserve)");
    if (b->in.top_k)
        printf("  top-k          %u (%s)\n", b->in.top_k, top_k_src);
    else
        printf("  top-k          unknown (--top-k)\n");
    printf("\n");
}

/* Free memory less each subtraction, the budget and the fallback floor. */
static void print_subtractions(const smoe__mem_probe *p, const smoe__budget *b)
{
    if (b->rules & SMOE_BUDGET_NO_MEMINFO) {
        printf("    free memory unknown                               %" PRIu64 " slots\n",
               b->step[0]);
        return;
    }
    char tail[128];
    if (p->cg_room == SMOE__NO_LIMIT)
        snprintf(tail, sizeof tail, "(MemAvailable; no cgroup limit)");
    else
        snprintf(tail, sizeof tail, "(the smaller of MemAvailable %s and cgroup room %s)",
                 H(p->mem_available), H(p->cg_room));
    row(" ", "free", H(b->free_bytes), tail);
    row("-", "scout file", H(b->in.scout_bytes), eq(b->after[0]));
    row("-", "engine overhead (fixed)", H(b->in.overhead_bytes), eq(b->after[1]));
    row("-", "engine reserve", H(b->in.reserve_bytes), eq(b->after[2]));
    row("-", "OS floor max(RAM/8, 4 GiB)", H(b->os_floor), eq(b->after[3]));
    snprintf(tail, sizeof tail, "/ %s per slot = %" PRIu64 " slots", H(b->in.slot_bytes),
             b->slots_budget);
    row("=", "budget", H(b->budget_bytes), tail);
    snprintf(tail, sizeof tail, "%" PRIu64 " slots: %s -> %" PRIu64, b->slots_fallback,
             (b->rules & SMOE_BUDGET_FALLBACK) ? "raised" : "not needed", b->step[0]);
    row(" ", "floor: 25% of free", H(b->free_bytes / 4), tail);
}

/* The clamp and the two caps. */
static void print_limits(const smoe__budget *b)
{
    char t2[96];
    snprintf(t2, sizeof t2, "%s -> %" PRIu64,
             (b->rules & SMOE_BUDGET_CLAMP_MIN)   ? "raised"
             : (b->rules & SMOE_BUDGET_CLAMP_MAX) ? "lowered"
                                                  : "unchanged",
             b->step[1]);
    row(" ", "clamp to [64, 4096] slots", "", t2);
    if (b->slots_cap == UINT64_MAX)
        snprintf(t2, sizeof t2, "no cgroup limit");
    else
        snprintf(t2, sizeof t2, "%" PRIu64 " slots: %s -> %" PRIu64, b->slots_cap,
                 (b->rules & SMOE_BUDGET_CAPPED) ? "lowered" : "unchanged", b->step[2]);
    row(" ", "cap: cgroup room / slot", "", t2);
    snprintf(t2, sizeof t2, "%u slots: %s -> %" PRIu64, b->in.vault_entries,
             (b->rules & SMOE_BUDGET_VAULT_CAP) ? "lowered" : "unchanged", b->step[3]);
    row(" ", "cap: one slot per blob", "", t2);
}

static void print_text(const args *a, const smoe__vault *v, const smoe__mem_probe *p,
                       const smoe__budget *b, const char *top_k_src)
{
    const uint64_t slot = b->in.slot_bytes;
    printf("vault      %s: %u layers x %u experts, largest padded blob %s\n", a->vault,
           v->layers, v->experts, H(v->max_padded));
    printf("slot size  %s (%" PRIu64 " bytes: %s, 16 KiB-rounded)\n\n", H(slot), slot,
           a->slot_mb ? "--slot-mb" : "the largest blob");
    print_inputs(a, p, b, top_k_src);
    if (b->in.explicit_slots) {
        printf("slots      %u (--slots: no budget)\n", b->in.explicit_slots);
        return;
    }
    printf("budget\n");
    print_subtractions(p, b);
    print_limits(b);
}

/* The ring that results, and how it compares with one token's experts. */
static void print_ring(const smoe__vault *v, const smoe__budget *b)
{
    uint64_t slot = b->in.slot_bytes;
    printf("\nring       %u slots x %s = %s\n", b->slots, H(slot), H((uint64_t)b->slots * slot));
    if (b->working_set && b->cliff)
        printf("warning    the ring holds less than one token's experts (%u layers x "
               "top-%u = %" PRIu64 " slots): LRU retention will get almost no "
               "hits\n", v->layers, b->in.top_k, b->working_set);
    else if (b->working_set)
        printf("working    one token's experts: %u layers x top-%u = %" PRIu64
               " slots; the ring holds %.1f tokens' worth\n", v->layers, b->in.top_k,
               b->working_set, (double)b->slots / (double)b->working_set);
}

/* The budget's inputs from the arguments and the vault; 0, or 1 after
 * saying what is wrong. */
static int fill_inputs(const args *a, const smoe__vault *v, smoe__budget_in *in)
{
    uint64_t slot = (v->max_padded + SMOE__VAULT_ALIGN - 1) / SMOE__VAULT_ALIGN *
                    SMOE__VAULT_ALIGN;
    if (a->slot_mb) {
        uint64_t want = a->slot_mb << 20;
        if (want < v->max_padded)
            return tool_error(cmd, "--slot-mb %" PRIu64 ": %" PRIu64 " bytes is smaller than "
                              "the largest blob of %s, %" PRIu64 " bytes", a->slot_mb, want,
                              a->vault, v->max_padded);
        slot = want;
    }
    memset(in, 0, sizeof *in);
    in->slot_bytes = slot;
    in->overhead_bytes = SMOE__BUDGET_OVERHEAD;
    in->reserve_bytes = a->reserve;
    in->layers = v->layers;
    in->vault_entries = v->entries;
    in->top_k = a->have_top_k ? a->top_k : v->top_k;
    in->explicit_slots = a->slots;
    in->scout_bytes = a->scout_bytes;
    if (a->scout) {
        int fd = smoe__io_open(&smoe__io_os, a->scout, SMOE__IO_RDONLY);
        uint64_t size = 0;
        int rc = fd < 0 ? fd : smoe__io_size(&smoe__io_os, fd, &size);
        if (fd >= 0)
            smoe__io_close(&smoe__io_os, fd);
        if (rc < 0)
            return tool_error(cmd, "--scout %s: cannot read its size: %s", a->scout,
                              strerror(-rc));
        in->scout_bytes = size;
    }
    return 0;
}

/* Each --replica must be a copy of the vault, as smoe_open requires (the
 * same vault id); 0, or 1 after saying which is not. */
static int check_replicas(const args *a, const smoe__vault *v)
{
    for (uint32_t i = 0; i < a->rep.n; i++) {
        smoe__vault c;
        if (smoe__vault_load(&c, a->rep.path[i], smoe__io_get()) < 0)
            return tool_error(cmd, "--replica: %s", smoe_last_error());
        uint64_t id = c.vault_id;
        smoe__vault_free(&c);
        if (id != v->vault_id)
            return tool_error(cmd, "--replica %s is not a copy of %s: its vault id is "
                              "%016" PRIx64 ", the vault's %016" PRIx64, a->rep.path[i],
                              a->vault, id, v->vault_id);
        if (!a->json)
            printf("replica    %s: a copy of the vault (vault id %016" PRIx64 "); copies "
                   "spread reads, they do not change the ring\n", a->rep.path[i], id);
    }
    return 0;
}

int cmd_budget(int argc, char **argv)
{
    args a;
    int r = parse(argc, argv, &a);
    if (r >= 0)
        return r;
    smoe__vault v;
    if ((r = smoe__vault_load(&v, a.vault, smoe__io_get())) < 0)
        return tool_error(cmd, "%s", smoe_last_error());
    smoe__budget_in in;
    if (check_replicas(&a, &v) || fill_inputs(&a, &v, &in)) {
        smoe__vault_free(&v);
        return 1;
    }
    const char *top_k_src = a.have_top_k ? "--top-k" : "the vault's top_k metadata";
    smoe__mem_probe p;
    smoe__mem_probe_read(smoe__io_get(), &p);
    smoe__budget_in_probe(&in, &p);
    smoe__budget b;
    r = smoe__budget_compute(&in, &b);
    const char *err = r < 0 ? smoe_last_error() : NULL;
    if (a.json) {
        print_json(&a, &v, &p, &b, top_k_src, err);
    } else {
        print_text(&a, &v, &p, &b, top_k_src);
        if (!err)
            print_ring(&v, &b);
    }
    smoe__vault_free(&v);
    if (err)
        return tool_error(cmd, "%s", err);
    return 0;
}
