/* mf_sgd_hogwild_run: argument checks, the initial factors, the visiting plan and the
 * epoch loop. The updates live in the engines (sgd_cpu.c, sgd.cu); this file is the same
 * for both, so that CPU and GPU runs start alike, report alike and fail alike. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/fit.h"
#include "core/opts.h"
#include "core/random.h"
#include "core/ranks.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"
#include "sgd/sgd_internal.h"
#include "sgd/sgd_rules.h"

/* Philox streams of the initial factors: fixed, so that a seed means one start. */
#define SGD_U_STREAM 0x5347445550ull
#define SGD_V_STREAM 0x5347445651ull

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void sgd_opts_defaults(mf_sgd_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 100;
    opts->learning_rate = 0.05f;
    opts->schedule = MF_SGD_SCHEDULE_INVERSE_TIME;
    opts->decay = 0.3f;
    opts->lambda_u = 0.03f;
    opts->lambda_v = 0.03f;
    opts->epochs = 20;
    opts->storage = MF_SGD_STORAGE_FP32;
    opts->init = MF_SGD_INIT_RANDOM;
    opts->order = MF_SGD_ORDER_USER_CHUNKS;
    opts->biases = 1;
    opts->lambda_bias = 0.03f;
    opts->tune = MF_TUNE_NONE;
}

MF_OPTS_INITIALIZERS(mf_sgd_opts, mf_sgd_opts_init, sgd_opts_defaults, tune)

static mf_status check_opts(mf_ctx *ctx, const mf_sgd_opts *o)
{
    static const char fn[] = "mf_sgd_hogwild_run";
    MF_REQUIRE(ctx, o->rank >= 1 && o->rank <= 512, "%s: rank = %d is outside 1..512", fn, o->rank);
    MF_REQUIRE(ctx, o->learning_rate > 0.0f && isfinite(o->learning_rate),
               "%s: learning_rate = %g must be finite and > 0", fn, (double)o->learning_rate);
    MF_REQUIRE(ctx, o->decay >= 0.0f && isfinite(o->decay),
               "%s: decay = %g must be finite and >= 0", fn, (double)o->decay);
    MF_REQUIRE(ctx, o->lambda_u >= 0.0f && isfinite(o->lambda_u),
               "%s: lambda_u = %g must be finite and >= 0", fn, (double)o->lambda_u);
    MF_REQUIRE(ctx, o->lambda_v >= 0.0f && isfinite(o->lambda_v),
               "%s: lambda_v = %g must be finite and >= 0", fn, (double)o->lambda_v);
    MF_REQUIRE(ctx, o->epochs >= 0, "%s: epochs = %d must be >= 0", fn, o->epochs);
    MF_REQUIRE(ctx, o->workers >= 0, "%s: workers = %d must be >= 0 (0: all)", fn, o->workers);
    MF_REQUIRE(
        ctx, o->schedule == MF_SGD_SCHEDULE_INVERSE_TIME || o->schedule == MF_SGD_SCHEDULE_CONSTANT,
        "%s: schedule = %d is not an mf_sgd_schedule value", fn, (int)o->schedule);
    MF_REQUIRE(ctx, o->storage == MF_SGD_STORAGE_FP32 || o->storage == MF_SGD_STORAGE_FP16,
               "%s: storage = %d is not an mf_sgd_storage value", fn, (int)o->storage);
    MF_REQUIRE(ctx, o->init == MF_SGD_INIT_RANDOM || o->init == MF_SGD_INIT_GIVEN,
               "%s: init = %d is not an mf_sgd_init value", fn, (int)o->init);
    MF_REQUIRE(ctx, o->order == MF_SGD_ORDER_USER_CHUNKS || o->order == MF_SGD_ORDER_RATINGS,
               "%s: order = %d is not an mf_sgd_order value", fn, (int)o->order);
    MF_TRY(mf_fit_check_model(ctx, fn, o->biases, o->lambda_bias, o->tune));
    return MF_OK;
}

