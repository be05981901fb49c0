/* The CUDA engine of Hogwild SGD (sgd_engine.cuh): the factors in (packed into the working
 * storage) and out (unpacked into the caller's floats, the biases unstrided), and the RMSE
 * of the working factors. */
#include <math.h>
#include <stdlib.h>

#include "sddmm/sddmm.h"
#include "sgd/sgd_engine.cuh"

namespace mf_sgd_gpu
{

namespace
{

template <int KPL> const void *rmse_fn()
{
    return reinterpret_cast<const void *>(&sgd::rmse_half_kernel<KPL>);
}
const void *rmse_half_kernel_for(const cuda_engine *e)
{
    switch (e->kpl) {
    case 1: return rmse_fn<1>();
    case 2: return rmse_fn<2>();
    case 4: return rmse_fn<4>();
    case 8: return rmse_fn<8>();
    default: return rmse_fn<16>();
    }
}

/* The strided biases (MF_SGD_BIAS_STRIDE) into packed arrays bu and bi (host or device;
 * either may be NULL), the items' in their own numbers; waits for the copies. */
mf_status unstride_biases(cuda_engine *e, float *bu, float *bi)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const size_t pitch = MF_SGD_BIAS_STRIDE * sizeof(float);
    if (bu && e->rows > 0)
        MF_CUDA_TRY(ctx, cudaMemcpy2DAsync(bu, sizeof(float), e->bu.ptr, pitch, sizeof(float),
                                           (size_t)e->rows, cudaMemcpyDefault, stream));
    if (bi && e->cols > 0 && !e->row_of.ptr)
        MF_CUDA_TRY(ctx, cudaMemcpy2DAsync(bi, sizeof(float), e->bi.ptr, pitch, sizeof(float),
                                           (size_t)e->cols, cudaMemcpyDefault, stream));
    if (bi && e->cols > 0 && e->row_of.ptr) { /* renumbered rows: gathered on the device */
        mf_dbuf tmp = {NULL, 0};
        MF_TRY(mf_dmem_alloc(ctx, &tmp, (size_t)e->cols * sizeof(float), "SGD item biases"));
        sgd::gather_bias_kernel<<<mf_cuda_grid(ctx->link.cuda, e->cols, 256, 8), 256, 0, stream>>>(
            (const float *)e->bi.ptr, (const int32_t *)e->row_of.ptr, e->cols, (float *)tmp.ptr);
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(bi, tmp.ptr, tmp.bytes, cudaMemcpyDefault, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
        mf_dmem_free(ctx, &tmp);
        if (err != cudaSuccess)
            return mf_cuda_fail(ctx, err, "SGD item bias copy-out", __FILE__, __LINE__);
    }
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    return MF_OK;
}

/* The working factor X (rows x kp storage) as floats in `out` (rows x k, allocated here),
 * row r from row map[r] of X (NULL: r). */
mf_status unpack_rows(cuda_engine *e, const mf_dbuf *X, int32_t rows, const int32_t *map,
                      mf_dbuf *out, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    MF_TRY(mf_dmem_alloc(ctx, out, (size_t)rows * e->k * sizeof(float), what));
    if (rows == 0)
        return MF_OK;
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)rows * e->k, 256, 8);
    if (e->half)
        sgd::unpack_kernel<true>
            <<<grid, 256, 0, stream>>>(X->ptr, (float *)out->ptr, rows, e->k, e->kp, map);
    else
        sgd::unpack_kernel<false>
            <<<grid, 256, 0, stream>>>(X->ptr, (float *)out->ptr, rows, e->k, e->kp, map);
    MF_CUDA_TRY(ctx, cudaGetLastError());
    return MF_OK;
}

/* The working factor X (rows x kp storage, row r at row map[r], NULL: r) as floats (rows x k)
 * at dst (leading dimension ld), host or device. */
mf_status copy_out(cuda_engine *e, const mf_dbuf *X, int32_t rows, const int32_t *map, float *dst,
                   int64_t ld)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    if ((size_t)rows * e->k == 0)
        return MF_OK;
    mf_dbuf tmp = {NULL, 0};
    mf_status st = unpack_rows(e, X, rows, map, &tmp, "SGD factors for the caller");
    if (st != MF_OK) {
        mf_dmem_free(ctx, &tmp);
        return st;
    }
    cudaError_t err =
        cudaMemcpy2DAsync(dst, (size_t)ld * sizeof(float), tmp.ptr, (size_t)e->k * sizeof(float),
                          (size_t)e->k * sizeof(float), (size_t)rows, cudaMemcpyDefault, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    mf_dmem_free(ctx, &tmp);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD factor copy-out", __FILE__, __LINE__);
    return MF_OK;
}

} // namespace

/* RMSE of the working factors. fp32 factors (rows of kp floats) go to mf_rmse_compute
 * (SDDMM) in place, as every RMSE is computed. fp16 factors keep their own kernel, which
 * widens each element as it loads it: SDDMM takes float factors, and a float copy of both
 * would cost twice the device memory the half storage was chosen to save. */
