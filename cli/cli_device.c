#include "cli_device.h"

#include <stdlib.h>

#ifdef MFACT_CLI_CUDA
#include <cuda_runtime_api.h>
#endif

void *cli_alloc(mf_memory where, size_t bytes)
{
#ifdef MFACT_CLI_CUDA
    if (where == MF_MEMORY_DEVICE) {
        void *p = NULL;
        return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
    }
#endif
    return where == MF_MEMORY_HOST ? malloc(bytes) : NULL;
}

void cli_free(mf_memory where, void *p)
{
#ifdef MFACT_CLI_CUDA
    if (where == MF_MEMORY_DEVICE) {
        if (p)
            cudaFree(p);
        return;
    }
#else
    (void)where;
#endif
    free(p);
}

int cli_sync(mf_ctx *ctx)
{
#ifdef MFACT_CLI_CUDA
    if (mf_ctx_backend(ctx) == MF_BACKEND_CUDA)
        return cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)) == cudaSuccess ? 0 : -1;
#else
    (void)ctx;
#endif
    return 0;
}

int cli_device_count(void)
{
#ifdef MFACT_CLI_CUDA
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
#else
    return 0;
#endif
}
