// Kernels of the CUDA iALS engine (ials.cu). Factors live on the device as rows of
// kp = 32 * VPL floats, zero past k: a warp holds one row, VPL floats per lane, so that the
// per-row kernels need no masking and the dense kernels no edge cases. CUDA C++, private to
// src/ials.
#ifndef MF_IALS_KERNELS_CUH
#define MF_IALS_KERNELS_CUH
#include <cuda_fp16.h>
#include <stdint.h>

#include "ials/ials_internal.h"

namespace ials
{

/* Factors are float or, with mf_ials_opts.fp16, half (`half` below, the same for a whole
 * launch): element e of a factor array. */
__device__ __forceinline__ float fac(const void *F, int64_t e, int is_half)
{
    return is_half ? __half2float(static_cast<const __half *>(F)[e])
                   : static_cast<const float *>(F)[e];
}

/* ---- G = F^T F: partial sums by row chunks, then a fixed-order reduction ---------------- */

/* Lower 32 x 32 tile t of a kp x kp matrix: its tile row I and tile column M <= I. */
__device__ __forceinline__ void tile_of(int t, int &I, int &M)
{
    I = 0;
    while ((I + 1) * (I + 2) / 2 <= t)
        I++;
    M = t - I * (I + 1) / 2;
}

/* Block (chunk first + x, lower 32 x 32 tile y) sums F's rows of its chunk (of `chunks`
 * over all rows) into its tile of the chunk's partial: part + (chunk x tiles + y) x 1024, a
 * row of the tile 32 floats. 256 threads, each a 2 x 2 piece. A chunk's sums depend only on
 * its rows, whichever launch or rank forms it. */
__global__ void __launch_bounds__(256)
    gram_partial(const void *F, int is_half, int64_t rows, int kp, int64_t chunks, int64_t first,
                 float *part)
{
    int I, M;
    tile_of((int)blockIdx.y, I, M);
    const int64_t ch = first + blockIdx.x;
    const int64_t r0 = rows * ch / chunks, r1 = rows * (ch + 1) / chunks;
    __shared__ float a[32][33], b[32][33];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    for (int64_t base = r0; base < r1; base += 32) {
        const int n = (int)min((int64_t)32, r1 - base);
        for (int e = threadIdx.x; e < 32 * 32; e += 256) {
            const int rr = e / 32, cc = e % 32;
            const int64_t row = (base + rr) * kp;
            a[rr][cc] = rr < n ? fac(F, row + I * 32 + cc, is_half) : 0.0f;
            b[rr][cc] = rr < n ? fac(F, row + M * 32 + cc, is_half) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int rr = 0; rr < 32; rr++) {
            const float x0 = a[rr][ty * 2], x1 = a[rr][ty * 2 + 1];
            const float y0 = b[rr][tx * 2], y1 = b[rr][tx * 2 + 1];
            acc[0][0] = fmaf(x0, y0, acc[0][0]);
            acc[0][1] = fmaf(x0, y1, acc[0][1]);
            acc[1][0] = fmaf(x1, y0, acc[1][0]);
            acc[1][1] = fmaf(x1, y1, acc[1][1]);
        }
        __syncthreads();
    }
    float *out = part + (ch * gridDim.y + blockIdx.y) * 1024;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            out[(ty * 2 + i) * 32 + tx * 2 + j] = acc[i][j];
}

/* G (kp x kp, both triangles) = the chunks' partials summed in chunk order: a thread per
 * element of a lower tile, which it writes with its mirror. */
__global__ void gram_reduce(const float *part, int kp, int tiles, int64_t chunks, float *G)
{
    const int64_t n = (int64_t)tiles * 1024;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int I, M;
        tile_of((int)(e / 1024), I, M);
        const int a = I * 32 + (int)(e % 1024) / 32, c = M * 32 + (int)(e % 32);
        float s = 0.0f;
#pragma unroll 8
        for (int64_t ch = 0; ch < chunks; ch++)
            s += part[ch * n + e];
        G[(int64_t)a * kp + c] = s;
        if (I != M) /* the upper tiles are the lower ones' mirror */
            G[(int64_t)c * kp + a] = s;
    }
}

/* ---- C = P G (rows x kp times kp x kp) ------------------------------------------------- */

