/* The device-memory manager: one per context, and the only way any algorithm allocates
 * device memory. It does the accounting (current, peak, counts), enforces the context's
 * byte limit with a clear MF_ERR_OUT_OF_MEMORY, and delegates the allocation itself to a
 * source: the context's stream-ordered cudaMemPool (device_pool.cu) or the caller's hooks.
 * This file is plain C with no CUDA types, so CPU-only builds compile and test it. */
#ifndef MF_CORE_DEVICE_MEMORY_H
#define MF_CORE_DEVICE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The alignment mf_dmem_alloc guarantees (and checks of an application's allocator). */
#define MF_DMEM_ALIGN 16

/* A device allocation and its size: callers keep the pair, so freeing needs no lookup. */
typedef struct mf_dbuf {
    void *ptr;
    size_t bytes;
} mf_dbuf;

typedef struct mf_dmem {
    mf_device_alloc_fn alloc; /* the source; NULL until a CUDA backend is opened */
    mf_device_free_fn free;
    void *user;
    void *stream;            /* the context's current stream, passed to the source */
    const char *source_name; /* for messages: "the stream-ordered pool", ... */
    size_t limit;            /* 0 = none */
    size_t current, peak;
    uint64_t allocations, failed;
} mf_dmem;

void mf_dmem_init(mf_dmem *m, size_t limit);
void mf_dmem_set_source(mf_dmem *m, mf_device_alloc_fn alloc, mf_device_free_fn free, void *user,
                        const char *source_name);

/* Allocate `bytes` (0 gives ptr NULL and succeeds) in stream order on the context's
 * stream. `what` names the purpose for the failure message. On failure *buf is zeroed. */
mf_status mf_dmem_alloc(mf_ctx *ctx, mf_dbuf *buf, size_t bytes, const char *what);
/* Release a buffer from mf_dmem_alloc (NULL ptr is a no-op) and zero it. */
void mf_dmem_free(mf_ctx *ctx, mf_dbuf *buf);

void mf_dmem_stats(const mf_dmem *m, mf_memory_stats *out);

/* The peak of one call, for its report: begin restarts the peak at the current use and
 * returns the context's peak so far; end folds the call's peak back in and returns it. */
size_t mf_dmem_peak_begin(mf_dmem *m);
size_t mf_dmem_peak_end(mf_dmem *m, size_t saved);

#ifdef __cplusplus
}
#endif
#endif
