/* The CUDA engine of implicit-feedback ALS (ials_engine.cuh): its arithmetic, behind the
 * engine table of ials_internal.h. The interactions go to the device once, as the matrix's
 * cached CSR and CSC (ials_setup.cu), or, where they do not fit, stream from host memory
 * (ials_stream.cu). A half-step is a fixed sequence of stream-ordered launches
 * (ials_kernels.cuh): G = F^T F of the other side, formed by chunks of F's rows and the
 * chunks' partials added in chunk order (so runs repeat exactly, and a group's ranks can
 * each form a share of the chunks: ials.c), then either
 *   CG (the default): X G by a dense kernel, a warp per row adds lambda x and the row's
 *   sparse correction and forms the residual; then per step P G, and a warp per row
 *   finishes A p and takes the step (implicit's iteration, the system never formed); or
 *   exact: a block per row forms its k x k system in shared memory and solves it by
 *   Cholesky (as far as the device's shared memory holds the system: rank 224 on Hopper).
 * A side's solves leave a word on the device, the first row whose system broke down; the
 * host reads both sides' words when it checks (after each half-step on one context, once
 * an iteration in a group). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "ials/ials_engine.cuh"
#include "ials/ials_kernels.cuh"

#include <cuda_fp16.h>

namespace mf_ials_cuda
{

namespace
{

/* ---- G = F^T F by chunks of rows ------------------------------------------------------- */

/* The partials of chunks [first, last) of the Gram that side s is solved against. */
mf_status gram_partials(cuda_engine *e, mf_ials_side s, int64_t first, int64_t last)
{
    mf_ctx *ctx = e->ctx;
    if (last <= first)
        return MF_OK;
    ials::gram_partial<<<dim3((unsigned)(last - first), (unsigned)tiles_of(e)), 256, 0,
                         mf_cuda_of(ctx)->stream>>>(e->F[1 - s].ptr, e->is_half, e->by[1 - s].rows,
                                                    e->kp, e->chunks[1 - s], first, fp(e->part));
    return MF_CUDA_LAUNCHED(ctx, "ials gram_partial");
}

/* G from every chunk's partial, in chunk order. */
mf_status gram_sum(cuda_engine *e, mf_ials_side s)
{
    mf_ctx *ctx = e->ctx;
    const int tiles = tiles_of(e);
    ials::gram_reduce<<<mf_cuda_grid(mf_cuda_of(ctx), (int64_t)tiles * 1024, 256, 4), 256, 0,
                        mf_cuda_of(ctx)->stream>>>(fp(e->part), e->kp, tiles, e->chunks[1 - s],
                                                   fp(e->G));
    return MF_CUDA_LAUNCHED(ctx, "ials gram_reduce");
}

/* ---- the solves ------------------------------------------------------------------------- */

/* C = P G; P is a factor (half as the engine stores them) when `factor`, else a CG vector. */
mf_status gemm(cuda_engine *e, const void *P, bool factor, float *C, int32_t rows)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const int nc = e->kp >= 128 ? 4 : e->kp / 32, is_half = factor && e->is_half;
    const dim3 grid((unsigned)(((int64_t)rows + 63) / 64), (unsigned)(e->kp / (32 * nc)));
    if (rows == 0)
        return MF_OK;
    switch (nc) {
    case 1: ials::gemm_pg<1><<<grid, 256, 0, stream>>>(P, is_half, fp(e->G), C, rows, e->kp); break;
    case 2: ials::gemm_pg<2><<<grid, 256, 0, stream>>>(P, is_half, fp(e->G), C, rows, e->kp); break;
    default:
        ials::gemm_pg<4><<<grid, 256, 0, stream>>>(P, is_half, fp(e->G), C, rows, e->kp);
        break;
    }
    return MF_CUDA_LAUNCHED(ctx, "ials gemm_pg");
}

