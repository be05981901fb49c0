/* The conjugate-gradient solver of a CUDA ALS half-step (MF_ALS_SOLVER_CG), for padded
 * orders kp <= 128.
 *
 * Why: the exact solver's LDL^T costs k^3 / 6 multiply-adds a row along a chain of k
 * dependent pivots; at k = 100 that was a fifth of an iteration (20 of 95 ms on an H100,
 * Netflix-shaped), however it was laid out. A few CG steps started from the row's factors
 * of the previous iteration (which ALS changes little from one iteration to the next) cost
 * k^2 each and reach the same test RMSE (cuMF_als solves this way, 6 steps).
 *
 * One block per row, thread i owning unknown i: it sums the row's partial systems into
 * shared memory (the layout of als_kernels.cuh), takes row i of G + lambda into registers
 * (both triangles, from the lower tiles), and then every product G p is a register dot
 * product against p broadcast from shared memory; the two dot products of a step are block
 * sums in a fixed order, so runs are reproducible. Threads past the system's order hold
 * zeros and only keep the barriers. */
#ifndef MF_ALS_CG_CUH
#define MF_ALS_CG_CUH

#include "als/als_kernels.cuh"

/* Largest padded order the CG kernel takes (its rows live in registers). */
#define ALS_CG_MAX_KP 128

__host__ __device__ constexpr int als_cg_threads(int kp)
{
    return (kp + 31) / 32 * 32;
}

/* The sums of v[0..V) over the block, the same in every thread, into v; red[] holds V slots
 * per warp and must not be the previous call's (the caller alternates two). */
template <int NW, int V>
__device__ __forceinline__ void als_cg_block_sums(float (&v)[V], float *red)
{
#pragma unroll
    for (int j = 0; j < V; j++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            v[j] += __shfl_xor_sync(0xffffffffu, v[j], o);
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int j = 0; j < V; j++)
            red[j * NW + (threadIdx.x >> 5)] = v[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < V; j++) {
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < NW; w++)
            s += red[j * NW + w];
        v[j] = s;
    }
}

/* (G p)_i for this thread's row g of G and p broadcast from shared memory: four chains. */
template <int KP>
__device__ __forceinline__ float als_cg_row_dot(const float (&g)[KP], const float *p)
{
    const float4 *p4 = reinterpret_cast<const float4 *>(p);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int m = 0; m < KP / 4; m++) {
        const float4 q = p4[m];
        s[0] = fmaf(g[4 * m], q.x, s[0]);
        s[1] = fmaf(g[4 * m + 1], q.y, s[1]);
        s[2] = fmaf(g[4 * m + 2], q.z, s[2]);
        s[3] = fmaf(g[4 * m + 3], q.w, s[3]);
    }
    return (s[0] + s[1]) + (s[2] + s[3]);
}

