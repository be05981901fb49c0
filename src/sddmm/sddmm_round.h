/* The roundings of the reduced-precision SDDMM (mf_precision), in plain C: the CPU backend
 * rounds the factors' entries as the tensor cores receive them, so that CPU and GPU results
 * of one precision differ by the float accumulation alone, and the tests derive their
 * bounds from the same functions. Each returns the rounded value as a float (every TF32,
 * bf16 and fp16 value is a float). NaN stays NaN; infinities stay infinite. */
#ifndef MF_SDDMM_ROUND_H
#define MF_SDDMM_ROUND_H

#include <stdint.h>
#include <string.h>

static inline uint32_t mf_float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float mf_bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* TF32 as cvt.rna.tf32.f32 makes it: the 13 low mantissa bits rounded to nearest, ties away
 * from zero (adding half an ulp to the magnitude carries into the exponent when needed). */
static inline float mf_round_tf32(float x)
{
    uint32_t u = mf_float_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x; /* inf, NaN */
    return mf_bits_float((u + 0x1000u) & ~0x1fffu);
}

/* bf16 as __float2bfloat16_rn: the 16 low bits rounded to nearest, ties to even. */
static inline float mf_round_bf16(float x)
{
    uint32_t u = mf_float_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    return mf_bits_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

/* fp16 as __float2half_rn: 11 significant bits, ties to even, a fixed spacing of 2^-24 below
 * 2^-14 (the subnormals), and infinity from 65520 on. */
static inline float mf_round_fp16(float x)
{
    uint32_t u = mf_float_bits(x);
    uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag >= 0x7f800000u)
        return x;
    if (mag >= 0x477ff000u) /* 65520 = 65504 + half its ulp, a tie that goes up (to even) */
        return mf_bits_float(sign | 0x7f800000u);
    if (mag >= 0x38800000u) /* 2^-14 on: a normal half */
        return mf_bits_float((u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu);
    /* Below 2^-14 the spacing is 2^-24, the ulp of 0.5: adding and removing 0.5 rounds to
     * it, to nearest even, in float arithmetic. */
    float a = mf_bits_float(mag) + 0.5f;
    a -= 0.5f;
    return sign ? -a : a;
}

#endif