/* The caller's factor as a start: copied to the host (from the device if need be) and
 * checked, since a NaN would spread through every row it meets. */
static mf_status load_given(mf_ctx *ctx, const float *X, int64_t rows, int k, mf_memory where,
                            float *X0, const char *name)
{
    size_t bytes = (size_t)rows * k * sizeof *X0;
    if (bytes == 0)
        return MF_OK;
    if (where == MF_MEMORY_DEVICE)
        MF_TRY(mf_cuda_copy(ctx, X0, X, bytes));
    else
        memcpy(X0, X, bytes);
    for (int64_t p = 0; p < rows * k; p++)
        if (!isfinite(X0[p]))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "mf_sgd_hogwild_run: the given %s[%lld][%lld] = %g is not finite", name,
                           (long long)(p / k), (long long)(p % k), (double)X0[p]);
    return MF_OK;
}

/* A biased model predicts mean + known biases for a user or item without ratings: its
 * factor row, which no update touches, starts (and stays) zero. */
static void zero_unrated(const int64_t *const ptr[2], int32_t rows, int32_t cols, int k, float *U0,
                         float *V0)
{
    for (int32_t i = 0; i < rows; i++)
        if (ptr[0][i] == ptr[0][i + 1])
            memset(U0 + (int64_t)i * k, 0, (size_t)k * sizeof *U0);
    for (int32_t j = 0; j < cols; j++)
        if (ptr[1][j] == ptr[1][j + 1])
            memset(V0 + (int64_t)j * k, 0, (size_t)k * sizeof *V0);
}

/* whole: the whole matrix's line offsets where R is a rank's part of it (split input),
 * else NULL (R's own). */
static mf_status initial_factors(mf_ctx *ctx, const mf_sparse *R, int64_t *const whole[2],
                                 const mf_sgd_opts *o, int k, const float *U, const float *V,
                                 mf_memory where, float *U0, float *V0)
{
    if (o->init == MF_SGD_INIT_GIVEN) { /* k is the caller's: tuning keeps a warm start's rank */
        MF_TRY(load_given(ctx, U, R->rows, k, where, U0, "U"));
        return load_given(ctx, V, R->cols, k, where, V0, "V");
    }
    const float hi = 1.0f / sqrtf((float)k);
    mf_random_uniform_host(U0, (int64_t)R->rows * k, 0.0f, hi, ctx->seed, SGD_U_STREAM,
                           mf_ctx_threads(ctx));
    mf_random_uniform_host(V0, (int64_t)R->cols * k, 0.0f, hi, ctx->seed, SGD_V_STREAM,
                           mf_ctx_threads(ctx));
    if (o->biases && whole) {
        const int64_t *const ptr[2] = {whole[0], whole[1]};
        zero_unrated(ptr, R->rows, R->cols, k, U0, V0);
    } else if (o->biases) {
        MF_TRY(mf_sparse_host_transpose((mf_sparse *)R));
        const int64_t *const ptr[2] = {R->row_ptr, R->transpose.ptr};
        zero_unrated(ptr, R->rows, R->cols, k, U0, V0);
    }
    return MF_OK;
}

/* One fit: ratings R at rank k and lambda scale, measured on `test` (NULL: none). */
typedef struct fit_spec {
    const mf_sparse *R;
    const mf_sparse *test;
    int k;
    float lambda_u, lambda_v;
    int final; /* the fit the caller gets: progress calls, the report */
} fit_spec;

