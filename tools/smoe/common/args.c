/* args.c - the subcommands' option parser (args.h). */
#include <string.h>

#include "args.h"

int tool_args_error(const tool_cli *c, const char *fmt, const char *a, const char *b)
{
    if (c->usage_on_error)
        c->usage(stderr);
    fprintf(stderr, "smoe %s: ", c->cmd);
    /* The formats are the command's own (tool_cli), each with the
     * arguments its field documents. */
    fprintf(stderr, fmt, a ? a : "", b ? b : "");
    fputc('\n', stderr);
    if (c->hint)
        fprintf(stderr, "run 'smoe %s --help' for usage\n", c->cmd);
    return c->status ? c->status : 2;
}

/* The table entry for word a; *value gets what follows '=' in "--name=v". */
static const tool_opt *find(const tool_opt *opts, const char *a, const char **value)
{
    const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    *value = eq ? eq + 1 : NULL;
    for (const tool_opt *o = opts; o->name; o++)
        if ((!strncmp(o->name, a, n) && !o->name[n]) ||
            (o->alias && !strncmp(o->alias, a, n) && !o->alias[n]))
            return o;
    return NULL;
}

static int apply(const tool_opt *o, const char *value, tool_arg_fn fn, void *ctx)
{
    if (!o->dst)
        return fn(ctx, o, value);
    if (o->kind == TOOL_OPT_FLAG)
        *(int *)o->dst = o->set;
    else
        *(const char **)o->dst = value;
    return -1;
}

static int operand(const tool_cli *c, const char *a, const char **first, int *n,
                   tool_arg_fn fn, void *ctx)
{
    if (c->max_operands == 0)
        return tool_args_error(c, c->unexpected ? c->unexpected : "unexpected argument '%s'",
                               a, NULL);
    if (c->max_operands > 0 && *n == c->max_operands)
        return tool_args_error(c, c->extra ? c->extra : "too many arguments ('%s' and '%s')",
                               *first, a);
    if (!*first)
        *first = a;
    ++*n;
    if (c->operand) {
        *c->operand = a;
        return -1;
    }
    return fn(ctx, NULL, a);
}

int tool_args_parse(const tool_cli *c, int argc, char **argv, tool_arg_fn fn, void *ctx)
{
    const char *first = NULL;
    int n = 0, rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            c->usage(stdout);
            return 0;
        }
        if (a[0] != '-' || !a[1]) {
            if ((rc = operand(c, a, &first, &n, fn, ctx)) >= 0)
                return rc;
            continue;
        }
        const tool_opt *o = find(c->opts, a, &value);
        if (!o || (o->kind == TOOL_OPT_FLAG && value))
            return tool_args_error(c, c->unknown ? c->unknown : "unknown option '%s'", a, NULL);
        if (o->kind == TOOL_OPT_VALUE && !value) {
            if (i + 1 == argc)
                return tool_args_error(c, c->no_value ? c->no_value : "%s needs a value", a,
                                       NULL);
            value = argv[++i];
        }
        if ((rc = apply(o, value, fn, ctx)) >= 0)
            return rc;
    }
    if (n < c->min_operands)
        return tool_args_error(c, c->missing ? c->missing : "missing argument", NULL, NULL);
    return -1;
}

int tool_each_item(const char *s, int (*fn)(void *u, const char *item), void *u)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc;
         tok = strtok_r(NULL, ",", &save))
        rc = fn(u, tok);
    return rc;
}
