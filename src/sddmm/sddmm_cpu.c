/* The CPU backend of mf_sddmm: OpenMP over rows (dynamic, so a few long rows do not leave
 * threads idle), one float dot product per stored entry that the compiler vectorizes. The
 * reduced precisions round each factor entry as the tensor cores receive it
 * (sddmm_round.h) and multiply and add in float, as the GPU does: the products of rounded
 * entries are exact in float, so the two differ by the order of the float sums alone. */
#include "core/ctx.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_round.h"

static inline float dot(const float *restrict a, const float *restrict b, int k)
{
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int t = 0; t < k; t++)
        acc += a[t] * b[t];
    return acc;
}

/* One precision's dot product: both inputs rounded by ROUND first. */
#define MF_ROUNDED_DOT(name, ROUND)                                                                \
    static inline float name(const float *restrict a, const float *restrict b, int k)              \
    {                                                                                              \
        float acc = 0.0f;                                                                          \
        _Pragma("omp simd reduction(+ : acc)") for (int t = 0; t < k; t++) acc +=                  \
            ROUND(a[t]) * ROUND(b[t]);                                                             \
        return acc;                                                                                \
    }
MF_ROUNDED_DOT(dot_tf32, mf_round_tf32)
MF_ROUNDED_DOT(dot_bf16, mf_round_bf16)
MF_ROUNDED_DOT(dot_fp16, mf_round_fp16)

/* 3xTF32: x = big + small with big = tf32(x), small = tf32(x - big) (x - big is exact);
 * big*big + (big*small + small*big), every product exact in float. */
static inline float dot_3xtf32(const float *restrict a, const float *restrict b, int k)
{
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int t = 0; t < k; t++) {
        float ab = mf_round_tf32(a[t]), bb = mf_round_tf32(b[t]);
        float as = mf_round_tf32(a[t] - ab), bs = mf_round_tf32(b[t] - bb);
        acc += ab * bb + (ab * bs + as * bb);
    }
    return acc;
}

/* The switch is the same for every entry of a call: a branch the processor predicts. */
static inline float dot_in(const float *restrict a, const float *restrict b, int k, int precision)
{
    switch (precision) {
    case MF_PRECISION_3XTF32: return dot_3xtf32(a, b, k);
    case MF_PRECISION_TF32: return dot_tf32(a, b, k);
    case MF_PRECISION_BF16: return dot_bf16(a, b, k);
    case MF_PRECISION_FP16: return dot_fp16(a, b, k);
    default: return dot(a, b, k);
    }
}

void mf_sddmm_cpu(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *c)
{
    (void)ctx; /* read by OpenMP alone */
    const int64_t *row_ptr = S->row_ptr;
    const int32_t *col = S->col;
    const float *val = c->pattern ? NULL : S->val;
    float *out = c->out;
    const float alpha = c->alpha, beta = c->beta;
    const int precision = c->precision;
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 64) if (S->nnz > 32768)
    for (int32_t i = 0; i < S->rows; i++) {
        const float *a = c->A + (int64_t)i * c->lda;
        for (int64_t p = row_ptr[i]; p < row_ptr[i + 1]; p++) {
            float v = alpha * dot_in(a, c->B + (int64_t)col[p] * c->ldb, c->k, precision);
            if (val)
                v *= val[p];
            /* beta == 0 never reads out: it may hold NaN (BLAS semantics). */
            out[p] = beta == 0.0f ? v : v + beta * out[p];
        }
    }
}
