/*
 * trace.h - routing traces (docs/trace-format.md): reading one into memory.
 *
 * A trace is a sequence of rows, one per (token, layer), each holding the
 * ranked experts and optionally the next gate ranks. Rows are grouped into
 * tokens, tokens into requests. Plain and gzip files read alike (zlib).
 */
#ifndef SMOE_TOOL_TRACE_H
#define SMOE_TOOL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_MAX_K 64        /* ranked experts per line */
#define TRACE_MAX_SPEC 64     /* speculative ranks per line */
#define TRACE_MAX_SHAPE 65536 /* layers, experts */
#define TRACE_LINE_MAX 4096   /* bytes per line, newline included */

typedef struct tool_trace {
    char *source;         /* "# source:" text or NULL */
    char *model;          /* "model=" or NULL */
    uint32_t layers;      /* header value, else the largest layer + 1 */
    uint32_t experts;     /* header value, else the largest expert + 1 */
    uint32_t top_k;       /* header value, else max_k */
    uint32_t max_k;       /* most ranked experts on one line */
    uint32_t max_spec;    /* most speculative ranks on one line (0: none) */
    int shape_from_header;/* layers and experts both came from the header */

    size_t n_rows;
    uint32_t *row_layer;  /* n_rows */
    uint32_t *row_off;    /* n_rows + 1: experts of row r are ids[row_off[r] ..) */
    uint32_t *ids;        /* ranked experts, row after row */
    uint32_t *spec_off;   /* n_rows + 1: speculative ranks of row r in spec[] */
    uint32_t *spec;

    size_t n_tokens;
    size_t *tok_row;      /* n_tokens + 1: rows of token t are tok_row[t] .. */
    uint32_t *tok_num;    /* n_tokens: token number as written */

    size_t n_requests;
    size_t *req_tok;      /* n_requests + 1: tokens of request q */
} tool_trace;

/*
 * Read the trace at path (plain or gzip). On failure returns -1, writes
 * "path:line: what was wrong, what was expected" into err and leaves *t
 * empty (tool_trace_free is safe either way).
 */
int tool_trace_load(tool_trace *t, const char *path, char *err, size_t errlen);
void tool_trace_free(tool_trace *t);

/* Total ranked expert requests (the sum of every row's k). */
static inline uint64_t tool_trace_requests(const tool_trace *t)
{
    return t->n_rows ? t->row_off[t->n_rows] : 0;
}

/*
 * Adjacent-token overlap: the mean over consecutive token pairs of the
 * fraction of the later token's (layer, expert) set already in the earlier
 * token's set. 0 with fewer than two tokens.
 */
double tool_trace_overlap(const tool_trace *t, size_t n_tokens);

#endif
