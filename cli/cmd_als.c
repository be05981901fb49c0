/* mfact als: ALS-WR (mf_als_run) on a ratings file, with a held-out part from a second file
 * or split off at random, the train and test RMSE printed after every iteration, and the
 * factors optionally written as text (one row per line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_file.h"
#include "model_fit.h"
#include "options.h"
#include "outputs.h"
#include "test_set.h"

typedef struct als_args {
    cli_common common;
    const char *file;
    long long rank, iterations, cg_steps;
    int init, weighting, solver, tf32; /* mf_als_init, mf_als_weighting, mf_als_solver, 0/1 */
    int layout;                        /* mf_als_layout */
    cli_model_args model;
} als_args;

static const char about[] =
    "Factorizes the ratings of FILE (users x items) by ALS. The test RMSE is measured on "
    "--test FILE, or on a held-out fraction of FILE's ratings. Repeated ratings keep the last "
    "one. Prints the train and test RMSE after every iteration. --weighting count without "
    "--lambda-bias weights the biases' lambda alike: it is --lambda (the unweighted default "
    "times each row's count would swamp the biases).";

/* The options of als beside the shared ones, defaults set first (help prints them). */
static int als_table(als_args *a, cli_opt *t)
{
    mf_als_opts d;
    mf_als_opts_init(&d);
    a->rank = d.rank, a->iterations = d.iterations, a->cg_steps = d.cg_steps;
    a->init = d.init, a->weighting = d.weighting, a->solver = d.solver, a->tf32 = d.tf32;
    a->layout = d.layout;
    static const int inits[] = {MF_ALS_INIT_MEAN, MF_ALS_INIT_UNIFORM};
    const cli_opt own[] = {
        CLI_OPT_INT("--rank", &a->rank, 1, 256, "K", "the factors' rank"),
        CLI_OPT_INT("--iterations", &a->iterations, 1, 1000000, "N", "sweeps (users, then items)"),
        CLI_OPT_CHOICE("--init", &a->init, "mean|uniform", inits,
                       "the start: uniform (cuMF_als's: V uniform in [0, 0.1)) or mean (Zhou's: "
                       "V's first column the item's mean rating, the rest uniform in [-0.1, 0.1))"),
        /* in the order of mf_als_weighting's values */
        CLI_OPT_CHOICE("--weighting", &a->weighting, "count|none", NULL,
                       "the penalties as they are (none) or times each row's count of ratings "
                       "(count, ALS-WR's weighted-lambda)"),
        CLI_OPT_CHOICE("--solver", &a->solver, "auto|exact|cg", NULL,
                       "each row's system solved exactly (LDL^T) or by --cg-steps "
                       "conjugate-gradient steps from the previous iteration's row (cg); auto "
                       "takes cg from rank 64"),
        CLI_OPT_INT("--cg-steps", &a->cg_steps, 1, 64, "S", "CG steps per row and half-step"),
        CLI_OPT_SET("--no-tf32", &a->tf32, 0,
                    "cg builds its systems from float-accurate products, not TF32 products on "
                    "tensor cores (sm_80 and later)"),
        /* in the order of mf_als_layout's values */
        CLI_OPT_CHOICE("--layout", &a->layout, "auto|replicated|sharded", NULL,
                       "over several ranks: every rank holds all of U (replicated), or only its "
                       "users' rows, the item systems summed over the ranks (sharded: for a "
                       "user table too large to copy; factors equal to rounding); auto takes "
                       "sharded when users x rank > 2 x items x (rank + 1)^2"),
    };
    memcpy(t, own, sizeof own);
    return CLI_COUNT(own);
}

/* One rank's mf_als_run (cli_fit_factors). */
static mf_status als_call(const cli_fit_rank *f)
{
    mf_als_opts o = *(const mf_als_opts *)f->opts;
    o.test = f->r->test, o.progress = f->progress, o.progress_user = f->progress_user;
    o.bias_out = f->bias_out;
    return mf_als_run(f->r->ctx, f->r->train, &o, f->r->U, f->r->V, MF_MEMORY_HOST, f->report);
}

/* The fit's results: its model file and the lines on stdout. */
static int results(const cli_model_fit *f, const cli_fitted *x)
{
    const als_args *a = f->args;
    const mf_als_report *rep = f->report;
    char text[256];
    snprintf(text, sizeof text, "rank=%d lambda=%g lambda_bias=%g iterations=%d weighting=%s",
             rep->rank, (double)rep->lambda, (double)((const mf_als_opts *)f->opts)->lambda_bias,
             rep->iterations, a->weighting == MF_ALS_WEIGHT_COUNT ? "count" : "none");
    const cli_fit fitted = {"als", text, x->train, rep->rank, (int)a->rank, x->U, x->V, &x->bias};
    cli_out out;
    if (cli_fit_results(&out, x, &a->common, &a->model, &fitted) != CLI_OK)
        return CLI_FAILED;
    cli_out_model(&out, &a->model, &x->bias, rep->lambda, rep->rank, rep->validation_rmse);
    cli_out_int(&out, "iterations", rep->iterations);
    cli_out_str(&out, "solver", rep->solver == MF_ALS_SOLVER_CG ? "cg" : "exact");
    cli_out_num(&out, "train RMSE", rep->train_rmse);
    if (x->test && cli_out_test(&out, "als", x->ctx, &fitted, rep->test_rmse) != 0) {
        cli_out_end(&out);
        return CLI_FAILED;
    }
    cli_out_num(&out, "seconds per iteration", rep->iteration_seconds / rep->iterations);
    cli_out_num(&out, "seconds", rep->seconds);
    cli_out_end(&out);
    return CLI_OK;
}

static int run(mf_ctx *ctx, const void *args, mf_sparse *train, mf_sparse *test)
{
    const als_args *a = args;
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = (int)a->rank, o.lambda = (float)a->model.lambda, o.iterations = (int)a->iterations;
    o.init = a->init;
    o.weighting = a->weighting;
    o.solver = a->solver, o.cg_steps = (int)a->cg_steps;
    o.tf32 = a->tf32;
    o.layout = a->layout;
    o.biases = a->model.biases;
    if (a->model.lambda_bias >= 0)
        o.lambda_bias = (float)a->model.lambda_bias;
    else if (a->weighting == MF_ALS_WEIGHT_COUNT)
        o.lambda_bias = o.lambda; /* weighted alike: the default 5 times a row's count is not */
    o.tune = a->model.tune;
    mf_als_report rep = {.struct_size = sizeof rep};
    const cli_model_fit f = {"als", "iteration", als_call, &o, &rep, results, a};
    return cli_model_run(&f, ctx, &a->common, &a->model, a->rank, train, test);
}

int cmd_als(int argc, char **argv)
{
    als_args a = {.file = NULL};
    mf_als_opts d;
    mf_als_opts_init(&d);
    cli_opt own[8];
    char lambda_bias[64];
    snprintf(lambda_bias, sizeof lambda_bias, "%g; with --weighting count: lambda",
             (double)d.lambda_bias);
    const cli_ratings_cmd c = {
        "als", "als FILE [options]", about, own, als_table(&a, own), lambda_bias, run};
    return cli_ratings_main(&c, argc, argv, &a.common, &a.file, &a.model, d.lambda, &a);
}
