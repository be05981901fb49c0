/* Groups of contexts: the public calls that make them (mf_ctx_join_local,
 * mf_ctx_set_nccl_comm, mf_ctx_set_mpi_comm, mf_ctx_rank), and what a collective algorithm needs
 * from them (ranks.h). The exchange itself is cuda/comm.h's. */
#include "core/ranks.h"

#include <stdlib.h>
#include <string.h>

#include "core/comm_local.h"
#include "core/comm_mpi.h"
#include "core/error.h"
#include "core/sparse.h"

#define MAX_LOCAL_RANKS 1024

int mf_ranks(const mf_ctx *ctx)
{
    return ctx && ctx->comm ? ctx->comm->size : 1;
}

mf_status mf_ranks_attach(mf_ctx *ctx, mf_status st, mf_comm *made)
{
    if (st == MF_OK) {
        mf_comm_timed(made);
        ctx->comm = made;
    }
    return st;
}

mf_status mf_ctx_rank(const mf_ctx *ctx, int *rank, int *size)
{
    MF_REQUIRE((mf_ctx *)ctx, ctx && rank && size, "mf_ctx_rank: ctx, rank and size must be set");
    *rank = ctx->comm ? ctx->comm->rank : 0;
    *size = ctx->comm ? ctx->comm->size : 1;
    return MF_OK;
}

static mf_status check_join(mf_ctx *const *ctxs, int n)
{
    static const char fn[] = "mf_ctx_join_local";
    MF_REQUIRE(NULL, ctxs, "%s: ctxs is NULL", fn);
    /* ctxs[0] exists only when n >= 1; the messages go there when it does (the header's
     * promise), else to the thread's slot */
    mf_ctx *first = n >= 1 ? ctxs[0] : NULL;
    MF_REQUIRE(first, n >= 1 && n <= MAX_LOCAL_RANKS, "%s: n = %d is outside 1..%d", fn, n,
               MAX_LOCAL_RANKS);
    MF_REQUIRE(NULL, first, "%s: ctxs[0] is NULL", fn);
    for (int i = 0; i < n; i++) {
        MF_REQUIRE(first, ctxs[i], "%s: ctxs[%d] is NULL", fn, i);
        MF_REQUIRE(first, !ctxs[i]->comm, "%s: ctxs[%d] is already in a group", fn, i);
        MF_REQUIRE(first, ctxs[i]->backend == first->backend,
                   "%s: ctxs[%d] is a %s context, ctxs[0] a %s one", fn, i,
                   ctxs[i]->backend == MF_BACKEND_CUDA ? "CUDA" : "CPU",
                   first->backend == MF_BACKEND_CUDA ? "CUDA" : "CPU");
        for (int j = 0; j < i; j++) {
            MF_REQUIRE(first, ctxs[j] != ctxs[i], "%s: ctxs[%d] and ctxs[%d] are one context", fn,
                       j, i);
            MF_REQUIRE(first,
                       first->backend != MF_BACKEND_CUDA || ctxs[j]->device != ctxs[i]->device,
                       "%s: ctxs[%d] and ctxs[%d] are both on device %d (NCCL takes one rank "
                       "per device)",
                       fn, j, i, ctxs[i]->device);
        }
    }
    return MF_OK;
}

mf_status mf_ctx_join_local(mf_ctx *const *ctxs, int n)
{
    MF_TRY(check_join(ctxs, n));
    mf_comm **ranks = calloc((size_t)n, sizeof *ranks);
    if (!ranks)
        return mf_fail(ctxs[0], MF_ERR_OUT_OF_MEMORY, "mf_ctx_join_local: out of host memory");
    mf_status st = ctxs[0]->backend == MF_BACKEND_CUDA ? mf_nccl_comm_init_all(ctxs, n, ranks)
                                                       : mf_comm_local_create(ctxs[0], n, ranks);
    for (int i = 0; st == MF_OK && i < n; i++)
        mf_ranks_attach(ctxs[i], st, ranks[i]);
    free(ranks);
    return st;
}

mf_status mf_ctx_set_nccl_comm(mf_ctx *ctx, void *nccl_comm)
{
    MF_REQUIRE(NULL, ctx, "mf_ctx_set_nccl_comm: ctx is NULL");
    if (!nccl_comm) {
        if (ctx->comm)
            ctx->comm->ops->release(ctx->comm);
        ctx->comm = NULL;
        return MF_OK;
    }
    if (ctx->backend != MF_BACKEND_CUDA)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "mf_ctx_set_nccl_comm: a CPU context cannot take an NCCL communicator "
                       "(mf_ctx_join_local groups CPU contexts)");
    MF_REQUIRE(ctx, !ctx->comm, "mf_ctx_set_nccl_comm: the context is already in a group");
    mf_comm *made = NULL;
    const mf_status st = mf_nccl_comm_wrap(ctx, nccl_comm, &made);
    return mf_ranks_attach(ctx, st, made);
}

