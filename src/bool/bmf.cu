/* The CUDA engine of Boolean factorization. C lives on the device in bits twice (by rows
 * for the sweep over A, by columns for the sweep over B), built from the matrix's device
 * CSR and CSC; each side dense or as its nonzero words, whichever is smaller (c_side).
 * Every instance's factors live side by side, so one launch sweeps the lines
 * of all instances (grid.y). A group of sweeps is queued without host round trips: each
 * sweep ends with a small kernel that records the counts into a history buffer and marks
 * the instances that improved, whose factors are then copied to their best copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bool/bmf_internal.h"
#include "bool/bmf_kernels.cuh"
#include "bool/bmf_launch.cuh"
#include "core/clock.h"
#include "core/ctx.h"
#include "cuda/cuda_internal.h"

namespace
{

/* One side of C on the device: dense words, or nonzero words with their indices. */
struct c_side {
    mf_dbuf dense, ptr, idx, word;
};

bmf_c_lines c_lines(const c_side &c)
{
    bmf_c_lines l;
    l.dense = (const uint64_t *)c.dense.ptr;
    l.ptr = (const int64_t *)c.ptr.ptr;
    l.idx = (const int32_t *)c.idx.ptr;
    l.word = (const uint64_t *)c.word.ptr;
    return l;
}

struct cuda_engine {
    mf_bmf_engine base;
    mf_ctx *ctx;
    mf_bmf_setup s;
    int64_t m, n, mw, nw;
    int k, kw, I;
    c_side Crow, Ccol;
    mf_dbuf A, B, At, Bt, Abest, Bbest; /* I copies each, side by side */
    mf_dbuf counts, best, improved, hist;
    mf_dbuf Acount, Bcount; /* ones of each row of At and Bt: I x k */
    int64_t initial[2 * 1024];
};

mf_status alloc_all(cuda_engine *e)
{
    mf_ctx *ctx = e->ctx;
    size_t I = (size_t)e->I;
    MF_TRY(mf_dmem_alloc(ctx, &e->A, I * e->m * e->kw * 8, "the instances' A"));
    MF_TRY(mf_dmem_alloc(ctx, &e->B, I * e->n * e->kw * 8, "the instances' B"));
    MF_TRY(mf_dmem_alloc(ctx, &e->At, I * e->k * e->mw * 8, "the instances' A transposed"));
    MF_TRY(mf_dmem_alloc(ctx, &e->Bt, I * e->k * e->nw * 8, "the instances' B transposed"));
    MF_TRY(mf_dmem_alloc(ctx, &e->Abest, I * e->m * e->kw * 8, "the instances' best A"));
    MF_TRY(mf_dmem_alloc(ctx, &e->Bbest, I * e->n * e->kw * 8, "the instances' best B"));
    MF_TRY(mf_dmem_alloc(ctx, &e->counts, I * 2 * 8, "error counts"));
    MF_TRY(mf_dmem_alloc(ctx, &e->Acount, I * e->k * 8, "factor sizes"));
    MF_TRY(mf_dmem_alloc(ctx, &e->Bcount, I * e->k * 8, "factor sizes"));
    MF_TRY(mf_dmem_alloc(ctx, &e->best, I * 8, "best errors"));
    MF_TRY(mf_dmem_alloc(ctx, &e->improved, I * sizeof(int), "improvement flags"));
    MF_TRY(mf_dmem_alloc(ctx, &e->hist, (size_t)MF_BMF_GROUP_MAX * I * 2 * 8, "error history"));
    return MF_OK;
}

