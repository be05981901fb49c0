// The reduced precisions of mf_sddmm_ex on the tensor cores: the condensed-column plan,
// built once per matrix and cached on it, and the launch of the kernel for the call's
// precision (sddmm_tc_kernels.cuh).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_tc_kernels.cuh"
#include "sddmm/sddmm_tuning.h" // MF_SDDMM_TUNE_MIN_NNZ

struct mf_sddmm_tc_plan {
    int64_t n_units, n_tiles, n_windows;
    mf_dbuf units, tiles;
};

// The plan lives in the matrix's cache under this key, freed with the matrix.
static const char tc_plan_key = 0;

static void tc_plan_free(mf_sparse *m, void *value)
{
    mf_sddmm_tc_plan *plan = (mf_sddmm_tc_plan *)value;
    mf_dmem_free(m->ctx, &plan->units);
    mf_dmem_free(m->ctx, &plan->tiles);
    free(plan);
}

// Build on the host, upload, cache; the INFO line reports the build's size and time (the
// bench reads it: the plan is paid once per matrix, not per call).
static mf_status get_tc_plan(mf_ctx *ctx, mf_sparse *S, mf_sddmm_tc_plan **out)
{
    mf_sddmm_tc_plan *plan = (mf_sddmm_tc_plan *)mf_sparse_cache_get(S, &tc_plan_key);
    if (plan) {
        *out = plan;
        return MF_OK;
    }
    double t0 = mf_seconds();
    mf_tc_order order;
    MF_TRY(mf_tc_order_from_env(ctx, &order));
    mf_tc_layout host;
    MF_TRY(mf_tc_layout_build(ctx, S, order, &host));
    const mf_tc_order used = host.order;
    const int64_t natural_tiles = host.natural_tiles;
    plan = (mf_sddmm_tc_plan *)calloc(1, sizeof *plan);
    mf_status st = plan ? MF_OK
                        : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                  "mf_sddmm: out of host memory for the tensor-core plan");
    if (st == MF_OK) {
        plan->n_units = host.n_units;
        plan->n_tiles = host.n_tiles;
        plan->n_windows = host.n_windows;
        st = mf_upload(ctx, &plan->units, host.units, (size_t)host.n_units * sizeof(mf_tc_unit),
                       "SDDMM tensor-core plan units");
    }
    if (st == MF_OK)
        st = mf_upload(ctx, &plan->tiles, host.tiles, (size_t)host.n_tiles * sizeof(mf_tc_tile),
                       "SDDMM tensor-core plan tiles");
    mf_tc_layout_free(&host);
    if (st == MF_OK)
        st = mf_sparse_cache_put(S, &tc_plan_key, plan, tc_plan_free); // frees plan on failure
    else if (plan)
        tc_plan_free(S, plan);
    MF_TRY(st);
    // The upload is stream-ordered: wait for it so the time covers the whole build.
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(ctx->link.cuda->stream));
    // Density: the share of the tiles' products that are stored entries, for the order used
    // and (when it was counted) for index order.
    const double per_tile = MF_TC_TILE * MF_TC_WINDOW;
    const double density = plan->n_tiles > 0 ? (double)S->nnz / (per_tile * plan->n_tiles) : 0.0;
    char natural[48] = "not counted";
    if (natural_tiles > 0)
        snprintf(natural, sizeof natural, "%.1f%%",
                 100.0 * (double)S->nnz / (per_tile * (double)natural_tiles));
    mf_log(ctx, MF_LOG_INFO,
           "mf_sddmm: tensor-core plan: %lld windows of %d rows (%s order, %s %s), %lld tiles of "
           "%d columns (%.1f%% of the tiles' products are stored entries; index order %s), "
           "%.1f MB, built in %.1f ms",
           (long long)plan->n_windows, MF_TC_WINDOW, mf_tc_order_name(used),
           order == MF_TC_ORDER_AUTO ? "picked by" : "set by",
           order == MF_TC_ORDER_AUTO ? "tile count" : "MFACT_SDDMM_TC_ORDER",
           (long long)plan->n_tiles, MF_TC_TILE, 100.0 * density, natural,
           (double)(plan->n_units * sizeof(mf_tc_unit) + plan->n_tiles * sizeof(mf_tc_tile)) / 1e6,
           (mf_seconds() - t0) * 1e3);
    *out = plan;
    return MF_OK;
}