typedef struct run_state {
    mf_run run;
    mf_sgd_engine *e;
    const mf_sgd_opts *o;
    const mf_sparse *R;
    mf_sgd_report rep;
    float *U, *V; /* the caller's: a warm start's factors (candidates read them too) */
    mf_memory where;
    /* In a group: the users' shares and as many item blocks, balanced by ratings (each
     * rank keeps its own users' factors through an epoch), the plan's parts (one per item
     * block), and whether the factors are gathered after every epoch (some rank has a
     * progress callback, which measures the RMSE). */
    mf_shares shares;
    int64_t *parts;
    int gather_each;
    /* Split input (a group's ranks each given a part, mf_sparse_set_part): the whole
     * matrix's line offsets, count and mean, summed over the ranks, and this rank's users'
     * entries gathered from every rank's part (the plan's; no rank holds the whole). */
    int split;
    int64_t *whole_ptr[2];
    int64_t whole_nnz;
    double whole_mean;
    mf_sparse *mine;
} run_state;

static void free_group_state(run_state *s)
{
    mf_shares_free(&s->shares);
    free(s->parts);
    s->parts = NULL;
    for (int w = 0; w < 2; w++) {
        free(s->whole_ptr[w]);
        s->whole_ptr[w] = NULL;
    }
    mf_sparse_destroy(s->mine);
    s->mine = NULL;
}

/* The users' shares and the item blocks, balanced by ratings. With split input (collective:
 * every rank calls it with its status so far) from the whole matrix's lines summed over the
 * ranks, and this rank's users' entries gathered from every rank's part into s->mine. */
static mf_status share_rows(run_state *s, const mf_sparse *R, mf_status st)
{
    static const char fn[] = "mf_sgd_hogwild_run";
    mf_ctx *ctx = s->run.ctx;
    const int n = mf_ranks(ctx);
    free_group_state(s);
    s->parts = malloc(((size_t)n + 1) * sizeof *s->parts);
    if (st == MF_OK && !s->parts)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (!s->split)
        return st == MF_OK ? mf_shares_make(ctx, fn, (mf_sparse *)R, 0, &s->shares) : st;
    st = mf_ranks_split_shares(ctx, fn, R, st, 0, s->whole_ptr, NULL, &s->whole_mean, &s->whole_nnz,
                               &s->shares);
    return st == MF_OK ? mf_ranks_gather_lines(ctx, fn, R, 0, s->shares.bounds[0], &s->mine) : st;
}

/* Between epochs, the whole factors on every rank: rank b's share of the users and item
 * block b (the ring's last step of an epoch brought each rank its own block, fresh), with
 * their biases. */
static mf_status share_all(run_state *s)
{
    for (int side = 0; side < 2; side++) {
        void *factors, *biases;
        size_t row_bytes, bias_bytes;
        s->e->shared(s->e, side, &factors, &row_bytes, &biases, &bias_bytes);
        MF_TRY(mf_shares_gather(s->run.ctx, &s->shares, side, NULL, factors, row_bytes, biases,
                                bias_bytes));
    }
    return MF_OK;
}

/* A step of the ring: the item block this rank just updated (send) to rank - 1, and block
 * recv, which rank + 1 just updated, from it; with their biases. */
static mf_status shift_items(run_state *s, int send, int recv)
{
    mf_ctx *ctx = s->run.ctx;
    mf_comm *c = ctx->comm;
    const int64_t *bounds = s->shares.bounds[1];
    void *factors, *biases;
    size_t row_bytes, bias_bytes;
    s->e->shared(s->e, 1, &factors, &row_bytes, &biases, &bias_bytes);
    MF_TRY(c->ops->shift(c, ctx, factors, bounds, row_bytes, send, recv));
    return biases ? c->ops->shift(c, ctx, biases, bounds, bias_bytes, send, recv) : MF_OK;
}

int mf_sgd_debug_fail_rank = -1;
int64_t mf_sgd_debug_fail_step = -1;

