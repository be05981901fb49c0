/* The CUDA engine of implicit-feedback ALS. The interactions go to the device once, as the
 * matrix's cached CSR and CSC. A half-step is a fixed sequence of stream-ordered launches
 * (ials_kernels.cuh): G = F^T F of the other side (row-chunk partials, reduced in a fixed
 * order, so runs repeat exactly), then either
 *   CG (the default): X G by a dense kernel, a warp per row adds lambda x and the row's
 *   sparse correction and forms the residual; then per step P G, and a warp per row
 *   finishes A p and takes the step (implicit's iteration, the system never formed); or
 *   exact: a block per row forms its k x k system in shared memory and solves it by
 *   Cholesky (as far as the device's shared memory holds the system: rank 224 on Hopper).
 * The host reads back one word per half-step: the first row whose system broke down. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "ials/ials_internal.h"
#include "ials/ials_kernels.cuh"

#include <cuda_fp16.h>

namespace
{

struct side {
    int32_t rows;
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    int64_t nseg;             /* CG's segments (ials_kernels.cuh, cg_args) */
    mf_dbuf lo, hi, row, seg; /* seg_lo, seg_hi, seg_row, row_seg */
};

struct cuda_engine {
    mf_ials_engine base;
    mf_ctx *ctx;
    const char *fn;
    int k, kp, vpl, cg_steps;
    int is_half; /* U and V stored as half (mf_ials_opts.fp16) */
    float lambda, alpha, epsilon;
    int log_confidence;
    side by[2];              /* users (CSR), items (CSC) */
    mf_dbuf F[2];            /* U, V: rows of kp floats */
    mf_dbuf G, part;         /* the Gram matrix and its chunk partials */
    mf_dbuf R, P, AP, rs;    /* CG's vectors (the larger side's rows) */
    mf_dbuf PA, PB;          /* CG's per-segment partial sums */
    mf_dbuf failed, partial; /* breakdown word; the loss's block sums */
    int chunks;
};

float *fp(const mf_dbuf &b)
{
    return (float *)b.ptr;
}

/* Bytes of one factor element: float, or half with mf_ials_opts.fp16. */
size_t fac_bytes(const cuda_engine *e)
{
    return e->is_half ? sizeof(__half) : sizeof(float);
}

mf_status gram(cuda_engine *e, const void *F, int32_t rows)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const int T = e->kp / 32, tiles = T * (T + 1) / 2;
    int64_t chunks = ((int64_t)rows + 1023) / 1024;
    if (chunks > e->chunks)
        chunks = e->chunks;
    if (chunks < 1)
        chunks = 1;
    ials::gram_partial<<<dim3((unsigned)chunks, (unsigned)tiles), 256, 0, stream>>>(
        F, e->is_half, rows, e->kp, (int)chunks, fp(e->part));
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "ials gram_partial"));
    const int64_t n = (int64_t)e->kp * e->kp;
    ials::gram_reduce<<<mf_cuda_grid(mf_cuda_of(ctx), n, 256, 4), 256, 0, stream>>>(
        fp(e->part), e->kp, (int)chunks, fp(e->G));
    return MF_CUDA_LAUNCHED(ctx, "ials gram_reduce");
}

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

/* The first breakdown of the half-step, if any, as MF_ERR_NUMERIC. */
mf_status check_failed(cuda_engine *e, mf_ials_side s)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    unsigned long long w = 0;
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(&w, e->failed.ptr, sizeof w, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    if (w == ~0ull)
        return MF_OK;
    return mf_fail(ctx, MF_ERR_NUMERIC,
                   "%s: the system of %s %llu is not positive definite (%s %u); "
                   "lambda > 0 keeps every system positive definite",
                   e->fn, s == MF_IALS_USERS ? "user" : "item", w >> 32,
                   e->cg_steps > 0 ? "CG step" : "pivot", (unsigned)(w & 0xffffffffu));
}

