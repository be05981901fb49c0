/* The 16-bit roundings of mf_precision (bf16, fp16) in plain C, integer arithmetic alone:
 * the CPU engines round a factor's entries as the CUDA ones store them (__float2bfloat16_rn,
 * __float2half_rn), so that CPU and GPU results of one precision differ by the float
 * accumulation alone, and the tests derive their bounds from the same functions; CUDA code
 * may call them too (MF_ROUND_FN), with the same result on any architecture and under any
 * float flags. Each returns the rounded value as a float (every bf16 and fp16 value is a
 * float). NaN stays NaN; infinities stay infinite. */
#ifndef MF_CORE_ROUND16_H
#define MF_CORE_ROUND16_H

#include <stdint.h>
#include <string.h>

#ifndef MF_ROUND_FN
#ifdef __CUDACC__
#define MF_ROUND_FN static inline __host__ __device__
#else
#define MF_ROUND_FN static inline
#endif
#endif

MF_ROUND_FN uint32_t mf_float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

MF_ROUND_FN float mf_bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* bf16 as __float2bfloat16_rn: the 16 low bits rounded to nearest, ties to even. */
MF_ROUND_FN float mf_round_bf16(float x)
{
    uint32_t u = mf_float_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    return mf_bits_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

/* fp16 as __float2half_rn: 11 significant bits, ties to even, a fixed spacing of 2^-24 below
 * 2^-14 (the subnormals), and infinity from 65520 on. */
MF_ROUND_FN float mf_round_fp16(float x)
{
    uint32_t u = mf_float_bits(x);
    uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    if (mag >= 0x7f800000u)
        return x;
    if (mag >= 0x477ff000u) /* 65520 = 65504 + half its ulp, a tie that goes up (to even) */
        return mf_bits_float(sign | 0x7f800000u);
    if (mag >= 0x38800000u) /* 2^-14 on: a normal half */
        return mf_bits_float((u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu);
    /* Below 2^-14 the spacing is 2^-24: |x| = m 2^(e - 150) (m with its leading bit, e the
     * biased exponent, at most 112) is q = m / 2^(126 - e) units of 2^-24, rounded to
     * nearest even; below 2^-25 (a shift past 24) that is 0. */
    const uint32_t e = mag >> 23, shift = 126 - (e ? e : 1);
    if (shift > 24)
        return mf_bits_float(sign);
    const uint32_t m = (mag & 0x7fffffu) | (e ? 0x800000u : 0u);
    const uint32_t half = 1u << (shift - 1), rest = m & ((half << 1) - 1u);
    uint32_t q = m >> shift;
    q += rest > half || (rest == half && (q & 1u));
    if (q == 0)
        return mf_bits_float(sign);
    /* q (at most 2^10) 2^-24 as a float: its leading bit p gives the exponent p - 24. */
    uint32_t p = 0;
    while (q >> (p + 1))
        p++;
    return mf_bits_float(sign | ((p + 103u) << 23) | ((q << (23 - p)) & 0x7fffffu));
}

#endif
