// bf16 and fp16 on the tensor cores by row groups (sddmm_tcg_layout.h): one warp holds the
// A rows of a group of 32 rows (two m16 fragments) in registers for a chunk of k, and walks
// the group's tiles of 8 distinct columns, gathering each tile's B rows once for all 32 rows
// (one n8 fragment) and keeping the products the masks mark stored.
//
// k runs in chunks of KC = 32 * NI values (NI 16-byte loads a lane and row), one launch a
// chunk: the first chunk writes, later ones add. A lane's 16-byte load holds 8 consecutive
// values of a row; the first four feed one m16n8k16 and the last four a second, in the same
// k slots on both operands (a sum over k does not care about its order), as mf_tc_chunk16.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_tc_kernels.cuh" // mf_mma_16bit
#include "sddmm/sddmm_tc_order.h"
#include "sddmm/sddmm_tcg_layout.h"

#define MF_TCG_THREADS 128

struct mf_sddmm_tcg_params {
    const mf_tcg_unit *units;
    const mf_tcg_tile *tiles;
    const uint32_t *ent;
    int64_t n_units;
    const uint16_t *A16, *B16;
    int64_t ld16;
    float alpha, beta;
    const float *val; // NULL: pattern
    float *out;
};

// A 16-byte copy from global to shared memory, zeros where !valid (cp.async's source size 0;
// the address is then not read).
__device__ __forceinline__ void mf_tcg_copy16(uint4 *dst, const uint16_t *src, bool valid)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void mf_tcg_commit()
{
    asm volatile("cp.async.commit_group;");
}
template <int N> __device__ __forceinline__ void mf_tcg_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// One warp a unit, all of k. The unit's tiles (64 bytes each) are copied into the warp's
// shared memory first, since reading each tile's columns and masks as the loop reached it
// left a DRAM latency per tile exposed. For each chunk of KC = 32 NI values of k, the warp
// loads the chunk of its 32 A rows into registers and walks the tiles: the B rows of a tile
// (each lane its column g's NI 16-byte pieces) travel by cp.async into the warp's ring of
// STAGES slots, STAGES - 1 tiles ahead of the MMAs (a lane reads back only the pieces it
// copied, slot layout [i][lane]: no bank conflicts and no barrier), and each stored entry's
// product goes to the unit's sums in shared memory, row by row as in `out` (the first chunk
// sets it, later ones add: the same lane each time). The unit's entries then leave in one
// pass, each row's a contiguous run of `out`: no scattered stores, and `out` is read (beta)
// and written once whatever k.
template <int NI, int STAGES> __host__ __device__ constexpr size_t mf_tcg_warp_smem()
{
    return (size_t)MF_TCG_UNIT_TILES * sizeof(mf_tcg_tile) + (size_t)STAGES * NI * 32 * 16 +
           (size_t)(MF_TCG_UNIT_NNZ + MF_TCG_ROWS * MF_TCG_TILE) * sizeof(float);
}

