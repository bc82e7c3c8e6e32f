/*
 * pack_progress.c - a one-line progress bar on stderr: bytes done, rate,
 * time left. Redrawn at most ten times a second; silent when disabled (the
 * caller enables it only when stderr is a terminal).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "pack.h"
#include "tool.h"

struct pack_progress {
    uint64_t total, done;
    uint64_t start_ns, last_ns;
    int enabled;
    int drawn;
};

pack_progress *pack_progress_new(uint64_t total, int enabled)
{
    pack_progress *pg = calloc(1, sizeof *pg);
    if (!pg)
        return NULL;
    pg->total = total;
    pg->enabled = enabled;
    pg->start_ns = pg->last_ns = tool_now_ns();
    return pg;
}

static void draw(pack_progress *pg, uint64_t now)
{
    double secs = (double)(now - pg->start_ns) / 1e9;
    double rate = secs > 0 ? (double)pg->done / secs : 0;
    double frac = pg->total ? (double)pg->done / (double)pg->total : 1;
    char d[32], t[32], r[32], eta[32] = "--:--";
    tool_human_bytes(d, sizeof d, (double)pg->done, 1);
    tool_human_bytes(t, sizeof t, (double)pg->total, 1);
    tool_human_bytes(r, sizeof r, rate, 1);
    if (rate > 0 && pg->done < pg->total) {
        uint64_t left = (uint64_t)((double)(pg->total - pg->done) / rate);
        snprintf(eta, sizeof eta, "%" PRIu64 ":%02" PRIu64, left / 60, left % 60);
    } else if (pg->done >= pg->total) {
        snprintf(eta, sizeof eta, "0:00");
    }
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %3d%%  %s / %s  %s/s  %s left ", bar, (int)(frac * 100), d, t,
            r, eta);
    fflush(stderr);
    pg->drawn = 1;
}

void pack_progress_add(pack_progress *pg, uint64_t bytes)
{
    if (!pg)
        return;
    pg->done += bytes;
    if (!pg->enabled)
        return;
    uint64_t now = tool_now_ns();
    if (now - pg->last_ns >= 100000000ull) {
        pg->last_ns = now;
        draw(pg, now);
    }
}

void pack_progress_end(pack_progress *pg, int finished)
{
    if (!pg)
        return;
    if (pg->enabled && finished)
        draw(pg, tool_now_ns());
    if (pg->drawn)
        fputc('\n', stderr); /* so what follows starts on its own line */
    free(pg);
}
