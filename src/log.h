/*
 * log.h - messages through an open stream's log callback (log.c). Apart
 * from error.h, which sits below the stream object (internal.h).
 */
#ifndef SMOE_LOG_H
#define SMOE_LOG_H

#include "error.h"

struct smoe_stream;
/* Log through the stream's callback (smoe_open_opts.log_fn), if it has one.
 * level: SMOE_LOG_*. Never on the hot path. */
void smoe__log(struct smoe_stream *s, int level, const char *fmt, ...) SMOE__PRINTF(3, 4);

#endif
