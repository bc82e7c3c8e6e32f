/*
 * fs.h - what differs between systems in the file calls of the OS table
 * (io_posix.c): direct I/O, unnamed files, durable fsync, a block device's
 * size, dropping cached pages. Each system's file (fs_linux.c,
 * fs_darwin.c, fs_generic.c for any other POSIX system) fills the table
 * below; a NULL entry is the plain POSIX behaviour its comment names.
 * Return convention as io.h: >= 0, or -errno.
 */
#ifndef SMOE_FS_H
#define SMOE_FS_H

#include <stdint.h>

typedef struct smoe__fs {
    /* Add to *oflags what open(2) needs for SMOE__IO_DIRECT and
     * SMOE__IO_TMPFILE (an unnamed file in the directory path, for
     * writing); -EOPNOTSUPP when the system has no unnamed files.
     * NULL: no open flag for either (SMOE__IO_TMPFILE: -EOPNOTSUPP). */
    int (*open_flags)(unsigned flags, int *oflags);
    /* After a successful open, a mode the system sets on the descriptor
     * rather than by an open flag (macOS F_NOCACHE for direct I/O); the
     * caller closes fd on failure. NULL: nothing to do. */
    int (*opened)(int fd, unsigned flags);
    /* fsync that reaches the drive's media, not only its cache. NULL:
     * fsync(2). */
    int (*sync)(int fd);
    /* A block device's size in bytes (its st_size is 0). NULL: unknown,
     * 0. */
    int (*blkdev_size)(int fd, uint64_t *size);
    /* Give the unnamed file fd (SMOE__IO_TMPFILE) the name path. NULL: no
     * way (-EOPNOTSUPP). */
    int (*link)(int fd, const char *path);
    /* Advise the system to drop fd's cached pages in [off, off + len).
     * NULL: no such advice. */
    void (*drop_cache)(int fd, uint64_t off, uint64_t len);
} smoe__fs;

/* struct stat's modification time: POSIX names it st_mtim, macOS
 * st_mtimespec. */
#if defined(__APPLE__)
#define SMOE__ST_MTIM(st) ((st).st_mtimespec)
#else
#define SMOE__ST_MTIM(st) ((st).st_mtim)
#endif

/* This system's (fs_<system>.c). */
extern const smoe__fs smoe__fs_os;

#endif
