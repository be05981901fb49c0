/* mfact complete: low-rank matrix completion (mf_asd_run, alternating steepest descent) of a
 * matrix file, with a held-out part from a second file or split off at random, or of a
 * planted random matrix (--synthetic) scored against the planted truth; the factors
 * optionally written as text (one row per line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"
#include "gpus.h"
#include "launched.h"
#include "outputs.h"
#include "test_set.h"

/* Entries of X Y^T - A B^T sampled to estimate the error against the planted matrix (all of
 * them when the matrix has fewer). */
#define ERROR_SAMPLES 1000000

typedef struct complete_args {
    cli_common common;
    const char *file, *test_file, *out_x, *out_y;
    long long rank, max_iterations;
    double tolerance, time_limit, test_fraction, condition;
    mf_asd_variant variant;
    mf_asd_init init;
    bool synthetic, verbose, continuation;
    long long rows, cols, planted_rank;
    double density;
    long long gpus;
} complete_args;

static void complete_help(void)
{
    mf_asd_opts d;
    mf_asd_opts_init(&d);
    printf("usage: mfact complete FILE [--rank R] [--scaled | --plain] [--rank-continuation]\n"
           "                [--tol T]\n"
           "                [--max-iterations N] [--time-limit S] [--init random|spectral]\n"
           "                [--test FILE | --test-fraction F] [--output-x FILE] [--output-y FILE]\n"
           "                [--gpus N] [--verbose] [options]\n"
           "       mfact complete --synthetic M,N,R,DENSITY [--condition C] [same options]\n\n"
           "Completes the matrix of FILE from its stored entries by alternating steepest\n"
           "descent (Tanner & Wei): X (rows x R) and Y (cols x R) minimizing the residual\n"
           "|P(X Y^T - M)| over the observed entries, rank R 1..512 (default %d). --scaled\n"
           "(the default) preconditions the steps by the factors' Gram matrices (Scaled ASD,\n"
           "for ill-conditioned matrices), --plain takes plain steepest descent. The run stops\n"
           "at a relative residual <= T (default %g), when the residual stagnates, after N\n"
           "iterations (default %d) or after S seconds. --init: random (default, uniform\n"
           "factors scaled to the data) or spectral (the top-R singular subspace of the\n"
           "observed entries). --rank-continuation grows the rank from 1 to R, one column at a\n"
           "time, each smaller rank run until it stagnates: slower on well-conditioned\n"
           "matrices, and the way through ill-conditioned ones where a random start stalls.\n"
           "--gpus N: one run over N GPUs (--device and the N - 1 after it), the observed\n"
           "entries shared out by rows.\n"
           "The test RMSE is measured on --test FILE, or on a random\n"
           "fraction F of FILE's entries held out with --seed. --output-x and --output-y\n"
           "write the factors as text, one row per line. --verbose prints every iteration.\n\n"
           "--synthetic M,N,R,DENSITY plants an M x N matrix A B^T of rank R (A and B with\n"
           "N(0, 1) entries; --condition C spreads its singular values from 1 to about 1/C),\n"
           "observes each entry with probability DENSITY, completes it at rank R (or --rank)\n"
           "and reports the relative error |X Y^T - A B^T|_F / |A B^T|_F on %d random\n"
           "entries (on all of them when there are fewer). The same --seed gives the same\n"
           "matrix.\n\n%s",
           d.rank, d.tolerance, d.max_iterations, ERROR_SAMPLES, cli_common_help());
}

static int bad(const char *what)
{
    cli_error("complete", "%s", what);
    return -1;
}

/* "M,N,R,DENSITY": sizes that fit int32, a rank 1..512, a density in (0, 1]. */
static int parse_synthetic(const char *spec, complete_args *a)
{
    char buf[128], *f[4];
    snprintf(buf, sizeof buf, "%s", spec);
    f[0] = buf;
    for (int k = 1; k < 4; k++) {
        if (!(f[k] = strchr(f[k - 1], ',')))
            return bad("--synthetic takes M,N,R,DENSITY");
        *f[k]++ = '\0';
    }
    if (!cli_parse_ll(f[0], &a->rows) || !cli_parse_ll(f[1], &a->cols) ||
        !cli_parse_ll(f[2], &a->planted_rank) || !cli_parse_double(f[3], &a->density) ||
        a->rows < 1 || a->cols < 1 || a->rows > INT32_MAX || a->cols > INT32_MAX ||
        a->planted_rank < 1 || a->planted_rank > 512 || !(a->density > 0) || a->density > 1)
        return bad("--synthetic needs positive sizes, a rank from 1 to 512 and a density in "
                   "(0, 1]");
    a->synthetic = true;
    return 0;
}

