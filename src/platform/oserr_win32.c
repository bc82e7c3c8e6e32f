/*
 * oserr_win32.c - Windows errors: the errno nearest each (what the file
 * calls of io.h return), and the error itself kept per thread so that the
 * failure message made next names it (smoe__fail_note, error.h), as
 * " (Windows error 5 ERROR_ACCESS_DENIED: Access is denied.)": when the
 * message tells of the failure, that is contains the strerror text of the
 * errno it was mapped to.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>

#include "error.h"
#include "win32.h"

/* The calling thread's last failed call (0: none to tell) and the errno it
 * became. */
static _Thread_local DWORD last_err;
static _Thread_local int last_eno;

static const struct {
    DWORD err;
    int eno;
    const char *name;
} errs[] = {
    {ERROR_FILE_NOT_FOUND, ENOENT, "ERROR_FILE_NOT_FOUND"},
    {ERROR_PATH_NOT_FOUND, ENOENT, "ERROR_PATH_NOT_FOUND"},
    {ERROR_INVALID_NAME, ENOENT, "ERROR_INVALID_NAME"},
    {ERROR_BAD_NETPATH, ENOENT, "ERROR_BAD_NETPATH"},
    {ERROR_ACCESS_DENIED, EACCES, "ERROR_ACCESS_DENIED"},
    {ERROR_SHARING_VIOLATION, EACCES, "ERROR_SHARING_VIOLATION"},
    {ERROR_LOCK_VIOLATION, EACCES, "ERROR_LOCK_VIOLATION"},
    {ERROR_WRITE_PROTECT, EROFS, "ERROR_WRITE_PROTECT"},
    {ERROR_INVALID_HANDLE, EBADF, "ERROR_INVALID_HANDLE"},
    {ERROR_NOT_ENOUGH_MEMORY, ENOMEM, "ERROR_NOT_ENOUGH_MEMORY"},
    {ERROR_OUTOFMEMORY, ENOMEM, "ERROR_OUTOFMEMORY"},
    {ERROR_COMMITMENT_LIMIT, ENOMEM, "ERROR_COMMITMENT_LIMIT"},
    {ERROR_NO_SYSTEM_RESOURCES, ENOMEM, "ERROR_NO_SYSTEM_RESOURCES"},
    {ERROR_WORKING_SET_QUOTA, ENOMEM, "ERROR_WORKING_SET_QUOTA"},
    {ERROR_INVALID_PARAMETER, EINVAL, "ERROR_INVALID_PARAMETER"},
    {ERROR_INVALID_FUNCTION, EINVAL, "ERROR_INVALID_FUNCTION"},
    {ERROR_NOT_SUPPORTED, ENOTSUP, "ERROR_NOT_SUPPORTED"},
    {ERROR_FILE_EXISTS, EEXIST, "ERROR_FILE_EXISTS"},
    {ERROR_ALREADY_EXISTS, EEXIST, "ERROR_ALREADY_EXISTS"},
    {ERROR_DIRECTORY, ENOTDIR, "ERROR_DIRECTORY"},
    {ERROR_DIR_NOT_EMPTY, ENOTEMPTY, "ERROR_DIR_NOT_EMPTY"},
    {ERROR_DISK_FULL, ENOSPC, "ERROR_DISK_FULL"},
    {ERROR_HANDLE_DISK_FULL, ENOSPC, "ERROR_HANDLE_DISK_FULL"},
    {ERROR_HANDLE_EOF, 0, "ERROR_HANDLE_EOF"},
    {ERROR_TOO_MANY_OPEN_FILES, EMFILE, "ERROR_TOO_MANY_OPEN_FILES"},
    {ERROR_FILENAME_EXCED_RANGE, ENAMETOOLONG, "ERROR_FILENAME_EXCED_RANGE"},
    {ERROR_NO_UNICODE_TRANSLATION, EINVAL, "ERROR_NO_UNICODE_TRANSLATION"},
    {ERROR_CRC, EIO, "ERROR_CRC"},
    {ERROR_READ_FAULT, EIO, "ERROR_READ_FAULT"},
    {ERROR_WRITE_FAULT, EIO, "ERROR_WRITE_FAULT"},
    {ERROR_SECTOR_NOT_FOUND, EIO, "ERROR_SECTOR_NOT_FOUND"},
    {ERROR_NOT_READY, EIO, "ERROR_NOT_READY"},
    {ERROR_DEVICE_NOT_CONNECTED, ENXIO, "ERROR_DEVICE_NOT_CONNECTED"},
    {ERROR_IO_DEVICE, EIO, "ERROR_IO_DEVICE"},
    {ERROR_OPERATION_ABORTED, EINTR, "ERROR_OPERATION_ABORTED"},
    {ERROR_NEGATIVE_SEEK, EINVAL, "ERROR_NEGATIVE_SEEK"},
    {ERROR_PRIVILEGE_NOT_HELD, EPERM, "ERROR_PRIVILEGE_NOT_HELD"},
};

static void os_error_note(const char *msg, char *buf, size_t cap);

int smoe__win_fail(unsigned long err)
{
    /* relaxed: a constant; the note reads only this thread's own record */
    atomic_store_explicit(&smoe__fail_note, os_error_note, memory_order_relaxed);
    last_err = (DWORD)err;
    last_eno = EIO; /* an error without a nearer errno */
    for (size_t i = 0; i < sizeof errs / sizeof *errs; i++)
        if (errs[i].err == err && errs[i].eno)
            last_eno = errs[i].eno;
    return -last_eno;
}

int smoe__win_last(void)
{
    return smoe__win_fail(GetLastError());
}

static void os_error_note(const char *msg, char *buf, size_t cap)
{
    DWORD err = last_err;
    last_err = 0;
    if (!cap)
        return;
    buf[0] = '\0';
    /* A failure handled earlier (a histogram that is absent) is not the
     * one this message tells of. */
    if (!err || !strstr(msg, strerror(last_eno)))
        return;
    const char *name = NULL;
    for (size_t i = 0; i < sizeof errs / sizeof *errs; i++)
        if (errs[i].err == err)
            name = errs[i].name;
    wchar_t w[256];
    char text[512];
    DWORD n = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL,
                             err, 0, w, sizeof w / sizeof *w, NULL);
    while (n > 0 && (w[n - 1] == L'\n' || w[n - 1] == L'\r' || w[n - 1] == L' '))
        w[--n] = 0;
    if (n == 0 || smoe__win_utf8(w, text, (int)sizeof text) < 0)
        text[0] = '\0';
    snprintf(buf, cap, " (Windows error %lu%s%s%s%s)", (unsigned long)err, name ? " " : "",
             name ? name : "", text[0] ? ": " : "", text);
}
