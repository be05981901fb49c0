/* The context: what every entry point receives. Internal; the public type is opaque. */
#ifndef MF_CORE_CTX_H
#define MF_CORE_CTX_H

#include "core/device_memory.h"
#include "core/error.h"
#include "cuda/comm.h"
#include "cuda/device_link.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mf_ctx {
    /* First, so that src/cuda finds it from an mf_ctx * (cuda/device_link.h): the open
     * device (link.cuda: device, stream, pool; NULL on a CPU context) and the error slot. */
    mf_device_link link;
    mf_backend backend; /* resolved: CPU or CUDA */
    int device;
    int cpu_threads; /* 0 = OpenMP's default */
    uint64_t seed;
    mf_log_fn log;
    void *log_user;
    mf_log_level log_level;
    mf_dmem dmem;
    /* The rank in a group of contexts (core/ranks.h); NULL outside one. */
    mf_comm *comm;
    char error[MF_ERROR_CAPACITY];
};

/* Threads for an OpenMP region of the CPU backend. */
int mf_ctx_threads(const mf_ctx *ctx);

/* The calling thread's number in its OpenMP team (0 outside one, or without OpenMP): below
 * the num_threads the region asked for, so it indexes per-thread scratch sized by it. */
int mf_thread_index(void);

/* MF_OK when `where` is an mf_memory value; else MF_ERR_INVALID_ARGUMENT ("<fn>: where = <value>
 * is not an mf_memory value"). mf_check_memory starts with it; calls with no array to check
 * (an empty matrix) call it alone. */
mf_status mf_check_where(mf_ctx *ctx, mf_memory where, const char *fn);

/* Check that an array argument lives where the caller says: MF_MEMORY_DEVICE needs a CUDA
 * context and a device (or managed) pointer; MF_MEMORY_HOST must not be device-only memory.
 * `fn` and `name` name the function and argument in the message. */
mf_status mf_check_memory(mf_ctx *ctx, const void *ptr, mf_memory where, const char *fn,
                          const char *name);

/* Check a caller's row-major dense matrix of `rows` rows of `cols` floats with leading
 * dimension `ld` (names: `ld_name`, `cols_name`): ld >= cols, and the array it spans,
 * (rows - 1) * ld + cols floats, within what an address space can hold (PTRDIFF_MAX bytes).
 * A garbage ld would otherwise overflow the span's byte count and send the CPU loops or the
 * device copies far outside the caller's array. MF_ERR_INVALID_ARGUMENT with a message
 * naming `fn` and the dimension otherwise. */
mf_status mf_check_dense(mf_ctx *ctx, const char *fn, const char *ld_name, int64_t ld,
                         const char *cols_name, int64_t cols, int64_t rows);

/* MF_OK when `precision` is one of mf_precision's values; else MF_ERR_INVALID_ARGUMENT with
 * "<fn>: <name> = <value> is not an mf_precision (0 to 4)". Read as an int: a value outside
 * the enum is the caller's mistake, not undefined. */
mf_status mf_precision_check(mf_ctx *ctx, const char *fn, const char *name, int precision);

#ifdef __cplusplus
}
#endif
#endif
