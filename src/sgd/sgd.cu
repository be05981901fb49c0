/* The CUDA engine of Hogwild SGD. The plan (the ratings in visiting order and the chunk
 * boundaries) goes to the device once per run; every epoch is one launch of a persistent
 * grid of warps (sgd_kernels.cuh), one update per warp at a time, followed by one 8-byte
 * copy of the epoch's squared-error sum, which the driver checks for divergence. */
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm.h"
#include "sgd/sgd_hot.cuh"
#include "sgd/sgd_internal.h"
#include "sgd/sgd_kernels.cuh"

int mf_sgd_debug_lanes = 0;
int mf_sgd_debug_replicas = -1;
int64_t mf_sgd_debug_hot_items = 0;
int mf_sgd_debug_local_bias = -1;
int64_t mf_sgd_debug_local_items = 0;
int64_t mf_sgd_debug_local_rest = 0;

namespace
{

struct cuda_engine {
    mf_sgd_engine base;
    mf_ctx *ctx;
    int k, kp, kpl;
    bool half, resident;
    int lanes;      /* per update: 32 (epoch_kernel) or a group of epoch_group_kernel */
    int64_t groups; /* concurrent updates (epoch_group_kernel's groups) */
    int32_t rows, cols;
    float lambda_u, lambda_v;
    uint64_t seed;
    int64_t nchunks;
    unsigned blocks, threads; /* of the epoch launch */
    /* The grid of the kernel with global biases (launch_shape): the same as blocks, threads
     * and groups but where the item biases are local (the second pass of renumbered rows). */
    unsigned plain_blocks, plain_threads;
    int64_t plain_groups;
    mf_dbuf chunk_begin, entries, user, U, V, scratch;
    /* scratch: the chunk counter, then the squared-error sum (double) */
    int biases;
    float lambda_bias, mean;
    mf_dbuf bu, bi; /* biased model only */
    int64_t *parts; /* nparts + 1 chunk boundaries (sgd_internal.h) */
    int nparts;
    /* Popular items' replicas (sgd_hot.cuh): hot items, hot_items[h] the item of replica
     * rows cols + h * replicas + r; none when hot is 0. */
    int32_t hot;
    int replicas;
    mf_dbuf hot_items;
    /* Block-local item biases (sgd_local_bias.cuh), when local: `slots` in shared memory,
     * their owners, the owners' ratings per part (nparts x slots) and the blocks' copies
     * (blocks x slots floats) that the merge sums. */
    int local; /* sgd::LOCAL_NONE or _ALL */
    int32_t slots;
    mf_dbuf local_owner, local_count, local_copies;
    /* Renumbered rows (more rows than slots, one part, sgd_local_bias.cuh): row_of[x] is the
     * working row of item (or working row) x, the most rated first; empty when the rows keep
     * their numbers. Every chunk is split in two (the entries of rows below `slots`, then the
     * rest), the rest turned around into chunks of one row (`rest`: each entry's user and
     * rating; `rest_row`: its row), and the chunks of each pass listed: `split` holds the
     * first pass's begins and ends (n1 each, into `entries`), then the second's (n2 each, into
     * `rest`). */
    mf_dbuf row_of;
    mf_dbuf split;
    mf_dbuf rest, rest_row;
    int64_t n1, n2;
    /* The second pass in launches of one piece of each row (turn_rest): launch j runs its
     * chunks [rest_sub[j], rest_sub[j + 1]). */
    int64_t *rest_sub;
    int rest_passes;
};

/* The smallest lane width that holds k: rows of 32 * kpl elements. */
int lane_width(int k)
{
    int kpl = 1;
    while (32 * kpl < k)
        kpl *= 2;
    return kpl;
}

template <int KPL, bool HALF, bool RESIDENT> const void *epoch_fn()
{
    return reinterpret_cast<const void *>(&sgd::epoch_kernel<KPL, HALF, RESIDENT>);
}
template <int KPL, bool HALF> const void *local_epoch_fn()
{
    return reinterpret_cast<const void *>(&sgd::epoch_kernel<KPL, HALF, true, sgd::LOCAL_ALL>);
}
template <int KPL> const void *rmse_fn()
{
    return reinterpret_cast<const void *>(&sgd::rmse_half_kernel<KPL>);
}

template <int KPL> const void *pick_epoch(bool half, bool resident, int local)
{
    if (local)
        return half ? local_epoch_fn<KPL, true>() : local_epoch_fn<KPL, false>();
    if (half)
        return resident ? epoch_fn<KPL, true, true>() : epoch_fn<KPL, true, false>();
    return resident ? epoch_fn<KPL, false, true>() : epoch_fn<KPL, false, false>();
}

template <int G, int KPL, bool HALF> const void *group_fn(bool biased, int local)
{
    if (local)
        return reinterpret_cast<const void *>(
            &sgd::epoch_group_kernel<G, KPL, HALF, true, sgd::LOCAL_ALL>);
    return biased ? reinterpret_cast<const void *>(&sgd::epoch_group_kernel<G, KPL, HALF, true>)
                  : reinterpret_cast<const void *>(&sgd::epoch_group_kernel<G, KPL, HALF, false>);
}

/* Lanes per update under the user-chunk order: 16 bytes of a row a lane (one vector
 * access) where that leaves fewer than 32, at least 4. Rows of 512 bytes and more (fp32 from
 * k = 65, since rows are 32 times a power of two; fp16 from k = 129) take a whole warp. Against
 * whole warps in one run (bench_sgd
 * --lanes 32,0, H100): k = 128 fp16 with biases 3-9% more updates per second on the three
 * shapes; k = 32 and 64, fp16 and fp32, -2% to +4%. 8 lanes of 32 bytes at k = 128 fp16
 * were 0-20% slower than 16 (98 registers). */
int group_lanes(int kp, bool half)
{
    if (mf_sgd_debug_lanes == 32)
        return 32;
    const int g = kp * (half ? 2 : 4) / 16;
    return g >= 32 ? 32 : g < 4 ? 4 : g;
}

/* The kernel for the engine's lane width, storage, order and biases (local: held in each
 * block's shared memory). */
const void *epoch_kernel_for(const cuda_engine *e, int local)
{
    if (e->lanes < 32) {
        const bool bias = e->biases != 0;
        if (e->half)
            return e->lanes == 4   ? group_fn<4, 8, true>(bias, local)
                   : e->lanes == 8 ? group_fn<8, 8, true>(bias, local)
                                   : group_fn<16, 8, true>(bias, local);
        return e->lanes == 8 ? group_fn<8, 4, false>(bias, local)
                             : group_fn<16, 4, false>(bias, local);
    }
    switch (e->kpl) {
    case 1: return pick_epoch<1>(e->half, e->resident, local);
    case 2: return pick_epoch<2>(e->half, e->resident, local);
    case 4: return pick_epoch<4>(e->half, e->resident, local);
    case 8: return pick_epoch<8>(e->half, e->resident, local);
    default: return pick_epoch<16>(e->half, e->resident, local);
    }
}
const void *rmse_half_kernel_for(const cuda_engine *e)
{
    switch (e->kpl) {
    case 1: return rmse_fn<1>();
    case 2: return rmse_fn<2>();
    case 4: return rmse_fn<4>();
    case 8: return rmse_fn<8>();
    default: return rmse_fn<16>();
    }
}

/* The dynamic shared memory of the epoch kernel: the sink and the bias slots of a local one
 * (sgd_local_bias.cuh), none otherwise. */
size_t epoch_smem_bytes(const cuda_engine *e, int local)
{
    return local ? (size_t)(MF_SGD_LOCAL_SINK + e->slots) * sizeof(float) : 0;
}

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

/* One pass of the epoch kernel (local: sgd::LOCAL_*) over n chunks, chunk c being entries
 * [begin[c], end[c]), in the order of the permutation (seed, order); a local pass's block
 * copies are merged into the global biases after it. */
mf_status run_pass(cuda_engine *e, sgd::epoch_args &a, const int64_t *begin, const int64_t *end,
                   int64_t n, int local, uint64_t seed, uint32_t order)
{
    if (n == 0)
        return MF_OK;
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(a.next, 0, sizeof *a.next, stream));
    a.chunk_begin = begin;
    a.chunk_end = end;
    a.nchunks = n;
    a.perm = mf_sgd_perm_make((uint64_t)n, seed, order);
    a.groups = local ? e->groups : e->plain_groups;
    void *args[] = {&a};
    MF_CUDA_TRY(ctx, cudaLaunchKernel(epoch_kernel_for(e, local),
                                      dim3(local ? e->blocks : e->plain_blocks),
                                      dim3(local ? e->threads : e->plain_threads), args,
                                      epoch_smem_bytes(e, local), stream));
    if (local) {
        sgd::merge_local_bias_kernel<<<mf_cuda_grid(ctx->link.cuda, e->slots, 256, 4), 256, 0,
                                       stream>>>(a.local, (float *)e->bi.ptr, MF_SGD_BIAS_STRIDE);
        MF_CUDA_TRY(ctx, cudaGetLastError());
    }
    return MF_OK;
}

