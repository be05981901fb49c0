/* The CUDA engine of implicit-feedback ALS (ials_engine.cuh). The interactions go to the
 * device once, as the matrix's cached CSR and CSC (or, where they do not fit, stream from
 * host memory: ials_stream.cu). A half-step is a fixed sequence of stream-ordered launches
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
#include "core/ranks.h"
#include "core/staging.h"
#include "ials/ials_engine.cuh"
#include "ials/ials_kernels.cuh"

#include <cuda_fp16.h>

namespace mf_ials_cuda
{

namespace
{

/* ---- G = F^T F by chunks of rows ------------------------------------------------------- */

/* A chunk holds at least GRAM_CHUNK_ROWS rows (fewer rows: one chunk), and a Gram's chunks
 * make at most about GRAM_BLOCKS blocks of gram_partial (a chunk is a block per lower tile).
 * Nothing of the device or the group: every GPU and every group size cuts the chunks alike,
 * so a group's G is one context's bit for bit. 2048 blocks keep about 4 blocks an SM busy
 * on each of 4 H200s (132 SMs) that share them, and the partials under 9 MB at any rank. */
const int64_t GRAM_CHUNK_ROWS = 1024, GRAM_BLOCKS = 2048;

int tiles_of(const cuda_engine *e)
{
    const int T = e->kp / 32;
    return T * (T + 1) / 2;
}

int64_t gram_chunks(int32_t rows, int tiles)
{
    const int64_t most = (GRAM_BLOCKS + tiles - 1) / tiles,
                  n = ((int64_t)rows + GRAM_CHUNK_ROWS - 1) / GRAM_CHUNK_ROWS;
    return n < 1 ? 1 : n < most ? n : most;
}

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

/* This rank's own: V's whole Gram here, every user and item. */
mf_status engine_loss(mf_ials_engine *base, double *loss)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    const side &u = e->by[0], &v = e->by[1];
    MF_TRY(gram_partials(e, MF_IALS_USERS, 0, e->chunks[1]));
    MF_TRY(gram_sum(e, MF_IALS_USERS));
    double users = 0.0, items = 0.0;
    if (e->z)
        MF_TRY(stream_loss_users(e, &users));
    else
        MF_TRY(loss_part(e, u.rows, u.ptr, u.idx, u.val, e->F[0].ptr, &users));
    MF_TRY(loss_part(e, v.rows, NULL, NULL, NULL, e->F[1].ptr, &items));
    *loss = (users + items) / ((double)u.rows * (double)v.rows);
    return MF_OK;
}

/* ---- the factors out, the end ------------------------------------------------------------ */

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

/* ---- the set-up ------------------------------------------------------------------------ */

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
    /* The share's rows only, numbered from its first (engine_solve moves the row pointers). */
    const int32_t rows = sd->count;
    ptr += sd->first;
    int64_t *row_seg = (int64_t *)malloc(((size_t)rows + 1) * sizeof *row_seg);
    if (!row_seg)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    segment_starts(ptr, rows, row_seg);
    const int64_t nseg = row_seg[rows];
    int64_t *lo = (int64_t *)malloc(((size_t)nseg * 2 + 1) * sizeof *lo), *hi = lo + nseg;
    int32_t *srow = (int32_t *)malloc(((size_t)nseg + 1) * sizeof *srow);
    mf_status st = MF_OK;
    if (!lo || !srow)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    if (st == MF_OK)
        fill_segments(ptr, row_seg, 0, rows, 0, 0, lo, hi, srow);
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

/* The Gram partials' bytes: the larger side's chunks. */
size_t part_bytes(const cuda_engine *e)
{
    const int64_t most = e->chunks[0] > e->chunks[1] ? e->chunks[0] : e->chunks[1];
    return (size_t)most * tiles_of(e) * 1024 * sizeof(float);
}

