/*
 * path_win32.c - UTF-8 paths for the wide API (win32.h): the library's
 * paths are UTF-8 on every system; Windows' own code page is not.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "win32.h"

static int is_absolute(const char *p)
{
    return (((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z') && p[1] == ':' &&
            (p[2] == '\\' || p[2] == '/'));
}

wchar_t *smoe__win_wpath(const char *path, int *eno)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    if (n <= 0) { /* ERROR_NO_UNICODE_TRANSLATION */
        *eno = EINVAL;
        return NULL;
    }
    /* \\?\ lifts MAX_PATH, but only for absolute paths with backslashes. */
    int pre = n > MAX_PATH && is_absolute(path) ? 4 : 0;
    wchar_t *w = malloc(((size_t)n + (size_t)pre) * sizeof *w);
    if (!w) {
        *eno = ENOMEM;
        return NULL;
    }
    memcpy(w, L"\\\\?\\", (size_t)pre * sizeof *w);
    MultiByteToWideChar(CP_UTF8, 0, path, -1, w + pre, n);
    if (pre)
        for (wchar_t *c = w + pre; *c; c++)
            if (*c == L'/')
                *c = L'\\';
    return w;
}

int smoe__win_utf8(const wchar_t *w, char *buf, int cap)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, buf, cap, NULL, NULL);
    return n > 0 ? 0 : -1;
}
