/* mf_als_run: argument checks, the initial factors, and the iteration loop. The arithmetic
 * lives in the engines (als_cpu.c, als.cu); this file is the same for both, so that CPU
 * and GPU runs start from the same V, report alike and fail alike. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "als/als_internal.h"
#include "core/clock.h"
#include "core/ctx.h"
#include "core/random.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"

/* The Philox stream of the initial factors: fixed, so that a seed means one start. */
#define ALS_INIT_STREAM 0x414c53u

void mf_als_opts_init(mf_als_opts *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 10;
    opts->lambda = 0.05f;
    opts->iterations = 10;
    opts->init = MF_ALS_INIT_UNIFORM;
}

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
    return MF_OK;
}

/* The seeded starts: V uniform in [0, 0.1) (cuMF_als's); for Zhou's, uniform in
 * [-0.1, 0.1) with column 0 the item's mean rating. Items without ratings get a zero row. */
static mf_status init_seeded(mf_ctx *ctx, mf_sparse *R, int k, bool zhou, float *V0)
{
    MF_TRY(mf_sparse_host_transpose(R));
    mf_random_uniform_host(V0, (int64_t)R->cols * k, zhou ? -0.1f : 0.0f, 0.1f, ctx->seed,
                           ALS_INIT_STREAM, mf_ctx_threads(ctx));
    for (int32_t i = 0; i < R->cols; i++) {
        int64_t b = R->transpose.ptr[i], e = R->transpose.ptr[i + 1];
        float *v = V0 + (int64_t)i * k;
        if (b == e) {
            memset(v, 0, (size_t)k * sizeof *v);
            continue;
        }
        if (!zhou)
            continue;
        double sum = 0.0;
        for (int64_t p = b; p < e; p++)
            sum += R->transpose.val ? R->transpose.val[p] : 1.0f;
        v[0] = (float)(sum / (double)(e - b));
    }
    return MF_OK;
}

/* The caller's V as the start: copied to the host (from the device if need be) and
 * checked, since a NaN would spread through every system. */
static mf_status init_given(mf_ctx *ctx, const mf_sparse *R, int k, const float *V, mf_memory where,
                            float *V0)
{
    size_t bytes = (size_t)R->cols * k * sizeof *V0;
    if (where == MF_MEMORY_DEVICE)
        MF_TRY(mf_cuda_copy(ctx, V0, V, bytes));
    else
        memcpy(V0, V, bytes);
    for (int64_t p = 0; p < (int64_t)R->cols * k; p++)
        if (!isfinite(V0[p]))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "mf_als_run: the given V[%lld][%lld] = %g is not finite",
                           (long long)(p / k), (long long)(p % k), (double)V0[p]);
    return MF_OK;
}

typedef struct run_state {
    mf_run run;
    mf_als_engine *e;
    const mf_als_opts *o;
    mf_sparse *R;
    mf_als_report rep;
} run_state;

static mf_status measure(run_state *s, double *train, double *test)
{
    MF_TRY(s->e->rmse(s->e, s->R, train));
    *test = NAN;
    if (s->o->test)
        MF_TRY(s->e->rmse(s->e, s->o->test, test));
    return MF_OK;
}

static mf_status iterate(run_state *s)
{
    const mf_als_opts *o = s->o;
    int have_rmse = 0;
    for (int it = 1; it <= o->iterations; it++) {
        double t0 = mf_seconds();
        MF_TRY(s->e->half_step(s->e, MF_ALS_USERS, &s->rep.gram_seconds, &s->rep.solve_seconds));
        MF_TRY(s->e->half_step(s->e, MF_ALS_ITEMS, &s->rep.gram_seconds, &s->rep.solve_seconds));
        s->rep.iteration_seconds += mf_seconds() - t0;
        s->rep.iterations = it;
        have_rmse = 0;
        if (!o->progress)
            continue;
        MF_TRY(measure(s, &s->rep.train_rmse, &s->rep.test_rmse));
        have_rmse = 1;
        mf_progress p = {it, mf_run_seconds(&s->run), s->rep.train_rmse, s->rep.test_rmse};
        MF_TRY(mf_run_cancelled(&s->run, o->progress(o->progress_user, &p), "iteration", it));
    }
    if (!have_rmse)
        MF_TRY(measure(s, &s->rep.train_rmse, &s->rep.test_rmse));
    return MF_OK;
}

/* The start, the engine, the iterations, the factors handed over. */
static mf_status run(run_state *s, float *U, float *V, mf_memory where)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_als_opts *o = s->o;
    float *V0 = malloc((size_t)s->R->cols * o->rank * sizeof *V0);
    if (!V0)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_als_run: out of host memory for the initial V");
    mf_status st = o->init == MF_ALS_INIT_GIVEN
                       ? init_given(ctx, s->R, o->rank, V, where, V0)
                       : init_seeded(ctx, s->R, o->rank, o->init == MF_ALS_INIT_MEAN, V0);
    mf_als_setup setup = {ctx, s->R, o->rank, o->lambda, where, V0};
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&s->run, mf_als_cpu_engine, mf_cuda_als_engine, &setup, &s->e);
    free(V0);
    if (st != MF_OK)
        return st;
    st = iterate(s);
    if (mf_run_has_result(st))
        st = mf_run_then(st, s->e->finish(s->e, U, V));
    s->e->destroy(s->e);
    return st;
}

mf_status mf_als_run(mf_ctx *ctx, const mf_sparse *ratings, const mf_als_opts *opts, float *U,
                     float *V, mf_memory where, mf_als_report *report)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    run_state s = {
        .o = &o, .R = (mf_sparse *)ratings, .rep.test_rmse = NAN}; /* the matrix: caches only */

    MF_TRY(mf_run_begin(&s.run, ctx,
                        &(mf_run_args){"mf_als_run", MF_RUN_INPUT(ratings), MF_RUN_OUTPUTS(U, V),
                                       where, MF_RUN_OPTS(mf_als_opts, &o, opts),
                                       MF_RUN_REPORT(mf_als_report, report), &o.test}));
    MF_TRY(check_opts(ctx, &o));
    mf_run_start(&s.run);
    mf_status st = run(&s, U, V, where);
    s.rep.seconds = mf_run_seconds(&s.run);
    return mf_run_finish(&s.run, st, report, &s.rep, &s.rep.peak_device_bytes);
}