/* seg_apply then the per-row kernel (init: cg_init, else cg_step). */
template <int VPL> mf_status cg_launch(cuda_engine *e, ials::cg_args &a, bool init)
{
    cudaStream_t stream = mf_cuda_of(e->ctx)->stream;
    const unsigned segs = (unsigned)((a.nseg + 7) / 8),
                   grid = (unsigned)(((int64_t)a.rows + 7) / 8);
    if (a.nseg > 0) {
        if (init)
            ials::seg_apply<VPL, true><<<segs, 256, 0, stream>>>(a);
        else
            ials::seg_apply<VPL, false><<<segs, 256, 0, stream>>>(a);
        MF_TRY(MF_CUDA_LAUNCHED(e->ctx, "ials seg_apply"));
    }
    if (init)
        ials::cg_init<VPL><<<grid, 256, 0, stream>>>(a);
    else
        ials::cg_step<VPL><<<grid, 256, 0, stream>>>(a);
    return MF_CUDA_LAUNCHED(e->ctx, init ? "ials cg_init" : "ials cg_step");
}

mf_status cg_dispatch(cuda_engine *e, ials::cg_args &a, bool init)
{
    switch (e->vpl) {
    case 1: return cg_launch<1>(e, a, init);
    case 2: return cg_launch<2>(e, a, init);
    case 4: return cg_launch<4>(e, a, init);
    case 8: return cg_launch<8>(e, a, init);
    default: return cg_launch<16>(e, a, init);
    }
}

void engine_gram_parts(mf_ials_engine *base, mf_ials_side s, void **parts, size_t *row_bytes,
                       int64_t *chunks)
{
    cuda_engine *e = (cuda_engine *)base;
    *parts = e->part.ptr;
    *row_bytes = (size_t)tiles_of(e) * 1024 * sizeof(float);
    *chunks = e->chunks[1 - s];
}

mf_status engine_gram(mf_ials_engine *base, mf_ials_side s, int64_t first, int64_t last)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    return gram_partials(e, s, first, last);
}

/* G, then this rank's rows of side s: [first, first + count); the offsets index the whole
 * side's interactions, so only the row pointers move. */
mf_status engine_solve(mf_ials_engine *base, mf_ials_side s)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    const side &own = e->by[s];
    MF_TRY(gram_sum(e, s));
    MF_CUDA_TRY(ctx, cudaMemsetAsync((unsigned long long *)e->failed.ptr + s, 0xff,
                                     sizeof(unsigned long long), mf_cuda_of(ctx)->stream));
    if (own.count == 0)
        return MF_OK;
    const void *F = e->F[1 - s].ptr;
    if (e->z)
        return stream_solve(e, s, F);
    rows_view v = {};
    v.rows = own.count, v.row0 = own.first;
    v.ptr = own.ptr + own.first, v.idx = own.idx, v.val = own.val;
    v.X = (char *)e->F[s].ptr + (size_t)own.first * e->kp * fac_bytes(e);
    v.R = fp(e->R), v.P = fp(e->P), v.AP = fp(e->AP), v.rs = fp(e->rs);
    v.PA = fp(e->PA), v.PB = fp(e->PB);
    v.nseg = own.nseg;
    v.seg_lo = (const int64_t *)own.lo.ptr, v.seg_hi = (const int64_t *)own.hi.ptr;
    v.seg_row = (const int32_t *)own.row.ptr, v.row_seg = (const int64_t *)own.seg.ptr;
    return solve_rows(e, s, F, v);
}

