/* The CUDA engine of Hogwild SGD (sgd_engine.cuh): the popular items' replicas
 * (sgd_hot.cuh says why and how), their choice at the start and their spread and mean
 * around each part of an epoch. */
#include <stdlib.h>

#include "sgd/sgd_engine.cuh"
#include "sgd/sgd_hot.cuh"

namespace mf_sgd_gpu
{

/* The hot items' replicas from their rows (gather 0), or their rows from the replicas'
 * mean (gather 1). */
mf_status hot_rows(cuda_engine *e, int gather)
{
    if (e->hot == 0)
        return MF_OK;
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)e->hot * (e->kp + 1), 256, 4);
    float *bi = e->biases ? (float *)e->bi.ptr : NULL;
    const int32_t *items = (const int32_t *)e->hot_items.ptr;
    const int32_t *map = (const int32_t *)e->row_of.ptr;
    if (e->half)
        sgd::hot_rows_kernel<true><<<grid, 256, 0, stream>>>(
            e->V.ptr, bi, items, e->hot, e->replicas, e->cols, e->kp, gather, map);
    else
        sgd::hot_rows_kernel<false><<<grid, 256, 0, stream>>>(
            e->V.ptr, bi, items, e->hot, e->replicas, e->cols, e->kp, gather, map);
    MF_CUDA_TRY(ctx, cudaGetLastError());
    return MF_OK;
}

/* Replicas for the items that more than MF_SGD_HOT_CONCURRENCY of the e->groups concurrent
 * updates would hold at once (sgd_hot.cuh), under the user-chunk order only (the ratings
 * order is the in-process peer's design, kept as it is). Counts the uploaded entries, then
 * rewrites the hot items' entries to name their replicas. */
mf_status hot_setup(cuda_engine *e, int64_t nnz, int64_t nchunks)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    e->replicas = mf_sgd_debug_replicas >= 0 ? mf_sgd_debug_replicas : MF_SGD_HOT_REPLICAS;
    mf_sgd_debug_hot_items = 0;
    if (!e->resident || e->replicas < 2 || nnz == 0 || e->cols == 0)
        return MF_OK;
    /* Replica rows are numbered past the items in int32 (the entries' item field). */
    const int64_t room = ((int64_t)INT32_MAX - e->cols) / e->replicas;
    const double least = MF_SGD_HOT_CONCURRENCY * (double)nnz / (double)e->groups;
    if (least >= (double)nnz) /* no item can be hot: skip the count */
        return MF_OK;
    mf_dbuf counts = {NULL, 0}, index = {NULL, 0};
    unsigned *host = (unsigned *)malloc((size_t)e->cols * sizeof *host);
    int32_t *hot = (int32_t *)malloc((size_t)e->cols * sizeof *hot);
    mf_status st = host && hot ? MF_OK
                               : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                         "mf_sgd_hogwild_run: "
                                         "out of host memory");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &counts, (size_t)e->cols * sizeof(unsigned), "SGD item counts");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK) {
        err = cudaMemsetAsync(counts.ptr, 0, counts.bytes, stream);
        if (err == cudaSuccess)
            sgd::count_items_kernel<<<mf_cuda_grid(ctx->link.cuda, nnz, 256, 8), 256, 0, stream>>>(
                (const mf_sgd_entry *)e->entries.ptr, nnz, (unsigned *)counts.ptr);
        if (err == cudaSuccess)
            err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host, counts.ptr, counts.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    int32_t n = 0;
    if (st == MF_OK && err == cudaSuccess)
        for (int32_t i = 0; i < e->cols; i++)
            hot[i] = (double)host[i] > least && n < room ? n++ : -1;
    int32_t *items = n > 0 && st == MF_OK ? (int32_t *)malloc((size_t)n * sizeof *items) : NULL;
    if (n > 0 && st == MF_OK && !items)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    if (items)
        for (int32_t i = 0; i < e->cols; i++)
            if (hot[i] >= 0)
                items[hot[i]] = i;
    if (n > 0 && st == MF_OK && err == cudaSuccess) {
        st = mf_dmem_alloc(ctx, &index, (size_t)e->cols * sizeof(int32_t), "SGD hot items");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->hot_items, (size_t)n * sizeof(int32_t), "SGD hot items");
        if (st == MF_OK) {
            err = cudaMemcpyAsync(index.ptr, hot, index.bytes, cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess)
                err = cudaMemcpyAsync(e->hot_items.ptr, items, e->hot_items.bytes,
                                      cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess && nchunks > 0)
                sgd::remap_hot_kernel<<<mf_cuda_grid(ctx->link.cuda, nchunks * 32, 256, 8), 256, 0,
                                        stream>>>((mf_sgd_entry *)e->entries.ptr,
                                                  (const int64_t *)e->chunk_begin.ptr, nchunks,
                                                  (const int32_t *)index.ptr, e->cols, e->replicas);
            if (err == cudaSuccess)
                err = cudaGetLastError();
            if (err == cudaSuccess) /* the host arrays are freed below */
                err = cudaStreamSynchronize(stream);
        }
    }
    if (st == MF_OK && err != cudaSuccess)
        st = mf_cuda_fail(ctx, err, "SGD hot items", __FILE__, __LINE__);
    if (st == MF_OK)
        e->hot = n, mf_sgd_debug_hot_items = n;
    mf_dmem_free(ctx, &counts);
    mf_dmem_free(ctx, &index);
    free(host), free(hot), free(items);
    return st;
}

} // namespace mf_sgd_gpu