mf_status engine_rmse(mf_sgd_engine *base, const mf_sparse *R, double *rmse)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    const float *bu = e->biases ? (const float *)e->bu.ptr : NULL;
    const float *bi = e->biases ? (const float *)e->bi.ptr : NULL;
    mf_bias_terms terms = {e->mean, bu, bi};
    if (!e->half) {
        mf_dbuf packed = {NULL, 0}; /* the strided biases, packed for the shared RMSE */
        mf_dbuf items = {NULL, 0};  /* renumbered rows: V in the items' order (cols x k) */
        const float *V = (const float *)e->V.ptr;
        int64_t ldv = e->kp;
        mf_status st = MF_OK;
        if (e->row_of.ptr) {
            st = unpack_rows(e, &e->V, e->cols, (const int32_t *)e->row_of.ptr, &items,
                             "SGD item factors for the RMSE");
            V = (const float *)items.ptr, ldv = e->k;
        }
        if (st == MF_OK && e->biases) {
            st = mf_dmem_alloc(ctx, &packed, ((size_t)e->rows + e->cols + 2) * sizeof(float),
                               "SGD biases for the RMSE");
            if (st == MF_OK)
                st = unstride_biases(e, (float *)packed.ptr, (float *)packed.ptr + e->rows + 1);
            terms.user = (const float *)packed.ptr;
            terms.item = (const float *)packed.ptr + e->rows + 1;
        }
        if (st == MF_OK)
            st = mf_rmse_compute(ctx, (mf_sparse *)R, e->k, (const float *)e->U.ptr, e->kp, V, ldv,
                                 e->biases ? &terms : NULL, MF_MEMORY_DEVICE, rmse);
        mf_dmem_free(ctx, &packed);
        mf_dmem_free(ctx, &items);
        return st;
    }
    cudaStream_t stream = ctx->link.cuda->stream;
    if (R->nnz == 0) {
        *rmse = 0.0;
        return MF_OK;
    }
    sgd::rmse_args a;
    MF_TRY(mf_sparse_device_csr((mf_sparse *)R, &a.ptr, &a.col, &a.val));
    a.U = e->U.ptr;
    a.V = e->V.ptr;
    a.rows = R->rows;
    a.kp = e->kp;
    a.sum = (double *)((char *)e->scratch.ptr + SCRATCH_RMSE);
    a.mean = e->mean;
    a.bu = bu;
    a.bi = bi;
    a.map = (const int32_t *)e->row_of.ptr;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(a.sum, 0, sizeof(double), stream));
    void *args[] = {&a};
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)R->rows * 32, 256, 8);
    MF_CUDA_TRY(ctx,
                cudaLaunchKernel(rmse_half_kernel_for(e), dim3(grid), dim3(256), args, 0, stream));
    double sum = 0.0;
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(&sum, a.sum, sizeof sum, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    *rmse = sqrt(sum / (double)R->nnz);
    return MF_OK;
}

mf_status engine_finish(mf_sgd_engine *base, float *U, float *V, int64_t ld, float *bu, float *bi)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(e->ctx->link.cuda->device);
    MF_TRY(copy_out(e, &e->U, e->rows, NULL, U, ld));
    MF_TRY(copy_out(e, &e->V, e->cols, (const int32_t *)e->row_of.ptr, V, ld));
    if (e->biases)
        MF_TRY(unstride_biases(e, bu, bi));
    return MF_OK;
}

/* The working factor X (rows x kp storage) from the host floats X0 (rows x k), row r at row
 * map[r] (NULL: r), with `spare` rows more (the hot items' replicas, filled before each
 * epoch). */
mf_status copy_in(cuda_engine *e, mf_dbuf *X, int32_t rows, int64_t spare, const int32_t *map,
                  const float *X0, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const size_t elem = e->half ? 2 : 4;
    MF_TRY(mf_dmem_alloc(ctx, X, ((size_t)rows + (size_t)spare) * e->kp * elem, what));
    if (rows == 0)
        return MF_OK;
    mf_dbuf tmp = {NULL, 0};
    const size_t bytes = (size_t)rows * e->k * sizeof(float);
    MF_TRY(mf_dmem_alloc(ctx, &tmp, bytes, "SGD initial factors"));
    cudaError_t err = cudaMemcpyAsync(tmp.ptr, X0, bytes, cudaMemcpyHostToDevice, stream);
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)rows * e->kp, 256, 8);
    if (err == cudaSuccess) {
        if (e->half)
            sgd::pack_kernel<true>
                <<<grid, 256, 0, stream>>>((const float *)tmp.ptr, X->ptr, rows, e->k, e->kp, map);
        else
            sgd::pack_kernel<false>
                <<<grid, 256, 0, stream>>>((const float *)tmp.ptr, X->ptr, rows, e->k, e->kp, map);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess) /* X0 is the caller's to free when this returns */
        err = cudaStreamSynchronize(stream);
    mf_dmem_free(ctx, &tmp);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD factor upload", __FILE__, __LINE__);
    return MF_OK;
}

mf_status upload(cuda_engine *e, mf_dbuf *dst, const void *src, size_t bytes, const char *what)
{
    MF_TRY(mf_dmem_alloc(e->ctx, dst, bytes, what));
    if (bytes)
        MF_CUDA_TRY(e->ctx, cudaMemcpyAsync(dst->ptr, src, bytes, cudaMemcpyHostToDevice,
                                            e->ctx->link.cuda->stream));
    return MF_OK;
}

} // namespace mf_sgd_gpu