/* One epoch of a group (NOMAD's and LIBMF's block rotation): in sub-step q, rank r updates
 * its users against item block (r + q) mod n, so that no two ranks write one factor row,
 * then passes that block to rank r - 1, which updates it next, and takes block
 * (r + q + 1) mod n from rank r + 1: a ring, one block a step (a broadcast of every block
 * to every rank had moved n - 1 times the bytes). After the last step each rank holds its
 * own block r fresh, as at the epoch's start; the other blocks of its copy are stale until
 * share_all. The sub-steps follow each other in the stream with no wait for the device or
 * the other ranks (each had cost a stream synchronization and a host round trip, a share of
 * 4-GPU SGD's time that grew with the ranks): the epoch ends in one read of this rank's loss
 * and one sum over the ranks, which carries both the group's loss (*sq_err) and whether any
 * rank failed (*failed, the same on every rank). A rank whose part failed still takes part
 * in every exchange that follows, so that no rank waits for it forever; the caller's
 * agreement then fails them all. Returns this rank's own status (not agreed). An exchange
 * that fails returns at once, as any collective's failure does. */
static mf_status group_epoch(run_state *s, int t, float lr, double *sq_err, int *failed)
{
    mf_ctx *ctx = s->run.ctx;
    const int n = ctx->comm->size, r = ctx->comm->rank;
    mf_status st = MF_OK;
    *failed = 0;
    /* MFACT_SGD_TRACE (benches): each sub-step's update pass and shift waited for (a read of
     * the loss so far) and timed on the host, a line an epoch a rank at MF_LOG_INFO. The waits
     * serialize what the stream would overlap: a breakdown, not the epoch's time. */
    const char *tv = getenv("MFACT_SGD_TRACE");
    const int trace = tv && *tv && strcmp(tv, "0") != 0;
    double traced = 0.0, x = 0.0;
    char line[512];
    int used = 0;
    for (int q = 0; q < n; q++) {
        const double t0 = mf_seconds();
        if (st == MF_OK && r == mf_sgd_debug_fail_rank &&
            (int64_t)t * n + q == mf_sgd_debug_fail_step)
            st = mf_fail(ctx, MF_ERR_INTERNAL,
                         "mf_sgd_hogwild_run: sub-step %d of epoch %d failed (a test's failure)", q,
                         t + 1);
        if (st == MF_OK)
            st = s->e->part_epoch(s->e, t, (r + q) % n, lr);
        if (trace && st == MF_OK && (st = s->e->loss(s->e, &x)) == MF_OK)
            traced += x;
        const double t1 = mf_seconds();
        MF_TRY(shift_items(s, (r + q) % n, (r + q + 1) % n));
        if (trace && st == MF_OK && (st = s->e->loss(s->e, &x)) == MF_OK)
            traced += x;
        if (trace && used < (int)sizeof line - 40)
            used += snprintf(line + used, sizeof line - (size_t)used, " %.3f+%.3f", 1e3 * (t1 - t0),
                             1e3 * (mf_seconds() - t1));
    }
    if (trace && used > 0)
        mf_log(ctx, MF_LOG_INFO, "mf_sgd_hogwild_run: epoch %d rank %d, update + shift ms:%s",
               t + 1, r, line);
    double v[2] = {0.0, 0.0}; /* the loss, the ranks that failed */
    if (st == MF_OK)
        st = s->e->loss(s->e, &v[0]);
    v[0] += traced;
    if (st != MF_OK)
        v[0] = 0.0, v[1] = 1.0;
    MF_TRY(ctx->comm->ops->sum_f64(ctx->comm, ctx, v, 2));
    *sq_err = v[0];
    *failed = v[1] > 0.0;
    if (*failed || !s->gather_each)
        return st;
    return share_all(s);
}

/* The RMSE over M: one context's, or in a group where each rank holds a part of M (its
 * users' ratings of a split input, or a test set split alike) the sum over the ranks. */
static mf_status rmse_of(run_state *s, const mf_sparse *M, int parts, double *out)
{
    if (!parts)
        return s->e->rmse(s->e, M, out);
    double rmse = 0.0;
    const mf_status st = M->nnz > 0 ? s->e->rmse(s->e, M, &rmse) : MF_OK;
    return mf_ranks_rmse(s->run.ctx, "mf_sgd_hogwild_run", st, rmse, M->nnz, out);
}