/* The first breakdown of either side's solves, as MF_ERR_NUMERIC: one read of both words. */
mf_status engine_check(mf_ials_engine *base, mf_ials_side *broke)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    unsigned long long w[2] = {0, 0};
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(w, e->failed.ptr, sizeof w, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    for (int s = 0; s < 2; s++)
        if (w[s] != ~0ull) {
            *broke = (mf_ials_side)s;
            return mf_fail(ctx, MF_ERR_NUMERIC,
                           "%s: the system of %s %llu is not positive definite (%s %u); "
                           "lambda > 0 keeps every system positive definite",
                           e->fn, s == MF_IALS_USERS ? "user" : "item", w[s] >> 32,
                           e->cg_steps > 0 ? "CG step" : "pivot", (unsigned)(w[s] & 0xffffffffu));
        }
    return MF_OK;
}

/* ---- the loss ---------------------------------------------------------------------------- */

template <int VPL> mf_status loss_launch(cuda_engine *e, ials::loss_args &a, unsigned grid)
{
    ials::loss_rows<VPL><<<grid, 256, 0, mf_cuda_of(e->ctx)->stream>>>(a);
    return MF_CUDA_LAUNCHED(e->ctx, "ials loss_rows");
}

/* The block sums of one loss launch over `rows`, added on the host in block order. */
mf_status loss_part(cuda_engine *e, int32_t rows, const int64_t *ptr, const int32_t *idx,
                    const float *val, const void *X, double *out)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const unsigned grid = (unsigned)(((int64_t)rows + 7) / 8);
    *out = 0.0;
    if (rows == 0)
        return MF_OK;
    MF_TRY(launch_loss(e, rows, ptr, idx, val, X, NULL));
    double *h = (double *)malloc((size_t)grid * sizeof *h);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    cudaError_t err = cudaMemcpyAsync(h, e->partial.ptr, (size_t)grid * sizeof *h,
                                      cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) {
        free(h);
        return mf_cuda_fail(ctx, err, "ials loss read-back", __FILE__, __LINE__);
    }
    for (unsigned b = 0; b < grid; b++)
        *out += h[b];
    free(h);
    return MF_OK;
}

/* V's whole Gram here; this engine's users' terms, each row's total (loss_rows with
 * row_total) into `row`; the items' penalty as one launch's block sums. */
mf_status engine_loss_terms(mf_ials_engine *base, double *row, double *items)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    const side &u = e->by[0], &v = e->by[1];
    MF_TRY(gram_partials(e, MF_IALS_USERS, 0, e->chunks[1]));
    MF_TRY(gram_sum(e, MF_IALS_USERS));
    if (e->z) {
        MF_TRY(stream_loss_users(e, row));
    } else if (u.count > 0) {
        /* The share's rows: the offsets index the side's whole arrays (engine_solve). */
        const size_t xrow = (size_t)e->kp * fac_bytes(e);
        double *total = (double *)e->partial.ptr;
        MF_TRY(launch_loss(e, u.count, u.ptr + u.first, u.idx, u.val,
                           (const unsigned char *)e->F[0].ptr + (size_t)u.first * xrow, total));
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(row, total, (size_t)u.count * sizeof *row,
                                         cudaMemcpyDeviceToHost, mf_cuda_of(ctx)->stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(mf_cuda_of(ctx)->stream));
    }
    return loss_part(e, v.rows, NULL, NULL, NULL, e->F[1].ptr, items);
}

/* The users' terms in blocks of 8 rows of the whole side (a block's missing rows add 0.0),
 * the blocks in order, as loss_rows's block sums are added: the same bits whichever rank
 * formed each term. */
double engine_loss_total(const mf_ials_engine *base, const double *row, double items)
{
    const cuda_engine *e = (const cuda_engine *)base;
    const int32_t rows = e->by[0].rows;
    double users = 0.0;
    for (int32_t b = 0; b < rows; b += 8) {
        double block = 0.0;
        for (int32_t r = b; r < b + 8; r++)
            block += r < rows ? row[r] : 0.0;
        users += block;
    }
    return (users + items) / ((double)rows * (double)e->by[1].rows);
}

/* ---- the factors out, the end --------------------------------------------------------- */

/* Working factor (rows x kp) to the caller's rows x k floats, host or device (halves
 * through a float copy on the device). */
