/* quickstart.c: one token through every layer of a vault, as an engine's
 * host code does it. README.md shows this file; a test builds and runs it.
 *   cc quickstart.c $(pkg-config --cflags --libs smoe_stream) -o quickstart
 *   ./quickstart model.smoe      (smoe gen --out model.smoe makes a vault) */
#include <stdint.h>
#include <stdio.h>

#include <smoe/smoe.h>

/* Stands in for the engine's expert FFN: adds up each component's bytes. */
static uint64_t run_expert(smoe_stream *s, const smoe_blob *b)
{
    uint64_t sum = 0;
    smoe_component c;
    for (uint32_t i = 0; smoe_blob_component(s, b, i, &c) == 0; i++)
        for (uint64_t j = 0; j < c.nbytes; j++)
            sum += ((const unsigned char *)b->data)[c.offset + j];
    return sum;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "model.smoe";
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;  /* defaults: 16 workers, auto ring */
    o.flags = SMOE_OPEN_EXTENTS              /* index vaults too (smoe index) */
            | SMOE_OPEN_ALLOW_BUFFERED;      /* where direct I/O is refused */
    smoe_stream *s;
    if (smoe_open(path, &o, &s) < 0) {
        fprintf(stderr, "quickstart: %s\n", smoe_last_error());
        return 1;
    }
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    smoe_vault_info_get(s, &vi);
    uint32_t k = vi.experts < 4 ? vi.experts : 4, expert[4];
    uint64_t sum = 0, bytes = 0;
    for (uint32_t layer = 0; layer < vi.layers; layer++) {
        for (uint32_t i = 0; i < k; i++) {       /* the router chose these */
            expert[i] = (7 * layer + i) % vi.experts;
            smoe_prefetch(s, layer, expert[i], SMOE_PREFETCH_DEMAND); /* reads start */
        }
        for (uint32_t i = 0; i < k; i++) {
            smoe_blob b;
            if (smoe_claim_wait(s, layer, expert[i], UINT64_MAX, &b) < 0) {
                fprintf(stderr, "quickstart: layer %u expert %u: %s\n", layer,
                        expert[i], smoe_last_error());
                smoe_close(s);
                return 1;
            }
            sum += run_expert(s, &b);            /* b.data is valid until released */
            bytes += b.size;
            smoe_release(s, &b);
        }
    }
    printf("%u layers x %u experts claimed, %llu bytes, byte sum %llu\n", vi.layers,
           k, (unsigned long long)bytes, (unsigned long long)sum);
    return smoe_close(s) < 0;
}
