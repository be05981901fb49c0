// Bit-matrix products on tensor cores: C[r][c] = popc(A_r AND B_c) over K bits, through
// mma.sync m16n8k256 .b1 .and.popc (sm_80 and later; older architectures get the same
// fragment arithmetic from shuffles and __popc, so results never depend on the path).
//
// Lines are bit vectors stored as 32-bit words, padded to a multiple of 512 bits with
// zeros (16-byte aligned). Which K bit sits where inside a word does not matter: the product pairs
// word w of an A line with word w of a B line, and popc(AND) is the same under any common order.
//
// Fragments (per PTX, group g = lane / 4, t = lane % 4, a K step of 8 words):
//   A (16 x 256, row major): a0 = row g word t, a1 = row g+8 word t,
//                            a2 = row g word 4+t, a3 = row g+8 word 4+t
//   B (256 x 8, column major): b0 = column g word t, b1 = column g word 4+t
//   C (16 x 8): c0, c1 = row g columns 2t, 2t+1; c2, c3 = row g+8 columns 2t, 2t+1
#ifndef MF_BMF_B1MMA_CUH
#define MF_BMF_B1MMA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "bool/bmf_asso.h"

__device__ __forceinline__ void bmf_mma_b1(int c[4], const uint32_t a[4], const uint32_t b[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int w = 0; w < 8; w++) {
        const int src = w % 4, hi = w / 4;
        uint32_t r0 = __shfl_sync(0xffffffffu, a[2 * hi], g * 4 + src);
        uint32_t r8 = __shfl_sync(0xffffffffu, a[2 * hi + 1], g * 4 + src);
        uint32_t c0 = __shfl_sync(0xffffffffu, b[hi], (2 * t) * 4 + src);
        uint32_t c1 = __shfl_sync(0xffffffffu, b[hi], (2 * t + 1) * 4 + src);
        c[0] += __popc(r0 & c0);
        c[1] += __popc(r0 & c1);
        c[2] += __popc(r8 & c0);
        c[3] += __popc(r8 & c1);
    }
#endif
}

// What a product tile ends with.
enum bmf_b1_mode {
    BMF_B1_MEMBER = 0, // set bit c of line r of `bits` (ldo words a line) when
                       // bmf_asso_member(C[r][c], row_count[r], tau)
    BMF_B1_GAIN = 1    // gains[c] += sum over r of max(0, 2 (X_r & B_c) - (U_r & B_c))
};

struct bmf_b1_args {
    const uint32_t *A;      // rows x lda words (BMF_B1_GAIN: X)
    const uint32_t *U;      // BMF_B1_GAIN: the second A operand, same shape
    const int32_t *a_index; // optional: A row r is line a_index[r]
    int64_t rows, lda;
    const uint32_t *B; // cols x lda words
    int64_t cols;
    uint32_t *bits; // BMF_B1_MEMBER: zeroed before the launch
    int64_t ldo;
    const int64_t *row_count;
    int tau;
    unsigned long long *gains; // BMF_B1_GAIN
    int negate;                // BMF_B1_GAIN: subtract the rows' gains (modulo 2^64: the
                               // totals stay exact and end non-negative)
};

#define BMF_B1_WARPS 4
#define BMF_B1_TILE  64 // rows and columns per block

