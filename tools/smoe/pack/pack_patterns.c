/*
 * pack_patterns.c - which tensors are experts, found by name.
 *
 * A pattern is "KIND:TEMPLATE[:SRC=DST,...]" (docs/packing.md):
 *   KIND      expert  - one tensor per (layer, expert); TEMPLATE has {E}
 *             stacked - one tensor per layer, the expert as its outermost
 *                       dimension; TEMPLATE has no {E}
 *   TEMPLATE  the tensor name, with {L} (layer number), {E} (expert number),
 *             {C} (the component part of the name) and {*} (any text)
 *   SRC=DST   what {C} may be and the component name it becomes, in blob
 *             order; without a map {C} is any [A-Za-z0-9_]+ and names the
 *             component itself.
 * A template ending in ".weight" also matches its quantisation companions:
 * the same name ending in ".scales", ".biases", ".bias" or
 * ".weight_scale_inv" becomes component "DST.scales", "DST.biases",
 * "DST.bias" or "DST.scale_inv".
 *
 * User patterns are tried before the built-in ones, in the order given.
 */
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

static const char *const builtin[] = {
    /* Qwen2/Qwen3-MoE, DeepSeek-V2/V3, OLMoE: one tensor per expert. */
    "expert:{*}layers.{L}.mlp.experts.{E}.{C}_proj.weight:gate=gate,up=up,down=down",
    /* Mixtral, Phi-3.5-MoE. */
    "expert:{*}layers.{L}.block_sparse_moe.experts.{E}.{C}.weight:w1=gate,w3=up,w2=down",
    /* Jamba. */
    "expert:{*}layers.{L}.feed_forward.experts.{E}.{C}_proj.weight:gate=gate,up=up,down=down",
    /* mlx-lm: switch_mlp stacks the experts (and quantises with .scales/.biases). */
    "stacked:{*}layers.{L}.mlp.switch_mlp.{C}_proj.weight:gate=gate,up=up,down=down",
    "stacked:{*}layers.{L}.block_sparse_moe.switch_mlp.{C}_proj.weight:gate=gate,up=up,down=down",
    /* Fused expert tensors: gpt-oss, Llama 4, transformers' fused MoE. */
    "stacked:{*}layers.{L}.mlp.experts.{C}:gate_up_proj=gate_up,gate_up_proj_bias=gate_up.bias,"
    "gate_up_proj_blocks=gate_up.blocks,gate_up_proj_scales=gate_up.scales,"
    "gate_proj=gate,up_proj=up,down_proj=down,down_proj_bias=down.bias,"
    "down_proj_blocks=down.blocks,down_proj_scales=down.scales",
    "stacked:{*}layers.{L}.feed_forward.experts.{C}:gate_up_proj=gate_up,down_proj=down",
    /* Granite MoE. */
    "stacked:{*}layers.{L}.block_sparse_moe.{C}.weight:input_linear=gate_up,output_linear=down",
    /* NVIDIA Nemotron-H MoE: no gate, up and down only; per expert as the
     * checkpoints store them, stacked as transformers 5 does. */
    "expert:{*}layers.{L}.mixer.experts.{E}.{C}_proj.weight:up=up,down=down",
    "stacked:{*}layers.{L}.mixer.experts.{C}:up_proj=up,down_proj=down",
    /* JetMoE: input_linear stacks gate and up, [experts, 2 x ffn, hidden]. */
    "stacked:{*}layers.{L}.mlp.{C}.weight:input_linear=gate_up,output_linear=down",
    /* GGUF (llama.cpp): stacked, and the older one-tensor-per-expert form. */
    "stacked:blk.{L}.ffn_{C}_exps.weight:gate=gate,up=up,down=down,gate_up=gate_up",
    "expert:blk.{L}.ffn_{C}.{E}.weight:gate=gate,up=up,down=down",
};

static const struct {
    const char *suffix; /* replaces ".weight" in the tensor name */
    const char *comp;   /* appended to the component name */
} companions[] = {
    {".scales", ".scales"},
    {".biases", ".biases"},
    {".bias", ".bias"},
    {".weight_scale_inv", ".scale_inv"},
};
#define N_COMPANIONS (sizeof companions / sizeof companions[0])

/* Longest component name a map may give (room left for a companion suffix). */
#define DST_MAX (SMOE_COMPONENT_NAME_MAX - 16)

static void pattern_free(pack_pattern *p)
{
    for (uint32_t i = 0; i < p->n_map; i++) {
        free(p->src[i]);
        free(p->dst[i]);
    }
    free(p->src);
    free(p->dst);
    free(p->spec);
    free(p->tmpl);
    memset(p, 0, sizeof *p);
}

void pack_patterns_free(pack_patterns *ps)
{
    if (!ps)
        return;
    for (uint32_t i = 0; i < ps->n; i++)
        pattern_free(&ps->p[i]);
    free(ps->p);
    ps->p = NULL;
    ps->n = 0;
    ps->n_user = 0;
}

