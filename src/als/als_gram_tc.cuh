/* The Gram kernel on tensor cores (sm_80 and later), for padded orders kp <= 128.
 *
 * Each warp forms its share of the augmented Gram matrix with mma.sync m16n8k8 in TF32, the
 * ratings of a stage as the reduction dimension: G[16I + m][8J + n] += sum_r F[r][16I + m]
 * F[r][8J + n]. TF32 keeps 10 mantissa bits, so a plain TF32 product would put errors of 1e-3
 * into systems whose conditioning amplifies them; every operand is split instead into a
 * TF32 head and a TF32 tail (x = h + l) and each product is taken as h h' + h l' + l h'
 * ("3xTF32"): the dropped l l' is below FP32's own rounding, so the systems match the FP32
 * kernel's to float accuracy (test_gpu_als checks both against float64).
 *
 * Where it pays (measured on an H100 at k = 100, Netflix-shaped data): on long rows, the item
 * systems, it takes 34 ms against the FP32 kernel's 41; on rows of ~200 ratings, the user
 * systems, 42 against 37, because every stage and every segment costs it more fixed work
 * (the split, the barriers, seven tiles a warp to store) than it saves in arithmetic. als.cu
 * picks per side by the mean segment length.
 *
 * Work split: T8 = kp / 8 column blocks of 8 and MB = ceil(T8 / 2) row blocks of 16. Row
 * block I needs the m16n8 tiles J = 0 .. min(2I + 1, T8 - 1) (the lower triangle; the upper
 * half of the 16 x 8 tile at J = 2I + 1 is computed and dropped). Share w < MB / 2 takes row
 * blocks w and MB - 2 - w (2MB tiles together; the middle block alone when they meet), the
 * last share block MB - 1 (T8 tiles): balanced without a table. Two warps split each share,
 * and everything a warp does is compiled for it (als_tc_share): no selects or branches
 * between its tiles. The A fragment of row block I is made of the B fragments of column
 * blocks 2I and 2I + 1, so a warp loads only B fragments and keeps its A fragments in
 * registers.
 *
 * Each stage is split once, when it arrives (heads in place, tails in a second set of
 * buffers): splitting in the inner loop left the kernel bound by the conversions.
 * Shared-memory rows are ld = als_tc_stride(kp) floats apart, ld = 8 or 24 (mod 32): lane
 * (g, t) of a fragment load reads row t, column g, which then falls in 32 distinct banks. */
#ifndef MF_ALS_GRAM_TC_CUH
#define MF_ALS_GRAM_TC_CUH

#include <stdint.h>

#include "als/als_kernels.cuh"

/* Largest row-block count (kp = 128): the accumulators take 4 MB registers a lane. */
#define ALS_TC_MAX_MB 8
/* Stages in flight ahead of the one multiplied, and ratings per stage: 64-rating stages one
 * ahead beat 32-rating stages three ahead (measured; fewer barriers and splits a rating). */
#define ALS_TC_DEPTH 1
#define ALS_TC_ROWS  64

__host__ __device__ constexpr int als_tc_stride(int kp)
{
    return kp % 16 == 0 ? kp + 8 : kp;
}

/* Row blocks of 16 for kp, and the warps of the kernel for MB of them: two per share (each
 * takes half of the share's tiles, which halves the accumulators a lane holds). */
__host__ __device__ constexpr int als_tc_row_blocks(int kp)
{
    return (kp / 8 + 1) / 2;
}
__host__ __device__ constexpr int als_tc_warps(int mb)
{
    return 2 * (mb / 2 + 1);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* x = head + tail, both TF32 (round to nearest, ties away: cvt.rna). */
__device__ __forceinline__ void als_tf32_split(float x, uint32_t *head, uint32_t *tail)
{
    uint32_t h, l;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(h) : "f"(x));
    const float rest = x - __uint_as_float(h);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(l) : "f"(rest));
    *head = h;
    *tail = l;
}

