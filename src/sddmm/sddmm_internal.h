/* What the SDDMM entry points share with their CPU and CUDA implementations; private to
 * src/sddmm (other folders include sddmm/sddmm.h). */
#ifndef MF_SDDMM_INTERNAL_H
#define MF_SDDMM_INTERNAL_H

#include <stdint.h>

#include "sddmm/sddmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* OpenMP over rows; the reference for the GPU tests. */
void mf_sddmm_cpu(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call);

/* The CUDA backend (sddmm.cu): builds or reuses S's plan for call->k, then runs. */
mf_status mf_cuda_sddmm(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call);

/* out = t * val + beta * out over n entries (val NULL: 1; beta = 0: out not read), in index
 * order, stream-ordered (sddmm.cu): the second pass of a call whose products were computed
 * apart, a chunked float run's partial sums or a large tensor-core call's products. Rounded
 * as the tensor-core kernel's own epilogue, so either way gives the same bits. */
mf_status mf_cuda_sddmm_finish(mf_ctx *ctx, float *out, const float *t, const float *val,
                               float beta, int64_t n);

/* Below MF_SDDMM_TUNE_MIN_NNZ entries (sddmm_tuning.h) and up to this k, bf16 and fp16 on the
 * tensor cores round the floats in registers rather than read 16-bit copies: the calls are
 * launch-bound there and the copies take two more launches. On the H200 (three graphs of
 * 84K-196K entries, bench/README.md) that was 1.6-1.9x faster at k = 32 and 1.1-1.3x at
 * k = 128, but 1.2-1.5x slower at k = 512, where the copies halve the bytes gathered. */
#define MF_SDDMM_TC_COPY_K 128

/* The reduced precisions (sddmm_tc.cu): builds or reuses S's condensed-column plan, then
 * runs the tensor-core kernel for call->precision; stream-ordered. bf16 and fp16 read the
 * 16-bit copies made by mf_tc_copy16 (A16, B16, rows of ld16) when given, else round the
 * floats in registers; the TF32 kinds pass NULL. */
mf_status mf_cuda_sddmm_tc(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call,
                           const uint16_t *A16, const uint16_t *B16, int64_t ld16);

/* bf16 and fp16 (sddmm_tc.cu): A and B rounded to call->precision into one device buffer
 * (*copies, freed by the caller, stream-ordered), rows of *ld values (k rounded up to 32,
 * zeros past k, two values a 32-bit word, the lower index in the low half); stream-ordered.
 * A16 NULL: B's copy alone. */
mf_status mf_tc_copy16(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call, mf_dbuf *copies,
                       const uint16_t **A16, const uint16_t **B16, int64_t *ld);

/* TF32 on the CUDA cores (sddmm_tf32.cu): A's and B's rows rounded to TF32 as fp16 exactly,
 * each row of A times its own power of two and all of B times one (A16, B16: rows of ld
 * values, k rounded up to 32, zeros past k); pow_a and pow_b (one a row) the powers'
 * exponents, or MF_TF32_ROW_UNFIT for a row fp16 cannot hold so (sddmm_round.h; an unfit
 * row's copy is NaN); wide[0] and wide[1], on the device, set when some row of A, of B, was
 * unfit; *b_top, on the device, the bits of B's largest finite TF32 magnitude, from which
 * B's power follows (mf_tf32_row_power). All in one device buffer (*copies, freed by the
 * caller, stream-ordered). The factors' rows must be 16-byte vectors (k, lda and ldb
 * multiples of 4, A and B 16-byte aligned): MF_ERR_INTERNAL otherwise.
 * copy_a 0: B's copy alone (the calls' route below MF_SDDMM_TF32_COPY_A_MIN_PER_ROW): A16
 * NULL, pow_a zero (one byte a row of A, for the kernel to mark the rows holding a value
 * mf_tf32_float_fits refuses) and wide[0] zero. */
typedef struct mf_sddmm_tf32_copies {
    const uint16_t *A16, *B16;
    int8_t *pow_a; /* without A16 written by the kernel, which marks A's unfit rows */
    const int8_t *pow_b;
    int *wide;
    const uint32_t *b_top;
    int64_t ld;
} mf_sddmm_tf32_copies;
mf_status mf_sddmm_tf32_copy16(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call,
                               int copy_a, mf_dbuf *copies, mf_sddmm_tf32_copies *out);

/* After the kernel on those copies, which leaves the entries of unfit rows unwritten: those
 * entries from the float factors rounded to TF32, written to out as a whole-k result with
 * call->alpha, S's values (val, or NULL) and beta; found by a scan of the plan layout's items
 * (n_items of them) where a row of A was unfit, of S's column indices where a row of B was
 * (row_ptr, col: S's CSR on the device). Stream-ordered, no host wait: with no unfit row it
 * reads two words and returns. */