mf_status transpose(cuda_engine *e, mf_bmf_side side)
{
    cudaStream_t st = e->ctx->link.cuda->stream;
    int64_t L = side == MF_BMF_ROWS ? e->m : e->n, lw = side == MF_BMF_ROWS ? e->mw : e->nw;
    const uint64_t *X = (const uint64_t *)(side == MF_BMF_ROWS ? e->A.ptr : e->B.ptr);
    uint32_t *Xt = (uint32_t *)(side == MF_BMF_ROWS ? e->At.ptr : e->Bt.ptr);
    dim3 grid(blocks_for((L + 31) / 32, 8), e->I);
    bmf_transpose_kernel<<<grid, 256, 0, st>>>(X, Xt, L, e->k, e->kw, lw, L * e->kw,
                                               (int64_t)e->k * lw);
    MF_TRY(MF_CUDA_LAUNCHED(e->ctx, "bmf_transpose_kernel"));
    /* The factor sizes the next sweep of the other side reads (bmf_single_kernel). */
    long long *count = (long long *)(side == MF_BMF_ROWS ? e->Acount.ptr : e->Bcount.ptr);
    bmf_row_count_kernel<<<(unsigned)(e->I * e->k), 256, 0, st>>>((const uint64_t *)Xt, lw, count);
    return MF_CUDA_LAUNCHED(e->ctx, "bmf_row_count_kernel");
}

/* Add fp and fn of every instance's current factors to counts (A against Bt, which the
 * last transpose of B made). */
mf_status count(cuda_engine *e)
{
    dim3 grid(blocks_for(e->m, 8), e->I);
    bmf_count_kernel<<<grid, 256, 0, e->ctx->link.cuda->stream>>>(
        (const uint64_t *)e->A.ptr, (const uint64_t *)e->Bt.ptr, c_lines(e->Crow), e->m, e->nw,
        e->kw, e->m * e->kw, (int64_t)e->k * e->nw, (unsigned long long *)e->counts.ptr);
    return MF_CUDA_LAUNCHED(e->ctx, "bmf_count_kernel");
}

mf_status half_sweep(cuda_engine *e, mf_bmf_side side, int sweep, const mf_bmf_sweep *sw)
{
    bmf_side_args a;
    int rows = side == MF_BMF_ROWS;
    a.L = rows ? e->m : e->n;
    a.N = rows ? e->n : e->m;
    a.nw = rows ? e->nw : e->mw;
    a.k = e->k;
    a.kw = e->kw;
    a.X = (uint64_t *)(rows ? e->A.ptr : e->B.ptr);
    a.Yt = (const uint64_t *)(rows ? e->Bt.ptr : e->At.ptr);
    a.C = c_lines(rows ? e->Crow : e->Ccol);
    a.x_stride = a.L * e->kw;
    a.yt_stride = (int64_t)e->k * a.nw;
    a.counts = (unsigned long long *)e->counts.ptr;
    a.ycount = (const long long *)(rows ? e->Bcount.ptr : e->Acount.ptr);
    a.seed = e->s.seed;
    a.purpose = bmf_purpose_sweep(sweep, side);
    a.wq = sw->wq;
    a.temperature = sw->temperature;
    a.flip_p24 = e->s.flip_p24;
    dim3 grid(blocks_for(a.L, BMF_WARPS), e->I);
    cudaStream_t st = e->ctx->link.cuda->stream;
    if (e->s.flip == MF_BMF_FLIP_PER_BIT) {
        bmf_per_bit_kernel<<<grid, BMF_WARPS * 32, 0, st>>>(a);
    } else {
        int S = (e->k + 31) / 32;
        if (S <= 1)
            bmf_single_kernel<1><<<grid, BMF_WARPS * 32, 0, st>>>(a);
        else if (S <= 2)
            bmf_single_kernel<2><<<grid, BMF_WARPS * 32, 0, st>>>(a);
        else if (S <= 4)
            bmf_single_kernel<4><<<grid, BMF_WARPS * 32, 0, st>>>(a);
        else if (S <= 8)
            bmf_single_kernel<8><<<grid, BMF_WARPS * 32, 0, st>>>(a);
        else if (S <= 16)
            bmf_single_kernel<16><<<grid, BMF_WARPS * 32, 0, st>>>(a);
        else
            bmf_single_kernel<32><<<grid, BMF_WARPS * 32, 0, st>>>(a);
    }
    MF_TRY(MF_CUDA_LAUNCHED(e->ctx, "the sweep kernel"));
    return transpose(e, side);
}

