// mf_cuda_fill: a constant into a device array (a pattern's unit values for cuSPARSE).
#include "cuda/cuda_internal.h"

__global__ void fill_kernel(float *out, float value, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = value;
}

extern "C" mf_status mf_cuda_fill(mf_ctx *ctx, float *out, float value, int64_t n)
{
    if (n <= 0)
        return MF_OK;
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    fill_kernel<<<mf_cuda_grid(c, n, 256, 16), 256, 0, c->stream>>>(out, value, n);
    return MF_CUDA_LAUNCHED(ctx, "fill_kernel");
}
