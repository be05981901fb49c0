#include "core/error.h"

#include <stdio.h>
#include <string.h>

#include "core/ctx.h"

/* Failures that have no context to hold them: mf_ctx_create, and calls given ctx = NULL. */
static _Thread_local char thread_error[MF_ERROR_CAPACITY] = "no error";

mf_status mf_failv(mf_ctx *ctx, mf_status status, const char *fmt, va_list ap)
{
    char *dst = ctx ? ctx->error : thread_error;
    vsnprintf(dst, MF_ERROR_CAPACITY, fmt, ap);
    mf_log(ctx, MF_LOG_DEBUG, "%s: %s", mf_status_string(status), dst);
    return status;
}

mf_status mf_fail(mf_ctx *ctx, mf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mf_failv(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

void mf_error_to_thread(const mf_ctx *ctx)
{
    if (ctx)
        snprintf(thread_error, sizeof thread_error, "%s", ctx->error);
}

void mf_log(const mf_ctx *ctx, mf_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log || level > ctx->log_level)
        return;
    char message[MF_ERROR_CAPACITY + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user, level, message);
}

const char *mf_ctx_last_error(const mf_ctx *ctx)
{
    return ctx ? ctx->error : thread_error;
}

const char *mf_status_string(mf_status status)
{
    switch (status) {
    case MF_OK: return "success";
    case MF_ERR_INVALID_ARGUMENT: return "invalid argument";
    case MF_ERR_INVALID_DATA: return "invalid data";
    case MF_ERR_OUT_OF_MEMORY: return "out of memory";
    case MF_ERR_NO_DEVICE: return "no usable CUDA device";
    case MF_ERR_UNSUPPORTED: return "unsupported";
    case MF_ERR_CUDA: return "CUDA error";
    case MF_ERR_IO: return "I/O error";
    case MF_ERR_CANCELLED: return "cancelled";
    case MF_ERR_NUMERIC: return "numerical breakdown";
    case MF_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
