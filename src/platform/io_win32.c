/*
 * io_win32.c - the table of file calls that calls Windows (smoe__io_os,
 * io.h). A descriptor is the file's handle (win32.h). Direct I/O is
 * FILE_FLAG_NO_BUFFERING: offsets, lengths and buffers aligned to the
 * volume's sector size (dio_win32.c). Reads and writes are positioned by an
 * OVERLAPPED offset on a synchronous handle; calls on one handle are
 * serialised by the system, which is why each worker has its own (source.c).
 * Every file is shared for reading, writing and deletion, as on POSIX
 * systems, so that a histogram can be renamed over while another stream
 * holds it open.
 */
#include <errno.h>
#include <stdlib.h>
#include <windows.h>
#include <winioctl.h>

#include "io.h"
#include "win32.h"

/* The most one ReadFile/WriteFile moves: a DWORD count, kept a multiple of
 * every sector size so that direct reads stay aligned. */
#define SMOE__WIN_MAX_IO (1u << 30)

static int os_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    if (flags & SMOE__IO_TMPFILE)
        return -EOPNOTSUPP;
    DWORD access = GENERIC_READ, disp = OPEN_EXISTING;
    /* Backup semantics: a directory opens too (to be refused by type, as
     * open(2) lets it). */
    DWORD attrs = FILE_ATTRIBUTE_NORMAL | FILE_FLAG_BACKUP_SEMANTICS;
    if (flags & SMOE__IO_WRONLY) {
        access = GENERIC_WRITE;
        disp = CREATE_ALWAYS;
        attrs = FILE_ATTRIBUTE_NORMAL;
    } else if (flags & SMOE__IO_RDWR) {
        access = GENERIC_READ | GENERIC_WRITE;
        disp = OPEN_ALWAYS;
        attrs = FILE_ATTRIBUTE_NORMAL;
    }
    if (flags & SMOE__IO_DIRECT)
        attrs |= FILE_FLAG_NO_BUFFERING;
    int eno = 0;
    wchar_t *w = smoe__win_wpath(path, &eno);
    if (!w)
        return -eno;
    HANDLE h = CreateFileW(w, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, disp, attrs, NULL);
    int e = h == INVALID_HANDLE_VALUE ? smoe__win_last() : 0;
    free(w);
    if (e < 0)
        return e;
    if ((intptr_t)h < 0 || (intptr_t)h > INT32_MAX) { /* never seen: handles are small */
        CloseHandle(h);
        return -EMFILE;
    }
    return SMOE__WIN_FD(h);
}

static int os_close(const smoe__io *io, int fd)
{
    (void)io;
    return CloseHandle(SMOE__WIN_HANDLE(fd)) ? 0 : smoe__win_last();
}

static OVERLAPPED at(uint64_t off)
{
    OVERLAPPED ov = {0};
    ov.Offset = (DWORD)off;
    ov.OffsetHigh = (DWORD)(off >> 32);
    return ov;
}

static ssize_t os_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    (void)io;
    OVERLAPPED ov = at(off);
    DWORD got = 0, want = n > SMOE__WIN_MAX_IO ? SMOE__WIN_MAX_IO : (DWORD)n;
    if (ReadFile(SMOE__WIN_HANDLE(fd), buf, want, &got, &ov))
        return (ssize_t)got;
    DWORD err = GetLastError();
    if (err == ERROR_HANDLE_EOF) /* at or past the end: pread's 0 */
        return 0;
    return smoe__win_fail(err);
}

static ssize_t os_pwrite(const smoe__io *io, int fd, const void *buf, size_t n,
                         uint64_t off)
{
    (void)io;
    OVERLAPPED ov = at(off);
    DWORD put = 0, want = n > SMOE__WIN_MAX_IO ? SMOE__WIN_MAX_IO : (DWORD)n;
    if (WriteFile(SMOE__WIN_HANDLE(fd), buf, want, &put, &ov))
        return (ssize_t)put;
    return smoe__win_last();
}

