// The stream-ordered pool behind the memory manager: one cudaMemPool per context, so that
// mfact's allocations neither disturb nor depend on the device's default pool, and memory
// freed by one call is reused by the next without a trip through the driver.
#include <stdint.h>

#include "cuda/cuda_internal.h"

static void *pool_alloc(void *user, size_t bytes, void *stream)
{
    mf_cuda *c = static_cast<mf_cuda *>(user);
    void *p = NULL;
    if (cudaMallocFromPoolAsync(&p, bytes, c->pool, static_cast<cudaStream_t>(stream)) !=
        cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky; keep it quiet */
        return NULL;
    }
    return p;
}

static void pool_free(void *user, void *ptr, size_t bytes, void *stream)
{
    (void)user;
    (void)bytes;
    cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
}

mf_status mf_cuda_pool_create(mf_ctx *ctx, mf_cuda *c, mf_device_source *source)
{
    int supported = 0;
    MF_CUDA_TRY(ctx,
                cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, c->device));
    if (!supported)
        return mf_device_fail(
            ctx, MF_ERR_UNSUPPORTED,
            "CUDA device %d has no stream-ordered memory pools; pass device_alloc "
            "and device_free in mf_ctx_opts",
            c->device);
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = c->device;
    MF_CUDA_TRY(ctx, cudaMemPoolCreate(&c->pool, &props));
    /* Keep freed memory in the pool across synchronizations (the default threshold of 0
     * would hand it back at every sync); mf_ctx_release_cached_memory trims on request. */
    uint64_t threshold = UINT64_MAX;
    MF_CUDA_TRY(ctx, cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    *source = (mf_device_source){pool_alloc, pool_free, c, "the context's CUDA memory pool"};
    return MF_OK;
}

void mf_cuda_pool_destroy(mf_cuda *c)
{
    if (c->pool) {
        cudaMemPoolDestroy(c->pool);
        c->pool = NULL;
    }
}

extern "C" mf_status mf_cuda_release_cached(mf_ctx *ctx)
{
    mf_cuda *c = mf_cuda_of(ctx);
    if (!c->pool)
        return MF_OK; /* the caller's hooks own their caching */
    mf_device_guard guard(c->device);
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    MF_CUDA_TRY(ctx, cudaMemPoolTrimTo(c->pool, 0));
    return MF_OK;
}
