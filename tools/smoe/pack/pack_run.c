/* pack_run.c - `smoe pack` and `smoe index` as one call each: open the
 * source, plan, write. */
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "pack.h"
#include "tool.h"

/* A model name from the source path: its last component, less the suffix. */
static int default_model_name(pack_source *s, const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    char *p = tool_strndup(path, n);
    if (!p)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    static const char *const suffixes[] = {".safetensors", ".gguf", ".json"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t bl = strlen(base), sl = strlen(suffixes[i]);
        if (bl > sl && !strcmp(base + bl - sl, suffixes[i]))
            base[bl - sl] = 0;
    }
    /* An index file names the checkpoint by its directory. */
    if (!strcmp(base, "model.safetensors.index") || !strcmp(base, "model")) {
        *(base > p ? base - 1 : base) = 0;
        char *up = strrchr(p, '/');
        base = up ? up + 1 : p;
    }
    int rc = *base ? pack_meta_set(&s->meta.model, base) : 0;
    free(p);
    return rc;
}

int pack_prepare(const char *source, const pack_patterns *ps, uint32_t component_align,
                 pack_source *s, pack_plan *plan)
{
    pack_patterns builtin;
    int have_builtin = 0;
    pack_source_init(s);
    memset(plan, 0, sizeof *plan);
    int rc = 0;
    if (!ps) {
        if ((rc = pack_patterns_init(&builtin)) < 0)
            return rc;
        have_builtin = 1;
        ps = &builtin;
    }
    rc = pack_source_open(s, source);
    if (rc == 0 && !s->meta.model)
        rc = default_model_name(s, source);
    if (rc == 0)
        rc = pack_plan_build(plan, s, ps, component_align);
    if (have_builtin)
        pack_patterns_free(&builtin);
    return rc;
}

int pack_run(const char *source, const pack_patterns *ps, const pack_opts *o,
             pack_result *r)
{
    pack_source s;
    pack_plan plan;
    memset(r, 0, sizeof *r);
    int rc = pack_prepare(source, ps, o->component_align, &s, &plan);
    if (rc == 0)
        rc = pack_write(&s, &plan, o, r);
    pack_plan_free(&plan);
    pack_source_free(&s);
    return rc;
}

int pack_index_run(const char *source, const pack_patterns *ps, const pack_index_opts *o,
                   pack_index_result *r)
{
    pack_source s;
    pack_plan plan;
    memset(r, 0, sizeof *r);
    int rc = pack_prepare(source, ps, 0, &s, &plan);
    if (rc == 0)
        rc = pack_index_write(&s, &plan, o, r);
    pack_plan_free(&plan);
    pack_source_free(&s);
    return rc;
}