template <int PREC, bool VEC, bool COPIES>
static void launch_tc(const mf_sddmm_tc_params &P, unsigned grid, cudaStream_t stream)
{
    mf_sddmm_tc_kernel<PREC, VEC, COPIES><<<grid, MF_TC_THREADS, 0, stream>>>(P);
}

// The instance for the call: bf16 and fp16 with P.A16 set read the 16-bit copies; every other
// call reads the floats, in 16-byte vectors where vec.
template <int PREC>
static void launch_tc(const mf_sddmm_tc_params &P, bool vec, unsigned grid, cudaStream_t stream)
{
    if constexpr (PREC == MF_PRECISION_BF16 || PREC == MF_PRECISION_FP16) {
        if (P.A16)
            return launch_tc<PREC, true, true>(P, grid, stream);
    }
    if (vec)
        launch_tc<PREC, true, false>(P, grid, stream);
    else
        launch_tc<PREC, false, false>(P, grid, stream);
}

static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

extern "C" mf_status mf_tc_copy16(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call,
                                  mf_dbuf *copies, const uint16_t **A16, const uint16_t **B16,
                                  int64_t *ld)
{
    const int64_t ld16 = (call->k + 31) / 32 * 32; // the tensor-core kernel reads 32 a step
    const int64_t a_rows = A16 ? S->rows : 0;      // no A16: B's copy alone
    MF_TRY(mf_dmem_alloc(ctx, copies, (size_t)(a_rows + (int64_t)S->cols) * ld16 * 2,
                         "SDDMM 16-bit factors"));
    uint32_t *a16 = (uint32_t *)copies->ptr, *b16 = a16 + (size_t)a_rows * ld16 / 2;
    cudaStream_t stream = ctx->link.cuda->stream;
    unsigned ga = mf_cuda_grid(ctx->link.cuda, a_rows * ld16 / 2, 256, 16);
    unsigned gb = mf_cuda_grid(ctx->link.cuda, S->cols * ld16 / 2, 256, 16);
    if (call->precision == MF_PRECISION_BF16) {
        if (a_rows)
            mf_tc_convert<MF_PRECISION_BF16>
                <<<ga, 256, 0, stream>>>(call->A, call->lda, S->rows, call->k, ld16, a16);
        mf_tc_convert<MF_PRECISION_BF16>
            <<<gb, 256, 0, stream>>>(call->B, call->ldb, S->cols, call->k, ld16, b16);
    } else {
        if (a_rows)
            mf_tc_convert<MF_PRECISION_FP16>
                <<<ga, 256, 0, stream>>>(call->A, call->lda, S->rows, call->k, ld16, a16);
        mf_tc_convert<MF_PRECISION_FP16>
            <<<gb, 256, 0, stream>>>(call->B, call->ldb, S->cols, call->k, ld16, b16);
    }
    mf_status st = MF_CUDA_LAUNCHED(ctx, "the SDDMM 16-bit conversion");
    if (st != MF_OK) {
        mf_dmem_free(ctx, copies);
        return st;
    }
    if (A16)
        *A16 = (const uint16_t *)a16;
    *B16 = (const uint16_t *)b16;
    *ld = ld16;
    return MF_OK;
}