struct mf_sddmm_item;
mf_status mf_sddmm_tf32_unfit(mf_ctx *ctx, const struct mf_sddmm_item *items, int64_t n_items,
                              const int64_t *row_ptr, const int32_t *col, const float *val,
                              const mf_sparse *S, const mf_sddmm_call *call, float *out, float beta,
                              const int8_t *pow_a, const int8_t *pow_b, const int *wide);

/* bf16, fp16 and TF32 on the CUDA cores with 16-byte float rows copy B alone (A's floats are
 * rounded as they load, once an item; TF32's copy is B's scaled fp16) from this many entries
 * per column of S on, else round both factors' floats as they load: the copy moves
 * cols x k x 6 bytes, and saves each entry's gather half its bytes and its conversions. It
 * keeps an evaluation of a small test set against large factors (RMSE, predictions) off a
 * pass over B. */
#define MF_SDDMM_COPY_B_MIN_PER_COL 16

/* TF32's copy of B (scaled fp16) is taken only from this much work on (entries x k): beside the
 * kernel it costs three launches (B's largest value, the scaled rows, the scan for unfit rows'
 * entries) and a kernel that reads each item's power, where bf16's costs one conversion. On one
 * H200 (bench/README.md, 2026-12-01) rounding the floats as they load was 4-58% faster at up
 * to 111M (every measured case: real graphs of 84K-196K entries at k up to 512, and generated
 * shapes of 0.76M-3.5M entries at small k), and the copy 8-35% faster from 196M on, except a
 * 1.6M-entry case at k = 128 (201M: 5% slower). */
#define MF_SDDMM_TF32_COPY_MIN_WORK 150000000LL

/* TF32 on the CUDA cores copies A too (each row scaled by its own power) from this many
 * entries per row of A on. Without A's copy the kernel rounds and range-checks A's floats once
 * an item, which costs where items are many and short beside the gathers: on one H200, B's
 * copy alone ran 10-12% slower than both copies at k = 32 and 6% at k = 128 on the Netflix
 * and NYTimes shapes (154 and 205 entries a row), level at k = 512, and 7-34% faster on shapes
 * of 30 and 6 entries a row, where the pass over A is a large part of the call
 * (bench/README.md, 2026-12-01). */
#define MF_SDDMM_TF32_COPY_A_MIN_PER_ROW 64

/* Test hook (sddmm_hooks.cu: CUDA builds, internal archive only): run compiled variant v
 * (sddmm_tuning.h) with panel width tj and block_nnz entries per block, on the grouped
 * layout or not (flags & MF_SDDMM_HOOK_GROUPED, sddmm_layout.h), bypassing the tuning rules,
 * in call->precision (FP32, or TF32, BF16, FP16 on the SM-L2 vector variants: reading the
 * factors' copies, or with flags & MF_SDDMM_HOOK_REGISTERS rounding the floats as they load);
 * finished on return. */
#define MF_SDDMM_HOOK_GROUPED   1
#define MF_SDDMM_HOOK_REGISTERS 2
mf_status mf_cuda_sddmm_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                                int32_t tj, int64_t block_nnz, int flags);

/* Device arrays (predict.cu): out[p] = (accumulate ? out[p] : 0) + sign * (mean + user[i] +
 * item[j]) at every stored entry p = (i, j) of S. */
mf_status mf_cuda_bias_offsets(mf_ctx *ctx, mf_sparse *S, const mf_bias_terms *bias, float sign,
                               int accumulate, float *out);

/* Predictions for (user[p], item[p]), p < n, every array on the device: a user >= users or
 * an item >= items contributes no terms. A negative index stops the call before anything
 * is written: MF_ERR_INVALID_DATA naming the first such pair. */
typedef struct mf_pairs_call {
    int64_t n;
    const int32_t *user, *item;
    int32_t users, items;
    int k;
    const float *A; /* users x k, lda */
    int64_t lda;
    const float *B; /* items x k, ldb */
    int64_t ldb;
    mf_bias_terms bias;
    float *out;
    int precision; /* an mf_precision: A's and B's entries rounded as mf_round_to does */
} mf_pairs_call;
mf_status mf_cuda_predict_pairs(mf_ctx *ctx, const mf_pairs_call *call);

/* sum of out[0..n)^2 in double, on the device (rmse). */
mf_status mf_cuda_sum_squares(mf_ctx *ctx, const float *x, int64_t n, double *sum);

#ifdef __cplusplus
}
#endif
#endif
