/* The two kernels of a CUDA ALS half-step and the system layout they share.
 *
 * A system is the (k+1) x (k+1) matrix [G b; b^T c] of one row, where G = sum f f^T and
 * b = sum r f over the row's ratings: the Gram kernel forms it as the sum of outer products
 * of augmented rows (f, r), so the right-hand side costs nothing extra. The solver's
 * LDL^T of that matrix yields L and D of G and, in its last row, z = D^-1 L^-1 b, leaving
 * only the back substitution L^T x = z. Sizes are padded to kp = round_up(k + 1, 8) with
 * identity rows, and only the lower triangle is kept, as T (T + 1) / 2 tiles of 8 x 8
 * (T = kp / 8), tile (I, M) with M <= I at index I (I + 1) / 2 + M. Diagonal tiles are
 * kept whole (both triangles): the panel step reads the pivot's row across the tile, and
 * the updates keep the tile symmetric. Within a tile, the
 * 16-byte chunk q = 2 r + c / 4 of row r is stored at chunk q ^ (tile & 7): threads that
 * walk different tiles in step then hit different banks. */
#ifndef MF_ALS_KERNELS_CUH
#define MF_ALS_KERNELS_CUH
#include <cuda_pipeline.h>
#include <limits.h>
#include <stdint.h>

#include "cuda/lower_bound.cuh"

#define ALS_TILE_FLOATS 64
/* Rows of the other side staged in shared memory per step of the Gram kernel. */
#define ALS_GRAM_ROWS 32

__device__ __forceinline__ int als_chunk(int tile, int r, int half)
{
    return tile * ALS_TILE_FLOATS + (((r * 2 + half) ^ (tile & 7)) << 2);
}

__device__ __forceinline__ int als_tile_index(int I, int M)
{
    return I * (I + 1) / 2 + M;
}

/* (I, M) of lower tile t. */
__device__ __forceinline__ void als_tile_coords(int t, int *I, int *M)
{
    int i = (int)((sqrtf(8.0f * (float)t + 1.0f) - 1.0f) * 0.5f);
    while (i * (i + 1) / 2 > t)
        i--;
    while ((i + 1) * (i + 2) / 2 <= t)
        i++;
    *I = i;
    *M = t - i * (i + 1) / 2;
}

__device__ __forceinline__ float als_get(const float *A, int i, int m)
{
    int t = als_tile_index(i >> 3, m >> 3);
    return A[als_chunk(t, i & 7, (m >> 2) & 1) + (m & 3)];
}

__device__ __forceinline__ float *als_at(float *A, int i, int m)
{
    int t = als_tile_index(i >> 3, m >> 3);
    return A + als_chunk(t, i & 7, (m >> 2) & 1) + (m & 3);
}

