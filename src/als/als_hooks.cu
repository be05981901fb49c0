// ALS's test and bench hooks (als_internal.h): built into the internal archive that tests
// and benches link, never into libmfact.so. They drive the engine's own solver and Gram
// kernel (als_engine.cuh) on systems a test or a bench chooses.
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "als/als_engine.cuh"
#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"

using namespace mf_als_gpu;

/* System r (rows of one segment range each) written out whole, with lambda n
 * on the diagonal, for a dense peer solver. One block per system. */
__global__ void als_expand_kernel(als_solve_args a, float *dense, float *rhs)
{
    const int64_t row = a.r0 + blockIdx.x;
    const int64_t n = a.ptr[row + 1] - a.ptr[row];
    const int64_t sb = a.row_seg[row] - a.s0, se = a.row_seg[row + 1] - a.s0;
    const int64_t sys = (int64_t)a.tiles * ALS_TILE_FLOATS;
    const int k = a.k;
    for (int e = threadIdx.x; e < (k + 1) * k; e += blockDim.x) {
        int i = e / k, m = e - i * k; /* row k is the right-hand side */
        int hi = i > m ? i : m, lo = i > m ? m : i;
        float v = 0.0f;
        for (int64_t g = sb; g < se; g++)
            v += als_get(a.slots + g * sys, hi, lo);
        if (i == k)
            rhs[blockIdx.x * (int64_t)k + m] = v;
        else
            dense[(blockIdx.x * (int64_t)k + i) * k + m] =
                v + (i == m ? a.lambda * (float)n : 0.0f);
    }
}

/* Host twin of als_chunk: the float offset of element (i, m), m <= i, in a packed system. */
static size_t host_offset(int i, int m)
{
    int t = (i >> 3) * ((i >> 3) + 1) / 2 + (m >> 3);
    int q = (i & 7) * 2 + ((m >> 2) & 1);
    return (size_t)t * ALS_TILE_FLOATS + (size_t)((q ^ (t & 7)) << 2) + (m & 3);
}

mf_status mf_cuda_als_solve_dense(mf_ctx *ctx, int k, int count, const float *A, const float *b,
                                  int cg_steps, float *x)
{
    mf_device_guard guard(ctx->link.cuda->device);
    const int kp = padded_order(k), tiles = tile_count(kp);
    const size_t sys = (size_t)tiles * ALS_TILE_FLOATS;
    float *packed = (float *)calloc(sys * count, sizeof(float));
    int64_t *ptr = (int64_t *)malloc(((size_t)count + 1) * sizeof(int64_t));
    float *xp = (float *)malloc((size_t)count * kp * sizeof(float));
    mf_status st = MF_OK;
    if (!packed || !ptr || !xp)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_cuda_als_solve_dense: out of host memory");
    for (int s = 0; st == MF_OK && s < count; s++) {
        /* Every element of the lower tiles, the diagonal tiles whole (both triangles, as
         * the Gram kernel makes them); b as row and column k. */
        float *P = packed + sys * s;
        for (int i = 0; i <= k; i++)
            for (int m = 0; m <= k && (m >> 3) <= (i >> 3); m++) {
                float v = 0.0f;
                if (i < k && m < k)
                    v = A[((size_t)s * k + i) * k + m];
                else if (i == k && m < k)
                    v = b[(size_t)s * k + m];
                else if (m == k && i < k)
                    v = b[(size_t)s * k + i];
                P[host_offset(i, m)] = v;
            }
        ptr[s] = s;                  /* one rating each: lambda n = 0 below */
        for (int m = 0; m < kp; m++) /* CG's start */
            xp[(size_t)s * kp + m] = m < k ? x[(size_t)s * k + m] : 0.0f;
    }
    if (ptr)
        ptr[count] = count;
    mf_dbuf d_sys = {NULL, 0}, d_ptr = {NULL, 0}, d_x = {NULL, 0}, d_failed = {NULL, 0};
    if (st == MF_OK)
        st = mf_upload(ctx, &d_sys, packed, sys * count * sizeof(float), "test systems");
    if (st == MF_OK)
        st = mf_upload(ctx, &d_ptr, ptr, ((size_t)count + 1) * sizeof(int64_t), "test offsets");
    if (st == MF_OK)
        st = mf_upload(ctx, &d_x, xp, (size_t)count * kp * sizeof(float), "test solutions");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &d_failed, sizeof(unsigned long long), "test flag");
    cudaStream_t stream = ctx->link.cuda->stream;
    unsigned long long failed = ULLONG_MAX;
    if (st == MF_OK) {
        /* The offsets double as the segment index: system s is segment s. */
        als_solve_args a = {(const int64_t *)d_ptr.ptr,
                            (const int64_t *)d_ptr.ptr,
                            0,
                            0,
                            (const float *)d_sys.ptr,
                            k,
                            kp,
                            tiles,
                            0.0f,
                            (float *)d_x.ptr,
                            (unsigned long long *)d_failed.ptr,
                            -1,
                            0.0f,
                            NULL,
                            1,
                            cg_steps,
                            0};
        size_t smem = solver_smem_bytes(kp, tiles);
        cudaError_t err = cudaMemsetAsync(d_failed.ptr, 0xff, sizeof failed, stream);
        if (err == cudaSuccess)
            err = solver_allow_smem(kp, smem);
        int64_t cg_cap = 0;
        if (err == cudaSuccess && cg_steps > 0)
            err = cg_grid_cap(kp, tiles, ctx->link.cuda->prop.multiProcessorCount, &cg_cap);
        if (err == cudaSuccess)
            err = solver_launch(a, (unsigned)count, smem, stream, cg_cap);
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(xp, d_x.ptr, (size_t)count * kp * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(&failed, d_failed.ptr, sizeof failed, cudaMemcpyDeviceToHost,
                                  stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "the batched solver", __FILE__, __LINE__);
    }
    if (st == MF_OK && failed != ULLONG_MAX)
        st = mf_fail(ctx, MF_ERR_NUMERIC, "system %llu broke down at %s %llu", failed >> 32,
                     cg_steps > 0 ? "CG step" : "pivot", failed & 0xffffffffull);
    if (st == MF_OK)
        for (int s = 0; s < count; s++)
            memcpy(x + (size_t)s * k, xp + (size_t)s * kp, (size_t)k * sizeof(float));
    mf_dmem_free(ctx, &d_sys);
    mf_dmem_free(ctx, &d_ptr);
    mf_dmem_free(ctx, &d_x);
    mf_dmem_free(ctx, &d_failed);
    free(packed);
    free(ptr);
    free(xp);
    return st;
}