mf_status engine_part_epoch(mf_sgd_engine *base, int t, int part, float lr, double *sq_err)
{
    cuda_engine *e = (cuda_engine *)base;
    /* The part's chunks: chunk_begin's values index the whole plan's entries. */
    const int64_t first = e->parts[part], nchunks = e->parts[part + 1] - first;
    const uint32_t order = (uint32_t)((int64_t)t * e->nparts + part);
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->scratch.ptr, 0, e->scratch.bytes, stream));
    sgd::epoch_args a;
    a.entries = (const mf_sgd_entry *)e->entries.ptr;
    a.user = (const int32_t *)e->user.ptr;
    a.U = e->U.ptr;
    a.V = e->V.ptr;
    a.next = (unsigned long long *)e->scratch.ptr;
    a.sq_err = (double *)((char *)e->scratch.ptr + 8);
    a.lr = lr;
    a.lambda_u = e->lambda_u;
    a.lambda_v = e->lambda_v;
    a.kp = e->kp;
    a.bu = e->biases ? (float *)e->bu.ptr : NULL;
    a.bi = e->biases ? (float *)e->bi.ptr : NULL;
    a.lambda_bias = e->lambda_bias;
    memset(&a.local, 0, sizeof a.local);
    if (e->local) {
        const double contract = (double)lr * (1.0 + (double)e->lambda_bias);
        a.local.slots = e->slots;
        a.local.owner = (const int32_t *)e->local_owner.ptr;
        a.local.count = (const unsigned *)e->local_count.ptr + (size_t)part * e->slots;
        a.local.copies = (float *)e->local_copies.ptr;
        a.local.blocks = (int32_t)e->blocks;
        a.local.log_keep = contract < 1.0 ? (float)log1p(-contract) : -INFINITY;
    }
    if (nchunks > 0) {
        MF_TRY(hot_rows(e, 0));
        if (e->row_of.ptr) {
            /* The owners' halves of the chunks with the local kernel, then the rest with the
             * global one, the sides swapped: a chunk is a row's ratings, the item row (and
             * bias) resident, the users' loaded and stored at each update. One part. */
            const int64_t *b1 = (const int64_t *)e->split.ptr, *b2 = b1 + 2 * e->n1;
            MF_TRY(run_pass(e, a, b1, b1 + e->n1, e->n1, e->local, e->seed, order));
            sgd::epoch_args t = a;
            memset(&t.local, 0, sizeof t.local);
            t.entries = (const mf_sgd_entry *)e->rest.ptr;
            t.user = (const int32_t *)e->rest_row.ptr;
            t.U = e->V.ptr, t.V = e->U.ptr;
            t.bu = a.bi, t.bi = a.bu;
            t.lambda_u = a.lambda_v, t.lambda_v = a.lambda_u;
            for (int j = 0; j < e->rest_passes; j++) {
                const int64_t *r = b2 + e->rest_sub[j];
                MF_TRY(run_pass(e, t, r, r + e->n2, e->rest_sub[j + 1] - e->rest_sub[j],
                                sgd::LOCAL_NONE, e->seed ^ (0x9e3779b97f4a7c15ull + (uint64_t)j),
                                order));
            }
        } else {
            const int64_t *b = (const int64_t *)e->chunk_begin.ptr + first;
            MF_TRY(run_pass(e, a, b, b + 1, nchunks, e->local, e->seed, order));
        }
        MF_TRY(hot_rows(e, 1));
    }
    MF_CUDA_TRY(ctx,
                cudaMemcpyAsync(sq_err, a.sq_err, sizeof *sq_err, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    return MF_OK;
}

mf_status engine_epoch(mf_sgd_engine *base, int t, float lr, double *sq_err)
{
    return engine_part_epoch(base, t, 0, lr, sq_err);
}

void engine_shared(mf_sgd_engine *base, int side, void **factors, size_t *row_bytes, void **biases,
                   size_t *bias_bytes)
{
    cuda_engine *e = (cuda_engine *)base;
    *factors = side == 0 ? e->U.ptr : e->V.ptr;
    *row_bytes = (size_t)e->kp * (e->half ? 2 : 4);
    *biases = e->biases ? (side == 0 ? e->bu.ptr : e->bi.ptr) : NULL;
    *bias_bytes = MF_SGD_BIAS_STRIDE * sizeof(float);
}

/* The strided biases (MF_SGD_BIAS_STRIDE) into packed arrays bu and bi (host or device;
 * either may be NULL), the items' in their own numbers; waits for the copies. */
mf_status unstride_biases(cuda_engine *e, float *bu, float *bi)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const size_t pitch = MF_SGD_BIAS_STRIDE * sizeof(float);
    if (bu && e->rows > 0)
        MF_CUDA_TRY(ctx, cudaMemcpy2DAsync(bu, sizeof(float), e->bu.ptr, pitch, sizeof(float),
                                           (size_t)e->rows, cudaMemcpyDefault, stream));
    if (bi && e->cols > 0 && !e->row_of.ptr)
        MF_CUDA_TRY(ctx, cudaMemcpy2DAsync(bi, sizeof(float), e->bi.ptr, pitch, sizeof(float),
                                           (size_t)e->cols, cudaMemcpyDefault, stream));
    if (bi && e->cols > 0 && e->row_of.ptr) { /* renumbered rows: gathered on the device */
        mf_dbuf tmp = {NULL, 0};
        MF_TRY(mf_dmem_alloc(ctx, &tmp, (size_t)e->cols * sizeof(float), "SGD item biases"));
        sgd::gather_bias_kernel<<<mf_cuda_grid(ctx->link.cuda, e->cols, 256, 8), 256, 0, stream>>>(
            (const float *)e->bi.ptr, (const int32_t *)e->row_of.ptr, e->cols, (float *)tmp.ptr);
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(bi, tmp.ptr, tmp.bytes, cudaMemcpyDefault, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
        mf_dmem_free(ctx, &tmp);
        if (err != cudaSuccess)
            return mf_cuda_fail(ctx, err, "SGD item bias copy-out", __FILE__, __LINE__);
    }
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    return MF_OK;
}

/* The working factor X (rows x kp storage) as floats in `out` (rows x k, allocated here),
 * row r from row map[r] of X (NULL: r). */
mf_status unpack_rows(cuda_engine *e, const mf_dbuf *X, int32_t rows, const int32_t *map,
                      mf_dbuf *out, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    MF_TRY(mf_dmem_alloc(ctx, out, (size_t)rows * e->k * sizeof(float), what));
    if (rows == 0)
        return MF_OK;
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)rows * e->k, 256, 8);
    if (e->half)
        sgd::unpack_kernel<true>
            <<<grid, 256, 0, stream>>>(X->ptr, (float *)out->ptr, rows, e->k, e->kp, map);
    else
        sgd::unpack_kernel<false>
            <<<grid, 256, 0, stream>>>(X->ptr, (float *)out->ptr, rows, e->k, e->kp, map);
    MF_CUDA_TRY(ctx, cudaGetLastError());
    return MF_OK;
}