/* An option with a value: 0 taken, -1 bad value (printed), 1 not one of these. */
static int parse_option(complete_args *a, const char *opt, const char *val)
{
    if (!strcmp(opt, "--rank")) {
        if (!cli_parse_ll(val, &a->rank) || a->rank < 1 || a->rank > 512)
            return bad("--rank takes an integer from 1 to 512");
    } else if (!strcmp(opt, "--tol")) {
        if (!cli_parse_double(val, &a->tolerance) || !(a->tolerance > 0))
            return bad("--tol takes a finite number > 0");
    } else if (!strcmp(opt, "--max-iterations")) {
        if (!cli_parse_ll(val, &a->max_iterations) || a->max_iterations < 1 ||
            a->max_iterations > INT32_MAX)
            return bad("--max-iterations takes a positive integer");
    } else if (!strcmp(opt, "--time-limit")) {
        if (!cli_parse_double(val, &a->time_limit) || !(a->time_limit >= 0))
            return bad("--time-limit takes a finite number of seconds >= 0 (0: none)");
    } else if (!strcmp(opt, "--test-fraction")) {
        if (!cli_parse_double(val, &a->test_fraction) || !(a->test_fraction > 0) ||
            !(a->test_fraction < 1))
            return bad("--test-fraction takes a number between 0 and 1");
    } else if (!strcmp(opt, "--condition")) {
        if (!cli_parse_double(val, &a->condition) || !(a->condition >= 1))
            return bad("--condition takes a finite number >= 1");
    } else if (!strcmp(opt, "--init")) {
        if (!strcmp(val, "random"))
            a->init = MF_ASD_INIT_RANDOM;
        else if (!strcmp(val, "spectral"))
            a->init = MF_ASD_INIT_SPECTRAL;
        else
            return bad("--init takes random or spectral");
    } else if (!strcmp(opt, "--gpus")) {
        if (!cli_gpus_parse("complete", val, &a->gpus))
            return -1;
    } else if (!strcmp(opt, "--synthetic"))
        return parse_synthetic(val, a);
    else if (!strcmp(opt, "--test"))
        a->test_file = val;
    else if (!strcmp(opt, "--output-x"))
        a->out_x = val;
    else if (!strcmp(opt, "--output-y"))
        a->out_y = val;
    else
        return 1;
    return 0;
}

/* cli_parse_args's view of the options above and the flags. */
static int complete_option(void *args, const char *opt, const char *val)
{
    complete_args *a = args;
    if (!strcmp(opt, "--scaled") || !strcmp(opt, "--plain")) {
        a->variant = opt[2] == 's' ? MF_ASD_SCALED : MF_ASD_PLAIN;
        return CLI_TOOK_FLAG;
    }
    if (!strcmp(opt, "--verbose")) {
        a->verbose = true;
        return CLI_TOOK_FLAG;
    }
    if (!strcmp(opt, "--rank-continuation")) {
        a->continuation = true;
        return CLI_TOOK_FLAG;
    }
    int r = val ? parse_option(a, opt, val) : 1;
    return r < 0 ? -1 : r == 0 ? CLI_TOOK_VALUE : CLI_NOT_MINE;
}

static int parse(int argc, char **argv, complete_args *a)
{
    mf_asd_opts d;
    mf_asd_opts_init(&d);
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->tolerance = d.tolerance, a->max_iterations = d.max_iterations;
    a->variant = d.variant, a->init = d.init, a->condition = 1.0, a->gpus = 1;
    if (cli_parse_args("complete", argc, argv, &a->common, complete_option, a, &a->file) < 0)
        return -1;
    if (a->common.help)
        return 0;
    if (a->synthetic && (a->file || a->test_file || a->test_fraction > 0))
        return bad("--synthetic makes its own matrix: no FILE, --test or --test-fraction");
    if (!a->synthetic && !a->file)
        return bad("a matrix FILE or --synthetic M,N,R,DENSITY is required");
    if (!a->synthetic && a->condition > 1)
        return bad("--condition goes with --synthetic");
    if (a->test_file && a->test_fraction > 0)
        return bad("--test and --test-fraction exclude each other");
    if (!a->rank)
        a->rank = a->synthetic ? a->planted_rank : d.rank;
    return 0;
}

