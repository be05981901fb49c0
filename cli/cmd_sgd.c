/* mfact sgd: Hogwild SGD (mf_sgd_hogwild_run) on a ratings file, with a held-out part from
 * a second file or split off at random, the train and test RMSE printed after every epoch,
 * and the factors optionally written as text (one row per line). */
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

typedef struct sgd_args {
    cli_common common;
    const char *file;
    long long rank, epochs, workers;
    double lr, decay;
    bool fp16, constant, by_ratings;
    cli_model_args model;
} sgd_args;

static const char about[] =
    "Factorizes the ratings of FILE (users x items) by lock-free (Hogwild) SGD, the learning "
    "rate decayed as R / (1 + B t^1.5) in epoch t. The test RMSE is measured on --test FILE, "
    "or on a held-out fraction of FILE's ratings. Repeated ratings keep the last one. Prints "
    "the train and test RMSE after every epoch. With --gpus N each GPU keeps its share of the "
    "users and the item blocks rotate between them within an epoch.";

/* The options of sgd beside the shared ones, defaults set first (help prints them). */
static int sgd_table(sgd_args *a, cli_opt *t)
{
    mf_sgd_opts d;
    mf_sgd_opts_init(&d);
    a->rank = d.rank, a->epochs = d.epochs, a->lr = d.learning_rate, a->decay = d.decay;
    const cli_opt own[] = {
        CLI_OPT_INT("--rank", &a->rank, 1, 512, "K", "the factors' rank"),
        CLI_OPT_REAL("--lr", &a->lr, 0, INFINITY, CLI_ABOVE, "R", "the learning rate"),
        CLI_OPT_REAL("--decay", &a->decay, 0, INFINITY, 0, "B", "the learning rate's decay"),
        CLI_OPT_FLAG("--constant-rate", &a->constant, "keep the learning rate R"),
        CLI_OPT_INT("--epochs", &a->epochs, 0, 1000000, "N", "epochs"),
        CLI_OPT_FLAG("--fp16", &a->fp16, "store the factors in half precision"),
        CLI_OPT_INT("--workers", &a->workers, 0, 1 << 24, "W",
                    "the concurrent updates at most (threads or GPU warps; 1 is reproducible; "
                    "0: all)"),
        CLI_OPT_FLAG("--order-ratings", &a->by_ratings,
                     "visit single ratings in cuMF_SGD's order instead of user chunks"),
    };
    memcpy(t, own, sizeof own);
    return CLI_COUNT(own);
}

/* One rank's mf_sgd_hogwild_run (cli_fit_factors). */
static mf_status sgd_call(const cli_fit_rank *f)
{
    mf_sgd_opts o = *(const mf_sgd_opts *)f->opts;
    o.test = f->r->test, o.progress = f->progress, o.progress_user = f->progress_user;
    o.bias_out = f->bias_out;
    return mf_sgd_hogwild_run(f->r->ctx, f->r->train, &o, f->r->U, f->r->V, MF_MEMORY_HOST,
                              f->report);
}

/* The fit's results: its model file and the lines on stdout. */
static int results(const cli_model_fit *f, const cli_fitted *x)
{
    const sgd_args *a = f->args;
    const mf_sgd_report *rep = f->report;
    char text[256];
    snprintf(text, sizeof text,
             "rank=%d lambda=%g lambda_bias=%g learning_rate=%g decay=%g schedule=%s epochs=%d "
             "storage=%s",
             rep->rank, (double)rep->lambda, (double)((const mf_sgd_opts *)f->opts)->lambda_bias,
             a->lr, a->decay, a->constant ? "constant" : "inverse-time", rep->epochs,
             a->fp16 ? "fp16" : "fp32");
    const cli_fit fitted = {"sgd", text, x->train, rep->rank, (int)a->rank, x->U, x->V, &x->bias};
    cli_out out;
    if (cli_fit_results(&out, x, &a->common, &a->model, &fitted) != CLI_OK)
        return CLI_FAILED;
    cli_out_str(&out, "storage", a->fp16 ? "fp16" : "fp32");
    cli_out_int(&out, "workers", rep->workers);
    cli_out_model(&out, &a->model, &x->bias, rep->lambda, rep->rank, rep->validation_rmse);
    cli_out_int(&out, "epochs", rep->epochs);
    cli_out_num(&out, "train RMSE", rep->train_rmse);
    if (x->test && cli_out_test(&out, "sgd", x->ctx, &fitted, rep->test_rmse) != 0) {
        cli_out_end(&out);
        return CLI_FAILED;
    }
    cli_out_num(&out, "updates per second", rep->updates_per_second);
    cli_out_num(&out, "seconds", rep->seconds);
    cli_out_end(&out);
    return CLI_OK;
}

static int run(mf_ctx *ctx, const void *args, mf_sparse *train, mf_sparse *test)
{
    const sgd_args *a = args;
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = (int)a->rank, o.epochs = (int)a->epochs, o.workers = (int)a->workers;
    o.learning_rate = (float)a->lr, o.decay = (float)a->decay;
    o.lambda_u = o.lambda_v = (float)a->model.lambda;
    o.schedule = a->constant ? MF_SGD_SCHEDULE_CONSTANT : MF_SGD_SCHEDULE_INVERSE_TIME;
    o.storage = a->fp16 ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
    o.order = a->by_ratings ? MF_SGD_ORDER_RATINGS : MF_SGD_ORDER_USER_CHUNKS;
    o.biases = a->model.biases;
    if (a->model.lambda_bias >= 0)
        o.lambda_bias = (float)a->model.lambda_bias;
    o.tune = a->model.tune;
    mf_sgd_report rep = {.struct_size = sizeof rep};
    const cli_model_fit f = {"sgd", "epoch", sgd_call, &o, &rep, results, a};
    return cli_model_run(&f, ctx, &a->common, &a->model, a->rank, train, test);
}

int cmd_sgd(int argc, char **argv)
{
    sgd_args a = {.file = NULL};
    mf_sgd_opts d;
    mf_sgd_opts_init(&d);
    cli_opt own[8];
    char lambda_bias[32];
    snprintf(lambda_bias, sizeof lambda_bias, "%g", (double)d.lambda_bias);
    const cli_ratings_cmd c = {
        "sgd", "sgd FILE [options]", about, own, sgd_table(&a, own), lambda_bias, run};
    return cli_ratings_main(&c, argc, argv, &a.common, &a.file, &a.model, d.lambda_u, &a);
}