/* RMSE of the working factors. fp32 factors (rows of kp floats) go to mf_rmse_compute
 * (SDDMM) in place, as every RMSE is computed. fp16 factors keep their own kernel, which
 * widens each element as it loads it: SDDMM takes float factors, and a float copy of both
 * would cost twice the device memory the half storage was chosen to save. */
mf_status engine_rmse(mf_sgd_engine *base, const mf_sparse *R, double *rmse)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    const float *bu = e->biases ? (const float *)e->bu.ptr : NULL;
    const float *bi = e->biases ? (const float *)e->bi.ptr : NULL;
    mf_bias_terms terms = {e->mean, bu, bi};
    if (!e->half) {
        mf_dbuf packed = {NULL, 0}; /* the strided biases, packed for the shared RMSE */
        mf_dbuf items = {NULL, 0};  /* renumbered rows: V in the items' order (cols x k) */
        const float *V = (const float *)e->V.ptr;
        int64_t ldv = e->kp;
        mf_status st = MF_OK;
        if (e->row_of.ptr) {
            st = unpack_rows(e, &e->V, e->cols, (const int32_t *)e->row_of.ptr, &items,
                             "SGD item factors for the RMSE");
            V = (const float *)items.ptr, ldv = e->k;
        }
        if (st == MF_OK && e->biases) {
            st = mf_dmem_alloc(ctx, &packed, ((size_t)e->rows + e->cols + 2) * sizeof(float),
                               "SGD biases for the RMSE");
            if (st == MF_OK)
                st = unstride_biases(e, (float *)packed.ptr, (float *)packed.ptr + e->rows + 1);
            terms.user = (const float *)packed.ptr;
            terms.item = (const float *)packed.ptr + e->rows + 1;
        }
        if (st == MF_OK)
            st = mf_rmse_compute(ctx, (mf_sparse *)R, e->k, (const float *)e->U.ptr, e->kp, V, ldv,
                                 e->biases ? &terms : NULL, MF_MEMORY_DEVICE, rmse);
        mf_dmem_free(ctx, &packed);
        mf_dmem_free(ctx, &items);
        return st;
    }
    cudaStream_t stream = ctx->link.cuda->stream;
    if (R->nnz == 0) {
        *rmse = 0.0;
        return MF_OK;
    }
    sgd::rmse_args a;
    MF_TRY(mf_sparse_device_csr((mf_sparse *)R, &a.ptr, &a.col, &a.val));
    a.U = e->U.ptr;
    a.V = e->V.ptr;
    a.rows = R->rows;
    a.kp = e->kp;
    a.sum = (double *)((char *)e->scratch.ptr + 8);
    a.mean = e->mean;
    a.bu = bu;
    a.bi = bi;
    a.map = (const int32_t *)e->row_of.ptr;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(a.sum, 0, sizeof(double), stream));
    void *args[] = {&a};
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)R->rows * 32, 256, 8);
    MF_CUDA_TRY(ctx,
                cudaLaunchKernel(rmse_half_kernel_for(e), dim3(grid), dim3(256), args, 0, stream));
    double sum = 0.0;
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(&sum, a.sum, sizeof sum, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    *rmse = sqrt(sum / (double)R->nnz);
    return MF_OK;
}

