/*
 * fuzz_freq.c - the popularity histogram's reader (smoe__freq_decode) on
 * arbitrary input.
 *
 * Input: a control byte, then the file. Control bits, so that mutations get
 * past the checks a random file never passes: 1, store the file's own
 * checksum (XXH3 over header bytes 0..55 and the counts) before decoding; 2,
 * store the sum of its counts as its total first; 4, decode for the vault
 * the header names (else for a 1 x 4 vault of id 0).
 *
 * Oracle: besides the sanitizers, a file that loads gives exactly its
 * counts, which sum to its total without wrapping; a file that is ignored
 * leaves the caller's counts untouched.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "smoe_tier.h"
#include "fuzz.h"
#include "smoe/smoe.h"

#define HDR SMOE__FREQ_HEADER_SIZE
#define SENTINEL 0x5a5a5a5a5a5a5a5aull

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t ctl = data[0];
    const size_t len = size - 1;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    const int whole = len >= HDR && (len - HDR) % 8 == 0;
    const size_t n_file = whole ? (len - HDR) / 8 : 0;
    if ((ctl & 2) && whole) {
        uint64_t total = 0;
        for (size_t i = 0; i < n_file; i++) /* modulo 2^64, as a naive writer would */
            (void)__builtin_add_overflow(total, get64(buf + HDR + 8 * i), &total);
        put64(buf + 40, total);
    }
    if ((ctl & 1) && len >= HDR) {
        XXH3_state_t *st = XXH3_createState();
        if (st) {
            XXH3_64bits_reset(st);
            XXH3_64bits_update(st, buf, 56);
            XXH3_64bits_update(st, buf + HDR, len - HDR);
            XXH64_canonical_t c;
            XXH64_canonicalFromHash(&c, XXH3_64bits_digest(st));
            memcpy(buf + 56, c.digest, 8);
            XXH3_freeState(st);
        }
    }
    smoe__freq_id id = {1, 4, 0, 0};
    if ((ctl & 4) && whole) {
        uint32_t l = get32(buf + 16), e = get32(buf + 20);
        if ((uint64_t)l * e == n_file) { /* a counts array of the file's own size */
            id.layers = l;
            id.experts = e;
            id.vault_id = get64(buf + 24);
            id.vault_size = get64(buf + 32);
        }
    }
    const size_t n = (size_t)id.layers * id.experts;
    uint64_t *counts = malloc(n * sizeof *counts);
    if (!counts) {
        free(buf);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        counts[i] = SENTINEL;
    const char *why = NULL;
    int st = smoe__freq_decode(buf, len, &id, counts, &why);
    if (!why)
        abort(); /* every outcome says why */
    if (st == SMOE_FREQ_LOADED) {
        uint64_t total = 0;
        if (n != n_file)
            abort();
        for (size_t i = 0; i < n; i++) {
            if (counts[i] != get64(buf + HDR + 8 * i))
                abort();
            if (__builtin_add_overflow(total, counts[i], &total))
                abort(); /* counts no real file holds: their sum wraps */
        }
        if (total != get64(buf + 40))
            abort();
    } else {
        for (size_t i = 0; i < n; i++)
            if (counts[i] != SENTINEL)
                abort();
    }
    free(counts);
    free(buf);
    return 0;
}
