// TF32 on the CUDA cores from half the bytes: the factors rounded to TF32 and stored as fp16,
// each row scaled by its own power of two, for the float kernel's MF_SDDMM_TF32_16 instance
// (sddmm_kernels.cuh).
//
// Why this is exact: a TF32 value has 11 significant bits, as an fp16 normal value does, so
// fp16 holds it exactly once a power of two brings it into fp16's normal range [2^-14,
// 65504]. Scaling a row so that its largest magnitude lands in [2^14, 2^15) keeps every
// value of the row that is within 2^28 of that largest one normal; products and float sums
// of the scaled values are the unscaled ones times the two rows' powers, exactly, and the
// kernel multiplies the powers back out (mf_sddmm_unpow). Exact products of the TF32 values
// and float sums, as on the float factors, at the gather cost of bf16 (bench/README.md).
//
// A row that cannot be held so (a value more than 28 binades below its largest, a largest
// outside [2^-64, 2^64), which keeps the powers within [-49, 78] and the kernel's partial
// sums, divided by B's power, within float's normal range, or a value not finite) is marked
// unfit in its power byte. The kernel leaves the entries of an unfit row of A or of B
// unwritten, and tf32_unfit_entries computes them after it from the floats. Such rows are
// few, but on continuous factors some value 2^28 below its row's largest turns up in most
// large calls (bench/README.md), so they are handled row by row: the rest of the call keeps
// the copies, and no host wait decides anything.
#include <cuda_fp16.h>

#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "cuda/lower_bound.cuh"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_layout.h" // mf_sddmm_item
#include "sddmm/sddmm_round.h"  // mf_round_tf32, mf_pow2, mf_tf32_row_power, mf_tf32_value_fits

namespace
{

// Row r of the sources (A's rows, then B's) as scaled fp16 in Y (rows of ld16 values, zeros
// past k, two a 32-bit word, the lower index in the low half), its power's exponent in
// pow[r], or MF_TF32_ROW_UNFIT for a row that fp16 cannot hold so (wide[0] then set for an
// A row, wide[1] for a B row). One warp a row.
__global__ void tf32_rows_to_fp16(const float *A, int64_t lda, int64_t rows_a, const float *B,
                                  int64_t ldb, int64_t rows, int k, int64_t ld16, uint32_t *Y,
                                  int8_t *pow, int *wide)
{
    const int lane = threadIdx.x & 31;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const float *x = r < rows_a ? A + r * lda : B + (r - rows_a) * ldb;
        // The largest magnitude (as bits: for finite non-negative floats the order is the
        // integers'); a value not finite makes the row unfit.
        uint32_t top = 0;
        for (int t = lane; t < k; t += 32)
            top = max(top, __float_as_uint(mf_round_tf32(x[t])) & 0x7fffffffu);
        for (int off = 16; off >= 1; off /= 2)
            top = max(top, __shfl_xor_sync(0xffffffffu, top, off));
        // The power 2^e that brings the largest into [2^14, 2^15) (sddmm_round.h)
        int e;
        bool unfit = !mf_tf32_row_power(top, &e);
        const float up = mf_pow2(e); // out of range for an unfit row, whose copy is not trusted
        for (int t = 2 * lane; t < ld16; t += 64) {
            float v[2];
            uint32_t h[2];
            for (int i = 0; i < 2; i++) {
                v[i] = t + i < k ? mf_round_tf32(x[t + i]) : 0.f;
                // within 28 binades of the largest: normal in fp16 once scaled, held exactly
                unfit |= !mf_tf32_value_fits(__float_as_uint(v[i]) & 0x7fffffffu, top);
                h[i] = __half_as_ushort(__float2half_rn(v[i] * up));
            }
            Y[(r * ld16 + t) / 2] = h[0] | h[1] << 16; // an unfit row's: read, results dropped
        }
        unfit = __any_sync(0xffffffffu, unfit);
        if (lane == 0) {
            pow[r] = (int8_t)(unfit ? MF_TF32_ROW_UNFIT : e);
            if (unfit)
                wide[r < rows_a ? 0 : 1] = 1; // every writer writes 1: no race that matters
        }
    }
}

// One entry p of row `row` from the float factors, both rounded to TF32 as they load (exact
// products, float sums: TF32's bound), into out as the kernel writes a whole-k result (alpha,
// S's values, beta). One warp, converged.
__device__ void tf32_float_entry(int64_t p, int32_t row, int lane, const int32_t *col,
                                 const float *val, const float *A, int64_t lda, const float *B,
                                 int64_t ldb, int k, float alpha, float beta, float *out)
{
    const float *a = A + (int64_t)row * lda;
    const float *b = B + (size_t)(uint32_t)__ldg(col + p) * (size_t)ldb;
    float acc = 0.f;
    for (int t = lane; t < k; t += 32)
        acc = fmaf(mf_round_tf32(__ldg(a + t)), mf_round_tf32(__ldg(b + t)), acc);
    for (int off = 16; off >= 1; off /= 2)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
        float v = alpha * acc;
        if (val)
            v *= __ldg(val + p);
        out[p] = beta == 0.f ? v : v + beta * out[p];
    }
}

