/*
 * plugin_state.c - the process-wide state of libggml-smoe and the helpers
 * every file of it uses (errors on stderr, the clock, the routing ids).
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plugin.h"

sp_state sp_g = {.lock = PTHREAD_MUTEX_INITIALIZER};

void sp_log_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "smoe: error: %s\n", msg);
}

uint64_t sp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int32_t sp_id_at(const struct ggml_tensor *ids, int64_t j, int64_t t)
{
    int32_t v;
    memcpy(&v, (const char *)ids->data + t * ids->nb[1] + j * ids->nb[0], 4);
    return v;
}
