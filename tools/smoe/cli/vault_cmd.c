/* vault_cmd.c - what the one-vault subcommands share (vault_cmd.h). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

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
    uint32_t file;
    uint64_t offset;
    uint32_t key;
} blob_ref;

static int by_offset(const void *a, const void *b)
{
    const blob_ref *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
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
    for (uint32_t k = 0; k < total; k++) {
        if (!v->index[k].present)
            continue;
        if (v->version == SMOE__VAULT_VERSION_INDEX) {
            /* where its first read starts */
            const smoe__vault_seg *sg = &v->segs[v->xent[k].first_seg];
            refs[(*n)++] = (blob_ref){sg->source, sg->file_off, k};
        } else {
            refs[(*n)++] = (blob_ref){0, v->index[k].offset, k};
        }
    }
    qsort(refs, *n, sizeof *refs, by_offset);
    for (uint32_t i = 0; i < *n; i++)
        keys[i] = refs[i].key;
    free(refs);
    return keys;
}

uint64_t vault_blob_hash(smoe_stream *s, const smoe__vault *v, const smoe_blob *b)
{
    if (v->version != SMOE__VAULT_VERSION_INDEX)
        return smoe__hash(b->data, (size_t)b->size); /* the payload, gaps included */
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    smoe_component c;
    for (uint32_t k = 0; smoe_blob_component(s, b, k, &c) == 0; k++)
        XXH3_64bits_update(st, (const char *)b->data + c.offset, (size_t)c.nbytes);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}
