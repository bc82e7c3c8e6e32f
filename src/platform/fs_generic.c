/* fs_generic.c - the file calls of a POSIX system without its own file
 * here (fs.h): O_DIRECT and posix_fadvise where the headers have them,
 * plain fsync, no unnamed files, block device sizes unknown. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include "io.h"
#include "fs.h"

static int open_flags(unsigned flags, int *oflags)
{
    if (flags & SMOE__IO_TMPFILE)
        return -EOPNOTSUPP;
#if defined(O_DIRECT)
    if (flags & SMOE__IO_DIRECT)
        *oflags |= O_DIRECT;
#else
    (void)oflags;
#endif
    return 0;
}

#if defined(POSIX_FADV_DONTNEED)
static void drop_cache(int fd, uint64_t off, uint64_t len)
{
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}
#define SMOE__DROP_CACHE drop_cache
#else
#define SMOE__DROP_CACHE NULL
#endif

const smoe__fs smoe__fs_os = {
    .open_flags = open_flags,
    .drop_cache = SMOE__DROP_CACHE,
};
