/* mfact als: ALS-WR (mf_als_run) on a ratings file, with a held-out part from a second file
 * or split off at random, the train and test RMSE printed after every iteration, and the
 * factors optionally written as text (one row per line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpus.h"
#include "model_file.h"
#include "outputs.h"
#include "test_set.h"

typedef struct als_args {
    cli_common common;
    const char *file, *test_file, *out_u, *out_v;
    long long rank, iterations;
    double lambda, test_fraction;
    mf_als_init init;
    mf_als_weighting weighting;
    mf_als_solver solver;
    long long cg_steps;
    int tf32;
    long long gpus;
    cli_model_args model;
} als_args;

static void als_help(void)
{
    mf_als_opts d;
    mf_als_opts_init(&d);
    printf("usage: mfact als FILE [--rank K] [--lambda L] [--iterations N] [--init mean|uniform]\n"
           "                [--weighting count|none] [--no-biases] [--lambda-bias L]\n"
           "                [--solver auto|exact|cg] [--cg-steps S] [--no-tf32]\n"
           "                [--auto | --auto-rank] [--save-model FILE]\n"
           "                [--test FILE | --test-fraction F] [--output-u FILE] [--output-v FILE]\n"
           "                [--gpus N] [options]\n\n"
           "Factorizes the ratings of FILE (users x items) by ALS: rank K (1..256, default\n"
           "%d), regularization L (default %g; the biases' %g), N sweeps (default %d).\n"
           "The test RMSE is measured on --test FILE, or on a fraction F of FILE's ratings held\n"
           "out by a hash of their position and --seed. Repeated ratings keep the last one.\n"
           "Prints the train and test RMSE after every iteration; --output-u and --output-v\n"
           "write the factors as text, one row per line. --init picks the start: uniform\n"
           "(default; cuMF_als's: V uniform in [0, 0.1)) or mean (Zhou's: V's first column the\n"
           "item's mean rating, the rest uniform in [-0.1, 0.1)). --weighting: the penalties\n"
           "as they are (none, the default) or times each row's count of ratings (count,\n"
           "ALS-WR's weighted-lambda).\n"
           "--solver: each row's system solved exactly (LDL^T) or by S conjugate-gradient\n"
           "steps from the previous iteration's row (cg; S default %d); auto (default) takes\n"
           "cg from rank 64, and cg builds its systems from TF32 products on tensor cores\n"
           "(sm_80 and later) unless --no-tf32 (float-accurate products). --gpus N:\n"
           "one fit over N GPUs (--device and the N - 1 after it),\n"
           "each solving its share of the rows; the factors are those of one GPU.\n%s%s",
           d.rank, (double)d.lambda, (double)d.lambda_bias, d.iterations, d.cg_steps,
           cli_model_help(), cli_common_help());
}

static int parse(int argc, char **argv, als_args *a)
{
    cli_common_init(&a->common);
    a->file = a->test_file = a->out_u = a->out_v = NULL;
    mf_als_opts d;
    mf_als_opts_init(&d);
    a->rank = d.rank, a->iterations = d.iterations, a->lambda = d.lambda, a->test_fraction = 0.0;
    a->init = d.init;
    a->weighting = d.weighting;
    a->solver = d.solver, a->cg_steps = d.cg_steps;
    a->tf32 = d.tf32;
    a->gpus = 1;
    cli_model_init(&a->model);
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse("als", argc, argv, &i, &a->common);
        if (r == 0)
            r = cli_model_parse("als", argc, argv, &i, &a->model);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--rank") && val) {
            if (!cli_parse_ll(argv[++i], &a->rank) || a->rank < 1 || a->rank > 256) {
                cli_error("als", "--rank takes an integer from 1 to 256");
                return -1;
            }
        } else if (!strcmp(opt, "--lambda") && val) {
            if (!cli_parse_double(argv[++i], &a->lambda) || !(a->lambda >= 0) ||
                !isfinite(a->lambda)) {
                cli_error("als", "--lambda takes a finite number >= 0");
                return -1;
            }
        } else if (!strcmp(opt, "--iterations") && val) {
            if (!cli_parse_ll(argv[++i], &a->iterations) || a->iterations < 1 ||
                a->iterations > 1000000) {
                cli_error("als", "--iterations takes a positive integer");
                return -1;
            }
        } else if (!strcmp(opt, "--test-fraction") && val) {
            if (!cli_parse_double(argv[++i], &a->test_fraction) || !(a->test_fraction > 0) ||
                !(a->test_fraction < 1)) {
                cli_error("als", "--test-fraction takes a number between 0 and 1");
                return -1;
            }
        } else if (!strcmp(opt, "--init") && val) {
            const char *how = argv[++i];
            if (!strcmp(how, "mean"))
                a->init = MF_ALS_INIT_MEAN;
            else if (!strcmp(how, "uniform"))
                a->init = MF_ALS_INIT_UNIFORM;
            else {
                cli_error("als", "--init takes mean or uniform, not '%s'", how);
                return -1;
            }
        } else if (!strcmp(opt, "--weighting") && val) {
            /* in the order of mf_als_weighting's values */
            static const char *const names[] = {"count", "none"};
            const int c = cli_choice(argv[++i], names, 2);
            if (c < 0) {
                cli_error("als", "--weighting takes count or none, not '%s'", argv[i]);
                return -1;
            }
            a->weighting = (mf_als_weighting)c;
        } else if (!strcmp(opt, "--solver") && val) {
            /* in the order of mf_als_solver's values */
            static const char *const names[] = {"auto", "exact", "cg"};
            const int c = cli_choice(argv[++i], names, 3);
            if (c < 0) {
                cli_error("als", "--solver takes auto, exact or cg, not '%s'", argv[i]);
                return -1;
            }
            a->solver = (mf_als_solver)c;
        } else if (!strcmp(opt, "--cg-steps") && val) {
            if (!cli_parse_ll(argv[++i], &a->cg_steps) || a->cg_steps < 1 || a->cg_steps > 64) {
                cli_error("als", "--cg-steps takes an integer from 1 to 64");
                return -1;
            }
        } else if (!strcmp(opt, "--no-tf32")) {
            a->tf32 = 0;
        } else if (!strcmp(opt, "--gpus") && val) {
            if (!cli_gpus_parse("als", argv[++i], &a->gpus))
                return -1;
        } else if (!strcmp(opt, "--test") && val) {
            a->test_file = argv[++i];
        } else if (!strcmp(opt, "--output-u") && val) {
            a->out_u = argv[++i];
        } else if (!strcmp(opt, "--output-v") && val) {
            a->out_v = argv[++i];
        } else if (opt[0] == '-') {
            cli_error("als", "unknown option '%s' (or it lacks its value)", opt);
            return -1;
        } else if (a->file) {
            cli_error("als", "one FILE at most");
            return -1;
        } else
            a->file = opt;
    }
    if (!a->common.help && !a->file) {
        cli_error("als", "a ratings FILE is required");
        return -1;
    }
    if (a->test_file && a->test_fraction > 0) {
        cli_error("als", "--test and --test-fraction exclude each other");
        return -1;
    }
    return 0;
}

