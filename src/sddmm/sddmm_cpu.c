/* The CPU backend of mf_sddmm: OpenMP over rows (dynamic, so a few long rows do not leave
 * threads idle), one float dot product per stored entry that the compiler vectorizes. */
#include "core/ctx.h"
#include "sddmm/sddmm_internal.h"

static inline float dot(const float *restrict a, const float *restrict b, int k)
{
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int t = 0; t < k; t++)
        acc += a[t] * b[t];
    return acc;
}

void mf_sddmm_cpu(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *c)
{
    (void)ctx; /* read by OpenMP alone */
    const int64_t *row_ptr = S->row_ptr;
    const int32_t *col = S->col;
    const float *val = c->pattern ? NULL : S->val;
    float *out = c->out;
    const float alpha = c->alpha, beta = c->beta;
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 64) if (S->nnz > 32768)
    for (int32_t i = 0; i < S->rows; i++) {
        const float *a = c->A + (int64_t)i * c->lda;
        for (int64_t p = row_ptr[i]; p < row_ptr[i + 1]; p++) {
            float v = alpha * dot(a, c->B + (int64_t)col[p] * c->ldb, c->k);
            if (val)
                v *= val[p];
            /* beta == 0 never reads out: it may hold NaN (BLAS semantics). */
            out[p] = beta == 0.0f ? v : v + beta * out[p];
        }
    }
}
