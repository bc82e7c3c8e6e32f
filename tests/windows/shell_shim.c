/*
 * shell_shim.c - system() for the test programs on Windows: the few forms of
 * POSIX shell the tests write, read here and run without a shell (cmd.exe
 * reads none of them):
 *     [NAME=value ...] 'program' args... [>FILE] [2>FILE | 2>&1]
 *     rm -rf 'dir'
 * with words in single or double quotes and /dev/null as NUL. Anything
 * else (a pipe, a list, a substitution) skips the calling test, saying
 * which command. The program runs with shim_spawn's CreateProcess.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include <cmocka.h>

#include "posix_shim.h"

#undef system

#define MAX_WORDS 64

typedef struct cmdline {
    char *word[MAX_WORDS]; /* the program and its arguments */
    char *env[MAX_WORDS];  /* NAME=value before the program */
    int n, n_env;
    char *out, *err;       /* redirections; NULL: inherited */
    int err_to_out;        /* 2>&1 */
} cmdline;

/* One word from *p into a new string; NULL at the end or on an operator
 * this reader does not know (*bad set). */
static char *word(const char **p, int *bad)
{
    const char *s = *p;
    size_t cap = strlen(s) + 1, n = 0;
    char *w = malloc(cap);
    while (*s && *s != ' ' && *s != '\t') {
        if (*s == '\'') {
            const char *e = strchr(s + 1, '\'');
            if (!e)
                break;
            memcpy(w + n, s + 1, (size_t)(e - s - 1));
            n += (size_t)(e - s - 1);
            s = e + 1;
        } else if (*s == '"') {
            for (s++; *s && *s != '"'; s++)
                w[n++] = *s == '\\' && (s[1] == '"' || s[1] == '\\') ? *++s : *s;
            if (*s)
                s++;
        } else if (strchr("|&;<>`$()", *s)) {
            *bad = *s != '>'; /* a redirection after a word; nothing else */
            break;
        } else {
            w[n++] = *s++;
        }
    }
    w[n] = 0;
    *p = s;
    return w;
}

static const char *skip_blank(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* A redirection at s (">F", "2>F", "2>&1"); the characters read, 0 if none. */
static int redirect(const char *s, cmdline *c, int *bad)
{
    const char *p = s;
    int fd = 1;
    if (p[0] == '2' && p[1] == '>')
        fd = 2, p++;
    if (*p != '>')
        return 0;
    p = skip_blank(p + 1);
    if (fd == 2 && !strncmp(p, "&1", 2)) {
        c->err_to_out = 1;
        return (int)(p + 2 - s);
    }
    char *f = word(&p, bad);
    if (!strcmp(f, "/dev/null"))
        strcpy(f, "NUL");
    free(fd == 1 ? c->out : c->err);
    *(fd == 1 ? &c->out : &c->err) = f;
    return (int)(p - s);
}

static int is_assignment(const char *w)
{
    const char *eq = strchr(w, '=');
    if (!eq || eq == w)
        return 0;
    for (const char *c = w; c < eq; c++)
        if (!(*c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
              (c > w && *c >= '0' && *c <= '9')))
            return 0;
    return 1;
}

/* 0, or -1 for a command outside the forms above. */
static int parse(const char *cmd, cmdline *c)
{
    memset(c, 0, sizeof *c);
    int bad = 0;
    for (const char *s = skip_blank(cmd); *s && !bad; s = skip_blank(s)) {
        int r = redirect(s, c, &bad);
        if (r) {
            s += r;
            continue;
        }
        char *w = word(&s, &bad);
        if (!*w) { /* an operator refused, or a quoted empty word */
            if (bad || !*s) {
                free(w);
                continue;
            }
        }
        if (c->n == 0 && is_assignment(w) && c->n_env < MAX_WORDS)
            c->env[c->n_env++] = w;
        else if (c->n < MAX_WORDS - 1)
            c->word[c->n++] = w;
        else
            free(w), bad = 1;
    }
    return bad || c->n == 0 ? -1 : 0;
}

static void free_cmd(cmdline *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->word[i]);
    for (int i = 0; i < c->n_env; i++)
        free(c->env[i]);
    free(c->out);
    free(c->err);
}

/* rm -rf DIR: a directory tree or a file removed; 0 also when absent. */
static int remove_tree(const char *path)
{
    DWORD a = GetFileAttributesA(path);
    if (a == INVALID_FILE_ATTRIBUTES)
        return 0;
    if (!(a & FILE_ATTRIBUTE_DIRECTORY))
        return DeleteFileA(path) ? 0 : 1;
    char pat[MAX_PATH + 4];
    snprintf(pat, sizeof pat, "%s\\*", path);
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pat, &fd);
    int rc = 0;
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (!strcmp(fd.cFileName, ".") || !strcmp(fd.cFileName, ".."))
                continue;
            char sub[MAX_PATH + 4];
            snprintf(sub, sizeof sub, "%s\\%s", path, fd.cFileName);
            rc |= remove_tree(sub);
        } while (FindNextFileA(h, &fd));
        FindClose(h);
    }
    return rc | !RemoveDirectoryA(path);
}

/* The program run with the assignments in its environment: set in the
 * process's environment block, which CreateProcess hands down, and put back
 * (the tests run one command at a time). The C library's copy, which
 * getenv reads, is left alone: pointers getenv returned stay valid. */
static int run(cmdline *c)
{
    char *old[MAX_WORDS] = {0};
    for (int i = 0; i < c->n_env; i++) {
        char *eq = strchr(c->env[i], '=');
        *eq = 0;
        DWORD n = GetEnvironmentVariableA(c->env[i], NULL, 0);
        if (n && (old[i] = malloc(n)) != NULL)
            GetEnvironmentVariableA(c->env[i], old[i], n);
        SetEnvironmentVariableA(c->env[i], eq + 1);
    }
    int rc = shim_spawn_ex((const char *const *)c->word, c->out, c->err, c->err_to_out, 0);
    for (int i = 0; i < c->n_env; i++) {
        SetEnvironmentVariableA(c->env[i], old[i]);
        free(old[i]);
    }
    return rc;
}

int shim_system(const char *cmd)
{
    cmdline c;
    if (!cmd)
        return 1; /* a command processor is there */
    if (parse(cmd, &c) < 0) {
        free_cmd(&c);
        fprintf(stderr, "[  SKIP    ] the shell command \"%s\": not read on Windows\n", cmd);
        skip();
    }
    int rc;
    if (!strcmp(c.word[0], "rm") && c.n == 3 && !strcmp(c.word[1], "-rf"))
        rc = remove_tree(c.word[2]);
    else
        rc = run(&c);
    free_cmd(&c);
    /* the wait status sys/wait.h's macros read: the exit code in bits 8-15 */
    return rc < 0 ? 0x7f : (rc & 0xff) << 8;
}
