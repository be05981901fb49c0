/* Shared by the .cu files of src/cuda and of the algorithms: the per-context device state,
 * error translation, the launch check, and the guard that makes the context's device
 * current for one call. CUDA C++ only. It reaches the context only through its
 * mf_device_link (device_link.h), so it includes nothing of src/core. */
#ifndef MF_CUDA_INTERNAL_H
#define MF_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"

struct mf_cuda {
    int device;
    cudaDeviceProp prop;
    cudaStream_t own_stream; /* created by mfact */
    cudaStream_t stream;     /* in use: own_stream or the caller's */
    cudaMemPool_t pool;      /* NULL when the caller's allocator hooks serve the context */
    void *cusparse;          /* cusparseHandle_t, created on first use (cusparse_handle.cu) */
};

/* Record a failed CUDA call on ctx as MF_ERR_CUDA (MF_ERR_OUT_OF_MEMORY for allocation
 * failures) naming the call, the error and the place; returns the status. Clears CUDA's
 * last error so that it does not leak into the caller's next check. */
mf_status mf_cuda_fail(mf_ctx *ctx, cudaError_t err, const char *call, const char *file, int line);

#define MF_CUDA_TRY(ctx, call)                                                                     \
    do {                                                                                           \
        cudaError_t mf_cuda_err_ = (call);                                                         \
        if (mf_cuda_err_ != cudaSuccess)                                                           \
            return mf_cuda_fail((ctx), mf_cuda_err_, #call, __FILE__, __LINE__);                   \
    } while (0)

/* After a kernel launch: the launch's own error (a bad configuration, too much shared
 * memory, a sticky fault) as mf_cuda_fail names it, with `what` and the caller's place;
 * the one way launches are checked. */
#define MF_CUDA_LAUNCHED(ctx, what) mf_cuda_launched((ctx), (what), __FILE__, __LINE__)
static inline mf_status mf_cuda_launched(mf_ctx *ctx, const char *what, const char *file, int line)
{
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? MF_OK : mf_cuda_fail(ctx, err, what, file, line);
}

/* Makes `device` current for the guard's lifetime and restores the caller's device. */
class mf_device_guard
{
  public:
    explicit mf_device_guard(int device)
    {
        if (cudaGetDevice(&previous_) != cudaSuccess)
            previous_ = -1;
        if (previous_ != device)
            cudaSetDevice(device);
    }
    ~mf_device_guard()
    {
        int now = -1;
        if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_)
            cudaSetDevice(previous_);
    }
    mf_device_guard(const mf_device_guard &) = delete;
    mf_device_guard &operator=(const mf_device_guard &) = delete;

  private:
    int previous_;
};

/* Blocks for a grid-stride loop over n elements with `threads` per block: enough to cover
 * n, at most `per_sm` blocks per multiprocessor (the loop does the rest). */
static inline unsigned mf_cuda_grid(const mf_cuda *c, int64_t n, int threads, int per_sm)
{
    int64_t grid = (n + threads - 1) / threads, cap = (int64_t)c->prop.multiProcessorCount * per_sm;
    return (unsigned)(grid < 1 ? 1 : grid < cap ? grid : cap);
}

struct mf_cusparse_api;
/* The context's cuSPARSE handle, created on first use and bound to the current stream, and
 * the functions to call with it (cusparse_api.h). */
mf_status mf_cuda_cusparse(mf_ctx *ctx, void **handle, const struct mf_cusparse_api **api);
void mf_cuda_cusparse_destroy(mf_cuda *c);

/* The context's device state (NULL on a CPU context). */
static inline mf_cuda *mf_cuda_of(mf_ctx *ctx)
{
    return mf_device_link_of(ctx)->cuda;
}

/* The pool as a source for the memory manager (device_pool.cu). */
mf_status mf_cuda_pool_create(mf_ctx *ctx, mf_cuda *c, mf_device_source *source);
void mf_cuda_pool_destroy(mf_cuda *c);

#endif
