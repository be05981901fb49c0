/* The device services of cuda/cuda_backend.h in a build without CUDA: no device is ever
 * usable, so contexts resolve to the CPU and CUDA-only requests fail clearly. Each
 * algorithm folder stubs its own CUDA engine (<algo>_absent.c). */
#include <stdio.h>

#include "cuda/comm.h"
#include "cuda/cuda_backend.h"

mf_status mf_cuda_absent(mf_ctx *ctx)
{
    return mf_device_fail(ctx, MF_ERR_NO_DEVICE, "mfact was built without CUDA support");
}

int mf_cuda_device_count(char *why, size_t why_len)
{
    snprintf(why, why_len, "mfact was built without CUDA support");
    return 0;
}

mf_status mf_cuda_open(mf_ctx *ctx, int device, mf_device_source *pool)
{
    (void)device;
    (void)pool;
    return mf_cuda_absent(ctx);
}

void mf_cuda_close(mf_ctx *ctx)
{
    (void)ctx;
}

mf_status mf_cuda_set_stream(mf_ctx *ctx, void *stream)
{
    (void)stream;
    return mf_cuda_absent(ctx);
}

void *mf_cuda_stream(const mf_ctx *ctx)
{
    (void)ctx;
    return NULL;
}

mf_status mf_cuda_device_info(mf_ctx *ctx, mf_device_info *info)
{
    (void)info;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_release_cached(mf_ctx *ctx)
{
    return mf_cuda_absent(ctx);
}

int mf_cuda_is_device_pointer(mf_ctx *ctx, const void *ptr)
{
    (void)ptr;
    mf_cuda_absent(ctx);
    return -1;
}

mf_status mf_cuda_copy(mf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_sync(mf_ctx *ctx)
{
    return mf_cuda_absent(ctx);
}

mf_status mf_cuda_random_uniform(mf_ctx *ctx, float *out, int64_t n, float lo, float hi,
                                 uint64_t seed, uint64_t stream)
{
    (void)out;
    (void)n;
    (void)lo;
    (void)hi;
    (void)seed;
    (void)stream;
    return mf_cuda_absent(ctx);
}

const char *mf_cuda_build_info(void)
{
    return "cuda off";
}

mf_status mf_cuda_fill(mf_ctx *ctx, float *out, float value, int64_t n)
{
    (void)out;
    (void)value;
    (void)n;
    return mf_cuda_absent(ctx);
}

size_t mf_cuda_csr_transpose_scratch(int64_t nnz, int32_t cols)
{
    (void)nnz;
    (void)cols;
    return 0;
}

mf_status mf_cuda_csr_transpose(mf_ctx *ctx, const mf_cuda_csr *a, void *scratch, int64_t *col_ptr,
                                int32_t *row, float *val)
{
    (void)a;
    (void)scratch;
    (void)col_ptr;
    (void)row;
    (void)val;
    return mf_cuda_absent(ctx);
}

mf_status mf_nccl_comm_wrap(mf_ctx *ctx, void *nccl_comm, mf_comm **out)
{
    (void)nccl_comm;
    (void)out;
    return mf_device_fail(ctx, MF_ERR_UNSUPPORTED,
                          "mf_ctx_set_nccl_comm: mfact was built without CUDA support");
}

mf_status mf_nccl_comm_init_all(mf_ctx *const *ctxs, int n, mf_comm **out)
{
    (void)n;
    (void)out;
    return mf_device_fail(ctxs[0], MF_ERR_UNSUPPORTED,
                          "mf_ctx_join_local: mfact was built without CUDA support");
}

mf_status mf_nccl_unique_id(mf_ctx *ctx, unsigned char id[MF_NCCL_ID_BYTES])
{
    (void)id;
    return mf_device_fail(ctx, MF_ERR_UNSUPPORTED,
                          "mf_ctx_join_launched: mfact was built without CUDA support");
}

mf_status mf_nccl_comm_init_rank(mf_ctx *ctx, const unsigned char id[MF_NCCL_ID_BYTES], int rank,
                                 int size, mf_comm **out)
{
    (void)id;
    (void)rank;
    (void)size;
    (void)out;
    return mf_device_fail(ctx, MF_ERR_UNSUPPORTED,
                          "mf_ctx_join_launched: mfact was built without CUDA support");
}
