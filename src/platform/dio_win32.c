/*
 * dio_win32.c - direct I/O alignment on Windows (dio.h): the sector size of
 * the file's volume, which FILE_FLAG_NO_BUFFERING requires of offsets,
 * lengths and buffer addresses. The storage information of the file
 * (Windows 8 and later) gives the physical sector size for performance;
 * else the volume's logical sector size from GetDiskFreeSpaceW.
 */
#include <stdlib.h>
#include <windows.h>

#include "dio.h"
#include "win32.h"

static uint32_t storage_sector(HANDLE h)
{
    FILE_STORAGE_INFO si;
    if (!GetFileInformationByHandleEx(h, FileStorageInfo, &si, sizeof si))
        return 0;
    uint32_t perf = si.PhysicalBytesPerSectorForPerformance;
    uint32_t logical = si.LogicalBytesPerSector;
    /* The larger, when it is a multiple of the smaller (both powers of 2). */
    if (perf && logical && perf % logical == 0)
        return perf;
    return logical;
}

static uint32_t volume_sector(HANDLE h)
{
    wchar_t path[MAX_PATH * 2], root[MAX_PATH * 2];
    DWORD n = GetFinalPathNameByHandleW(h, path, sizeof path / sizeof *path, 0);
    if (n == 0 || n >= sizeof path / sizeof *path)
        return 0;
    if (!GetVolumePathNameW(path, root, sizeof root / sizeof *root))
        return 0;
    DWORD spc, bps = 0, freec, total;
    if (!GetDiskFreeSpaceW(root, &spc, &bps, &freec, &total))
        return 0;
    return bps;
}

int smoe__dio_align(int fd, uint32_t *mem_align, uint32_t *off_align)
{
    HANDLE h = SMOE__WIN_HANDLE(fd);
    uint32_t sector = storage_sector(h);
    if (!sector)
        sector = volume_sector(h);
    if (!sector || (sector & (sector - 1))) {
        *mem_align = *off_align = 0;
        return 1;
    }
    /* At least a page: any multiple of the sector size serves, and drives
     * of 4 KiB sectors can report 512 (emulation), as Wine does for the
     * Linux file system beneath it, whose direct I/O wants its own block. */
    if (sector < 4096)
        sector = 4096;
    *mem_align = *off_align = sector;
    return 0;
}
