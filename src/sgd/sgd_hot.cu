/* The CUDA engine of Hogwild SGD (sgd_engine.cuh): the popular items' replicas
 * (sgd_hot.cuh says why and how), their choice at the start and their spread and mean
 * around each part of an epoch. */
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "sgd/sgd_engine.cuh"
#include "sgd/sgd_hot.cuh"

namespace mf_sgd_gpu
{

/* Part `part`'s hot items' replicas from their rows (gather 0), or their rows from the
 * replicas' mean (gather 1). Only the part's own: in a group's sub-step the other parts'
 * items are not updated here (their rows come from the ranks that update them), and their
 * replicas are spread again before their part runs. */
mf_status hot_rows(cuda_engine *e, int gather, int part)
{
    const int32_t h0 = e->hot_first ? e->hot_first[part] : 0;
    const int32_t n = e->hot_first ? e->hot_first[part + 1] - h0 : e->hot;
    if (n == 0)
        return MF_OK;
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)n * (e->kp + 1), 256, 4);
    float *bi = e->biases ? (float *)e->bi.ptr : NULL;
    const int32_t *items = (const int32_t *)e->hot_items.ptr;
    const int32_t *map = (const int32_t *)e->row_of.ptr;
    if (e->half)
        sgd::hot_rows_kernel<true><<<grid, 256, 0, stream>>>(
            e->V.ptr, bi, items, h0, n, e->replicas, e->cols, e->kp, gather, map);
    else
        sgd::hot_rows_kernel<false><<<grid, 256, 0, stream>>>(
            e->V.ptr, bi, items, h0, n, e->replicas, e->cols, e->kp, gather, map);
    MF_CUDA_TRY(ctx, cudaGetLastError());
    return MF_OK;
}

namespace
{

/* How contended each item is where it is most: score[i] = its ratings in part p over that
 * part's threshold (MF_SGD_HOT_CONCURRENCY x the part's ratings / e->groups), the largest
 * over the parts where it passes it, 0 where it passes none; part[i] that part (-1: none,
 * -2: more than one). Counted on the device part by part, into `counts` (cols unsigned) and
 * `host` (as many). */
mf_status score_items(cuda_engine *e, const mf_sgd_plan *plan, void *counts, unsigned *host,
                      double *score, int32_t *part)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const size_t bytes = (size_t)e->cols * sizeof *host;
    for (int32_t i = 0; i < e->cols; i++)
        score[i] = 0.0, part[i] = -1;
    for (int p = 0; p < e->nparts; p++) {
        const int64_t from = plan->chunk_begin[e->parts[p]];
        const int64_t n = plan->chunk_begin[e->parts[p + 1]] - from;
        const double least = MF_SGD_HOT_CONCURRENCY * (double)n / (double)e->groups;
        if (least >= (double)n) /* no item can be hot here: skip the count */
            continue;
        cudaError_t err = cudaMemsetAsync(counts, 0, bytes, stream);
        if (err == cudaSuccess)
            sgd::count_items_kernel<<<mf_cuda_grid(ctx->link.cuda, n, 256, 8), 256, 0, stream>>>(
                (const mf_sgd_entry *)e->entries.ptr + from, n, (unsigned *)counts);
        if (err == cudaSuccess)
            err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host, counts, bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess)
            return mf_cuda_fail(ctx, err, "SGD hot items", __FILE__, __LINE__);
        for (int32_t i = 0; i < e->cols; i++)
            if ((double)host[i] > least) {
                score[i] = std::max(score[i], (double)host[i] / least);
                part[i] = part[i] == -1 || part[i] == p ? p : -2;
            }
    }
    return MF_OK;
}

/* The hot items numbered (hot[i] = h, items[h] = i; hot[i] = -1 for the others): those with
 * a score, at most `limit` of them, the highest scores first (ties: the lower item). Part by
 * part where each is hot in one part only (part p's from first[p], first holding nparts + 1
 * entries; returns 1), else in item order (returns 0, first untouched). One part: the items
 * in their order. *n: how many. */
