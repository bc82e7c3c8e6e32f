/*
 * trace.c - reading routing traces (docs/trace-format.md).
 *
 * zlib's gzgets reads plain and gzip files alike. Every check names the
 * file and the line; nothing is trusted before it is checked.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "trace.h"
#include "tool.h"

/* Room for element n of an array of `size`-byte elements with *cap
 * allocated (doubling from `first`): the array, moved if it grew, or NULL
 * when out of memory (the old one is kept). */
static void *vec_room(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return v;
    size_t c = *cap ? *cap * 2 : first;
    void *nv = realloc(v, c * size);
    if (nv)
        *cap = c;
    return nv;
}

/* Growable uint32 array. */
typedef struct u32vec {
    uint32_t *v;
    size_t n, cap;
} u32vec;

static int u32vec_push(u32vec *a, uint32_t x)
{
    uint32_t *v = vec_room(a->v, a->n, &a->cap, sizeof *v, 1024);
    if (!v)
        return -1;
    a->v = v;
    a->v[a->n++] = x;
    return 0;
}

typedef struct sizevec {
    size_t *v;
    size_t n, cap;
} sizevec;

static int sizevec_push(sizevec *a, size_t x)
{
    size_t *v = vec_room(a->v, a->n, &a->cap, sizeof *v, 256);
    if (!v)
        return -1;
    a->v = v;
    a->v[a->n++] = x;
    return 0;
}

typedef struct parser {
    const char *path;
    unsigned long line;
    char *err;
    size_t errlen;
    /* header values; 0 = not given */
    uint32_t h_layers, h_experts, h_topk;
    u32vec layer, off, ids, spec_off, spec, tok_num;
    sizevec tok_row, req_tok;
    int64_t last_token, last_layer; /* -1 before the first row */
    uint32_t max_layer, max_expert, max_k, max_spec;
    int any_row;
} parser;

static int fail(parser *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->line)
        snprintf(p->err, p->errlen, "%s:%lu: %s", p->path, p->line, msg);
    else
        snprintf(p->err, p->errlen, "%s: %s", p->path, msg);
    return -1;
}

/* Parse a decimal number at *s (after blanks); 1 on success, 0 if no digit. */
static int parse_num(parser *p, const char **s, uint32_t *out, int *overflow)
{
    const char *c = *s;
    while (*c == ' ' || *c == '\t')
        c++;
    if (*c < '0' || *c > '9') {
        *s = c;
        return 0;
    }
    uint64_t v = 0;
    while (*c >= '0' && *c <= '9') {
        v = v * 10 + (uint64_t)(*c - '0');
        if (v > UINT32_MAX) {
            *overflow = 1;
            return 0;
        }
        c++;
    }
    (void)p;
    *s = c;
    *out = (uint32_t)v;
    return 1;
}

static int header_key(parser *p, const char *key, uint32_t *slot, const char *val,
                      uint32_t min, uint32_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (end == val || (*end && *end != ' ' && *end != '\t') || errno || val[0] == '-' ||
        v < min || v > max)
        return fail(p, "header '%s=': expected an integer in %u..%u", key, min, max);
    if (*slot && *slot != v)
        return fail(p, "header '%s=%llu' contradicts the earlier '%s=%u'", key, v, key, *slot);
    *slot = (uint32_t)v;
    return 0;
}

static int parse_comment(parser *p, tool_trace *t, const char *s)
{
    s++; /* '#' */
    while (*s == ' ' || *s == '\t')
        s++;
    if (!strncmp(s, "request", 7) && (s[7] == ' ' || s[7] == '\t')) {
        const char *c = s + 7;
        uint32_t n;
        int ovf = 0;
        if (parse_num(p, &c, &n, &ovf)) {
            while (*c == ' ' || *c == '\t')
                c++;
            if (*c == '\0') {
                /* An empty request (two request lines in a row) is dropped. */
                size_t first = p->tok_num.n;
                if (p->req_tok.n && p->req_tok.v[p->req_tok.n - 1] == first)
                    return 0;
                return sizevec_push(&p->req_tok, first) ? fail(p, "out of memory") : 0;
            }
        }
        return fail(p, "expected '# request N' with a decimal N");
    }
    if (!strncmp(s, "source:", 7)) {
        const char *v = s + 7;
        while (*v == ' ' || *v == '\t')
            v++;
        if (!t->source) {
            t->source = strdup(v);
            if (!t->source)
                return fail(p, "out of memory");
        }
    }
    /* key=value words anywhere in the comment */
    const char *w = s;
    while (*w) {
        while (*w == ' ' || *w == '\t')
            w++;
        const char *we = w;
        while (*we && *we != ' ' && *we != '\t')
            we++;
        const char *eq = memchr(w, '=', (size_t)(we - w));
        if (eq) {
            size_t kl = (size_t)(eq - w);
            const char *val = eq + 1;
            int rc = 0;
            if (kl == 6 && !strncmp(w, "layers", 6))
                rc = header_key(p, "layers", &p->h_layers, val, 1, TRACE_MAX_SHAPE);
            else if (kl == 7 && !strncmp(w, "experts", 7))
                rc = header_key(p, "experts", &p->h_experts, val, 1, TRACE_MAX_SHAPE);
            else if ((kl == 4 && !strncmp(w, "topk", 4)) || (kl == 5 && !strncmp(w, "top_k", 5)))
                rc = header_key(p, "topk", &p->h_topk, val, 1, TRACE_MAX_K);
            else if (kl == 5 && !strncmp(w, "model", 5) && !t->model) {
                t->model = tool_strndup(val, (size_t)(we - val));
                if (!t->model)
                    return fail(p, "out of memory");
            }
            if (rc)
                return rc;
        }
        w = we;
    }
    return 0;
}

