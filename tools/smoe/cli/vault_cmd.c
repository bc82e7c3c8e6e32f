/* vault_cmd.c - what the one-vault subcommands share (vault_cmd.h). */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "pack.h"
#include "vault_cmd.h"

int vault_args_parse(const char *cmd, void (*usage)(FILE *f), int with_json, int argc,
                     char **argv, vault_args *a)
{
    memset(a, 0, sizeof *a);
    const tool_opt opts[] = {
        TOOL_FLAG("--no-scout", &a->no_scout, 1),
        TOOL_TEXT("--scout", &a->scout),
        {with_json ? "--json" : NULL, NULL, TOOL_OPT_FLAG, 0, &a->json, 1},
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = cmd, .usage = usage, .opts = opts, .operand = &a->path,
        .min_operands = 1, .max_operands = 1, .no_value = "%s needs a file",
        .extra = "only one vault, please ('%s' and '%s')", .missing = "which vault?",
        .hint = 1,
    };
    return tool_args_parse(&cli, argc, argv, NULL, NULL);
}

char *vault_args_scout(const vault_args *a, const smoe__vault *v)
{
    if (a->scout)
        return strdup(a->scout);
    return a->no_scout ? NULL : pack_scout_find(a->path, smoe__vault_meta(v, "scout"));
}

typedef struct blob_ref {
    uint64_t offset;
    uint32_t key;
} blob_ref;

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const blob_ref *)a)->offset, y = ((const blob_ref *)b)->offset;
    return x < y ? -1 : x > y;
}

uint32_t *vault_keys_by_offset(const smoe__vault *v, uint32_t *n)
{
    size_t total = (size_t)v->layers * v->experts;
    blob_ref *refs = malloc((total ? total : 1) * sizeof *refs);
    uint32_t *keys = malloc((total ? total : 1) * sizeof *keys);
    *n = 0;
    if (!refs || !keys) {
        free(refs);
        free(keys);
        return NULL;
    }
    for (uint32_t k = 0; k < total; k++)
        if (v->index[k].present)
            refs[(*n)++] = (blob_ref){v->index[k].offset, k};
    qsort(refs, *n, sizeof *refs, by_offset);
    for (uint32_t i = 0; i < *n; i++)
        keys[i] = refs[i].key;
    free(refs);
    return keys;
}
