/* mf_asd_run: argument checks, the start, the iterations and the stopping rules (Tanner &
 * Wei's: tolerance, stagnation, iteration cap, time), and the report. The arithmetic lives
 * in the engines (asd_cpu.c; the CUDA one). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "core/ctx.h"
#include "core/random.h"
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

/* The stopping rules of one call of iterate(): the caller's, or an intermediate rank's. */
typedef struct rules {
    double tolerance, rate;
    int window;
} rules;

/* Iterations on s->e until a rule stops them; the count continues s->rep.iterations. */
static mf_status iterate(run_state *s, double norm, const rules *ru)
{
    const mf_asd_opts *o = s->o;
    const int w = ru->window;
    double *hist = w > 0 ? malloc(((size_t)w + 1) * sizeof *hist) : NULL;
    if (w > 0 && !hist)
        return mf_fail(s->run.ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    double res = sqrt(s->e->res2) / norm;
    s->rep.relative_residual = res;
    s->rep.stopped = MF_ASD_STOP_MAX_ITERATIONS;
    mf_status st = MF_OK;
    if (w > 0)
        hist[0] = res;
    if (res <= ru->tolerance)
        s->rep.stopped = MF_ASD_STOP_TOLERANCE;
    const int first = s->rep.iterations + 1;
    for (int it = first; st == MF_OK && res > ru->tolerance && it <= o->max_iterations; it++) {
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
        if (res <= ru->tolerance) {
            s->rep.stopped = MF_ASD_STOP_TOLERANCE;
            break;
        }
        /* Stagnation (Tanner & Wei): the mean rate of decrease over the last w iterations,
         * (res_k / res_{k-w})^(1/w), has come within stagnation_rate of 1. */
        if (w > 0) {
            const int k = it - first + 1; /* iterations of this call */
            hist[k % (w + 1)] = res;
            if (k >= w && pow(res / hist[(k - w) % (w + 1)], 1.0 / w) > 1.0 - ru->rate) {
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

/* One engine at rank k from host starts X0, Y0 (lines x k; NULL: the random start). */
static mf_status open_engine(run_state *s, int k, const float *X0, const float *Y0, double norm2)
{
    mf_asd_setup setup = {s->run.ctx, s->M, k, s->o->variant == MF_ASD_SCALED, X0, Y0, norm2};
    return MF_RUN_ENGINE(&s->run, mf_asd_cpu_engine, mf_cuda_asd_engine, &setup, &s->e);
}

/* The end of a run: the test RMSE, then the factors to the caller; the engine is freed. */
static mf_status close_engine(run_state *s, mf_status st, float *X, float *Y, mf_memory where)
{
    if (mf_run_has_result(st) && s->o->test)
        st = mf_run_then(st, s->e->rmse(s->e, s->o->test, &s->rep.test_rmse));
    if (mf_run_has_result(st) && X)
        st = mf_run_then(st, s->e->finish(s->e, X, Y, where));
    s->e->destroy(s->e);
    s->e = NULL;
    return st;
}

/* Host factors of rank k (F, lines x k) into rank k + 1 (out, room for lines x (k + 2)):
 * the old columns, then a new one uniform in [-d, d), d a thousandth of the old entries'
 * RMS, so that it starts small. */
static void add_column(mf_ctx *ctx, const float *F, int64_t lines, int k, float *out,
                       uint64_t stream)
{
    double ms = 0.0;
    for (int64_t p = 0; p < lines * k; p++)
        ms += (double)F[p] * F[p];
    const float d = (float)(1e-3 * sqrt(ms / (double)(lines * k > 0 ? lines * k : 1)));
    /* The draw goes past the rows of rank k + 1 (out holds lines x (k + 2)). */
    float *draw = out + lines * (k + 1);
    mf_random_uniform_host(draw, lines, -d, d, ctx->seed, stream, mf_ctx_threads(ctx));
    for (int64_t i = 0; i < lines; i++) {
        memcpy(out + i * (k + 1), F + i * k, (size_t)k * sizeof *out);
        out[i * (k + 1) + k] = draw[i];
    }
}

/* Rank-k factors F (lines x k) to the caller's dst (lines x r, `where` memory) with zeros
 * past column k, through the host scratch `pad` (lines x r). */
static mf_status hand_over(mf_ctx *ctx, const float *F, int64_t lines, int k, int r, float *pad,
                           float *dst, mf_memory where)
{
    const size_t bytes = (size_t)lines * r * sizeof *pad;
    memset(pad, 0, bytes);
    for (int64_t i = 0; i < lines; i++)
        memcpy(pad + i * r, F + i * k, (size_t)k * sizeof *pad);
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_copy(ctx, dst, pad, bytes);
    memcpy(dst, pad, bytes);
    return MF_OK;
}

/* Rank continuation: ranks 1 .. r-1 until they stagnate (or meet the tolerance), each
 * started from the last; then rank r under the caller's rules. */
static mf_status run_continuation(run_state *s, float *X, float *Y, mf_memory where, double norm2)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_asd_opts *o = s->o;
    const int64_t m = s->M->rows, n = s->M->cols;
    const int r = o->rank;
    /* Room for rank k + 1 plus the new column's draw, at every k. */
    float *A = malloc(((size_t)m * (r + 1) + 1) * sizeof *A);
    float *B = malloc(((size_t)n * (r + 1) + 1) * sizeof *B);
    float *Ak = malloc(((size_t)m * r + 1) * sizeof *Ak);
    float *Bk = malloc(((size_t)n * r + 1) * sizeof *Bk);
    mf_status st = MF_OK;
    if (!A || !B || !Ak || !Bk)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory for the ranks");
    const rules inner = {o->tolerance, o->stagnation_rate,
                         o->stagnation_window > 0 ? o->stagnation_window : 15};
    const rules outer = {o->tolerance, o->stagnation_rate, o->stagnation_window};
    for (int k = 1; st == MF_OK && k <= r; k++) {
        if (k > 1) {
            add_column(ctx, Ak, m, k - 1, A, MF_ASD_X_STREAM + 2u * (uint64_t)k);
            add_column(ctx, Bk, n, k - 1, B, MF_ASD_Y_STREAM + 2u * (uint64_t)k);
        }
        st = open_engine(s, k, k > 1 ? A : NULL, k > 1 ? B : NULL, norm2);
        if (st != MF_OK)
            break;
        st = iterate(s, sqrt(norm2), k < r ? &inner : &outer);
        const int ended = st != MF_OK || s->rep.stopped == MF_ASD_STOP_TIME_LIMIT ||
                          s->rep.stopped == MF_ASD_STOP_MAX_ITERATIONS;
        if (k == r) {
            st = close_engine(s, st, X, Y, where);
            break;
        }
        if (mf_run_has_result(st))
            st = mf_run_then(st, s->e->finish(s->e, Ak, Bk, MF_MEMORY_HOST));
        if (!ended) {
            s->e->destroy(s->e);
            s->e = NULL;
            continue;
        }
        /* The result so far: the test RMSE at rank k, and rank-r factors, zero past k. */
        st = close_engine(s, st, NULL, NULL, where);
        if (mf_run_has_result(st))
            st = mf_run_then(st, hand_over(ctx, Ak, m, k, r, A, X, where));
        if (mf_run_has_result(st))
            st = mf_run_then(st, hand_over(ctx, Bk, n, k, r, B, Y, where));
        break;
    }
    free(A), free(B), free(Ak), free(Bk);
    return st;
}

static mf_status run(run_state *s, float *X, float *Y, mf_memory where)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_asd_opts *o = s->o;
    const mf_sparse *M = s->M;
    const int r = o->rank;
    const double norm2 = observed_norm2(M, mf_ctx_threads(ctx));
    if (!(norm2 > 0.0))
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "mf_asd_run: every observed value is 0");
    if (o->rank_continuation)
        return run_continuation(s, X, Y, where, norm2);
    /* The random start is the engine's own (drawn where the factors live); the others are
     * made on the host. */
    const int host_start = o->init != MF_ASD_INIT_RANDOM;
    float *X0 = host_start ? malloc(((size_t)M->rows * r + 1) * sizeof *X0) : NULL;
    float *Y0 = host_start ? malloc(((size_t)M->cols * r + 1) * sizeof *Y0) : NULL;
    mf_status st = MF_OK;
    if (host_start && (!X0 || !Y0))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory for the start");
    if (st == MF_OK && o->init == MF_ASD_INIT_GIVEN) {
        st = load_given(ctx, X, (int64_t)M->rows * r, where, X0, "X");
        if (st == MF_OK)
            st = load_given(ctx, Y, (int64_t)M->cols * r, where, Y0, "Y");
    } else if (st == MF_OK && o->init == MF_ASD_INIT_SPECTRAL)
        st = mf_asd_spectral_start(ctx, M, r, 4, X0, Y0);
    if (st == MF_OK)
        st = open_engine(s, r, X0, Y0, norm2);
    free(X0);
    free(Y0);
    if (st != MF_OK)
        return st;
    const rules ru = {o->tolerance, o->stagnation_rate, o->stagnation_window};
    return close_engine(s, iterate(s, sqrt(norm2), &ru), X, Y, where);
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