template <int PREC, int NI, int STAGES>
__global__ void __launch_bounds__(MF_TCG_THREADS) mf_sddmm_tcg_kernel(const mf_sddmm_tcg_params P)
{
    extern __shared__ uint4 mf_tcg_smem[];
    const int64_t u = ((int64_t)blockIdx.x * MF_TCG_THREADS + threadIdx.x) / 32;
    if (u >= P.n_units)
        return;
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    uint4 *mine = mf_tcg_smem + (threadIdx.x / 32) * (mf_tcg_warp_smem<NI, STAGES>() / 16);
    mf_tcg_tile *T = reinterpret_cast<mf_tcg_tile *>(mine);
    uint4 *ring = mine + MF_TCG_UNIT_TILES * sizeof(mf_tcg_tile) / 16;
    float *sums = reinterpret_cast<float *>(ring + STAGES * NI * 32);
    float *prod = sums + MF_TCG_UNIT_NNZ; // a tile's product, 32 rows x 8 columns
    const mf_tcg_unit &U = P.units[u];
    const int n = U.n_tiles;
    {
        const uint4 *src = reinterpret_cast<const uint4 *>(P.tiles + U.tile_begin);
        const int pieces = n * (int)(sizeof(mf_tcg_tile) / 16);
        for (int j = lane; j < pieces; j += 32)
            mf_tcg_copy16(mine + j, reinterpret_cast<const uint16_t *>(src + j), true);
        mf_tcg_commit();
    }
    // Row r's sums start at first (an exclusive scan of the counts over the lanes, lane r
    // holding row r).
    const int cnt = U.cnt[lane];
    int first = cnt;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int x = __shfl_up_sync(0xffffffffu, first, d);
        if (lane >= d)
            first += x;
    }
    first -= cnt;
    mf_tcg_wait<0>();
    __syncwarp(); // the tiles other lanes copied
    for (int kc = 0; kc < P.ld16; kc += 32 * NI) {
        const int64_t off = kc + 8 * q;
        uint4 a[4][NI]; // rows g + 8 m of the group
#pragma unroll
        for (int m = 0; m < 4; m++) {
            const uint16_t *arow = P.A16 + (int64_t)U.row[g + 8 * m] * P.ld16 + off;
#pragma unroll
            for (int i = 0; i < NI; i++)
                a[m][i] = kc + 32 * i < P.ld16
                              ? __ldg(reinterpret_cast<const uint4 *>(arow + 32 * i))
                              : make_uint4(0, 0, 0, 0);
        }
        auto issue = [&](int t) {
            uint4 *slot = ring + (t % STAGES) * (NI * 32);
            const int32_t col = t < n ? T[t].col[g] : 0;
            const uint16_t *src = P.B16 + (size_t)(uint32_t)col * (size_t)P.ld16 + off;
#pragma unroll
            for (int i = 0; i < NI; i++) {
                const bool valid = t < n && kc + 32 * i < P.ld16;
                mf_tcg_copy16(slot + i * 32 + lane, valid ? src + 32 * i : P.B16, valid);
            }
            mf_tcg_commit(); // a group per tile, empty past the unit's end
        };
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++)
            issue(s);
        const uint32_t *ent = P.ent + U.ent_begin;
        for (int t = 0; t < n; t++) {
            issue(t + STAGES - 1);
            // the tile's entries: each mask word is counted by the four lanes of its g
            const int count = (int)(__reduce_add_sync(0xffffffffu, __popc(T[t].word[g])) / 4);
            mf_tcg_wait<STAGES - 1>(); // tile t's group has landed
            const uint4 *slot = ring + (t % STAGES) * (NI * 32);
            uint4 b[NI];
#pragma unroll
            for (int i = 0; i < NI; i++)
                b[i] = slot[i * 32 + lane];
            float d[2][4] = {};
#pragma unroll
            for (int i = 0; i < NI; i++)
#pragma unroll
                for (int f = 0; f < 2; f++) {
                    mf_mma_16bit<PREC>(d[f], a[2 * f][i].x, a[2 * f + 1][i].x, a[2 * f][i].y,
                                       a[2 * f + 1][i].y, b[i].x, b[i].y);
                    mf_mma_16bit<PREC>(d[f], a[2 * f][i].z, a[2 * f + 1][i].z, a[2 * f][i].w,
                                       a[2 * f + 1][i].w, b[i].z, b[i].w);
                }
                // d[f] = (row 16 f + g, column 2q), (.., 2q + 1), (row 16 f + g + 8, 2q), (.., 2q +
                // 1): the tile's product into shared memory, then each stored entry's to its sum
#pragma unroll
            for (int m = 0; m < 4; m++)
                *reinterpret_cast<float2 *>(prod + (g + 8 * m) * MF_TCG_TILE + 2 * q) =
                    make_float2(d[m / 2][2 * (m % 2)], d[m / 2][2 * (m % 2) + 1]);
            __syncwarp();
            for (int j = lane; j < count; j += 32) {
                const uint32_t e = __ldg(ent + j);
                float *s = sums + (e >> 8);
                const float v = prod[e & 0xffu];
                *s = kc == 0 ? v : *s + v;
            }
            ent += count;
            __syncwarp(); // prod is free for the next tile
        }
        mf_tcg_wait<0>(); // the ring is free for the next chunk
    }
    __syncwarp(); // the sums other lanes wrote
    // Row by row, each a run of out: alpha * sum (times S's value), plus beta * out.
    for (int r = 0; r < MF_TCG_ROWS; r++) {
        const int c = __shfl_sync(0xffffffffu, cnt, r), f = __shfl_sync(0xffffffffu, first, r);
        if (c == 0)
            continue;
        const int64_t p0 = U.pos[r];
        for (int j = lane; j < c; j += 32) {
            const int64_t p = p0 + j;
            // roundings spelled out: mf_cuda_sddmm_finish (sddmm.cu) must match them
            float v = __fmul_rn(P.alpha, sums[f + j]);
            if (P.val)
                v = __fmul_rn(v, __ldg(P.val + p));
            P.out[p] = P.beta == 0.f ? v : __fmaf_rn(P.beta, P.out[p], v);
        }
    }
}

