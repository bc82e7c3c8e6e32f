/*
 * freq.c - smoe_freq_save. The popularity histogram (counting claims,
 * loading and saving it beside the vault) is not part of this build yet:
 * saving reports SMOE_ENOTSUP, as it does for a stream opened with
 * SMOE_OPEN_NO_FREQ. The function exists so that every function smoe.h
 * declares is exported (docs/abi.md).
 */
#include "error.h"
#include "internal.h"

SMOE_API int smoe_freq_save(smoe_stream *s)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "freq_save: NULL stream");
    return smoe__fail(SMOE_ENOTSUP, "freq_save: this build keeps no popularity histogram");
}