/* Tiles of 64 rows x 32 NC columns; 256 threads, each 8 rows x NC columns (32 apart). */
template <int NC>
__global__ void __launch_bounds__(256)
    gemm_pg(const void *P, int is_half, const float *G, float *C, int64_t rows, int kp)
{
    __shared__ float Ps[64][17];
    __shared__ float Gs[16][32 * NC];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int64_t row0 = (int64_t)blockIdx.x * 64;
    const int col0 = blockIdx.y * 32 * NC;
    float acc[8][NC];
#pragma unroll
    for (int r = 0; r < 8; r++)
#pragma unroll
        for (int j = 0; j < NC; j++)
            acc[r][j] = 0.0f;
    for (int k0 = 0; k0 < kp; k0 += 16) {
        for (int e = threadIdx.x; e < 64 * 16; e += 256) {
            const int r = e / 16, c = e % 16;
            Ps[r][c] = row0 + r < rows ? fac(P, (row0 + r) * kp + k0 + c, is_half) : 0.0f;
        }
        for (int e = threadIdx.x; e < 16 * 32 * NC; e += 256) {
            const int r = e / (32 * NC), c = e % (32 * NC);
            Gs[r][c] = G[(int64_t)(k0 + r) * kp + col0 + c];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; kk++) {
            float g[NC];
#pragma unroll
            for (int j = 0; j < NC; j++)
                g[j] = Gs[kk][tx + 32 * j];
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const float p = Ps[ty * 8 + r][kk];
#pragma unroll
                for (int j = 0; j < NC; j++)
                    acc[r][j] = fmaf(p, g[j], acc[r][j]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 8; r++) {
        const int64_t row = row0 + ty * 8 + r;
        if (row < rows)
#pragma unroll
            for (int j = 0; j < NC; j++)
                C[row * kp + col0 + tx + 32 * j] = acc[r][j];
    }
}

/* ---- per-row CG: one warp per row ----------------------------------------------------- */

struct cg_args {
    int32_t rows;
    const int64_t *ptr; /* the solved side's CSR (or the CSC for items) */
    const int32_t *idx;
    const float *val; /* NULL: a pattern's ones */
    const void *F;    /* the other side's factors (float or half) */
    void *X;          /* own factors (float or half) */
    float *R, *P;     /* residuals, directions */
    int is_half;      /* the factors are half */
    const float *AP;  /* the dense part (P G, or X G at init) */
    float *rs;        /* |r|^2 per row */
    float lambda, alpha, epsilon;
    int log_confidence;
    int kp;
    int step;
    unsigned long long *failed; /* min of (row << 32 | step) */
    /* A row of more than IALS_SEGMENT interactions is cut into segments of at most that
     * many, [seg_lo, seg_hi), so that a popular item's thousands of users are spread over
     * many warps; PA (and PB at init) hold one partial sum per segment (nseg x kp), added up
     * per row in segment order. row_seg: the first segment of each row (rows + 1); a
     * shorter row has none, and its own warp goes through its items inline. */
    int64_t nseg;
    const int64_t *seg_lo, *seg_hi, *row_seg;
    const int32_t *seg_row;
    float *PA, *PB;
    /* The side's number of this launch's row 0: nonzero for a batch of rows whose
     * interactions stream from the host (ials.cu). Only `failed` uses it, to name rows. */
    int64_t row0;
};

template <int VPL> __device__ __forceinline__ void load_row(const float *p, float v[VPL])
{
    if (VPL % 4 == 0) {
#pragma unroll
        for (int j = 0; j < VPL; j += 4) {
            const float4 q = *reinterpret_cast<const float4 *>(p + j);
            v[j] = q.x, v[j + 1] = q.y, v[j + 2] = q.z, v[j + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < VPL; j++)
            v[j] = p[j];
    }
}

template <int VPL> __device__ __forceinline__ void store_row(float *p, const float v[VPL])
{
    if (VPL % 4 == 0) {
#pragma unroll
        for (int j = 0; j < VPL; j += 4)
            *reinterpret_cast<float4 *>(p + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
    } else {
#pragma unroll
        for (int j = 0; j < VPL; j++)
            p[j] = v[j];
    }
}

/* A lane's VPL consecutive factor elements at element offset off, float or half. */
template <int VPL>
__device__ __forceinline__ void load_fac(const void *base, int64_t off, int is_half, float v[VPL])
{
    if (!is_half) {
        load_row<VPL>(static_cast<const float *>(base) + off, v);
    } else if (VPL % 2 == 0) {
        const __half2 *p =
            reinterpret_cast<const __half2 *>(static_cast<const __half *>(base) + off);
#pragma unroll
        for (int j = 0; j < VPL / 2; j++) {
            const float2 f = __half22float2(p[j]);
            v[2 * j] = f.x, v[2 * j + 1] = f.y;
        }
    } else {
#pragma unroll
        for (int j = 0; j < VPL; j++)
            v[j] = __half2float(static_cast<const __half *>(base)[off + j]);
    }
}

template <int VPL>
__device__ __forceinline__ void store_fac(void *base, int64_t off, int is_half, const float v[VPL])
{
    if (!is_half) {
        store_row<VPL>(static_cast<float *>(base) + off, v);
    } else if (VPL % 2 == 0) {
        __half2 *p = reinterpret_cast<__half2 *>(static_cast<__half *>(base) + off);
#pragma unroll
        for (int j = 0; j < VPL / 2; j++)
            p[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    } else {
#pragma unroll
        for (int j = 0; j < VPL; j++)
            static_cast<__half *>(base)[off + j] = __float2half_rn(v[j]);
    }
}

__device__ __forceinline__ float warp_sum(float s)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

/* acc += sum over the row's items of w (f . v) f; with b, b += sum (1 + w) f. Four items
 * at a time, so that their loads are in flight together. */
template <int VPL, bool RHS>
__device__ __forceinline__ void sparse_apply(const cg_args &a, int64_t p0, int64_t p1, int lane,
                                             const float v[VPL], float acc[VPL], float b[VPL])
{
    constexpr int U = 4;
    for (int64_t p = p0; p < p1; p += U) {
        float f[U][VPL], w[U], d[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const bool in = p + u < p1;
            const int32_t j = in ? a.idx[p + u] : 0;
            const float r = in ? (a.val ? a.val[p + u] : 1.0f) : 0.0f;
            w[u] = in ? mf_ials_weight(r, a.alpha, a.epsilon, a.log_confidence) : 0.0f;
            if (in)
                load_fac<VPL>(a.F, (int64_t)j * a.kp + lane * VPL, a.is_half, f[u]);
            else
#pragma unroll
                for (int t = 0; t < VPL; t++)
                    f[u][t] = 0.0f;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            float s = 0.0f;
#pragma unroll
            for (int t = 0; t < VPL; t++)
                s = fmaf(f[u][t], v[t], s);
            d[u] = s;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int u = 0; u < U; u++)
                d[u] += __shfl_xor_sync(0xffffffffu, d[u], o);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const float wd = w[u] * d[u];
#pragma unroll
            for (int t = 0; t < VPL; t++) {
                acc[t] = fmaf(wd, f[u][t], acc[t]);
                if (RHS)
                    b[t] = fmaf(1.0f + w[u], f[u][t], b[t]);
            }
        }
    }
}

/* The sparse part of one segment: PA[s] = sum w (f . v) f over its items, v the row's X (at
 * init) or P; at init also PB[s] = sum (1 + w) f. One warp per segment. */
template <int VPL, bool INIT> __global__ void __launch_bounds__(256) seg_apply(cg_args a)
{
    const int lane = threadIdx.x % 32;
    const int64_t seg = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;
    if (seg >= a.nseg)
        return;
    const int64_t row = a.seg_row[seg];
    if (!INIT && a.rs[row] < 1e-20f)
        return; /* a finished row: cg_step reads nothing of it */
    float v[VPL], acc[VPL], b[VPL];
    if (INIT)
        load_fac<VPL>(a.X, row * a.kp + lane * VPL, a.is_half, v);
    else
        load_row<VPL>(a.P + row * a.kp + lane * VPL, v);
#pragma unroll
    for (int t = 0; t < VPL; t++)
        acc[t] = b[t] = 0.0f;
    sparse_apply<VPL, INIT>(a, a.seg_lo[seg], a.seg_hi[seg], lane, v, acc, b);
    store_row<VPL>(a.PA + seg * a.kp + lane * VPL, acc);
    if (INIT)
        store_row<VPL>(a.PB + seg * a.kp + lane * VPL, b);
}

/* acc += the row's segment partials of `part`, in segment order (deterministic). */
template <int VPL>
__device__ __forceinline__ void add_partials(const cg_args &a, const float *part, int64_t row,
                                             int lane, float acc[VPL])
{
    for (int64_t sg = a.row_seg[row]; sg < a.row_seg[row + 1]; sg++) {
        float q[VPL];
        load_row<VPL>(part + sg * a.kp + lane * VPL, q);
#pragma unroll
        for (int t = 0; t < VPL; t++)
            acc[t] += q[t];
    }
}

/* r = b - (X G + lambda x + sparse(x)), p = r, rs = |r|^2; rows without items get x = 0. */
template <int VPL> __global__ void __launch_bounds__(256) cg_init(cg_args a)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;
    if (row >= a.rows)
        return;
    const int64_t off = row * a.kp + lane * VPL;
    float x[VPL], acc[VPL], b[VPL];
#pragma unroll
    for (int t = 0; t < VPL; t++)
        b[t] = 0.0f;
    if (a.ptr[row] == a.ptr[row + 1]) {
#pragma unroll
        for (int t = 0; t < VPL; t++)
            x[t] = 0.0f;
        store_fac<VPL>(a.X, off, a.is_half, x);
        store_row<VPL>(a.R + off, x);
        store_row<VPL>(a.P + off, x);
        if (lane == 0)
            a.rs[row] = 0.0f;
        return;
    }
    load_fac<VPL>(a.X, off, a.is_half, x);
    load_row<VPL>(a.AP + off, acc);
#pragma unroll
    for (int t = 0; t < VPL; t++)
        acc[t] = fmaf(a.lambda, x[t], acc[t]);
    if (a.row_seg[row] == a.row_seg[row + 1]) {
        sparse_apply<VPL, true>(a, a.ptr[row], a.ptr[row + 1], lane, x, acc, b);
    } else {
        add_partials<VPL>(a, a.PA, row, lane, acc);
        add_partials<VPL>(a, a.PB, row, lane, b);
    }
    float s = 0.0f;
#pragma unroll
    for (int t = 0; t < VPL; t++) {
        b[t] -= acc[t];
        s = fmaf(b[t], b[t], s);
    }
    s = warp_sum(s);
    store_row<VPL>(a.R + off, b);
    store_row<VPL>(a.P + off, b);
    if (lane == 0)
        a.rs[row] = s;
}

/* One CG step per row (implicit's): Ap = P G + lambda p + sparse(p); alpha = rs / p.Ap;
 * x += alpha p; r -= alpha Ap; p = r + (rs_new / rs) p. A row whose residual is at rounding
 * level (rs < 1e-20) is done. */
template <int VPL> __global__ void __launch_bounds__(256) cg_step(cg_args a)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;
    if (row >= a.rows)
        return;
    const float rs = a.rs[row];
    if (rs < 1e-20f)
        return;
    const int64_t off = row * a.kp + lane * VPL;
    float p[VPL], ap[VPL];
    load_row<VPL>(a.P + off, p);
    load_row<VPL>(a.AP + off, ap);
#pragma unroll
    for (int t = 0; t < VPL; t++)
        ap[t] = fmaf(a.lambda, p[t], ap[t]);
    if (a.row_seg[row] == a.row_seg[row + 1])
        sparse_apply<VPL, false>(a, a.ptr[row], a.ptr[row + 1], lane, p, ap, nullptr);
    else
        add_partials<VPL>(a, a.PA, row, lane, ap);
    float pap = 0.0f;
#pragma unroll
    for (int t = 0; t < VPL; t++)
        pap = fmaf(p[t], ap[t], pap);
    pap = warp_sum(pap);
    if (!(pap > 0.0f) || !isfinite(pap)) {
        if (lane == 0)
            atomicMin(a.failed, ((unsigned long long)(a.row0 + row) << 32) | (unsigned)a.step);
        return;
    }
    const float step = rs / pap;
    float x[VPL], r[VPL];
    load_fac<VPL>(a.X, off, a.is_half, x);
    load_row<VPL>(a.R + off, r);
    float s = 0.0f;
#pragma unroll
    for (int t = 0; t < VPL; t++) {
        x[t] = fmaf(step, p[t], x[t]);
        r[t] = fmaf(-step, ap[t], r[t]);
        s = fmaf(r[t], r[t], s);
    }
    s = warp_sum(s);
    const float beta = s / rs;
#pragma unroll
    for (int t = 0; t < VPL; t++)
        p[t] = fmaf(beta, p[t], r[t]);
    store_fac<VPL>(a.X, off, a.is_half, x);
    store_row<VPL>(a.R + off, r);
    store_row<VPL>(a.P + off, p);
    if (lane == 0)
        a.rs[row] = s;
}

/* ---- the exact row: Cholesky in shared memory, one block of 256 threads per row -------- */

struct exact_args {
    int32_t rows;
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    const void *F;
    const float *G; /* kp x kp */
    void *X;
    int is_half;
    float lambda, alpha, epsilon;
    int log_confidence;
    int k, kp;
    unsigned long long *failed; /* min of (row << 32 | pivot) */
    int64_t row0;               /* as cg_args.row0 */
};

#define IALS_EXACT_STAGE 8

/* Shared memory of one system: A (k x k), b (k), the staged rows and their weights. */
static inline size_t exact_smem_bytes(int k)
{
    return ((size_t)k * k + (size_t)k + (size_t)IALS_EXACT_STAGE * (k + 1)) * sizeof(float);
}

__global__ void __launch_bounds__(256) exact_solve(exact_args a)
{
    extern __shared__ float sm[];
    const int k = a.k, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    float *A = sm, *b = A + (size_t)k * k, *ys = b + k, *ws = ys + IALS_EXACT_STAGE * k;
    __shared__ int broke;
    const int64_t row = blockIdx.x;
    const int64_t x_off = row * a.kp;
    const int64_t p0 = a.ptr[row], p1 = a.ptr[row + 1];
    if (p0 == p1) {
        const float zero = 0.0f;
        for (int m = tid; m < a.kp; m += blockDim.x)
            store_fac<1>(a.X, x_off + m, a.is_half, &zero);
        return;
    }
    for (int e = tid; e < k * k; e += blockDim.x) {
        const int r = e / k, c = e % k;
        A[e] = a.G[(int64_t)r * a.kp + c] + (r == c ? a.lambda : 0.0f);
    }
    for (int m = tid; m < k; m += blockDim.x)
        b[m] = 0.0f;
    if (tid == 0)
        broke = -1;
    for (int64_t p = p0; p < p1; p += IALS_EXACT_STAGE) {
        const int n = (int)min((int64_t)IALS_EXACT_STAGE, p1 - p);
        __syncthreads();
        for (int e = tid; e < n * k; e += blockDim.x) {
            const int s = e / k, c = e % k;
            ys[s * k + c] = fac(a.F, (int64_t)a.idx[p + s] * a.kp + c, a.is_half);
        }
        if (tid < n)
            ws[tid] =
                mf_ials_weight(a.val ? a.val[p + tid] : 1.0f, a.alpha, a.epsilon, a.log_confidence);
        __syncthreads();
        for (int r = warp; r < k; r += blockDim.x / 32)
            for (int c = lane; c <= r; c += 32) {
                float s = A[r * k + c];
                for (int q = 0; q < n; q++)
                    s = fmaf(ws[q] * ys[q * k + r], ys[q * k + c], s);
                A[r * k + c] = s;
            }
        for (int m = tid; m < k; m += blockDim.x) {
            float s = b[m];
            for (int q = 0; q < n; q++)
                s = fmaf(1.0f + ws[q], ys[q * k + m], s);
            b[m] = s;
        }
    }
    __syncthreads();
    for (int j = 0; j < k; j++) { /* right-looking Cholesky, L in the lower triangle */
        if (tid == 0) {
            const float d = A[j * k + j];
            if (!(d > 0.0f) || !isfinite(d)) {
                if (broke < 0)
                    broke = j;
                A[j * k + j] = 1.0f;
            } else {
                A[j * k + j] = sqrtf(d);
            }
        }
        __syncthreads();
        const float inv = 1.0f / A[j * k + j];
        for (int i = j + 1 + tid; i < k; i += blockDim.x)
            A[i * k + j] *= inv;
        __syncthreads();
        for (int i = j + 1 + warp; i < k; i += blockDim.x / 32) {
            const float lij = A[i * k + j];
            for (int c = j + 1 + lane; c <= i; c += 32)
                A[i * k + c] = fmaf(-lij, A[c * k + j], A[i * k + c]);
        }
        __syncthreads();
    }
    if (broke >= 0) {
        if (tid == 0)
            atomicMin(a.failed, ((unsigned long long)(a.row0 + row) << 32) | (unsigned)broke);
        return;
    }
    if (warp != 0)
        return;
    for (int i = 0; i < k; i++) { /* L y = b */
        float s = 0.0f;
        for (int t = lane; t < i; t += 32)
            s = fmaf(A[i * k + t], b[t], s);
        s = warp_sum(s);
        if (lane == 0)
            b[i] = (b[i] - s) / A[i * k + i];
        __syncwarp();
    }
    for (int i = k - 1; i >= 0; i--) { /* L^T x = y */
        float s = 0.0f;
        for (int t = i + 1 + lane; t < k; t += 32)
            s = fmaf(A[t * k + i], b[t], s);
        s = warp_sum(s);
        if (lane == 0)
            b[i] = (b[i] - s) / A[i * k + i];
        __syncwarp();
    }
    for (int m = lane; m < a.kp; m += 32) {
        const float x = m < k ? b[m] : 0.0f;
        store_fac<1>(a.X, x_off + m, a.is_half, &x);
    }
}

/* ---- the loss: per-block partial sums in double, added on the host in block order ------ */

struct loss_args {
    int32_t rows;
    const int64_t *ptr; /* NULL: only lambda |x|^2 (the other factor's penalty) */
    const int32_t *idx;
    const float *val;
    const void *X, *F;
    const float *G;
    int is_half;
    float lambda, alpha, epsilon;
    int log_confidence;
    int kp;
    double *partial; /* one per block */
    /* Non-NULL (a streamed batch of rows): each row's total goes here instead, for the host
     * to add up in blocks of 8 rows of the whole side, as the blocks above add them. */
    double *row_total;
};

template <int VPL> __global__ void __launch_bounds__(256) loss_rows(loss_args a)
{
    __shared__ double sums[8];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t row = (int64_t)blockIdx.x * 8 + warp;
    double total = 0.0;
    if (row < a.rows) {
        float x[VPL];
        load_fac<VPL>(a.X, row * a.kp + lane * VPL, a.is_half, x);
        float reg = 0.0f, quad = 0.0f;
#pragma unroll
        for (int t = 0; t < VPL; t++)
            reg = fmaf(x[t], x[t], reg);
        double pairs = 0.0;
        if (a.ptr) {
            float gx[VPL]; /* (G x) at this lane's entries */
#pragma unroll
            for (int t = 0; t < VPL; t++)
                gx[t] = 0.0f;
            for (int c = 0; c < a.kp; c++) {
                float xc = 0.0f;
#pragma unroll
                for (int t = 0; t < VPL; t++)
                    xc = c % VPL == t ? __shfl_sync(0xffffffffu, x[t], c / VPL) : xc;
#pragma unroll
                for (int t = 0; t < VPL; t++)
                    gx[t] = fmaf(a.G[(int64_t)(lane * VPL + t) * a.kp + c], xc, gx[t]);
            }
#pragma unroll
            for (int t = 0; t < VPL; t++)
                quad = fmaf(x[t], gx[t], quad);
            for (int64_t p = a.ptr[row]; p < a.ptr[row + 1]; p++) {
                float f[VPL];
                load_fac<VPL>(a.F, (int64_t)a.idx[p] * a.kp + lane * VPL, a.is_half, f);
                float s = 0.0f;
#pragma unroll
                for (int t = 0; t < VPL; t++)
                    s = fmaf(f[t], x[t], s);
                s = warp_sum(s);
                const double c = 1.0 + mf_ials_weight(a.val ? a.val[p] : 1.0f, a.alpha, a.epsilon,
                                                      a.log_confidence);
                pairs += c * (1.0 - s) * (1.0 - s) - (double)s * s;
            }
        }
        total = (double)warp_sum(quad) + (double)a.lambda * warp_sum(reg) + pairs;
    }
    if (a.row_total) { /* the same for the whole block */
        if (lane == 0 && row < a.rows)
            a.row_total[row] = total;
        return;
    }
    if (lane == 0)
        sums[warp] = total;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int w = 0; w < 8; w++)
            s += sums[w];
        a.partial[blockIdx.x] = s;
    }
}

/* rows x k floats (leading dimension k) from rows of kp halves. */
__global__ void half_rows_to_float(const __half *src, int kp, int k, int64_t rows, float *dst)
{
    const int64_t n = rows * k;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        dst[e] = __half2float(src[(e / k) * kp + e % k]);
}

} // namespace ials

#endif