struct mf_sddmm_tcg_plan {
    int64_t n_units, n_tiles, n_groups;
    mf_dbuf units, tiles, ent;
};

static const char tcg_plan_key = 0;

static void tcg_plan_free(mf_sparse *m, void *value)
{
    mf_sddmm_tcg_plan *plan = (mf_sddmm_tcg_plan *)value;
    mf_dmem_free(m->ctx, &plan->units);
    mf_dmem_free(m->ctx, &plan->tiles);
    mf_dmem_free(m->ctx, &plan->ent);
    free(plan);
}

static mf_status get_tcg_plan(mf_ctx *ctx, mf_sparse *S, mf_sddmm_tcg_plan **out)
{
    mf_sddmm_tcg_plan *plan = (mf_sddmm_tcg_plan *)mf_sparse_cache_get(S, &tcg_plan_key);
    if (plan) {
        *out = plan;
        return MF_OK;
    }
    double t0 = mf_seconds();
    mf_tc_order order;
    MF_TRY(mf_tc_order_from_env(ctx, &order));
    if (order == MF_TC_ORDER_AUTO)
        order = MF_TC_ORDER_LENGTH_MINHASH;
    const int32_t *rows = NULL;
    int64_t n = 0;
    MF_TRY(mf_tc_order_rows_cached(ctx, S, order, &rows, &n));
    mf_tcg_layout host;
    MF_TRY(mf_tcg_layout_build(ctx, S, rows, n, &host));
    plan = (mf_sddmm_tcg_plan *)calloc(1, sizeof *plan);
    mf_status st = plan ? MF_OK
                        : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                  "mf_sddmm: out of host memory for the row-group plan");
    if (st == MF_OK) {
        plan->n_units = host.n_units;
        plan->n_tiles = host.n_tiles;
        plan->n_groups = host.n_groups;
        st = mf_upload(ctx, &plan->units, host.units, (size_t)host.n_units * sizeof(mf_tcg_unit),
                       "SDDMM row-group plan units");
    }
    if (st == MF_OK)
        st = mf_upload(ctx, &plan->tiles, host.tiles, (size_t)host.n_tiles * sizeof(mf_tcg_tile),
                       "SDDMM row-group plan tiles");
    if (st == MF_OK)
        st = mf_upload(ctx, &plan->ent, host.ent, (size_t)host.n_ent * sizeof(uint32_t),
                       "SDDMM row-group plan entries");
    mf_tcg_layout_free(&host);
    if (st == MF_OK)
        st = mf_sparse_cache_put(S, &tcg_plan_key, plan, tcg_plan_free); // frees plan on failure
    else if (plan)
        tcg_plan_free(S, plan);
    MF_TRY(st);
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(ctx->link.cuda->stream));
    const double per_tile = MF_TCG_TILE * MF_TCG_ROWS;
    mf_log(ctx, MF_LOG_INFO,
           "mf_sddmm: row-group tensor-core plan: %lld groups of %d rows (%s order), %lld tiles "
           "of %d columns (%.1f%% of the tiles' products are stored entries, %.3f B rows "
           "gathered an entry), %lld units, %.1f MB, built in %.1f ms",
           (long long)plan->n_groups, MF_TCG_ROWS, mf_tc_order_name(order),
           (long long)plan->n_tiles, MF_TCG_TILE,
           plan->n_tiles > 0 ? 100.0 * (double)S->nnz / (per_tile * (double)plan->n_tiles) : 0.0,
           S->nnz > 0 ? (double)plan->n_tiles * MF_TCG_TILE / (double)S->nnz : 0.0,
           (long long)plan->n_units,
           (double)(plan->n_units * sizeof(mf_tcg_unit) + plan->n_tiles * sizeof(mf_tcg_tile)) /
               1e6,
           (mf_seconds() - t0) * 1e3);
    *out = plan;
    return MF_OK;
}

