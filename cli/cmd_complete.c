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
#include "options.h"
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
    int variant, init; /* mf_asd_variant, mf_asd_init */
    bool synthetic, verbose, continuation;
    long long rows, cols, planted_rank;
    double density;
    long long gpus;
} complete_args;

static const char about[] =
    "Completes the matrix of FILE from its stored entries by alternating steepest descent "
    "(Tanner & Wei): X (rows x R) and Y (cols x R) minimizing the residual |P(X Y^T - M)| over "
    "the observed entries. The run stops at a relative residual <= T, when the residual "
    "stagnates, after N iterations or after S seconds. The test RMSE is measured on --test "
    "FILE, or on a random fraction F of FILE's entries held out with --seed.\n"
    "--synthetic M,N,R,DENSITY plants an M x N matrix A B^T of rank R (A and B with N(0, 1) "
    "entries; --condition C spreads its singular values from 1 to about 1/C), observes each "
    "entry with probability DENSITY, completes it at rank R (or --rank) and reports the "
    "relative error |X Y^T - A B^T|_F / |A B^T|_F on a million random entries (on all of them "
    "when there are fewer). The same --seed gives the same matrix.\n"
    "With ids (--ids, or --user-col and --item-col: FILE's rows and columns named by integer "
    "or string ids) each line of --output-x (-y) starts with its row's (column's) id and a "
    "space, and a --test file takes FILE's ids (its rows and columns FILE lacks are counted "
    "as unseen and left out of the test RMSE).";

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

/* --synthetic's value (cli_opt's CLI_CALL). */
static bool synthetic(const char *cmd, const char *name, const char *v, void *dest)
{
    (void)cmd, (void)name;
    return parse_synthetic(v, dest) == 0;
}

static int parse(int argc, char **argv, complete_args *a)
{
    mf_asd_opts d;
    mf_asd_opts_init(&d);
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->tolerance = d.tolerance, a->max_iterations = d.max_iterations;
    a->variant = d.variant, a->init = d.init, a->condition = 1.0, a->gpus = 1;
    static const int inits[] = {MF_ASD_INIT_RANDOM, MF_ASD_INIT_SPECTRAL};
    char rank[64];
    snprintf(rank, sizeof rank, "%d; with --synthetic: its R", d.rank);
    const cli_opt own[] = {
        {.name = "--rank",
         .kind = CLI_INT,
         .dest = &a->rank,
         .lo = 1,
         .hi = 512,
         .meta = "R",
         .help = "the completion's rank",
         .dflt = rank},
        CLI_OPT_SET("--scaled", &a->variant, MF_ASD_SCALED,
                    "precondition the steps by the factors' Gram matrices (Scaled ASD, for "
                    "ill-conditioned matrices; the default)"),
        CLI_OPT_SET("--plain", &a->variant, MF_ASD_PLAIN, "plain steepest descent"),
        CLI_OPT_FLAG("--rank-continuation", &a->continuation,
                     "grow the rank from 1 to R, one column at a time, each smaller rank run "
                     "until it stagnates: slower on well-conditioned matrices, and the way "
                     "through ill-conditioned ones where a random start stalls"),
        CLI_OPT_REAL("--tol", &a->tolerance, 0, INFINITY, CLI_ABOVE, "T",
                     "the relative residual to stop at"),
        CLI_OPT_INT("--max-iterations", &a->max_iterations, 1, INT32_MAX, "N",
                    "iterations at most"),
        CLI_OPT_REAL("--time-limit", &a->time_limit, 0, INFINITY, 0, "S", "seconds (0: none)"),
        CLI_OPT_CHOICE("--init", &a->init, "random|spectral", inits,
                       "uniform factors scaled to the data (random) or the top-R singular "
                       "subspace of the observed entries (spectral)"),
        CLI_OPT_STR("--test", &a->test_file, "FILE", "measure the test RMSE on FILE's entries"),
        CLI_OPT_REAL("--test-fraction", &a->test_fraction, 0, 1, CLI_ABOVE | CLI_BELOW, "F",
                     "measure it on a random fraction F of FILE's entries (0: none)"),
        CLI_OPT_STR("--output-x", &a->out_x, "FILE", "write X as text, one row per line"),
        CLI_OPT_STR("--output-y", &a->out_y, "FILE", "write Y as text, one row per line"),
        CLI_OPT_INT("--gpus", &a->gpus, 1, CLI_MAX_GPUS, "N",
                    "one run over N GPUs (--device and the N - 1 after it), the observed entries "
                    "shared out by rows"),
        CLI_OPT_FLAG("--verbose", &a->verbose, "print every iteration"),
        CLI_OPT_CALL("--synthetic", a, synthetic, "M,N,R,DENSITY",
                     "complete a planted matrix instead of FILE (see above)"),
        CLI_OPT_REAL("--condition", &a->condition, 1, INFINITY, 0, "C",
                     "with --synthetic: the planted matrix's condition number"),
    };
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {"complete",
                        "complete FILE [options]\n       mfact complete --synthetic "
                        "M,N,R,DENSITY [--condition C] [options]",
                        about,
                        &g,
                        1,
                        &a->file,
                        1,
                        "one FILE at most"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r != 0)
        return r;
    if (a->synthetic && (a->file || a->test_file || a->test_fraction > 0))
        return bad("--synthetic makes its own matrix: no FILE, --test or --test-fraction");
    if (a->synthetic && cli_id_option(&a->common)) {
        cli_error("complete", "%s: --synthetic's matrix has no ids (they name FILE's columns)",
                  cli_id_option(&a->common));
        return -1;
    }
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
    const int parsed = parse(argc, argv, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
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
