/* Kernels of the CUDA engine of Hogwild SGD (sgd.cu). CUDA C++ only.
 *
 * Layout: a factor row is kp = 32 * KPL elements (float, or IEEE half with HALF), zero past
 * k; lane l of a warp holds elements [l * KPL, l * KPL + KPL) of the rows it works on, so a
 * row moves as one coalesced vector access per lane. Factor rows are read and written
 * through L2 only (ld.global.cg / st.global.cg): other multiprocessors update them, and a
 * stale line in this multiprocessor's L1 would hand back an old row. */
#ifndef MF_SGD_KERNELS_CUH
#define MF_SGD_KERNELS_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "sgd/sgd_internal.h"
#include "sgd/sgd_rules.h"

namespace sgd
{

/* The lane's KPL elements of a row: float from float or half storage. */
template <int KPL, bool HALF> struct row_io {
    static constexpr int BYTES = KPL * (HALF ? 2 : 4);
    using elem = typename std::conditional<HALF, __half, float>::type;

    static __device__ __forceinline__ void load(const elem *row, int lane, float *x)
    {
        const elem *p = row + lane * KPL;
        if constexpr (BYTES % 16 == 0) {
            for (int c = 0; c < BYTES / 16; c++) {
                uint4 w = __ldcg(reinterpret_cast<const uint4 *>(p) + c);
                unpack(&w, 16, x + c * (16 / sizeof(elem)));
            }
        } else if constexpr (BYTES == 8) {
            uint2 w = __ldcg(reinterpret_cast<const uint2 *>(p));
            unpack(&w, 8, x);
        } else if constexpr (BYTES == 4) {
            unsigned int w = __ldcg(reinterpret_cast<const unsigned int *>(p));
            unpack(&w, 4, x);
        } else { /* one half */
            unsigned short w = __ldcg(reinterpret_cast<const unsigned short *>(p));
            unpack(&w, 2, x);
        }
    }

    static __device__ __forceinline__ void store(elem *row, int lane, const float *x)
    {
        elem *p = row + lane * KPL;
        if constexpr (BYTES % 16 == 0) {
            for (int c = 0; c < BYTES / 16; c++) {
                uint4 w;
                pack(x + c * (16 / sizeof(elem)), 16, &w);
                __stcg(reinterpret_cast<uint4 *>(p) + c, w);
            }
        } else if constexpr (BYTES == 8) {
            uint2 w;
            pack(x, 8, &w);
            __stcg(reinterpret_cast<uint2 *>(p), w);
        } else if constexpr (BYTES == 4) {
            unsigned int w;
            pack(x, 4, &w);
            __stcg(reinterpret_cast<unsigned int *>(p), w);
        } else {
            unsigned short w;
            pack(x, 2, &w);
            __stcg(reinterpret_cast<unsigned short *>(p), w);
        }
    }

  private:
    static __device__ __forceinline__ void unpack(const void *w, int bytes, float *x)
    {
        if constexpr (HALF) {
            const __half *h = reinterpret_cast<const __half *>(w);
            for (int j = 0; j < bytes / 2; j++)
                x[j] = __half2float(h[j]);
        } else {
            const float *f = reinterpret_cast<const float *>(w);
            for (int j = 0; j < bytes / 4; j++)
                x[j] = f[j];
        }
    }
    static __device__ __forceinline__ void pack(const float *x, int bytes, void *w)
    {
        if constexpr (HALF) {
            __half *h = reinterpret_cast<__half *>(w);
            for (int j = 0; j < bytes / 2; j++)
                h[j] = __float2half_rn(x[j]);
        } else {
            float *f = reinterpret_cast<float *>(w);
            for (int j = 0; j < bytes / 4; j++)
                f[j] = x[j];
        }
    }
};

/* The sum over the warp, in every lane (a fixed butterfly: the same order every time). */
__device__ __forceinline__ float warp_sum(float x)
{
    for (int m = 16; m > 0; m >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, m);
    return x;
}

struct epoch_args {
    const int64_t *chunk_begin;  /* nchunks + 1 */
    const mf_sgd_entry *entries; /* nnz */
    const int32_t *user;         /* nnz */
    void *U, *V;                 /* users x kp, items x kp */
    int64_t nchunks;
    unsigned long long *next; /* the next chunk slot to take; zero at launch */
    double *sq_err;           /* += the squared errors of the epoch */
    mf_sgd_perm perm;
    float lr, lambda_u, lambda_v;
    int kp;
    /* Biased model (sgd_internal.h): float biases, NULL without. The plan's ratings hold
     * r - mean. */
    float *bu, *bi;
    float lambda_bias;
};

/* Biases sit one per 32-byte sector (MF_SGD_BIAS_STRIDE floats apart): packed, the 32 items
 * of a 128-byte line shared it, and the writes of every warp to the popular items' biases
 * queued on a few L2 lines (measured: k = 128 fp16, 4.48 G updates/s without biases, 2.59
 * with packed ones). */
#define MF_SGD_BIAS_STRIDE 8

/* A bias through L2 (other multiprocessors update it), as the factor rows are. */
__device__ __forceinline__ float load_bias(const float *b, int64_t i)
{
    return __ldcg(b + i * MF_SGD_BIAS_STRIDE);
}

__device__ __forceinline__ void store_bias(float *b, int64_t i, float x)
{
    __stcg(b + i * MF_SGD_BIAS_STRIDE, x);
}

/* One epoch: a persistent grid of warps, each taking chunk slots in turn from a global
 * counter (so long chunks never leave a multiprocessor idle) and visiting chunk
 * perm(slot). RESIDENT (MF_SGD_ORDER_USER_CHUNKS): a chunk is one user's ratings, and the
 * user's row stays in registers (float) through it and is stored once at its end, a plain
 * Hogwild write. (Adding the chunk's change atomically instead was measured and
 * rejected: two chunks of one user in flight at once then both apply a full step from
 * the same start, and on MovieLens 100K that diverged at the default rate.) Otherwise
 * each update loads and stores both rows. The next item's row is fetched while the
 * current update computes. */
template <int KPL, bool HALF, bool RESIDENT>
__global__ void __launch_bounds__(256) epoch_kernel(epoch_args a)
{
    using io = row_io<KPL, HALF>;
    using elem = typename io::elem;
    elem *U = static_cast<elem *>(a.U), *V = static_cast<elem *>(a.V);
    const int lane = threadIdx.x & 31;
    double sq = 0.0;
    for (;;) {
        unsigned long long slot = 0;
        if (lane == 0)
            slot = atomicAdd(a.next, 1ull);
        slot = __shfl_sync(0xffffffffu, slot, 0);
        if (slot >= (unsigned long long)a.nchunks)
            break;
        const int64_t c = (int64_t)mf_sgd_perm_apply(&a.perm, slot);
        const int64_t b = a.chunk_begin[c];
        const int n = (int)(a.chunk_begin[c + 1] - b); /* 1..MF_SGD_CHUNK */
        mf_sgd_entry e0 = {0, 0.0f}, e1 = {0, 0.0f};
        int32_t u0 = 0, u1 = 0;
        if (lane < n)
            e0 = a.entries[b + lane];
        if (lane + 32 < n)
            e1 = a.entries[b + 32 + lane];
        if (!RESIDENT) {
            if (lane < n)
                u0 = a.user[b + lane];
            if (lane + 32 < n)
                u1 = a.user[b + 32 + lane];
        }
        float u[KPL], v[KPL], v_next[KPL];
        int32_t user = RESIDENT ? a.user[b] : 0;
        const bool biased = a.bu != nullptr; /* uniform: one branch for the whole warp */
        float bu = 0.0f, bi = 0.0f, bi_next = 0.0f;
        if (RESIDENT) {
            io::load(U + (int64_t)user * a.kp, lane, u);
            if (biased)
                bu = load_bias(a.bu, user);
        }
        const int32_t first = __shfl_sync(0xffffffffu, e0.item, 0);
        io::load(V + (int64_t)first * a.kp, lane, v);
        if (biased)
            bi = load_bias(a.bi, first);
        float chunk_sq = 0.0f;
        for (int q = 0; q < n; q++) {
            const int src = q & 31;
            const float r = __shfl_sync(0xffffffffu, q < 32 ? e0.rating : e1.rating, src);
            const int32_t cur = __shfl_sync(0xffffffffu, q < 32 ? e0.item : e1.item, src);
            int32_t next = -1;
            if (q + 1 < n) {
                next = __shfl_sync(0xffffffffu, q + 1 < 32 ? e0.item : e1.item, (q + 1) & 31);
                io::load(V + (int64_t)next * a.kp, lane, v_next);
                if (biased)
                    bi_next = load_bias(a.bi, next);
            }
            if (!RESIDENT) {
                user = __shfl_sync(0xffffffffu, q < 32 ? u0 : u1, src);
                io::load(U + (int64_t)user * a.kp, lane, u);
                if (biased)
                    bu = load_bias(a.bu, user);
            }
            float part = 0.0f;
            for (int j = 0; j < KPL; j++)
                part = fmaf(u[j], v[j], part);
            float err = r - warp_sum(part);
            if (biased) {
                err -= bu + bi;
                bu += a.lr * (err - a.lambda_bias * bu);
                bi += a.lr * (err - a.lambda_bias * bi);
                if (lane == 0) {
                    store_bias(a.bi, cur, bi);
                    if (!RESIDENT)
                        store_bias(a.bu, user, bu);
                }
            }
            for (int j = 0; j < KPL; j++) {
                const float uj = u[j], vj = v[j];
                u[j] = uj + a.lr * (err * vj - a.lambda_u * uj);
                v[j] = vj + a.lr * (err * uj - a.lambda_v * vj);
            }
            io::store(V + (int64_t)cur * a.kp, lane, v);
            if (!RESIDENT)
                io::store(U + (int64_t)user * a.kp, lane, u);
            chunk_sq = fmaf(err, err, chunk_sq);
            /* Shuffled ratings can visit one item twice in a row: then the prefetched row
             * (and bias) is older than the one just stored. */
            if (next != cur) {
                for (int j = 0; j < KPL; j++)
                    v[j] = v_next[j];
                bi = bi_next;
            }
        }
        if (RESIDENT) {
            io::store(U + (int64_t)user * a.kp, lane, u);
            if (biased && lane == 0)
                store_bias(a.bu, user, bu);
        }
        sq += chunk_sq;
    }
    if (lane == 0 && sq != 0.0)
        atomicAdd(a.sq_err, sq);
}

struct rmse_args {
    const int64_t *ptr; /* CSR of the ratings */
    const int32_t *col;
    const float *val; /* NULL: a pattern's ones */
    const void *U, *V;
    int32_t rows;
    int kp;
    double *sum; /* += the squared residuals */
    float mean;
    const float *bu, *bi; /* NULL: no biases */
};

/* The RMSE of fp16 working factors (fp32 ones go through SDDMM: sgd.cu's engine_rmse says
 * why this one stays). A warp per row of the ratings, the row's factor in registers. */
template <int KPL> __global__ void __launch_bounds__(256) rmse_half_kernel(rmse_args a)
{
    using io = row_io<KPL, true>;
    using elem = typename io::elem;
    const elem *U = static_cast<const elem *>(a.U), *V = static_cast<const elem *>(a.V);
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    double sum = 0.0;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < a.rows;
         r += warps) {
        const int64_t b = a.ptr[r], e = a.ptr[r + 1];
        if (b == e)
            continue;
        float u[KPL], v[KPL];
        io::load(U + r * a.kp, lane, u);
        const float base = a.bu ? a.mean + a.bu[r * MF_SGD_BIAS_STRIDE] : 0.0f;
        for (int64_t p = b; p < e; p++) {
            io::load(V + (int64_t)a.col[p] * a.kp, lane, v);
            float part = 0.0f;
            for (int j = 0; j < KPL; j++)
                part = fmaf(u[j], v[j], part);
            float pred = warp_sum(part);
            if (a.bu)
                pred += base + a.bi[(int64_t)a.col[p] * MF_SGD_BIAS_STRIDE];
            const double d = (double)(a.val ? a.val[p] : 1.0f) - (double)pred;
            sum += d * d;
        }
    }
    if (lane == 0 && sum != 0.0)
        atomicAdd(a.sum, sum);
}

/* dst (rows x kp storage, zero past k) from src (rows x k floats). */
template <bool HALF>
__global__ void pack_kernel(const float *src, void *dst, int64_t rows, int k, int kp)
{
    using elem = typename std::conditional<HALF, __half, float>::type;
    elem *d = static_cast<elem *>(dst);
    const int64_t n = rows * kp;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / kp;
        const int t = (int)(i - r * kp);
        const float x = t < k ? src[r * k + t] : 0.0f;
        if constexpr (HALF)
            d[i] = __float2half_rn(x);
        else
            d[i] = x;
    }
}

/* dst (rows x k floats) from src (rows x kp storage). */
template <bool HALF>
__global__ void unpack_kernel(const void *src, float *dst, int64_t rows, int k, int kp)
{
    using elem = typename std::conditional<HALF, __half, float>::type;
    const elem *s = static_cast<const elem *>(src);
    const int64_t n = rows * k;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / k;
        const int t = (int)(i - r * k);
        if constexpr (HALF)
            dst[i] = __half2float(s[r * kp + t]);
        else
            dst[i] = s[r * kp + t];
    }
}

} // namespace sgd

#endif