/* The working factor X (rows x kp storage, row r at row map[r], NULL: r) as floats (rows x k)
 * at dst (leading dimension ld), host or device. */
mf_status copy_out(cuda_engine *e, const mf_dbuf *X, int32_t rows, const int32_t *map, float *dst,
                   int64_t ld)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    if ((size_t)rows * e->k == 0)
        return MF_OK;
    mf_dbuf tmp = {NULL, 0};
    mf_status st = unpack_rows(e, X, rows, map, &tmp, "SGD factors for the caller");
    if (st != MF_OK) {
        mf_dmem_free(ctx, &tmp);
        return st;
    }
    cudaError_t err =
        cudaMemcpy2DAsync(dst, (size_t)ld * sizeof(float), tmp.ptr, (size_t)e->k * sizeof(float),
                          (size_t)e->k * sizeof(float), (size_t)rows, cudaMemcpyDefault, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    mf_dmem_free(ctx, &tmp);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD factor copy-out", __FILE__, __LINE__);
    return MF_OK;
}

mf_status engine_finish(mf_sgd_engine *base, float *U, float *V, int64_t ld, float *bu, float *bi)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(e->ctx->link.cuda->device);
    MF_TRY(copy_out(e, &e->U, e->rows, NULL, U, ld));
    MF_TRY(copy_out(e, &e->V, e->cols, (const int32_t *)e->row_of.ptr, V, ld));
    if (e->biases)
        MF_TRY(unstride_biases(e, bu, bi));
    return MF_OK;
}

void engine_destroy(mf_sgd_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    mf_dmem_free(ctx, &e->chunk_begin);
    mf_dmem_free(ctx, &e->entries);
    mf_dmem_free(ctx, &e->user);
    mf_dmem_free(ctx, &e->U);
    mf_dmem_free(ctx, &e->V);
    mf_dmem_free(ctx, &e->scratch);
    mf_dmem_free(ctx, &e->bu);
    mf_dmem_free(ctx, &e->bi);
    mf_dmem_free(ctx, &e->hot_items);
    mf_dmem_free(ctx, &e->local_owner);
    mf_dmem_free(ctx, &e->local_count);
    mf_dmem_free(ctx, &e->local_copies);
    mf_dmem_free(ctx, &e->split);
    mf_dmem_free(ctx, &e->row_of);
    mf_dmem_free(ctx, &e->rest);
    mf_dmem_free(ctx, &e->rest_row);
    free(e->rest_sub);
    free(e->parts);
    free(e);
}

/* The working factor X (rows x kp storage) from the host floats X0 (rows x k), row r at row
 * map[r] (NULL: r), with `spare` rows more (the hot items' replicas, filled before each
 * epoch). */
mf_status copy_in(cuda_engine *e, mf_dbuf *X, int32_t rows, int64_t spare, const int32_t *map,
                  const float *X0, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const size_t elem = e->half ? 2 : 4;
    MF_TRY(mf_dmem_alloc(ctx, X, ((size_t)rows + (size_t)spare) * e->kp * elem, what));
    if (rows == 0)
        return MF_OK;
    mf_dbuf tmp = {NULL, 0};
    const size_t bytes = (size_t)rows * e->k * sizeof(float);
    MF_TRY(mf_dmem_alloc(ctx, &tmp, bytes, "SGD initial factors"));
    cudaError_t err = cudaMemcpyAsync(tmp.ptr, X0, bytes, cudaMemcpyHostToDevice, stream);
    unsigned grid = mf_cuda_grid(ctx->link.cuda, (int64_t)rows * e->kp, 256, 8);
    if (err == cudaSuccess) {
        if (e->half)
            sgd::pack_kernel<true>
                <<<grid, 256, 0, stream>>>((const float *)tmp.ptr, X->ptr, rows, e->k, e->kp, map);
        else
            sgd::pack_kernel<false>
                <<<grid, 256, 0, stream>>>((const float *)tmp.ptr, X->ptr, rows, e->k, e->kp, map);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess) /* X0 is the caller's to free when this returns */
        err = cudaStreamSynchronize(stream);
    mf_dmem_free(ctx, &tmp);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD factor upload", __FILE__, __LINE__);
    return MF_OK;
}