static int comp_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* Check TEMPLATE's placeholders; count each kind. */
static int check_template(const char *spec, const char *t, pack_pattern_kind kind)
{
    int nl = 0, ne = 0, nc = 0, nw = 0;
    for (const char *p = t; *p; p++) {
        if (*p == '}')
            return smoe__fail(SMOE_EINVAL, "pattern '%s': unmatched '}'", spec);
        if (*p != '{')
            continue;
        if (!strncmp(p, "{L}", 3))
            nl++;
        else if (!strncmp(p, "{E}", 3))
            ne++;
        else if (!strncmp(p, "{C}", 3))
            nc++;
        else if (!strncmp(p, "{*}", 3))
            nw++;
        else
            return smoe__fail(SMOE_EINVAL, "pattern '%s': unknown placeholder at '%.8s' "
                              "(expected {L}, {E}, {C} or {*})", spec, p);
        p += 2;
    }
    if (nw > 2)
        return smoe__fail(SMOE_EINVAL, "pattern '%s': at most two {*}", spec);
    if (nl != 1 || nc != 1)
        return smoe__fail(SMOE_EINVAL, "pattern '%s': the template needs {L} and {C} once each",
                          spec);
    if (kind == PACK_PAT_EXPERT && ne != 1)
        return smoe__fail(SMOE_EINVAL, "pattern '%s': an expert pattern needs {E} once", spec);
    if (kind == PACK_PAT_STACKED && ne != 0)
        return smoe__fail(SMOE_EINVAL, "pattern '%s': a stacked pattern has no {E} (the "
                          "expert is the tensor's outermost dimension)", spec);
    return 0;
}

static int parse_map(pack_pattern *p, const char *map)
{
    const char *spec = p->spec;
    while (*map) {
        const char *comma = strchr(map, ',');
        size_t len = comma ? (size_t)(comma - map) : strlen(map);
        const char *eq = memchr(map, '=', len);
        if (!eq || eq == map || eq == map + len - 1)
            return smoe__fail(SMOE_EINVAL, "pattern '%s': map entry '%.*s' is not SRC=DST",
                              spec, (int)len, map);
        size_t sl = (size_t)(eq - map), dl = len - sl - 1;
        if (dl >= DST_MAX)
            return smoe__fail(SMOE_EINVAL, "pattern '%s': component name '%.*s' is longer "
                              "than %d bytes", spec, (int)dl, eq + 1, DST_MAX - 1);
        for (size_t i = 0; i < dl; i++)
            if ((unsigned char)eq[1 + i] < 0x20 || eq[1 + i] == '=')
                return smoe__fail(SMOE_EINVAL, "pattern '%s': bad character in component "
                                  "name '%.*s'", spec, (int)dl, eq + 1);
        char **ns = realloc(p->src, (p->n_map + 1) * sizeof *ns);
        if (ns)
            p->src = ns;
        char **nd = realloc(p->dst, (p->n_map + 1) * sizeof *nd);
        if (nd)
            p->dst = nd;
        if (!ns || !nd)
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        p->src[p->n_map] = tool_strndup(map, sl);
        p->dst[p->n_map] = tool_strndup(eq + 1, dl);
        p->n_map++;
        if (!p->src[p->n_map - 1] || !p->dst[p->n_map - 1])
            return smoe__fail(SMOE_ENOMEM, "out of memory");
        for (uint32_t i = 0; i + 1 < p->n_map; i++)
            if (!strcmp(p->src[i], p->src[p->n_map - 1]) ||
                !strcmp(p->dst[i], p->dst[p->n_map - 1]))
                return smoe__fail(SMOE_EINVAL, "pattern '%s': '%s=%s' repeats a name", spec,
                                  p->src[p->n_map - 1], p->dst[p->n_map - 1]);
        map += len + (comma ? 1 : 0);
        if (comma && !*map)
            return smoe__fail(SMOE_EINVAL, "pattern '%s': trailing ','", spec);
    }
    return 0;
}

static int parse_pattern(pack_pattern *p, const char *spec)
{
    memset(p, 0, sizeof *p);
    if (!(p->spec = strdup(spec)))
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    const char *c1 = strchr(spec, ':');
    if (!c1)
        return smoe__fail(SMOE_EINVAL, "pattern '%s': expected KIND:TEMPLATE[:SRC=DST,...]",
                          spec);
    size_t kl = (size_t)(c1 - spec);
    if (kl == 6 && !strncmp(spec, "expert", 6))
        p->kind = PACK_PAT_EXPERT;
    else if (kl == 7 && !strncmp(spec, "stacked", 7))
        p->kind = PACK_PAT_STACKED;
    else
        return smoe__fail(SMOE_EINVAL, "pattern '%s': kind '%.*s' is neither 'expert' nor "
                          "'stacked'", spec, (int)kl, spec);
    const char *t = c1 + 1;
    const char *c2 = strchr(t, ':');
    p->tmpl = c2 ? tool_strndup(t, (size_t)(c2 - t)) : strdup(t);
    if (!p->tmpl)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    if (!*p->tmpl)
        return smoe__fail(SMOE_EINVAL, "pattern '%s': empty template", spec);
    int rc = check_template(spec, p->tmpl, p->kind);
    if (rc == 0 && c2) {
        if (!c2[1])
            return smoe__fail(SMOE_EINVAL, "pattern '%s': empty map after ':'", spec);
        rc = parse_map(p, c2 + 1);
    }
    return rc;
}

