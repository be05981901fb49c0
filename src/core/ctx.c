#define _POSIX_C_SOURCE 200809L /* sysconf without OpenMP */
#include "core/ctx.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#else
#include <unistd.h>
#endif

#include "core/opts.h"
#include "cuda/cuda_backend.h"

_Static_assert(offsetof(mf_ctx, link) == 0,
               "src/cuda finds the device link at the start of mf_ctx");

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void ctx_opts_defaults(mf_ctx_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->backend = MF_BACKEND_AUTO;
    opts->log_level = MF_LOG_WARNING;
}

MF_OPTS_INITIALIZERS(mf_ctx_opts, mf_ctx_opts_init, ctx_opts_defaults, allocator_user)

/* The most CPU threads a context takes: 4 per processor. Far more only slows the work
 * down, and libgomp crashes when it cannot create what it was asked for (100,000). */
static int thread_limit(void)
{
#ifdef _OPENMP
    long procs = omp_get_num_procs();
#else
    long procs = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    return procs > 0 && procs < (1 << 20) ? (int)procs * MF_THREADS_PER_PROCESSOR
                                          : MF_THREADS_PER_PROCESSOR;
}

static mf_status check_opts(const mf_ctx_opts *o)
{
    MF_REQUIRE(NULL, o->backend >= MF_BACKEND_AUTO && o->backend <= MF_BACKEND_CUDA,
               "mf_ctx_create: backend = %d is not an mf_backend value", (int)o->backend);
    MF_REQUIRE(NULL, o->device >= 0, "mf_ctx_create: device = %d is negative", o->device);
    MF_REQUIRE(NULL, o->cpu_threads >= 0, "mf_ctx_create: cpu_threads = %d is negative",
               o->cpu_threads);
    int limit = thread_limit();
    MF_REQUIRE(NULL, o->cpu_threads <= limit,
               "mf_ctx_create: cpu_threads = %d is more than %d (%d per processor of this "
               "machine)",
               o->cpu_threads, limit, MF_THREADS_PER_PROCESSOR);
    MF_REQUIRE(NULL, o->log_level >= 0 && o->log_level <= MF_LOG_DEBUG,
               "mf_ctx_create: log_level = %d is not an mf_log_level value", (int)o->log_level);
    MF_REQUIRE(NULL, !o->device_alloc == !o->device_free,
               "mf_ctx_create: device_alloc and device_free must be set together");
    return MF_OK;
}

/* Open ctx->device: the memory manager allocates from the context's pool unless the caller
 * gave hooks, on the context's stream. */
static mf_status open_device(mf_ctx *ctx)
{
    mf_device_source pool = {0};
    MF_TRY(mf_cuda_open(ctx, ctx->device, ctx->dmem.alloc ? NULL : &pool));
    if (pool.alloc)
        mf_dmem_set_source(&ctx->dmem, pool.alloc, pool.free, pool.user, pool.name);
    ctx->dmem.stream = mf_cuda_stream(ctx);
    mf_device_info info = {.struct_size = sizeof info};
    if (ctx->log && ctx->log_level >= MF_LOG_INFO && mf_cuda_device_info(ctx, &info) == MF_OK)
        mf_log(ctx, MF_LOG_INFO, "using CUDA device %d: %s (compute %d.%d, %d SMs)", info.device,
               info.name, info.compute_major, info.compute_minor, info.multiprocessors);
    return MF_OK;
}

/* Open the CUDA backend, or settle on the CPU where AUTO allows it. */
static mf_status resolve_backend(mf_ctx *ctx, mf_backend wanted)
{
    if (wanted == MF_BACKEND_CPU) {
        ctx->backend = MF_BACKEND_CPU;
        return MF_OK;
    }
    char why[512] = "";
    int count = mf_cuda_device_count(why, sizeof why);
    mf_status st = MF_OK;
    if (count == 0)
        st = mf_fail(ctx, MF_ERR_NO_DEVICE, "no usable CUDA device: %s", why);
    else if (ctx->device >= count)
        st = mf_fail(ctx, MF_ERR_NO_DEVICE, "CUDA device %d requested, but only %d device%s usable",
                     ctx->device, count, count == 1 ? " is" : "s are");
    else
        st = open_device(ctx);
    if (st == MF_OK) {
        ctx->backend = MF_BACKEND_CUDA;
        return MF_OK;
    }
    if (wanted == MF_BACKEND_CUDA)
        return st;
    mf_cuda_close(ctx);
    mf_log(ctx, MF_LOG_INFO, "backend auto: using the CPU (%s)", ctx->error);
    ctx->backend = MF_BACKEND_CPU;
    return MF_OK;
}