static int on_iteration(void *user, const mf_progress *p)
{
    (void)user;
    cli_print_progress("iteration", p);
    return 0;
}

/* One rank's mf_als_run (cli_gpus_call): rank 0's options are the tool's; the others have
 * their own test copy and neither print nor report biases. */
typedef struct als_call {
    mf_als_opts o;
    mf_als_report rep; /* rank 0's */
} als_call;

static mf_status als_rank(const cli_rank *r, void *user)
{
    als_call *c = user;
    mf_als_opts o = c->o;
    o.test = r->test;
    if (r->rank > 0)
        o.progress = NULL, o.bias_out = NULL;
    mf_als_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_als_run(r->ctx, r->train, &o, r->U, r->V, MF_MEMORY_HOST, &rep);
    if (r->rank == 0)
        c->rep = rep;
    return st;
}

/* mf_als_run on ctx, or over --gpus N devices with ctx as rank 0 (every rank gets the same
 * factors). Prints a failure. */
static mf_status fit(mf_ctx *ctx, const als_args *a, mf_sparse *train, mf_sparse *test,
                     const mf_als_opts *o, float *U, float *V, mf_als_report *rep)
{
    cli_gpus g;
    if (cli_gpus_open("als", &a->common, ctx, (int)a->gpus, train, test, (int)a->rank, U, V, &g) !=
        0)
        return MF_ERR_INVALID_ARGUMENT; /* printed */
    als_call call = {*o, {0}};
    mf_status st = cli_gpus_call("als", &g, als_rank, &call);
    *rep = call.rep;
    cli_gpus_close(&g);
    return st;
}

