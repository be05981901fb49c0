// TF32 on the CUDA cores from half the bytes: the factors rounded to TF32 and stored as fp16,
// scaled by powers of two (each row of A by its own, all of B by one), for the float kernel's
// MF_SDDMM_TF32_16 instance (sddmm_kernels.cuh). Below MF_SDDMM_TF32_COPY_A_MIN_PER_ROW entries
// a row of A the calls copy B alone (copy_a 0): the kernel gathers B's row for every entry but
// reads A's row once an item, so it rounds A's floats as they load, unscaled, and a row of A
// with a value outside [2^-64, 2^64) other than 0 (mf_tf32_float_fits) goes to the pass on the
// floats below; from there on, or with MFACT_SDDMM_COPIES=both, A is copied too.
//
// Why this is exact: a TF32 value has 11 significant bits, as an fp16 normal value does, so
// fp16 holds it exactly once a power of two brings it into fp16's normal range [2^-14,
// 65504]. Scaling so that the largest magnitude (an A row's, or all of B's) lands in [2^14,
// 2^15) keeps every value within 2^28 of that largest normal; products and float sums of the
// scaled values are the unscaled ones times the two powers, exactly, and the kernel
// multiplies the powers back out (mf_sddmm_unpow). Exact products of the TF32 values and float
// sums, as on the float factors, at the gather cost of bf16 (bench/README.md).
//
// Why B has one power: the kernel reads an item's A power once, but a B power would be one
// more load per entry, beside the entry's column index and B row, and at k = 32 the kernel is
// bound by exactly those loads: with a power a B row the kernel took 918 us against bf16's
// 748 on the Netflix shape (H200, Nsight Compute, 2026-11-30).
//
// A row that cannot be held so (a value more than 28 binades below the largest, a largest
// outside [2^-64, 2^64), which keeps the powers within [-49, 78] and the kernel's sums within
// float's normal range, or a value not finite) is marked unfit in its power byte. The kernel
// leaves the entries of an unfit row of A or B unwritten: the row's copy holds NaN, so every
// sum with it is NaN, which no fitting pair of rows can make (sddmm_kernels.cuh), and the
// kernel writes no NaN sum. (Skipping an unfit A row's items instead made every item wait
// for its row's power before its first entry: 5-7% of the kernel at k = 32; without A's copy
// the kernel checks A's values as it loads them, and skips the items of a row that fails.)
// tf32_unfit_entries
// computes those entries after it from the floats. Such rows are few, but on continuous factors
// some value 2^28 below the largest turns up in most large calls (bench/README.md), so they are
// handled row by row: the rest of the call keeps the copies, and no host wait decides anything.
// (B's one power makes a B row of values all far below B's largest unfit, which a power of its own
// would have kept: factors whose rows differ in scale by 2^28 and more, where the pass does
// that row's entries from the floats, slower but exact.)
#include <cuda_fp16.h>

#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "cuda/lower_bound.cuh"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_layout.h" // mf_sddmm_item
#include "sddmm/sddmm_round.h"  // mf_round_tf32, mf_pow2, mf_tf32_row_power, mf_tf32_value_fits

namespace
{

// A unit of 4 floats rounded to TF32 (sddmm_round.h), and its largest magnitude as bits (for
// finite non-negative floats the order is the integers').
__device__ __forceinline__ float4 tf32_round4(float4 v)
{
    return make_float4(mf_round_tf32(v.x), mf_round_tf32(v.y), mf_round_tf32(v.z),
                       mf_round_tf32(v.w));
}
__device__ __forceinline__ uint32_t tf32_top4(float4 v, bool finite_only)
{
    uint32_t m = 0;
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t b = __float_as_uint(x[i]) & 0x7fffffffu;
        if (!finite_only || b < 0x7f800000u)
            m = max(m, b);
    }
    return m;
}

// The largest TF32 magnitude among B's finite values (a value that is not makes its own row
// unfit) into *top (zero before the launch). B's rows are 16-byte aligned with k a multiple
// of 4 (mf_sddmm_tf32_copy16 checks): a thread a 4-value unit.
__global__ void tf32_b_top(const float *B, int64_t ldb, int64_t rows, int k, uint32_t *top)
{
    const int64_t per_row = k / 4, units = per_row * rows;
    uint32_t m = 0;
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < units;
         u += (int64_t)gridDim.x * blockDim.x) {
        const float4 *row = reinterpret_cast<const float4 *>(B + u / per_row * ldb);
        m = max(m, tf32_top4(tf32_round4(__ldg(row + u % per_row)), true));
    }
    for (int off = 16; off >= 1; off /= 2)
        m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((threadIdx.x & 31) == 0 && m)
        atomicMax(top, m);
}