template <int T8>
__global__ void __launch_bounds__(als_cg_threads(8 * T8), 384 / als_cg_threads(8 * T8))
    als_cg_kernel(als_solve_args a)
{
    constexpr int KP = 8 * T8, NT = als_cg_threads(KP), NW = NT / 32;
    extern __shared__ float4 als_sys4[];
    float *A = reinterpret_cast<float *>(als_sys4);
    __shared__ __align__(16) float pv[KP]; /* the vector G multiplies */
    __shared__ float red[2][3 * NW];
    const int i = threadIdx.x, ks = a.k; /* ks unknowns; row ks of the system is b */
    const int sys = a.tiles * ALS_TILE_FLOATS;

    /* A persistent grid: block b solves rows b, b + grid, ... of the launch's `systems`.
     * The next row's first partial system is fetched by cp.async into the shared buffer as
     * soon as this row's G is in registers, so the load runs under this row's CG steps
     * (loaded at the start of each row, the solve waited on that latency). */
    auto fetch = [&](int64_t row) {
        if (row >= a.r0 + a.systems)
            return;
        const float4 *first =
            reinterpret_cast<const float4 *>(a.slots) + (a.row_seg[row] - a.s0) * (sys / 4);
        if (a.row_seg[row + 1] > a.row_seg[row]) /* rows without ratings have none */
            for (int e = i; e < sys / 4; e += NT)
                __pipeline_memcpy_async(&als_sys4[e], &first[e], sizeof(float4));
        __pipeline_commit();
    };
    fetch(a.r0 + blockIdx.x);
    for (int64_t row = a.r0 + blockIdx.x; row < a.r0 + a.systems; row += gridDim.x) {
        const int64_t n = a.ptr[row + 1] - a.ptr[row];
        float *x_out = a.X + row * a.kp;
        if (n == 0) {
            __pipeline_wait_prior(0); /* nothing was fetched; the buffer stays free */
            if (i < a.kp)
                als_store_solution(a, row, x_out, i, 0.0f);
            fetch(row + gridDim.x);
            continue;
        }
        /* The warm start, read before this thread (the only one touching element i)
         * stores. */
        float x = 0.0f;
        if (i < ks) {
            x = i == a.bias_col ? a.bias_out[row] : x_out[i];
            if (!isfinite(x))
                x = 0.0f;
        }
        if (i < KP)
            pv[i] = i < ks ? x : 0.0f;
        __pipeline_wait_prior(0);
        /* A long row's further partials, added from global in a fixed order. */
        const int64_t sb = a.row_seg[row] - a.s0, se = a.row_seg[row + 1] - a.s0;
        if (se - sb > 1) {
            __syncthreads();
            const float4 *slots4 = reinterpret_cast<const float4 *>(a.slots);
            for (int e = i; e < sys / 4; e += NT) {
                float4 s = als_sys4[e];
#pragma unroll 4
                for (int64_t g = sb + 1; g < se; g++) {
                    float4 t = slots4[g * (sys / 4) + e];
                    s.x += t.x, s.y += t.y, s.z += t.z, s.w += t.w;
                }
                als_sys4[e] = s;
            }
        }
        __syncthreads();

        /* Row i of G, tile by tile: row i & 7 of the tiles (i / 8, M) left of the diagonal,
         * column i & 7 of the tiles (M, i / 8) below it (the diagonal tile is whole);
         * lambda on the diagonal. Register indices are compile-time constants; only the
         * guards are not. */
        float g[KP];
        float b = 0.0f;
        const bool mine = i < ks;
        const int I = i >> 3, ri = i & 7;
#pragma unroll
        for (int M = 0; M < T8; M++) {
            float v[8];
            if (!mine) {
#pragma unroll
                for (int c = 0; c < 8; c++)
                    v[c] = 0.0f;
            } else if (M <= I) {
                als_row_load(A, als_tile_index(I, M), ri, v);
            } else {
                const int t = als_tile_index(M, I);
#pragma unroll
                for (int c = 0; c < 8; c++)
                    v[c] = A[als_chunk(t, c, ri >> 2) + (ri & 3)];
            }
#pragma unroll
            for (int c = 0; c < 8; c++)
                g[8 * M + c] = 8 * M + c < ks ? v[c] : 0.0f;
        }
        if (mine) {
            b = als_get(A, ks, i);
            const float lam =
                (i == a.bias_col ? a.lambda_bias : a.lambda) * (a.weighted ? (float)n : 1.0f);
#pragma unroll
            for (int m = 0; m < KP; m++)
                if (m == i)
                    g[m] += lam;
        }
        __syncthreads(); /* the system is in registers: the buffer takes the next row's */
        fetch(row + gridDim.x);

        /* Chronopoulos and Gear's CG: the same iterates as the textbook's, but both dot
         * products of a step in one block reduction (r.r and r.Ar, with Ap carried by a
         * recurrence), which halves the barriers; it costs one product more, at the start. */
        float r = mine ? b - als_cg_row_dot<KP>(g, pv) : 0.0f;
        __syncthreads(); /* every thread is done with x in pv */
        if (i < KP)
            pv[i] = r;
        __syncthreads();
        float w = mine ? als_cg_row_dot<KP>(g, pv) : 0.0f; /* A r */
        float v3[3] = {r * r, w * r, b * b};
        als_cg_block_sums<NW, 3>(v3, red[0]);
        float gamma = v3[0];
        /* Converged to float accuracy: further steps only add rounding. */
        const float tol = 1e-12f * v3[2];
        int broke = -1;                             /* the step at which p^T G p was not positive */
        float alpha = gamma / v3[1], p = r, sp = w; /* sp = A p */
        if (gamma > tol && (!(v3[1] > 0.0f) || !isfinite(v3[1])))
            broke = 0;
        for (int step = 0; broke < 0 && step < a.cg_steps && gamma > tol; step++) {
            x = fmaf(alpha, p, x);
            if (step + 1 == a.cg_steps)
                break;
            r = fmaf(-alpha, sp, r);
            if (i < KP) /* every thread read pv before the last reduction's barrier */
                pv[i] = r;
            __syncthreads();
            w = mine ? als_cg_row_dot<KP>(g, pv) : 0.0f;
            float v2[2] = {r * r, w * r};
            als_cg_block_sums<NW, 2>(v2, red[(step + 1) & 1]);
            const float beta = v2[0] / gamma;
            const float pq = v2[1] - beta * v2[0] / alpha; /* p' A p' of the next direction */
            if (!(v2[0] > tol))
                break;                           /* converged */
            if (!(pq > 0.0f) || !isfinite(pq)) { /* the same in every thread */
                broke = step + 1;
                break;
            }
            alpha = v2[0] / pq;
            p = fmaf(beta, p, r);
            sp = fmaf(beta, sp, w);
            gamma = v2[0];
        }
        if (broke >= 0 && i == 0)
            atomicMin(a.failed, ((unsigned long long)row << 32) | (unsigned)broke);
        if (i < a.kp)
            als_store_solution(a, row, x_out, i, broke < 0 && mine ? x : 0.0f);
        /* pv and red are read in the reductions above by every thread before any thread
         * passes their barriers, and the next row writes pv before its own barrier: no
         * barrier needed here. */
    }
}

#endif
