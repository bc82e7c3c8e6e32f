/*
 * synth.h - the synthetic vault: payloads, blob sizes and an expert layout
 * that are pure functions of (seed, layer, expert). `smoe gen` writes it,
 * the tests check it byte for byte, and the examples' model draws its
 * weights from the same generator. Header only, so that the tests and the
 * examples include it without linking the tool.
 *
 * The same splitmix64 and weighted draw serve the synthetic routing traces
 * (tools/smoe/sim/trace_synth.c) and the tests' workloads.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_SYNTH_H
#define SMOE_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <smoe/smoe.h>

/* splitmix64: the next value of the sequence whose state is *s. */
static inline uint64_t synth_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The first index i < n with cdf[i] >= u (cdf non-decreasing; n - 1 when
 * none is): a draw from the distribution whose running sums cdf holds. */
static inline uint32_t synth_cdf_pick(const double *cdf, uint32_t n, double u)
{
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Salts of the two streams a blob draws from. */
#define SYNTH_SALT_SIZE 0x5123u
#define SYNTH_SALT_BYTES 0xb10bu

/* The key of (layer, expert) under seed for the stream salt. */
static inline uint64_t synth_key(uint64_t seed, uint32_t layer, uint32_t expert, uint64_t salt)
{
    uint64_t s = seed ^ salt;
    s ^= synth_splitmix64(&s) + ((uint64_t)layer << 32 | expert);
    return synth_splitmix64(&s);
}

/* Size of the blob of (layer, expert): in [min_bytes, max_bytes]. */
static inline uint64_t synth_blob_size(uint64_t seed, uint32_t layer, uint32_t expert,
                                       uint64_t min_bytes, uint64_t max_bytes)
{
    if (max_bytes <= min_bytes)
        return min_bytes;
    return min_bytes + synth_key(seed, layer, expert, SYNTH_SALT_SIZE) %
                           (max_bytes - min_bytes + 1);
}

/* The n payload bytes of (layer, expert): splitmix64 values, little endian. */
static inline void synth_blob_fill(void *buf, size_t n, uint64_t seed, uint32_t layer,
                                   uint32_t expert)
{
    unsigned char *p = buf;
    uint64_t s = synth_key(seed, layer, expert, SYNTH_SALT_BYTES);
    while (n > 0) {
        uint64_t v = synth_splitmix64(&s);
        for (int i = 0; i < 8 && n > 0; i++, n--, v >>= 8)
            *p++ = (unsigned char)v;
    }
}

static inline uint64_t synth_round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/*
 * A plausible expert layout whose extent is at most max_bytes: bf16 "gate"
 * and "up" [ffn, hidden] and "down" [hidden, ffn] at 256-byte alignment,
 * hidden the largest power of two (<= 4096) that leaves ffn >= hidden / 4;
 * for blobs too small for that, one u8 component "w". Fills comps (room
 * for 3) and returns the component count.
 */
static inline uint32_t synth_layout(smoe_component comps[3], uint64_t max_bytes)
{
    static const char *const names[3] = {"gate", "up", "down"};
    memset(comps, 0, 3 * sizeof *comps);
    for (uint64_t h = 4096; h >= 8; h /= 2) {
        uint64_t f = max_bytes / (6 * h);
        while (f >= h / 4 && 2 * synth_round_up(2 * h * f, 256) + 2 * h * f > max_bytes)
            f--;
        if (f < h / 4 || f == 0)
            continue;
        for (int i = 0; i < 3; i++) {
            smoe_component *c = &comps[i];
            snprintf(c->name, sizeof c->name, "%s", names[i]);
            c->dtype = SMOE_DTYPE_BF16;
            c->ndim = 2;
            c->shape[0] = i < 2 ? f : h;
            c->shape[1] = i < 2 ? h : f;
            c->offset = (uint64_t)i * synth_round_up(2 * h * f, 256);
            c->nbytes = 2 * h * f;
        }
        return 3;
    }
    snprintf(comps[0].name, sizeof comps[0].name, "w");
    comps[0].dtype = SMOE_DTYPE_U8;
    comps[0].ndim = 1;
    comps[0].shape[0] = max_bytes ? max_bytes : 1;
    comps[0].nbytes = comps[0].shape[0];
    return 1;
}

#endif