static mf_status measure(run_state *s, const fit_spec *f)
{
    const int group = mf_ranks(s->run.ctx) > 1;
    MF_TRY(rmse_of(s, s->split ? s->mine : f->R, s->split, &s->rep.train_rmse));
    s->rep.test_rmse = NAN;
    if (f->test)
        MF_TRY(rmse_of(s, f->test, group && f->test->is_part, &s->rep.test_rmse));
    return MF_OK;
}

/* Name the cause: each update shrinks a factor by lr * lambda, so at lr * lambda >= 1 it
 * overshoots zero and grows whatever the learning rate's other effects (a huge lambda was
 * blamed on the learning rate). */
static mf_status diverged(mf_ctx *ctx, const mf_sgd_opts *o, int epoch, double loss, float lr)
{
    double shrink = (double)lr * (o->lambda_u > o->lambda_v ? o->lambda_u : o->lambda_v);
    if (o->lambda_bias > o->lambda_u && o->lambda_bias > o->lambda_v && o->biases)
        shrink = (double)lr * o->lambda_bias;
    if (shrink >= 1.0)
        return mf_fail(ctx, MF_ERR_NUMERIC,
                       "mf_sgd_hogwild_run: diverged in epoch %d: learning rate %g x lambda "
                       "(lambda_u %g, lambda_v %g) = %g >= 1 makes each update overshoot: lower "
                       "lambda_u/lambda_v or take a smaller learning_rate, so that their "
                       "product stays well below 1",
                       epoch, (double)lr, (double)o->lambda_u, (double)o->lambda_v, shrink);
    return mf_fail(ctx, MF_ERR_NUMERIC,
                   "mf_sgd_hogwild_run: diverged in epoch %d (the squared errors summed to %g "
                   "at learning rate %g): try a smaller learning_rate",
                   epoch, loss, (double)lr);
}

static mf_status iterate(run_state *s, const fit_spec *f)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_sgd_opts *o = s->o;
    const int group = mf_ranks(ctx) > 1;
    int have_rmse = 0;
    s->rep.epochs = 0;
    s->rep.epoch_seconds = 0.0;
    /* In a group, one step of the ring before the clock starts: NCCL connects a pair of
     * ranks at their first send and receive, which would otherwise fall in the first epoch.
     * It changes nothing that is read: rank r takes block r + 1, which it reads only in
     * sub-step 1, after the same ring brought it again, updated. */
    if (group) {
        const int r = ctx->comm->rank, n = ctx->comm->size;
        MF_TRY(shift_items(s, r, (r + 1) % n));
    }
    mf_status st = MF_OK;
    for (int t = 0; t < o->epochs && st == MF_OK; t++) {
        float lr =
            mf_sgd_rate(o->learning_rate, o->schedule == MF_SGD_SCHEDULE_INVERSE_TIME, o->decay, t);
        double t0 = mf_seconds(), loss = 0.0;
        int failed = 0; /* in a group: some rank's epoch failed (every rank sees it) */
        st = group ? group_epoch(s, t, lr, &loss, &failed) : s->e->epoch(s->e, t, lr, &loss);
        if (st != MF_OK && !failed)
            return st; /* one context, or an exchange that failed */
        if (!failed) {
            s->rep.epoch_seconds += mf_seconds() - t0;
            if (!isfinite(loss)) /* a group's loss is the same on every rank */
                return diverged(ctx, o, t + 1, loss, lr);
            s->rep.epochs = t + 1;
            have_rmse = 0;
            if (o->progress && f->final) {
                st = measure(s, f);
                if (st == MF_OK) {
                    have_rmse = 1;
                    mf_progress p = {t + 1, mf_run_seconds(&s->run), s->rep.train_rmse,
                                     s->rep.test_rmse};
                    st = mf_run_cancelled(&s->run, o->progress(o->progress_user, &p), "epoch",
                                          t + 1);
                }
            }
        }
        /* In a group (whose ranks may have a progress callback or not): one rank's failure
         * or cancel stops them all, each keeping this epoch when it was a cancel. Without
         * a failure and without progress callbacks (gather_each: none on any rank) every
         * rank is still fine, and the round trip is left out. */
        if (group && (failed || s->gather_each))
            st = mf_ranks_agree(ctx, "mf_sgd_hogwild_run", st, NULL, NULL, 0);
    }
    /* The whole factors, unless every epoch gathered them. */
    if (group && !s->gather_each && mf_run_has_result(st))
        st = mf_run_then(st, share_all(s));
    if (!mf_run_has_result(st))
        return st;
    if (!have_rmse)
        st = mf_run_then(st, measure(s, f));
    /* Overflow of the factors can leave every error finite until the last update. */
    if (mf_run_has_result(st) && !isfinite(s->rep.train_rmse))
        return diverged(ctx, o, s->rep.epochs, s->rep.train_rmse,
                        mf_sgd_rate(o->learning_rate, o->schedule == MF_SGD_SCHEDULE_INVERSE_TIME,
                                    o->decay, s->rep.epochs > 0 ? s->rep.epochs - 1 : 0));
    return st;
}

