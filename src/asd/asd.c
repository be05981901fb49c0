/* mf_asd_run: argument checks, the start, the iterations and the stopping rules (Tanner &
 * Wei's: tolerance, stagnation, iteration cap, time), and the report. The arithmetic lives
 * in the engines (asd_cpu.c; the CUDA one). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "core/ctx.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"

void mf_asd_opts_init(mf_asd_opts *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 10;
    opts->variant = MF_ASD_SCALED;
    opts->tolerance = 1e-5;
    opts->stagnation_window = 15;
    opts->stagnation_rate = 1e-4;
    opts->max_iterations = 1000;
    opts->init = MF_ASD_INIT_RANDOM;
}

static mf_status check_opts(mf_ctx *ctx, const mf_sparse *M, const mf_asd_opts *o)
{
    static const char fn[] = "mf_asd_run";
    int most = M->rows < M->cols ? M->rows : M->cols;
    most = most < 512 ? most : 512;
    MF_REQUIRE(ctx, o->rank >= 1 && o->rank <= most, "%s: rank = %d is outside 1..%d", fn, o->rank,
               most);
    MF_REQUIRE(ctx, o->variant == MF_ASD_PLAIN || o->variant == MF_ASD_SCALED,
               "%s: variant = %d is not an mf_asd_variant value", fn, (int)o->variant);
    MF_REQUIRE(ctx, o->tolerance > 0.0 && isfinite(o->tolerance),
               "%s: tolerance = %g must be finite and > 0", fn, o->tolerance);
    MF_REQUIRE(ctx, o->stagnation_window >= 0, "%s: stagnation_window = %d is negative", fn,
               o->stagnation_window);
    MF_REQUIRE(ctx, o->stagnation_rate > 0.0 && o->stagnation_rate < 1.0,
               "%s: stagnation_rate = %g is outside (0, 1)", fn, o->stagnation_rate);
    MF_REQUIRE(ctx, o->max_iterations >= 1, "%s: max_iterations = %d must be at least 1", fn,
               o->max_iterations);
    MF_REQUIRE(ctx, o->time_limit >= 0.0 && isfinite(o->time_limit),
               "%s: time_limit = %g must be finite and >= 0", fn, o->time_limit);
    MF_REQUIRE(ctx,
               o->init == MF_ASD_INIT_RANDOM || o->init == MF_ASD_INIT_GIVEN ||
                   o->init == MF_ASD_INIT_SPECTRAL,
               "%s: init = %d is not an mf_asd_init value", fn, (int)o->init);
    if (M->nnz == 0)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: the matrix has no observed entries", fn);
    return MF_OK;
}

/* A caller's factor as the start: copied to the host and checked for non-finite values. */
static mf_status load_given(mf_ctx *ctx, const float *F, int64_t n, mf_memory where, float *F0,
                            const char *name)
{
    if (where == MF_MEMORY_DEVICE)
        MF_TRY(mf_cuda_copy(ctx, F0, F, (size_t)n * sizeof *F0));
    else
        memcpy(F0, F, (size_t)n * sizeof *F0);
    for (int64_t p = 0; p < n; p++)
        if (!isfinite(F0[p]))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "mf_asd_run: the given %s[%lld] = %g is not finite", name, (long long)p,
                           (double)F0[p]);
    return MF_OK;
}

/* |P(M)|^2 in double. */
static double observed_norm2(const mf_sparse *M, int threads)
{
    if (!M->val)
        return (double)M->nnz;
    double s = 0.0;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : s)
    for (int64_t p = 0; p < M->nnz; p++)
        s += (double)M->val[p] * M->val[p];
    return s;
}

typedef struct run_state {
    mf_run run;
    const mf_asd_opts *o;
    mf_sparse *M;
    mf_asd_engine *e;
    mf_asd_report rep;
} run_state;

