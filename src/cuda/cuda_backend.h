/* The CUDA side of the context, as plain C: what src/core calls. Implemented by the .cu files
 * of src/cuda in CUDA builds, and by src/cuda/cuda_absent.c (every call: MF_ERR_NO_DEVICE)
 * when mfact is built without CUDA, so that core code carries no #ifdefs. Every function
 * that takes a context makes the context's device current for its duration and restores
 * the caller's current device before returning. */
#ifndef MF_CUDA_BACKEND_H
#define MF_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/device_link.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds without CUDA: MF_ERR_NO_DEVICE on ctx, "built without CUDA support"; what every
 * stub (cuda_absent.c, <algo>_absent.c) returns. */
mf_status mf_cuda_absent(mf_ctx *ctx);

/* Usable CUDA devices (0 when none, or built without CUDA); when 0, `why` says why. */
int mf_cuda_device_count(char *why, size_t why_len);

/* Where device memory comes from, as the context's memory manager (core/device_memory.h)
 * takes it: the functions, their user pointer, and a name for messages. */
typedef struct mf_device_source {
    mf_device_alloc_fn alloc;
    mf_device_free_fn free;
    void *user;
    const char *name;
} mf_device_source;

/* Open `device` for ctx: properties and the context's own stream. With `pool` non-NULL
 * (the context has no allocator hooks of the caller's) it also makes a stream-ordered
 * memory pool and returns it there as a source; NULL makes none. */
mf_status mf_cuda_open(mf_ctx *ctx, int device, mf_device_source *pool);
/* Synchronize, release the pool and the stream. Safe on a context that failed to open. */
void mf_cuda_close(mf_ctx *ctx);

/* Make `stream` (NULL: the context's own) the one every later call queues on, after the
 * old one has finished its work. */
mf_status mf_cuda_set_stream(mf_ctx *ctx, void *stream);
void *mf_cuda_stream(const mf_ctx *ctx);
mf_status mf_cuda_device_info(mf_ctx *ctx, mf_device_info *info);
mf_status mf_cuda_release_cached(mf_ctx *ctx);

/* Where ptr points: 0 host memory only, 1 memory both sides reach (managed, mapped pinned),
 * 2 device memory only; -1 when the query failed (recorded on ctx). */
int mf_cuda_is_device_pointer(mf_ctx *ctx, const void *ptr);

/* Copy bytes between any two of host and device memory, finished on return. */
mf_status mf_cuda_copy(mf_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Wait for the work queued on the context's stream. */
mf_status mf_cuda_sync(mf_ctx *ctx);

/* out[i] = lo + (hi - lo) * u(seed, stream, i) on the device: the kernel twin of
 * mf_random_uniform_host (core/random.h), bit-identical to it. */
mf_status mf_cuda_random_uniform(mf_ctx *ctx, float *out, int64_t n, float lo, float hi,
                                 uint64_t seed, uint64_t stream);

/* A CSR matrix in device memory, for mf_cuda_csr_transpose. val NULL: a pattern. */
typedef struct mf_cuda_csr {
    int32_t rows, cols;
    int64_t nnz;
    const int64_t *row_ptr;
    const int32_t *col;
    const float *val;
} mf_cuda_csr;

/* Device scratch bytes mf_cuda_csr_transpose needs; 0 when the matrix is out of its reach
 * (no entries, or more than 2^31 - 1: then the caller transposes on the host). */
size_t mf_cuda_csr_transpose_scratch(int64_t nnz, int32_t cols);

/* The CSC of `a` on the device, stream-ordered: col_ptr (cols + 1), row (nnz) and, unless
 * `a` is a pattern, val (nnz), with each column's rows ascending: the same arrays as the
 * host transpose. scratch holds mf_cuda_csr_transpose_scratch() bytes. */
mf_status mf_cuda_csr_transpose(mf_ctx *ctx, const mf_cuda_csr *a, void *scratch, int64_t *col_ptr,
                                int32_t *row, float *val);

/* out[0..n) = value on the device. */
mf_status mf_cuda_fill(mf_ctx *ctx, float *out, float value, int64_t n);

/* "CUDA 13.0 (runtime 13.0, archs 80;90a)" or "cuda off". Static storage. */
const char *mf_cuda_build_info(void);

#ifdef __cplusplus
}
#endif
#endif