// Block (x, y): rows [64 x, 64 x + 64) by columns [64 y, 64 y + 64); warp w takes 16 rows
// and all 64 columns (eight 16 x 8 tiles).
template <int MODE>
__global__ void __launch_bounds__(BMF_B1_WARPS * 32) bmf_b1_kernel(bmf_b1_args P)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int64_t r0 = (int64_t)blockIdx.x * BMF_B1_TILE + warp * 16;
    const int64_t c0 = (int64_t)blockIdx.y * BMF_B1_TILE;
    const int64_t ra = r0 + g, rb = r0 + g + 8;
    const uint32_t *pa = NULL, *pb = NULL, *ua = NULL, *ub = NULL;
    if (ra < P.rows) {
        int64_t line = P.a_index ? P.a_index[ra] : ra;
        pa = P.A + line * P.lda;
        if (MODE == BMF_B1_GAIN)
            ua = P.U + line * P.lda;
    }
    if (rb < P.rows) {
        int64_t line = P.a_index ? P.a_index[rb] : rb;
        pb = P.A + line * P.lda;
        if (MODE == BMF_B1_GAIN)
            ub = P.U + line * P.lda;
    }
    const uint32_t *bp[8];
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        int64_t c = c0 + nt * 8 + g;
        bp[nt] = c < P.cols ? P.B + c * P.lda : NULL;
    }
    int acc[8][4], accu[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[nt][e] = accu[nt][e] = 0;

    // 512 bits (16 words) per iteration, two MMA K steps: lane t loads words 4t .. 4t+3 of
    // each line with one 16-byte load and feeds words 4t, 4t+1 to the first step (as its
    // "t" and "4+t" words) and 4t+2, 4t+3 to the second. A and B use the same assignment,
    // so every word of an A line still meets the same word of a B line. The next
    // iteration's words are loaded before this one's products, so that the loads' latency
    // (L2, mostly) runs under the tensor-core work instead of before it.
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    struct words {
        uint4 xa, xb, ua, ub, b[8];
    };
    auto load = [&](int64_t kw, words &w) {
        w.xa = pa ? __ldg(reinterpret_cast<const uint4 *>(pa + kw) + t) : zero;
        w.xb = pb ? __ldg(reinterpret_cast<const uint4 *>(pb + kw) + t) : zero;
        w.ua = w.ub = zero;
        if (MODE == BMF_B1_GAIN) {
            w.ua = ua ? __ldg(reinterpret_cast<const uint4 *>(ua + kw) + t) : zero;
            w.ub = ub ? __ldg(reinterpret_cast<const uint4 *>(ub + kw) + t) : zero;
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
            w.b[nt] = bp[nt] ? __ldg(reinterpret_cast<const uint4 *>(bp[nt] + kw) + t) : zero;
    };
    words cur, next;
    if (P.lda > 0)
        load(0, cur);
    for (int64_t kw = 0; kw < P.lda; kw += 16) {
        const bool more = kw + 16 < P.lda;
        if (more)
            load(kw + 16, next);
        const uint32_t a0[4] = {cur.xa.x, cur.xb.x, cur.xa.y, cur.xb.y},
                       a1[4] = {cur.xa.z, cur.xb.z, cur.xa.w, cur.xb.w};
        const uint32_t u0[4] = {cur.ua.x, cur.ub.x, cur.ua.y, cur.ub.y},
                       u1[4] = {cur.ua.z, cur.ub.z, cur.ua.w, cur.ub.w};
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            const uint4 bv = cur.b[nt];
            const uint32_t b0[2] = {bv.x, bv.y}, b1[2] = {bv.z, bv.w};
            bmf_mma_b1(acc[nt], a0, b0);
            bmf_mma_b1(acc[nt], a1, b1);
            if (MODE == BMF_B1_GAIN) {
                bmf_mma_b1(accu[nt], u0, b0);
                bmf_mma_b1(accu[nt], u1, b1);
            }
        }
        if (more)
            cur = next;
    }

    if (MODE == BMF_B1_MEMBER) {
        const int64_t cnt_a = ra < P.rows ? P.row_count[ra] : 0;
        const int64_t cnt_b = rb < P.rows ? P.row_count[rb] : 0;
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int64_t r = e < 2 ? ra : rb, c = c0 + nt * 8 + 2 * t + (e & 1);
                if (r < P.rows && c < P.cols &&
                    bmf_asso_member(acc[nt][e], e < 2 ? cnt_a : cnt_b, P.tau))
                    atomicOr(&P.bits[r * P.ldo + c / 32], 1u << (c % 32));
            }
        return;
    }
    // Gains: rows past the end hold zero lines, so they add max(0, 0) = 0.
    __shared__ unsigned long long block_gain[BMF_B1_TILE];
    if (threadIdx.x < BMF_B1_TILE)
        block_gain[threadIdx.x] = 0;
    __syncthreads();
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        unsigned long long s[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int x0 = acc[nt][h], u0 = accu[nt][h], x8 = acc[nt][2 + h], u8 = accu[nt][2 + h];
            int g0 = 2 * x0 - u0, g8 = 2 * x8 - u8;
            s[h] = (unsigned long long)(g0 > 0 ? g0 : 0) + (unsigned long long)(g8 > 0 ? g8 : 0);
        }
#pragma unroll
        for (int off = 4; off < 32; off *= 2) {
            s[0] += __shfl_xor_sync(0xffffffffu, s[0], off);
            s[1] += __shfl_xor_sync(0xffffffffu, s[1], off);
        }
        if (g == 0) {
            atomicAdd(&block_gain[nt * 8 + 2 * t], s[0]);
            atomicAdd(&block_gain[nt * 8 + 2 * t + 1], s[1]);
        }
    }
    __syncthreads();
    if (threadIdx.x < BMF_B1_TILE && c0 + threadIdx.x < P.cols && block_gain[threadIdx.x])
        atomicAdd(&P.gains[c0 + threadIdx.x],
                  P.negate ? 0ull - block_gain[threadIdx.x] : block_gain[threadIdx.x]);
}

#endif
