// The tensor-core SDDMM kernel (the reduced precisions of mf_sddmm_ex) over the
// condensed-column layout (sddmm_tc_layout.h).
//
// bf16 and fp16 read their factors from a 16-bit copy made for the call (mf_tc_convert, rows
// padded with zeros to a multiple of 32, so that each lane reads 16 bytes a row): the gathers
// of B rows move half the bytes, and the conversion is the one the MMA operands would get
// anyway. On the H200 (bench_sddmm) the copy made NYTimes 16% faster at k = 128 and 512,
// Netflix within 3% either way, and k = 32 10-14% slower than converting the floats in
// registers (the copy's cost against a short kernel). A run-time choice between the two
// inside one kernel was slower at every k (its registers), hence two instances (COPIES):
// small matrices at k <= MF_SDDMM_TC_COPY_K (sddmm_internal.h) convert in registers.
//
// One warp per unit: up to MF_TC_UNIT_TILES tiles of one window of 8 rows. For a tile, the
// MMA's A operand is B[tile columns] (m = 16 condensed columns x k) and its B operand is
// A[window rows]^T (k x n = 8 rows): swapping the roles puts the sparse side on m, so an
// 8-row window fills the MMA's n and the 16 columns its m. k runs in chunks of 16: each
// lane loads 4 consecutive floats of a column's row and of a window row (16-byte loads when
// k, the leading dimensions and the pointers allow), and the lanes' k indices are assigned
// to the fragments' k slots the same way on both operands (a sum over k does not care about
// its order): TF32 as two m16n8k8 MMAs per chunk (3xTF32: three pairs, small*big and
// big*small before big*big), bf16 and fp16 as one m16n8k16. The accumulators stay in
// registers for all of k, then each lane writes the entries its four results hold that
// the masks mark stored, in canonical positions (no atomics; every entry written once).
#ifndef MF_SDDMM_TC_KERNELS_CUH
#define MF_SDDMM_TC_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "mfact/mfact.h"
#include "sddmm/sddmm_tc_layout.h"

#define MF_TC_THREADS 128

struct mf_sddmm_tc_params {
    const mf_tc_unit *units;
    const mf_tc_tile *tiles;
    int64_t n_units;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    int k;
    float alpha, beta;
    const float *val; // NULL: pattern
    float *out;
    // bf16, fp16: the factors as 16-bit values, rows of ld16 (k rounded up to 32, zeros past
    // k); A and B are not read then. NULL (every TF32 call; bf16 and fp16 without copies): A
    // and B are read and rounded in registers
    const uint16_t *A16, *B16;
    int64_t ld16;
};

// Four consecutive floats of a row from k index kk on, zero past k.
template <bool VEC> __device__ __forceinline__ float4 mf_tc_load4(const float *row, int kk, int k)
{
    if (VEC)
        return kk < k ? __ldg(reinterpret_cast<const float4 *>(row + kk))
                      : make_float4(0.f, 0.f, 0.f, 0.f);
    float4 v;
    v.x = kk < k ? __ldg(row + kk) : 0.f;
    v.y = kk + 1 < k ? __ldg(row + kk + 1) : 0.f;
    v.z = kk + 2 < k ? __ldg(row + kk + 2) : 0.f;
    v.w = kk + 3 < k ? __ldg(row + kk + 3) : 0.f;
    return v;
}

// x rounded to TF32 (to nearest, ties away), as a float's bits: the low 13 bits are cleared
// because the PTX ISA leaves them unspecified, and 3xTF32 subtracts the value as a float.
__device__ __forceinline__ uint32_t mf_tf32(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r & 0xffffe000u;
}