/* The device bytes of alloc_common, and with fp16 the float copy that finish makes. */
size_t common_bytes(const cuda_engine *e, const mf_sparse *R)
{
    const size_t eb = fac_bytes(e), kk = (size_t)e->kp * e->kp;
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    size_t b = ((size_t)R->rows * e->kp + 1) * eb + ((size_t)R->cols * e->kp + 1) * eb;
    b += kk * sizeof(float) + part_bytes(e) + 2 * sizeof(unsigned long long);
    b += ((lines + 7) / 8 + 1) * sizeof(double);
    if (e->is_half)
        b += lines * (size_t)e->k * sizeof(float);
    return b;
}

int64_t count_segments(const int64_t *ptr, int32_t rows)
{
    int64_t n = 0;
    for (int32_t r = 0; r < rows; r++)
        n += segments_of(ptr[r + 1] - ptr[r]);
    return n;
}

/* The resident mode's peak: the CSR (unless the matrix holds it already) and the CSC, with
 * the device sort's scratch while the CSC is built (gone before the factors come), then
 * common_bytes and CG's vectors, segments and partial sums. Without a host transpose the
 * items' segments are bounded: a column past IALS_SEGMENT has at most n / IALS_SEGMENT + 1,
 * and at most nnz / (IALS_SEGMENT + 1) columns are past it. *inter: the two orientations. */
size_t resident_bytes(const cuda_engine *e, const mf_sparse *R, size_t common, size_t *inter)
{
    const size_t n = (size_t)R->nnz, per = R->val ? 8 : 4;
    const size_t csr = ((size_t)R->rows + 1) * 8 + n * per,
                 csc = ((size_t)R->cols + 1) * 8 + n * per;
    *inter = csr + csc;
    const size_t scratch = R->transpose.ptr ? 0 : mf_cuda_csr_transpose_scratch(R->nnz, R->cols);
    size_t work = common;
    if (e->cg_steps > 0) {
        const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
        work += 3 * (lines * e->kp + 1) * sizeof(float) + (lines + 1) * sizeof(float);
        const int64_t su = count_segments(R->row_ptr, R->rows);
        int64_t sv;
        if (R->transpose.ptr) {
            sv = count_segments(R->transpose.ptr, R->cols);
        } else {
            const int64_t long_cols = R->nnz / (IALS_SEGMENT + 1);
            sv = (R->nnz + IALS_SEGMENT - 1) / IALS_SEGMENT +
                 (long_cols < R->cols ? long_cols : R->cols);
        }
        work += ((size_t)su + 1 + (size_t)sv + 1) * (8 + 8 + 4) +
                ((size_t)R->rows + 1 + (size_t)R->cols + 1) * 8;
        work += 2 * (((size_t)(su > sv ? su : sv) * e->kp + 1) * sizeof(float));
    }
    return (R->device.row_ptr.ptr ? 0 : csr) + csc + (scratch > work ? scratch : work);
}

/* The resident mode: the interactions on the device in both orientations, as they were
 * before streaming existed. */
mf_status setup_resident(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    MF_TRY(mf_sparse_device_csr(R, &e->by[0].ptr, &e->by[0].idx, &e->by[0].val));
    MF_TRY(mf_sparse_device_csc(R, &e->by[1].ptr, &e->by[1].idx, &e->by[1].val));
    MF_TRY(alloc_common(e, s));
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
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
    e->by[0].rows = R->rows;
    e->by[1].rows = R->cols;
    for (int w = 0; w < 2; w++) {
        e->by[w].first = s->lo[w];
        e->by[w].count = s->hi[w] - s->lo[w];
    }
    for (int w = 0; w < 2; w++)
        e->chunks[w] = gram_chunks(e->by[w].rows, tiles_of(e));
    /* Resident or streamed: the room is what the limit leaves (its accounting is exact, so a
     * small margin), or else what the device has free (a larger one: other users, the pool's
     * rounding). */
    const mf_dmem *m = &ctx->dmem;
    const bool limited = m->limit != 0;
    size_t avail = 0;
    if (limited) {
        avail = m->limit > m->current ? m->limit - m->current : 0;
    } else {
        size_t total = 0;
        MF_CUDA_TRY(ctx, cudaMemGetInfo(&avail, &total));
        /* What the context's pool keeps from earlier frees serves this run too. */
        const cudaMemPool_t pool = mf_cuda_of(ctx)->pool;
        if (pool) {
            uint64_t reserved = 0, used = 0; /* the attributes are cuuint64_t */
            MF_CUDA_TRY(
                ctx, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
            MF_CUDA_TRY(ctx, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
            avail += reserved > used ? (size_t)(reserved - used) : 0;
        }
    }
    const size_t usable = avail - avail / (limited ? 32 : 8);
    const size_t common = common_bytes(e, R);
    size_t inter = 0;
    if (resident_bytes(e, R, common, &inter) <= usable)
        return setup_resident(e, s);
    if (mf_ranks(ctx) > 1)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s: over a group of contexts the interactions must fit on each device "
                       "(%zu bytes needed beside the factors, %zu available); streaming them "
                       "from host memory runs on one context",
                       e->fn, inter, usable > common ? usable - common : (size_t)0);
    return stream_setup(e, s, common, inter, usable, limited);
}

} // namespace