int number_hot(const cuda_engine *e, double *score, const int32_t *part, int64_t limit,
               int32_t *hot, int32_t *items, int32_t *first, int32_t *n)
{
    std::vector<int32_t> chosen;
    for (int32_t i = 0; i < e->cols; i++)
        if (score[i] > 0.0)
            chosen.push_back(i);
    if ((int64_t)chosen.size() > limit) {
        std::sort(chosen.begin(), chosen.end(), [score](int32_t x, int32_t y) {
            return score[x] != score[y] ? score[x] > score[y] : x < y;
        });
        for (size_t c = (size_t)limit; c < chosen.size(); c++)
            score[chosen[c]] = 0.0;
    }
    bool by_part = true;
    for (int32_t i = 0; i < e->cols; i++)
        by_part = by_part && (score[i] == 0.0 || part[i] >= 0);
    *n = 0;
    for (int32_t i = 0; i < e->cols; i++)
        hot[i] = -1;
    for (int p = 0; p < (by_part ? e->nparts : 1); p++) {
        if (by_part)
            first[p] = *n;
        for (int32_t i = 0; i < e->cols; i++)
            if (score[i] > 0.0 && (!by_part || part[i] == p))
                items[*n] = i, hot[i] = (*n)++;
    }
    if (by_part)
        first[e->nparts] = *n;
    return by_part;
}

} // namespace

/* Replicas for the items that more than MF_SGD_HOT_CONCURRENCY of the e->groups concurrent
 * updates would hold at once (sgd_hot.cuh), under the user-chunk order only (the ratings
 * order is the in-process peer's design, kept as it is). What runs at once is one part of the
 * plan (a group's sub-step; one GPU's whole epoch), so an item is hot where its ratings in a
 * part pass MF_SGD_HOT_CONCURRENCY x the part's ratings / e->groups. (Over a rank's whole
 * plan, as it was, the threshold left a group's items up to `ranks` times below it without
 * replicas, though within their sub-step they were as contended as one GPU's hot items.) A
 * group's engine keeps its item biases in shared memory only where all of them fit (it never
 * renumbers its rows), so there the replicas take the room the biases leave, the most
 * contended items first. Counts the uploaded entries, then rewrites the hot items' entries
 * to name their replicas. */
mf_status hot_setup(cuda_engine *e, const mf_sgd_setup *s)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const int64_t nnz = s->plan->nnz, nchunks = s->plan->nchunks;
    e->replicas = mf_sgd_debug_replicas >= 0 ? mf_sgd_debug_replicas : MF_SGD_HOT_REPLICAS;
    mf_sgd_debug_hot_items = 0;
    if (!e->resident || e->replicas < 2 || nnz == 0 || e->cols == 0)
        return MF_OK;
    /* Replica rows are numbered past the items in int32 (the entries' item field). */
    int64_t limit = ((int64_t)INT32_MAX - e->cols) / e->replicas;
    const int64_t slots = local_bias_room(e, nnz);
    if (e->nparts > 1 && slots > e->cols)
        limit = std::min(limit, (slots - e->cols) / e->replicas);
    mf_dbuf counts = {NULL, 0}, index = {NULL, 0};
    unsigned *host = (unsigned *)malloc((size_t)e->cols * sizeof *host);
    int32_t *hot = (int32_t *)malloc((size_t)e->cols * sizeof *hot);
    int32_t *part = (int32_t *)malloc((size_t)e->cols * sizeof *part);
    int32_t *items = (int32_t *)malloc((size_t)e->cols * sizeof *items);
    double *score = (double *)malloc((size_t)e->cols * sizeof *score);
    int32_t *first = (int32_t *)malloc(((size_t)e->nparts + 1) * sizeof *first);
    mf_status st =
        host && hot && part && items && score && first
            ? MF_OK
            : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &counts, (size_t)e->cols * sizeof(unsigned), "SGD item counts");
    if (st == MF_OK)
        st = score_items(e, s->plan, counts.ptr, host, score, part);
    int32_t n = 0;
    if (st == MF_OK && number_hot(e, score, part, limit, hot, items, first, &n) && n > 0) {
        e->hot_first = first;
        first = NULL;
    }
    cudaError_t err = cudaSuccess;
    if (n > 0 && st == MF_OK) {
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
    free(host), free(hot), free(part), free(items), free(score), free(first);
    return st;
}

} // namespace mf_sgd_gpu