// The entries the kernel left (sddmm_kernels.cuh), found by streaming scans, a thread an item
// or an entry, each found one then computed by its whole warp: the items of unfit A rows
// (every entry of them), then the entries of unfit B rows whose A row fits (their row found by
// a binary search). Each entry once. Nothing to do and two words read unless a row was unfit;
// a scan reads the items (16 bytes each) or the column indices, at memory speed: Netflix
// k = 128 with an unfit B row took 730 us when a warp walked each item's entries (H200).
__global__ void tf32_unfit_entries(const mf_sddmm_item *items, int64_t n_items,
                                   const int64_t *row_ptr, int32_t rows, const int32_t *col,
                                   int64_t nnz, const float *val, const float *A, int64_t lda,
                                   const float *B, int64_t ldb, int k, float alpha, float beta,
                                   float *out, const int8_t *pow_a, const int8_t *pow_b,
                                   const int *wide)
{
    const bool any_a = __ldg(wide) != 0, any_b = __ldg(wide + 1) != 0;
    if (!any_a && !any_b)
        return;
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x; // threads: 32 a warp
    const int64_t first = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) - lane;
    for (int64_t base = first; any_a && base < n_items; base += stride) {
        const int64_t it = base + lane;
        const bool mine = it < n_items && __ldg(pow_a + items[it].row) == MF_TF32_ROW_UNFIT;
        for (unsigned todo = __ballot_sync(0xffffffffu, mine); todo; todo &= todo - 1) {
            const mf_sddmm_item item = items[base + __ffs(todo) - 1];
            for (int64_t p = item.begin; p < item.begin + item.count; p++)
                tf32_float_entry(p, item.row, lane, col, val, A, lda, B, ldb, k, alpha, beta, out);
        }
    }
    for (int64_t base = first; any_b && base < nnz; base += stride) {
        const int64_t p = base + lane;
        const bool mine = p < nnz && __ldg(pow_b + __ldg(col + p)) == MF_TF32_ROW_UNFIT;
        for (unsigned todo = __ballot_sync(0xffffffffu, mine); todo; todo &= todo - 1) {
            const int64_t q = base + __ffs(todo) - 1;
            // its row: the last r with row_ptr[r] <= q (rows with entries end past q)
            const int32_t row = (int32_t)(mf_lower_bound(row_ptr, 0, (int64_t)rows + 1, q + 1) - 1);
            if (__ldg(pow_a + row) != MF_TF32_ROW_UNFIT) // else the items' scan computed it
                tf32_float_entry(q, row, lane, col, val, A, lda, B, ldb, k, alpha, beta, out);
        }
    }
}

} // namespace

extern "C" mf_status mf_sddmm_tf32_copy16(mf_ctx *ctx, const mf_sparse *S,
                                          const mf_sddmm_call *call, mf_dbuf *copies,
                                          mf_sddmm_tf32_copies *out)
{
    const int64_t ld16 = (call->k + 31) / 32 * 32; // as mf_tc_copy16's (the tuning rules' rows)
    const int64_t rows = S->rows + (int64_t)S->cols;
    MF_TRY(mf_dmem_alloc(ctx, copies, (size_t)rows * ld16 * 2 + 16 + (size_t)rows,
                         "SDDMM TF32 scaled fp16 factors"));
    uint32_t *y = (uint32_t *)copies->ptr; // ld16 is even: rows of whole words
    int *wide = (int *)(y + rows * ld16 / 2);
    int8_t *pow = (int8_t *)(wide + 4);
    cudaStream_t stream = ctx->link.cuda->stream;
    cudaError_t err = cudaMemsetAsync(wide, 0, 2 * sizeof *wide, stream);
    if (err != cudaSuccess) {
        mf_dmem_free(ctx, copies);
        return mf_cuda_fail(ctx, err, "cudaMemsetAsync", __FILE__, __LINE__);
    }
    tf32_rows_to_fp16<<<mf_cuda_grid(ctx->link.cuda, rows * 32, 256, 16), 256, 0, stream>>>(
        call->A, call->lda, S->rows, call->B, call->ldb, rows, call->k, ld16, y, pow, wide);
    mf_status st = MF_CUDA_LAUNCHED(ctx, "the SDDMM TF32 fp16 copies");
    if (st != MF_OK) {
        mf_dmem_free(ctx, copies);
        return st;
    }
    out->A16 = (const uint16_t *)y;
    out->B16 = out->A16 + (size_t)S->rows * ld16;
    out->pow_a = pow;
    out->pow_b = pow + S->rows;
    out->wide = wide;
    out->ld = ld16;
    return MF_OK;
}

extern "C" mf_status mf_sddmm_tf32_unfit(mf_ctx *ctx, const struct mf_sddmm_item *items,
                                         int64_t n_items, const int64_t *row_ptr,
                                         const int32_t *col, const float *val, const mf_sparse *S,
                                         const mf_sddmm_call *call, float *out, float beta,
                                         const int8_t *pow_a, const int8_t *pow_b, const int *wide)
{
    if (n_items == 0)
        return MF_OK;
    tf32_unfit_entries<<<mf_cuda_grid(ctx->link.cuda, S->nnz, 256, 8), 256, 0,
                         ctx->link.cuda->stream>>>(
        items, n_items, row_ptr, S->rows, col, S->nnz, val, call->A, call->lda, call->B, call->ldb,
        call->k, call->alpha, beta, out, pow_a, pow_b, wide);
    return MF_CUDA_LAUNCHED(ctx, "the SDDMM TF32 unfit rows' entries");
}
