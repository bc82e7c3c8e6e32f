/*
 * base.c - what every file of the integration uses: the error record
 * (sl_fail) and the clock (sl_now_ns). It uses no other file here, so the
 * files that report errors or time themselves all sit above it.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

uint64_t sl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sl_fail(smoe_llama *h, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
    if (h->log_fn)
        h->log_fn(h->log_user, SMOE_LOG_ERROR, h->err);
    return code;
}
