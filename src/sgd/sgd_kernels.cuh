/* Kernels of the CUDA engine of Hogwild SGD (sgd_engine.cuh). CUDA C++ only. The kernels
 * that are no templates are static here and in the headers this one includes: several
 * translation units of the engine include them, and each launches its own copy.
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
#include "sgd/sgd_local_bias.cuh"
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
            if (bytes >= 4) { /* pairs: one conversion instruction each */
                __half2 *h2 = reinterpret_cast<__half2 *>(w);
                for (int j = 0; j < bytes / 4; j++)
                    h2[j] = __floats2half2_rn(x[2 * j], x[2 * j + 1]);
            } else {
                *reinterpret_cast<__half *>(w) = __float2half_rn(x[0]);
            }
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
    /* Chunk c is entries [chunk_begin[c], chunk_end[c]): chunk_end is chunk_begin + 1 but
     * where the rows with a bias slot are split from the rest (sgd_local_bias.cuh). Never
     * empty. */
    const int64_t *chunk_begin, *chunk_end;
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
    local_bias_args local; /* LOCAL kernels: the item biases in shared memory */
    int64_t groups;        /* epoch_group_kernel: the groups that take part (the worker count) */
};

/* Biases sit one per 32-byte sector (MF_SGD_BIAS_STRIDE floats apart): packed, the 32 items
 * of a 128-byte line shared it, and the writes of every warp to the popular items' biases
 * queued on a few L2 lines (measured: k = 128 fp16, 4.48 G updates/s without biases, 2.59
 * with packed ones). One per 128-byte line was 1-6% faster again on the bench's three
 * shapes, within the spread between runs, for four times the memory: not taken. */
#define MF_SGD_BIAS_STRIDE 8

/* A bias through L2 (other multiprocessors update it), as the factor rows are. */
__device__ __forceinline__ float load_bias(const float *b, int64_t i)
{
    return __ldcg(b + i * MF_SGD_BIAS_STRIDE);
}

/* Lanes 0 and 1 of the update write bias i's whole sector (the bias, then zeros). A 4-byte
 * store is a partial-sector write, which L2 merges into the sector it holds: with one, the
 * biases cost k = 128 fp16 29% of its updates per second; with whole sectors, 15%. */
__device__ __forceinline__ void store_bias(float *b, int64_t i, float x, int lane)
{
    if (lane < 2)
        __stcg(reinterpret_cast<float4 *>(b + i * MF_SGD_BIAS_STRIDE) + lane,
               make_float4(lane == 0 ? x : 0.0f, 0.0f, 0.0f, 0.0f));
}

/* An update's item bias, and its new value from the update's lanes (lane 0 writes a local
 * one, at slot = row, and every other lane exchanges into the sink; lanes 0 and 1 write a
 * global one's sector). */
template <int LOCAL>
__device__ __forceinline__ float item_bias(const epoch_args &a, const local_bias &lb, int32_t item)
{
    if (LOCAL == LOCAL_NONE)
        return load_bias(a.bi, item);
    return lb.load((uint32_t)item);
}
template <int LOCAL>
__device__ __forceinline__ void put_item_bias(const epoch_args &a, const local_bias &lb,
                                              int32_t item, float x, int lane)
{
    if (LOCAL == LOCAL_NONE)
        store_bias(a.bi, item, x, lane);
    else
        lb.store_if(lane == 0, (uint32_t)item, x);
}

/* The threads of a local-bias kernel's block, one block a multiprocessor (its shared memory
 * holds the item biases): as many warps as the plain kernel's registers leave room for, or
 * the most a block may have (at most 64 registers a thread, which rows of 16 elements a lane
 * would spill). sgd_launch.cu shapes the grid with the same numbers. */
