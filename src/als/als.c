/* mf_als_run: argument checks, the initial factors, and the iteration loop. The arithmetic
 * lives in the engines (als_cpu.c, als.cu); this file is the same for both, so that CPU
 * and GPU runs start from the same V, report alike and fail alike. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "als/als_internal.h"
#include "als/als_shard.h"
#include "core/clock.h"
#include "core/ctx.h"
#include "core/fit.h"
#include "core/opts.h"
#include "core/random.h"
#include "core/ranks.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"

/* The Philox stream of the initial factors: fixed, so that a seed means one start. */
#define ALS_INIT_STREAM 0x414c53u

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void als_opts_defaults(mf_als_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 32;
    opts->lambda = 15.0f;
    opts->iterations = 10;
    opts->init = MF_ALS_INIT_UNIFORM;
    opts->biases = 1;
    opts->lambda_bias = 5.0f;
    opts->tune = MF_TUNE_NONE;
    opts->weighting = MF_ALS_WEIGHT_NONE;
    opts->solver = MF_ALS_SOLVER_AUTO;
    opts->cg_steps = 6;
    opts->tf32 = 1;
}

MF_OPTS_INITIALIZERS(mf_als_opts, mf_als_opts_init, als_opts_defaults, cg_steps)

int mf_als_debug_gram = 0;

static mf_status check_opts(mf_ctx *ctx, const mf_als_opts *o)
{
    static const char fn[] = "mf_als_run";
    MF_REQUIRE(ctx, o->rank >= 1 && o->rank <= 256, "%s: rank = %d is outside 1..256", fn, o->rank);
    MF_REQUIRE(ctx, o->lambda >= 0.0f && isfinite(o->lambda),
               "%s: lambda = %g must be finite and >= 0", fn, (double)o->lambda);
    MF_REQUIRE(ctx, o->iterations >= 1, "%s: iterations = %d must be at least 1", fn,
               o->iterations);
    MF_REQUIRE(ctx,
               o->init == MF_ALS_INIT_MEAN || o->init == MF_ALS_INIT_GIVEN ||
                   o->init == MF_ALS_INIT_UNIFORM,
               "%s: init = %d is not an mf_als_init value", fn, (int)o->init);
    MF_TRY(mf_fit_check_model(ctx, fn, o->biases, o->lambda_bias, o->tune));
    MF_REQUIRE(ctx, o->weighting == MF_ALS_WEIGHT_COUNT || o->weighting == MF_ALS_WEIGHT_NONE,
               "%s: weighting = %d is not an mf_als_weighting value", fn, (int)o->weighting);
    MF_REQUIRE(ctx,
               o->solver == MF_ALS_SOLVER_AUTO || o->solver == MF_ALS_SOLVER_EXACT ||
                   o->solver == MF_ALS_SOLVER_CG,
               "%s: solver = %d is not an mf_als_solver value", fn, (int)o->solver);
    MF_REQUIRE(ctx, o->tf32 == 0 || o->tf32 == 1, "%s: tf32 = %d must be 0 or 1", fn, o->tf32);
    MF_TRY(mf_precision_check(ctx, fn, "rmse_precision", (int)o->rmse_precision));
    MF_REQUIRE(ctx,
               o->layout == MF_ALS_LAYOUT_AUTO || o->layout == MF_ALS_LAYOUT_REPLICATED ||
                   o->layout == MF_ALS_LAYOUT_USERS_SHARDED,
               "%s: layout = %d is not an mf_als_layout value", fn, (int)o->layout);
    MF_REQUIRE(ctx, o->cg_steps >= 1 && o->cg_steps <= 64, "%s: cg_steps = %d is outside 1..64", fn,
               o->cg_steps);
    MF_REQUIRE(
        ctx, o->solver != MF_ALS_SOLVER_CG || o->rank + (o->biases ? 1 : 0) <= MF_ALS_CG_MAX_ORDER,
        "%s: MF_ALS_SOLVER_CG takes rank + biases <= %d (rank = %d, biases = %d)", fn,
        MF_ALS_CG_MAX_ORDER, o->rank, o->biases);
    return MF_OK;
}

/* Rank from which AUTO takes CG: where the exact solve's k^3 starts to show in an
 * iteration (measured on an H100, docs/api.md). */
