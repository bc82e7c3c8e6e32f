/*
 * sized.h - the public structs that carry their own size (struct_size,
 * a size_t, first): a caller built against an older or newer header
 * passes its own size, and each side sees only the fields it knows
 * (docs/abi.md, "Growing a struct").
 */
#ifndef SMOE_SIZED_H
#define SMOE_SIZED_H

#include <stddef.h>

/*
 * Read the caller's struct `in` into this version's `dst` (full bytes,
 * already holding the defaults): the bytes the caller supplied, the
 * defaults for the rest; dst's struct_size becomes full. A struct_size
 * below min or above 64 KiB is SMOE_EINVAL, a newer caller's nonzero
 * field this version does not know SMOE_ENOTSUP; fn and type name the
 * call and the struct in the message.
 */
int smoe__sized_in(void *dst, size_t full, const void *in, size_t min, const char *fn,
                   const char *type);

/*
 * Write this version's `src` (full bytes) into the caller's `dst`, up to
 * dst's struct_size, which is left as the caller set it: SMOE_EINVAL when
 * that is below min or above 64 KiB.
 */
int smoe__sized_out(void *dst, const void *src, size_t full, size_t min, const char *fn,
                    const char *type);

#endif