static int on_iteration(void *user, const mf_progress *p)
{
    (void)user;
    if (cli_quiet())
        return 0;
    fprintf(stderr, "iteration %d: relative residual %.4e", p->iteration, p->train_rmse);
    if (!isnan(p->test_rmse))
        fprintf(stderr, ", test RMSE %.4g", p->test_rmse);
    fprintf(stderr, " (%.2f s)\n", p->seconds);
    return 0;
}

/* Without --verbose, on a terminal: one line kept up to date. */
typedef struct complete_watch {
    cli_progress line;
    const complete_args *a;
} complete_watch;

static int on_iteration_line(void *user, const mf_progress *p)
{
    complete_watch *w = user;
    if (cli_quiet())
        return 0;
    char what[96];
    snprintf(what, sizeof what, "iteration %d: relative residual %.3e", p->iteration,
             p->train_rmse);
    cli_progress_update(
        &w->line, what,
        cli_run_fraction(p->iteration, w->a->max_iterations, p->seconds, w->a->time_limit));
    return 0;
}

/* One rank's mf_asd_run (cli_gpus_call): rank 0's options are the tool's, the others
 * neither print nor report. */
typedef struct asd_call {
    mf_asd_opts o;
    mf_asd_report rep; /* rank 0's */
} asd_call;

static mf_status asd_rank(const cli_rank *r, void *user)
{
    asd_call *c = user;
    mf_asd_opts o = c->o;
    o.test = r->test;
    if (r->rank > 0)
        o.progress = NULL;
    mf_asd_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_asd_run(r->ctx, r->train, &o, r->U, r->V, MF_MEMORY_HOST, &rep);
    if (r->rank == 0)
        c->rep = rep;
    return st;
}

/* mf_asd_run on M with the arguments' options into host X and Y, on ctx or over --gpus N
 * devices with ctx as rank 0 (every rank gets the same factors); prints a failure. */
static int complete(mf_ctx *ctx, const complete_args *a, const mf_sparse *M, const mf_sparse *test,
                    float *X, float *Y, mf_asd_report *rep)
{
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    o.rank = (int)a->rank, o.variant = a->variant, o.init = a->init;
    o.rank_continuation = a->continuation;
    o.tolerance = a->tolerance, o.max_iterations = (int)a->max_iterations;
    o.time_limit = a->time_limit;
    o.test = test;
    complete_watch watch = {.a = a};
    cli_progress_begin(&watch.line);
    if (a->verbose)
        o.progress = on_iteration;
    else if (watch.line.enabled)
        o.progress = on_iteration_line, o.progress_user = &watch;
    cli_gpus g;
    if (cli_gpus_open("complete", &a->common, ctx, (int)a->gpus, (mf_sparse *)M, (mf_sparse *)test,
                      (int)a->rank, X, Y, &g) != 0) {
        cli_progress_end(&watch.line);
        return -1; /* printed */
    }
    asd_call call = {o, {.struct_size = sizeof call.rep}};
    mf_status st = cli_gpus_call("complete", &g, asd_rank, &call);
    *rep = call.rep;
    cli_gpus_close(&g);
    cli_progress_end(&watch.line);
    return st == MF_OK ? 0 : -1; /* a failure is printed */
}

/* The lines both inputs print about the run, after the input's own. */
static void out_run(cli_out *out, const complete_args *a, const mf_asd_report *rep)
{
    cli_out_int(out, "rank", a->rank);
    cli_out_str(out, "variant", a->variant == MF_ASD_SCALED ? "scaled" : "plain");
    cli_out_str(out, "init", a->init == MF_ASD_INIT_SPECTRAL ? "spectral" : "random");
    cli_out_str(out, "rank continuation", a->continuation ? "yes" : "no");
    cli_out_int(out, "iterations", rep->iterations);
    cli_out_str(out, "stopped", demo_asd_stop_name(rep->stopped));
    cli_out_num(out, "relative residual", rep->relative_residual);
    if (a->variant == MF_ASD_SCALED)
        cli_out_int(out, "singular steps", rep->singular_steps);
}

/* X and Y for an M of rows x cols at the arguments' rank; prints a failure. */
static int factors(const complete_args *a, int32_t rows, int32_t cols, float **X, float **Y)
{
    *X = demo_alloc("the factor X", (int64_t)rows * a->rank, sizeof **X);
    *Y = demo_alloc("the factor Y", (int64_t)cols * a->rank, sizeof **Y);
    return *X && *Y ? 0 : -1;
}

