/* What the device services of src/cuda need from the context that owns them, and nothing
 * more: the open device, and a place to report a failure. src/cuda is the floor below
 * src/core, so it cannot include core's context; instead core's struct mf_ctx begins with
 * an mf_device_link (core/ctx.h checks this at compile time), and src/cuda reaches the link
 * from any mf_ctx * it is given. Plain C, included by core and by the .cu files alike. */
#ifndef MF_CUDA_DEVICE_LINK_H
#define MF_CUDA_DEVICE_LINK_H

#include <stdarg.h>
#include <stddef.h>

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mf_cuda; /* the open device (cuda_internal.h); opaque to C code */

typedef struct mf_device_link {
    struct mf_cuda *cuda; /* NULL on a CPU context, or until mf_cuda_open succeeds */
    /* The owner's failure slot: records the formatted message and returns status. Set by
     * the context before any device service is called (core's mf_failv). */
    mf_status (*failv)(mf_ctx *ctx, mf_status status, const char *fmt, va_list ap);
} mf_device_link;

/* The link at the start of ctx (see above). */
static inline mf_device_link *mf_device_link_of(mf_ctx *ctx)
{
    return (mf_device_link *)(void *)ctx;
}

/* Record a failure through the owner's slot and return status. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
mf_status
mf_device_fail(mf_ctx *ctx, mf_status status, const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif
