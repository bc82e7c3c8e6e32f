/* hash.c - see hash.h. */
#include <string.h>
#include <xxhash.h>

#include "smoe/smoe.h"
#include "alloc.h"
#include "hash.h"

uint64_t smoe__hash(const void *data, size_t n)
{
    return XXH3_64bits(data, n);
}

void smoe__hash_put(unsigned char *p, uint64_t h)
{
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, h);
    memcpy(p, c.digest, sizeof c.digest);
}

uint64_t smoe__hash_get(const unsigned char *p)
{
    XXH64_canonical_t c;
    memcpy(c.digest, p, sizeof c.digest);
    return XXH64_hashFromCanonical(&c);
}

int smoe__hash_parts(const smoe__bytes *part, unsigned n, uint64_t *h)
{
    XXH3_state_t *st = smoe__alloc_refused() ? NULL : XXH3_createState();
    if (!st)
        return SMOE_ENOMEM;
    XXH3_64bits_reset(st);
    for (unsigned i = 0; i < n; i++)
        XXH3_64bits_update(st, part[i].p, part[i].n);
    *h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return 0;
}
