/* The run of a model command (als, sgd) once its options are set: the factors and biases of
 * the ratings on the tool's context or over --gpus N (gpus.h), a progress line on stderr
 * after every iteration or epoch, the factors' files (--output-u, --output-v), then the
 * command's results. The algorithms differ in one call, in their options' and report's
 * types and in what they print, which the command gives. */
#ifndef MFACT_CLI_MODEL_FIT_H
#define MFACT_CLI_MODEL_FIT_H

#include "cli.h"
#include "gpus.h"
#include "model_file.h"

/* One rank's call (on its own thread, every rank at once): the algorithm's run on r's
 * ratings into r's factors, with a copy of the command's options (its mf_*_opts) whose
 * test, progress, progress_user and bias_out are these. Rank 0 reports the progress and
 * the biases, into the command's report; the other ranks have progress, bias_out and report
 * NULL (every rank fits and measures alike: the library keeps its report whether it is
 * asked for or not). */
typedef struct cli_fit_rank {
    const cli_rank *r;
    const void *opts;
    mf_progress_fn progress;
    void *progress_user;
    mf_biases *bias_out;
    void *report;
} cli_fit_rank;

/* What cli_model_run fitted, on ctx: of train (test: NULL or the seen test entries), U
 * (users x k) and V (items x k), and the mean and biases (bias.user and bias.item only where
 * a model file or unseen test entries need them, else NULL). */
typedef struct cli_fitted {
    mf_ctx *ctx;
    mf_sparse *train, *test;
    float *U, *V;
    mf_biases bias;
} cli_fitted;

typedef struct cli_model_fit {
    const char *cmd;  /* "als", "sgd": the messages' */
    const char *unit; /* the progress lines': "iteration", "epoch" */
    mf_status (*call)(const cli_fit_rank *f);
    const void *opts; /* the command's mf_*_opts */
    void *report;     /* rank 0's mf_*_report, struct_size set */
    /* The command's results once the fit and its files are written (cli_fit_results, then
     * its own lines); prints a failure and returns CLI_OK or CLI_FAILED. */
    int (*results)(const struct cli_model_fit *f, const cli_fitted *x);
    const void *args; /* the command's parsed arguments, for results */
} cli_model_fit;

/* Fits train (test: NULL or the seen test entries) at rank k with f's call over m->gpus
 * ranks, writes m->out_u and m->out_v, then calls f->results. Prints a failure; returns
 * CLI_OK or CLI_FAILED. */
int cli_model_run(const cli_model_fit *f, mf_ctx *ctx, const cli_common *common,
                  const cli_model_args *m, long long k, mf_sparse *train, mf_sparse *test);

/* The fit's model file (m->save_model, of `fitted`: x's factors, the command's options) and
 * the first lines of its results: cli_out_begin (--json or not), then cli_out_ratings's at
 * the asked rank (fitted->ld). Prints a failure; returns CLI_OK, or CLI_FAILED with nothing
 * begun. */
int cli_fit_results(cli_out *out, const cli_fitted *x, const cli_common *common,
                    const cli_model_args *m, const cli_fit *fitted);

#endif