static mf_status iterate(run_state *s, double norm)
{
    const mf_asd_opts *o = s->o;
    const int w = o->stagnation_window;
    double *hist = w > 0 ? malloc(((size_t)w + 1) * sizeof *hist) : NULL;
    if (w > 0 && !hist)
        return mf_fail(s->run.ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    double res = sqrt(s->e->res2) / norm;
    s->rep.relative_residual = res;
    s->rep.stopped = MF_ASD_STOP_MAX_ITERATIONS;
    mf_status st = MF_OK;
    if (w > 0)
        hist[0] = res;
    if (res <= o->tolerance)
        s->rep.stopped = MF_ASD_STOP_TOLERANCE;
    for (int it = 1; st == MF_OK && res > o->tolerance && it <= o->max_iterations; it++) {
        double res2;
        st = s->e->iterate(s->e, &res2, &s->rep.singular_steps);
        if (st != MF_OK)
            break;
        res = sqrt(res2) / norm;
        s->rep.iterations = it;
        s->rep.relative_residual = res;
        if (o->progress) {
            double test = NAN;
            if (o->test)
                st = s->e->rmse(s->e, o->test, &test);
            mf_progress p = {it, mf_run_seconds(&s->run), res, test};
            if (st == MF_OK)
                st = mf_run_cancelled(&s->run, o->progress(o->progress_user, &p), "iteration", it);
            if (st == MF_ERR_CANCELLED)
                s->rep.stopped = MF_ASD_STOP_CANCELLED;
            if (st != MF_OK)
                break;
        }
        if (res <= o->tolerance) {
            s->rep.stopped = MF_ASD_STOP_TOLERANCE;
            break;
        }
        /* Stagnation (Tanner & Wei): the mean rate of decrease over the last w iterations,
         * (res_k / res_{k-w})^(1/w), has come within stagnation_rate of 1. */
        if (w > 0) {
            hist[it % (w + 1)] = res;
            if (it >= w &&
                pow(res / hist[(it - w) % (w + 1)], 1.0 / w) > 1.0 - o->stagnation_rate) {
                s->rep.stopped = MF_ASD_STOP_STAGNATION;
                break;
            }
        }
        if (o->time_limit > 0.0 && mf_run_seconds(&s->run) >= o->time_limit) {
            s->rep.stopped = MF_ASD_STOP_TIME_LIMIT;
            break;
        }
    }
    free(hist);
    return st;
}

static mf_status run(run_state *s, float *X, float *Y, mf_memory where)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_asd_opts *o = s->o;
    const mf_sparse *M = s->M;
    const int r = o->rank;
    /* The random start is the engine's own (drawn where the factors live); the others are
     * made on the host. */
    const int host_start = o->init != MF_ASD_INIT_RANDOM;
    float *X0 = host_start ? malloc(((size_t)M->rows * r + 1) * sizeof *X0) : NULL;
    float *Y0 = host_start ? malloc(((size_t)M->cols * r + 1) * sizeof *Y0) : NULL;
    mf_status st = MF_OK;
    if (host_start && (!X0 || !Y0))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory for the start");
    const double norm2 = observed_norm2(M, mf_ctx_threads(ctx));
    if (st == MF_OK && !(norm2 > 0.0))
        st = mf_fail(ctx, MF_ERR_INVALID_DATA, "mf_asd_run: every observed value is 0");
    if (st == MF_OK && o->init == MF_ASD_INIT_GIVEN) {
        st = load_given(ctx, X, (int64_t)M->rows * r, where, X0, "X");
        if (st == MF_OK)
            st = load_given(ctx, Y, (int64_t)M->cols * r, where, Y0, "Y");
    } else if (st == MF_OK && o->init == MF_ASD_INIT_SPECTRAL)
        st = mf_asd_spectral_start(ctx, M, r, 4, X0, Y0);
    mf_asd_setup setup = {ctx, s->M, r, o->variant == MF_ASD_SCALED, X0, Y0, norm2};
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&s->run, mf_asd_cpu_engine, mf_cuda_asd_engine, &setup, &s->e);
    free(X0);
    free(Y0);
    if (st != MF_OK)
        return st;
    st = iterate(s, sqrt(norm2));
    if (mf_run_has_result(st) && o->test)
        st = mf_run_then(st, s->e->rmse(s->e, o->test, &s->rep.test_rmse));
    if (mf_run_has_result(st))
        st = mf_run_then(st, s->e->finish(s->e, X, Y, where));
    s->e->destroy(s->e);
    return st;
}

mf_status mf_asd_run(mf_ctx *ctx, const mf_sparse *observed, const mf_asd_opts *opts, float *X,
                     float *Y, mf_memory where, mf_asd_report *report)
{
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    run_state s = {.o = &o, .M = (mf_sparse *)observed, .rep.test_rmse = NAN};
    MF_TRY(mf_run_begin(&s.run, ctx,
                        &(mf_run_args){"mf_asd_run", MF_RUN_INPUT(observed), MF_RUN_OUTPUTS(X, Y),
                                       where, MF_RUN_OPTS(mf_asd_opts, &o, opts),
                                       MF_RUN_REPORT(mf_asd_report, report), &o.test}));
    MF_TRY(check_opts(ctx, observed, &o));
    mf_run_start(&s.run);
    mf_status st = run(&s, X, Y, where);
    s.rep.seconds = mf_run_seconds(&s.run);
    return mf_run_finish(&s.run, st, report, &s.rep, &s.rep.peak_device_bytes);
}