__device__ __forceinline__ void mf_mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                            uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int PREC>
__device__ __forceinline__ void mf_mma_16bit(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1)
{
    if (PREC == MF_PRECISION_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two floats as one register of two 16-bit values, the first in the low half.
template <int PREC> __device__ __forceinline__ uint32_t mf_pack2(float lo, float hi)
{
    if (PREC == MF_PRECISION_BF16) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    }
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

// One 16-wide k chunk of one tile: c0 and c1 are the lane's 4 floats of condensed columns
// g and g + 8, a those of window row g (g = lane / 4). Logical k slots (per MMA) map to the
// lane's floats alike on both operands: TF32, slot q and q + 4 of the first MMA are .x and
// .y, of the second .z and .w; 16-bit, slots 2q, 2q + 1 are .x, .y and 2q + 8, 2q + 9 are
// .z, .w (q = lane % 4).
template <int PREC>
__device__ __forceinline__ void mf_tc_chunk(float (&d)[4], float4 c0, float4 c1, float4 a)
{
    if (PREC == MF_PRECISION_BF16 || PREC == MF_PRECISION_FP16) {
        mf_mma_16bit<PREC>(d, mf_pack2<PREC>(c0.x, c0.y), mf_pack2<PREC>(c1.x, c1.y),
                           mf_pack2<PREC>(c0.z, c0.w), mf_pack2<PREC>(c1.z, c1.w),
                           mf_pack2<PREC>(a.x, a.y), mf_pack2<PREC>(a.z, a.w));
        return;
    }
    const float cv[2][4] = {{c0.x, c0.y, c0.z, c0.w}, {c1.x, c1.y, c1.z, c1.w}};
    const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int h = 0; h < 2; h++) { // the two m16n8k8 MMAs: floats (0, 1), then (2, 3)
        const int e = 2 * h;
        uint32_t cb[4] = {mf_tf32(cv[0][e]), mf_tf32(cv[1][e]), mf_tf32(cv[0][e + 1]),
                          mf_tf32(cv[1][e + 1])};
        uint32_t ab[2] = {mf_tf32(av[e]), mf_tf32(av[e + 1])};
        if (PREC == MF_PRECISION_3XTF32) {
            // small = tf32(x - big), x - big exact: the products the big*big pass misses
            uint32_t cs[4] = {mf_tf32(cv[0][e] - __uint_as_float(cb[0])),
                              mf_tf32(cv[1][e] - __uint_as_float(cb[1])),
                              mf_tf32(cv[0][e + 1] - __uint_as_float(cb[2])),
                              mf_tf32(cv[1][e + 1] - __uint_as_float(cb[3]))};
            uint32_t as[2] = {mf_tf32(av[e] - __uint_as_float(ab[0])),
                              mf_tf32(av[e + 1] - __uint_as_float(ab[1]))};
            mf_mma_tf32(d, cs[0], cs[1], cs[2], cs[3], ab[0], ab[1]);
            mf_mma_tf32(d, cb[0], cb[1], cb[2], cb[3], as[0], as[1]);
        }
        mf_mma_tf32(d, cb[0], cb[1], cb[2], cb[3], ab[0], ab[1]);
    }
}

// X (rows x k, leading dimension ldx) as 16-bit values in Y (rows x ld16, zeros past k), two
// per thread and step.
template <int PREC>
__global__ void mf_tc_convert(const float *X, int64_t ldx, int64_t rows, int k, int64_t ld16,
                              uint32_t *Y)
{
    const int64_t half_row = ld16 / 2, n = rows * half_row;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / half_row;
        const int t = (int)(i - r * half_row) * 2;
        const float *x = X + r * ldx + t;
        Y[i] = mf_pack2<PREC>(t < k ? x[0] : 0.f, t + 1 < k ? x[1] : 0.f);
    }
}

// One 32-wide k chunk from the 16-bit copies: each uint4 holds a lane's 8 consecutive values
// of a row, the first four for one m16n8k16 (in the order mf_tc_chunk packs them), the last
// four for a second.
template <int PREC>
__device__ __forceinline__ void mf_tc_chunk16(float (&d)[4], uint4 c0, uint4 c1, uint4 a)
{
    mf_mma_16bit<PREC>(d, c0.x, c1.x, c0.y, c1.y, a.x, a.y);
    mf_mma_16bit<PREC>(d, c0.z, c1.z, c0.w, c1.w, a.z, a.w);
}