mf_status keep_best(cuda_engine *e, int g)
{
    cudaStream_t st = e->ctx->link.cuda->stream;
    bmf_track_kernel<<<blocks_for(e->I, 128), 128, 0, st>>>(
        (const unsigned long long *)e->counts.ptr, (long long *)e->best.ptr, (int *)e->improved.ptr,
        (long long *)e->hist.ptr + (size_t)g * e->I * 2, e->I);
    MF_TRY(MF_CUDA_LAUNCHED(e->ctx, "bmf_track_kernel"));
    int64_t aw = e->m * e->kw, bw = e->n * e->kw;
    unsigned per_sm = (unsigned)e->ctx->link.cuda->prop.multiProcessorCount * 4;
    dim3 ga(blocks_for(aw, 256) < per_sm ? blocks_for(aw, 256) : per_sm, e->I);
    dim3 gb(blocks_for(bw, 256) < per_sm ? blocks_for(bw, 256) : per_sm, e->I);
    bmf_keep_kernel<<<ga, 256, 0, st>>>((const uint64_t *)e->A.ptr, (uint64_t *)e->Abest.ptr, aw,
                                        (const int *)e->improved.ptr);
    bmf_keep_kernel<<<gb, 256, 0, st>>>((const uint64_t *)e->B.ptr, (uint64_t *)e->Bbest.ptr, bw,
                                        (const int *)e->improved.ptr);
    return MF_CUDA_LAUNCHED(e->ctx, "bmf_keep_kernel");
}

mf_status cuda_sweeps(mf_bmf_engine *base, int first, int count_, const mf_bmf_sweep *plan,
                      double deadline, int64_t *hist, int *done)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    if (count_ > MF_BMF_GROUP_MAX)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_bmf_run: %d sweeps queued at once", count_);
    cudaStream_t st = ctx->link.cuda->stream;
    *done = 0;
    for (int g = 0; g < count_; g++) {
        MF_TRY(half_sweep(e, MF_BMF_ROWS, first + g, &plan[g]));
        MF_TRY(half_sweep(e, MF_BMF_COLS, first + g, &plan[g]));
        MF_TRY(keep_best(e, g));
        *done = g + 1;
        /* With a deadline, wait for each sweep to see the time: a queue of sixteen would
         * overrun it by up to sixteen sweeps. */
        if (deadline > 0.0) {
            MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
            if (mf_seconds() >= deadline)
                break;
        }
    }
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(hist, e->hist.ptr, (size_t)*done * e->I * 2 * 8,
                                     cudaMemcpyDeviceToHost, st));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
    return MF_OK;
}

mf_status cuda_recount(mf_bmf_engine *base, int q, int64_t *fp, int64_t *fn)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t st = ctx->link.cuda->stream;
    /* Count every instance into a scratch pair of counters: the live ones stay. */
    mf_dbuf scratch = {NULL, 0};
    MF_TRY(mf_dmem_alloc(ctx, &scratch, (size_t)e->I * 2 * 8, "recount"));
    mf_dbuf live = e->counts;
    e->counts = scratch;
    mf_status status = MF_OK;
    if (cudaMemsetAsync(scratch.ptr, 0, scratch.bytes, st) != cudaSuccess)
        status = mf_cuda_fail(ctx, cudaGetLastError(), "cudaMemsetAsync", __FILE__, __LINE__);
    if (status == MF_OK)
        status = count(e);
    e->counts = live;
    int64_t pair[2] = {0, 0};
    if (status == MF_OK) {
        cudaError_t err = cudaMemcpyAsync(pair, (int64_t *)scratch.ptr + 2 * q, sizeof pair,
                                          cudaMemcpyDeviceToHost, st);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(st);
        if (err != cudaSuccess)
            status = mf_cuda_fail(ctx, err, "cudaMemcpyAsync", __FILE__, __LINE__);
    }
    mf_dmem_free(ctx, &scratch);
    *fp = pair[0];
    *fn = pair[1];
    return status;
}

mf_status cuda_finish(mf_bmf_engine *base, int q, uint64_t *A, uint64_t *B, mf_memory where)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    (void)where; /* cudaMemcpyDefault finds the side of the caller's pointers */
    cudaStream_t st = ctx->link.cuda->stream;
    size_t ab = (size_t)e->m * e->kw * 8, bb = (size_t)e->n * e->kw * 8;
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(A, (char *)e->Abest.ptr + q * ab, ab, cudaMemcpyDefault, st));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(B, (char *)e->Bbest.ptr + q * bb, bb, cudaMemcpyDefault, st));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
    return MF_OK;
}

