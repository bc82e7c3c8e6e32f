/*
 * memfile_darwin.c - a memory file (memfile.h) on macOS, which has no
 * memfd: a POSIX shared memory object under a name unique to the process,
 * unlinked as soon as it is open, so that only the descriptor reaches it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfile.h"

static _Atomic unsigned smoe__memfile_seq;

int smoe__memfile_open(uint64_t len)
{
    if (len > (uint64_t)INT64_MAX)
        return -EOVERFLOW;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        /* relaxed: the counter only makes names differ; O_EXCL decides */
        unsigned n = atomic_fetch_add_explicit(&smoe__memfile_seq, 1, memory_order_relaxed);
        char name[32]; /* macOS allows 31 characters */
        snprintf(name, sizeof name, "/smoe.%d.%u", (int)getpid(), n);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST)
            return -errno;
        if (fd >= 0)
            shm_unlink(name);
    }
    if (fd < 0)
        return -EEXIST;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || ftruncate(fd, (off_t)len) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}