mf_status copy_out(cuda_engine *e, const mf_dbuf &F, int32_t rows, float *dst)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    if (!dst || rows == 0)
        return MF_OK;
    if (!e->is_half) {
        MF_CUDA_TRY(ctx,
                    cudaMemcpy2DAsync(dst, (size_t)e->k * sizeof(float), F.ptr,
                                      (size_t)e->kp * sizeof(float), (size_t)e->k * sizeof(float),
                                      (size_t)rows, cudaMemcpyDefault, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
        return MF_OK;
    }
    mf_dbuf tmp = {NULL, 0};
    const int64_t n = (int64_t)rows * e->k;
    MF_TRY(mf_dmem_alloc(ctx, &tmp, (size_t)n * sizeof(float), "iALS factors as floats"));
    ials::half_rows_to_float<<<mf_cuda_grid(mf_cuda_of(ctx), n, 256, 8), 256, 0, stream>>>(
        (const __half *)F.ptr, e->kp, e->k, rows, fp(tmp));
    mf_status st = MF_CUDA_LAUNCHED(ctx, "ials half_rows_to_float");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK)
        err = cudaMemcpyAsync(dst, tmp.ptr, (size_t)n * sizeof(float), cudaMemcpyDefault, stream);
    if (st == MF_OK && err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (st == MF_OK && err != cudaSuccess)
        st = mf_cuda_fail(ctx, err, "iALS factor read-back", __FILE__, __LINE__);
    mf_dmem_free(ctx, &tmp);
    return st;
}

mf_status engine_finish(mf_ials_engine *base, float *U, float *V, mf_memory where)
{
    cuda_engine *e = (cuda_engine *)base;
    (void)where; /* cudaMemcpyDefault tells host from device */
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    MF_TRY(copy_out(e, e->F[0], e->by[0].rows, U));
    return copy_out(e, e->F[1], e->by[1].rows, V);
}

void engine_shared(mf_ials_engine *base, mf_ials_side side, void **factors, size_t *row_bytes)
{
    cuda_engine *e = (cuda_engine *)base;
    *factors = e->F[side].ptr;
    *row_bytes = (size_t)e->kp * fac_bytes(e);
}

void engine_destroy(mf_ials_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    mf_dbuf *bufs[] = {&e->F[0], &e->F[1], &e->G,  &e->part,   &e->R,
                       &e->P,    &e->AP,   &e->rs, &e->failed, &e->partial};
    for (mf_dbuf *b : bufs)
        mf_dmem_free(ctx, b);
    for (side &sd : e->by) {
        mf_dbuf *sb[] = {&sd.lo, &sd.hi, &sd.row, &sd.seg};
        for (mf_dbuf *b : sb)
            mf_dmem_free(ctx, b);
    }
    mf_dmem_free(ctx, &e->PA);
    mf_dmem_free(ctx, &e->PB);
    stream_release(e);
    free(e);
}

} // namespace

/* ---- what ials_stream.cu and ials_setup.cu share ----------------------------------------- */

mf_status exact_prepare(cuda_engine *e)
{
    mf_ctx *ctx = e->ctx;
    const size_t optin = mf_cuda_of(ctx)->prop.sharedMemPerBlockOptin;
    if (ials::exact_smem_bytes(e->k) > optin) {
        int most = e->k;
        while (most > 1 && ials::exact_smem_bytes(most) > optin)
            most--;
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s: the exact solver on this device takes rank <= %d (rank = %d); "
                       "MF_ALS_SOLVER_CG takes any rank",
                       e->fn, most, e->k);
    }
    MF_CUDA_TRY(ctx,
                cudaFuncSetAttribute(ials::exact_solve, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)ials::exact_smem_bytes(e->k)));
    return MF_OK;
}

