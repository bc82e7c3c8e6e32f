/*
 * byteorder.h - little-endian loads and stores, the byte order of every
 * integer in the vault, the popularity histogram, the scout file and the
 * checkpoints smoe pack reads. Unaligned and host-order independent.
 */
#ifndef SMOE_BYTEORDER_H
#define SMOE_BYTEORDER_H

#include <stdint.h>

static inline uint32_t smoe__le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t smoe__le64(const unsigned char *p)
{
    return (uint64_t)smoe__le32(p) | (uint64_t)smoe__le32(p + 4) << 32;
}

static inline void smoe__put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void smoe__put_le64(unsigned char *p, uint64_t v)
{
    smoe__put_le32(p, (uint32_t)v);
    smoe__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
