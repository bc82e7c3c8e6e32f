/*
 * oserr.h - the system's own account of the last failed call, for failure
 * messages: on Windows the error's name, number and text (oserr_win32.c),
 * which the errno that the file calls return cannot carry; nothing on POSIX
 * systems, whose errno is the system's error (oserr_posix.c).
 */
#ifndef SMOE_OSERR_H
#define SMOE_OSERR_H

#include <stddef.h>

/* Write " (Windows error 5 ERROR_ACCESS_DENIED: Access is denied.)" for
 * the calling thread's last failed system call into buf and forget it,
 * when the failure message msg tells of it (contains the strerror text of
 * the errno it was mapped to); else "". */
void smoe__os_error_note(const char *msg, char *buf, size_t cap);

#endif
