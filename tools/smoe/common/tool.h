/* tool.h - shared helpers of the smoe command-line tool. */
#ifndef SMOE_TOOL_H
#define SMOE_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__) || defined(__clang__)
#define TOOL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TOOL_PRINTF(a, b)
#endif

/* Each subcommand: argv[0] is the subcommand's name. Returns the exit code. */
typedef int (*tool_cmd_fn)(int argc, char **argv);

int cmd_gen(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_budget(int argc, char **argv);
int cmd_trace_gen(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sim(int argc, char **argv);

/* Print "smoe <cmd>: message" to stderr; returns 1 (the failure exit code). */
int tool_error(const char *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);
/* Parse "123", "4k", "16KiB", "2M", "1.5G" (binary units) into *out; 0 on success. */
int tool_parse_size(const char *s, uint64_t *out);
/* Parse an unsigned integer in [min, max]; 0 on success. */
int tool_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
/* bytes as "123 B", "4.50 MiB" (binary units, `decimals` places above
 * bytes) into buf; returns buf. */
const char *tool_human_bytes(char *buf, size_t n, double bytes, int decimals);
/* Monotonic time in nanoseconds. */
uint64_t tool_now_ns(void);

/* A progress line on stderr, drawn only when it is a terminal. */
typedef struct tool_progress {
    const char *cmd;
    int tty, open; /* open: a line is drawn and not ended */
    uint64_t last;
} tool_progress;

void tool_progress_start(tool_progress *p, const char *cmd);
/* "smoe CMD: DONE/TOTAL blobs, X MiB", at most five times a second; drawn
 * once more and ended with a newline when done reaches total. */
void tool_progress_blobs(tool_progress *p, uint64_t done, uint64_t total, uint64_t bytes);
/* End a line left open (a failure before the end), so an error starts on
 * a line of its own. */
void tool_progress_stop(tool_progress *p);
/* The first n bytes of s (fewer where it ends first), malloc'd: strndup,
 * which Windows' C library lacks. */
char *tool_strndup(const char *s, size_t n);

/* --replica PATH, repeatable: copies of the vault on other drives
 * (smoe_open_opts.replicas). */
#define TOOL_MAX_REPLICAS 15
typedef struct tool_replicas {
    const char *path[TOOL_MAX_REPLICAS];
    uint32_t n;
} tool_replicas;
/* Add one; -1 to go on, or the exit code after a message (too many). */
int tool_replica_add(tool_replicas *r, const char *cmd, const char *path);

#endif
