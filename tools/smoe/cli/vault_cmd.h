/*
 * vault_cmd.h - what the subcommands that examine one vault share: the
 * arguments of `smoe inspect` and `smoe verify` (VAULT [--json] [--scout
 * FILE | --no-scout]) and the scout file they name, and the vault's blobs
 * in file order (verify, read).
 */
#ifndef SMOE_TOOL_VAULT_CMD_H
#define SMOE_TOOL_VAULT_CMD_H

#include <stdint.h>
#include <stdio.h>

#include "smoe/smoe.h"
#include "smoe_tier.h"

typedef struct vault_args {
    const char *path;  /* VAULT */
    const char *scout; /* --scout FILE */
    int no_scout;      /* --no-scout */
    int json;          /* --json (with_json only) */
} vault_args;

/* Parse argv for cmd (tool_args_parse's return convention). */
int vault_args_parse(const char *cmd, void (*usage)(FILE *f), int with_json, int argc,
                     char **argv, vault_args *a);
/* The scout file to check: --scout, else (unless --no-scout) the one the
 * vault's metadata names or NAME.scout when it exists. malloc'd, or NULL. */
char *vault_args_scout(const vault_args *a, const smoe__vault *v);

/* The keys (layer * experts + expert) of v's present blobs in the order
 * they lie in the file (an index vault's: by source file, then offset);
 * *n gets their count. malloc'd, NULL when out of
 * memory. */
uint32_t *vault_keys_by_offset(const smoe__vault *v, uint32_t *n);

/* The hash a claimed blob of v is recorded with: XXH3 of a packed blob's
 * payload, of an index vault's components in order (0 when out of memory). */
uint64_t vault_blob_hash(smoe_stream *s, const smoe__vault *v, const smoe_blob *b);

#endif