#define ALS_CG_FROM_RANK 64

/* CG steps for a fit at rank k: 0 (the exact solver) or opts.cg_steps. */
static int cg_steps_for(const mf_als_opts *o, int k)
{
    const int order = k + (o->biases ? 1 : 0);
    if (o->solver == MF_ALS_SOLVER_EXACT || order > MF_ALS_CG_MAX_ORDER)
        return 0;
    if (o->solver == MF_ALS_SOLVER_AUTO && k < ALS_CG_FROM_RANK)
        return 0;
    return o->cg_steps;
}

/* The Gram kernel (als_internal.h) for a fit with cg_steps (0: exact): TF32 products where
 * the solve is CG and opts.tf32 allows (measured at k = 100 on an H100, Netflix-shaped:
 * Gram 72 -> 42 ms an iteration, test RMSE the same to 4 digits on three shapes); float
 * accuracy where the solve is exact. bench_als --gram overrides it. */
static int gram_kernel_for(const mf_als_opts *o, int cg_steps)
{
    if (mf_als_debug_gram)
        return mf_als_debug_gram;
    return cg_steps > 0 && o->tf32 ? MF_ALS_GRAM_TF32 : MF_ALS_GRAM_AUTO;
}

/* The seeded starts: V uniform in [0, 0.1) (cuMF_als's); for Zhou's, uniform in
 * [-0.1, 0.1) with column 0 the item's mean rating. Items without ratings get a zero row. */
static void init_seeded(mf_ctx *ctx, int32_t cols, const int64_t *col_ptr, const double *col_sum,
                        int k, bool zhou, float *V0)
{
    mf_random_uniform_host(V0, (int64_t)cols * k, zhou ? -0.1f : 0.0f, 0.1f, ctx->seed,
                           ALS_INIT_STREAM, mf_ctx_threads(ctx));
    for (int32_t i = 0; i < cols; i++) {
        const int64_t n = col_ptr[i + 1] - col_ptr[i];
        float *v = V0 + (int64_t)i * k;
        if (n == 0)
            memset(v, 0, (size_t)k * sizeof *v);
        else if (zhou)
            v[0] = (float)(col_sum[i] / (double)n);
    }
}

/* Each column's sum of values (ones for a pattern), in the column's order: one sweep of the
 * rows in order adds each column's entries in the transpose's order (rows ascending), so
 * the sums are the transpose's bit for bit without building it. */
static double *column_sums(const mf_sparse *R)
{
    double *sum = calloc((size_t)R->cols + 1, sizeof *sum);
    for (int64_t p = 0; sum && p < R->nnz; p++)
        sum[R->col[p]] += R->val ? R->val[p] : 1.0f;
    return sum;
}

/* The start from the whole matrix R. */
static mf_status init_whole(mf_ctx *ctx, mf_sparse *R, int k, bool zhou, float *V0)
{
    const int64_t *col_ptr;
    MF_TRY(mf_sparse_col_ptr(R, &col_ptr));
    double *sum = zhou ? column_sums(R) : NULL;
    if (zhou && !sum)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory");
    init_seeded(ctx, R->cols, col_ptr, sum, k, zhou, V0);
    free(sum);
    return MF_OK;
}

/* One fit: ratings R at rank k and lambda, measured on `test` (NULL: none). */
typedef struct fit_spec {
    mf_sparse *R;
    const mf_sparse *test;
    int k;
    float lambda;
    int final; /* the fit the caller gets: progress calls, the report's timings */
} fit_spec;

typedef struct run_state {
    mf_run run;
    mf_als_engine *e;
    const mf_als_opts *o;
    mf_sparse *R;
    mf_als_report rep;
    float *U, *V; /* the caller's: a warm start's V (candidates read it too) */
    mf_memory where;
    mf_shares shares;   /* the users' and items' shares of this rank (core/ranks.h) */
    mf_sparse *part[2]; /* in a group: this rank's shard of each side (mf_sparse_block) */
    /* Split input (mf_sparse_set_part) over a group: the whole matrix's line offsets of
     * each side, its column sums (Zhou's start) and its mean, summed over the ranks. */
    int split;
    int64_t *whole_ptr[2];
    double *col_sum;
    double mean;
    /* MF_ALS_LAYOUT_USERS_SHARDED in a group (als_shard.h): the rank's users as a problem
     * of their own (rows lo..hi of the ratings and of the test set, re-indexed from 0). */
    int sharded;
    mf_sparse *local, *local_test;
} run_state;