// One unit of a row's copy: v (rounded) times 2^e (up) as 4 fp16 values in *y; *unfit set
// where a value is not within 28 binades of the row's largest (top), so not normal in fp16
// once scaled, or not held exactly.
__device__ __forceinline__ void tf32_store4(float4 v, uint32_t top, float up, bool *unfit, uint2 *y)
{
    const float x[4] = {v.x, v.y, v.z, v.w};
    uint32_t h[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        *unfit |= !mf_tf32_value_fits(__float_as_uint(x[i]) & 0x7fffffffu, top);
        h[i] = __half_as_ushort(__float2half_rn(x[i] * up));
    }
    *y = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
}

// A lane's 4-value units held in registers between the passes over a row: one where G < 32 (a
// row of at most G units), else four; a row longer than G times that many units loads the rest
// again (from L1, mostly) for its second pass. (Four at every G took 56 registers a thread.)
#define MF_TF32_HELD_UNITS(G) ((G) < 32 ? 1 : 4)

// Row r of the sources (A's rows, then B's) as scaled fp16 in Y (rows of ld16 values, zeros
// past k, four a 64-bit word, the lowest index in the low bits), its power's exponent in
// pow[r], or MF_TF32_ROW_UNFIT for a row that fp16 cannot hold so (wide[0] then set for an
// A row, wide[1] for a B row; its copy is then NaN). A row's power comes from its own
// largest value (A), or from B's largest (*b_top: tf32_b_top). G lanes a row (8, 16 or 32:
// the row's 4-value units, at most 32): at k = 32 a warp a row left half its lanes idle and,
// loading each value twice, took 133 us on the Netflix shape (H200), bf16's copies 33.
// Rows are 16-byte aligned with k a multiple of 4 (mf_sddmm_tf32_copy16 checks).
template <int G>
__global__ void tf32_rows_to_fp16(const float *A, int64_t lda, int64_t rows_a, const float *B,
                                  int64_t ldb, int64_t rows, int k, int64_t ld16, uint2 *Y,
                                  int8_t *pow, int *wide, const uint32_t *b_top)
{
    constexpr int H = MF_TF32_HELD_UNITS(G);
    const int sub = threadIdx.x % G;
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << ((threadIdx.x % 32) / G * G);
    const int64_t units = ld16 / 4, groups = (int64_t)gridDim.x * blockDim.x / G;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / G; r < rows; r += groups) {
        const bool is_a = r < rows_a;
        const float4 *x =
            reinterpret_cast<const float4 *>(is_a ? A + r * lda : B + (r - rows_a) * ldb);
        uint2 *y = Y + r * units;
        // pass 1: the lane's first H units rounded, and an A row's largest magnitude
        float4 held[H];
#pragma unroll
        for (int i = 0; i < H; i++) {
            const int64_t u = sub + (int64_t)i * G;
            held[i] = u * 4 < k ? tf32_round4(__ldg(x + u)) : zero;
        }
        uint32_t top = 0;
        if (is_a) {
#pragma unroll
            for (int i = 0; i < H; i++)
                top = max(top, tf32_top4(held[i], false));
            for (int64_t u = sub + (int64_t)H * G; u * 4 < k; u += G)
                top = max(top, tf32_top4(tf32_round4(__ldg(x + u)), false));
            for (int off = G / 2; off >= 1; off /= 2)
                top = max(top, __shfl_xor_sync(mask, top, off));
        } else {
            top = __ldg(b_top);
        }
        // The power 2^e that brings the largest into [2^14, 2^15) (sddmm_round.h); a value not
        // finite (left out of B's largest) fails mf_tf32_value_fits below.
        int e;
        bool unfit = !mf_tf32_row_power(top, &e);
        const float up = mf_pow2(e); // out of range for an unfit row, whose copy is not trusted
                                     // pass 2: the scaled copy, and whether every value fits
#pragma unroll
        for (int i = 0; i < H; i++) {
            const int64_t u = sub + (int64_t)i * G;
            if (u < units)
                tf32_store4(held[i], top, up, &unfit, y + u);
        }
        for (int64_t u = sub + (int64_t)H * G; u < units; u += G)
            tf32_store4(u * 4 < k ? tf32_round4(__ldg(x + u)) : zero, top, up, &unfit, y + u);
        unfit = __any_sync(mask, unfit);
        if (unfit) // NaN: the kernel writes none of this row's entries
            for (int64_t u = sub; u < units; u += G)
                y[u] = make_uint2(0x7e007e00u, 0x7e007e00u);
        if (sub == 0) {
            pow[r] = (int8_t)(unfit ? MF_TF32_ROW_UNFIT : e);
            if (unfit)
                wide[is_a ? 0 : 1] = 1; // every writer writes 1: no race that matters
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
                                          const mf_sddmm_call *call, int copy_a, mf_dbuf *copies,
                                          mf_sddmm_tf32_copies *out)
{
    // the kernels' 16-byte loads (the callers take this route for vector rows only)
    if (call->k % 4 || call->lda % 4 || call->ldb % 4 || ((uintptr_t)call->A & 15u) ||
        ((uintptr_t)call->B & 15u))
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: TF32 copies need 16-byte factor rows");
    const int64_t ld16 = (call->k + 31) / 32 * 32; // as mf_tc_copy16's (the tuning rules' rows)
    // (rows copied: A's and B's, or B's alone; a power byte for every row of both, A's zero
    // and marked by the kernel without A's copy)
    const int64_t a_rows = copy_a ? S->rows : 0, rows = a_rows + S->cols;
    const int64_t pow_bytes = S->rows + (int64_t)S->cols;
    MF_TRY(mf_dmem_alloc(ctx, copies, (size_t)rows * ld16 * 2 + 16 + (size_t)pow_bytes,
                         copy_a ? "SDDMM TF32 scaled fp16 factors" : "SDDMM TF32 scaled fp16 B"));
    uint2 *y = (uint2 *)copies->ptr; // ld16 is a multiple of 32: rows of whole 8-byte words
    int *wide = (int *)(y + rows * ld16 / 4);
    uint32_t *b_top = (uint32_t *)(wide + 2);
    int8_t *pow = (int8_t *)(wide + 4);
    mf_cuda *cu = ctx->link.cuda;
    // the flags and B's largest; without A's copy A's power bytes too (zero: every row fits
    // until the kernel finds otherwise)
    cudaError_t err =
        cudaMemsetAsync(wide, 0, 4 * sizeof *wide + (copy_a ? 0 : (size_t)S->rows), cu->stream);
    if (err != cudaSuccess) {
        mf_dmem_free(ctx, copies);
        return mf_cuda_fail(ctx, err, "cudaMemsetAsync", __FILE__, __LINE__);
    }
    tf32_b_top<<<mf_cuda_grid(cu, S->cols * (int64_t)(call->k / 4), 256, 8), 256, 0, cu->stream>>>(
        call->B, call->ldb, S->cols, call->k, b_top);
    mf_status st = MF_CUDA_LAUNCHED(ctx, "the SDDMM TF32 factors' largest value");
    // G lanes a row: the row's 4-value units, at most 32
    const int64_t units = ld16 / 4;
    const int g = units <= 8 ? 8 : units <= 16 ? 16 : 32;
    const unsigned grid = mf_cuda_grid(cu, rows * g, 256, 16);
    // (B's alone: the rows from B's first, whose power bytes follow A's)
    int8_t *pow_rows = copy_a ? pow : pow + S->rows;
    if (st == MF_OK) {
        if (g == 8)
            tf32_rows_to_fp16<8><<<grid, 256, 0, cu->stream>>>(call->A, call->lda, a_rows, call->B,
                                                               call->ldb, rows, call->k, ld16, y,
                                                               pow_rows, wide, b_top);
        else if (g == 16)
            tf32_rows_to_fp16<16><<<grid, 256, 0, cu->stream>>>(call->A, call->lda, a_rows, call->B,
                                                                call->ldb, rows, call->k, ld16, y,
                                                                pow_rows, wide, b_top);
        else
            tf32_rows_to_fp16<32><<<grid, 256, 0, cu->stream>>>(call->A, call->lda, a_rows, call->B,
                                                                call->ldb, rows, call->k, ld16, y,
                                                                pow_rows, wide, b_top);
        st = MF_CUDA_LAUNCHED(ctx, "the SDDMM TF32 fp16 copies");
    }
    if (st != MF_OK) {
        mf_dmem_free(ctx, copies);
        return st;
    }
    out->A16 = copy_a ? (const uint16_t *)y : NULL;
    out->B16 = (const uint16_t *)y + (size_t)a_rows * ld16;
    out->pow_a = pow;
    out->pow_b = pow + S->rows;
    out->wide = wide;
    out->b_top = b_top;
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
