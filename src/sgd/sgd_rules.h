/* What the CPU and CUDA engines of SGD share, so that one worker on either visits the
 * ratings in the same order: the per-epoch chunk permutation, the learning-rate schedule,
 * and IEEE half conversions for the CPU. Compiles as C11 and as CUDA C++ (host and
 * device), like cuda/philox.h. */
#ifndef MF_SGD_RULES_H
#define MF_SGD_RULES_H

#include <stdint.h>

#include "cuda/philox.h" /* MF_HD */

/* Ratings per chunk: a chunk is what one worker takes at a time. Short enough that every
 * epoch mixes users and items well, long enough to amortize loading and writing back the
 * user's row (MF_SGD_ORDER_USER_CHUNKS). */
#define MF_SGD_CHUNK 64

/* An epoch's chunks per concurrent worker, at least (see sgd.c). */
#define MF_SGD_MIN_WAVES 128

/* A group's sub-step that fills this many workers by MF_SGD_MIN_WAVES alone is large data:
 * the rule then holds per epoch (see sgd.c). */
#define MF_SGD_WIDE_STEP 512

/* A 32-bit mixing function (the finalizer of MurmurHash3): the Feistel round function. */
MF_HD uint32_t mf_sgd_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* A keyed bijection of [0, n), n >= 1: a four-round balanced Feistel network on the
 * smallest even number of bits that holds n - 1, with cycle walking for the values past n
 * (fewer than four steps on average, since the domain is under 4n). It orders the chunks
 * of an epoch: cheap enough to evaluate per chunk on the GPU, with no table to shuffle. */
typedef struct mf_sgd_perm {
    uint64_t n;
    uint32_t half_bits; /* bits of each half */
    uint32_t key[4];
} mf_sgd_perm;

MF_HD mf_sgd_perm mf_sgd_perm_make(uint64_t n, uint64_t seed, uint32_t epoch)
{
    mf_sgd_perm p;
    p.n = n;
    uint32_t bits = 2;
    while (bits < 62 && ((uint64_t)1 << bits) < n)
        bits += 2;
    p.half_bits = bits / 2;
    for (int r = 0; r < 4; r++)
        p.key[r] =
            mf_sgd_mix32((uint32_t)seed ^ mf_sgd_mix32((uint32_t)(seed >> 32) ^
                                                       mf_sgd_mix32(epoch * 4u + (uint32_t)r)));
    return p;
}

MF_HD uint64_t mf_sgd_perm_apply(const mf_sgd_perm *p, uint64_t x)
{
    const uint64_t mask = ((uint64_t)1 << p->half_bits) - 1;
    do {
        uint64_t l = x >> p->half_bits, r = x & mask;
        for (int round = 0; round < 4; round++) {
            uint64_t f = (uint64_t)mf_sgd_mix32((uint32_t)r ^ p->key[round]) ^
                         ((uint64_t)mf_sgd_mix32((uint32_t)(r >> 32) + p->key[round]) << 32);
            uint64_t t = l ^ (f & mask);
            l = r;
            r = t;
        }
        x = (l << p->half_bits) | r;
    } while (x >= p->n);
    return x;
}

/* The learning rate of epoch t (0-based). */
MF_HD float mf_sgd_rate(float lr0, int inverse_time, float decay, int t)
{
    if (!inverse_time)
        return lr0;
    return (float)((double)lr0 / (1.0 + (double)decay * pow((double)t, 1.5)));
}

/* IEEE binary16 from float, rounding to nearest even (as __float2half_rn), and back. */
MF_HD uint16_t mf_half_from_float(float f)
{
    union {
        float f;
        uint32_t u;
    } in;
    in.f = f;
    uint32_t x = in.u, sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00u);
    if (mag >= 0x477ff000u) /* rounds past 65504: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (mag < 0x38800000u) {   /* below 2^-14: subnormal or zero */
        if (mag < 0x33000000u) /* below half the smallest subnormal: zero */
            return (uint16_t)sign;
        uint32_t e = mag >> 23, m = (mag & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((mag >> 13) - (112u << 10)), rem = mag & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
        q++;
    return (uint16_t)(sign | q);
}

MF_HD float mf_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
    if (e == 0x1f)
        x = sign | 0x7f800000u | (m << 13);
    else if (e != 0)
        x = sign | ((e + 112u) << 23) | (m << 13);
    else if (m == 0)
        x = sign;
    else { /* subnormal: normalize */
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    union {
        uint32_t u;
        float f;
    } out;
    out.u = x;
    return out.f;
}

#endif