/* After a half step in a group: each share's factors (and biases) go to every rank,
 * whatever the half step's status, so that every rank makes the same collective calls (a
 * rank that failed sends what it has); the iteration's agreement then stops them all.
 * Agreeing here instead cost a host round trip a half step, and drained every rank's queue
 * twice an iteration. Outside a group: nothing. */
static mf_status exchange(run_state *s, mf_als_side side)
{
    mf_ctx *ctx = s->run.ctx;
    if (mf_ranks(ctx) == 1 || s->sharded) /* sharded: U stays, V is every rank's already */
        return MF_OK;
    void *factors;
    size_t row_bytes;
    float *biases;
    s->e->shared(s->e, side, &factors, &row_bytes, &biases);
    return mf_shares_gather(ctx, &s->shares, side, NULL, factors, row_bytes, biases,
                            sizeof *biases);
}

/* One iteration queued (the half steps and, in a group, the exchanges after each), then
 * settled: one wait for the device. *point: where the first failure came, in the order of
 * the work (0, 1: the users' half step and exchange; 2, 3: the items'), for
 * mf_ranks_agree_first: a rank that went on from another's garbage may fail later. */
static mf_status one_iteration(run_state *s, double *gram, double *solve, int *point)
{
    mf_als_engine *e = s->e;
    mf_status step[4];
    step[0] = e->half_step(e, MF_ALS_USERS);
    step[1] = exchange(s, MF_ALS_USERS);
    if (step[0] == MF_OK && step[1] == MF_OK) {
        step[2] = e->half_step(e, MF_ALS_ITEMS);
    } else if (s->sharded) {
        /* the items' half step is collective (its sums): a rank that failed runs it too,
         * keeping its first failure's message */
        char first[MF_ERROR_CAPACITY];
        memcpy(first, s->run.ctx->error, sizeof first);
        step[2] = e->half_step(e, MF_ALS_ITEMS);
        memcpy(s->run.ctx->error, first, sizeof first);
    } else {
        step[2] = MF_OK;
    }
    step[3] = exchange(s, MF_ALS_ITEMS);
    mf_als_side broke = MF_ALS_USERS;
    const mf_status settled = e->settle(e, gram, solve, &broke);
    if (settled != MF_OK) /* a breakdown, found as the queue drained */
        step[broke == MF_ALS_USERS ? 0 : 2] = settled;
    for (*point = 0; *point < 4; ++*point)
        if (step[*point] != MF_OK)
            return step[*point];
    return settled;
}

/* The RMSE over M's entries summed over the ranks: each rank's over its M (its users' shard,
 * or its part of a split test set), squared errors and counts added (the same bits on every
 * rank; equal to one context's to rounding, not bit for bit). */
static mf_status group_rmse(run_state *s, const mf_sparse *M, int precision, double *out)
{
    double rmse = 0.0;
    mf_status st = M->nnz > 0 ? s->e->rmse(s->e, M, precision, &rmse) : MF_OK;
    return mf_ranks_rmse(s->run.ctx, "mf_als_run", st, rmse, M->nnz, out);
}

/* The RMSEs of a fit: the final fit's in opts.rmse_precision, a tuning candidate's in float
 * (its validation RMSE picks lambda and rank: the fit the caller gets must not depend on
 * the reported RMSEs' arithmetic). */
static mf_status measure(run_state *s, const fit_spec *f, double *train, double *test)
{
    const int prec = f->final ? (int)s->o->rmse_precision : MF_PRECISION_FP32;
    if (s->sharded) { /* each rank's users, against its own rows of U */
        MF_TRY(group_rmse(s, s->local, prec, train));
        *test = NAN;
        return s->local_test ? group_rmse(s, s->local_test, prec, test) : MF_OK;
    }
    if (s->part[MF_ALS_USERS])
        MF_TRY(group_rmse(s, s->part[MF_ALS_USERS], prec, train));
    else
        MF_TRY(s->e->rmse(s->e, f->R, prec, train));
    *test = NAN;
    if (f->test && f->test->is_part && mf_ranks(s->run.ctx) > 1)
        MF_TRY(group_rmse(s, f->test, prec, test));
    else if (f->test)
        MF_TRY(s->e->rmse(s->e, f->test, prec, test));
    return MF_OK;
}

