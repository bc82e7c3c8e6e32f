/*
 * memfile_generic.c - no memory file (memfile.h) on a system this library
 * does not know: a shareable ring is refused there rather than guessed at.
 */
#include <errno.h>
#include <stdint.h>

#include "memfile.h"

int smoe__memfile_open(uint64_t len)
{
    (void)len;
    return -ENOTSUP;
}