/* Collective over the caller's communicator (core/comm_mpi.h): the checks of ctx are this
 * rank's status, which the ranks agree on before any of them joins. */
mf_status mf_ctx_set_mpi_comm(mf_ctx *ctx, const void *mpi_comm)
{
    static const char fn[] = "mf_ctx_set_mpi_comm";
    MF_REQUIRE(NULL, ctx || mpi_comm, "%s: ctx is NULL", fn);
    if (!mpi_comm) {
        if (ctx->comm)
            ctx->comm->ops->release(ctx->comm);
        ctx->comm = NULL;
        return MF_OK;
    }
    mf_status st = MF_OK;
    if (!ctx)
        st = mf_fail(NULL, MF_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    else if (ctx->backend == MF_BACKEND_CUDA)
        st = mf_fail(ctx, MF_ERR_UNSUPPORTED,
                     "%s: a CUDA context cannot take an MPI communicator (CUDA contexts "
                     "exchange through NCCL: mf_ctx_set_nccl_comm, mf_ctx_join_local)",
                     fn);
    else if (ctx->comm)
        st = mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "%s: the context is already in a group", fn);
    mf_comm *made = NULL;
    st = mf_comm_mpi_join(ctx, fn, mpi_comm, st, &made);
    return mf_ranks_attach(ctx, st, made);
}

/* The points of mf_ranks_agree_first: a failure's point and status and its rank's number
 * in one value, the earliest point first, then the larger status, then the larger rank. */
#define AGREE_POINTS 256

static mf_status agree(mf_ctx *ctx, const char *fn, mf_status st, int point, const int64_t *same,
                       const char *const *names, int n)
{
    if (!ctx || !ctx->comm)
        return st;
    mf_comm *c = ctx->comm;
    if (n > MF_RANKS_MAX_SAME)
        return mf_fail(ctx, MF_ERR_INTERNAL, "%s: %d values to agree on", fn, n);
    if (point < 0 || point >= AGREE_POINTS)
        return mf_fail(ctx, MF_ERR_INTERNAL, "%s: agreement at point %d", fn, point);
    /* Maxima of: a failed rank's point, status and number in one value (so that they name
     * one rank), and each value and its negation (the ranks agree on x when max(x) ==
     * -max(-x)). */
    int64_t v[1 + 2 * MF_RANKS_MAX_SAME];
    v[0] = st != MF_OK
               ? (int64_t)(AGREE_POINTS - 1 - point) << 48 | (int64_t)st << 32 | (int64_t)c->rank
               : -1;
    for (int i = 0; i < n; i++)
        v[1 + 2 * i] = same[i], v[2 + 2 * i] = -same[i];
    mf_status ex = c->ops->max_i64(c, ctx, v, 1 + 2 * n);
    if (ex != MF_OK)
        return ex;
    const int first = AGREE_POINTS - 1 - (int)(v[0] >> 48);
    if (st != MF_OK && point == first)
        return st;
    if (v[0] >= 0) {
        const mf_status failed = (mf_status)(v[0] >> 32 & 0xffff);
        return mf_fail(ctx, failed,
                       "%s: rank %lld of %d failed (%s); its context holds the message", fn,
                       (long long)(v[0] & 0xffffffff), c->size, mf_status_string(failed));
    }
    for (int i = 0; i < n; i++)
        if (v[1 + 2 * i] != -v[2 + 2 * i])
            return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                           "%s: the ranks disagree on %s (%lld here, from %lld to %lld over the "
                           "group): every rank must pass the same",
                           fn, names[i], (long long)same[i], (long long)-v[2 + 2 * i],
                           (long long)v[1 + 2 * i]);
    return MF_OK;
}

mf_status mf_ranks_agree(mf_ctx *ctx, const char *fn, mf_status st, const int64_t *same,
                         const char *const *names, int n)
{
    return agree(ctx, fn, st, 0, same, names, n);
}

mf_status mf_ranks_agree_first(mf_ctx *ctx, const char *fn, mf_status st, int point)
{
    return agree(ctx, fn, st, point, NULL, NULL, 0);
}

int64_t mf_ranks_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

