/* A side's blocks gathered into host memory over a comm whose gathers take device memory
 * (NCCL), through a bounded device buffer (ranks.h: mf_ranks_gather_host). */
#include <stdlib.h>

#include "core/ctx.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/opts.h"
#include "core/ranks.h"
#include "cuda/comm.h"
#include "cuda/cuda_backend.h"

/* 256 MiB: the gather's time is the link's either way (a chunk is hundreds of microseconds
 * at NVLink's bandwidth, against one agreement's tens), while a whole table of users
 * (20.8 GB for Hugewiki's at k = 100) would sit on the device beside the fit's memory. */
#define GATHER_HOST_BYTES ((size_t)256 << 20)

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

mf_status mf_ranks_gather_host(mf_ctx *ctx, const char *fn, mf_status st, const int64_t *bounds,
                               void *rows, size_t row_bytes, void *biases, size_t bias_bytes)
{
    mf_comm *c = ctx->comm;
    const int n = c->size;
    const int64_t m = bounds[n], lo = bounds[c->rank], hi = bounds[c->rank + 1];
    const size_t per_row = row_bytes + (biases ? bias_bytes : 0);
    int64_t chunk = (int64_t)(mf_env_bytes("MFACT_GATHER_HOST_BYTES", GATHER_HOST_BYTES) /
                              (per_row ? per_row : 1));
    if (chunk < 1)
        chunk = 1;
    if (chunk > m)
        chunk = m > 0 ? m : 1;
    int64_t *sub = malloc(((size_t)n + 1) * sizeof *sub);
    mf_dbuf tmp = {NULL, 0};
    if (st == MF_OK && !sub)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &tmp, (size_t)chunk * per_row + 1, "rows gathered to the host");
    char *const dev = (char *)tmp.ptr, *const dev_bias = dev + (size_t)chunk * row_bytes;
    char *const host = (char *)rows, *const host_bias = (char *)biases;
    /* Every rank must cut the same chunks, or the gathers would not pair up: the rows, the
     * chunk (MFACT_GATHER_HOST_BYTES is each process's own) and whether biases travel are
     * compared first, with the allocation's status. An agreement before each chunk then
     * keeps a rank that failed (a copy) from leaving the others waiting in a gather. */
    static const char *const names[] = {"the rows gathered", "the rows a chunk",
                                        "whether biases are gathered"};
    const int64_t same[] = {m, chunk, biases != NULL};
    st = mf_ranks_agree(ctx, fn, st, same, names, 3);
    int agreed_failure = st != MF_OK;
    /* The copies from the device land on touched pages. The contents stay: this rank's
     * rows are in already, and a rank sharing these arrays in one process writes only
     * after the first gather, which waits for every rank's touch. */
    if (!agreed_failure) {
        mf_ranks_touch_pages(ctx, host, (size_t)m * row_bytes, 1);
        if (biases)
            mf_ranks_touch_pages(ctx, host_bias, (size_t)m * bias_bytes, 1);
    }
    for (int64_t a = 0; a < m && !agreed_failure; a += chunk) {
        const int64_t b = a + chunk < m ? a + chunk : m;
        const int64_t from = clamp(lo, a, b), to = clamp(hi, a, b);
        if (st == MF_OK && to > from)
            st = mf_cuda_copy(ctx, dev + (size_t)(from - a) * row_bytes,
                              host + (size_t)from * row_bytes, (size_t)(to - from) * row_bytes);
        if (st == MF_OK && to > from && biases)
            st = mf_cuda_copy(ctx, dev_bias + (size_t)(from - a) * bias_bytes,
                              host_bias + (size_t)from * bias_bytes,
                              (size_t)(to - from) * bias_bytes);
        st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
        agreed_failure = st != MF_OK;
        if (agreed_failure)
            break;
        for (int q = 0; q <= n; q++)
            sub[q] = clamp(bounds[q], a, b) - a;
        const mf_status g = c->ops->allgatherv(c, ctx, dev, sub, row_bytes, NULL);
        const mf_status gb =
            biases ? c->ops->allgatherv(c, ctx, dev_bias, sub, bias_bytes, NULL) : MF_OK;
        st = g != MF_OK ? g : gb;
        if (st == MF_OK) /* the gathers are queued on the stream: the copy waits for them */
            st = mf_cuda_copy(ctx, host + (size_t)a * row_bytes, dev, (size_t)(b - a) * row_bytes);
        if (st == MF_OK && biases)
            st = mf_cuda_copy(ctx, host_bias + (size_t)a * bias_bytes, dev_bias,
                              (size_t)(b - a) * bias_bytes);
    }
    if (!agreed_failure && m > 0) /* the last chunk's copies */
        st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    mf_dmem_free(ctx, &tmp);
    free(sub);
    return st;
}
