/* ALS with sharded users: the layout's choice, the local problems and U's final gather
 * (als_shard.h). */
#include "als/als_shard.h"

#include <stdlib.h>

#include "als/als_internal.h"
#include "core/ctx.h"
#include "core/opts.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"

static const char fn[] = "mf_als_run";

int mf_als_shard_users(mf_ctx *ctx, mf_als_layout layout, const mf_shares *sh, int32_t rows,
                       int32_t cols, int k)
{
    const int n = mf_ranks(ctx);
    if (n == 1 || layout == MF_ALS_LAYOUT_REPLICATED)
        return 0;
    for (int q = 0; q < n; q++)
        if (sh->bounds[MF_ALS_USERS][q + 1] == sh->bounds[MF_ALS_USERS][q])
            return 0;
    if (layout == MF_ALS_LAYOUT_USERS_SHARDED)
        return 1;
    const int64_t ks = (int64_t)k + 1;
    return (int64_t)rows * k > 2 * (int64_t)cols * ks * ks;
}

mf_status mf_als_shard_local(mf_ctx *ctx, const mf_shares *sh, const mf_sparse *ratings,
                             const mf_sparse *test, mf_sparse **local, mf_sparse **local_test)
{
    const int32_t lo = sh->lo[MF_ALS_USERS], hi = sh->hi[MF_ALS_USERS];
    *local = *local_test = NULL;
    mf_status st = mf_sparse_rows_local(ctx, ratings, lo, hi, fn, local);
    if (test) {
        mf_sparse *test_rows = NULL;
        if (test->is_part) /* collective: every rank calls it, whatever st */
            st = mf_run_then(
                st, mf_ranks_gather_lines(ctx, fn, test, 0, sh->bounds[MF_ALS_USERS], &test_rows));
        if (st == MF_OK)
            st = mf_sparse_rows_local(ctx, test_rows ? test_rows : test, lo, hi, fn, local_test);
        mf_sparse_destroy(test_rows);
    }
    return st;
}

mf_status mf_als_shard_gather_users(mf_ctx *ctx, const mf_shares *sh, float *U, int64_t ld,
                                    float *bu, mf_memory where, mf_status st)
{
    mf_comm *c = ctx->comm;
    const size_t row = (size_t)ld * sizeof(float);
    if (!c->device_buffers || where == MF_MEMORY_DEVICE) {
        st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
        if (st == MF_OK)
            st = mf_shares_gather(ctx, sh, MF_ALS_USERS, NULL, U, row, bu, bu ? sizeof *bu : 0);
        /* over NCCL the gather is queued: the call returns when U holds the result */
        return st == MF_OK && c->device_buffers ? mf_cuda_sync(ctx) : st;
    }
    /* host U over NCCL: this rank's rows are in U already (the engine's finish) */
    return mf_ranks_gather_host(ctx, fn, st, sh->bounds[MF_ALS_USERS], U, row, bu,
                                bu ? sizeof *bu : 0);
}

int64_t mf_als_sum_chunk(int32_t items, size_t sys_bytes, size_t default_bytes)
{
    const size_t bytes = mf_env_bytes("MFACT_ALS_SUM_BYTES", default_bytes);
    const int64_t chunk = (int64_t)(bytes / sys_bytes);
    return chunk < 1 ? 1 : chunk > items ? items : chunk;
}