mf_status half_step(mf_ials_engine *base, mf_ials_side s)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const side &own = e->by[s], &other = e->by[1 - s];
    void *X = e->F[s].ptr;
    const void *F = e->F[1 - s].ptr;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->failed.ptr, 0xff, sizeof(unsigned long long), stream));
    MF_TRY(gram(e, F, other.rows));
    if (own.rows == 0)
        return MF_OK;
    if (e->cg_steps == 0) {
        ials::exact_args a = {own.rows, own.ptr,    own.idx,
                              own.val,  F,          fp(e->G),
                              X,        e->is_half, e->lambda,
                              e->alpha, e->epsilon, e->log_confidence,
                              e->k,     e->kp,      (unsigned long long *)e->failed.ptr};
        ials::exact_solve<<<(unsigned)own.rows, 256, ials::exact_smem_bytes(e->k), stream>>>(a);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "ials exact_solve"));
        return check_failed(e, s);
    }
    ials::cg_args a = {};
    a.rows = own.rows, a.ptr = own.ptr, a.idx = own.idx, a.val = own.val, a.F = F;
    a.X = X, a.R = fp(e->R), a.P = fp(e->P), a.AP = fp(e->AP), a.rs = (float *)e->rs.ptr;
    a.is_half = e->is_half;
    a.lambda = e->lambda, a.alpha = e->alpha, a.epsilon = e->epsilon;
    a.log_confidence = e->log_confidence, a.kp = e->kp;
    a.failed = (unsigned long long *)e->failed.ptr;
    a.nseg = own.nseg;
    a.seg_lo = (const int64_t *)own.lo.ptr, a.seg_hi = (const int64_t *)own.hi.ptr;
    a.seg_row = (const int32_t *)own.row.ptr, a.row_seg = (const int64_t *)own.seg.ptr;
    a.PA = fp(e->PA), a.PB = fp(e->PB);
    MF_TRY(gemm(e, X, true, fp(e->AP), own.rows));
    MF_TRY(cg_dispatch(e, a, true));
    for (int step = 0; step < e->cg_steps; step++) {
        a.step = step;
        MF_TRY(gemm(e, fp(e->P), false, fp(e->AP), own.rows));
        MF_TRY(cg_dispatch(e, a, false));
    }
    return check_failed(e, s);
}

template <int VPL> mf_status loss_launch(cuda_engine *e, ials::loss_args &a, unsigned grid)
{
    ials::loss_rows<VPL><<<grid, 256, 0, mf_cuda_of(e->ctx)->stream>>>(a);
    return MF_CUDA_LAUNCHED(e->ctx, "ials loss_rows");
}

/* The block sums of one loss launch over `rows`, added on the host in block order. */
mf_status loss_part(cuda_engine *e, ials::loss_args &a, double *out)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const unsigned grid = (unsigned)(((int64_t)a.rows + 7) / 8);
    *out = 0.0;
    if (a.rows == 0)
        return MF_OK;
    mf_status st;
    switch (e->vpl) {
    case 1: st = loss_launch<1>(e, a, grid); break;
    case 2: st = loss_launch<2>(e, a, grid); break;
    case 4: st = loss_launch<4>(e, a, grid); break;
    case 8: st = loss_launch<8>(e, a, grid); break;
    default: st = loss_launch<16>(e, a, grid); break;
    }
    MF_TRY(st);
    double *h = (double *)malloc((size_t)grid * sizeof *h);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    cudaError_t err =
        cudaMemcpyAsync(h, a.partial, (size_t)grid * sizeof *h, cudaMemcpyDeviceToHost, stream);
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

