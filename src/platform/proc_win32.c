/*
 * proc_win32.c - processes and directory listings (proc.h):
 * GetCurrentProcessId, OpenProcess, FindFirstFileW; and how many files a
 * process may hold open.
 */
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "proc.h"
#include "win32.h"

long smoe__proc_self(void)
{
    return (long)GetCurrentProcessId();
}

int smoe__proc_gone(long pid)
{
    HANDLE h = OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) /* no such process: invalid parameter; another user's: access denied */
        return GetLastError() == ERROR_INVALID_PARAMETER;
    /* An exited process keeps its id while a handle to it is open. */
    int gone = WaitForSingleObject(h, 0) == WAIT_OBJECT_0;
    CloseHandle(h);
    return gone;
}

int smoe__dir_each(const char *dir, void (*fn)(void *u, const char *name), void *u)
{
    size_t n = strlen(dir);
    char *pat = malloc(n + 3);
    if (!pat)
        return -1;
    memcpy(pat, dir, n);
    memcpy(pat + n, n && (dir[n - 1] == '/' || dir[n - 1] == '\\') ? "*" : "\\*", 3);
    int eno = 0;
    wchar_t *w = smoe__win_wpath(pat, &eno);
    free(pat);
    if (!w)
        return -1;
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileW(w, &fd);
    free(w);
    if (h == INVALID_HANDLE_VALUE)
        return -1;
    do {
        char name[MAX_PATH * 4];
        if (smoe__win_utf8(fd.cFileName, name, (int)sizeof name) == 0)
            fn(u, name);
    } while (FindNextFileW(h, &fd));
    FindClose(h);
    return 0;
}

uint64_t smoe__proc_open_max(void)
{
    return UINT64_MAX; /* handles are limited by memory only (2^24 per process) */
}
