#include "cuda/device_link.h"

mf_status mf_device_fail(mf_ctx *ctx, mf_status status, const char *fmt, ...)
{
    mf_device_link *link = ctx ? mf_device_link_of(ctx) : NULL;
    if (link && link->failv) {
        va_list ap;
        va_start(ap, fmt);
        link->failv(ctx, status, fmt, ap);
        va_end(ap);
    }
    return status;
}
