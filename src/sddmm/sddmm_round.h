/* The roundings of the reduced-precision SDDMM (mf_precision), in plain C: the CPU backend
 * rounds the factors' entries as the tensor cores receive them, so that CPU and GPU results
 * of one precision differ by the float accumulation alone, and the tests derive their
 * bounds from the same functions. Each returns the rounded value as a float (every TF32,
 * bf16 and fp16 value is a float). NaN stays NaN; infinities stay infinite. The 16-bit ones
 * live in core/round16.h (ASD rounds too); like those, TF32's is integer arithmetic alone,
 * so CUDA code (the pairs kernel) uses the same functions on any architecture. */
#ifndef MF_SDDMM_ROUND_H
#define MF_SDDMM_ROUND_H

#include <stdint.h>

#include "core/round16.h" /* mf_round_bf16, mf_round_fp16, the bit casts */
#include "mfact/mfact.h"

/* TF32 as cvt.rna.tf32.f32 makes it: the 13 low mantissa bits rounded to nearest, ties away
 * from zero (adding half an ulp to the magnitude carries into the exponent when needed). */
MF_ROUND_FN float mf_round_tf32(float x)
{
    uint32_t u = mf_float_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x; /* inf, NaN */
    return mf_bits_float((u + 0x1000u) & ~0x1fffu);
}

/* TF32 held as scaled fp16 (sddmm_tf32.cu): fp16's normal values have TF32's 11 significant
 * bits, so a TF32 value times a power of two 2^e is held exactly where the product is in
 * fp16's normal range. A row's power brings its largest magnitude (`top`, a TF32 value's
 * bits with the sign cleared) into [2^14, 2^15): e = 14 - ilogb(top). The row fits when top
 * is 0 or in [2^-64, 2^64) (e then in [-49, 78], which the kernel's unscaling counts on),
 * and a value fits when it is 0 or at most 28 binades below top (scaled: at least 2^-14).
 * NaN and infinities fit nowhere. mf_tf32_row_power gives e (0 for an all-zero row) and
 * whether the row's largest fits; mf_tf32_value_fits one value of the row. */
/* 2^e as a float, for e in [-126, 127] (a normal float: its exponent bits alone). */
MF_ROUND_FN float mf_pow2(int e)
{
    return mf_bits_float((uint32_t)(e + 127) << 23);
}

/* A row's power byte where the row does not fit: its entries are computed from the floats. */
#define MF_TF32_ROW_UNFIT (-128)

MF_ROUND_FN int mf_tf32_row_power(uint32_t top, int *e)
{
    const int field = (int)(top >> 23);
    *e = top ? 141 - field : 0;
    return top == 0 || (*e >= -49 && *e <= 78);
}

MF_ROUND_FN int mf_tf32_value_fits(uint32_t m, uint32_t top)
{
    return m == 0 || (m < 0x7f800000u && (int)(m >> 23) >= (int)(top >> 23) - 28);
}

/* One of A's TF32 values (its magnitude bits m) where the kernel reads A's floats beside B's
 * scaled copy alone (sddmm_tf32.cu): 0 or in [2^-64, 2^64), so that its products with B's
 * scaled values (0 or in [2^-14, 2^15)) are exact and normal, at least 2^-78 and multiples of
 * 2^-98, and a chunk's sums stay below 2^89, as with A's own scaled copy. NaN and infinities
 * do not fit. */
MF_ROUND_FN int mf_tf32_float_fits(uint32_t m)
{
    return m == 0 || (m >= 0x1f800000u && m < 0x5f800000u);
}

/* x as one input of a product in `precision` (an mf_precision) reaches the arithmetic:
 * rounded for TF32, BF16 and FP16; float itself for FP32 and for 3XTF32, whose split keeps
 * float's accuracy (the pairs path computes those in float). */
MF_ROUND_FN float mf_round_to(float x, int precision)
{
    switch (precision) {
    case MF_PRECISION_TF32: return mf_round_tf32(x);
    case MF_PRECISION_BF16: return mf_round_bf16(x);
    case MF_PRECISION_FP16: return mf_round_fp16(x);
    default: return x;
    }
}

#endif