void cuda_destroy(mf_bmf_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    if (!e)
        return;
    mf_ctx *ctx = e->ctx;
    mf_dbuf *bufs[] = {&e->Crow.dense, &e->Crow.ptr, &e->Crow.idx,  &e->Crow.word, &e->Ccol.dense,
                       &e->Ccol.ptr,   &e->Ccol.idx, &e->Ccol.word, &e->A,         &e->B,
                       &e->At,         &e->Bt,       &e->Abest,     &e->Bbest,     &e->counts,
                       &e->best,       &e->improved, &e->hist,      &e->Acount,    &e->Bcount};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        mf_dmem_free(ctx, bufs[i]);
    free(e);
}

/* One side of C from its sorted lines (the device CSR for rows, CSC for columns): count
 * each line's nonzero words, then keep whichever layout is smaller (or the one asked for):
 * dense L x lw words, or (L + 1) offsets and 12 bytes a nonzero word. */
mf_status pack_side(cuda_engine *e, c_side *c, const int64_t *ptr, const int32_t *idx, int64_t L,
                    int64_t lw, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t st = ctx->link.cuda->stream;
    const int64_t nnz = e->s.C->nnz;
    const unsigned blocks = blocks_for(L * 32, 256);
    int64_t *wptr = (int64_t *)malloc((size_t)(L + 1) * sizeof *wptr);
    if (!wptr)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
    wptr[0] = 0;
    mf_status status = MF_OK;
    if (nnz > 0) {
        /* the counts land in wptr[1 ..] and become offsets by a running sum */
        mf_dbuf counts = {NULL, 0};
        status = mf_dmem_alloc(ctx, &counts, (size_t)L * 8, "C's words per line");
        if (status == MF_OK) {
            bmf_word_count_kernel<<<blocks, 256, 0, st>>>(ptr, idx, L, (int64_t *)counts.ptr);
            status = MF_CUDA_LAUNCHED(ctx, "bmf_word_count_kernel");
        }
        cudaError_t err = cudaSuccess;
        if (status == MF_OK)
            err = cudaMemcpyAsync(wptr + 1, counts.ptr, (size_t)L * 8, cudaMemcpyDeviceToHost, st);
        if (status == MF_OK && err == cudaSuccess)
            err = cudaStreamSynchronize(st);
        if (status == MF_OK && err != cudaSuccess)
            status = mf_cuda_fail(ctx, err, "cudaMemcpyAsync", __FILE__, __LINE__);
        mf_dmem_free(ctx, &counts);
        for (int64_t i = 0; status == MF_OK && i < L; i++)
            wptr[i + 1] += wptr[i];
    } else {
        memset(wptr, 0, (size_t)(L + 1) * sizeof *wptr);
    }
    const int64_t words = status == MF_OK ? wptr[L] : 0;
    const double dense_bytes = (double)L * (double)lw * 8.0;
    const double sparse_bytes = (double)(L + 1) * 8.0 + (double)words * 12.0;
    const bool sparse = e->s.c_layout == MF_BMF_C_SPARSE ||
                        (e->s.c_layout == MF_BMF_C_AUTO && sparse_bytes < dense_bytes);
    char name[64];
    if (status == MF_OK && !sparse) {
        snprintf(name, sizeof name, "C in bits by %s", what);
        status = mf_dmem_alloc(ctx, &c->dense, (size_t)L * lw * 8, name);
        if (status == MF_OK && cudaMemsetAsync(c->dense.ptr, 0, c->dense.bytes, st) != cudaSuccess)
            status = mf_cuda_fail(ctx, cudaGetLastError(), "cudaMemsetAsync", __FILE__, __LINE__);
        if (status == MF_OK && nnz > 0) {
            bmf_pack_kernel<<<blocks, 256, 0, st>>>(ptr, idx, L, (uint64_t *)c->dense.ptr, lw);
            status = MF_CUDA_LAUNCHED(ctx, "bmf_pack_kernel");
        }
    }
    if (status == MF_OK && sparse) {
        snprintf(name, sizeof name, "C in bits by %s (nonzero words)", what);
        status = mf_dmem_alloc(ctx, &c->ptr, (size_t)(L + 1) * 8, name);
        if (status == MF_OK)
            status = mf_dmem_alloc(ctx, &c->idx, (size_t)(words ? words : 1) * 4, name);
        if (status == MF_OK)
            status = mf_dmem_alloc(ctx, &c->word, (size_t)(words ? words : 1) * 8, name);
        cudaError_t err = cudaSuccess;
        if (status == MF_OK)
            err =
                cudaMemcpyAsync(c->ptr.ptr, wptr, (size_t)(L + 1) * 8, cudaMemcpyHostToDevice, st);
        if (status == MF_OK && err == cudaSuccess)
            err = cudaMemsetAsync(c->word.ptr, 0, c->word.bytes, st);
        if (status == MF_OK && err == cudaSuccess && words > 0) {
            bmf_word_fill_kernel<<<blocks, 256, 0, st>>>(ptr, idx, L, (const int64_t *)c->ptr.ptr,
                                                         (int32_t *)c->idx.ptr,
                                                         (uint64_t *)c->word.ptr);
            err = cudaGetLastError();
        }
        /* wptr is pageable: the copy has been staged once this returns, but wait anyway
         * before freeing it, so no later change can make it read freed memory */
        if (status == MF_OK && err == cudaSuccess)
            err = cudaStreamSynchronize(st);
        if (status == MF_OK && err != cudaSuccess)
            status = mf_cuda_fail(ctx, err, "packing C's nonzero words", __FILE__, __LINE__);
    }
    free(wptr);
    return status;
}