mf_status engine_loss(mf_ials_engine *base, double *loss)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    const side &u = e->by[0], &v = e->by[1];
    MF_TRY(gram(e, e->F[1].ptr, v.rows));
    ials::loss_args a = {u.rows,      u.ptr,
                         u.idx,       u.val,
                         e->F[0].ptr, e->F[1].ptr,
                         fp(e->G),    e->is_half,
                         e->lambda,   e->alpha,
                         e->epsilon,  e->log_confidence,
                         e->kp,       (double *)e->partial.ptr};
    double users = 0.0, items = 0.0;
    MF_TRY(loss_part(e, a, &users));
    a.rows = v.rows, a.ptr = NULL, a.X = e->F[1].ptr;
    MF_TRY(loss_part(e, a, &items));
    *loss = (users + items) / ((double)u.rows * (double)v.rows);
    return MF_OK;
}

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
    free(e);
}

/* A working factor from host X0 (rows x k floats; halves converted on the host), or
 * zeros. */
mf_status alloc_factor(cuda_engine *e, mf_dbuf *F, int32_t rows, const float *X0, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const size_t eb = fac_bytes(e);
    MF_TRY(mf_dmem_alloc(ctx, F, ((size_t)rows * e->kp + 1) * eb, what));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(F->ptr, 0, F->bytes, stream));
    if (!X0 || rows == 0)
        return MF_OK;
    if (!e->is_half) {
        MF_CUDA_TRY(ctx,
                    cudaMemcpy2DAsync(F->ptr, (size_t)e->kp * sizeof(float), X0,
                                      (size_t)e->k * sizeof(float), (size_t)e->k * sizeof(float),
                                      (size_t)rows, cudaMemcpyHostToDevice, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream)); /* X0 is the driver's to free */
        return MF_OK;
    }
    __half *h = (__half *)malloc((size_t)rows * e->k * sizeof *h + 1);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    for (int64_t i = 0; i < (int64_t)rows * e->k; i++)
        h[i] = __float2half_rn(X0[i]);
    cudaError_t err =
        cudaMemcpy2DAsync(F->ptr, (size_t)e->kp * sizeof *h, h, (size_t)e->k * sizeof *h,
                          (size_t)e->k * sizeof *h, (size_t)rows, cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    free(h);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "iALS factor upload", __FILE__, __LINE__);
    return MF_OK;
}

/* Side sd's segments from its row offsets (host): one per IALS_SEGMENT interactions of each
 * row longer than that (ials_kernels.cuh, cg_args). */
mf_status build_segments(cuda_engine *e, side *sd, const int64_t *ptr)
{
    mf_ctx *ctx = e->ctx;
    const int32_t rows = sd->rows;
    int64_t *row_seg = (int64_t *)malloc(((size_t)rows + 1) * sizeof *row_seg);
    if (!row_seg)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    row_seg[0] = 0;
    for (int32_t r = 0; r < rows; r++) {
        const int64_t n = ptr[r + 1] - ptr[r];
        row_seg[r + 1] =
            row_seg[r] + (n > IALS_SEGMENT ? (n + IALS_SEGMENT - 1) / IALS_SEGMENT : 0);
    }
    const int64_t nseg = row_seg[rows];
    int64_t *lo = (int64_t *)malloc(((size_t)nseg * 2 + 1) * sizeof *lo), *hi = lo + nseg;
    int32_t *srow = (int32_t *)malloc(((size_t)nseg + 1) * sizeof *srow);
    mf_status st = MF_OK;
    if (!lo || !srow)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    for (int32_t r = 0; st == MF_OK && r < rows; r++)
        for (int64_t g = row_seg[r]; g < row_seg[r + 1]; g++) {
            const int64_t b = ptr[r] + (g - row_seg[r]) * IALS_SEGMENT;
            lo[g] = b;
            hi[g] = b + IALS_SEGMENT < ptr[r + 1] ? b + IALS_SEGMENT : ptr[r + 1];
            srow[g] = r;
        }
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->lo, lo, ((size_t)nseg + 1) * sizeof *lo, "iALS segment starts");
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->hi, hi, ((size_t)nseg + 1) * sizeof *hi, "iALS segment ends");
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->row, srow, ((size_t)nseg + 1) * sizeof *srow, "iALS segment rows");
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->seg, row_seg, ((size_t)rows + 1) * sizeof *row_seg,
                       "iALS row segments");
    if (st == MF_OK)
        st = mf_cuda_sync(ctx); /* the host arrays go now */
    sd->nseg = nseg;
    free(row_seg);
    free(lo);
    free(srow);
    return st;
}

