/*
 * io.h - the library's only door to the operating system's file calls.
 *
 * Every open/pread/pwrite/fsync/rename the library makes goes through a
 * smoe__io table, the way SQLite's VFS sits in front of the OS. The default
 * table calls the OS; tests install one that fails the Nth call, returns
 * short reads or EINTR, or delays (tests/fault_io.c).
 *
 * Return convention: >= 0 success, -errno on failure (never -1 + errno).
 * A table may return -EINTR from any call, as the system calls do when a
 * signal arrives. The library therefore makes its calls through the
 * wrappers below, which retry an interrupted call a bounded number of
 * times (never close: after EINTR the descriptor is gone).
 */
#ifndef SMOE_IO_H
#define SMOE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <sys/types.h>

/* A call that is interrupted or makes no progress this many times in a row
 * is abandoned (EINTR storms, a file that keeps returning 0 bytes). */
#define SMOE__IO_MAX_STALLS 64

/* smoe__io.open flags (translated to O_* by the OS table) */
enum {
    SMOE__IO_RDONLY = 1u << 0,
    SMOE__IO_WRONLY = 1u << 1, /* create + truncate */
    SMOE__IO_DIRECT = 1u << 2, /* O_DIRECT on Linux, F_NOCACHE on macOS */
    SMOE__IO_RDWR = 1u << 3,   /* create, no truncate */
    /* Never wait at open (a FIFO without a writer); the descriptor is made
     * blocking again when it is a regular file or a block device. */
    SMOE__IO_NONBLOCK = 1u << 4,
    /* path is a directory: an unnamed file in it, for writing (Linux
     * O_TMPFILE); -EOPNOTSUPP (or the file system's refusal) elsewhere. */
    SMOE__IO_TMPFILE = 1u << 5
};

/* What smoe__io.stat reports. */
enum {
    SMOE__IO_TYPE_REG, SMOE__IO_TYPE_BLK, SMOE__IO_TYPE_DIR, SMOE__IO_TYPE_CHR,
    SMOE__IO_TYPE_FIFO, SMOE__IO_TYPE_SOCK, SMOE__IO_TYPE_OTHER
};
typedef struct smoe__io_stat {
    uint64_t size;     /* bytes (a block device's own size) */
    uint64_t dev, ino; /* the file's identity; both 0 when unknown */
    int type;          /* SMOE__IO_TYPE_* */
    uint32_t mtime_nsec;
    int64_t mtime_sec; /* last modification; 0, 0 when unknown */
} smoe__io_stat;

typedef struct smoe__io smoe__io;
struct smoe__io {
    int (*open)(const smoe__io *io, const char *path, unsigned flags);
    int (*close)(const smoe__io *io, int fd);
    ssize_t (*pread)(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off);
    ssize_t (*pwrite)(const smoe__io *io, int fd, const void *buf, size_t n, uint64_t off);
    int (*fsync)(const smoe__io *io, int fd);
    int (*rename)(const smoe__io *io, const char *from, const char *to);
    int (*unlink)(const smoe__io *io, const char *path);
    int (*size)(const smoe__io *io, int fd, uint64_t *size);
    void *user; /* for test implementations */
    /* Optional (NULL: nothing to drop): evict the file's cached pages in
     * [off, off + len) after buffered reads, so that reading a vault's
     * header and tables leaves the page cache as it found it. Advisory:
     * failure is ignored. */
    void (*drop_cache)(const smoe__io *io, int fd, uint64_t off, uint64_t len);
    /* Optional (NULL: the size from size(), a regular file of unknown
     * identity). */
    int (*stat)(const smoe__io *io, int fd, smoe__io_stat *st);
    /* Optional (NULL: unnamed files are never used): give the unnamed file
     * fd (opened with SMOE__IO_TMPFILE) the name path, which must not
     * exist. */
    int (*link)(const smoe__io *io, int fd, const char *path);
};

/* The table that calls the OS (platform/io_posix.c). */
extern const smoe__io smoe__io_os;

/*
 * The table new streams and writers use. Tests swap it (not thread-safe:
 * set it before opening). Never NULL.
 */
const smoe__io *smoe__io_get(void);
void smoe__io_set(const smoe__io *io); /* NULL restores smoe__io_os */