struct mf_als_bench {
    cuda_engine *e;
    int32_t count;
    mf_dbuf slots;
};

mf_status mf_cuda_als_bench_begin(mf_ctx *ctx, mf_sparse *R, int k, float lambda, const float *V,
                                  int32_t count, int gram_kernel, mf_als_bench **out)
{
    mf_device_guard guard(ctx->link.cuda->device);
    mf_als_setup setup = {ctx,
                          R,
                          k,
                          lambda,
                          MF_MEMORY_HOST,
                          V,
                          0,
                          0.0f,
                          0.0f,
                          1,
                          gram_kernel,
                          0,
                          {0, 0},
                          {R->rows, R->cols},
                          {NULL, NULL},
                          {NULL, NULL},
                          0};
    mf_als_engine *base = NULL;
    MF_TRY(mf_cuda_als_engine(&setup, &base));
    mf_als_bench *b = (mf_als_bench *)calloc(1, sizeof *b);
    if (!b) {
        base->destroy(base);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    b->e = (cuda_engine *)base;
    b->count = count;
    /* The engine's own batch of partial systems (own_slots) serves half steps, which the
     * bench does not run: its room goes back to the pool for the bench's systems. */
    mf_dmem_free(ctx, &b->e->slots);
    side_plan *s = &b->e->side[MF_ALS_USERS];
    int64_t nseg = s->host_row_seg[count];
    mf_status st =
        mf_dmem_alloc(ctx, &b->slots, (size_t)nseg * system_bytes(b->e), "bench partial systems");
    if (st == MF_OK) {
        cudaError_t err =
            launch_gram(b->e, s, (const float *)b->e->V.ptr, 0, nseg, (float *)b->slots.ptr);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(ctx->link.cuda->stream);
        if (err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "bench Gram kernel", __FILE__, __LINE__);
    }
    if (st != MF_OK) {
        mf_cuda_als_bench_end(b);
        return st;
    }
    *out = b;
    return MF_OK;
}

mf_status mf_cuda_als_bench_solve(mf_als_bench *b, float *x, double *ms)
{
    cuda_engine *e = b->e;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    float t = 0.0f;
    MF_CUDA_TRY(ctx, cudaEventRecord(e->ev[0], stream));
    MF_CUDA_TRY(ctx, launch_solve(e, &e->side[MF_ALS_USERS], 0, b->count, 0,
                                  (const float *)b->slots.ptr, (float *)e->U.ptr));
    MF_CUDA_TRY(ctx, cudaEventRecord(e->ev[1], stream));
    MF_CUDA_TRY(ctx, cudaEventSynchronize(e->ev[1]));
    MF_CUDA_TRY(ctx, cudaEventElapsedTime(&t, e->ev[0], e->ev[1]));
    *ms = t;
    MF_TRY(copy_out(e, x, &e->U, b->count, e->k));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    return MF_OK;
}

mf_status mf_cuda_als_bench_gram(mf_als_bench *b, int gram_kernel, double *ms, int *tensor_cores)
{
    cuda_engine *e = b->e;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    side_plan *s = &e->side[MF_ALS_USERS];
    const gram_launch was = s->gram;
    MF_TRY(pick_gram(e, s, gram_kernel));
    *tensor_cores = s->gram.tc;
    float t = 0.0f;
    cudaError_t err = cudaEventRecord(e->ev[0], stream);
    if (err == cudaSuccess)
        err = launch_gram(e, s, (const float *)e->V.ptr, 0, s->host_row_seg[b->count],
                          (float *)b->slots.ptr);
    if (err == cudaSuccess)
        err = cudaEventRecord(e->ev[1], stream);
    if (err == cudaSuccess)
        err = cudaEventSynchronize(e->ev[1]);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&t, e->ev[0], e->ev[1]);
    s->gram = was;
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "bench Gram kernel", __FILE__, __LINE__);
    *ms = t;
    return MF_OK;
}

mf_status mf_cuda_als_bench_dense(mf_als_bench *b, float *A, float *rhs)
{
    cuda_engine *e = b->e;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    side_plan *s = &e->side[MF_ALS_USERS];
    als_solve_args a = {s->ptr,
                        (const int64_t *)s->row_seg.ptr,
                        0,
                        0,
                        (const float *)b->slots.ptr,
                        e->ks,
                        e->kp,
                        e->tiles,
                        e->lambda,
                        NULL,
                        NULL,
                        -1,
                        0.0f,
                        NULL,
                        1,
                        0,
                        0};
    als_expand_kernel<<<(unsigned)b->count, 256, 0, ctx->link.cuda->stream>>>(a, A, rhs);
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "als_expand_kernel"));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(ctx->link.cuda->stream));
    return MF_OK;
}

void mf_cuda_als_bench_end(mf_als_bench *b)
{
    if (!b)
        return;
    mf_dmem_free(b->e->ctx, &b->slots);
    b->e->base.destroy(&b->e->base);
    free(b);
}