// Write a unit's results: d[t] = (column g, row 2q), (g, 2q + 1), (g + 8, 2q), (g + 8, 2q + 1)
// of tile t, stored where the tile's row masks mark an entry, at canonical positions counted
// from the unit's pos. Reading out (beta != 0) and S's values at those scattered positions
// is slow on large matrices: mf_cuda_sddmm_tc gives such calls there a scratch array and
// finishes them in index order. Issuing all of a lane's loads before its first store did not
// help (H200, Netflix shape: TF32 at beta = 1 still took 2.4x its beta = 0 time) and took 96
// registers against 56.
__device__ __forceinline__ void mf_sddmm_tc_store(const mf_sddmm_tc_params &P, const mf_tc_unit &U,
                                                  const mf_tc_tile *T, int n_tiles,
                                                  const float (&d)[MF_TC_UNIT_TILES][4], int g,
                                                  int q)
{
    int64_t pos[2] = {U.pos[2 * q], U.pos[2 * q + 1]};
#pragma unroll
    for (int t = 0; t < MF_TC_UNIT_TILES; t++) {
        if (t >= n_tiles)
            break;
        const uint32_t masks = *reinterpret_cast<const uint32_t *>(&T[t].rowmask[2 * q]);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint32_t m = (masks >> (16 * r)) & 0xffffu;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int c = g + 8 * h;
                if ((m >> c) & 1u) {
                    const int64_t p = pos[r] + __popc(m & ((1u << c) - 1u));
                    // roundings spelled out: mf_cuda_sddmm_finish (sddmm.cu) must match them
                    float v = __fmul_rn(P.alpha, d[t][2 * h + r]);
                    if (P.val)
                        v = __fmul_rn(v, __ldg(P.val + p));
                    P.out[p] = P.beta == 0.f ? v : __fmaf_rn(P.beta, P.out[p], v);
                }
            }
            pos[r] += __popc(m);
        }
    }
}

// COPIES (bf16, fp16): read P.A16 and P.B16; otherwise the floats, rounded in registers.
template <int PREC, bool VEC, bool COPIES>
__global__ void __launch_bounds__(MF_TC_THREADS) mf_sddmm_tc_kernel(const mf_sddmm_tc_params P)
{
    static_assert(!COPIES || PREC == MF_PRECISION_BF16 || PREC == MF_PRECISION_FP16,
                  "16-bit copies exist for bf16 and fp16 only");
    const int64_t u = ((int64_t)blockIdx.x * MF_TC_THREADS + threadIdx.x) / 32;
    if (u >= P.n_units)
        return;
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const mf_tc_unit &U = P.units[u];
    const int n_tiles = U.n_tiles;
    const mf_tc_tile *T = P.tiles + U.tile_begin;
    float d[MF_TC_UNIT_TILES][4] = {};
    if constexpr (COPIES) {
        // 16 bytes a lane and row (8 values at 8q): a row's 4 lanes read 64 contiguous bytes
        const uint16_t *arow = P.A16 + (int64_t)U.row[g] * P.ld16 + 8 * q;
        const uint16_t *crow[MF_TC_UNIT_TILES][2];
#pragma unroll
        for (int t = 0; t < MF_TC_UNIT_TILES; t++) {
            const int tt = t < n_tiles ? t : 0; // unused tiles read tile 0, never computed
            crow[t][0] = P.B16 + (size_t)(uint32_t)T[tt].col[g] * (size_t)P.ld16 + 8 * q;
            crow[t][1] = P.B16 + (size_t)(uint32_t)T[tt].col[g + 8] * (size_t)P.ld16 + 8 * q;
        }
        for (int kk = 0; kk < P.k; kk += 32) {
            const uint4 a = __ldg(reinterpret_cast<const uint4 *>(arow + kk));
#pragma unroll
            for (int t = 0; t < MF_TC_UNIT_TILES; t++)
                if (t < n_tiles)
                    mf_tc_chunk16<PREC>(d[t],
                                        __ldg(reinterpret_cast<const uint4 *>(crow[t][0] + kk)),
                                        __ldg(reinterpret_cast<const uint4 *>(crow[t][1] + kk)), a);
        }
    } else {
        const float *arow = P.A + (int64_t)U.row[g] * P.lda;
        const float *crow[MF_TC_UNIT_TILES][2];
#pragma unroll
        for (int t = 0; t < MF_TC_UNIT_TILES; t++) {
            const int tt = t < n_tiles ? t : 0; // unused tiles read tile 0, never computed
            crow[t][0] = P.B + (size_t)(uint32_t)T[tt].col[g] * (size_t)P.ldb;
            crow[t][1] = P.B + (size_t)(uint32_t)T[tt].col[g + 8] * (size_t)P.ldb;
        }
        for (int kk = 4 * q; kk - 4 * q < P.k; kk += 16) {
            const float4 a = mf_tc_load4<VEC>(arow, kk, P.k);
#pragma unroll
            for (int t = 0; t < MF_TC_UNIT_TILES; t++)
                if (t < n_tiles)
                    mf_tc_chunk<PREC>(d[t], mf_tc_load4<VEC>(crow[t][0], kk, P.k),
                                      mf_tc_load4<VEC>(crow[t][1], kk, P.k), a);
        }
    }
    mf_sddmm_tc_store(P, U, T, n_tiles, d, g, q);
}

#endif