static int append(pack_patterns *ps, const char *spec, int front)
{
    pack_pattern *n = realloc(ps->p, (ps->n + 1) * sizeof *n);
    if (!n)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    ps->p = n;
    pack_pattern p;
    int rc = parse_pattern(&p, spec);
    if (rc < 0) {
        pattern_free(&p);
        return rc;
    }
    /* User patterns go after the ones already added, before the built-ins. */
    uint32_t at = front ? ps->n_user++ : ps->n;
    memmove(&ps->p[at + 1], &ps->p[at], (ps->n - at) * sizeof *ps->p);
    ps->p[at] = p;
    ps->n++;
    return 0;
}

int pack_patterns_init(pack_patterns *ps)
{
    ps->p = NULL;
    ps->n = 0;
    ps->n_user = 0;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        int rc = append(ps, builtin[i], 0);
        if (rc < 0) {
            pack_patterns_free(ps);
            return rc;
        }
    }
    return 0;
}

int pack_patterns_add(pack_patterns *ps, const char *spec)
{
    return append(ps, spec, 1);
}

typedef struct mstate {
    const pack_pattern *p;
    uint32_t layer, expert;
    int32_t map; /* which SRC matched {C}, -1 for a free {C} */
    const char *c;
    size_t clen;
} mstate;

/*
 * Match template t against s from here on; 1 on a match with m filled.
 * Numbers take 1..9 digits, {*} and a free {C} try the longest text first
 * and back off.
 */
static int match_at(mstate *m, const char *t, const char *s)
{
    while (*t && *t != '{') {
        if (*t != *s)
            return 0;
        t++;
        s++;
    }
    if (!*t)
        return *s == 0;
    char ph = t[1];
    t += 3;
    if (ph == 'L' || ph == 'E') {
        size_t nd = 0;
        while (nd < 9 && s[nd] >= '0' && s[nd] <= '9')
            nd++;
        for (; nd > 0; nd--) {
            uint32_t v = 0;
            for (size_t i = 0; i < nd; i++)
                v = v * 10 + (uint32_t)(s[i] - '0');
            if (match_at(m, t, s + nd)) {
                if (ph == 'L')
                    m->layer = v;
                else
                    m->expert = v;
                return 1;
            }
        }
        return 0;
    }
    if (ph == '*') {
        for (size_t k = strlen(s) + 1; k-- > 0;)
            if (match_at(m, t, s + k))
                return 1;
        return 0;
    }
    /* {C} */
    if (m->p->n_map) {
        for (uint32_t i = 0; i < m->p->n_map; i++) {
            size_t sl = strlen(m->p->src[i]);
            if (!strncmp(s, m->p->src[i], sl) && match_at(m, t, s + sl)) {
                m->map = (int32_t)i;
                m->c = s;
                m->clen = sl;
                return 1;
            }
        }
        return 0;
    }
    size_t n = 0;
    while (s[n] && comp_char(s[n]))
        n++;
    for (; n > 0; n--)
        if (n < DST_MAX && match_at(m, t, s + n)) {
            m->map = -1;
            m->c = s;
            m->clen = n;
            return 1;
        }
    return 0;
}

static int match_one(const pack_pattern *p, uint32_t index, const char *name, uint32_t companion,
                     pack_match *out)
{
    mstate m = {p, 0, 0, -1, NULL, 0};
    if (!match_at(&m, p->tmpl, name))
        return 0;
    memset(out, 0, sizeof *out);
    out->pattern = index;
    out->kind = p->kind;
    out->layer = m.layer;
    out->expert = m.expert;
    const char *dst = m.map >= 0 ? p->dst[m.map] : NULL;
    size_t dl = dst ? strlen(dst) : m.clen;
    memcpy(out->comp, dst ? dst : m.c, dl);
    out->comp[dl] = 0;
    if (companion)
        strcat(out->comp, companions[companion - 1].comp);
    out->order = (uint32_t)(m.map >= 0 ? m.map : 0) * (N_COMPANIONS + 1) + companion;
    return 1;
}

int pack_patterns_match(const pack_patterns *ps, const char *name, pack_match *m)
{
    size_t nl = strlen(name);
    if (nl >= PACK_NAME_MAX)
        return 0;
    for (uint32_t i = 0; i < ps->n; i++) {
        const pack_pattern *p = &ps->p[i];
        if (match_one(p, i, name, 0, m))
            return 1;
        size_t tl = strlen(p->tmpl);
        if (tl < 7 || strcmp(p->tmpl + tl - 7, ".weight"))
            continue;
        for (uint32_t k = 0; k < N_COMPANIONS; k++) {
            size_t sl = strlen(companions[k].suffix);
            if (nl <= sl || strcmp(name + nl - sl, companions[k].suffix))
                continue;
            char base[PACK_NAME_MAX + 8];
            memcpy(base, name, nl - sl);
            memcpy(base + nl - sl, ".weight", 8);
            if (match_one(p, i, base, k + 1, m))
                return 1;
        }
    }
    return 0;
}
