/*
 * error.c - error names, messages, the thread-local detail message, and
 * warnings through the user's log callback.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "smoe/smoe.h"
#include "error.h"

_Atomic(smoe__fail_note_fn) smoe__fail_note;

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
    /* relaxed: the note function is a constant once set (error.h) */
    smoe__fail_note_fn note = atomic_load_explicit(&smoe__fail_note, memory_order_relaxed);
    if (note) {
        size_t n = strlen(last_msg);
        note(last_msg, last_msg + n, sizeof last_msg - n);
    }
    return code;
}

const char *smoe__errno_name(int eno, char buf[16])
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    const char *name = strerrorname_np(eno);
    if (name)
        return name;
#else
    /* What a read can fail with; others are numbered. */
    static const struct {
        int eno;
        const char *name;
    } names[] = {
        {EIO, "EIO"},       {EINTR, "EINTR"},   {EAGAIN, "EAGAIN"},
        {ENOMEM, "ENOMEM"}, {EINVAL, "EINVAL"}, {EBADF, "EBADF"},
        {EFAULT, "EFAULT"}, {ENXIO, "ENXIO"},   {ENODEV, "ENODEV"},
        {ENOSPC, "ENOSPC"}, {EISDIR, "EISDIR"}, {EOVERFLOW, "EOVERFLOW"},
        {ETIMEDOUT, "ETIMEDOUT"}, {EACCES, "EACCES"}, {EPERM, "EPERM"},
#ifdef ESTALE /* not in Windows' errno.h */
        {ESTALE, "ESTALE"},
#endif
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].eno == eno)
            return names[i].name;
#endif
    snprintf(buf, 16, "errno %d", eno);
    return buf;
}
