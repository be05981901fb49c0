/* The CUDA engine of Hogwild SGD: its table (sgd_engine.cuh lists the other parts). The plan
 * (the ratings in visiting order and the chunk boundaries) goes to the device once per run;
 * every epoch is one launch of a persistent grid of warps (sgd_kernels.cuh), one update per
 * warp at a time, followed by one 8-byte copy of the epoch's squared-error sum, which the
 * driver checks for divergence (a group's epoch: one copy after all of its sub-steps). */
#include <stdlib.h>
#include <string.h>

#include "sgd/sgd_engine.cuh"

int mf_sgd_debug_lanes = 0;
int mf_sgd_debug_replicas = -1;
int64_t mf_sgd_debug_hot_items = 0;
int mf_sgd_debug_local_bias = -1;
int64_t mf_sgd_debug_local_items = 0;
int64_t mf_sgd_debug_local_rest = 0;

namespace
{

using namespace mf_sgd_gpu;

/* Queued on the stream, nothing waited for: the part's squared errors add to the scratch's
 * sum, which engine_loss reads. */
mf_status engine_part_epoch(mf_sgd_engine *base, int t, int part, float lr)
{
    cuda_engine *e = (cuda_engine *)base;
    /* The part's chunks: chunk_begin's values index the whole plan's entries. */
    const int64_t first = e->parts[part], nchunks = e->parts[part + 1] - first;
    const uint32_t order = (uint32_t)((int64_t)t * e->nparts + part);
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    sgd::epoch_args a;
    a.entries = (const mf_sgd_entry *)e->entries.ptr;
    a.user = (const int32_t *)e->user.ptr;
    a.U = e->U.ptr;
    a.V = e->V.ptr;
    a.next = (unsigned long long *)e->scratch.ptr;
    a.sq_err = (double *)((char *)e->scratch.ptr + SCRATCH_SQ_ERR);
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
        MF_TRY(hot_rows(e, 0, part));
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
        MF_TRY(hot_rows(e, 1, part));
    }
    return MF_OK;
}

/* The squared errors since the last call: one 8-byte copy and the wait for the stream (which
 * reports what failed in the parts queued); the sum is zeroed behind it. */
mf_status engine_loss(mf_sgd_engine *base, double *sq_err)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    double *sum = (double *)((char *)e->scratch.ptr + SCRATCH_SQ_ERR);
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(sq_err, sum, sizeof *sq_err, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(sum, 0, sizeof *sum, stream));
    return MF_OK;
}

mf_status engine_epoch(mf_sgd_engine *base, int t, float lr, double *sq_err)
{
    MF_TRY(engine_part_epoch(base, t, 0, lr));
    return engine_loss(base, sq_err);
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
    free(e->hot_first);
    free(e->parts);
    free(e);
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
    MF_TRY(hot_setup(e, s));
    const int64_t spare = (int64_t)e->hot * e->replicas;
    MF_TRY(local_bias_setup(e, s, spare));
    MF_TRY(copy_in(e, &e->U, e->rows, 0, NULL, s->U0, "SGD user factors"));
    MF_TRY(copy_in(e, &e->V, e->cols, spare, (const int32_t *)e->row_of.ptr, s->V0,
                   "SGD item factors"));
    MF_TRY(mf_dmem_alloc(ctx, &e->scratch, SCRATCH_BYTES, "SGD counters"));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->scratch.ptr, 0, e->scratch.bytes, ctx->link.cuda->stream));
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
    e->base.loss = engine_loss;
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