mf_status pack(cuda_engine *e)
{
    const int64_t *ptr = NULL, *cptr = NULL;
    const int32_t *col = NULL, *row = NULL;
    const float *val;
    if (e->s.C->nnz > 0) {
        MF_TRY(mf_sparse_device_csr(e->s.C, &ptr, &col, &val));
        MF_TRY(mf_sparse_device_csc(e->s.C, &cptr, &row, &val));
    }
    MF_TRY(pack_side(e, &e->Crow, ptr, col, e->m, e->nw, "rows"));
    return pack_side(e, &e->Ccol, cptr, row, e->n, e->mw, "columns");
}

mf_status init_factors(cuda_engine *e)
{
    mf_ctx *ctx = e->ctx;
    const mf_bmf_setup *s = &e->s;
    cudaStream_t st = ctx->link.cuda->stream;
    size_t ab = (size_t)e->m * e->kw * 8, bb = (size_t)e->n * e->kw * 8;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->A.ptr, 0, e->A.bytes, st));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->B.ptr, 0, e->B.bytes, st));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->At.ptr, 0, e->At.bytes, st));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->Bt.ptr, 0, e->Bt.bytes, st));
    if (s->A0) {
        for (int q = 0; q < e->I; q++) {
            size_t q_at = s->given_per_instance ? (size_t)q : 0;
            MF_CUDA_TRY(ctx,
                        cudaMemcpyAsync((char *)e->A.ptr + q * ab, (const char *)s->A0 + q_at * ab,
                                        ab, cudaMemcpyHostToDevice, st));
            MF_CUDA_TRY(ctx,
                        cudaMemcpyAsync((char *)e->B.ptr + q * bb, (const char *)s->B0 + q_at * bb,
                                        bb, cudaMemcpyHostToDevice, st));
        }
    } else if (s->init == MF_BMF_INIT_RANDOM) {
        unsigned cap = (unsigned)ctx->link.cuda->prop.multiProcessorCount * 8;
        dim3 ga(blocks_for(e->m * e->kw, 256) < cap ? blocks_for(e->m * e->kw, 256) : cap, e->I);
        dim3 gb(blocks_for(e->n * e->kw, 256) < cap ? blocks_for(e->n * e->kw, 256) : cap, e->I);
        bmf_random_init_kernel<<<ga, 256, 0, st>>>((uint64_t *)e->A.ptr, e->m, e->k, e->kw,
                                                   e->m * e->kw, s->seed, BMF_PURPOSE_INIT_A,
                                                   s->init_p24);
        bmf_random_init_kernel<<<gb, 256, 0, st>>>((uint64_t *)e->B.ptr, e->n, e->k, e->kw,
                                                   e->n * e->kw, s->seed, BMF_PURPOSE_INIT_B,
                                                   s->init_p24);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "bmf_random_init_kernel"));
    } else if (s->sample_ptr) {
        int64_t f = (int64_t)e->I * e->k, total = s->sample_ptr[f];
        mf_dbuf ptr = {NULL, 0}, cols = {NULL, 0};
        mf_status status = mf_dmem_alloc(ctx, &ptr, (size_t)(f + 1) * 8, "the initial patterns");
        if (status == MF_OK)
            status =
                mf_dmem_alloc(ctx, &cols, (size_t)(total ? total : 1) * 4, "the initial patterns");
        cudaError_t err = cudaSuccess;
        if (status == MF_OK)
            err = cudaMemcpyAsync(ptr.ptr, s->sample_ptr, (size_t)(f + 1) * 8,
                                  cudaMemcpyHostToDevice, st);
        if (status == MF_OK && err == cudaSuccess && total)
            err = cudaMemcpyAsync(cols.ptr, s->sample_cols, (size_t)total * 4,
                                  cudaMemcpyHostToDevice, st);
        if (status == MF_OK && err == cudaSuccess) {
            bmf_sample_init_kernel<<<(unsigned)f, 128, 0, st>>>(
                (uint64_t *)e->B.ptr, (const int64_t *)ptr.ptr, (const int32_t *)cols.ptr, e->k,
                e->kw, e->n * e->kw);
            err = cudaGetLastError();
        }
        if (status == MF_OK && err == cudaSuccess)
            err = cudaStreamSynchronize(st); /* the host lists are the driver's to free */
        if (status == MF_OK && err != cudaSuccess)
            status = mf_cuda_fail(ctx, err, "the sample initialization", __FILE__, __LINE__);
        mf_dmem_free(ctx, &ptr);
        mf_dmem_free(ctx, &cols);
        MF_TRY(status);
    }
    MF_TRY(transpose(e, MF_BMF_ROWS));
    MF_TRY(transpose(e, MF_BMF_COLS));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->counts.ptr, 0, e->counts.bytes, st));
    MF_TRY(count(e));
    MF_CUDA_TRY(ctx,
                cudaMemcpyAsync(e->Abest.ptr, e->A.ptr, e->A.bytes, cudaMemcpyDeviceToDevice, st));
    MF_CUDA_TRY(ctx,
                cudaMemcpyAsync(e->Bbest.ptr, e->B.ptr, e->B.bytes, cudaMemcpyDeviceToDevice, st));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(e->initial, e->counts.ptr, (size_t)e->I * 2 * 8,
                                     cudaMemcpyDeviceToHost, st));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
    long long *best = (long long *)malloc((size_t)e->I * sizeof *best);
    if (!best)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
    for (int q = 0; q < e->I; q++)
        best[q] = e->initial[2 * q] + e->initial[2 * q + 1];
    cudaError_t err = cudaMemcpy(e->best.ptr, best, (size_t)e->I * 8, cudaMemcpyHostToDevice);
    free(best);
    MF_CUDA_TRY(ctx, err);
    return MF_OK;
}

} // namespace

mf_status mf_cuda_bmf_engine(const mf_bmf_setup *s, mf_bmf_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
    e->base.instances = s->instances;
    e->base.initial = e->initial;
    e->base.sweeps = cuda_sweeps;
    e->base.recount = cuda_recount;
    e->base.finish = cuda_finish;
    e->base.destroy = cuda_destroy;
    e->ctx = ctx;
    e->s = *s;
    e->m = s->C->rows;
    e->n = s->C->cols;
    e->mw = (e->m + 63) / 64;
    e->nw = (e->n + 63) / 64;
    e->k = s->k;
    e->kw = mf_bmf_words(s->k);
    e->I = s->instances;
    mf_status st = pack(e);
    if (st == MF_OK)
        st = alloc_all(e);
    if (st == MF_OK)
        st = init_factors(e);
    if (st != MF_OK) {
        cuda_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
