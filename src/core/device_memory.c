#include "core/device_memory.h"

#include <stdint.h>
#include <string.h>

#include "core/ctx.h"
#include "core/error.h"

void mf_dmem_init(mf_dmem *m, size_t limit)
{
    memset(m, 0, sizeof *m);
    m->limit = limit;
}

void mf_dmem_set_source(mf_dmem *m, mf_device_alloc_fn alloc, mf_device_free_fn free, void *user,
                        const char *source_name)
{
    m->alloc = alloc;
    m->free = free;
    m->user = user;
    m->source_name = source_name;
}

mf_status mf_dmem_alloc(mf_ctx *ctx, mf_dbuf *buf, size_t bytes, const char *what)
{
    mf_dmem *m = &ctx->dmem;
    buf->ptr = NULL;
    buf->bytes = 0;
    if (bytes == 0)
        return MF_OK;
    if (!m->alloc)
        return mf_fail(ctx, MF_ERR_INTERNAL,
                       "device allocation for %s on a context without a device", what);
    if (m->limit && (bytes > m->limit || m->current > m->limit - bytes)) {
        m->failed++;
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "device memory limit: %zu bytes for %s would bring mfact's use to %zu "
                       "bytes, over the context's limit of %zu (mf_ctx_opts.device_memory_limit)",
                       bytes, what, m->current + bytes, m->limit);
    }
    void *p = m->alloc(m->user, bytes, m->stream);
    if (!p) {
        m->failed++;
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "out of device memory: %zu bytes for %s refused by %s (mfact holds %zu "
                       "bytes)",
                       bytes, what, m->source_name, m->current);
    }
    /* The kernels load 16-byte vectors from the buffers (cudaMalloc and pools give 256). */
    if ((uintptr_t)p % MF_DMEM_ALIGN) {
        m->free(m->user, p, bytes, m->stream);
        m->failed++;
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "%s returned %p for %s, not aligned to %d bytes", m->source_name, p, what,
                       MF_DMEM_ALIGN);
    }
    buf->ptr = p;
    buf->bytes = bytes;
    m->current += bytes;
    if (m->current > m->peak)
        m->peak = m->current;
    m->allocations++;
    return MF_OK;
}

void mf_dmem_free(mf_ctx *ctx, mf_dbuf *buf)
{
    if (!buf->ptr)
        return;
    mf_dmem *m = &ctx->dmem;
    m->free(m->user, buf->ptr, buf->bytes, m->stream);
    m->current -= buf->bytes;
    buf->ptr = NULL;
    buf->bytes = 0;
}

size_t mf_dmem_peak_begin(mf_dmem *m)
{
    size_t saved = m->peak;
    m->peak = m->current;
    return saved;
}

size_t mf_dmem_peak_end(mf_dmem *m, size_t saved)
{
    size_t peak = m->peak;
    m->peak = saved > peak ? saved : peak;
    return peak;
}

void mf_dmem_stats(const mf_dmem *m, mf_memory_stats *out)
{
    out->current_bytes = m->current;
    out->peak_bytes = m->peak;
    out->limit_bytes = m->limit;
    out->allocations = m->allocations;
    out->failed_allocations = m->failed;
}