mf_status mf_ctx_create(mf_ctx **out, const mf_ctx_opts *user_opts)
{
    MF_REQUIRE(NULL, out, "mf_ctx_create: ctx is NULL");
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    if (user_opts)
        MF_TRY(MF_OPTS_LOAD(NULL, mf_ctx_opts, &o, user_opts));
    MF_TRY(check_opts(&o));

    mf_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return mf_fail(NULL, MF_ERR_OUT_OF_MEMORY, "mf_ctx_create: out of host memory");
    ctx->link.failv = mf_failv;
    strcpy(ctx->error, "no error");
    ctx->device = o.device;
    ctx->cpu_threads = o.cpu_threads;
    ctx->seed = o.seed;
    ctx->log = o.log;
    ctx->log_user = o.log_user;
    ctx->log_level = o.log_level;
    mf_dmem_init(&ctx->dmem, o.device_memory_limit);
    if (o.device_alloc)
        mf_dmem_set_source(&ctx->dmem, o.device_alloc, o.device_free, o.allocator_user,
                           "the caller's device_alloc hook");

    mf_status st = resolve_backend(ctx, o.backend);
    if (st != MF_OK) {
        mf_error_to_thread(ctx);
        mf_cuda_close(ctx);
        free(ctx);
        return st;
    }
    if (ctx->backend == MF_BACKEND_CPU)
        ctx->device = -1;
    strcpy(ctx->error, "no error");
    *out = ctx;
    return MF_OK;
}

void mf_ctx_destroy(mf_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->dmem.current)
        mf_log(ctx, MF_LOG_WARNING,
               "mf_ctx_destroy: %zu bytes of device memory still held; destroy every "
               "mf_sparse before its context",
               ctx->dmem.current);
    if (ctx->comm) /* before the device goes: an NCCL rank frees device memory */
        ctx->comm->ops->release(ctx->comm);
    mf_cuda_close(ctx);
    free(ctx);
}

mf_backend mf_ctx_backend(const mf_ctx *ctx)
{
    return ctx ? ctx->backend : MF_BACKEND_AUTO;
}

int mf_thread_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int mf_ctx_threads(const mf_ctx *ctx)
{
    if (ctx->cpu_threads > 0)
        return ctx->cpu_threads;
#ifdef _OPENMP
    /* OpenMP's default follows OMP_NUM_THREADS, which the caller's environment may set to
     * anything: the same limit holds. */
    int n = omp_get_max_threads(), limit = thread_limit();
    return n < limit ? n : limit;
#else
    return 1;
#endif
}

mf_status mf_ctx_set_stream(mf_ctx *ctx, void *cuda_stream)
{
    MF_REQUIRE(NULL, ctx, "mf_ctx_set_stream: ctx is NULL");
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "mf_ctx_set_stream: the context uses the CPU backend");
    MF_TRY(mf_cuda_set_stream(ctx, cuda_stream));
    ctx->dmem.stream = mf_cuda_stream(ctx); /* stream-ordered allocations follow */
    return MF_OK;
}

void *mf_ctx_stream(const mf_ctx *ctx)
{
    return ctx && ctx->backend == MF_BACKEND_CUDA ? mf_cuda_stream(ctx) : NULL;
}

mf_status mf_ctx_device_info(mf_ctx *ctx, mf_device_info *info)
{
    MF_REQUIRE(NULL, ctx, "mf_ctx_device_info: ctx is NULL");
    MF_REQUIRE(ctx, info, "mf_ctx_device_info: info is NULL");
    size_t n;
    MF_TRY(MF_OPTS_OUT_SIZE(ctx, mf_device_info, info, &n));
    mf_device_info full;
    memset(&full, 0, sizeof full);
    full.struct_size = sizeof full;
    if (ctx->backend == MF_BACKEND_CUDA)
        MF_TRY(mf_cuda_device_info(ctx, &full));
    else {
        strcpy(full.name, "cpu");
        full.device = -1;
    }
    full.cpu_threads = mf_ctx_threads(ctx);
    full.struct_size = n;
    memcpy(info, &full, n);
    return MF_OK;
}