static int run_file(mf_ctx *ctx, const void *args, mf_sparse *M, mf_sparse *test)
{
    const complete_args *a = args;
    int32_t rows, cols;
    int64_t nnz, ntest = 0;
    mf_sparse_shape(M, &rows, &cols, &nnz);
    if (test)
        mf_sparse_shape(test, NULL, NULL, &ntest);
    float *X = NULL, *Y = NULL;
    mf_asd_report rep;
    int rc = CLI_FAILED;
    if (factors(a, rows, cols, &X, &Y) != 0 || complete(ctx, a, M, test, X, Y, &rep) != 0 ||
        cli_write_factors("complete", a->out_x, a->out_y, X, Y, M, a->rank) != 0)
        goto done;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_str(&out, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    cli_out_int(&out, "rows", rows);
    cli_out_int(&out, "cols", cols);
    cli_out_int(&out, "observed", nnz);
    cli_out_int(&out, "test entries", ntest);
    if (cli_test_unseen() > 0) /* rows or columns the file lacks: left out of the test RMSE */
        cli_out_int(&out, "test entries unseen", cli_test_unseen());
    out_run(&out, a, &rep);
    if (test)
        cli_out_num(&out, "test RMSE", rep.test_rmse);
    cli_out_num(&out, "seconds", rep.seconds);
    cli_out_end(&out);
    rc = CLI_OK;
done:
    free(X), free(Y);
    return rc;
}

static int run_synthetic(const complete_args *a)
{
    demo_set_command("complete");
    mf_ctx *ctx = cli_make_group_ctx("complete", &a->common);
    if (!ctx)
        return CLI_FAILED;
    demo_planted p;
    float *X = NULL, *Y = NULL;
    mf_asd_report rep;
    int rc = CLI_FAILED;
    if (demo_planted_make(ctx, a->common.seed, (int32_t)a->rows, (int32_t)a->cols,
                          (int)a->planted_rank, a->density, a->condition, &p) != 0 ||
        factors(a, p.rows, p.cols, &X, &Y) != 0)
        goto done;
    int64_t nnz;
    mf_sparse_shape(p.M, NULL, NULL, &nnz);
    demo_say("completing at rank %lld (mf_asd_run, %s ASD) from %lld observed entries", a->rank,
             a->variant == MF_ASD_SCALED ? "Scaled" : "plain", (long long)nnz);
    if (complete(ctx, a, p.M, NULL, X, Y, &rep) != 0 ||
        cli_write_factors("complete", a->out_x, a->out_y, X, Y, p.M, a->rank) != 0)
        goto done;
    int64_t used = 0;
    double err = demo_planted_error(ctx, &p, X, Y, (int)a->rank, ERROR_SAMPLES, &used);
    if (isnan(err))
        goto done;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_str(&out, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    cli_out_int(&out, "rows", p.rows);
    cli_out_int(&out, "cols", p.cols);
    cli_out_int(&out, "observed", nnz);
    cli_out_num(&out, "density", (double)nnz / ((double)p.rows * p.cols));
    cli_out_int(&out, "planted rank", p.rank);
    cli_out_num(&out, "condition", p.condition);
    cli_out_num(&out, "generate seconds", p.seconds);
    out_run(&out, a, &rep);
    cli_out_num(&out, "relative error vs planted", err);
    cli_out_int(&out, "error entries", used);
    cli_out_num(&out, "seconds", rep.seconds);
    cli_out_end(&out);
    rc = CLI_OK;
done:
    free(X), free(Y);
    demo_planted_free(&p);
    mf_ctx_destroy(ctx);
    return rc;
}

int cmd_complete(int argc, char **argv)
{
    complete_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        complete_help();
        return CLI_OK;
    }
    const char *const inputs[] = {a.file, a.test_file}, *const outputs[] = {a.out_x, a.out_y};
    const int out_rc = cli_check_outputs("complete", inputs, 2, outputs, 2);
    if (out_rc != CLI_OK)
        return out_rc;
    if (a.synthetic)
        return run_synthetic(&a);
    demo_set_command("complete");
    return cli_run_on_ratings("complete", &a.common, a.file, a.test_file, a.test_fraction, run_file,
                              &a);
}