/* "token layer": the numbers and where they may stand. */
static int parse_head(parser *p, const char **cp, uint32_t *token, uint32_t *layer)
{
    int ovf = 0;
    const char *s = *cp, *c = s;
    if (!parse_num(p, &c, token, &ovf))
        return fail(p, ovf ? "token number exceeds 4294967295"
                           : "expected 'token layer e1 ... ek [| s1 ...]', found '%.40s'", s);
    if (*c != ' ' && *c != '\t')
        return fail(p, "unexpected '%.20s' after token %u: expected a space", c, *token);
    if (!parse_num(p, &c, layer, &ovf))
        return fail(p, ovf ? "layer number exceeds 4294967295"
                           : "expected a layer number after token %u", *token);
    if (*c != ' ' && *c != '\t' && *c != '\0')
        return fail(p, "unexpected '%.20s' after layer %u: expected a space", c, *layer);
    if (p->h_layers && *layer >= p->h_layers)
        return fail(p, "layer %u: expected < %u (layers= in the header)", *layer, p->h_layers);
    if (*layer >= TRACE_MAX_SHAPE)
        return fail(p, "layer %u: expected < %u", *layer, TRACE_MAX_SHAPE);
    *cp = c;
    return 0;
}

/* Whether the row starts a new token (*new_token), and that tokens never
 * decrease and a token's layers increase. */
static int check_order(parser *p, uint32_t token, uint32_t layer, int *new_token)
{
    if (p->last_token >= 0 && (int64_t)token < p->last_token)
        return fail(p, "token %u after token %lld: token numbers must not decrease", token,
                    (long long)p->last_token);
    /* The first row after '# request N' always starts a token. */
    int req_start = p->req_tok.n && p->req_tok.v[p->req_tok.n - 1] == p->tok_num.n;
    *new_token = p->last_token < 0 || (int64_t)token != p->last_token || req_start;
    if (req_start && p->last_token >= 0 && (int64_t)token == p->last_token)
        return fail(p, "token %u continues across '# request': expected a new token number",
                    token);
    if (!*new_token && (int64_t)layer <= p->last_layer)
        return fail(p, "token %u lists layer %u after layer %lld: layers of one token must "
                    "increase", token, layer, (long long)p->last_layer);
    return 0;
}

/* Expert e, ranked (in_spec 0) or speculative, into the row's lists;
 * seen[0 .. *k + *m) are the row's experts so far. */
static int add_expert(parser *p, uint32_t e, int in_spec, uint32_t *seen, uint32_t *k,
                      uint32_t *m)
{
    if (p->h_experts && e >= p->h_experts)
        return fail(p, "expert %u: expected < %u (experts= in the header)", e, p->h_experts);
    if (e >= TRACE_MAX_SHAPE)
        return fail(p, "expert %u: expected < %u", e, TRACE_MAX_SHAPE);
    for (uint32_t i = 0; i < *k + *m; i++)
        if (seen[i] == e)
            return fail(p, "expert %u appears twice: the experts of a line must be distinct", e);
    if (!in_spec) {
        if (*k == TRACE_MAX_K)
            return fail(p, "more than %u ranked experts", TRACE_MAX_K);
        if (p->h_topk && *k == p->h_topk)
            return fail(p, "more than %u ranked experts (topk= in the header)", p->h_topk);
        seen[*k + *m] = e;
        ++*k;
        if (u32vec_push(&p->ids, e))
            return fail(p, "out of memory");
    } else {
        if (*m == TRACE_MAX_SPEC)
            return fail(p, "more than %u speculative ranks", TRACE_MAX_SPEC);
        seen[*k + *m] = e;
        ++*m;
        if (u32vec_push(&p->spec, e))
            return fail(p, "out of memory");
    }
    if (e > p->max_expert)
        p->max_expert = e;
    return 0;
}

