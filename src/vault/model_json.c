/*
 * model_json.c - the strict JSON scanner of model_json.h. Every read of a
 * byte is behind a check of c->i against c->n; nesting is bounded
 * (JSON_DEPTH), so a header of brackets cannot exhaust the stack.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "smoe/smoe.h"
#include "vault/model_json.h"

#define JSON_DEPTH 8

int smoe__json_fail(smoe__jcur *c, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return smoe__hdr_fail(c->h, SMOE_EFORMAT, "its JSON header, at byte %zu of the file: %s",
                          8 + c->i, what);
}

static void ws(smoe__jcur *c)
{
    while (c->i < c->n &&
           (c->p[c->i] == ' ' || c->p[c->i] == '\t' || c->p[c->i] == '\n' || c->p[c->i] == '\r'))
        c->i++;
}

/* Whitespace, then ch consumed: 1, else 0 (nothing consumed). */
static int take(smoe__jcur *c, char ch)
{
    ws(c);
    if (c->i < c->n && c->p[c->i] == (uint8_t)ch) {
        c->i++;
        return 1;
    }
    return 0;
}

int smoe__json_open(smoe__jcur *c, char ch)
{
    return take(c, ch) ? 0 : smoe__json_fail(c, "expected '%c'", ch);
}

int smoe__json_more(smoe__jcur *c, char close, int *first, int *rc)
{
    if (take(c, close))
        return 0;
    if (!*first && !take(c, ',')) {
        *rc = smoe__json_fail(c, "expected ',' or '%c'", close);
        return 0;
    }
    *first = 0;
    return 1;
}

static int hex(uint8_t ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

int smoe__json_string(smoe__jcur *c, const uint8_t **s, size_t *n)
{
    if (!take(c, '"'))
        return smoe__json_fail(c, "expected a string");
    size_t start = c->i;
    while (c->i < c->n && c->p[c->i] != '"') {
        uint8_t ch = c->p[c->i];
        if (ch < 0x20)
            return smoe__json_fail(c, "a control byte 0x%02x in a string", ch);
        if (ch == '\\') {
            if (++c->i >= c->n)
                break;
            ch = c->p[c->i];
            if (ch == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (c->i + k >= c->n || !hex(c->p[c->i + k]))
                        return smoe__json_fail(c, "a \\u escape without 4 hex digits");
                c->i += 4;
            } else if (!strchr("\"\\/bfnrt", ch)) {
                return smoe__json_fail(c, "an unknown escape '\\%c'", ch >= 0x20 ? ch : '?');
            }
        }
        c->i++;
    }
    if (c->i >= c->n)
        return smoe__json_fail(c, "a string not closed before the header ends");
    *s = c->p + start;
    *n = c->i - start;
    c->i++;
    return 0;
}

int smoe__json_key(smoe__jcur *c, const uint8_t **s, size_t *n)
{
    int rc = smoe__json_string(c, s, n);
    if (rc == 0 && !take(c, ':'))
        rc = smoe__json_fail(c, "expected ':' after a key");
    return rc;
}

static int is_digit(const smoe__jcur *c, size_t i)
{
    return i < c->n && c->p[i] >= '0' && c->p[i] <= '9';
}

/* A non-negative integer, no leading zero, no fraction or exponent. */
static int u64(smoe__jcur *c, uint64_t *v, const char *what)
{
    ws(c);
    if (!is_digit(c, c->i) || (c->p[c->i] == '0' && is_digit(c, c->i + 1)))
        return smoe__json_fail(c, "%s: expected a non-negative integer", what);
    uint64_t x = 0;
    for (; is_digit(c, c->i); c->i++) {
        unsigned d = (unsigned)(c->p[c->i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return smoe__json_fail(c, "%s: a number over 2^64 - 1", what);
        x = x * 10 + d;
    }
    if (c->i < c->n && (c->p[c->i] == '.' || c->p[c->i] == 'e' || c->p[c->i] == 'E'))
        return smoe__json_fail(c, "%s: expected an integer, found a fraction or exponent",
                               what);
    *v = x;
    return 0;
}

int smoe__json_u64_array(smoe__jcur *c, uint64_t *out, uint32_t max, uint32_t *got,
                         const char *what)
{
    int first = 1, rc = smoe__json_open(c, '[');
    *got = 0;
    while (rc == 0 && smoe__json_more(c, ']', &first, &rc)) {
        if (*got == max)
            return smoe__json_fail(c, "%s: more than %" PRIu32 " numbers", what, max);
        if ((rc = u64(c, &out[*got], what)))
            return rc;
        (*got)++;
    }
    return rc;
}

/* A number of any form, skipped: -? digits (. digits)? ([eE] [+-]? digits)? */
static int skip_number(smoe__jcur *c)
{
    if (c->p[c->i] == '-')
        c->i++;
    if (!is_digit(c, c->i))
        return smoe__json_fail(c, "a malformed number");
    while (is_digit(c, c->i))
        c->i++;
    if (c->i < c->n && c->p[c->i] == '.') {
        if (!is_digit(c, ++c->i))
            return smoe__json_fail(c, "a malformed number");
        while (is_digit(c, c->i))
            c->i++;
    }
    if (c->i < c->n && (c->p[c->i] == 'e' || c->p[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->p[c->i] == '+' || c->p[c->i] == '-'))
            c->i++;
        if (!is_digit(c, c->i))
            return smoe__json_fail(c, "a malformed number");
        while (is_digit(c, c->i))
            c->i++;
    }
    return 0;
}

static int skip_word(smoe__jcur *c)
{
    static const char *words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if (c->n - c->i >= n && !memcmp(c->p + c->i, words[k], n)) {
            c->i += n;
            return 0;
        }
    }
    return smoe__json_fail(c, "expected a JSON value");
}

int smoe__json_skip(smoe__jcur *c, int depth)
{
    const uint8_t *s;
    size_t n;
    ws(c);
    if (c->i >= c->n)
        return smoe__json_fail(c, "expected a value before the header ends");
    uint8_t ch = c->p[c->i];
    if (ch == '"')
        return smoe__json_string(c, &s, &n);
    if (ch == '-' || (ch >= '0' && ch <= '9'))
        return skip_number(c);
    if (ch != '{' && ch != '[')
        return skip_word(c);
    if (depth >= JSON_DEPTH)
        return smoe__json_fail(c, "values nested deeper than %d", JSON_DEPTH);
    c->i++;
    int first = 1, rc = 0;
    while (smoe__json_more(c, ch == '{' ? '}' : ']', &first, &rc)) {
        if (ch == '{' && (rc = smoe__json_key(c, &s, &n)))
            return rc;
        if ((rc = smoe__json_skip(c, depth + 1)))
            return rc;
    }
    return rc;
}

int smoe__json_string_object(smoe__jcur *c)
{
    const uint8_t *s;
    size_t n;
    int first = 1, rc = smoe__json_open(c, '{');
    while (rc == 0 && smoe__json_more(c, '}', &first, &rc))
        if ((rc = smoe__json_key(c, &s, &n)) || (rc = smoe__json_string(c, &s, &n)))
            return rc;
    return rc;
}

int smoe__json_end(smoe__jcur *c)
{
    ws(c);
    return c->i == c->n ? 0 : smoe__json_fail(c, "bytes after the JSON object");
}