mf_status mf_ctx_memory_stats(const mf_ctx *ctx, mf_memory_stats *stats)
{
    MF_REQUIRE(NULL, ctx, "mf_ctx_memory_stats: ctx is NULL");
    mf_ctx *c = (mf_ctx *)ctx; /* the message slot is the only thing written */
    MF_REQUIRE(c, stats, "mf_ctx_memory_stats: stats is NULL");
    size_t n;
    MF_TRY(MF_OPTS_OUT_SIZE(c, mf_memory_stats, stats, &n));
    mf_memory_stats full;
    memset(&full, 0, sizeof full);
    mf_dmem_stats(&ctx->dmem, &full);
    full.struct_size = n;
    memcpy(stats, &full, n);
    return MF_OK;
}

mf_status mf_ctx_reset_peak_memory(mf_ctx *ctx)
{
    MF_REQUIRE(NULL, ctx, "mf_ctx_reset_peak_memory: ctx is NULL");
    ctx->dmem.peak = ctx->dmem.current;
    return MF_OK;
}

mf_status mf_ctx_release_cached_memory(mf_ctx *ctx)
{
    MF_REQUIRE(NULL, ctx, "mf_ctx_release_cached_memory: ctx is NULL");
    return ctx->backend == MF_BACKEND_CUDA ? mf_cuda_release_cached(ctx) : MF_OK;
}

mf_status mf_check_where(mf_ctx *ctx, mf_memory where, const char *fn)
{
    MF_REQUIRE(ctx, where == MF_MEMORY_HOST || where == MF_MEMORY_DEVICE,
               "%s: where = %d is not an mf_memory value", fn, (int)where);
    return MF_OK;
}

mf_status mf_check_memory(mf_ctx *ctx, const void *ptr, mf_memory where, const char *fn,
                          const char *name)
{
    MF_TRY(mf_check_where(ctx, where, fn));
    if (ctx->backend != MF_BACKEND_CUDA) {
        if (where == MF_MEMORY_DEVICE)
            return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                           "%s: %s is in device memory, but the context uses the CPU backend", fn,
                           name);
        return MF_OK;
    }
    int is_device = mf_cuda_is_device_pointer(ctx, ptr);
    if (is_device < 0)
        return MF_ERR_CUDA;
    if (where == MF_MEMORY_DEVICE && !is_device)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "%s: %s is host memory but where = MF_MEMORY_DEVICE", fn, name);
    if (where == MF_MEMORY_HOST && is_device == 2)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "%s: %s is device memory but where = MF_MEMORY_HOST", fn, name);
    return MF_OK;
}

mf_status mf_check_dense(mf_ctx *ctx, const char *fn, const char *ld_name, int64_t ld,
                         const char *cols_name, int64_t cols, int64_t rows)
{
    MF_REQUIRE(ctx, ld >= cols, "%s: %s = %lld is less than %s = %lld", fn, ld_name, (long long)ld,
               cols_name, (long long)cols);
    /* floats an array may span: cols >= 1 and ld >= cols here, so no step below overflows */
    const int64_t limit = PTRDIFF_MAX / (int64_t)sizeof(float);
    MF_REQUIRE(ctx, cols <= limit && (rows <= 1 || ld <= (limit - cols) / (rows - 1)),
               "%s: %s = %lld over %lld rows spans more memory than an address space holds", fn,
               ld_name, (long long)ld, (long long)rows);
    return MF_OK;
}

mf_status mf_precision_check(mf_ctx *ctx, const char *fn, const char *name, int precision)
{
    MF_REQUIRE(ctx, precision >= MF_PRECISION_FP32 && precision <= MF_PRECISION_FP16,
               "%s: %s = %d is not an mf_precision (0 to 4)", fn, name, precision);
    return MF_OK;
}