static int run(mf_ctx *ctx, const void *args, mf_sparse *train, mf_sparse *test)
{
    const als_args *a = args;
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    float *U = malloc((size_t)users * a->rank * sizeof *U);
    float *V = malloc((size_t)items * a->rank * sizeof *V);
    mf_biases bias = {0.0f, NULL, NULL};
    int rc = CLI_FAILED;
    if (!U || !V) {
        cli_error("als", "out of host memory for the factors");
        goto done;
    }
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = (int)a->rank, o.lambda = (float)a->lambda, o.iterations = (int)a->iterations;
    o.init = a->init;
    o.weighting = a->weighting;
    o.solver = a->solver, o.cg_steps = (int)a->cg_steps;
    o.tf32 = a->tf32;
    o.test = test;
    o.progress = on_iteration;
    o.biases = a->model.biases;
    if (a->model.lambda_bias >= 0)
        o.lambda_bias = (float)a->model.lambda_bias;
    o.tune = a->model.tune;
    /* The biases come back where a model file or unseen test entries need them. */
    if ((a->model.save_model || cli_test_unseen() > 0) && a->model.biases &&
        cli_bias_room("als", train, &bias) != 0)
        goto done;
    o.bias_out = &bias;
    mf_als_report rep = {.struct_size = sizeof rep};
    if (fit(ctx, a, train, test, &o, U, V, &rep) != MF_OK)
        goto done; /* printed */
    if (cli_write_factors("als", a->out_u, a->out_v, U, V, train, a->rank) != 0)
        goto done;
    char text[256];
    snprintf(text, sizeof text, "rank=%d lambda=%g lambda_bias=%g iterations=%d weighting=%s",
             rep.rank, (double)rep.lambda, (double)o.lambda_bias, rep.iterations,
             a->weighting == MF_ALS_WEIGHT_COUNT ? "count" : "none");
    const cli_fit fitted = {"als", text, train, rep.rank, (int)a->rank, U, V, &bias};
    if (cli_save_model("als", ctx, a->model.save_model, &fitted) != 0)
        goto done;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_ratings(&out, ctx, train, test, a->rank);
    cli_out_model(&out, &a->model, &bias, rep.lambda, rep.rank, rep.validation_rmse);
    cli_out_int(&out, "iterations", rep.iterations);
    cli_out_str(&out, "solver", rep.solver == MF_ALS_SOLVER_CG ? "cg" : "exact");
    cli_out_num(&out, "train RMSE", rep.train_rmse);
    if (test && cli_out_test(&out, "als", ctx, &fitted, rep.test_rmse) != 0) {
        cli_out_end(&out);
        goto done;
    }
    cli_out_num(&out, "seconds per iteration", rep.iteration_seconds / rep.iterations);
    cli_out_num(&out, "seconds", rep.seconds);
    cli_out_end(&out);
    rc = CLI_OK;
done:
    free(U);
    free(V);
    cli_free_biases(&bias);
    return rc;
}

int cmd_als(int argc, char **argv)
{
    als_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        als_help();
        return CLI_OK;
    }
    const char *const inputs[] = {a.file, a.test_file}, *const outputs[] = {a.out_u, a.out_v,
                                                                            a.model.save_model};
    const int out_rc = cli_check_outputs("als", inputs, 2, outputs, 3);
    if (out_rc != CLI_OK)
        return out_rc;
    return cli_run_on_ratings("als", &a.common, a.file, a.test_file, a.test_fraction, run, &a);
}
