/* The foundation on a real GPU: CUDA contexts, the pool-backed memory manager and its
 * limit, caller hooks and streams, device-memory inputs and outputs of mf_sparse, and the
 * RNG agreeing bit for bit with the CPU. Exits 77 (skipped) when no device is usable.
 * Runs without fork: CUDA does not survive fork(). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "core/ctx.h"
#include "core/sparse.h"
#include "cuda/cuda_backend.h"
#include "testutil.h"

#define CUDA_OK(call) ck_assert_msg((call) == cudaSuccess, "%s failed", #call)

START_TEST(context_and_device_info)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    ck_assert_int_eq(mf_ctx_backend(ctx), MF_BACKEND_CUDA);
    ck_assert_ptr_nonnull(mf_ctx_stream(ctx));
    mf_device_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(mf_ctx_device_info(ctx, &info), MF_OK);
    ck_assert_int_eq(info.device, 0);
    ck_assert_int_ge(info.compute_major, 7);
    ck_assert_int_gt(info.multiprocessors, 0);
    ck_assert_uint_gt(info.total_memory, (size_t)1 << 30);
    ck_assert_uint_gt(info.l2_cache_bytes, 0);
    ck_assert_uint_gt(strlen(info.name), 0);
    mf_ctx_destroy(ctx);

    /* AUTO picks the device; a missing ordinal is MF_ERR_NO_DEVICE for CUDA. */
    ck_assert_int_eq(mf_ctx_create(&ctx, NULL), MF_OK);
    ck_assert_int_eq(mf_ctx_backend(ctx), MF_BACKEND_CUDA);
    mf_ctx_destroy(ctx);
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    o.device = 999;
    ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_ERR_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "device 999"));
}
END_TEST

START_TEST(pool_accounting_and_reuse)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_dbuf a, b;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 64 << 20, "a"), MF_OK);
    ck_assert_int_eq(mf_dmem_alloc(ctx, &b, 1 << 20, "b"), MF_OK);
    CUDA_OK(cudaMemsetAsync(a.ptr, 1, a.bytes, mf_ctx_stream(ctx)));
    mf_memory_stats st = tu_memory_stats(ctx);
    ck_assert_uint_eq(st.current_bytes, (64 << 20) + (1 << 20));
    ck_assert_uint_eq(st.allocations, 2);
    mf_dmem_free(ctx, &a);
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 32 << 20, "a again"), MF_OK);
    st = tu_memory_stats(ctx);
    ck_assert_uint_eq(st.current_bytes, (32 << 20) + (1 << 20));
    ck_assert_uint_eq(st.peak_bytes, (64 << 20) + (1 << 20));
    mf_dmem_free(ctx, &a);
    mf_dmem_free(ctx, &b);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 0);
    ck_assert_int_eq(mf_ctx_release_cached_memory(ctx), MF_OK);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(limit_is_out_of_memory_not_a_crash)
{
    mf_ctx *ctx = tu_cuda_ctx((size_t)256 << 20);
    mf_dbuf a, b;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, (size_t)200 << 20, "first"), MF_OK);
    ck_assert_int_eq(mf_dmem_alloc(ctx, &b, (size_t)100 << 20, "second"), MF_ERR_OUT_OF_MEMORY);
    tu_assert_error_has(ctx, "limit");
    mf_dmem_free(ctx, &a);
    mf_ctx_destroy(ctx);

    /* With no limit, a request larger than the device is refused by the pool. (Under
     * compute-sanitizer that refusal would count as an API error: skipped there.) */
    ctx = tu_cuda_ctx(0);
    if (!getenv("MFACT_UNDER_SANITIZER")) {
        mf_device_info info = {.struct_size = sizeof info};
        ck_assert_int_eq(mf_ctx_device_info(ctx, &info), MF_OK);
        ck_assert_int_eq(mf_dmem_alloc(ctx, &a, info.total_memory * 2, "too much"),
                         MF_ERR_OUT_OF_MEMORY);
        tu_assert_error_has(ctx, "memory pool");
    }
    /* The failure leaves CUDA usable. */
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 1 << 20, "after"), MF_OK);
    CUDA_OK(cudaMemsetAsync(a.ptr, 0, a.bytes, mf_ctx_stream(ctx)));
    CUDA_OK(cudaStreamSynchronize(mf_ctx_stream(ctx)));
    mf_dmem_free(ctx, &a);
    mf_ctx_destroy(ctx);
}
END_TEST

typedef struct hook_log {
    int allocs, frees;
    size_t live;
    void *stream;
} hook_log;

static void *hook_alloc(void *user, size_t bytes, void *stream)
{
    hook_log *h = user;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        return NULL;
    h->allocs++;
    h->live += bytes;
    h->stream = stream;
    return p;
}

static void hook_free(void *user, void *ptr, size_t bytes, void *stream)
{
    hook_log *h = user;
    (void)stream;
    cudaFree(ptr);
    h->frees++;
    h->live -= bytes;
}