/* "e1 ... ek [| s1 ...]": *k ranked experts, *m speculative ranks. */
static int parse_experts(parser *p, const char *c, uint32_t *k, uint32_t *m)
{
    uint32_t seen[TRACE_MAX_K + TRACE_MAX_SPEC], e;
    int in_spec = 0, ovf = 0, rc;
    *k = *m = 0;
    for (;;) {
        while (*c == ' ' || *c == '\t')
            c++;
        if (*c == '\0')
            return 0;
        if (*c == '|') {
            if (in_spec)
                return fail(p, "second '|': expected one separator before the speculative ranks");
            if (*k == 0)
                return fail(p, "'|' before any expert: expected at least one ranked expert");
            in_spec = 1;
            c++;
            continue;
        }
        if (!parse_num(p, &c, &e, &ovf))
            return fail(p, ovf ? "expert number exceeds 4294967295"
                               : "unexpected '%.20s': expected an expert number or '|'", c);
        if (*c && *c != ' ' && *c != '\t' && *c != '|')
            return fail(p, "unexpected '%.20s' after expert %u: expected a space", c, e);
        if ((rc = add_expert(p, e, in_spec, seen, k, m)) != 0)
            return rc;
    }
}

/* The row's place: a new token when it starts one, its layer and offsets. */
static int append_row(parser *p, uint32_t token, uint32_t layer, int new_token, uint32_t k,
                      uint32_t m)
{
    if (new_token) {
        if (!p->req_tok.n && sizevec_push(&p->req_tok, 0))
            return fail(p, "out of memory");
        if (sizevec_push(&p->tok_row, p->layer.n) || u32vec_push(&p->tok_num, token))
            return fail(p, "out of memory");
    }
    if (u32vec_push(&p->layer, layer) || u32vec_push(&p->off, (uint32_t)p->ids.n) ||
        u32vec_push(&p->spec_off, (uint32_t)p->spec.n))
        return fail(p, "out of memory");
    p->last_token = token;
    p->last_layer = layer;
    if (layer > p->max_layer)
        p->max_layer = layer;
    if (k > p->max_k)
        p->max_k = k;
    if (m > p->max_spec)
        p->max_spec = m;
    p->any_row = 1;
    return 0;
}

static int parse_row(parser *p, const char *s)
{
    uint32_t token = 0, layer = 0, k = 0, m = 0;
    int new_token = 0, rc;
    const char *c = s;
    if ((rc = parse_head(p, &c, &token, &layer)) != 0 ||
        (rc = check_order(p, token, layer, &new_token)) != 0 ||
        (rc = parse_experts(p, c, &k, &m)) != 0)
        return rc;
    if (k == 0)
        return fail(p, "token %u layer %u: expected at least one expert", token, layer);
    if (p->ids.n > UINT32_MAX - TRACE_MAX_K || p->spec.n > UINT32_MAX - TRACE_MAX_SPEC)
        return fail(p, "too many experts in one trace (more than 4294967295)");
    return append_row(p, token, layer, new_token, k, m);
}

static void parser_free(parser *p)
{
    free(p->layer.v);
    free(p->off.v);
    free(p->ids.v);
    free(p->spec_off.v);
    free(p->spec.v);
    free(p->tok_num.v);
    free(p->tok_row.v);
    free(p->req_tok.v);
}