static mf_status iterate(run_state *s, const fit_spec *f)
{
    const mf_als_opts *o = s->o;
    double gram = 0.0, solve = 0.0, iter = 0.0, train = NAN, test = NAN;
    int have_rmse = 0, done = 0;
    mf_status st = MF_OK;
    /* Measuring is collective in a group (the ranks' shards add up to the training RMSE):
     * every rank measures each iteration when any rank has a progress callback. */
    int64_t measure_each = o->progress != NULL;
    if (mf_ranks(s->run.ctx) > 1)
        MF_TRY(s->run.ctx->comm->ops->max_i64(s->run.ctx->comm, s->run.ctx, &measure_each, 1));
    /* The group's costs over the iterations: from here to the last agreement, less the
     * measurements' and the agreements after them (their RMSE sums and the progress
     * callbacks wait for the slowest rank too). */
    double wait0, exchange0, wait1, exchange1, measured_wait = 0.0, measured_exchange = 0.0;
    mf_ranks_costs(s->run.ctx, &wait0, &exchange0);
    for (int it = 1; it <= o->iterations && st == MF_OK; it++) {
        double t0 = mf_seconds();
        int point = 0;
        st = one_iteration(s, &gram, &solve, &point);
        /* In a group: one rank's failure stops them all (the earliest in the work wins). */
        st = mf_ranks_agree_first(s->run.ctx, "mf_als_run", st, point);
        if (st == MF_OK) {
            iter += mf_seconds() - t0;
            done = it;
            have_rmse = 0;
        }
        if (st == MF_OK && measure_each && f->final) {
            double w, x;
            mf_ranks_costs(s->run.ctx, &w, &x);
            measured_wait -= w, measured_exchange -= x;
            st = measure(s, f, &train, &test);
            have_rmse = st == MF_OK;
            if (st == MF_OK && o->progress) {
                mf_progress p = {it, mf_run_seconds(&s->run), train, test};
                st = mf_run_cancelled(&s->run, o->progress(o->progress_user, &p), "iteration", it);
            }
            /* In a group (whose ranks may have a progress callback or not): one rank's
             * failure or cancel stops them all, each keeping this step when it was a cancel. */
            st = mf_ranks_agree(s->run.ctx, "mf_als_run", st, NULL, NULL, 0);
            /* This agreement waits for the slowest rank's measurement and callback: it is
             * the measurement's cost, not the iteration's (as in iteration_seconds). */
            mf_ranks_costs(s->run.ctx, &w, &x);
            measured_wait += w, measured_exchange += x;
        }
    }
    mf_ranks_costs(s->run.ctx, &wait1, &exchange1);
    if (st == MF_OK && !have_rmse)
        st = measure(s, f, &train, &test);
    if (f->final) {
        s->rep.group_wait_seconds = wait1 - wait0 - measured_wait;
        s->rep.group_exchange_seconds = exchange1 - exchange0 - measured_exchange;
        s->rep.iterations = done;
        s->rep.gram_seconds = gram;
        s->rep.solve_seconds = solve;
        s->rep.iteration_seconds = iter;
        s->rep.train_rmse = train;
        s->rep.test_rmse = test;
    } else {
        s->rep.test_rmse = test; /* the candidate's validation RMSE */
    }
    return st;
}

static void free_parts(run_state *s)
{
    for (int w = 0; w < 2; w++) {
        mf_sparse_destroy(s->part[w]);
        s->part[w] = NULL;
    }
    mf_sparse_destroy(s->local);
    mf_sparse_destroy(s->local_test);
    s->local = s->local_test = NULL;
    s->sharded = 0;
}

/* Where a fit's time goes, for a user whose setup takes minutes (billions of ratings): at
 * MF_LOG_INFO, the phase that just ended and its wall seconds on this rank. */
