/* util.c - errors, number parsing, clocks and progress lines shared by the
 * subcommands. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

int tool_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "smoe %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int tool_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; end++; break;
    case 'm': case 'M': mult = 1ull << 20; end++; break;
    case 'g': case 'G': mult = 1ull << 30; end++; break;
    case 't': case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (mult > 1 && (!strcmp(end, "iB") || !strcmp(end, "B") || !strcmp(end, "ib")))
        end += strlen(end);
    if (*end)
        return -1;
    double bytes = v * (double)mult;
    if (bytes >= 18446744073709551616.0)
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

int tool_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || s[0] == '-' || v < min || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

const char *tool_human_bytes(char *buf, size_t n, double bytes, int decimals)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, n, "%.*f %s", u ? decimals : 0, bytes, unit[u]);
    return buf;
}

uint64_t tool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tool_progress_start(tool_progress *p, const char *cmd)
{
    p->cmd = cmd;
    p->tty = isatty(STDERR_FILENO);
    p->open = 0;
    p->last = tool_now_ns();
}

void tool_progress_blobs(tool_progress *p, uint64_t done, uint64_t total, uint64_t bytes)
{
    uint64_t now = tool_now_ns();
    if (!p->tty || (now - p->last <= 200000000ull && done != total))
        return;
    fprintf(stderr, "\rsmoe %s: %" PRIu64 "/%" PRIu64 " blobs, %.1f MiB", p->cmd, done, total,
            (double)bytes / (1 << 20));
    p->last = now;
    p->open = done != total;
    if (done == total)
        fputc('\n', stderr);
}

void tool_progress_stop(tool_progress *p)
{
    if (p->open)
        fputc('\n', stderr);
    p->open = 0;
}

char *tool_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *r = malloc(len + 1);
    if (r) {
        memcpy(r, s, len);
        r[len] = 0;
    }
    return r;
}

int tool_replica_add(tool_replicas *r, const char *cmd, const char *path)
{
    if (r->n == TOOL_MAX_REPLICAS)
        return tool_error(cmd, "--replica: at most %d replicas ('%s' is one more)",
                          TOOL_MAX_REPLICAS, path);
    r->path[r->n++] = path;
    return -1;
}
