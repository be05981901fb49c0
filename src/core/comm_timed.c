/* The timing table in front of a communicator's ops (cuda/comm.h): each collective an
 * algorithm makes is timed on the host and counted, then forwarded to the implementation
 * with the same mf_comm, so that NCCL, MPI and the in-process group keep their own casts.
 * What mf_ctx_group_stats reports: where a group's iteration goes besides the kernels. */
#include <string.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/opts.h"
#include "core/ranks.h"

/* The rows of the blocks other than `mine`, in bytes. */
static int64_t others_bytes(const mf_comm *c, const int64_t *bounds, size_t row_bytes,
                            const int *owner)
{
    int mine = c->rank;
    for (int b = 0; owner && b < c->size; b++)
        if (owner[b] == c->rank)
            mine = b;
    const int64_t rows = bounds[c->size] - bounds[0] - (bounds[mine + 1] - bounds[mine]);
    return rows * (int64_t)row_bytes;
}

/* A queued op's host time is its enqueueing when the implementation times its device work
 * (device_seconds); otherwise the op ran on the host and its time is the exchange's. */
static void count(mf_comm *c, double t0, int64_t bytes, int queued)
{
    if (!(queued && c->inner->device_seconds))
        c->stats.exchange_seconds += mf_seconds() - t0;
    c->stats.exchange_bytes += bytes;
    c->stats.calls++;
}

static mf_status timed_allgatherv(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                                  size_t row_bytes, const int *owner)
{
    const double t0 = mf_seconds();
    const mf_status st = c->inner->allgatherv(c, ctx, buf, bounds, row_bytes, owner);
    count(c, t0, others_bytes(c, bounds, row_bytes, owner), 1);
    return st;
}

/* A reduction of a few values since t0: a round trip, and the wait for the slowest rank. */
static mf_status waited(mf_comm *c, double t0, mf_status st)
{
    c->stats.wait_seconds += mf_seconds() - t0;
    c->stats.calls++;
    return st;
}

static mf_status timed_max_i64(mf_comm *c, mf_ctx *ctx, int64_t *v, int n)
{
    const double t0 = mf_seconds();
    return waited(c, t0, c->inner->max_i64(c, ctx, v, n));
}

static mf_status timed_sum_f64(mf_comm *c, mf_ctx *ctx, double *v, int n)
{
    const double t0 = mf_seconds();
    return waited(c, t0, c->inner->sum_f64(c, ctx, v, n));
}

static mf_status timed_sum_buffer(mf_comm *c, mf_ctx *ctx, void *buf, size_t n, int is_double)
{
    const double t0 = mf_seconds();
    const mf_status st = c->inner->sum_buffer(c, ctx, buf, n, is_double);
    count(c, t0, (int64_t)n * (is_double ? 8 : 4), 1);
    return st;
}

static mf_status timed_alltoallv(mf_comm *c, mf_ctx *ctx, const void *send,
                                 const int64_t *send_bytes, void *recv, const int64_t *recv_bytes)
{
    const double t0 = mf_seconds();
    const mf_status st = c->inner->alltoallv(c, ctx, send, send_bytes, recv, recv_bytes);
    int64_t in = 0;
    for (int q = 0; q < c->size; q++)
        in += q == c->rank ? 0 : recv_bytes[q];
    count(c, t0, in, 0);
    return st;
}

static mf_status timed_shift(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                             size_t row_bytes, int send, int recv)
{
    const double t0 = mf_seconds();
    const mf_status st = c->inner->shift(c, ctx, buf, bounds, row_bytes, send, recv);
    count(c, t0, (bounds[recv + 1] - bounds[recv]) * (int64_t)row_bytes, 1);
    return st;
}

static void timed_release(mf_comm *c)
{
    c->inner->release(c);
}

static double timed_device_seconds(mf_comm *c)
{
    return c->inner->device_seconds ? c->inner->device_seconds(c) : 0.0;
}

static const mf_comm_ops timed_ops = {timed_allgatherv, timed_max_i64,       timed_sum_f64,
                                      timed_sum_buffer, timed_alltoallv,     timed_shift,
                                      timed_release,    timed_device_seconds};

void mf_comm_timed(mf_comm *c)
{
    if (!c || c->ops == &timed_ops)
        return;
    c->inner = c->ops;
    memset(&c->stats, 0, sizeof c->stats);
    c->ops = &timed_ops;
}

void mf_ranks_costs(const mf_ctx *ctx, double *wait, double *exchange)
{
    mf_comm *c = ctx->comm;
    *wait = c ? c->stats.wait_seconds : 0.0;
    *exchange = c ? c->stats.exchange_seconds + c->ops->device_seconds(c) : 0.0;
}

mf_status mf_ctx_group_stats(const mf_ctx *ctx, mf_group_stats *stats)
{
    mf_ctx *c = (mf_ctx *)ctx;
    MF_REQUIRE(NULL, ctx, "mf_ctx_group_stats: ctx is NULL");
    MF_REQUIRE(c, stats, "mf_ctx_group_stats: stats is NULL");
    size_t writable = 0;
    MF_TRY(MF_OPTS_OUT_SIZE(c, mf_group_stats, stats, &writable));
    mf_group_stats out;
    memset(&out, 0, sizeof out);
    out.struct_size = stats->struct_size;
    mf_ranks_costs(ctx, &out.wait_seconds, &out.exchange_seconds);
    if (ctx->comm) {
        out.exchange_bytes = ctx->comm->stats.exchange_bytes;
        out.calls = ctx->comm->stats.calls;
    }
    memcpy(stats, &out, writable);
    return MF_OK;
}
