/*
 * thread_win32.c - naming the calling thread (thread.h) with
 * SetThreadDescription, Windows 10 1607 and later: looked up at run time so
 * the library still loads on older systems and under Wine versions without
 * it.
 */
#include <string.h>
#include <windows.h>

#include "thread.h"

typedef HRESULT(WINAPI *set_desc_fn)(HANDLE, PCWSTR);

void smoe__thread_name(const char *name)
{
    HMODULE k = GetModuleHandleW(L"kernelbase.dll");
    if (!k)
        k = GetModuleHandleW(L"kernel32.dll");
    FARPROC p = k ? GetProcAddress(k, "SetThreadDescription") : NULL;
    if (!p)
        return;
    set_desc_fn set_desc;
    memcpy(&set_desc, &p, sizeof set_desc); /* a function pointer's cast, spelt out */
    wchar_t w[64];
    if (MultiByteToWideChar(CP_UTF8, 0, name, -1, w, sizeof w / sizeof *w) > 0)
        set_desc(GetCurrentThread(), w);
}
