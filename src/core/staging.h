/* Host arrays staged through the context's memory manager for a CUDA call. */
#ifndef MF_CORE_STAGING_H
#define MF_CORE_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "core/device_memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocate `bytes` on the device and copy `src` (host or device) into it; on failure the
 * buffer is left empty. `what` names the purpose in messages. */
mf_status mf_upload(mf_ctx *ctx, mf_dbuf *buf, const void *src, size_t bytes, const char *what);

/* Device room for an output of `bytes`: a copy of `src` when the computation reads the
 * output's old contents (beta != 0), else uninitialized memory. */
mf_status mf_stage_output(mf_ctx *ctx, mf_dbuf *buf, const void *src, size_t bytes, int read_old,
                          const char *what);

/* n floats of `where` memory set to value (on the device: queued on the context's stream
 * and waited for). NULL or n == 0 does nothing. */
mf_status mf_fill_output(mf_ctx *ctx, float *out, int64_t n, float value, mf_memory where);

/* Bytes spanned by a row-major rows x k matrix with leading dimension ld: the last row
 * needs only k entries, so callers may pass exactly-sized arrays. */
static inline size_t mf_matrix_bytes(int64_t rows, int64_t k, int64_t ld)
{
    return rows > 0 ? (size_t)((rows - 1) * ld + k) * sizeof(float) : 0;
}

#ifdef __cplusplus
}
#endif
#endif