mf_status setup(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    if (e->cg_steps == 0) {
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
        MF_CUDA_TRY(ctx, cudaFuncSetAttribute(ials::exact_solve,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)ials::exact_smem_bytes(e->k)));
    }
    MF_TRY(mf_sparse_device_csr(R, &e->by[0].ptr, &e->by[0].idx, &e->by[0].val));
    e->by[0].rows = R->rows;
    e->by[1].rows = R->cols;
    MF_TRY(mf_sparse_device_csc(R, &e->by[1].ptr, &e->by[1].idx, &e->by[1].val));
    MF_TRY(alloc_factor(e, &e->F[0], R->rows, s->U0, "iALS user factors"));
    MF_TRY(alloc_factor(e, &e->F[1], R->cols, s->V0, "iALS item factors"));
    const size_t kk = (size_t)e->kp * e->kp;
    const int T = e->kp / 32, tiles = T * (T + 1) / 2;
    /* Enough chunks for about 4 blocks per SM, each with at least 1024 rows. */
    e->chunks = (4 * mf_cuda_of(ctx)->prop.multiProcessorCount + tiles - 1) / tiles;
    MF_TRY(mf_dmem_alloc(ctx, &e->G, kk * sizeof(float), "iALS Gram matrix"));
    MF_TRY(
        mf_dmem_alloc(ctx, &e->part, (size_t)e->chunks * kk * sizeof(float), "iALS Gram partials"));
    MF_TRY(mf_dmem_alloc(ctx, &e->failed, sizeof(unsigned long long), "iALS breakdown word"));
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    MF_TRY(mf_dmem_alloc(ctx, &e->partial, ((lines + 7) / 8 + 1) * sizeof(double),
                         "iALS loss partials"));
    if (e->cg_steps > 0) {
        const size_t bytes = (lines * e->kp + 1) * sizeof(float);
        MF_TRY(mf_dmem_alloc(ctx, &e->R, bytes, "iALS CG residuals"));
        MF_TRY(mf_dmem_alloc(ctx, &e->P, bytes, "iALS CG directions"));
        MF_TRY(mf_dmem_alloc(ctx, &e->AP, bytes, "iALS CG products"));
        MF_TRY(mf_dmem_alloc(ctx, &e->rs, (lines + 1) * sizeof(float), "iALS CG norms"));
        /* The item side's offsets come from the device CSC (the host may hold no transpose). */
        int64_t *cptr = (int64_t *)malloc(((size_t)R->cols + 1) * sizeof *cptr);
        if (!cptr)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
        mf_status st = mf_cuda_copy(ctx, cptr, e->by[1].ptr, ((size_t)R->cols + 1) * sizeof *cptr);
        if (st == MF_OK)
            st = build_segments(e, &e->by[0], R->row_ptr);
        if (st == MF_OK)
            st = build_segments(e, &e->by[1], cptr);
        free(cptr);
        MF_TRY(st);
        const int64_t nseg = e->by[0].nseg > e->by[1].nseg ? e->by[0].nseg : e->by[1].nseg;
        const size_t pbytes = ((size_t)nseg * e->kp + 1) * sizeof(float);
        MF_TRY(mf_dmem_alloc(ctx, &e->PA, pbytes, "iALS CG partial sums"));
        MF_TRY(mf_dmem_alloc(ctx, &e->PB, pbytes, "iALS CG partial right-hand sides"));
    }
    return MF_OK;
}

} // namespace

extern "C" mf_status mf_cuda_ials_engine(const mf_ials_setup *s, mf_ials_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    e->base.half_step = half_step;
    e->base.loss = engine_loss;
    e->base.finish = engine_finish;
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
    mf_status st = setup(e, s);
    if (st != MF_OK) {
        engine_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