static int os_fsync(const smoe__io *io, int fd)
{
    (void)io;
    return FlushFileBuffers(SMOE__WIN_HANDLE(fd)) ? 0 : smoe__win_last();
}

/* Replace to atomically, the rename reaching the disk before it returns
 * (the histogram's save, freq.c). */
static int os_rename(const smoe__io *io, const char *from, const char *to)
{
    (void)io;
    int eno = 0;
    wchar_t *wf = smoe__win_wpath(from, &eno), *wt = wf ? smoe__win_wpath(to, &eno) : NULL;
    int r = -eno;
    if (wf && wt)
        r = MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)
                ? 0
                : smoe__win_last();
    free(wf);
    free(wt);
    return r;
}

static int os_unlink(const smoe__io *io, const char *path)
{
    (void)io;
    int eno = 0;
    wchar_t *w = smoe__win_wpath(path, &eno);
    if (!w)
        return -eno;
    int r = DeleteFileW(w) ? 0 : smoe__win_last();
    free(w);
    return r;
}

/* 100 ns intervals from 1601 to 1970. */
#define SMOE__WIN_EPOCH 116444736000000000ull

static int stat_disk(HANDLE h, smoe__io_stat *out)
{
    BY_HANDLE_FILE_INFORMATION fi;
    if (!GetFileInformationByHandle(h, &fi)) {
        /* A volume or a physical drive (\\.\PhysicalDrive0): a block
         * device, sized by the disk driver. */
        GET_LENGTH_INFORMATION len;
        DWORD got = 0;
        if (!DeviceIoControl(h, IOCTL_DISK_GET_LENGTH_INFO, NULL, 0, &len, sizeof len, &got,
                             NULL))
            return smoe__win_last();
        out->type = SMOE__IO_TYPE_BLK;
        out->size = (uint64_t)len.Length.QuadPart;
        return 0;
    }
    out->dev = fi.dwVolumeSerialNumber;
    out->ino = (uint64_t)fi.nFileIndexHigh << 32 | fi.nFileIndexLow;
    out->size = (uint64_t)fi.nFileSizeHigh << 32 | fi.nFileSizeLow;
    out->type = fi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY ? SMOE__IO_TYPE_DIR
                                                               : SMOE__IO_TYPE_REG;
    uint64_t t = (uint64_t)fi.ftLastWriteTime.dwHighDateTime << 32 |
                 fi.ftLastWriteTime.dwLowDateTime;
    if (t >= SMOE__WIN_EPOCH) {
        out->mtime_sec = (int64_t)((t - SMOE__WIN_EPOCH) / 10000000u);
        out->mtime_nsec = (uint32_t)((t - SMOE__WIN_EPOCH) % 10000000u * 100u);
    }
    return 0;
}

static int os_stat(const smoe__io *io, int fd, smoe__io_stat *out)
{
    (void)io;
    HANDLE h = SMOE__WIN_HANDLE(fd);
    switch (GetFileType(h)) {
    case FILE_TYPE_DISK:
        return stat_disk(h, out);
    case FILE_TYPE_CHAR:
        out->type = SMOE__IO_TYPE_CHR;
        return 0;
    case FILE_TYPE_PIPE:
        out->type = SMOE__IO_TYPE_FIFO;
        return 0;
    default:
        if (GetLastError() != NO_ERROR)
            return smoe__win_last();
        out->type = SMOE__IO_TYPE_OTHER;
        return 0;
    }
}

static int os_size(const smoe__io *io, int fd, uint64_t *size)
{
    smoe__io_stat st = {0};
    int r = os_stat(io, fd, &st);
    if (r == 0)
        *size = st.size;
    return r;
}

/* No unnamed files (link NULL) and no advice to drop cached pages
 * (drop_cache NULL): a direct read bypasses the cache anyway. */
const smoe__io smoe__io_os = {
    os_open, os_close, os_pread, os_pwrite, os_fsync, os_rename, os_unlink, os_size, NULL,
    NULL, os_stat, NULL,
};