// Stream-ordered, like mf_cuda_sddmm (which calls it for the reduced precisions it sends to
// the tensor cores; for bf16 and fp16 with the copies it made, or without: A16 NULL,
// rounding in registers).
extern "C" mf_status mf_cuda_sddmm_tc(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call,
                                      const uint16_t *A16, const uint16_t *B16, int64_t ld16)
{
    mf_sddmm_tc_plan *plan = NULL;
    MF_TRY(get_tc_plan(ctx, S, &plan));
    if (plan->n_units == 0)
        return MF_OK;
    const int64_t *row_ptr;
    const int32_t *col;
    const float *val;
    MF_TRY(mf_sparse_device_csr(S, &row_ptr, &col, &val));
    mf_sddmm_tc_params P = {(const mf_tc_unit *)plan->units.ptr,
                            (const mf_tc_tile *)plan->tiles.ptr,
                            plan->n_units,
                            call->A,
                            call->lda,
                            call->B,
                            call->ldb,
                            call->k,
                            call->alpha,
                            call->beta,
                            call->pattern ? NULL : val,
                            call->out,
                            NULL,
                            NULL,
                            0};
    const bool vec = call->k % 4 == 0 && call->lda % 4 == 0 && call->ldb % 4 == 0 &&
                     aligned16(call->A) && aligned16(call->B);
    const int64_t blocks = (plan->n_units + MF_TC_THREADS / 32 - 1) / (MF_TC_THREADS / 32);
    if (blocks > 0x7fffffff)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "mf_sddmm: %lld thread blocks exceed the grid limit", (long long)blocks);
    cudaStream_t stream = ctx->link.cuda->stream;
    P.A16 = A16;
    P.B16 = B16;
    P.ld16 = ld16;
    // A call that reads out (beta != 0) or S's values reads them at the entries' scattered
    // positions, at the end of each warp's short life: on large matrices that doubled the
    // time (H200, Netflix shape at half scale, beta = 0 -> 1: TF32 0.62 -> 1.52 ms at k = 32,
    // bf16 1.21 -> 1.88 ms at k = 128; now 0.75 and 1.32 ms). There the kernel writes alpha *
    // products to a scratch array instead, and a pass in index order finishes them; small
    // matrices, launch-bound, finish in the kernel, and so does a call the scratch array
    // would take past the memory limit (same results, slower).
    mf_dbuf scratch = {0, 0};
    if ((P.beta != 0.f || P.val) && S->nnz >= MF_SDDMM_TUNE_MIN_NNZ) {
        mf_status got = mf_dmem_alloc(ctx, &scratch, (size_t)S->nnz * sizeof(float),
                                      "SDDMM tensor-core products");
        if (got != MF_OK && got != MF_ERR_OUT_OF_MEMORY)
            return got;
        if (scratch.ptr) {
            P.out = (float *)scratch.ptr;
            P.beta = 0.f;
            P.val = NULL;
        }
    }
    mf_status st = MF_OK;
    switch (call->precision) {
    case MF_PRECISION_3XTF32:
        launch_tc<MF_PRECISION_3XTF32>(P, vec, (unsigned)blocks, stream);
        break;
    case MF_PRECISION_TF32: launch_tc<MF_PRECISION_TF32>(P, vec, (unsigned)blocks, stream); break;
    case MF_PRECISION_BF16: launch_tc<MF_PRECISION_BF16>(P, vec, (unsigned)blocks, stream); break;
    case MF_PRECISION_FP16: launch_tc<MF_PRECISION_FP16>(P, vec, (unsigned)blocks, stream); break;
    default:
        st = mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: no tensor-core kernel for precision %d",
                     call->precision);
    }
    if (st == MF_OK)
        st = MF_CUDA_LAUNCHED(ctx, "the tensor-core SDDMM kernel");
    if (st == MF_OK && scratch.ptr)
        st = mf_cuda_sddmm_finish(ctx, call->out, (const float *)scratch.ptr,
                                  call->pattern ? NULL : val, call->beta, S->nnz);
    mf_dmem_free(ctx, &scratch); // stream-ordered: after the kernels that use it
    return st;
}