START_TEST(caller_hooks_and_streams)
{
    hook_log h = {0};
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    o.device_alloc = hook_alloc;
    o.device_free = hook_free;
    o.allocator_user = &h;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    cudaStream_t mine;
    CUDA_OK(cudaStreamCreate(&mine));
    ck_assert_int_eq(mf_ctx_set_stream(ctx, mine), MF_OK);
    ck_assert_ptr_eq(mf_ctx_stream(ctx), mine);

    /* A matrix's device copy goes through the hooks, on the caller's stream. */
    const int32_t row[] = {0, 1, 1}, col[] = {1, 0, 2};
    const float val[] = {1, 2, 3};
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 2, 3, 3, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    const int64_t *d_ptr;
    const int32_t *d_col;
    const float *d_val;
    ck_assert_int_eq(mf_sparse_device_csr(m, &d_ptr, &d_col, &d_val), MF_OK);
    ck_assert_int_eq(h.allocs, 3);
    ck_assert_ptr_eq(h.stream, mine);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 3 * 8 + 3 * 4 + 3 * 4);
    int32_t back[3];
    CUDA_OK(cudaMemcpy(back, d_col, sizeof back, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(back[0], 1);
    ck_assert_int_eq(back[1], 0);
    ck_assert_int_eq(back[2], 2);
    /* A second request reuses the upload. */
    ck_assert_int_eq(mf_sparse_device_csr(m, &d_ptr, &d_col, &d_val), MF_OK);
    ck_assert_int_eq(h.allocs, 3);
    mf_sparse_destroy(m);
    ck_assert_int_eq(h.frees, 3);
    ck_assert_uint_eq(h.live, 0);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 0);

    ck_assert_int_eq(mf_ctx_set_stream(ctx, NULL), MF_OK);
    ck_assert_ptr_ne(mf_ctx_stream(ctx), mine);
    mf_ctx_destroy(ctx);
    CUDA_OK(cudaStreamDestroy(mine));
}
END_TEST

START_TEST(sparse_from_and_to_device_memory)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    const int32_t row[] = {2, 0, 2, 0}, col[] = {1, 3, 0, 3};
    const float val[] = {5, 2, 4, 1};
    int32_t *d_row, *d_col, *d_out_row;
    float *d_val, *d_out_val;
    CUDA_OK(cudaMalloc((void **)&d_row, sizeof row));
    CUDA_OK(cudaMalloc((void **)&d_col, sizeof col));
    CUDA_OK(cudaMalloc((void **)&d_val, sizeof val));
    CUDA_OK(cudaMalloc((void **)&d_out_row, sizeof row));
    CUDA_OK(cudaMalloc((void **)&d_out_val, sizeof val));
    CUDA_OK(cudaMemcpy(d_row, row, sizeof row, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_col, col, sizeof col, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_val, val, sizeof val, cudaMemcpyHostToDevice));
    /* A pageable copy may still be in flight when cudaMemcpy returns, and mfact works on
     * its own non-blocking stream: wait for the data before handing it over. */
    CUDA_OK(cudaDeviceSynchronize());
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 3, 4, 4, d_row, d_col, d_val, MF_MEMORY_DEVICE,
                                        MF_SPARSE_SUM_DUPLICATES),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_get_coo(m, d_out_row, NULL, d_out_val, MF_MEMORY_DEVICE), MF_OK);
    int32_t r[3];
    float v[3];
    CUDA_OK(cudaMemcpy(r, d_out_row, sizeof r, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(v, d_out_val, sizeof v, cudaMemcpyDeviceToHost));
    ck_assert_int_eq(r[0], 0);
    ck_assert_float_eq(v[0], 3); /* the duplicate (0, 3) summed */
    ck_assert_int_eq(r[2], 2);
    ck_assert_float_eq(v[2], 5);
    mf_sparse_destroy(m);

    /* Pointers on the wrong side are caught before anything is read. */
    mf_sparse *s = (mf_sparse *)&r;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &s, 3, 4, 4, row, col, val, MF_MEMORY_DEVICE, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "row is host memory but where = MF_MEMORY_DEVICE");
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &s, 3, 4, 4, d_row, d_col, d_val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "row is device memory but where = MF_MEMORY_HOST");
    ck_assert_ptr_eq(s, (mf_sparse *)&r);
    /* Bad data in device memory names its position like host data does. */
    const int32_t bad_row[] = {0, 9, 0, 0};
    CUDA_OK(cudaMemcpy(d_row, bad_row, sizeof bad_row, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &s, 3, 4, 4, d_row, d_col, d_val, MF_MEMORY_DEVICE, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "row[1] = 9");
    cudaFree(d_row), cudaFree(d_col), cudaFree(d_val), cudaFree(d_out_row), cudaFree(d_out_val);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(rng_matches_the_cpu_bit_for_bit)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    const int64_t sizes[] = {1, 3, 4, 5, 1000003, 8 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t n = sizes[k];
        float *host = malloc((size_t)n * sizeof *host), *back = malloc((size_t)n * sizeof *back);
        float *dev;
        CUDA_OK(cudaMalloc((void **)&dev, (size_t)n * sizeof *dev));
        ck_assert_int_eq(mf_random_uniform(ctx, host, n, -0.5f, 0.25f, 77 + k, k, MF_MEMORY_HOST),
                         MF_OK);
        ck_assert_int_eq(mf_random_uniform(ctx, dev, n, -0.5f, 0.25f, 77 + k, k, MF_MEMORY_DEVICE),
                         MF_OK);
        CUDA_OK(cudaMemcpy(back, dev, (size_t)n * sizeof *back, cudaMemcpyDeviceToHost));
        ck_assert_msg(memcmp(host, back, (size_t)n * sizeof *host) == 0,
                      "n = %lld: GPU and CPU draws differ", (long long)n);
        cudaFree(dev);
        free(host), free(back);
    }
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_foundation", .gpu = true};
    const TTest *const tests[] = {context_and_device_info,
                                  pool_accounting_and_reuse,
                                  limit_is_out_of_memory_not_a_crash,
                                  caller_hooks_and_streams,
                                  sparse_from_and_to_device_memory,
                                  rng_matches_the_cpu_bit_for_bit};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