/* v[0..8) from 8 consecutive floats at p (16-byte aligned). */
__device__ __forceinline__ void als_load8(const float *p, float v[8])
{
    float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

/* Row r of packed tile `tile`, to and from registers. */
__device__ __forceinline__ void als_row_load(const float *A, int tile, int r, float v[8])
{
    float4 a = *reinterpret_cast<const float4 *>(A + als_chunk(tile, r, 0));
    float4 b = *reinterpret_cast<const float4 *>(A + als_chunk(tile, r, 1));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

__device__ __forceinline__ void als_row_store(float *A, int tile, int r, const float v[8])
{
    *reinterpret_cast<float4 *>(A + als_chunk(tile, r, 0)) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(A + als_chunk(tile, r, 1)) = make_float4(v[4], v[5], v[6], v[7]);
}

/* acc += x y^T. */
__device__ __forceinline__ void als_outer(float acc[8][8], const float x[8], const float y[8])
{
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
}

/* Trailing update of tile (I, M), J < M <= I, after panel J: A_IM -= L_IJ D_J L_MJ^T, with L
 * read from the panel's own tiles (I, J) and (M, J) and D_J in d (0 for the columns that are
 * not pivots). No transposed copies of the panel: the solver's shared memory is the system
 * and its diagonal, which lets more systems share an SM. L_MJ stays in registers while the
 * rows of the tile go by one at a time. */
__device__ __forceinline__ void als_trailing_tile(float *A, const float d[8], int J, int I, int M)
{
    const int tile = als_tile_index(I, M), li = als_tile_index(I, J), lm = als_tile_index(M, J);
    float Lm[8][8];
#pragma unroll
    for (int c = 0; c < 8; c++)
        als_row_load(A, lm, c, Lm[c]);
#pragma unroll 2
    for (int r = 0; r < 8; r++) {
        float acc[8], x[8];
        als_row_load(A, tile, r, acc);
        als_row_load(A, li, r, x);
#pragma unroll
        for (int u = 0; u < 8; u++)
            x[u] *= d[u];
#pragma unroll
        for (int c = 0; c < 8; c++)
#pragma unroll
            for (int u = 0; u < 8; u++)
                acc[c] = fmaf(-x[u], Lm[c][u], acc[c]);
        als_row_store(A, tile, r, acc);
    }
}

/* Work of one half-step batch: segments [s0, s0 + nseg) of at most SEG ratings each. */
struct als_gram_args {
    const int64_t *seg_begin;
    const int32_t *seg_len;
    int64_t s0, nseg;
    const int32_t *idx; /* the other side's index of each rating */
    const float *val;   /* ratings, NULL: all 1 */
    const float *F;     /* the other side's factors, rows of kp floats, zero past k */
    int k, kp, tiles;
    float *slots; /* one system per segment of the batch */
    /* A biased model: the ratings enter as r - mean - bias[idx] (the other side's bias),
     * and F's column k - 1 holds the bias feature 1. NULL: no biases. */
    const float *bias;
    float mean;
};

/* A stage of the Gram kernel: up to ALS_GRAM_ROWS ratings [pos, pos + n) of segment seg,
 * which ends at rating end. */
struct als_stage {
    int64_t seg, pos, end;
    int n;
};

/* The stage after c within segments [c.seg, last): same segment while it has ratings left,
 * else the next segment's first (seg == last: none). Every thread computes the same. */
template <int ROWS>
__device__ __forceinline__ als_stage als_next_stage(const als_gram_args &a, als_stage c,
                                                    int64_t last)
{
    if (c.pos + ROWS < c.end) {
        c.pos += ROWS;
    } else {
        c.seg++;
        if (c.seg >= last)
            return c;
        c.pos = a.seg_begin[c.seg];
        c.end = c.pos + a.seg_len[c.seg];
    }
    c.n = (int)min((int64_t)ROWS, c.end - c.pos);
    return c;
}

/* Threads of the Gram kernel at the largest rank, k = 256: 561 tiles. The bound also caps
 * registers (at 113), which keeps six blocks per SM at k = 100. */
#define ALS_GRAM_MAX_THREADS 576

/* The stage after c, or c itself once past the last segment. */
template <int ROWS>
__device__ __forceinline__ als_stage als_advance(const als_gram_args &a, als_stage c, int64_t last)
{
    return c.seg < last ? als_next_stage<ROWS>(a, c, last) : c;
}

/* The stream of a Gram block, shared by the FP32 kernel (below) and the tensor-core one
 * (als_gram_tc.cuh): block b takes the segments that start in its equal share of the
 * batch's ratings and runs their stages of ALS_GRAM_ROWS rows as one stream, across segment
 * boundaries too. For each stage, every thread calls prepare(buffer, stage, n, rating) once
 * the stage is in (n rows ld floats apart, in buffer `buffer` of DEPTH + 1; rating(r) is
 * row r's rating, which belongs in the augmented column k), then, after a barrier,
 * multiply(stage, n), and flush(out) after the last stage of each segment, with out that
 * segment's partial system.
 *
 * Loads run DEPTH stages ahead, by cp.async, so that neither the gathers (from DRAM for the
 * item half) nor the start of a short user's segment stall the arithmetic: while stage c is
 * multiplied, the rows, ratings and other-side biases of stages c + 1 .. c + DEPTH are in
 * flight, and so are the indices of the DEPTH stages after those (the group that brings
 * stage s's rows also brings stage s + DEPTH's indices, which the rows of s + DEPTH need). */
template <int ROWS, int DEPTH, int KP, class Prepare, class Multiply, class Flush>
__device__ __forceinline__ void als_gram_stream(const als_gram_args &a, int ld, Prepare prepare,
                                                Multiply multiply, Flush flush)
{
    constexpr int NB = DEPTH + 1;     /* row buffers: stages c .. c + DEPTH */
    constexpr int NI = 2 * DEPTH + 2; /* index slots: stages c .. c + 2 DEPTH, and one spare */
    extern __shared__ float4 als_rows4[];
    float *rows = reinterpret_cast<float *>(als_rows4); /* [NB][ROWS][ld] */
    __shared__ int32_t stage_idx[NI][ROWS];
    __shared__ float stage_val[NB][ROWS];
    __shared__ float stage_bias[NB][ROWS];
    const int q4 = KP ? KP / 4 : a.kp / 4, l4 = ld / 4; /* KP: kp at compile time, or 0 */
    const int stage_floats = ROWS * ld;

    const int64_t s_end = a.s0 + a.nseg;
    const int64_t first = a.seg_begin[a.s0];
    const int64_t total = a.seg_begin[s_end - 1] + a.seg_len[s_end - 1] - first;
    const int64_t seg_a =
        mf_lower_bound(a.seg_begin, a.s0, s_end, first + total * blockIdx.x / gridDim.x);
    const int64_t seg_b =
        mf_lower_bound(a.seg_begin, seg_a, s_end, first + total * (blockIdx.x + 1) / gridDim.x);
    if (seg_a >= seg_b)
        return;

    /* Stage st (number s) of rows, ratings and biases, and stage it's indices (number s +
     * DEPTH), as one cp.async group; stages past the last segment bring nothing. */
    auto issue = [&](const als_stage &st, int s, const als_stage &it) {
        const int b = s % NB;
        if (st.seg < seg_b) {
            const float4 *F4 = reinterpret_cast<const float4 *>(a.F);
            const int32_t *idx = stage_idx[s % NI];
            for (int e = threadIdx.x; e < st.n * q4; e += blockDim.x) {
                const int r = e / q4, q = e - r * q4;
                __pipeline_memcpy_async(&als_rows4[b * (stage_floats / 4) + r * l4 + q],
                                        &F4[(int64_t)idx[r] * q4 + q], sizeof(float4));
            }
            for (int r = threadIdx.x; r < st.n; r += blockDim.x) {
                if (a.val)
                    __pipeline_memcpy_async(&stage_val[b][r], &a.val[st.pos + r], sizeof(float));
                if (a.bias)
                    __pipeline_memcpy_async(&stage_bias[b][r], &a.bias[idx[r]], sizeof(float));
            }
        }
        if (it.seg < seg_b)
            for (int r = threadIdx.x; r < it.n; r += blockDim.x)
                __pipeline_memcpy_async(&stage_idx[(s + DEPTH) % NI][r], &a.idx[it.pos + r],
                                        sizeof(int32_t));
        __pipeline_commit();
    };

    /* Three cursors: the stage multiplied (c), the one whose rows are issued (c + DEPTH) and
     * the one whose indices are (c + 2 DEPTH). */
    als_stage cur;
    cur.seg = seg_a;
    cur.pos = a.seg_begin[seg_a];
    cur.end = cur.pos + a.seg_len[seg_a];
    cur.n = (int)min((int64_t)ROWS, cur.end - cur.pos);
    als_stage rc = cur, ic = cur;
    for (int s = 0; s < DEPTH; s++) { /* the first DEPTH stages' indices, directly */
        if (ic.seg < seg_b)
            for (int r = threadIdx.x; r < ic.n; r += blockDim.x)
                stage_idx[s % NI][r] = a.idx[ic.pos + r];
        ic = als_advance<ROWS>(a, ic, seg_b);
    }
    __syncthreads();
    for (int s = 0; s < DEPTH; s++) {
        issue(rc, s, ic);
        rc = als_advance<ROWS>(a, rc, seg_b);
        ic = als_advance<ROWS>(a, ic, seg_b);
    }
    for (int c = 0; cur.seg < seg_b; c++) {
        __pipeline_wait_prior(DEPTH - 1); /* stage c's group is in */
        __syncthreads();
        const int b = c % NB;
        float *st = rows + b * stage_floats;
        /* The rating of row r < n: the augmented column k (the factor rows are zero there). */
        auto rating = [&](int r) {
            float v = a.val ? stage_val[b][r] : 1.0f;
            if (a.bias)
                v -= a.mean + stage_bias[b][r];
            return v;
        };
        prepare(b, st, cur.n, rating);
        __syncthreads();
        /* Into the buffers of stage c - 1, which every thread has finished with. */
        issue(rc, c + DEPTH, ic);
        rc = als_advance<ROWS>(a, rc, seg_b);
        ic = als_advance<ROWS>(a, ic, seg_b);
        multiply(static_cast<const float *>(st), cur.n);
        if (cur.pos + ROWS >= cur.end) /* the segment's last stage */
            flush(a.slots + (cur.seg - a.s0) * a.tiles * ALS_TILE_FLOATS);
        cur = als_advance<ROWS>(a, cur, seg_b);
    }
    __pipeline_wait_prior(0); /* groups past the end are empty; none is left behind */
}

/* The FP32 Gram kernel: a persistent grid, one thread per lower tile, each accumulating its
 * 8 x 8 tile of the augmented Gram matrix in registers and writing it out at the end of each
 * segment. Rows are kp floats apart in shared memory. (Where the tensor cores take TF32,
 * als_gram_tc.cuh's kernel runs instead: als.cu picks.) */
static __global__ void __launch_bounds__(ALS_GRAM_MAX_THREADS) als_gram_kernel(als_gram_args a)
{
    const int tile = threadIdx.x;
    int I = 0, M = 0;
    if (tile < a.tiles)
        als_tile_coords(tile, &I, &M);
    float acc[8][8];
#pragma unroll
    for (int r = 0; r < 8; r++)
#pragma unroll
        for (int c = 0; c < 8; c++)
            acc[r][c] = 0.0f;
    const int kp = a.kp;
    auto prepare = [&](int, float *st, int n, auto rating) {
        for (int r = threadIdx.x; r < n; r += blockDim.x)
            st[r * kp + a.k] = rating(r);
    };
    auto multiply = [&](const float *st, int n) {
        if (tile >= a.tiles)
            return;
        for (int r = 0; r < n; r++) {
            float x[8], y[8];
            als_load8(st + r * kp + 8 * I, x);
            als_load8(st + r * kp + 8 * M, y);
            als_outer(acc, x, y);
        }
    };
    auto flush = [&](float *out) {
        if (tile >= a.tiles)
            return;
#pragma unroll
        for (int r = 0; r < 8; r++) {
            als_row_store(out, tile, r, acc[r]);
#pragma unroll
            for (int c = 0; c < 8; c++)
                acc[r][c] = 0.0f;
        }
    };
    als_gram_stream<ALS_GRAM_ROWS, 1, 0>(a, kp, prepare, multiply, flush);
}

struct als_solve_args {
    const int64_t *ptr;     /* CSR offsets of the solved side: n = ptr[r + 1] - ptr[r] */
    const int64_t *row_seg; /* first segment of each row; row r owns [row_seg[r], row_seg[r+1]) */
    int64_t r0, s0;         /* the batch's first row and first segment */
    const float *slots;
    int k, kp, tiles;
    float lambda;
    float *X;                   /* solved factors, rows of kp floats */
    unsigned long long *failed; /* min over breakdowns of (row << 32 | pivot) */
    /* A biased model: unknown bias_col (= k - 1) is the row's bias, penalized by
     * lambda_bias n; it goes to bias_out[row], and X keeps the feature 1 in its place.
     * bias_col < 0: no biases. */
    int bias_col;
    float lambda_bias;
    float *bias_out;
    int weighted;    /* the penalties times the row's count n (ALS-WR), else as they are */
    int cg_steps;    /* als_cg.cuh's solver: its steps from the row's current factors */
    int64_t systems; /* rows in the launch: r0 .. r0 + systems (solver_launch sets it) */
};

/* Element m of a solved row (x, or 0 when the row broke down or has no ratings): the bias
 * column is handed to bias_out and replaced by the feature 1. */
__device__ __forceinline__ void als_store_solution(const als_solve_args &a, int64_t row,
                                                   float *x_out, int m, float x)
{
    if (m == a.bias_col) {
        a.bias_out[row] = x;
        x = 1.0f;
    }
    x_out[m] = x;
}

/* Diagonal rows i = first, first + step, ... of a summed system: lambda n (or lambda) on the k
 * pivots, identity on the padding past the augmented row k; dorig keeps the result for the
 * breakdown test. */
__device__ __forceinline__ void als_regularize(float *A, float *dorig, const als_solve_args &a,
                                               int64_t n, int first, int step)
{
    for (int i = first; i < a.kp; i += step) {
        float *d = als_at(A, i, i);
        if (i < a.k)
            *d += (i == a.bias_col ? a.lambda_bias : a.lambda) * (a.weighted ? (float)n : 1.0f);
        else if (i > a.k)
            *d = 1.0f; /* padding: identity rows */
        dorig[i] = *d;
    }
}

/* One block per row: sum the row's partial systems into shared memory, add lambda n on the
 * diagonal, factor by right-looking LDL^T in panels of 8 columns (the panel by one thread
 * per row, the trailing update by one thread per 8 x 8 tile), then back-substitute with one
 * warp. Needs blockDim >= kp: 128 threads (4 blocks per SM, 128 registers each) up to
 * kp = 128, else up to 288 threads. */
#define ALS_SOLVE_SMALL 128
template <int MAX_THREADS, int MIN_BLOCKS>
__global__ void __launch_bounds__(MAX_THREADS, MIN_BLOCKS) als_solve_kernel(als_solve_args a)
{
    extern __shared__ float4 als_sys4[];
    float *A = reinterpret_cast<float *>(als_sys4);
    const int sys = a.tiles * ALS_TILE_FLOATS;
    float *dorig = A + sys;     /* [kp]: diagonal before factoring */
    float *prow = dorig + a.kp; /* [2][8]: the pivot row, double-buffered */
    __shared__ int broke;

    const int64_t row = a.r0 + blockIdx.x;
    const int64_t n = a.ptr[row + 1] - a.ptr[row];
    float *x_out = a.X + row * a.kp;
    if (n == 0) {
        for (int m = threadIdx.x; m < a.kp; m += blockDim.x)
            als_store_solution(a, row, x_out, m, 0.0f);
        return;
    }
    const int64_t sb = a.row_seg[row] - a.s0, se = a.row_seg[row + 1] - a.s0;
    const float4 *slots4 = reinterpret_cast<const float4 *>(a.slots);
    for (int e = threadIdx.x; e < sys / 4; e += blockDim.x) {
        float4 s = slots4[sb * (sys / 4) + e];
        for (int64_t g = sb + 1; g < se; g++) { /* fixed order: deterministic */
            float4 t = slots4[g * (sys / 4) + e];
            s.x += t.x, s.y += t.y, s.z += t.z, s.w += t.w;
        }
        als_sys4[e] = s;
    }
    if (threadIdx.x == 0)
        broke = 0;
    __syncthreads();
    als_regularize(A, dorig, a, n, threadIdx.x, blockDim.x);
    __syncthreads();

    const int T = a.kp / 8;
    const int i = threadIdx.x; /* the row this thread factors within each panel */
    for (int J = 0; J < T; J++) {
        const int base = 8 * J;
        const bool mine = i >= base && i < a.kp;
        float v[8], dp[8]; /* dp: the panel's pivots, 0 past k */
        const int my_tile = als_tile_index(i >> 3, J);
        if (mine)
            als_row_load(A, my_tile, i & 7, v);
#pragma unroll
        for (int t = 0; t < 8; t++)
            dp[t] = 0.0f;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const int c = base + t;
            if (c >= a.k)
                break; /* columns k.. are not pivots; the same for every thread */
            float *p = prow + 8 * (t & 1);
            if (i == c) {
#pragma unroll
                for (int u = 0; u < 8; u++)
                    p[u] = v[u];
            }
            __syncthreads();
            const float d = p[t];
            dp[t] = d;
            if (i == c && (!(d > (float)a.k * 1.1920929e-7f * dorig[c]) || !isfinite(d))) {
                broke = 1;
                atomicMin(a.failed, ((unsigned long long)row << 32) | (unsigned)c);
            }
            if (mine && i > c) {
                const float l = v[t] / d;
#pragma unroll
                for (int u = t + 1; u < 8; u++)
                    v[u] = fmaf(-l, p[u], v[u]);
                v[t] = l;
            }
        }
        if (mine)
            als_row_store(A, my_tile, i & 7, v);
        __syncthreads();
        /* Trailing update of tiles (I, M), J < M <= I < T: A -= L_I D L_M^T. */
        const int rest = T - J - 1, count = rest * (rest + 1) / 2;
        for (int t = threadIdx.x; t < count; t += blockDim.x) {
            int I, M;
            als_tile_coords(t, &I, &M);
            als_trailing_tile(A, dp, J, I + J + 1, M + J + 1);
        }
        __syncthreads();
    }

    /* Row k of L is z = D^-1 L^-1 b. Back substitution L^T x = z by one warp, row by row:
     * once x_i is final, z_m -= L_im x_i for m < i. */
    if (threadIdx.x >= 32)
        return;
    float *z = dorig; /* free now */
    const int lane = threadIdx.x;
    for (int m = lane; m < a.kp; m += 32)
        z[m] = m < a.k ? als_get(A, a.k, m) : 0.0f;
    __syncwarp();
    for (int r = a.k - 1; r > 0; r--) {
        const float xr = z[r];
        for (int m = lane; m < r; m += 32)
            z[m] = fmaf(-als_get(A, r, m), xr, z[m]);
        __syncwarp();
    }
    const bool ok = broke == 0;
    for (int m = lane; m < a.kp; m += 32)
        als_store_solution(a, row, x_out, m, ok ? z[m] : 0.0f);
}

/* The same factorization with one warp per row, for kp <= 32 * RPL (each lane holds up to
 * RPL rows of the panel in registers). No block barriers: the pivot row goes from lane to
 * lane by shuffles, and many more systems are in flight per SM than with a block per
 * row, whose 13 panels x 10 barriers at k = 100 left the SM waiting. The updates are the
 * block kernel's, but the multipliers use one reciprocal per pivot, and the back
 * substitution goes by tiles with z in registers. The first partial system arrives by
 * cp.async; a long row's further partials are added from global. */
template <int RPL> __global__ void __launch_bounds__(32) als_solve_warp_kernel(als_solve_args a)
{
    extern __shared__ float4 als_sys4[];
    float *A = reinterpret_cast<float *>(als_sys4);
    const int sys = a.tiles * ALS_TILE_FLOATS;
    float *dorig = A + sys; /* [kp]: diagonal before factoring */
    const int lane = threadIdx.x;

    const int64_t row = a.r0 + blockIdx.x;
    const int64_t n = a.ptr[row + 1] - a.ptr[row];
    float *x_out = a.X + row * a.kp;
    if (n == 0) {
        for (int m = lane; m < a.kp; m += 32)
            als_store_solution(a, row, x_out, m, 0.0f);
        return;
    }
    const int64_t sb = a.row_seg[row] - a.s0, se = a.row_seg[row + 1] - a.s0;
    const float4 *first = reinterpret_cast<const float4 *>(a.slots) + sb * (sys / 4);
    for (int e = lane; e < sys / 4; e += 32)
        __pipeline_memcpy_async(&als_sys4[e], &first[e], sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncwarp();
    if (se - sb > 1) {
        const float4 *slots4 = reinterpret_cast<const float4 *>(a.slots);
        for (int e = lane; e < sys / 4; e += 32) {
            float4 s = als_sys4[e];
            for (int64_t g = sb + 1; g < se; g++) { /* fixed order: deterministic */
                float4 t = slots4[g * (sys / 4) + e];
                s.x += t.x, s.y += t.y, s.z += t.z, s.w += t.w;
            }
            als_sys4[e] = s;
        }
        __syncwarp();
    }
    als_regularize(A, dorig, a, n, lane, 32);
    __syncwarp();

    int broke = INT_MAX; /* the first pivot that broke down, in this lane */
    const int T = a.kp / 8;
    for (int J = 0; J < T; J++) {
        const int base = 8 * J;
        /* Row blocks holding any of rows [base, kp): the same for every lane, so the blocks
         * past them are skipped by a uniform branch instead of run predicated off. */
        const int blocks = (a.kp - base + 31) / 32;
        float v[RPL][8], dp[8]; /* dp: the panel's pivots, 0 past k */
#pragma unroll
        for (int j = 0; j < RPL; j++) {
            const int i = base + lane + 32 * j;
#pragma unroll
            for (int t = 0; t < 8; t++)
                v[j][t] = 0.0f;
            if (j < blocks && i < a.kp)
                als_row_load(A, als_tile_index(i >> 3, J), i & 7, v[j]);
        }
        /* Lane t < 8 checks pivot base + t against its diagonal before factoring. */
        const float dref = lane < 8 && base + lane < a.kp ? dorig[base + lane] : 0.0f;
#pragma unroll
        for (int t = 0; t < 8; t++)
            dp[t] = 0.0f;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            const int c = base + t;
            if (c >= a.k)
                break; /* columns k.. are not pivots */
            /* The pivot row, from lane t's registers by shuffles: no shared-memory round
             * trip on the chain that runs through all k pivots. */
            float pv[8];
#pragma unroll
            for (int u = t; u < 8; u++)
                pv[u] = __shfl_sync(0xffffffffu, v[0][u], t);
            const float d = pv[t];
            dp[t] = d;
            /* One approximate reciprocal per pivot instead of a division per row: the
             * division's checked slow path was an eighth of the kernel's time. */
            const float inv = __fdividef(1.0f, d);
            if (lane == t && (!(d > (float)a.k * 1.1920929e-7f * dref) || !isfinite(d)))
                broke = min(broke, c);
#pragma unroll
            for (int j = 0; j < RPL; j++) {
                const int i = base + lane + 32 * j;
                if (j < blocks && (j > 0 || lane > t) && i < a.kp) {
                    const float l = v[j][t] * inv;
#pragma unroll
                    for (int u = t + 1; u < 8; u++)
                        v[j][u] = fmaf(-l, pv[u], v[j][u]);
                    v[j][t] = l;
                }
            }
        }
#pragma unroll
        for (int j = 0; j < RPL; j++) {
            const int i = base + lane + 32 * j;
            if (j >= blocks || i >= a.kp)
                continue;
            als_row_store(A, als_tile_index(i >> 3, J), i & 7, v[j]);
        }
        __syncwarp();
        const int rest = T - J - 1, count = rest * (rest + 1) / 2;
        for (int t = lane; t < count; t += 32) {
            int I, M;
            als_tile_coords(t, &I, &M);
            als_trailing_tile(A, dp, J, I + J + 1, M + J + 1);
        }
        __syncwarp();
    }

    /* Row k of L is z = D^-1 L^-1 b; back substitution L^T x = z by tiles, last first: every
     * lane solves the 8 x 8 diagonal tile for x_J (rows past k are 0), then subtracts
     * L_J^T x_J from its own rows of z, which stay in registers (row lane + 32 j). */
    float zr[RPL];
#pragma unroll
    for (int j = 0; j < RPL; j++) {
        const int m = lane + 32 * j;
        zr[j] = m < a.k ? als_get(A, a.k, m) : 0.0f;
    }
    float *xs = dorig; /* free now: the solution, kp floats */
    for (int J = T - 1; J >= 0; J--) {
        const int base = 8 * J, jj = J >> 2, src = base & 31;
        float mine = 0.0f;
#pragma unroll
        for (int j = 0; j < RPL; j++)
            mine = j == jj ? zr[j] : mine;
        float x[8];
#pragma unroll
        for (int r = 0; r < 8; r++)
            x[r] = __shfl_sync(0xffffffffu, mine, src + r);
        const int diag = als_tile_index(J, J);
#pragma unroll
        for (int r = 7; r >= 0; r--) {
            if (base + r >= a.k)
                x[r] = 0.0f;
            float Lr[8];
            als_row_load(A, diag, r, Lr);
#pragma unroll
            for (int q = 0; q < r; q++)
                x[q] = fmaf(-Lr[q], x[r], x[q]);
        }
        if (lane == 0) {
            *reinterpret_cast<float4 *>(xs + base) = make_float4(x[0], x[1], x[2], x[3]);
            *reinterpret_cast<float4 *>(xs + base + 4) = make_float4(x[4], x[5], x[6], x[7]);
        }
#pragma unroll
        for (int j = 0; j < RPL; j++) {
            const int m = lane + 32 * j;
            if (32 * j < base && m < base) {
                const int tile = als_tile_index(J, m >> 3);
#pragma unroll
                for (int r = 0; r < 8; r++)
                    zr[j] = fmaf(-A[als_chunk(tile, r, (m >> 2) & 1) + (m & 3)], x[r], zr[j]);
            }
        }
    }
    __syncwarp();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        broke = min(broke, __shfl_xor_sync(0xffffffffu, broke, o));
    const bool ok = broke == INT_MAX;
    if (!ok && lane == 0)
        atomicMin(a.failed, ((unsigned long long)row << 32) | (unsigned)broke);
    for (int m = lane; m < a.kp; m += 32)
        als_store_solution(a, row, x_out, m, ok ? xs[m] : 0.0f);
}

#endif