/* Row offsets were pushed at the row's end; turn them into n + 1 starts. */
static int finish(parser *p, tool_trace *t)
{
    size_t n = p->layer.n;
    t->n_rows = n;
    t->row_layer = p->layer.v;
    p->layer.v = NULL;
    t->row_off = malloc((n + 1) * sizeof *t->row_off);
    t->spec_off = malloc((n + 1) * sizeof *t->spec_off);
    t->tok_row = malloc((p->tok_row.n + 1) * sizeof *t->tok_row);
    t->req_tok = malloc((p->req_tok.n + 1) * sizeof *t->req_tok);
    if (!t->row_off || !t->spec_off || !t->tok_row || !t->req_tok)
        return fail(p, "out of memory");
    t->row_off[0] = 0;
    t->spec_off[0] = 0;
    for (size_t r = 0; r < n; r++) {
        t->row_off[r + 1] = p->off.v[r];
        t->spec_off[r + 1] = p->spec_off.v[r];
    }
    t->ids = p->ids.v;
    p->ids.v = NULL;
    t->spec = p->spec.v;
    p->spec.v = NULL;
    t->n_tokens = p->tok_row.n;
    memcpy(t->tok_row, p->tok_row.v, p->tok_row.n * sizeof *t->tok_row);
    t->tok_row[t->n_tokens] = n;
    t->tok_num = p->tok_num.v;
    p->tok_num.v = NULL;
    /* A request line after the last record starts no request. */
    while (p->req_tok.n && p->req_tok.v[p->req_tok.n - 1] == p->tok_row.n)
        p->req_tok.n--;
    t->n_requests = p->req_tok.n;
    if (p->req_tok.n)
        memcpy(t->req_tok, p->req_tok.v, p->req_tok.n * sizeof *t->req_tok);
    t->req_tok[t->n_requests] = t->n_tokens;

    t->layers = p->h_layers ? p->h_layers : p->max_layer + 1;
    t->experts = p->h_experts ? p->h_experts : p->max_expert + 1;
    t->shape_from_header = p->h_layers && p->h_experts;
    t->max_k = p->max_k;
    t->max_spec = p->max_spec;
    t->top_k = p->h_topk ? p->h_topk : p->max_k;
    return 0;
}

int tool_trace_load(tool_trace *t, const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    parser p;
    memset(&p, 0, sizeof p);
    p.path = path;
    p.err = err;
    p.errlen = errlen;
    p.last_token = -1;
    p.last_layer = -1;

    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        fail(&p, "cannot open: %s", strerror(errno ? errno : ENOMEM));
        return -1;
    }
    gzbuffer(gz, 1u << 17);
    char line[TRACE_LINE_MAX + 1];
    int rc = 0;
    while (!rc) {
        if (!gzgets(gz, line, sizeof line)) {
            int zerr;
            const char *zmsg = gzerror(gz, &zerr);
            if (!gzeof(gz) || (zerr != Z_OK && zerr != Z_BUF_ERROR)) {
                p.line++;
                rc = fail(&p, "read failed: %s", zerr == Z_ERRNO ? strerror(errno) : zmsg);
            } else if (zerr == Z_BUF_ERROR) {
                rc = fail(&p, "the gzip stream is truncated");
            }
            break;
        }
        p.line++;
        size_t len = strlen(line);
        if (len == TRACE_LINE_MAX && line[len - 1] != '\n') {
            rc = fail(&p, "line longer than %d bytes", TRACE_LINE_MAX - 1);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0')
            continue;
        if (*s == '#')
            rc = parse_comment(&p, t, s);
        else
            rc = parse_row(&p, s);
    }
    gzclose(gz);
    if (!rc && !p.any_row) {
        p.line = 0;
        rc = fail(&p, "no records: expected lines 'token layer e1 ... ek'");
    }
    if (!rc) {
        p.line = 0;
        rc = finish(&p, t);
    }
    parser_free(&p);
    if (rc)
        tool_trace_free(t);
    return rc;
}

void tool_trace_free(tool_trace *t)
{
    if (!t)
        return;
    free(t->source);
    free(t->model);
    free(t->row_layer);
    free(t->row_off);
    free(t->ids);
    free(t->spec_off);
    free(t->spec);
    free(t->tok_row);
    free(t->tok_num);
    free(t->req_tok);
    memset(t, 0, sizeof *t);
}

double tool_trace_overlap(const tool_trace *t, size_t n_tokens)
{
    if (n_tokens > t->n_tokens)
        n_tokens = t->n_tokens;
    if (n_tokens < 2)
        return 0.0;
    size_t keys = (size_t)t->layers * t->experts;
    uint32_t *mark = calloc(keys, sizeof *mark);
    if (!mark)
        return 0.0;
    double sum = 0.0;
    size_t pairs = 0;
    for (size_t tok = 0; tok < n_tokens; tok++) {
        uint64_t shared = 0, total = 0;
        for (size_t r = t->tok_row[tok]; r < t->tok_row[tok + 1]; r++)
            for (uint32_t i = t->row_off[r]; i < t->row_off[r + 1]; i++) {
                size_t key = (size_t)t->row_layer[r] * t->experts + t->ids[i];
                /* keys of one token are distinct, so test-then-mark is exact */
                if (tok && mark[key] == tok)
                    shared++;
                mark[key] = (uint32_t)tok + 1;
                total++;
            }
        if (tok && total) {
            sum += (double)shared / (double)total;
            pairs++;
        }
    }
    free(mark);
    return pairs ? sum / (double)pairs : 0.0;
}
