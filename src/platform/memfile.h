/*
 * memfile.h - a memory file: anonymous memory behind a descriptor, so that
 * mmap(MAP_SHARED) can map the same pages at more than one address (the
 * ring with SMOE_OPEN_SHAREABLE). memfile_linux.c: memfd_create;
 * memfile_darwin.c: shm_open, unlinked at once; memfile_generic.c: none.
 */
#ifndef SMOE_MEMFILE_H
#define SMOE_MEMFILE_H

#include <stdint.h>

/*
 * A close-on-exec descriptor of len zero bytes that no name reaches.
 * @return the descriptor, or -errno; -ENOTSUP where the system has no
 * memory file.
 */
int smoe__memfile_open(uint64_t len);

#endif