mf_status solve_rows(cuda_engine *e, mf_ials_side s, const void *F, const rows_view &v)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    unsigned long long *failed = (unsigned long long *)e->failed.ptr + s;
    if (e->cg_steps == 0) {
        ials::exact_args a = {v.rows,    v.ptr,    v.idx,      v.val,
                              F,         fp(e->G), v.X,        e->is_half,
                              e->lambda, e->alpha, e->epsilon, e->log_confidence,
                              e->k,      e->kp,    failed,     v.row0};
        ials::exact_solve<<<(unsigned)v.rows, 256, ials::exact_smem_bytes(e->k), stream>>>(a);
        return MF_CUDA_LAUNCHED(ctx, "ials exact_solve");
    }
    ials::cg_args a = {};
    a.rows = v.rows, a.ptr = v.ptr, a.idx = v.idx, a.val = v.val, a.F = F;
    a.row0 = v.row0;
    a.X = v.X, a.R = v.R, a.P = v.P, a.AP = v.AP, a.rs = v.rs;
    a.is_half = e->is_half;
    a.lambda = e->lambda, a.alpha = e->alpha, a.epsilon = e->epsilon;
    a.log_confidence = e->log_confidence, a.kp = e->kp;
    a.failed = failed;
    a.nseg = v.nseg;
    a.seg_lo = v.seg_lo, a.seg_hi = v.seg_hi, a.seg_row = v.seg_row, a.row_seg = v.row_seg;
    a.PA = v.PA, a.PB = v.PB;
    MF_TRY(gemm(e, v.X, true, v.AP, v.rows));
    MF_TRY(cg_dispatch(e, a, true));
    for (int step = 0; step < e->cg_steps; step++) {
        a.step = step;
        MF_TRY(gemm(e, v.P, false, v.AP, v.rows));
        MF_TRY(cg_dispatch(e, a, false));
    }
    return MF_OK;
}

mf_status launch_loss(cuda_engine *e, int32_t rows, const int64_t *ptr, const int32_t *idx,
                      const float *val, const void *X, double *row_total)
{
    if (rows == 0)
        return MF_OK;
    ials::loss_args a = {rows,       ptr,
                         idx,        val,
                         X,          e->F[1].ptr,
                         fp(e->G),   e->is_half,
                         e->lambda,  e->alpha,
                         e->epsilon, e->log_confidence,
                         e->kp,      row_total ? NULL : (double *)e->partial.ptr,
                         row_total};
    const unsigned grid = (unsigned)(((int64_t)rows + 7) / 8);
    switch (e->vpl) {
    case 1: return loss_launch<1>(e, a, grid);
    case 2: return loss_launch<2>(e, a, grid);
    case 4: return loss_launch<4>(e, a, grid);
    case 8: return loss_launch<8>(e, a, grid);
    default: return loss_launch<16>(e, a, grid);
    }
}

} // namespace mf_ials_cuda

using namespace mf_ials_cuda;

extern "C" mf_status mf_cuda_ials_engine(const mf_ials_setup *s, mf_ials_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", s->fn);
    e->base.gram_parts = engine_gram_parts;
    e->base.gram = engine_gram;
    e->base.solve = engine_solve;
    e->base.check = engine_check;
    e->base.loss_terms = engine_loss_terms;
    e->base.loss_total = engine_loss_total;
    e->base.finish = engine_finish;
    e->base.shared = engine_shared;
    e->base.destroy = engine_destroy;
    e->ctx = ctx;
    e->fn = s->fn;
    e->k = s->k;
    e->vpl = 1;
    while (32 * e->vpl < s->k)
        e->vpl *= 2;
    e->kp = 32 * e->vpl;
    e->cg_steps = s->cg_steps;
    e->is_half = s->fp16;
    e->lambda = s->lambda, e->alpha = s->alpha, e->epsilon = s->epsilon;
    e->log_confidence = s->log_confidence;
    mf_status st = engine_setup(e, s);
    if (st != MF_OK) {
        engine_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
