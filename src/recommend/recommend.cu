/* The CUDA engine of recommendations: scores and selection fused in one kernel, so that the
 * users x items scores never reach device memory (for a million users and 100,000 items
 * they would be 400 GB). A block takes 64 query rows and walks all items in tiles of 128:
 * the tile's scores come from a register-tiled product (each thread 8 rows x 4 columns),
 * the excluded items of each row are marked from its sorted CSR row with a cursor that
 * only moves forward, scores that beat the row's current N-th best go to a candidate
 * buffer, and a warp per row merges the candidates into the row's top-N list by repeated
 * selection. Rows keep their lists in shared memory to the end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "recommend/recommend_internal.h"

namespace
{

#define REC_ROWS 128
#define REC_COLS 128
#define REC_KC   16
#define REC_PAD  4
/* Largest N the fused kernel keeps (each lane holds N / 32 of a merge's results). */
#define REC_MAX_N 128

struct rec_args {
    int kind;
    int64_t n;
    const int32_t *ids;
    const float *Q; /* the query rows' factors: U (users) or V (similar items) */
    int64_t ldq;
    int32_t q_rows; /* rows of Q: ids at or past it are unseen (zero factors) */
    const float *V;
    int64_t ldv;
    int32_t items;
    int k;
    float mean;
    const float *user_bias, *item_bias;
    const float *inv_norm; /* similar items: 1 / |V_i| (0 for a zero row) */
    const int64_t *ex_ptr; /* exclusions: CSR of users x items, or NULL */
    const int32_t *ex_col;
    int32_t ex_rows;
    int N;
    int32_t *out_items;
    float *out_scores;
};

struct rec_smem {
    float qs[REC_KC][REC_ROWS + REC_PAD]; /* the query rows' chunk, transposed */
    float vs[REC_KC][REC_COLS + REC_PAD]; /* the items' chunk, transposed */
    float sc[REC_ROWS][REC_COLS + REC_PAD];
    float thr_s[REC_ROWS];
    int32_t thr_i[REC_ROWS];
    uint32_t excl[REC_ROWS][REC_COLS / 32];
    int64_t cursor[REC_ROWS], cursor_end[REC_ROWS];
    int32_t id[REC_ROWS];
    float base[REC_ROWS], rscale[REC_ROWS];
    /* then the lists: float list_s[REC_ROWS][N], int32_t list_i[REC_ROWS][N] */
};

__device__ __forceinline__ bool before(float sa, int32_t ia, float sb, int32_t ib)
{
    return mf_rec_before(sa, ia, sb, ib) != 0;
}

/* Row r's list (N entries in ls, li) merged with this tile's candidates (cs, ci: 4 per lane,
 * those with `take` set) into the N best, by one warp: N rounds of selecting the best that
 * is left across the warp. */
template <int PER_LANE>
__device__ void merge_row(rec_smem &S, float *ls, int32_t *li, int r, int N, int lane,
                          const float cs[4], const int32_t ci[4], bool take[4])
{
    float res_s[PER_LANE];
    int32_t res_i[PER_LANE];
    for (int t = 0; t < N; t++) {
        float bs = -INFINITY;
        int32_t bi = INT_MAX;
        int bp = -1; /* 0..N-1: a list place; N + j: this lane's candidate j */
        for (int q = lane; q < N; q += 32)
            if (!isnan(ls[q]) && (bp < 0 || before(ls[q], li[q], bs, bi)))
                bs = ls[q], bi = li[q], bp = q;
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (take[j] && (bp < 0 || before(cs[j], ci[j], bs, bi)))
                bs = cs[j], bi = ci[j], bp = N + j;
        int bl = bp >= 0 ? lane : -1; /* the lane that holds the best */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float os = __shfl_xor_sync(0xffffffffu, bs, o);
            const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            const int op = __shfl_xor_sync(0xffffffffu, bp, o);
            const int ol = __shfl_xor_sync(0xffffffffu, bl, o);
            if (ol >= 0 && (bl < 0 || before(os, oi, bs, bi)))
                bs = os, bi = oi, bp = op, bl = ol;
        }
        if (bl == lane) { /* taken: out of the pool */
            if (bp < N)
                ls[bp] = NAN;
            else
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (bp == N + j)
                        take[j] = false;
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < PER_LANE; j++)
            if (t == lane + 32 * j)
                res_s[j] = bl >= 0 ? bs : -INFINITY, res_i[j] = bl >= 0 ? bi : -1;
    }