/* The start, the plan, the engine, the epochs; the final fit hands its factors over. */
static mf_status fit(run_state *s, const fit_spec *f, float *U, float *V, mf_memory where)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_sgd_opts *o = s->o;
    const mf_sparse *R = f->R;
    float *U0 = malloc(((size_t)R->rows * f->k + 1) * sizeof *U0);
    float *V0 = malloc(((size_t)R->cols * f->k + 1) * sizeof *V0);
    mf_sgd_plan plan = {0};
    mf_status st = MF_OK;
    if (!U0 || !V0)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                     "mf_sgd_hogwild_run: out of host memory for the initial factors");
    const int ranks = mf_ranks(ctx);
    if (ranks > 1) /* collective with split input: every rank, with its status */
        st = share_rows(s, R, st);
    if (st == MF_OK)
        st = initial_factors(ctx, R, s->split ? s->whole_ptr : NULL, o, f->k, U, V, where, U0, V0);
    if (st == MF_OK && ranks > 1) {
        st = mf_sgd_plan_build_blocks(ctx, s->split ? s->mine : R, o->order, ctx->seed,
                                      s->shares.lo[0], s->shares.hi[0], s->shares.bounds[1], ranks,
                                      &plan, s->parts);
    } else if (st == MF_OK) {
        st = mf_sgd_plan_build(ctx, R, o->order, ctx->seed, &plan);
    }
    const float mean = o->biases ? (float)(s->split ? s->whole_mean : mf_sparse_mean(R)) : 0.0f;
    for (int64_t q = 0; st == MF_OK && o->biases && q < plan.nnz; q++)
        plan.entry[q].rating -= mean; /* the updates fit r - mean */
    /* Hogwild's updates read rows that other workers are about to overwrite. With as many
     * workers as chunks, a whole epoch runs as one wave from one stale state: on MovieLens
     * 100K with 8,448 warps the test RMSE was 0.957 against 0.927 with 64; on FilmTrust
     * (H100, the defaults) 47 warps gave 0.8023, 16 gave 0.7967 and 8 gave 0.7957. At most
     * one worker per MF_SGD_MIN_WAVES chunks keeps every epoch many waves long; Netflix-sized
     * data has far more chunks than any device has warps, so it runs at full width. In a
     * group the rule holds for each sub-step; where a sub-step alone would already run
     * MF_SGD_WIDE_STEP workers (large data), it holds for the rank's epoch (all of its
     * sub-steps, plan.nchunks) instead, so that a sub-step runs at least MF_SGD_MIN_WAVES /
     * ranks waves. (Per sub-step alone, it had left 37% of an H100's workers idle on
     * Netflix's shape over 2 GPUs and 83% over 4: a group was no faster than one GPU. Per
     * epoch on small data, test_gpu_ranks's SGD over 2 ranks fit 2% worse than one GPU.) */
    const int64_t per_step = plan.nchunks / ranks / MF_SGD_MIN_WAVES;
    /* MFACT_SGD_GROUP_WAVES (benches, 1..MF_SGD_MIN_WAVES; the same on every rank): a large
     * group's waves per rank epoch in place of MF_SGD_MIN_WAVES (one context keeps the rule). */
    const char *gw = ranks > 1 ? getenv("MFACT_SGD_GROUP_WAVES") : NULL;
    const int64_t waves =
        gw && atoi(gw) >= 1 && atoi(gw) <= MF_SGD_MIN_WAVES ? atoi(gw) : MF_SGD_MIN_WAVES;
    int64_t cap = per_step >= MF_SGD_WIDE_STEP ? plan.nchunks / waves : per_step;
    mf_sgd_setup setup = {ctx,
                          R,
                          &plan,
                          f->k,
                          o->storage,
                          o->order,
                          f->lambda_u,
                          f->lambda_v,
                          o->workers,
                          cap > 1 ? cap : 1,
                          ctx->seed,
                          U0,
                          V0,
                          o->biases,
                          o->lambda_bias,
                          mean,
                          ranks > 1 ? s->parts : NULL,
                          ranks};
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&s->run, mf_sgd_cpu_engine, mf_cuda_sgd_engine, &setup, &s->e);
    free(U0);
    free(V0);
    /* In a group, every rank has its engine before the first exchange, or none goes on. */
    st = mf_ranks_agree(ctx, "mf_sgd_hogwild_run", st, NULL, NULL, 0);
    if (st != MF_OK) {
        if (s->e)
            s->e->destroy(s->e);
        s->e = NULL;
        mf_sgd_plan_free(&plan);
        return st;
    }
    s->rep.workers = s->e->workers;
    st = iterate(s, f);
    if (f->final && mf_run_has_result(st)) {
        mf_biases *out = o->bias_out;
        st = mf_run_then(st, mf_fit_zero_tail(ctx, U, V, R->rows, R->cols, f->k, o->rank, where));
        if (mf_run_has_result(st))
            st = mf_run_then(st, s->e->finish(s->e, U, V, o->rank, out ? out->user : NULL,
                                              out ? out->item : NULL));
        if (mf_run_has_result(st))
            st = mf_run_then(st,
                             mf_fit_bias_out(ctx, out, o->biases, mean, R->rows, R->cols, where));
    }
    s->e->destroy(s->e);
    s->e = NULL;
    mf_sgd_plan_free(&plan); /* the CPU engine walks it; the CUDA one has its own copy */
    return st;
}

