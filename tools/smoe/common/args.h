/*
 * args.h - the command-line parser every subcommand uses: a table of its
 * options, one handler for those that need converting, and the messages of
 * its usage errors in its own words.
 *
 * Words are read in order. "--help" and "-h" print the usage to stdout. A
 * word that starts with '-' (other than "-" itself) is an option from the
 * table; a value option takes the next word, or what follows '=' in
 * "--name=value". Any other word is an operand.
 */
#ifndef SMOE_TOOL_ARGS_H
#define SMOE_TOOL_ARGS_H

#include <stdio.h>

typedef enum tool_opt_kind {
    TOOL_OPT_FLAG,  /* no value */
    TOOL_OPT_VALUE  /* one value */
} tool_opt_kind;

typedef struct tool_opt {
    const char *name;   /* "--scout"; NULL ends the table */
    const char *alias;  /* "-o", or NULL */
    tool_opt_kind kind;
    int id;             /* for the handler */
    /* Where the option goes without a handler: a flag stores `set` in an
     * int, a value option stores the value in a const char *. NULL: the
     * handler gets it. */
    void *dst;
    int set;
} tool_opt;

/* Table entries: a flag stored as `value` in the int at dst; a flag or a
 * value option handed to the handler as id; a value stored in the const
 * char * at dst; the end of the table. */
#define TOOL_FLAG(name, dst, value) {name, NULL, TOOL_OPT_FLAG, 0, dst, value}
#define TOOL_CALL(name, id) {name, NULL, TOOL_OPT_FLAG, id, NULL, 0}
#define TOOL_VALUE(name, id) {name, NULL, TOOL_OPT_VALUE, id, NULL, 0}
#define TOOL_TEXT(name, dst) {name, NULL, TOOL_OPT_VALUE, 0, dst, 0}
#define TOOL_OPTS_END {NULL, NULL, TOOL_OPT_FLAG, 0, NULL, 0}

/*
 * The handler of options without a dst (value NULL for a flag) and of
 * operands (opt NULL) when tool_cli.operand is NULL. @return -1 to go on,
 * or the exit code to stop with (having said why).
 */
typedef int (*tool_arg_fn)(void *ctx, const tool_opt *opt, const char *value);

typedef struct tool_cli {
    const char *cmd;          /* messages start "smoe CMD: " */
    void (*usage)(FILE *f);
    const tool_opt *opts;
    const char **operand;     /* the one operand goes here; NULL: to the handler */
    int min_operands;
    int max_operands;         /* -1: any number */
    /* Messages of usage errors, printf formats (NULL: a plain default). */
    const char *no_value;     /* %s: the option */
    const char *unknown;      /* %s: the word */
    const char *unexpected;   /* %s: an operand where none is taken */
    const char *extra;        /* %s, %s: the first operand, one too many */
    const char *missing;      /* fewer operands than min_operands */
    int usage_on_error;       /* the usage to stderr before each message */
    int hint;                 /* "run 'smoe CMD --help' for usage" after each */
    int status;               /* exit code of a usage error (0: 2) */
} tool_cli;

/*
 * Parse argv[1 .. argc) (argv[0] is the subcommand's name).
 * @return -1 when every word was taken and the command goes on; otherwise
 * the exit code: 0 after --help, c->status after a usage error (reported
 * on stderr), or what the handler returned.
 */
int tool_args_parse(const tool_cli *c, int argc, char **argv, tool_arg_fn fn, void *ctx);

/*
 * Call fn(u, item) for each item of the comma list s (its first 1023
 * bytes). Stops at the first nonzero return of fn and returns it.
 */
int tool_each_item(const char *s, int (*fn)(void *u, const char *item), void *u);

/* The message of a usage error as c words it, with its usage and hint;
 * returns c's usage-error exit code (for errors the command finds itself). */
int tool_args_error(const tool_cli *c, const char *fmt, const char *a, const char *b);

#endif
