/* Failure messages and logging. Every public entry point reports a failure through
 * mf_fail(), which stores the message on the context (or, without one, in a thread-local
 * slot that mf_ctx_last_error(NULL) reads) and returns the status, so that
 * `return mf_fail(ctx, MF_ERR_..., "...")` is the one way out of a failing call. */
#ifndef MF_CORE_ERROR_H
#define MF_CORE_ERROR_H

#include <stdarg.h>

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MF_ERROR_CAPACITY 1024

#if defined(__GNUC__)
#define MF_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define MF_PRINTF(fmt_index, first_arg)
#endif

/* Record `status` with a formatted message on ctx (NULL: this thread's slot); returns status. */
mf_status mf_fail(mf_ctx *ctx, mf_status status, const char *fmt, ...) MF_PRINTF(3, 4);
mf_status mf_failv(mf_ctx *ctx, mf_status status, const char *fmt, va_list ap) MF_PRINTF(3, 0);

/* Move the context's last message to this thread's slot: used when a context is torn down
 * during its own creation, so that mf_ctx_last_error(NULL) still explains the failure. */
void mf_error_to_thread(const mf_ctx *ctx);

/* Pass a message to the context's log callback when its level allows. ctx may be NULL. */
void mf_log(const mf_ctx *ctx, mf_log_level level, const char *fmt, ...) MF_PRINTF(3, 4);

/* Argument checks: fail with MF_ERR_INVALID_ARGUMENT and the message when cond is false. */
#define MF_REQUIRE(ctx, cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return mf_fail((ctx), MF_ERR_INVALID_ARGUMENT, __VA_ARGS__);                           \
    } while (0)

/* Propagate a non-OK status; the callee has already recorded the message. */
#define MF_TRY(expr)                                                                               \
    do {                                                                                           \
        mf_status mf_try_status_ = (expr);                                                         \
        if (mf_try_status_ != MF_OK)                                                               \
            return mf_try_status_;                                                                 \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