/* lambda_v at a tuned lambda_u: the caller's ratio kept (lambda_u = 0: lambda_v as given). */
static float lambda_v_for(const mf_sgd_opts *o, float lambda_u)
{
    return o->lambda_u > 0.0f ? lambda_u * (o->lambda_v / o->lambda_u) : o->lambda_v;
}

/* A tuning candidate (mf_tune_fit_fn): fit_part at (rank, lambda_u), its validation RMSE. */
static mf_status fit_candidate(void *user, mf_sparse *fit_part, const mf_sparse *valid, int rank,
                               float lambda, double *rmse)
{
    run_state *s = user;
    fit_spec f = {fit_part, valid, rank, lambda, lambda_v_for(s->o, lambda), 0};
    MF_TRY(fit(s, &f, s->U, s->V, s->where));
    *rmse = s->rep.test_rmse;
    return MF_OK;
}

/* In a group: every rank's checks passed and they fit the same problem (the same shapes,
 * options and seed), or every rank fails. Outside a group: st. */
static mf_status agree_on_run(mf_ctx *ctx, mf_status st, const mf_sparse *R, const mf_sgd_opts *o)
{
    static const char *const names[] = {"rank",    "epochs",   "learning_rate", "schedule",
                                        "decay",   "lambda_u", "lambda_v",      "lambda_bias",
                                        "storage", "order",    "biases",        "init"};
    const int64_t v[] = {o->rank,
                         o->epochs,
                         mf_ranks_bits(o->learning_rate),
                         o->schedule,
                         mf_ranks_bits(o->decay),
                         mf_ranks_bits(o->lambda_u),
                         mf_ranks_bits(o->lambda_v),
                         mf_ranks_bits(o->lambda_bias),
                         o->storage,
                         o->order,
                         o->biases,
                         o->init};
    return mf_ranks_agree_fit_parts(ctx, "mf_sgd_hogwild_run", st, R, v, names, 12);
}

