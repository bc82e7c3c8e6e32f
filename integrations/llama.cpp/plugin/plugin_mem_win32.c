/*
 * plugin_mem_win32.c - the SMOE buffers' memory on Windows: address space
 * reserved inaccessible (VirtualAlloc MEM_RESERVE, PAGE_NOACCESS), the
 * ranges of tensors that are read and written committed read-write as they
 * are placed (sp_mem_use); an expert tensor's range is never committed, or
 * decommitted, so that it costs no memory and a read of it faults, as
 * PROT_NONE does elsewhere.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <windows.h>

#include "plugin.h"

static void win_error(char *err, size_t errlen)
{
    DWORD e = GetLastError();
    char msg[256];
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, e,
                             0, msg, sizeof msg, NULL);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == '.'))
        msg[--n] = 0;
    snprintf(err, errlen, "Windows error %lu%s%s", (unsigned long)e, n ? ": " : "", n ? msg : "");
}

void *sp_mem_reserve(size_t len, char *err, size_t errlen)
{
    void *p = VirtualAlloc(NULL, len, MEM_RESERVE, PAGE_NOACCESS);
    if (!p)
        win_error(err, errlen);
    return p;
}

int sp_mem_use(void *addr, size_t len, char *err, size_t errlen)
{
    if (!len || VirtualAlloc(addr, len, MEM_COMMIT, PAGE_READWRITE))
        return 0;
    win_error(err, errlen);
    return -1;
}

int sp_mem_none(void *addr, size_t len, char *err, size_t errlen)
{
    if (!len || VirtualFree(addr, len, MEM_DECOMMIT))
        return 0;
    win_error(err, errlen);
    return -1;
}

void sp_mem_release(void *base, size_t len)
{
    (void)len; /* the whole reservation goes */
    VirtualFree(base, 0, MEM_RELEASE);
}

size_t sp_mem_page(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize;
}