static void log_phase(mf_ctx *ctx, const char *phase, double *since)
{
    const double now = mf_seconds();
    mf_log(ctx, MF_LOG_INFO, "mf_als_run: rank %d of %d: %s: %.3f s",
           ctx->comm ? ctx->comm->rank : 0, mf_ranks(ctx), phase, now - *since);
    *since = now;
}

/* Split input over a group (collective; every rank calls it with its status so far): the
 * whole matrix's line offsets, column sums (Zhou's start) and mean, summed over the ranks;
 * the shares; and each rank's shards, gathered from every rank's part. No rank holds the
 * whole matrix at any point. */
static mf_status split_prepare(run_state *s, const fit_spec *f, int64_t row_cost, bool zhou,
                               mf_status st, double *t)
{
    static const char fn[] = "mf_als_run";
    mf_ctx *ctx = s->run.ctx;
    const mf_sparse *P = f->R;
    int64_t nnz = 0;
    if (st == MF_OK && zhou) {
        s->col_sum = calloc((size_t)P->cols + 1, sizeof(double));
        if (!s->col_sum)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for the lines", fn);
    }
    st = mf_ranks_split_shares(ctx, fn, P, st, row_cost, s->whole_ptr, s->col_sum, &s->mean, &nnz,
                               &s->shares);
    log_phase(ctx, "the split input's lines summed and the shares cut", t);
    if (st == MF_OK)
        s->sharded =
            mf_als_shard_users(ctx, s->o->layout, &s->shares, f->R->rows, f->R->cols, f->k);
    /* sharded users: the items' side reads the users' shard's transpose, not a column shard */
    for (int w = 0; w < (s->sharded ? 1 : 2) && st == MF_OK; w++) {
        st = mf_ranks_gather_lines(ctx, fn, P, w, s->shares.bounds[w], &s->part[w]);
        log_phase(ctx, w ? "the items' entries gathered" : "the users' entries gathered", t);
    }
    return st;
}

static void free_split(run_state *s)
{
    for (int w = 0; w < 2; w++) {
        free(s->whole_ptr[w]);
        s->whole_ptr[w] = NULL;
    }
    free(s->col_sum);
    s->col_sum = NULL;
}

