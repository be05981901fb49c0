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
