// Opening a device for a context, its stream, device queries, copies and error translation.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

mf_status mf_cuda_fail(mf_ctx *ctx, cudaError_t err, const char *call, const char *file, int line)
{
    (void)cudaGetLastError();
    mf_status st = err == cudaErrorMemoryAllocation ? MF_ERR_OUT_OF_MEMORY : MF_ERR_CUDA;
    return mf_device_fail(ctx, st, "%s failed: %s (%s) at %s:%d", call, cudaGetErrorString(err),
                          cudaGetErrorName(err), file, line);
}

extern "C" int mf_cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        /* With no driver at all the runtime says "driver version is insufficient": say
         * what is missing instead. */
        void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!driver && (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice))
            snprintf(why, why_len, "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded)");
        else
            snprintf(why, why_len, "%s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
        if (driver)
            dlclose(driver);
        return 0;
    }
    if (n == 0)
        snprintf(why, why_len, "the CUDA runtime reports no devices");
    return n;
}

extern "C" mf_status mf_cuda_open(mf_ctx *ctx, int device, mf_device_source *pool)
{
    mf_cuda *c = static_cast<mf_cuda *>(calloc(1, sizeof(mf_cuda)));
    if (!c)
        return mf_device_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_ctx_create: out of host memory");
    c->device = device;
    mf_device_link_of(ctx)->cuda = c; /* from here on mf_cuda_close cleans up what was made */
    mf_device_guard guard(device);
    MF_CUDA_TRY(ctx, cudaGetDeviceProperties(&c->prop, device));
    int mode = cudaComputeModeDefault;
    MF_CUDA_TRY(ctx, cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device));
    if (mode == cudaComputeModeProhibited)
        return mf_device_fail(ctx, MF_ERR_NO_DEVICE,
                              "CUDA device %d (%s) is in prohibited compute mode", device,
                              c->prop.name);
    MF_CUDA_TRY(ctx, cudaStreamCreateWithFlags(&c->own_stream, cudaStreamNonBlocking));
    c->stream = c->own_stream;
    return pool ? mf_cuda_pool_create(ctx, c, pool) : MF_OK;
}

extern "C" void mf_cuda_close(mf_ctx *ctx)
{
    mf_cuda *c = mf_cuda_of(ctx);
    if (!c)
        return;
    {
        mf_device_guard guard(c->device);
        if (c->stream)
            cudaStreamSynchronize(c->stream);
        mf_cuda_cusparse_destroy(c);
        mf_cuda_pool_destroy(c);
        if (c->own_stream)
            cudaStreamDestroy(c->own_stream);
        (void)cudaGetLastError();
    }
    free(c);
    mf_device_link_of(ctx)->cuda = NULL;
}

extern "C" mf_status mf_cuda_set_stream(mf_ctx *ctx, void *stream)
{
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    cudaStream_t next = stream ? static_cast<cudaStream_t>(stream) : c->own_stream;
    if (next == c->stream)
        return MF_OK;
    /* Work queued on the old stream (stream-ordered frees included) must finish before the
     * new stream may reuse that memory. */
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    c->stream = next;
    return MF_OK;
}

extern "C" void *mf_cuda_stream(const mf_ctx *ctx)
{
    const mf_cuda *c = mf_cuda_of((mf_ctx *)ctx);
    return c ? c->stream : NULL;
}

extern "C" mf_status mf_cuda_device_info(mf_ctx *ctx, mf_device_info *info)
{
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    size_t free_bytes = 0, total_bytes = 0;
    MF_CUDA_TRY(ctx, cudaMemGetInfo(&free_bytes, &total_bytes));
    snprintf(info->name, sizeof info->name, "%s", c->prop.name);
    info->device = c->device;
    info->compute_major = c->prop.major;
    info->compute_minor = c->prop.minor;
    info->multiprocessors = c->prop.multiProcessorCount;
    info->total_memory = total_bytes;
    info->free_memory = free_bytes;
    info->l2_cache_bytes = (size_t)c->prop.l2CacheSize;
    info->shared_memory_per_block_optin = c->prop.sharedMemPerBlockOptin;
    return MF_OK;
}

extern "C" int mf_cuda_is_device_pointer(mf_ctx *ctx, const void *ptr)
{
    cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err != cudaSuccess) {
        mf_cuda_fail(ctx, err, "cudaPointerGetAttributes", __FILE__, __LINE__);
        return -1;
    }
    switch (attr.type) {
    case cudaMemoryTypeDevice: return 2;
    case cudaMemoryTypeManaged: return 1;
    case cudaMemoryTypeHost: return 1; /* pinned host memory: the device can map it */
    default: return 0;
    }
}

extern "C" mf_status mf_cuda_copy(mf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return MF_OK;
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    return MF_OK;
}

extern "C" mf_status mf_cuda_sync(mf_ctx *ctx)
{
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    return MF_OK;
}

#define MF_STR2(x) #x
#define MF_STR(x)  MF_STR2(x)

extern "C" const char *mf_cuda_build_info(void)
{
    return "CUDA " MF_STR(__CUDACC_VER_MAJOR__) "." MF_STR(
        __CUDACC_VER_MINOR__) " (architectures " MFACT_CUDA_ARCHS_STRING ")";
}