/* c += a b, one m16n8k8 TF32 product with FP32 accumulation. */
__device__ __forceinline__ void als_mma_tf32(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The split operands of one fragment: B (two registers) or A (four). */
struct als_tc_b {
    uint32_t h[2], l[2];
};
struct als_tc_a {
    uint32_t h[4], l[4];
};

/* c += x y in 3xTF32, small terms first. */
__device__ __forceinline__ void als_mma_3xtf32(float c[4], const als_tc_a &x, const als_tc_b &y)
{
    als_mma_tf32(c, x.l, y.h);
    als_mma_tf32(c, x.h, y.l);
    als_mma_tf32(c, x.h, y.h);
}
#endif

/* The share of the Gram matrix that warp W of the T8 kernel owns, all known at compile
 * time: share W / 2 takes row blocks ia (tiles J = 0 .. na - 1) and ib (J = 0 .. nb - 1), and
 * this warp the tiles [s0, s0 + MB) of that list. */
template <int T8, int W> struct als_tc_share {
    static constexpr int MB = (T8 + 1) / 2;
    static constexpr int SHARE = W / 2, LAST = als_tc_warps(MB) / 2 - 1;
    static constexpr int ia = SHARE == LAST ? MB - 1 : SHARE;
    static constexpr int ib = SHARE == LAST ? -1 : (MB - 2 - SHARE > SHARE ? MB - 2 - SHARE : -1);
    static constexpr int na = SHARE == LAST ? T8 : 2 * ia + 2;
    static constexpr int nb = ib >= 0 ? 2 * ib + 2 : 0;
    static constexpr int s0 = (W & 1) * MB;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* Column block J of the B operand at lane base p (row t, column g of the step, in the
 * heads; the tails are LO floats further): rows t and t + 4. */
template <int LD, int LO, bool SPLIT>
__device__ __forceinline__ void als_tc_load_b(const float *p, int J, als_tc_b *b)
{
    b->h[0] = __float_as_uint(p[8 * J]);
    b->h[1] = __float_as_uint(p[8 * J + 4 * LD]);
    if (SPLIT) {
        b->l[0] = __float_as_uint(p[LO + 8 * J]);
        b->l[1] = __float_as_uint(p[LO + 8 * J + 4 * LD]);
    } else {
        b->l[0] = b->l[1] = 0u;
    }
}

/* Row block I of the A operand: column blocks 2I and 2I + 1 (past the last: zeros). */
template <int T8, int LD, int LO, bool SPLIT>
__device__ __forceinline__ void als_tc_load_a(const float *p, int I, als_tc_a *x)
{
    als_tc_b lo, hi = {{0, 0}, {0, 0}};
    als_tc_load_b<LD, LO, SPLIT>(p, 2 * I, &lo);
    if (2 * I + 1 < T8)
        als_tc_load_b<LD, LO, SPLIT>(p, 2 * I + 1, &hi);
    x->h[0] = lo.h[0], x->h[1] = hi.h[0], x->h[2] = lo.h[1], x->h[3] = hi.h[1];
    x->l[0] = lo.l[0], x->l[1] = hi.l[0], x->l[2] = lo.l[1], x->l[3] = hi.l[1];
}

/* Warp W's products over the n rows of a stage (n a multiple of 8 after the stream's
 * zeroed rows), p the lane's base (row t, column g). Every index is a constant after
 * unrolling: no selects or branches between the tiles, so their mma chains interleave. */
template <int T8, int W, int LD, int LO>
__device__ __forceinline__ void als_tc_warp(float (*acc)[4], const float *p, int n)
{
    using S = als_tc_share<T8, W>;
    for (int k0 = 0; k0 < n; k0 += 8, p += 8 * LD) {
        als_tc_a xa, xb;
        if (S::s0 < S::na)
            als_tc_load_a<T8, LD, LO, true>(p, S::ia, &xa);
        if (S::nb > 0 && S::s0 + S::MB > S::na)
            als_tc_load_a<T8, LD, LO, true>(p, S::ib, &xb);
        /* The three products of each tile in three passes over the tiles, so that the
         * mma instructions on one accumulator are a pass apart instead of back to back (the
         * warps stalled on that dependency): the heads stay in registers, the tails are
         * loaded in the pass that uses them. */
        als_tc_b y[S::MB];
#pragma unroll
        for (int q = 0; q < S::MB; q++) {
            const int s = S::s0 + q;
            if (s < S::na + S::nb) {
                const int J = s < S::na ? s : s - S::na;
                y[q].h[0] = __float_as_uint(p[8 * J]);
                y[q].h[1] = __float_as_uint(p[8 * J + 4 * LD]);
                als_mma_tf32(acc[q], s < S::na ? xa.l : xb.l, y[q].h);
            }
        }
#pragma unroll
        for (int q = 0; q < S::MB; q++) {
            const int s = S::s0 + q;
            if (s < S::na + S::nb) {
                const int J = s < S::na ? s : s - S::na;
                y[q].l[0] = __float_as_uint(p[LO + 8 * J]);
                y[q].l[1] = __float_as_uint(p[LO + 8 * J + 4 * LD]);
                als_mma_tf32(acc[q], s < S::na ? xa.h : xb.h, y[q].l);
            }
        }
#pragma unroll
        for (int q = 0; q < S::MB; q++) {
            const int s = S::s0 + q;
            if (s < S::na + S::nb)
                als_mma_tf32(acc[q], s < S::na ? xa.h : xb.h, y[q].h);
        }
    }
}

/* als_tc_warp with one TF32 product a tile (the heads alone): the kernel without SPLIT. */
template <int T8, int W, int LD>
__device__ __forceinline__ void als_tc_warp_tf32(float (*acc)[4], const float *p, int n)
{
    using S = als_tc_share<T8, W>;
    for (int k0 = 0; k0 < n; k0 += 8, p += 8 * LD) {
        als_tc_a xa, xb;
        if (S::s0 < S::na)
            als_tc_load_a<T8, LD, 0, false>(p, S::ia, &xa);
        if (S::nb > 0 && S::s0 + S::MB > S::na)
            als_tc_load_a<T8, LD, 0, false>(p, S::ib, &xb);
#pragma unroll
        for (int q = 0; q < S::MB; q++) {
            const int s = S::s0 + q;
            if (s < S::na + S::nb) {
                const int J = s < S::na ? s : s - S::na;
                const uint32_t y[2] = {__float_as_uint(p[8 * J]),
                                       __float_as_uint(p[8 * J + 4 * LD])};
                als_mma_tf32(acc[q], s < S::na ? xa.h : xb.h, y);
            }
        }
    }
}

/* Warp `warp`'s products: one compiled path per warp. */
template <int T8, int W, int LD, int LO, bool SPLIT>
__device__ __forceinline__ void als_tc_dispatch(int warp, float (*acc)[4], const float *p, int n)
{
    if constexpr (W < als_tc_warps((T8 + 1) / 2)) {
        if (warp == W) {
            if constexpr (SPLIT)
                als_tc_warp<T8, W, LD, LO>(acc, p, n);
            else
                als_tc_warp_tf32<T8, W, LD>(acc, p, n);
        } else
            als_tc_dispatch<T8, W + 1, LD, LO, SPLIT>(warp, acc, p, n);
    }
}
#endif

/* Warp W's tiles into a segment's partial system at out. Lane (g, t) holds rows g and g + 8
 * of its 16 x 8 tiles at columns 2t and 2t + 1: chunk lc = 2g + t / 2 of a tile's row, at
 * offset 2 (t & 1) in it (als_chunk's layout, whose swizzle is a compile-time constant per
 * tile here). Each half goes to its 8 x 8 tile when that tile is in the lower triangle; the
 * accumulators are zeroed for the next segment. */
template <int T8, int W>
__device__ __forceinline__ void als_tc_flush(float (*acc)[4], float *out, int lc, int off)
{
    using S = als_tc_share<T8, W>;
#pragma unroll
    for (int q = 0; q < S::MB; q++) {
        const int s = S::s0 + q;
        if (s >= S::na + S::nb)
            break;
        const int I = s < S::na ? S::ia : S::ib, J = s < S::na ? s : s - S::na;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int R8 = 2 * I + h;
            if (R8 >= J && R8 < T8) {
                const int tile = als_tile_index(R8, J);
                float *at = out + tile * ALS_TILE_FLOATS + ((lc ^ (tile & 7)) << 2) + off;
                *reinterpret_cast<float2 *>(at) = make_float2(acc[q][2 * h], acc[q][2 * h + 1]);
            }
        }
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[q][c] = 0.0f;
    }
}

template <int T8, int W>
__device__ __forceinline__ void als_tc_flush_dispatch(int warp, float (*acc)[4], float *out, int lc,
                                                      int off)
{
    if constexpr (W < als_tc_warps((T8 + 1) / 2)) {
        if (warp == W)
            als_tc_flush<T8, W>(acc, out, lc, off);
        else
            als_tc_flush_dispatch<T8, W + 1>(warp, acc, out, lc, off);
    }
}

/* Blocks an SM the kernel is compiled for: the split kernel holds twice the operands. */
__host__ __device__ constexpr int als_tc_min_blocks(int t8, bool split)
{
    return (split ? 16 : 24) / als_tc_warps((t8 + 1) / 2);
}

/* The kernel for kp = 8 T8: SPLIT, 3xTF32 (float accuracy); else one TF32 product a tile
 * (products to 10 mantissa bits, sums in FP32), for half-steps whose solve is approximate
 * anyway (als.cu says when). */
template <int T8, bool SPLIT>
__global__ void __launch_bounds__(32 * als_tc_warps((T8 + 1) / 2), als_tc_min_blocks(T8, SPLIT))
    als_gram_tc_kernel(als_gram_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int MB = (T8 + 1) / 2, KP = 8 * T8, LD = als_tc_stride(KP);
    /* The stages' heads, then (SPLIT) their tails: the stream's NB buffers of rows, then as
     * many. */
    constexpr int LO = SPLIT ? (ALS_TC_DEPTH + 1) * ALS_TC_ROWS * LD : 0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3; /* the fragment's group and thread in group */
    float acc[MB][4];                      /* this warp's tiles: half a share's 2MB at most */
#pragma unroll
    for (int s = 0; s < MB; s++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            acc[s][q] = 0.0f;
    /* Each element of the stage, and the ratings, split once into head and tail (in place,
     * and LO floats further), rows past n up to a multiple of 8 as zeros: the warps' loads
     * then carry the split operands straight to the tensor cores. */
    auto prepare = [&](int, float *st, int n, auto rating) {
        const int n8 = (n + 7) & ~7;
        for (int e = threadIdx.x; e < n8 * (KP / 4); e += blockDim.x) {
            const int r = e / (KP / 4), c = 4 * (e - r * (KP / 4));
            float4 *at = reinterpret_cast<float4 *>(st + r * LD + c);
            const float4 v = r < n ? *at : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            const bool has_k = r < n && a.k >= c && a.k < c + 4;
            const float rk = has_k ? rating(r) : 0.0f;
            float4 h, l;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint32_t hb, lb;
                als_tf32_split(has_k && c + j == a.k ? rk : (&v.x)[j], &hb, &lb);
                (&h.x)[j] = __uint_as_float(hb);
                (&l.x)[j] = __uint_as_float(lb);
            }
            *at = h;
            if (SPLIT)
                *reinterpret_cast<float4 *>(st + LO + r * LD + c) = l;
        }
    };
    auto multiply = [&](const float *st, int n) {
        als_tc_dispatch<T8, 0, LD, LO, SPLIT>(warp, acc, st + t * LD + g, n);
    };
    const int lc = 2 * g + (t >> 1), off = 2 * (t & 1);
    auto flush = [&](float *out) { als_tc_flush_dispatch<T8, 0>(warp, acc, out, lc, off); };
    als_gram_stream<ALS_TC_ROWS, ALS_TC_DEPTH, KP>(a, LD, prepare, multiply, flush);
#else
    (void)a; /* never launched: als.cu checks the kernel's architecture first */
#endif
}

#endif
