/*
 * fs.h - what differs between systems in the file calls of the OS table
 * (io_posix.c): direct I/O, unnamed files, durable fsync, a block device's
 * size, dropping cached pages. fs_linux.c, fs_darwin.c, and fs_generic.c
 * for any other POSIX system. Return convention as io.h: >= 0, or -errno.
 */
#ifndef SMOE_FS_H
#define SMOE_FS_H

#include <stdint.h>

/* Add to *oflags what open(2) needs for SMOE__IO_DIRECT and SMOE__IO_TMPFILE
 * (an unnamed file in the directory path, opened for writing).
 * @return 0, or -EOPNOTSUPP when the system cannot (only SMOE__IO_TMPFILE). */
int smoe__fs_open_flags(unsigned flags, int *oflags);
/* What follows a successful open where the system sets a mode on the
 * descriptor rather than by an open flag (macOS F_NOCACHE for direct I/O).
 * @return 0 or -errno (the caller closes fd then). */
int smoe__fs_opened(int fd, unsigned flags);
/* fsync that reaches the drive's media, not only its cache. */
int smoe__fs_sync(int fd);
/* A block device's size in bytes (its st_size is 0); 0 where unknown. */
int smoe__fs_blkdev_size(int fd, uint64_t *size);
/* Give the unnamed file fd (SMOE__IO_TMPFILE) the name path.
 * @return 0, -EOPNOTSUPP where the system has no way, or -errno. */
int smoe__fs_link(int fd, const char *path);
/* Advise the system to drop fd's cached pages in [off, off + len). */
void smoe__fs_drop_cache(int fd, uint64_t off, uint64_t len);

#endif
