/*
 * replay.c - routing replay, for measurement only: smoe-llama's eval
 * callback (stage.c) and libggml-smoe's SMOE_REPLAY (plugin/plugin_replay.c)
 * overwrite the router's choice with a recorded trace's, so that a model
 * with random weights routes like a real one (bench/llama). The trace is
 * read whole at open (docs/trace-format.md, uncompressed); each distinct
 * token of it is one replay token, and replay token t uses trace token
 * t mod (tokens in the trace). A layer a token does not list keeps the
 * experts of that layer's previous record.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smoe/smoe.h>

#include "replay.h"

struct sl_replay {
    uint32_t layers, k;
    uint64_t tokens;
    int32_t *ids; /* [tokens][layers][k] */
};

void sl_replay_free(sl_replay *r)
{
    if (r) {
        free(r->ids);
        free(r);
    }
}

static int header_u32(const char *line, const char *key, uint32_t *v)
{
    const char *p = strstr(line, key);
    if (!p || (p != line && p[-1] != ' ' && p[-1] != '\t'))
        return 0;
    *v = (uint32_t)strtoul(p + strlen(key), NULL, 10);
    return 1;
}

static int fail(char *err, size_t elen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t elen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, elen, fmt, ap);
    va_end(ap);
    return code;
}

/* A new token, its layers' experts those of the previous one until its
 * records say otherwise. 0, or -1 out of memory. */
static int add_token(sl_replay *r, uint64_t *cap)
{
    if (r->tokens == *cap) {
        uint64_t c = *cap ? 2 * *cap : 4096;
        int32_t *n = realloc(r->ids, sizeof *n * c * r->layers * r->k);
        if (!n)
            return -1;
        r->ids = n;
        *cap = c;
    }
    int32_t *row = &r->ids[r->tokens * r->layers * r->k];
    if (r->tokens)
        memcpy(row, row - r->layers * r->k, sizeof *row * r->layers * r->k);
    else
        for (uint32_t i = 0; i < r->layers * r->k; i++)
            row[i] = (int32_t)(i % r->k);
    r->tokens++;
    return 0;
}

int sl_replay_read(const char *path, sl_replay **out, char *err, size_t elen)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, elen, SMOE_ESYS, "replay trace %s: %s", path, strerror(errno));
    sl_replay *r = calloc(1, sizeof *r);
    if (!r) {
        fclose(f);
        return fail(err, elen, SMOE_ENOMEM, "out of memory");
    }
    int c0 = getc(f), c1 = getc(f);
    if (c0 == 0x1f && c1 == 0x8b) {
        fclose(f);
        free(r);
        return fail(err, elen, SMOE_EFORMAT, "replay trace %s: gzip-compressed; decompress it "
                    "first (gzip -dc)", path);
    }
    rewind(f);
    char line[4096];
    uint64_t lineno = 0, cap = 0, prev_tok = UINT64_MAX;
    uint32_t prev_layer = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line + strspn(line, " \t");
        if (*p == '#') {
            header_u32(p, "layers=", &r->layers);
            if (!header_u32(p, "topk=", &r->k))
                header_u32(p, "top_k=", &r->k);
            continue;
        }
        if (*p == '\n' || *p == '\r' || !*p)
            continue;
        if (!r->layers || !r->k || r->k > 64) {
            rc = fail(err, elen, SMOE_EFORMAT, "replay trace %s:%" PRIu64 ": a record before "
                      "the header's layers= and topk= (1..64)", path, lineno);
            break;
        }
        char *end;
        uint64_t tok = strtoull(p, &end, 10);
        uint32_t layer = (uint32_t)strtoul(end, &end, 10);
        if (layer >= r->layers) {
            rc = fail(err, elen, SMOE_EFORMAT, "replay trace %s:%" PRIu64 ": layer %" PRIu32
                      " is not below layers=%" PRIu32, path, lineno, layer, r->layers);
            break;
        }
        if ((tok != prev_tok || layer <= prev_layer || r->tokens == 0) && add_token(r, &cap) < 0) {
            rc = fail(err, elen, SMOE_ENOMEM, "out of memory");
            break;
        }
        prev_tok = tok;
        prev_layer = layer;
        int32_t *dst = &r->ids[((r->tokens - 1) * r->layers + layer) * r->k];
        for (uint32_t i = 0; i < r->k; i++) {
            long e = strtol(end, &p, 10);
            if (p == end || e < 0) {
                rc = fail(err, elen, SMOE_EFORMAT, "replay trace %s:%" PRIu64 ": expected %"
                          PRIu32 " experts", path, lineno, r->k);
                break;
            }
            dst[i] = (int32_t)e;
            end = p;
        }
    }
    fclose(f);
    if (rc == 0 && !r->tokens)
        rc = fail(err, elen, SMOE_EFORMAT, "replay trace %s: no records", path);
    if (rc < 0) {
        sl_replay_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int sl_replay_get(const sl_replay *r, uint64_t token, uint32_t layer, int32_t *ids, uint32_t k)
{
    if (layer >= r->layers || k != r->k)
        return -1;
    memcpy(ids, &r->ids[((token % r->tokens) * r->layers + layer) * r->k], sizeof *ids * k);
    return 0;
}

void sl_replay_shape(const sl_replay *r, uint32_t *layers, uint32_t *k, uint64_t *tokens)
{
    *layers = r->layers;
    *k = r->k;
    *tokens = r->tokens;
}