__host__ __device__ constexpr int local_block_threads(int lanes, int kpl)
{
    return lanes < 32 ? 768 : kpl >= 16 ? 512 : 1024;
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
template <int KPL, bool HALF, bool RESIDENT, int LOCAL = LOCAL_NONE>
__global__ void __launch_bounds__(LOCAL ? local_block_threads(32, KPL) : 256)
    epoch_kernel(epoch_args a)
{
    static_assert(!LOCAL || RESIDENT, "block-local item biases under the user-chunk order");
    using io = row_io<KPL, HALF>;
    using elem = typename io::elem;
    elem *U = static_cast<elem *>(a.U), *V = static_cast<elem *>(a.V);
    const int lane = threadIdx.x & 31;
    double sq = 0.0;
    local_bias lb;
    if (LOCAL)
        lb.begin(a.local, a.bi, MF_SGD_BIAS_STRIDE);
    /* A local kernel's blocks are whole multiprocessors: the last one's surplus warps idle. */
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    while (!LOCAL || warp < a.groups) {
        unsigned long long slot = 0;
        if (lane == 0)
            slot = atomicAdd(a.next, 1ull);
        slot = __shfl_sync(0xffffffffu, slot, 0);
        if (slot >= (unsigned long long)a.nchunks)
            break;
        const int64_t c = (int64_t)mf_sgd_perm_apply(&a.perm, slot);
        const int64_t b = a.chunk_begin[c];
        const int n = (int)(a.chunk_end[c] - b); /* 1..MF_SGD_CHUNK */
        mf_sgd_entry e0 = {0, 0.0f}, e1 = {0, 0.0f};
        int32_t u0 = 0, u1 = 0;
        if (lane < n)
            e0 = a.entries[b + lane];
        if (lane + 32 < n)
            e1 = a.entries[b + 32 + lane];
        if (!RESIDENT) { /* the entries' users */
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
            bi = item_bias<LOCAL>(a, lb, first);
        float chunk_sq = 0.0f;
        for (int q = 0; q < n; q++) {
            const int src = q & 31;
            const float r = __shfl_sync(0xffffffffu, q < 32 ? e0.rating : e1.rating, src);
            const int32_t cur = __shfl_sync(0xffffffffu, q < 32 ? e0.item : e1.item, src);
            int32_t next = -1;
            if (q + 1 < n) {
                const int nsrc = (q + 1) & 31;
                next = __shfl_sync(0xffffffffu, q + 1 < 32 ? e0.item : e1.item, nsrc);
                io::load(V + (int64_t)next * a.kp, lane, v_next);
                if (biased)
                    bi_next = item_bias<LOCAL>(a, lb, next);
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
            /* r - (bu + bi) is ready before the dot product: the biases add no step to
             * the chain from the dot product through the error to the next update's rows. */
            const float err = (biased ? r - (bu + bi) : r) - warp_sum(part);
            if (biased) {
                bu += a.lr * (err - a.lambda_bias * bu);
                bi += a.lr * (err - a.lambda_bias * bi);
                put_item_bias<LOCAL>(a, lb, cur, bi, lane);
                if (!RESIDENT)
                    store_bias(a.bu, user, bu, lane);
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
            if (biased)
                store_bias(a.bu, user, bu, lane);
        }
        sq += chunk_sq;
    }
    if (LOCAL)
        lb.end(a.local);
    if (lane == 0 && sq != 0.0)
        atomicAdd(a.sq_err, sq);
}

/* An entry through the read-only path: the plan does not change during an epoch. */
__device__ __forceinline__ mf_sgd_entry load_entry(const mf_sgd_entry *p)
{
    const uint2 w = __ldg(reinterpret_cast<const uint2 *>(p));
    return {(int32_t)w.x, __uint_as_float(w.y)};
}

/* The user-chunk epoch with a group of G < 32 lanes per update (each lane holding 16 bytes
 * of a row, KPL elements): a warp runs 32 / G chunks side by side, so each instruction
 * serves 32 / G updates and a dot product takes log2(G) shuffles. The warp walks one loop
 * in which every group makes one update of its own chunk; a group whose chunk has ended
 * stores its user row and starts its next chunk inside that iteration, so the groups of a
 * warp stay converged on the update path. Each group follows epoch_kernel's rules: the
 * user row resident through the chunk, the next item's row (and bias) fetched while the
 * current update computes. A group claims its next chunk's slot when it starts a chunk,
 * and the two iterations after that bring the claimed chunk's entries into L1 and its
 * user's row into L2, so that starting a chunk waits on no chain of loads. Group g of the
 * grid takes part while g < a.groups (the worker count). */
template <int G, int KPL, bool HALF, bool BIASED, int LOCAL = LOCAL_NONE>
__global__ void __launch_bounds__(LOCAL ? local_block_threads(G, KPL) : 256, LOCAL ? 1 : 3)
    epoch_group_kernel(epoch_args a)
{
    static_assert(G == 4 || G == 8 || G == 16, "a group is a power of two below a warp");
    static_assert(!LOCAL || BIASED, "block-local item biases need biases");
    using io = row_io<KPL, HALF>;
    using elem = typename io::elem;
    elem *U = static_cast<elem *>(a.U), *V = static_cast<elem *>(a.V);
    constexpr int KP = G * KPL; /* the row length: a.kp */
    const int lane = threadIdx.x & 31, gl = lane & (G - 1);
    const unsigned gmask = ((1u << G) - 1u) << (lane & ~(G - 1));
    const int64_t group = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    /* x + lr (g - lambda x) as (1 - lr lambda) x + lr g: two operations an element. */
    const float keep_u = 1.0f - a.lr * a.lambda_u, keep_v = 1.0f - a.lr * a.lambda_v;
    const float keep_b = 1.0f - a.lr * a.lambda_bias;

    float u[KPL], v[KPL], v_next[KPL];
    float bu = 0.0f, bi = 0.0f, bi_next = 0.0f, chunk_sq = 0.0f;
    double sq = 0.0;
    int64_t p = 0, end = 0; /* the current update and the chunk's end */
    int32_t user = 0, cur = 0, nxt = 0;
    float r_cur = 0.0f, r_nxt = 0.0f;
    /* The claimed chunk: [p_ahead, end_ahead) of user_ahead; stage 1 and 2 are the
     * iterations that prefetch its entries and its user's row; none once the slots ran out. */
    int64_t p_ahead = 0, end_ahead = 0;
    int32_t user_ahead = 0;
    int stage = 0;
    bool ahead = false;
    local_bias lb;
    if (LOCAL)
        lb.begin(a.local, a.bi, MF_SGD_BIAS_STRIDE);

    auto claim = [&]() {
        unsigned long long slot = 0;
        if (gl == 0)
            slot = atomicAdd(a.next, 1ull);
        slot = __shfl_sync(gmask, slot, 0, G);
        ahead = slot < (unsigned long long)a.nchunks;
        if (ahead) {
            const int64_t c = (int64_t)mf_sgd_perm_apply(&a.perm, slot);
            p_ahead = a.chunk_begin[c];
            end_ahead = a.chunk_end[c];
            stage = 1;
        }
    };
    /* Start the claimed chunk: its first update's row, rating and bias in place. */
    auto start = [&]() -> bool {
        if (!ahead)
            return false;
        p = p_ahead, end = end_ahead;
        user = stage == 1 ? a.user[p] : user_ahead; /* stage 1: not loaded yet */
        const mf_sgd_entry e0 = load_entry(a.entries + p);
        mf_sgd_entry e1 = {0, 0.0f};
        if (p + 1 < end)
            e1 = load_entry(a.entries + p + 1);
        io::load(U + (int64_t)user * KP, gl, u);
        io::load(V + (int64_t)e0.item * KP, gl, v);
        if (BIASED) {
            bu = load_bias(a.bu, user);
            bi = item_bias<LOCAL>(a, lb, e0.item);
        }
        cur = e0.item, r_cur = e0.rating;
        nxt = e1.item, r_nxt = e1.rating;
        chunk_sq = 0.0f;
        claim();
        return true;
    };

    bool live = false;
    if (group < a.groups) {
        claim();
        live = start();
    }
    while (__any_sync(0xffffffffu, live)) {
        if (!live)
            continue;
        if (stage == 1) { /* the claimed chunk's entries (up to 5 lines) into L1 */
            if (gl * 16 < end_ahead - p_ahead + 16) {
                const int64_t at = min(p_ahead + gl * 16, end_ahead - 1);
                asm volatile("prefetch.global.L1 [%0];" ::"l"(a.entries + at));
            }
            user_ahead = __ldg(a.user + p_ahead);
            stage = 2;
        } else if (stage == 2) { /* its user's row into L2, a line a lane */
            if (gl * 128 < KP * (int)sizeof(elem))
                asm volatile("prefetch.global.L2 [%0];" ::"l"(
                    reinterpret_cast<const char *>(U + (int64_t)user_ahead * KP) + gl * 128));
            stage = 0;
        }
        const bool more = p + 1 < end;
        mf_sgd_entry e2 = {0, 0.0f};
        if (more) {
            io::load(V + (int64_t)nxt * KP, gl, v_next);
            if (BIASED)
                bi_next = item_bias<LOCAL>(a, lb, nxt);
            if (p + 2 < end)
                e2 = load_entry(a.entries + p + 2);
        }
        float part = 0.0f;
        for (int j = 0; j < KPL; j++)
            part = fmaf(u[j], v[j], part);
        for (int m = G / 2; m > 0; m >>= 1)
            part += __shfl_xor_sync(gmask, part, m, G);
        /* r - (bu + bi) off the chain from the dot product to the error (epoch_kernel) */
        const float err = (BIASED ? r_cur - (bu + bi) : r_cur) - part;
        const float step = a.lr * err;
        if (BIASED) { /* keep_b b + lr err: one operation each, with the factors' step */
            bu = fmaf(keep_b, bu, step);
            bi = fmaf(keep_b, bi, step);
            put_item_bias<LOCAL>(a, lb, cur, bi, gl);
        }
        for (int j = 0; j < KPL; j++) {
            const float uj = u[j], vj = v[j];
            u[j] = fmaf(step, vj, keep_u * uj);
            v[j] = fmaf(step, uj, keep_v * vj);
        }
        io::store(V + (int64_t)cur * KP, gl, v);
        chunk_sq = fmaf(err, err, chunk_sq);
        if (more) {
            /* One item twice in a row: the prefetched row (and bias) is older than the
             * one just stored. */
            if (nxt != cur) {
                for (int j = 0; j < KPL; j++)
                    v[j] = v_next[j];
                bi = bi_next;
            }
            p++;
            cur = nxt, r_cur = r_nxt;
            nxt = e2.item, r_nxt = e2.rating;
        } else {
            io::store(U + (int64_t)user * KP, gl, u);
            if (BIASED)
                store_bias(a.bu, user, bu, gl);
            sq += chunk_sq;
            live = start();
        }
    }
    if (LOCAL)
        lb.end(a.local);
    if (gl == 0 && sq != 0.0)
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
    const int32_t *map;   /* the engine's row of each item (renumbered rows); NULL: the item */
};

/* The RMSE of fp16 working factors (fp32 ones go through SDDMM: sgd_copy.cu's engine_rmse says
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
            const int64_t row = a.map ? a.map[a.col[p]] : a.col[p];
            io::load(V + row * a.kp, lane, v);
            float part = 0.0f;
            for (int j = 0; j < KPL; j++)
                part = fmaf(u[j], v[j], part);
            float pred = warp_sum(part);
            if (a.bu)
                pred += base + a.bi[row * MF_SGD_BIAS_STRIDE];
            const double d = (double)(a.val ? a.val[p] : 1.0f) - (double)pred;
            sum += d * d;
        }
    }
    if (lane == 0 && sum != 0.0)
        atomicAdd(a.sum, sum);
}

/* dst (rows x kp storage, zero past k) from src (rows x k floats); row r of src goes to row
 * map[r] of dst (NULL: r). */
template <bool HALF>
__global__ void pack_kernel(const float *src, void *dst, int64_t rows, int k, int kp,
                            const int32_t *map)
{
    using elem = typename std::conditional<HALF, __half, float>::type;
    elem *d = static_cast<elem *>(dst);
    const int64_t n = rows * kp;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / kp;
        const int t = (int)(i - r * kp);
        const float x = t < k ? src[r * k + t] : 0.0f;
        const int64_t at = (map ? map[r] : r) * kp + t;
        if constexpr (HALF)
            d[at] = __float2half_rn(x);
        else
            d[at] = x;
    }
}

/* dst (rows x k floats) from src (rows x kp storage); row r of dst from row map[r] of src
 * (NULL: r). */
template <bool HALF>
__global__ void unpack_kernel(const void *src, float *dst, int64_t rows, int k, int kp,
                              const int32_t *map)
{
    using elem = typename std::conditional<HALF, __half, float>::type;
    const elem *s = static_cast<const elem *>(src);
    const int64_t n = rows * k;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / k;
        const int t = (int)(i - r * k);
        const int64_t at = (map ? map[r] : r) * kp + t;
        if constexpr (HALF)
            dst[i] = __half2float(s[at]);
        else
            dst[i] = s[at];
    }
}

/* dst[i] = the bias of row map[i] (NULL: i) of the strided biases, i < n. */
static __global__ void gather_bias_kernel(const float *strided, const int32_t *map, int64_t n,
                                          float *dst)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = strided[(map ? (int64_t)map[i] : i) * MF_SGD_BIAS_STRIDE];
}

} // namespace sgd

#endif