/* The start, the engine, the iterations; the final fit hands its factors over. */
static mf_status fit(run_state *s, const fit_spec *f, float *U, float *V, mf_memory where)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_als_opts *o = s->o;
    const bool zhou = o->init == MF_ALS_INIT_MEAN;
    const int cg_steps = cg_steps_for(o, f->k);
    const int64_t row_cost = mf_shares_solve_cost(f->k, cg_steps);
    double t = mf_seconds();
    float *V0 = malloc((size_t)f->R->cols * f->k * sizeof *V0 + 1);
    mf_status st =
        V0 ? MF_OK
           : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory for the initial V");
    if (s->split)
        st = split_prepare(s, f, row_cost, zhou, st, &t);
    if (st == MF_OK && o->init == MF_ALS_INIT_GIVEN)
        st = mf_fit_load_given(ctx, "mf_als_run", "V", V, f->R->cols, f->k, where, V0);
    else if (st == MF_OK && s->split)
        init_seeded(ctx, f->R->cols, s->whole_ptr[1], s->col_sum, f->k, zhou, V0);
    else if (st == MF_OK)
        st = init_whole(ctx, f->R, f->k, zhou, V0);
    mf_als_setup setup = {ctx,
                          f->R,
                          f->k,
                          f->lambda,
                          where,
                          V0,
                          o->biases,
                          o->lambda_bias,
                          (float)(s->split ? s->mean : mf_sparse_mean(f->R)),
                          o->weighting == MF_ALS_WEIGHT_COUNT,
                          gram_kernel_for(o, cg_steps),
                          cg_steps,
                          {0, 0},
                          {0, 0},
                          {NULL, NULL},
                          {NULL, NULL},
                          0};
    /* The shares and the kernels' choice need the columns' offsets, not the transpose: a
     * rank of a group never builds the whole matrix's transpose (its shard's is enough). */
    const int64_t *col_ptr = NULL;
    if (st == MF_OK && !s->split)
        st = mf_sparse_col_ptr(f->R, &col_ptr);
    if (st == MF_OK && !s->split) {
        const int64_t *const ptr[2] = {f->R->row_ptr, col_ptr};
        const int32_t lines[2] = {f->R->rows, f->R->cols};
        st = mf_shares_make_lines(ctx, "mf_als_run", ptr, lines, row_cost, &s->shares);
    }
    for (int w = 0; w < 2; w++)
        setup.lo[w] = s->shares.lo[w], setup.hi[w] = s->shares.hi[w];
    /* the local problems' gather is collective: every rank decides and goes on alike */
    if (mf_ranks(ctx) > 1)
        st = mf_ranks_agree(ctx, "mf_als_run", st, NULL, NULL, 0);
    if (st == MF_OK && !s->split)
        s->sharded =
            mf_als_shard_users(ctx, s->o->layout, &s->shares, f->R->rows, f->R->cols, f->k);
    /* In a group each rank keeps only its shard of each side: the device then holds the
     * rank's share of the ratings, not all of them. Kernels are chosen by the whole. */
    for (int w = 0; w < 2 && st == MF_OK && !s->split && !s->sharded && mf_ranks(ctx) > 1; w++)
        st = mf_sparse_block(ctx, f->R, w, setup.lo[w], setup.hi[w], "mf_als_run", &s->part[w]);
    if (st == MF_OK && !s->split && mf_ranks(ctx) > 1)
        setup.line_ptr[0] = f->R->row_ptr, setup.line_ptr[1] = col_ptr;
    if (s->split)
        setup.line_ptr[0] = s->whole_ptr[0], setup.line_ptr[1] = s->whole_ptr[1];
    setup.part[0] = s->part[0], setup.part[1] = s->part[1];
    if (s->sharded) {
        /* The rank's users as a whole problem: its rows of U, every item, and the item
         * systems summed over the ranks (the weighted lambda from the whole columns). */
        if (st == MF_OK)
            st = mf_als_shard_local(ctx, &s->shares, s->split ? s->part[MF_ALS_USERS] : f->R,
                                    f->test, &s->local, &s->local_test);
        log_phase(ctx, "the start and the users' local problem", &t);
        if (st == MF_OK) {
            setup.R = s->local;
            setup.lo[0] = 0, setup.hi[0] = s->local->rows;
            setup.lo[1] = 0, setup.hi[1] = s->local->cols;
            setup.part[0] = setup.part[1] = NULL;
            setup.line_ptr[0] = NULL;
            setup.sum_items = 1;
        }
    }
    if (f->final) {
        s->rep.solver = setup.cg_steps > 0 ? MF_ALS_SOLVER_CG : MF_ALS_SOLVER_EXACT;
        s->rep.layout = s->sharded ? MF_ALS_LAYOUT_USERS_SHARDED : MF_ALS_LAYOUT_REPLICATED;
    }
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&s->run, mf_als_cpu_engine, mf_cuda_als_engine, &setup, &s->e);
    free(V0);
    log_phase(ctx, "the engine made", &t);
    /* In a group, every rank has its engine before the first exchange, or none goes on. */
    st = mf_ranks_agree(ctx, "mf_als_run", st, NULL, NULL, 0);
    if (st != MF_OK) {
        if (s->e)
            s->e->destroy(s->e);
        s->e = NULL;
        free_parts(s);
        return st;
    }
    if (mf_ranks(ctx) > 1)
        log_phase(ctx, "waiting for the other ranks' engines", &t);
    st = iterate(s, f);
    log_phase(ctx, "the iterations", &t);
    if (f->final && mf_run_has_result(st)) {
        mf_biases *out = o->bias_out;
        const int32_t rows = f->R->rows, cols = f->R->cols;
        st = mf_run_then(st, mf_fit_zero_tail(ctx, U, V, rows, cols, f->k, o->rank, where));
        if (mf_run_has_result(st) && s->sharded) { /* this rank's rows, then everyone's */
            const int64_t lo = s->shares.lo[MF_ALS_USERS];
            float *bu = out && out->user ? out->user : NULL;
            mf_status done = s->e->finish(s->e, U + lo * o->rank, V, o->rank, bu ? bu + lo : NULL,
                                          out ? out->item : NULL);
            /* the engine's device memory goes first: the gather may stage all of U there */
            s->e->destroy(s->e);
            s->e = NULL;
            st = mf_run_then(
                st, mf_als_shard_gather_users(ctx, &s->shares, U, o->rank, bu, where, done));
        } else if (mf_run_has_result(st)) {
            st = mf_run_then(st, s->e->finish(s->e, U, V, o->rank, out ? out->user : NULL,
                                              out ? out->item : NULL));
        }
        if (mf_run_has_result(st))
            st = mf_run_then(st,
                             mf_fit_bias_out(ctx, out, o->biases, setup.mean, rows, cols, where));
        log_phase(ctx, "the factors handed back", &t);
    }
    if (s->e)
        s->e->destroy(s->e);
    s->e = NULL;
    free_parts(s);
    return st;
}

