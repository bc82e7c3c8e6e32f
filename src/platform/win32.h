/*
 * win32.h - what the Windows files of the platform layer (*_win32.c) share:
 * UTF-8 paths converted for the wide API, descriptors that are handles,
 * and Windows errors mapped to errno values (the io.h convention) while
 * their name is kept for the next failure message (error.h, smoe__fail_note).
 */
#ifndef SMOE_WIN32_H
#define SMOE_WIN32_H

#include <stdint.h>
#include <wchar.h>

/* A UTF-8 path as a newly allocated wide string (free() it), with the
 * \\?\ prefix for absolute paths longer than MAX_PATH. NULL: not UTF-8
 * (*eno EINVAL) or no memory (*eno ENOMEM). */
wchar_t *smoe__win_wpath(const char *path, int *eno);
/* A wide string as UTF-8 into buf. @return 0, or -1 when it does not fit. */
int smoe__win_utf8(const wchar_t *w, char *buf, int cap);

/* A descriptor is the handle's value: Windows keeps handles below 2^31 so
 * that 32- and 64-bit processes can pass them to each other. */
#define SMOE__WIN_FD(h) ((int)(intptr_t)(h))
#define SMOE__WIN_HANDLE(fd) ((void *)(intptr_t)(fd))

/* The errno value nearest the Windows error err, and err remembered as the
 * calling thread's last failure (for the failure message). @return -errno. */
int smoe__win_fail(unsigned long err);
/* smoe__win_fail(GetLastError()). */
int smoe__win_last(void);

#endif
