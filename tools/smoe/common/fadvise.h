/*
 * fadvise.h - access-pattern hints to the kernel, portable: posix_fadvise
 * where it exists (Linux), fcntl F_RDADVISE / F_RDAHEAD on macOS, nothing
 * on Windows (a handle's access pattern is set when it is opened). Hints
 * only: a failure costs speed, never correctness, so nothing is returned.
 */
#ifndef SMOE_TOOL_FADVISE_H
#define SMOE_TOOL_FADVISE_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>

/* Start reading [off, off + len) of fd now. */
static inline void tool_advise_willneed(int fd, uint64_t off, uint64_t len)
{
#if defined(POSIX_FADV_WILLNEED)
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
#elif defined(F_RDADVISE)
    struct radvisory ra = {(off_t)off, len > INT32_MAX ? INT32_MAX : (int)len};
    (void)fcntl(fd, F_RDADVISE, &ra);
#else
    (void)fd, (void)off, (void)len;
#endif
}

/* fd will be read at random: no read-ahead. */
static inline void tool_advise_random(int fd)
{
#if defined(POSIX_FADV_RANDOM)
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
#elif defined(F_RDAHEAD)
    (void)fcntl(fd, F_RDAHEAD, 0);
#else
    (void)fd;
#endif
}

/* fd will be read from start to end: read ahead further. */
static inline void tool_advise_sequential(int fd)
{
#if defined(POSIX_FADV_SEQUENTIAL)
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#else
    (void)fd;
#endif
}

#endif
