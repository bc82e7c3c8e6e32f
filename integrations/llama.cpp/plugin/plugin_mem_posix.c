/*
 * plugin_mem_posix.c - the SMOE buffers' memory where mmap is: address
 * space mapped read-write without reserve (paid for as it is written), an
 * expert tensor's range made PROT_NONE.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plugin.h"

void *sp_mem_reserve(size_t len, char *err, size_t errlen)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p != MAP_FAILED)
        return p;
    snprintf(err, errlen, "%s", strerror(errno));
    return NULL;
}

int sp_mem_use(void *addr, size_t len, char *err, size_t errlen)
{
    (void)addr, (void)len, (void)err, (void)errlen; /* mapped read-write already */
    return 0;
}

int sp_mem_none(void *addr, size_t len, char *err, size_t errlen)
{
    if (mprotect(addr, len, PROT_NONE) == 0)
        return 0;
    snprintf(err, errlen, "%s", strerror(errno));
    return -1;
}

void sp_mem_release(void *base, size_t len)
{
    munmap(base, len);
}

size_t sp_mem_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}