template <int PREC, int NI, int STAGES>
static void launch_tcg(const mf_sddmm_tcg_params &P, unsigned grid, cudaStream_t s)
{
    const size_t smem = (size_t)MF_TCG_THREADS / 32 * mf_tcg_warp_smem<NI, STAGES>();
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(mf_sddmm_tcg_kernel<PREC, NI, STAGES>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    mf_sddmm_tcg_kernel<PREC, NI, STAGES><<<grid, MF_TCG_THREADS, smem, s>>>(P);
}

template <int PREC, int NI>
static void launch_tcg(const mf_sddmm_tcg_params &P, int stages, unsigned grid, cudaStream_t s)
{
    if (stages <= 2)
        launch_tcg<PREC, NI, 2>(P, grid, s);
    else
        launch_tcg<PREC, NI, 4>(P, grid, s);
}

template <int PREC>
static void launch_tcg(const mf_sddmm_tcg_params &P, int ni, int stages, unsigned grid,
                       cudaStream_t s)
{
    if (ni == 1)
        launch_tcg<PREC, 1>(P, stages, grid, s);
    else if (ni == 2)
        launch_tcg<PREC, 2>(P, stages, grid, s);
    else
        launch_tcg<PREC, 4>(P, stages, grid, s);
}

extern "C" mf_status mf_cuda_sddmm_tcg(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call,
                                       const uint16_t *A16, const uint16_t *B16, int64_t ld16)
{
    if (call->precision != MF_PRECISION_BF16 && call->precision != MF_PRECISION_FP16)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: no row-group kernel for precision %d",
                       call->precision);
    mf_sddmm_tcg_plan *plan = NULL;
    MF_TRY(get_tcg_plan(ctx, S, &plan));
    if (plan->n_units == 0)
        return MF_OK;
    const int64_t *row_ptr;
    const int32_t *col;
    const float *val;
    MF_TRY(mf_sparse_device_csr(S, &row_ptr, &col, &val));
    const int64_t blocks = (plan->n_units + MF_TCG_THREADS / 32 - 1) / (MF_TCG_THREADS / 32);
    if (blocks > 0x7fffffff)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "mf_sddmm: %lld thread blocks exceed the grid limit", (long long)blocks);
    mf_sddmm_tcg_params P = {(const mf_tcg_unit *)plan->units.ptr,
                             (const mf_tcg_tile *)plan->tiles.ptr,
                             (const uint32_t *)plan->ent.ptr,
                             plan->n_units,
                             A16,
                             B16,
                             ld16,
                             call->alpha,
                             call->beta,
                             call->pattern ? NULL : val,
                             call->out};
    const int ni = ld16 <= 32 ? 1 : ld16 <= 64 ? 2 : 4;
    const char *st_env = getenv("MFACT_SDDMM_TCG_STAGES"); // an experiment's knob: 2 or 4
    const int stages = st_env && atoi(st_env) <= 2 ? 2 : 4;
    cudaStream_t stream = ctx->link.cuda->stream;
    if (call->precision == MF_PRECISION_BF16)
        launch_tcg<MF_PRECISION_BF16>(P, ni, stages, (unsigned)blocks, stream);
    else
        launch_tcg<MF_PRECISION_FP16>(P, ni, stages, (unsigned)blocks, stream);
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "the row-group SDDMM kernel"));
    return MF_OK;
}
