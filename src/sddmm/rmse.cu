// Sum of squares in double for mf_rmse: per-block partial sums, added on the host in block
// order, so the result does not depend on scheduling.
#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm_internal.h"

#define MF_RMSE_THREADS 256
#define MF_RMSE_BLOCKS  1024

__global__ void __launch_bounds__(MF_RMSE_THREADS)
    sum_squares_kernel(const float *x, int64_t n, double *partial)
{
    __shared__ double warp_sums[MF_RMSE_THREADS / 32];
    double s = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double v = x[i];
        s += v * v;
    }
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < MF_RMSE_THREADS / 32; w++)
            t += warp_sums[w];
        partial[blockIdx.x] = t;
    }
}

extern "C" mf_status mf_cuda_sum_squares(mf_ctx *ctx, const float *x, int64_t n, double *sum)
{
    mf_device_guard guard(ctx->link.cuda->device);
    int64_t grid = (n + MF_RMSE_THREADS - 1) / MF_RMSE_THREADS;
    if (grid > MF_RMSE_BLOCKS)
        grid = MF_RMSE_BLOCKS;
    if (grid < 1)
        grid = 1;
    mf_dbuf partial = {0, 0};
    MF_TRY(mf_dmem_alloc(ctx, &partial, (size_t)grid * sizeof(double), "RMSE partial sums"));
    double host[MF_RMSE_BLOCKS];
    sum_squares_kernel<<<(unsigned)grid, MF_RMSE_THREADS, 0, ctx->link.cuda->stream>>>(
        x, n, (double *)partial.ptr);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(host, partial.ptr, (size_t)grid * sizeof(double),
                              cudaMemcpyDeviceToHost, ctx->link.cuda->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(ctx->link.cuda->stream);
    mf_dmem_free(ctx, &partial);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "summing squared residuals", __FILE__, __LINE__);
    double s = 0.0;
    for (int64_t b = 0; b < grid; b++)
        s += host[b];
    *sum = s;
    return MF_OK;
}