/*
 * io->open, fsync, rename, unlink and size, retrying -EINTR up to
 * SMOE__IO_MAX_STALLS times in a row; then -EINTR is returned as a failure.
 */
int smoe__io_open(const smoe__io *io, const char *path, unsigned flags);
int smoe__io_fsync(const smoe__io *io, int fd);
int smoe__io_rename(const smoe__io *io, const char *from, const char *to);
int smoe__io_unlink(const smoe__io *io, const char *path);
int smoe__io_size(const smoe__io *io, int fd, uint64_t *size);
/* io->stat (or io->size, see above) and io->link (-EOPNOTSUPP without one),
 * retrying -EINTR the same way. */
int smoe__io_fstat(const smoe__io *io, int fd, smoe__io_stat *st);
int smoe__io_link(const smoe__io *io, int fd, const char *path);
/* "a regular file", "a FIFO (named pipe)", ...: for messages. */
const char *smoe__io_type_name(int type);
/*
 * Open path for reading as a vault is opened: without waiting
 * (SMOE__IO_NONBLOCK, so that a FIFO without a writer cannot block the open
 * for ever), then checked to be a regular file or a block device, the only
 * kinds whose reads end (*st receives what it is). flags: added to
 * SMOE__IO_RDONLY | SMOE__IO_NONBLOCK (SMOE__IO_DIRECT). what: what the
 * file should hold, for the message ("a vault"), or NULL.
 * @return the descriptor; SMOE_ESYS when it cannot be opened or examined,
 * SMOE_EINVAL when it is another kind of file (a FIFO, a directory, ...),
 * smoe_last_error() naming path and the kind.
 */
int smoe__io_open_file(const smoe__io *io, const char *path, unsigned flags, const char *what,
                       smoe__io_stat *st);
/* io->close; -EINTR counts as closed (POSIX leaves the descriptor's state
 * unspecified and Linux always frees it: retrying could close another
 * thread's new descriptor). */
int smoe__io_close(const smoe__io *io, int fd);

/*
 * Read exactly n bytes at off, looping on EINTR and short reads. Gives up
 * after a bounded number of attempts without progress, or at once when
 * *stop becomes nonzero (stop may be NULL).
 * @return 0; SMOE_ETRUNC when the file ends first; SMOE_EIO with *err_no
 * set to the errno; SMOE_ESHUTDOWN when stopped.
 */
int smoe__io_read_full(const smoe__io *io, int fd, void *buf, size_t n,
                       uint64_t off, const atomic_int *stop, int *err_no);

/* Where and why smoe__io_read_full_ex failed, for the caller's message. */
typedef struct smoe__io_fail {
    uint64_t off;   /* file offset of the failed call; at end of file, where the file ends */
    uint64_t len;   /* bytes still to read there */
    int eno;        /* its errno; 0 at end of file, or when short reads made no progress */
    uint32_t tries; /* attempts there, the last included; SMOE__IO_MAX_STALLS: retries used up */
    uint32_t file;  /* which file, set by the caller (extent.c): 0 the vault, i + 1 an index
                       vault's source i */
    uint32_t copy;  /* which copies of a packed vault it is in, set by the caller
                       (replica_read.c): bit i for copy i (0 the vault, i replica i); 0 when
                       not known */
} smoe__io_fail;

/*
 * smoe__io_read_full that says why it failed (*why, on failure), and
 * keeps direct reads aligned. align: 0 for a buffered descriptor; for a
 * direct one, a multiple of its offset and memory alignments (off, n and
 * buf are multiples of align).
 * A direct read cut short off a boundary never continues where it stopped
 * (the kernel refuses a misaligned direct read with EINVAL): unless the
 * file ends there, it continues from the last boundary before, keeping the
 * bytes up to it. Telling the two apart costs one io->size call, made only
 * for such a cut read.
 */
int smoe__io_read_full_ex(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off,
                          uint32_t align, const atomic_int *stop, smoe__io_fail *why);
/* Write exactly n bytes at off (loops on EINTR and short writes).
 * @return 0 or SMOE_EIO with *err_no set. */
int smoe__io_write_full(const smoe__io *io, int fd, const void *buf, size_t n,
                        uint64_t off, int *err_no);

#endif