mf_status upload(cuda_engine *e, mf_dbuf *dst, const void *src, size_t bytes, const char *what)
{
    MF_TRY(mf_dmem_alloc(e->ctx, dst, bytes, what));
    if (bytes)
        MF_CUDA_TRY(e->ctx, cudaMemcpyAsync(dst->ptr, src, bytes, cudaMemcpyHostToDevice,
                                            e->ctx->link.cuda->stream));
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

/* The persistent grid of the epoch kernel: as many workers (update groups) as fit at once,
 * or the caller's number. Plain kernels run blocks of 256 threads (32 when the workers
 * are not a multiple of 8 warps); local-bias kernels one block per multiprocessor, whose
 * shared memory holds the item biases (sgd::local_block_threads). */
mf_status launch_shape(cuda_engine *e, const mf_sgd_setup *s, int local)
{
    mf_ctx *ctx = e->ctx;
    const int block = local ? sgd::local_block_threads(e->lanes, e->kpl) : 256;
    const size_t smem = epoch_smem_bytes(e, local);
    int per_sm = 0;
    MF_CUDA_TRY(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                         &per_sm, epoch_kernel_for(e, local), block, smem));
    const int per_warp = 32 / e->lanes, block_warps = block / 32;
    int64_t most = (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->link.cuda->prop.multiProcessorCount *
                   block_warps * per_warp;
    int64_t groups = s->workers > 0 && s->workers < most ? s->workers : most;
    groups = groups < s->max_workers ? groups : s->max_workers;
    const int64_t warps = (groups + per_warp - 1) / per_warp;
    if (local) {
        /* Every multiprocessor a block (each holds its own copy of the biases), the warps
         * spread over them: fewer workers than the device holds (the rule of one per 128
         * chunks, or the caller's number) still reach every multiprocessor. The last block's
         * surplus warps take no chunk (a.groups). */
        const int64_t sms =
            (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->link.cuda->prop.multiProcessorCount;
        const int64_t blocks = warps < sms ? warps : sms;
        const int64_t per_block = (warps + blocks - 1) / blocks;
        e->threads = (unsigned)(32 * per_block);
        e->blocks = (unsigned)((warps + per_block - 1) / per_block);
    } else if (warps % 8 == 0)
        e->threads = 256, e->blocks = (unsigned)(warps / 8);
    else
        e->threads = 32, e->blocks = (unsigned)warps;
    e->groups = groups;
    e->base.workers = (int)groups;
    if (!local)
        e->plain_blocks = e->blocks, e->plain_threads = e->threads, e->plain_groups = groups;
    return MF_OK;
}

/* The rest turned around (sgd_local_bias.cuh): the entries of rows [slots, nb) (rest, their
 * users in user; nrest of them, host) as chunks of one row's entries, at most MF_SGD_CHUNK:
 * entry i of t_entry names the user and rating, t_row[i] the row. A row with more entries
 * than a chunk holds has pieces 0, 1, ...; the runs [begin, end) go to list (begin at
 * list[i], end at list[cap + i]) piece by piece: every row's piece 0, then every piece 1, and
 * so on, piece j's runs from sub[j] to sub[j + 1] (sub has *passes + 1 entries, at most
 * nrest + 1). Each piece runs in a launch of its own: two pieces of a row in flight at once
 * would each store the row they hold, and the last store would drop the other's steps. */
void turn_rest(const mf_sgd_entry *rest, const int32_t *user, int64_t nrest, int32_t slots,
               int64_t nb, int64_t *at, mf_sgd_entry *t_entry, int32_t *t_row, int64_t *list,
               int64_t cap, int64_t *sub, int *passes)
{
    const int64_t rows = nb - slots;
    memset(at, 0, ((size_t)rows + 1) * sizeof *at);
    for (int64_t i = 0; i < nrest; i++)
        at[rest[i].item - slots + 1]++;
    int64_t most = 0; /* pieces of the row with the most */
    for (int64_t r = 0; r < rows; r++) {
        most = std::max(most, (at[r + 1] + MF_SGD_CHUNK - 1) / MF_SGD_CHUNK);
        at[r + 1] += at[r];
    }
    /* sub[j + 1] - sub[j]: the rows with more than j pieces */
    memset(sub, 0, ((size_t)most + 1) * sizeof *sub);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j * MF_SGD_CHUNK < at[r + 1] - at[r]; j++)
            sub[j + 1]++;
    for (int64_t j = 0; j < most; j++)
        sub[j + 1] += sub[j];
    for (int64_t r = 0; r < rows; r++) /* sub[j] moves to piece j's end */
        for (int64_t j = 0, b = at[r]; b < at[r + 1]; j++, b += MF_SGD_CHUNK) {
            const int64_t n = sub[j]++;
            list[n] = b, list[cap + n] = std::min(at[r + 1], b + MF_SGD_CHUNK);
        }
    for (int64_t j = most; j > 0; j--) /* back to the starts */
        sub[j] = sub[j - 1];
    sub[0] = 0;
    *passes = (int)most;
    for (int64_t i = 0; i < nrest; i++) { /* at[r] moves to the row's end */
        const int64_t to = at[rest[i].item - slots]++;
        t_entry[to].item = user[i], t_entry[to].rating = rest[i].rating;
        t_row[to] = rest[i].item;
    }
}

/* Renumbered rows (one part, local_bias_setup): every chunk's entries reordered on the
 * device, those of rows below e->slots first, the rest gathered and turned around (turn_rest)
 * into e->rest and e->rest_row, and the chunks of both passes listed (split, n1, n2). nb: the
 * rows. */
mf_status split_chunks(cuda_engine *e, const mf_sgd_plan *plan, int64_t nb)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const int64_t nchunks = plan->nchunks, *begin = plan->chunk_begin;
    mf_dbuf counts = {NULL, 0}, rest_at_dev = {NULL, 0}, rest = {NULL, 0}, rest_user = {NULL, 0};
    int32_t *owners = (int32_t *)malloc((size_t)(nchunks > 0 ? nchunks : 1) * sizeof *owners);
    int64_t *rest_at = (int64_t *)malloc(((size_t)nchunks + 1) * sizeof *rest_at);
    mf_status st = owners && rest_at ? MF_OK
                                     : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                               "mf_sgd_hogwild_run: out of host memory");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &counts, (size_t)nchunks * sizeof(int32_t), "SGD chunk owners");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK && nchunks > 0) {
        sgd::partition_local_kernel<<<mf_cuda_grid(ctx->link.cuda, nchunks * 32, 256, 8), 256, 0,
                                      stream>>>((mf_sgd_entry *)e->entries.ptr,
                                                (const int64_t *)e->chunk_begin.ptr, nchunks,
                                                e->slots, (int32_t *)counts.ptr);
        err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(owners, counts.ptr, counts.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    /* The rest: each chunk's second half, at rest_at[c] of one array, to the host */
    int64_t nrest = 0;
    mf_sgd_entry *host_rest = NULL, *t_entry = NULL;
    int32_t *host_user = NULL, *t_row = NULL;
    int64_t *at = NULL, *list = NULL, *sub = NULL;
    if (st == MF_OK && err == cudaSuccess) {
        rest_at[0] = 0;
        for (int64_t c = 0; c < nchunks; c++)
            rest_at[c + 1] = rest_at[c] + (begin[c + 1] - begin[c] - owners[c]);
        nrest = rest_at[nchunks];
        mf_sgd_debug_local_rest = nrest;
        st = mf_dmem_alloc(ctx, &rest_at_dev, ((size_t)nchunks + 1) * sizeof *rest_at,
                           "SGD rest offsets");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &rest, (size_t)nrest * sizeof(mf_sgd_entry), "SGD rest");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &rest_user, (size_t)nrest * sizeof(int32_t), "SGD rest users");
        if (st == MF_OK && nrest > 0) {
            err = cudaMemcpyAsync(rest_at_dev.ptr, rest_at, rest_at_dev.bytes,
                                  cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess) {
                sgd::gather_rest_kernel<<<mf_cuda_grid(ctx->link.cuda, nchunks * 32, 256, 8), 256,
                                          0, stream>>>(
                    (const mf_sgd_entry *)e->entries.ptr, (const int32_t *)e->user.ptr,
                    (const int64_t *)e->chunk_begin.ptr, nchunks, (const int32_t *)counts.ptr,
                    (const int64_t *)rest_at_dev.ptr, (mf_sgd_entry *)rest.ptr,
                    (int32_t *)rest_user.ptr);
                err = cudaGetLastError();
            }
        }
    }
    /* The lists: the first pass's begins at list[0] and ends at list[cap] (the chunks' first
     * halves, at most nchunks), the second's at list[nchunks] and list[cap + nchunks] (the
     * rest's rows' runs, at most nrest); then packed, each list's begins and ends. */
    const int64_t cap = nchunks + nrest;
    int64_t *packed = NULL;
    if (st == MF_OK && err == cudaSuccess) {
        host_rest = (mf_sgd_entry *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *host_rest);
        t_entry = (mf_sgd_entry *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *t_entry);
        host_user = (int32_t *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *host_user);
        t_row = (int32_t *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *t_row);
        at = (int64_t *)malloc(((size_t)(nb - e->slots) + 1) * sizeof *at);
        list = (int64_t *)malloc((size_t)(cap > 0 ? cap : 1) * 2 * sizeof *list);
        packed = (int64_t *)malloc((size_t)(cap > 0 ? cap : 1) * 2 * sizeof *packed);
        sub = (int64_t *)malloc(((size_t)nrest + 1) * sizeof *sub);
        if (!host_rest || !t_entry || !host_user || !t_row || !at || !list || !packed || !sub)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    }
    if (st == MF_OK && err == cudaSuccess && nrest > 0) {
        err = cudaMemcpyAsync(host_rest, rest.ptr, rest.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host_user, rest_user.ptr, rest_user.bytes, cudaMemcpyDeviceToHost,
                                  stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    if (st == MF_OK && err == cudaSuccess) {
        int64_t n1 = 0, n2 = 0;
        for (int64_t c = 0; c < nchunks; c++)
            if (owners[c] > 0)
                list[n1] = begin[c], list[cap + n1] = begin[c] + owners[c], n1++;
        int passes = 0;
        turn_rest(host_rest, host_user, nrest, e->slots, nb, at, t_entry, t_row, list + nchunks,
                  cap, sub, &passes);
        n2 = sub[passes];
        memcpy(packed, list, (size_t)n1 * sizeof *list);
        memcpy(packed + n1, list + cap, (size_t)n1 * sizeof *list);
        memcpy(packed + 2 * n1, list + nchunks, (size_t)n2 * sizeof *list);
        memcpy(packed + 2 * n1 + n2, list + cap + nchunks, (size_t)n2 * sizeof *list);
        e->n1 = n1, e->n2 = n2;
        e->rest_sub = (int64_t *)malloc(((size_t)passes + 1) * sizeof *e->rest_sub);
        if (!e->rest_sub)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
        else
            memcpy(e->rest_sub, sub, ((size_t)passes + 1) * sizeof *sub), e->rest_passes = passes;
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->split, (size_t)(2 * (n1 + n2)) * sizeof *list,
                               "SGD split chunks");
        if (st == MF_OK && nrest > 0) /* the rest arrays, turned around, in place */
            err = cudaMemcpyAsync(rest.ptr, t_entry, rest.bytes, cudaMemcpyHostToDevice, stream);
        if (st == MF_OK && err == cudaSuccess && nrest > 0)
            err = cudaMemcpyAsync(rest_user.ptr, t_row, rest_user.bytes, cudaMemcpyHostToDevice,
                                  stream);
        if (st == MF_OK && err == cudaSuccess && e->split.bytes > 0)
            err = cudaMemcpyAsync(e->split.ptr, packed, e->split.bytes, cudaMemcpyHostToDevice,
                                  stream);
        if (st == MF_OK && err == cudaSuccess) /* the host arrays are freed below */
            err = cudaStreamSynchronize(stream);
    }
    if (st == MF_OK && err == cudaSuccess) {
        e->rest = rest, e->rest_row = rest_user;
        rest.ptr = rest_user.ptr = NULL;
    }
    mf_dmem_free(ctx, &rest);
    mf_dmem_free(ctx, &rest_user);
    mf_dmem_free(ctx, &rest_at_dev);
    mf_dmem_free(ctx, &counts);
    free(owners), free(rest_at), free(host_rest), free(t_entry), free(host_user), free(t_row);
    free(at), free(list), free(packed), free(sub);
    MF_TRY(st);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD split chunks", __FILE__, __LINE__);
    return MF_OK;
}