/* A tuning candidate (mf_tune_fit_fn): fit_part at (rank, lambda), its validation RMSE. */
static mf_status fit_candidate(void *user, mf_sparse *fit_part, const mf_sparse *valid, int rank,
                               float lambda, double *rmse)
{
    run_state *s = user;
    fit_spec f = {fit_part, valid, rank, lambda, 0};
    MF_TRY(fit(s, &f, s->U, s->V, s->where));
    *rmse = s->rep.test_rmse;
    return MF_OK;
}

/* In a group: every rank's checks passed and they fit the same problem (the same shapes,
 * options and seed), or every rank fails. Outside a group: st. */
static mf_status agree_on_run(mf_ctx *ctx, mf_status st, const mf_sparse *R, const mf_als_opts *o)
{
    static const char *const names[] = {"rank",        "iterations", "lambda",         "biases",
                                        "lambda_bias", "init",       "solver",         "cg_steps",
                                        "weighting",   "tf32",       "rmse_precision", "layout"};
    const int64_t v[] = {o->rank,
                         o->iterations,
                         mf_ranks_bits(o->lambda),
                         o->biases,
                         mf_ranks_bits(o->lambda_bias),
                         o->init,
                         o->solver,
                         o->cg_steps,
                         o->weighting,
                         o->tf32,
                         o->rmse_precision,
                         o->layout};
    return mf_ranks_agree_fit_parts(ctx, "mf_als_run", st, R, v, names, 12);
}

mf_status mf_als_run(mf_ctx *ctx, const mf_sparse *ratings, const mf_als_opts *opts, float *U,
                     float *V, mf_memory where, mf_als_report *report)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    run_state s = {.o = &o,
                   .R = (mf_sparse *)ratings, /* the matrix: caches only */
                   .rep.test_rmse = NAN,
                   .rep.validation_rmse = NAN,
                   .U = U,
                   .V = V,
                   .where = where};

    mf_status st = mf_run_begin_collective(
        &s.run, ctx,
        &(mf_run_args){"mf_als_run", MF_RUN_INPUT(ratings), MF_RUN_OUTPUTS(U, V), where,
                       MF_RUN_OPTS(mf_als_opts, &o, opts), MF_RUN_REPORT(mf_als_report, report),
                       &o.test});
    if (st == MF_OK)
        st = check_opts(ctx, &o);
    if (st == MF_OK && o.tune && mf_ranks(ctx) > 1)
        st = mf_fail(ctx, MF_ERR_UNSUPPORTED,
                     "mf_als_run: tune does not run over a group of "
                     "contexts yet");
    st = agree_on_run(ctx, st, ratings, &o);
    if (st != MF_OK)
        return st;
    mf_run_start(&s.run);
    s.split = mf_ranks(ctx) > 1 && ratings->is_part;
    fit_spec f = {s.R, o.test, o.rank, o.lambda, 1};
    if (o.tune) {
        mf_tune_result best;
        st = mf_tune_search(ctx, "mf_als_run", s.R, o.tune, o.rank, o.lambda,
                            o.init == MF_ALS_INIT_GIVEN, fit_candidate, &s, &best);
        f.k = best.rank, f.lambda = best.lambda;
        s.rep.validation_rmse = best.rmse;
    }
    s.rep.lambda = f.lambda;
    s.rep.rank = f.k;
    if (st == MF_OK)
        st = fit(&s, &f, U, V, where);
    mf_shares_free(&s.shares);
    free_parts(&s);
    free_split(&s);
    s.rep.seconds = mf_run_seconds(&s.run);
    return mf_run_finish(&s.run, st, report, &s.rep, &s.rep.peak_device_bytes);
}