/* ---- what ials_stream.cu shares -------------------------------------------------------- */

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

/* CG's segments of a row of n interactions (ials_kernels.cuh, cg_args). */
int64_t segments_of(int64_t n)
{
    return n > IALS_SEGMENT ? (n + IALS_SEGMENT - 1) / IALS_SEGMENT : 0;
}

/* row_seg[0..rows]: the first segment of each of the rows of ptr (rows + 1 offsets). */
void segment_starts(const int64_t *ptr, int32_t rows, int64_t *row_seg)
{
    row_seg[0] = 0;
    for (int32_t r = 0; r < rows; r++)
        row_seg[r + 1] = row_seg[r] + segments_of(ptr[r + 1] - ptr[r]);
}

/* The segments of rows [r0, r1) (row_seg as segment_starts makes it): their interactions
 * [lo, hi) less p0, and their rows less r0, at their index less s0 (a streamed batch's
 * rebasing; all 0 for a whole side). */
void fill_segments(const int64_t *ptr, const int64_t *row_seg, int32_t r0, int32_t r1, int64_t p0,
                   int64_t s0, int64_t *lo, int64_t *hi, int32_t *srow)
{
    for (int32_t r = r0; r < r1; r++)
        for (int64_t g = row_seg[r]; g < row_seg[r + 1]; g++) {
            const int64_t first = ptr[r] + (g - row_seg[r]) * IALS_SEGMENT;
            lo[g - s0] = first - p0;
            hi[g - s0] =
                (first + IALS_SEGMENT < ptr[r + 1] ? first + IALS_SEGMENT : ptr[r + 1]) - p0;
            srow[g - s0] = r - r0;
        }
}

mf_status alloc_common(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    const mf_sparse *R = s->R;
    MF_TRY(alloc_factor(e, &e->F[0], R->rows, s->U0, "iALS user factors"));
    MF_TRY(alloc_factor(e, &e->F[1], R->cols, s->V0, "iALS item factors"));
    const size_t kk = (size_t)e->kp * e->kp;
    MF_TRY(mf_dmem_alloc(ctx, &e->G, kk * sizeof(float), "iALS Gram matrix"));
    MF_TRY(mf_dmem_alloc(ctx, &e->part, part_bytes(e), "iALS Gram partials"));
    MF_TRY(mf_dmem_alloc(ctx, &e->failed, 2 * sizeof(unsigned long long), "iALS breakdown words"));
    MF_CUDA_TRY(ctx,
                cudaMemsetAsync(e->failed.ptr, 0xff, e->failed.bytes, mf_cuda_of(ctx)->stream));
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    MF_TRY(mf_dmem_alloc(ctx, &e->partial, ((lines + 7) / 8 + 1) * sizeof(double),
                         "iALS loss partials"));
    return MF_OK;
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
    e->base.loss = engine_loss;
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
    mf_status st = setup(e, s);
    if (st != MF_OK) {
        engine_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