/* Block-local item biases (sgd_local_bias.cuh) where the model has biases, the order keeps a
 * user's row resident (the kernels that have them) and each block's copy would see
 * MF_SGD_LOCAL_BIAS_RATINGS ratings an epoch or more (below that the biases cost little
 * time, and a copy's share of an item is too small to learn from alone);
 * mf_sgd_debug_local_bias 0 turns them off, 1 on whatever the size. All of them where the
 * items and working rows fit in one block's shared memory (about 58,000 on an H100), else
 * the rows with the most ratings, as many as fit, renumbered to come first (row_of). Counts
 * the entries of every part, picks the owners on the host, shapes the grid anew, and where it
 * renumbers, rewrites the entries' rows and splits the chunks (split_chunks). A group's ranks
 * (several parts) exchange item blocks in the items' own numbers (mf_shares_gather), so there
 * the rows are never renumbered: the item biases stay global where they do not all fit. */
mf_status local_bias_setup(cuda_engine *e, const mf_sgd_setup *s, int64_t spare)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    e->local = sgd::LOCAL_NONE;
    mf_sgd_debug_local_items = 0;
    mf_sgd_debug_local_rest = 0;
    const int64_t nb = (int64_t)e->cols + spare, nnz = s->plan->nnz;
    const int64_t fit =
        (int64_t)(ctx->link.cuda->prop.sharedMemPerBlockOptin / sizeof(float)) - MF_SGD_LOCAL_SINK;
    const double sms = ctx->link.cuda->prop.multiProcessorCount;
    const bool wanted = mf_sgd_debug_local_bias == 1 ||
                        (mf_sgd_debug_local_bias < 0 && nnz >= MF_SGD_LOCAL_BIAS_RATINGS * sms);
    const bool renumber = nb > fit;
    if (!e->biases || !e->resident || !wanted || nb == 0 || nnz == 0 || (renumber && e->nparts > 1))
        return MF_OK;
    const int32_t slots = (int32_t)(renumber ? fit : nb);
    /* The largest shared size once, for every local kernel: a context in another thread never
     * lowers it under this one's launch. */
    MF_CUDA_TRY(ctx, cudaFuncSetAttribute(epoch_kernel_for(e, sgd::LOCAL_ALL),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)ctx->link.cuda->prop.sharedMemPerBlockOptin));
    e->slots = slots;
    MF_TRY(launch_shape(e, s, sgd::LOCAL_ALL));
    const int np = e->nparts;
    const int64_t *begin = s->plan->chunk_begin;
    mf_dbuf counts = {NULL, 0};
    unsigned *host = (unsigned *)calloc((size_t)np * nb, sizeof *host);
    int32_t *owner = (int32_t *)malloc((size_t)slots * sizeof *owner);
    unsigned *total = (unsigned *)calloc((size_t)nb, sizeof *total);
    int32_t *rank = (int32_t *)malloc((size_t)nb * sizeof *rank);
    unsigned *per = (unsigned *)calloc((size_t)np * slots, sizeof *per);
    int32_t *row_of = (int32_t *)malloc((size_t)nb * sizeof *row_of);
    mf_status st =
        host && owner && total && rank && per && row_of
            ? MF_OK
            : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &counts, (size_t)np * nb * sizeof(unsigned), "SGD item counts");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK) {
        err = cudaMemsetAsync(counts.ptr, 0, counts.bytes, stream);
        for (int p = 0; p < np && err == cudaSuccess; p++) {
            const int64_t from = begin[e->parts[p]], to = begin[e->parts[p + 1]];
            if (to > from)
                sgd::count_items_kernel<<<mf_cuda_grid(ctx->link.cuda, to - from, 256, 8), 256, 0,
                                          stream>>>((const mf_sgd_entry *)e->entries.ptr + from,
                                                    to - from, (unsigned *)counts.ptr + p * nb);
            err = cudaGetLastError();
        }
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host, counts.ptr, counts.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    if (st == MF_OK && err == cudaSuccess) {
        /* Slot = row. Renumbered: the rows with the most ratings over all parts (the lower
         * number on ties) first, rank[t] becoming row t. */
        for (int64_t i = 0; i < nb; i++) {
            for (int p = 0; p < np; p++)
                total[i] += host[(size_t)p * nb + i];
            rank[i] = (int32_t)i;
        }
        if (renumber)
            std::sort(rank, rank + nb, [total](int32_t x, int32_t y) {
                return total[x] != total[y] ? total[x] > total[y] : x < y;
            });
        for (int32_t t = 0; t < nb; t++)
            row_of[rank[t]] = t;
        for (int32_t t = 0; t < slots; t++) {
            owner[t] = total[rank[t]] > 0 ? t : -1;
            for (int p = 0; p < np && owner[t] >= 0; p++)
                per[(size_t)p * slots + t] = host[(size_t)p * nb + rank[t]];
        }
        if (renumber)
            st =
                mf_dmem_alloc(ctx, &e->row_of, (size_t)nb * sizeof *row_of, "SGD item row numbers");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->local_owner, (size_t)slots * sizeof(int32_t),
                               "SGD local item owners");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->local_count, (size_t)np * slots * sizeof(unsigned),
                               "SGD local item counts");
        if (st == MF_OK)
            /* at most the device's shared memory (30 MB on an H100) */
            st = mf_dmem_alloc(ctx, &e->local_copies, (size_t)e->blocks * slots * sizeof(float),
                               "SGD local item copies");
        if (st == MF_OK) {
            err = cudaMemcpyAsync(e->local_owner.ptr, owner, e->local_owner.bytes,
                                  cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess && renumber) {
                err = cudaMemcpyAsync(e->row_of.ptr, row_of, e->row_of.bytes,
                                      cudaMemcpyHostToDevice, stream);
                if (err == cudaSuccess)
                    sgd::renumber_kernel<<<mf_cuda_grid(ctx->link.cuda, nnz, 256, 8), 256, 0,
                                           stream>>>((mf_sgd_entry *)e->entries.ptr, nnz,
                                                     (const int32_t *)e->row_of.ptr);
                if (err == cudaSuccess)
                    err = cudaGetLastError();
            }
            if (err == cudaSuccess)
                err = cudaMemcpyAsync(e->local_count.ptr, per, e->local_count.bytes,
                                      cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess) /* the host arrays are freed below */
                err = cudaStreamSynchronize(stream);
        }
    }
    if (st == MF_OK && err == cudaSuccess && renumber)
        st = split_chunks(e, s->plan, nb);
    mf_dmem_free(ctx, &counts);
    free(host), free(owner), free(total), free(rank), free(per), free(row_of);
    MF_TRY(st);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD local item biases", __FILE__, __LINE__);
    e->local = sgd::LOCAL_ALL;
    mf_sgd_debug_local_items = slots;
    return MF_OK;
}

