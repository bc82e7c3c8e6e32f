/*
 * log.c - smoe__log: a message through the stream's log callback (log.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"
#include "log.h"

void smoe__log(struct smoe_stream *s, int level, const char *fmt, ...)
{
    if (!s->log_fn)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->log_fn(s->log_user, level, msg);
}