#pragma unroll
    for (int j = 0; j < PER_LANE; j++)
        if (lane + 32 * j < N)
            ls[lane + 32 * j] = res_s[j], li[lane + 32 * j] = res_i[j];
    __syncwarp();
    if (lane == 0) {
        S.thr_s[r] = ls[N - 1];
        S.thr_i[r] = li[N - 1];
    }
    __syncwarp();
}

/* 256 threads as 16 x 16; thread (tx, ty) computes rows ty * 4 + {0..3} and 64 + the same,
 * columns tx * 4 + {0..3} and 64 + the same: 64 FMAs per k for 4 float4 loads. */
template <int PER_LANE> __global__ void __launch_bounds__(256, 2) topn_kernel(rec_args a)
{
    extern __shared__ float4 rec_raw[];
    rec_smem &S = *reinterpret_cast<rec_smem *>(rec_raw);
    float *list_s = reinterpret_cast<float *>(reinterpret_cast<char *>(rec_raw) + sizeof(rec_smem));
    int32_t *list_i = reinterpret_cast<int32_t *>(list_s + REC_ROWS * a.N);
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16, lane = tid % 32, warp = tid / 32;
    const int64_t row0 = (int64_t)blockIdx.x * REC_ROWS;

    for (int e = tid; e < REC_ROWS * a.N; e += 256)
        list_s[e] = -INFINITY, list_i[e] = -1;
    if (tid < REC_ROWS) {
        const int r = tid;
        const int64_t b = row0 + r;
        const int32_t id = b < a.n ? a.ids[b] : -1;
        S.id[r] = id;
        S.thr_s[r] = -INFINITY, S.thr_i[r] = -1;
        const bool seen = id >= 0 && id < a.q_rows;
        if (a.kind == MF_REC_SIMILAR) {
            S.base[r] = 0.0f;
            S.rscale[r] = seen ? a.inv_norm[id] : 0.0f;
        } else {
            S.base[r] = a.mean + (seen && a.user_bias ? a.user_bias[id] : 0.0f);
            S.rscale[r] = 1.0f;
        }
        S.cursor[r] = S.cursor_end[r] = 0;
        if (a.ex_ptr && id >= 0 && id < a.ex_rows)
            S.cursor[r] = a.ex_ptr[id], S.cursor_end[r] = a.ex_ptr[id + 1];
    }
    __syncthreads();

    for (int64_t i0 = 0; i0 < a.items; i0 += REC_COLS) {
        float acc[8][8];
#pragma unroll
        for (int r = 0; r < 8; r++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[r][j] = 0.0f;
        for (int k0 = 0; k0 < a.k; k0 += REC_KC) {
            for (int e = tid; e < REC_ROWS * REC_KC; e += 256) {
                const int r = e / REC_KC, c = e % REC_KC;
                const int32_t id = S.id[r];
                S.qs[c][r] = id >= 0 && id < a.q_rows && k0 + c < a.k
                                 ? a.Q[(int64_t)id * a.ldq + k0 + c]
                                 : 0.0f;
                const int32_t item = (int32_t)min(i0 + r, (int64_t)INT32_MAX);
                S.vs[c][r] =
                    item < a.items && k0 + c < a.k ? a.V[(int64_t)item * a.ldv + k0 + c] : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int c = 0; c < REC_KC; c++) {
                float q[8], v[8];
                *reinterpret_cast<float4 *>(q) =
                    *reinterpret_cast<const float4 *>(&S.qs[c][ty * 4]);
                *reinterpret_cast<float4 *>(q + 4) =
                    *reinterpret_cast<const float4 *>(&S.qs[c][64 + ty * 4]);
                *reinterpret_cast<float4 *>(v) =
                    *reinterpret_cast<const float4 *>(&S.vs[c][tx * 4]);
                *reinterpret_cast<float4 *>(v + 4) =
                    *reinterpret_cast<const float4 *>(&S.vs[c][64 + tx * 4]);
#pragma unroll
                for (int r = 0; r < 8; r++)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[r][j] = fmaf(q[r], v[j], acc[r][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int r = 0; r < 8; r++) {
            const int row = (r < 4 ? 0 : 64) + ty * 4 + (r & 3);
            *reinterpret_cast<float4 *>(&S.sc[row][tx * 4]) =
                make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
            *reinterpret_cast<float4 *>(&S.sc[row][64 + tx * 4]) =
                make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
        }
        if (tid < REC_ROWS) { /* this tile's exclusions of row tid */
            const int r = tid;
#pragma unroll
            for (int w = 0; w < REC_COLS / 32; w++)
                S.excl[r][w] = 0u;
            int64_t c = S.cursor[r];
            while (c < S.cursor_end[r] && a.ex_col[c] < i0 + REC_COLS) {
                const int32_t off = (int32_t)(a.ex_col[c] - i0);
                if (off >= 0)
                    S.excl[r][off / 32] |= 1u << (off % 32);
                c++;
            }
            S.cursor[r] = c;
        }
        __syncthreads();
        /* Warp w takes rows w * 16 .. + 15; lane l the columns 4 l .. 4 l + 3. */
        for (int r = warp * (REC_ROWS / 8); r < (warp + 1) * (REC_ROWS / 8); r++) {
            const int32_t id = S.id[r];
            if (id < 0)
                continue;
            const float4 s4 = *reinterpret_cast<const float4 *>(&S.sc[r][lane * 4]);
            const float raw[4] = {s4.x, s4.y, s4.z, s4.w};
            const uint32_t ex = S.excl[r][lane / 8] >> (4 * (lane % 8));
            float cs[4];
            int32_t ci[4];
            bool take[4];
            bool any = false;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int32_t item = (int32_t)min(i0 + lane * 4 + j, (int64_t)INT32_MAX);
                ci[j] = item;
                float sv;
                if (a.kind == MF_REC_SIMILAR)
                    sv = item < a.items ? raw[j] * S.rscale[r] * a.inv_norm[item] : 0.0f;
                else
                    sv = (S.base[r] + (a.item_bias && item < a.items ? a.item_bias[item] : 0.0f)) +
                         raw[j];
                cs[j] = sv;
                take[j] = item < a.items && !(ex >> j & 1u) &&
                          !(a.kind == MF_REC_SIMILAR && item == id) &&
                          before(sv, item, S.thr_s[r], S.thr_i[r]);
                any |= take[j];
            }
            if (__ballot_sync(0xffffffffu, any))
                merge_row<PER_LANE>(S, list_s + r * a.N, list_i + r * a.N, r, a.N, lane, cs, ci,
                                    take);
        }
        __syncthreads();
    }
    for (int e = tid; e < REC_ROWS * a.N; e += 256) {
        const int r = e / a.N;
        const int64_t b = row0 + r;
        if (b < a.n) {
            a.out_items[b * a.N + e % a.N] = list_i[e];
            a.out_scores[b * a.N + e % a.N] = list_s[e];
        }
    }
}

/* 1 / |V_i| for every item (0 for a zero row). */
__global__ void inv_norms(const float *V, int64_t ldv, int k, int32_t items, float *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < items;
         i += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int c = 0; c < k; c++)
            s = fmaf(V[i * ldv + c], V[i * ldv + c], s);
        out[i] = s > 0.0f ? 1.0f / sqrtf(s) : 0.0f;
    }
}

size_t smem_bytes(int N)
{
    return sizeof(rec_smem) + (size_t)REC_ROWS * N * (sizeof(float) + sizeof(int32_t));
}

template <int PER_LANE> mf_status launch(mf_ctx *ctx, const rec_args &a)
{
    mf_cuda *c = mf_cuda_of(ctx);
    const size_t smem = smem_bytes(a.N);
    MF_CUDA_TRY(ctx, cudaFuncSetAttribute(topn_kernel<PER_LANE>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int64_t blocks = (a.n + REC_ROWS - 1) / REC_ROWS;
    for (int64_t b0 = 0; b0 < blocks; b0 += 65535) { /* grid.x of one launch */
        rec_args part = a;
        part.ids = a.ids + b0 * REC_ROWS;
        part.out_items = a.out_items + b0 * REC_ROWS * a.N;
        part.out_scores = a.out_scores + b0 * REC_ROWS * a.N;
        part.n = a.n - b0 * REC_ROWS;
        const int64_t nb = blocks - b0 < 65535 ? blocks - b0 : 65535;
        topn_kernel<PER_LANE><<<(unsigned)nb, 256, smem, c->stream>>>(part);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "recommend topn_kernel"));
    }
    return MF_OK;
}

/* Host inputs go up, host outputs come down; device ones are used in place. */
struct staging {
    mf_dbuf buf[7];
};

mf_status up(mf_ctx *ctx, mf_dbuf *b, const void **p, size_t bytes, mf_memory where,
             const char *what)
{
    if (where == MF_MEMORY_DEVICE || !*p)
        return MF_OK;
    MF_TRY(mf_upload(ctx, b, *p, bytes, what));
    *p = b->ptr;
    return MF_OK;
}

mf_status run(mf_ctx *ctx, const mf_rec_call *call, staging *st)
{
    mf_cuda *c = mf_cuda_of(ctx);
    const mf_model &m = call->model;
    rec_args a = {};
    a.kind = call->kind;
    a.n = call->n;
    a.k = m.k;
    a.items = m.items;
    a.N = call->N;
    a.mean = call->kind == MF_REC_USERS ? m.mean : 0.0f;
    const void *U = m.U, *V = m.V, *ub = m.user_bias, *ib = m.item_bias, *ids = call->ids;
    MF_TRY(
        up(ctx, &st->buf[0], &V, mf_matrix_bytes(m.items, m.k, m.ldv), m.where, "the model's V"));
    if (call->kind == MF_REC_USERS) {
        MF_TRY(up(ctx, &st->buf[1], &U, mf_matrix_bytes(m.users, m.k, m.ldu), m.where,
                  "the model's U"));
        MF_TRY(up(ctx, &st->buf[2], &ub, (size_t)m.users * sizeof(float), m.where, "user biases"));
        MF_TRY(up(ctx, &st->buf[3], &ib, (size_t)m.items * sizeof(float), m.where, "item biases"));
        a.Q = (const float *)U, a.ldq = m.ldu, a.q_rows = m.users;
        a.user_bias = (const float *)ub, a.item_bias = (const float *)ib;
        if (call->exclude) {
            const float *unused;
            MF_TRY(mf_sparse_device_csr(call->exclude, &a.ex_ptr, &a.ex_col, &unused));
            a.ex_rows = call->exclude->rows;
        }
    } else {
        a.Q = (const float *)V, a.ldq = m.ldv, a.q_rows = m.items;
        MF_TRY(
            mf_dmem_alloc(ctx, &st->buf[4], (size_t)m.items * sizeof(float), "inverse item norms"));
        inv_norms<<<mf_cuda_grid(c, m.items, 256, 4), 256, 0, c->stream>>>(
            (const float *)V, m.ldv, m.k, m.items, (float *)st->buf[4].ptr);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "recommend inv_norms"));
        a.inv_norm = (const float *)st->buf[4].ptr;
    }
    a.V = (const float *)V, a.ldv = m.ldv;
    MF_TRY(up(ctx, &st->buf[5], &ids, (size_t)call->n * sizeof(int32_t), call->where,
              "the query ids"));
    a.ids = (const int32_t *)ids;
    const size_t out_n = (size_t)call->n * call->N;
    a.out_items = call->out_items, a.out_scores = call->out_scores;
    if (call->where == MF_MEMORY_HOST) { /* both outputs in one device buffer */
        MF_TRY(mf_dmem_alloc(ctx, &st->buf[6], out_n * (sizeof(int32_t) + sizeof(float)),
                             "the top-N lists"));
        a.out_items = (int32_t *)st->buf[6].ptr;
        a.out_scores = (float *)(a.out_items + out_n);
    }
    mf_status s;
    if (a.N <= 32)
        s = launch<1>(ctx, a);
    else if (a.N <= 64)
        s = launch<2>(ctx, a);
    else
        s = launch<4>(ctx, a);
    MF_TRY(s);
    if (call->where == MF_MEMORY_HOST) {
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(call->out_items, a.out_items, out_n * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost, c->stream));
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(call->out_scores, a.out_scores, out_n * sizeof(float),
                                         cudaMemcpyDeviceToHost, c->stream));
    }
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    return MF_OK;
}

} // namespace

extern "C" mf_status mf_cuda_recommend(mf_ctx *ctx, const mf_rec_call *call)
{
    /* Lists past the fused kernel's N, or past this device's shared memory per block (sm_86
     * and sm_89 have 99 KB, the A100 163 KB): the CPU engine. */
    if (call->N > REC_MAX_N || smem_bytes(call->N) > mf_cuda_of(ctx)->prop.sharedMemPerBlockOptin)
        return mf_recommend_cpu_staged(ctx, call);
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    staging st = {};
    mf_status s = run(ctx, call, &st);
    for (mf_dbuf &b : st.buf)
        mf_dmem_free(ctx, &b);
    return s;
}
