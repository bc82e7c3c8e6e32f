/* error.c - error names, messages and the thread-local detail message. */
#include <stdarg.h>
#include <stdio.h>

#include "smoe/smoe.h"
#include "error.h"

/* Long enough for a path and a field description. */
static _Thread_local char last_msg[1024];

SMOE_API const char *smoe_strerror(int err)
{
    switch (err) {
    case SMOE_OK:
        return "success";
#define SMOE_ERR_MSG_(name, val, msg) \
    case SMOE_##name:                 \
        return msg;
        SMOE_ERRNO_MAP(SMOE_ERR_MSG_)
#undef SMOE_ERR_MSG_
    default:
        return "unknown error";
    }
}

SMOE_API const char *smoe_err_name(int err)
{
    switch (err) {
    case SMOE_OK:
        return "SMOE_OK";
#define SMOE_ERR_NAME_(name, val, msg) \
    case SMOE_##name:                  \
        return "SMOE_" #name;
        SMOE_ERRNO_MAP(SMOE_ERR_NAME_)
#undef SMOE_ERR_NAME_
    default:
        return "SMOE_UNKNOWN";
    }
}

SMOE_API const char *smoe_last_error(void)
{
    return last_msg;
}

int smoe__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}
