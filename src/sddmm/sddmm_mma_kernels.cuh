// The SM-L2 scheme's entries as tensor-core products, on the 16-bit copies (bf16, fp16, and
// TF32's scaled fp16 copies): the same layout (items and blocks, sddmm_layout.h), chunks of k
// and epilogue as mf_sddmm_body (sddmm_kernels.cuh), another way to form each sum.
//
// A warp takes one item (a run of one row's entries) at a time and its entries 16 at a time.
// Lane (g, t) = (lane / 4, lane % 4) gathers the B rows of the group's entries g and g + 8:
// 16 bytes (8 values) of each per unit r, at [32 r + 8 t, 32 r + 8 t + 8) of the chunk. With
// the item's A row in column 0 of the MMA's B operand (lanes 0..3 hold the same units of it,
// the other lanes zeros), each unit's two m16n8k16 products (mf_tc_chunk16) leave in column 0
// of the result the 16 entries' partial dot products: lane 4 g holds entries g and g + 8.
// Column 0 is all that is used of the 8: the tensor cores' rate affords the waste, and every
// gathered row is an entry's own (the condensed tiles of the tensor-core plan,
// sddmm_tc_kernels.cuh, gather 16 rows for about 20 entries and compute 128 products).
//
// Why: at k = 32 the CUDA-core variant (V = 4, KR = 1) spends per entry and lane a 16-byte
// load, 8 widenings, 8 FMAs and its share of the reduction's shuffles; this kernel spends per
// 16 entries two loads a lane, two MMAs a unit and two stores.
//
// Sums: the MMA's products of the 16-bit values are exact; it adds them in float with the
// tensor cores' own order and rounding (the tensor-core kernel's, whose bound the tests hold
// both to).
#ifndef MF_SDDMM_MMA_KERNELS_CUH
#define MF_SDDMM_MMA_KERNELS_CUH

#include "sddmm/sddmm_kernels.cuh"
#include "sddmm/sddmm_tc_kernels.cuh" // mf_tc_chunk16

// KR units of 8 values per lane and row: chunks of KC = 32 KR values; NG groups of 16 entries
// in flight per warp. HALF: MF_PRECISION_BF16, MF_PRECISION_FP16 or MF_SDDMM_TF32_16.
template <int KR, int NG, int MODE, int T, int HALF>
__device__ __forceinline__ void mf_sddmm_mma_body(const mf_sddmm_params &P)
{
    static_assert(HALF == MF_PRECISION_BF16 || HALF == MF_PRECISION_FP16 ||
                      HALF == MF_SDDMM_TF32_16,
                  "the MMA kernel reads the 16-bit copies");
    typedef mf_unit<true, HALF> U;
    constexpr int PREC = HALF == MF_PRECISION_BF16 ? MF_PRECISION_BF16 : MF_PRECISION_FP16;
    constexpr int KC = 32 * KR, NW = T / 32;
    const mf_sddmm_block blk = P.blocks[blockIdx.x];
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int kc = P.kc;
    float b_unpow = 1.f;
    if constexpr (U::scaled)
        b_unpow = mf_sddmm_b_unpow(P.b_top);

    // Items claimed from a shared counter for wide chunks, round-robin for narrow ones: the
    // float kernel's rule (mf_sddmm_body).
    constexpr bool DYN = KC >= 64;
    __shared__ int next_item;
    if (DYN && threadIdx.x == 0)
        next_item = NW;
    if (DYN)
        __syncthreads();
    for (int rel = threadIdx.x / 32; rel < blk.item_count;) {
        const mf_sddmm_item item = P.items[blk.item_begin + rel];
        uint4 a[KR];
        const uint16_t *arow = P.A16 + (int64_t)item.row * P.ld16 + kc;
#pragma unroll
        for (int r = 0; r < KR; r++) {
            const int kk = 32 * r + 8 * t;
            a[r] = g == 0 && (MODE != MF_SDDMM_TAIL || kc + kk < P.k)
                       ? __ldg(reinterpret_cast<const uint4 *>(arow + kk))
                       : make_uint4(0u, 0u, 0u, 0u);
        }
        const float a_unpow = U::scaled ? mf_sddmm_unpow(__ldg(P.pow_a + item.row)) : 1.f;
        const int64_t end = item.begin + (int64_t)item.count;
        // The group's column indices, loaded one round ahead, so that a round's gathers wait
        // on loads issued during the round before (the first round's own on the item's).
        // Past the item's end, its first entry: loads stay in bounds, the result is dropped.
        int j[NG][2];
#pragma unroll
        for (int h = 0; h < NG; h++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t q = item.begin + 16 * h + 8 * e + g;
                j[h][e] = __ldg(P.col + (q < end ? q : item.begin));
            }
        for (int64_t p = item.begin; p < end; p += 16 * NG) {
            uint4 b[NG][2][KR];
#pragma unroll
            for (int h = 0; h < NG; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    // (column indices are never negative: unsigned arithmetic, as the float
                    // kernel's)
                    const uint16_t *brow = P.B16 + (size_t)(uint32_t)j[h][e] * (size_t)P.ld16 + kc;
#pragma unroll
                    for (int r = 0; r < KR; r++) {
                        const int kk = 32 * r + 8 * t;
                        b[h][e][r] = MODE != MF_SDDMM_TAIL || kc + kk < P.k
                                         ? __ldg(reinterpret_cast<const uint4 *>(brow + kk))
                                         : make_uint4(0u, 0u, 0u, 0u);
                    }
                }
            const int64_t next = p + 16 * NG;
#pragma unroll
            for (int h = 0; h < NG; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int64_t q = next + 16 * h + 8 * e + g;
                    if (next < end)
                        j[h][e] = __ldg(P.col + (q < end ? q : item.begin));
                }
#pragma unroll
            for (int h = 0; h < NG; h++) {
                if (p + 16 * h >= end) // (the same for the whole warp)
                    break;
                float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int r = 0; r < KR; r++)
                    mf_tc_chunk16<PREC>(d, b[h][0][r], b[h][1][r], a[r]);
                if (t == 0) {
                    const int64_t q = p + 16 * h + g;
                    if (q < end)
                        mf_sddmm_write<MODE, U::scaled>(P, q, d[0], b_unpow, a_unpow);
                    if (q + 8 < end)
                        mf_sddmm_write<MODE, U::scaled>(P, q + 8, d[2], b_unpow, a_unpow);
                }
            }
        }
        if (DYN) {
            int claimed = 0;
            if (lane == 0)
                claimed = atomicAdd(&next_item, 1);
            rel = __shfl_sync(0xffffffffu, claimed, 0);
        } else {
            rel += NW;
        }
    }
}

template <int KR, int NG, int MODE, int T, int HALF>
__global__ void __launch_bounds__(T) mf_sddmm_mma_kernel(const mf_sddmm_params P)
{
    mf_sddmm_mma_body<KR, NG, MODE, T, HALF>(P);
}

#endif
