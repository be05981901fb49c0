// Device twin of mf_random_uniform_host: the same Philox block per 4 elements, the same
// float conversion and fused scaling, so the two agree bit for bit.
#include "cuda/cuda_internal.h"
#include "cuda/philox.h"

__global__ void random_uniform_kernel(float *out, int64_t n, float lo, float hi, uint64_t seed,
                                      uint64_t stream)
{
    int64_t blocks = (n + 3) / 4;
    for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < blocks;
         b += (int64_t)gridDim.x * blockDim.x) {
        mf_philox_block r = mf_philox_stream_block(seed, stream, (uint64_t)b);
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (4 * b + j < n)
                out[4 * b + j] = mf_philox_scale(mf_philox_unit_float(r.v[j]), lo, hi);
    }
}

extern "C" mf_status mf_cuda_random_uniform(mf_ctx *ctx, float *out, int64_t n, float lo, float hi,
                                            uint64_t seed, uint64_t stream)
{
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    int64_t blocks = (n + 3) / 4;
    int threads = 256;
    random_uniform_kernel<<<mf_cuda_grid(c, blocks, threads, 32), threads, 0, c->stream>>>(
        out, n, lo, hi, seed, stream);
    mf_status st = MF_CUDA_LAUNCHED(ctx, "random_uniform_kernel");
    if (st != MF_OK)
        return st;
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    return MF_OK;
}
