/* error.h - thread-local detailed error messages (smoe_last_error). */
#ifndef SMOE_ERROR_H
#define SMOE_ERROR_H

#if defined(__GNUC__) || defined(__clang__)
#define SMOE__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SMOE__PRINTF(a, b)
#endif

#include <stdatomic.h>
#include <stddef.h>

/* Set by a platform whose errno cannot carry the system's own error
 * (Windows: oserr_win32.c, at its first failed call): appends that
 * thread's account of its last failed system call to the failure message
 * msg (buf: msg's end, cap bytes left). NULL elsewhere. Written once with
 * the same value by any thread, read by smoe__fail. */
typedef void (*smoe__fail_note_fn)(const char *msg, char *buf, size_t cap);
extern _Atomic(smoe__fail_note_fn) smoe__fail_note;

/*
 * Record the calling thread's detailed message and return code, so error
 * paths read `return smoe__fail(SMOE_ETRUNC, "%s: ...", path);`.
 * Only called on failure paths, never on the hot path's success.
 */
int smoe__fail(int code, const char *fmt, ...) SMOE__PRINTF(2, 3);
/* Symbolic name of an errno value ("EIO"); buf (16 bytes) holds "errno N"
 * for one without a name. */
const char *smoe__errno_name(int eno, char buf[16]);

#endif
