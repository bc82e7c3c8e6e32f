/* sized.c - reading and writing structs that carry their size (sized.h). */
#include <string.h>

#include "smoe/smoe.h"
#include "error.h"
#include "sized.h"

#define SIZED_MAX 65536u /* no public struct comes near it: a larger size is garbage */

int smoe__sized_in(void *dst, size_t full, const void *in, size_t min, const char *fn,
                   const char *type)
{
    const size_t have = *(const size_t *)in;
    if (have < min || have > SIZED_MAX)
        return smoe__fail(SMOE_EINVAL, "%s: opts.struct_size %zu is not a size of %s (this "
                          "version's is %zu)", fn, have, type, full);
    memcpy(dst, in, have < full ? have : full);
    *(size_t *)dst = full;
    for (size_t i = full; i < have; i++)
        if (((const unsigned char *)in)[i])
            return smoe__fail(SMOE_ENOTSUP, "%s: opts has a nonzero field at byte %zu, "
                              "unknown to libsmoe_stream %s", fn, i, SMOE_VERSION_STRING);
    return 0;
}

int smoe__sized_out(void *dst, const void *src, size_t full, size_t min, const char *fn,
                    const char *type)
{
    const size_t want = *(const size_t *)dst;
    if (want < min || want > SIZED_MAX)
        return smoe__fail(SMOE_EINVAL, "%s: struct_size %zu is not a size of %s (this "
                          "version's is %zu)", fn, want, type, full);
    const size_t n = want < full ? want : full;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           n - sizeof(size_t));
    return 0;
}