mf_status setup(cuda_engine *e, const mf_sgd_setup *s)
{
    mf_ctx *ctx = e->ctx;
    const mf_sgd_plan *p = s->plan;
    mf_status st =
        upload(e, &e->entries, p->entry, (size_t)p->nnz * sizeof *p->entry, "SGD ratings");
    if (st == MF_OK)
        st = upload(e, &e->user, p->user, (size_t)p->nnz * sizeof(int32_t), "SGD rating users");
    if (st == MF_OK)
        st = upload(e, &e->chunk_begin, p->chunk_begin, ((size_t)p->nchunks + 1) * sizeof(int64_t),
                    "SGD chunks");
    /* The plan is the driver's to free when this returns. */
    cudaError_t err = cudaStreamSynchronize(ctx->link.cuda->stream);
    MF_TRY(st);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD plan upload", __FILE__, __LINE__);

    MF_TRY(launch_shape(e, s, sgd::LOCAL_NONE));
    MF_TRY(hot_setup(e, p->nnz, p->nchunks));
    const int64_t spare = (int64_t)e->hot * e->replicas;
    MF_TRY(local_bias_setup(e, s, spare));
    MF_TRY(copy_in(e, &e->U, e->rows, 0, NULL, s->U0, "SGD user factors"));
    MF_TRY(copy_in(e, &e->V, e->cols, spare, (const int32_t *)e->row_of.ptr, s->V0,
                   "SGD item factors"));
    MF_TRY(mf_dmem_alloc(ctx, &e->scratch, 16, "SGD counters"));
    if (e->biases) {                                           /* zero to start */
        const size_t per = MF_SGD_BIAS_STRIDE * sizeof(float); /* one sector each */
        MF_TRY(mf_dmem_alloc(ctx, &e->bu, ((size_t)e->rows + 1) * per, "SGD user biases"));
        MF_TRY(mf_dmem_alloc(ctx, &e->bi, ((size_t)e->cols + spare + 1) * per, "SGD item biases"));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(e->bu.ptr, 0, e->bu.bytes, ctx->link.cuda->stream));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(e->bi.ptr, 0, e->bi.bytes, ctx->link.cuda->stream));
    }
    return MF_OK;
}

} // namespace