mf_status mf_sgd_hogwild_run(mf_ctx *ctx, const mf_sparse *ratings, const mf_sgd_opts *opts,
                             float *U, float *V, mf_memory where, mf_sgd_report *report)
{
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    run_state s = {.o = &o,
                   .R = ratings,
                   .rep.test_rmse = NAN,
                   .rep.validation_rmse = NAN,
                   .U = U,
                   .V = V,
                   .where = where};

    mf_status st = mf_run_begin_collective(
        &s.run, ctx,
        &(mf_run_args){"mf_sgd_hogwild_run", MF_RUN_INPUT(ratings), MF_RUN_OUTPUTS(U, V), where,
                       MF_RUN_OPTS(mf_sgd_opts, &o, opts), MF_RUN_REPORT(mf_sgd_report, report),
                       &o.test});
    if (st == MF_OK)
        st = check_opts(ctx, &o);
    if (st == MF_OK && o.tune && mf_ranks(ctx) > 1)
        st = mf_fail(ctx, MF_ERR_UNSUPPORTED,
                     "mf_sgd_hogwild_run: tune does not run over a group of contexts yet");
    st = agree_on_run(ctx, st, ratings, &o);
    if (st == MF_OK && mf_ranks(ctx) > 1) {
        /* Whether some rank measures the RMSE every epoch (a progress callback): then the
         * users' shares go to every rank after every epoch. Every rank is here (all agreed
         * MF_OK), so this exchange pairs up. */
        int64_t any = o.progress != NULL;
        st = ctx->comm->ops->max_i64(ctx->comm, ctx, &any, 1);
        s.gather_each = any > 0;
    }
    if (st != MF_OK)
        return st;
    mf_run_start(&s.run);
    s.split = mf_ranks(ctx) > 1 && ratings->is_part;
    fit_spec f = {ratings, o.test, o.rank, o.lambda_u, o.lambda_v, 1};
    if (o.tune && o.epochs > 0) {
        mf_tune_result best;
        st = mf_tune_search(ctx, "mf_sgd_hogwild_run", ratings, o.tune, o.rank, o.lambda_u,
                            o.init == MF_SGD_INIT_GIVEN, fit_candidate, &s, &best);
        f.k = best.rank, f.lambda_u = best.lambda, f.lambda_v = lambda_v_for(&o, best.lambda);
        s.rep.validation_rmse = best.rmse;
    }
    s.rep.lambda = f.lambda_u;
    s.rep.rank = f.k;
    if (st == MF_OK)
        st = fit(&s, &f, U, V, where);
    s.rep.seconds = mf_run_seconds(&s.run);
    const int64_t nnz = s.split ? s.whole_nnz : ratings->nnz; /* before its state is freed */
    free_group_state(&s);
    s.rep.updates_per_second =
        s.rep.epoch_seconds > 0 ? (double)nnz * s.rep.epochs / s.rep.epoch_seconds : 0.0;
    return mf_run_finish(&s.run, st, report, &s.rep, &s.rep.peak_device_bytes);
}