mf_status mf_ranks_agree_fit_parts(mf_ctx *ctx, const char *fn, mf_status st, const mf_sparse *R,
                                   const int64_t *opts, const char *const *names, int n)
{
    if (mf_ranks(ctx) == 1)
        return st;
    enum { FIXED = 7 };
    if (n > MF_RANKS_MAX_SAME - FIXED)
        return mf_fail(ctx, MF_ERR_INTERNAL, "%s: %d options to agree on", fn, n);
    int64_t v[MF_RANKS_MAX_SAME] = {0};
    const char *all[MF_RANKS_MAX_SAME] = {
        "the input's rows", "the input's columns",
        "whether the input is a part of a split matrix (mf_sparse_set_part)",
        "the input's count of entries", "whether the input has values"};
    if (st == MF_OK) {
        /* the parts of a split matrix hold different counts of entries */
        v[0] = R->rows, v[1] = R->cols, v[2] = R->is_part, v[3] = R->is_part ? -1 : R->nnz;
        v[4] = R->val != NULL;
        memcpy(v + 5, opts, (size_t)n * sizeof *v);
        v[5 + n] = (int64_t)(ctx->seed >> 32);
        v[6 + n] = (int64_t)(ctx->seed & 0xffffffffu);
    }
    for (int i = 0; i < n; i++)
        all[5 + i] = names[i];
    all[5 + n] = "the context seed's high bits";
    all[6 + n] = "the context seed's low bits";
    return mf_ranks_agree(ctx, fn, st, v, all, n + FIXED);
}

void mf_partition_rows(const int64_t *ptr, int32_t rows, int parts, int64_t row_cost,
                       int64_t *bounds)
{
    /* work(r): the cost of rows [0, r), increasing in r */
#define WORK(r) (ptr[r] - ptr[0] + (int64_t)(r)*row_cost)
    const int64_t total = WORK(rows);
    bounds[0] = 0;
    for (int p = 1; p < parts; p++) {
        /* the first row r with work(r) >= p * total / parts, at or after the last bound */
        const int64_t target = total / parts * p + total % parts * p / parts;
        int64_t lo = bounds[p - 1], hi = rows;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (WORK(mid) < target)
                lo = mid + 1;
            else
                hi = mid;
        }
        bounds[p] = lo;
    }
    bounds[parts] = rows;
#undef WORK
}

mf_status mf_shares_make_lines(mf_ctx *ctx, const char *fn, const int64_t *const ptr[2],
                               const int32_t lines[2], int64_t row_cost, mf_shares *out)
{
    mf_shares_free(out);
    out->lo[0] = out->lo[1] = 0;
    out->hi[0] = lines[0];
    out->hi[1] = lines[1];
    const int n = mf_ranks(ctx);
    if (n == 1)
        return MF_OK;
    for (int w = 0; w < 2; w++) {
        out->bounds[w] = malloc(((size_t)n + 1) * sizeof *out->bounds[w]);
        if (!out->bounds[w])
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        mf_partition_rows(ptr[w], lines[w], n, row_cost, out->bounds[w]);
        out->lo[w] = (int32_t)out->bounds[w][ctx->comm->rank];
        out->hi[w] = (int32_t)out->bounds[w][ctx->comm->rank + 1];
    }
    return MF_OK;
}

mf_status mf_shares_make(mf_ctx *ctx, const char *fn, mf_sparse *R, int64_t row_cost,
                         mf_shares *out)
{
    if (mf_ranks(ctx) > 1)
        MF_TRY(mf_sparse_host_transpose(R));
    const int64_t *const ptr[2] = {R->row_ptr, R->transpose.ptr};
    const int32_t lines[2] = {R->rows, R->cols};
    return mf_shares_make_lines(ctx, fn, ptr, lines, row_cost, out);
}

void mf_shares_free(mf_shares *s)
{
    free(s->bounds[0]);
    free(s->bounds[1]);
    s->bounds[0] = s->bounds[1] = NULL;
}

int64_t mf_shares_solve_cost(int k, int cg_steps)
{
    return cg_steps > 0 ? 2 * (int64_t)cg_steps : 2 * (int64_t)k / 3;
}

mf_status mf_shares_gather(mf_ctx *ctx, const mf_shares *s, int side, const int *owner,
                           void *factors, size_t row_bytes, void *biases, size_t bias_bytes)
{
    mf_comm *c = ctx->comm;
    /* Both gathers whatever the first returned: a rank that left out the second would leave
     * the others waiting in it (the caller's agreement reports the first failure). */
    const mf_status st = c->ops->allgatherv(c, ctx, factors, s->bounds[side], row_bytes, owner);
    const mf_status b =
        biases ? c->ops->allgatherv(c, ctx, biases, s->bounds[side], bias_bytes, owner) : MF_OK;
    return st != MF_OK ? st : b;
}