mf_status mf_cuda_sgd_engine(const mf_sgd_setup *s, mf_sgd_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    e->base.epoch = engine_epoch;
    e->base.part_epoch = engine_part_epoch;
    e->base.shared = engine_shared;
    e->base.rmse = engine_rmse;
    e->base.finish = engine_finish;
    e->base.destroy = engine_destroy;
    e->ctx = ctx;
    e->k = s->k;
    e->kpl = lane_width(s->k);
    e->kp = 32 * e->kpl;
    e->half = s->storage == MF_SGD_STORAGE_FP16;
    e->resident = s->order == MF_SGD_ORDER_USER_CHUNKS;
    e->lanes = e->resident ? group_lanes(e->kp, e->half) : 32;
    e->rows = s->R->rows;
    e->cols = s->R->cols;
    e->lambda_u = s->lambda_u;
    e->lambda_v = s->lambda_v;
    e->seed = s->seed;
    e->nchunks = s->plan->nchunks;
    e->biases = s->biases;
    e->lambda_bias = s->lambda_bias;
    e->mean = s->biases ? s->mean : 0.0f;
    e->nparts = s->parts ? s->nparts : 1;
    e->parts = (int64_t *)malloc(((size_t)e->nparts + 1) * sizeof *e->parts);
    if (!e->parts) {
        engine_destroy(&e->base);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    }
    for (int i = 0; i <= e->nparts; i++)
        e->parts[i] = s->parts ? s->parts[i] : i == 0 ? 0 : s->plan->nchunks;
    mf_status st = setup(e, s);
    if (st != MF_OK) {
        engine_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
