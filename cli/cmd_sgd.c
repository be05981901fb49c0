/* mfact sgd: Hogwild SGD (mf_sgd_hogwild_run) on a ratings file, with a held-out part from
 * a second file or split off at random, the train and test RMSE printed after every epoch,
 * and the factors optionally written as text (one row per line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpus.h"
#include "model_file.h"
#include "outputs.h"
#include "test_set.h"

typedef struct sgd_args {
    cli_common common;
    const char *file, *test_file, *out_u, *out_v;
    long long rank, epochs, workers, gpus;
    double lr, decay, lambda, test_fraction;
    bool fp16, constant, by_ratings;
    cli_model_args model;
} sgd_args;

static void sgd_help(void)
{
    mf_sgd_opts d;
    mf_sgd_opts_init(&d);
    printf("usage: mfact sgd FILE [--rank K] [--lr R] [--decay B] [--constant-rate]\n"
           "                [--lambda L] [--epochs N] [--fp16] [--workers W] [--order-ratings]\n"
           "                [--no-biases] [--lambda-bias L] [--auto | --auto-rank]\n"
           "                [--save-model FILE]\n"
           "                [--test FILE | --test-fraction F] [--output-u FILE] [--output-v FILE]\n"
           "                [--gpus N] [options]\n\n"
           "Factorizes the ratings of FILE (users x items) by lock-free (Hogwild) SGD: rank K\n"
           "(1..512, default %d), learning rate R (default %g) decayed as R / (1 + B t^1.5) in\n"
           "epoch t (B default %g; --constant-rate keeps R), regularization L on both sides\n"
           "(default %g; the biases' %g), N epochs (default %d). --fp16 stores the factors in\n"
           "half precision;\n"
           "--workers caps the concurrent updates (threads or GPU warps; 1 is reproducible);\n"
           "--order-ratings visits single ratings in cuMF_SGD's order instead of user chunks.\n"
           "The test RMSE is measured on --test FILE, or on a fraction F of FILE's ratings held\n"
           "out by a hash of their position and --seed. Repeated ratings keep the last one.\n"
           "Prints the train and test RMSE after every epoch; --output-u and --output-v write\n"
           "the factors as text, one row per line. --gpus N: one fit over N GPUs (--device and\n"
           "the N - 1 after it): each keeps its share of the users and the item blocks rotate\n"
           "between them within an epoch.\n%s%s",
           d.rank, (double)d.learning_rate, (double)d.decay, (double)d.lambda_u,
           (double)d.lambda_bias, d.epochs, cli_model_help(), cli_common_help());
}

static int bad(const char *what)
{
    cli_error("sgd", "%s", what);
    return -1;
}

static int parse(int argc, char **argv, sgd_args *a)
{
    mf_sgd_opts d;
    mf_sgd_opts_init(&d);
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->rank = d.rank, a->epochs = d.epochs, a->lr = d.learning_rate, a->decay = d.decay;
    a->lambda = d.lambda_u;
    a->gpus = 1;
    cli_model_init(&a->model);
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse("sgd", argc, argv, &i, &a->common);
        if (r == 0)
            r = cli_model_parse("sgd", argc, argv, &i, &a->model);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--rank") && val) {
            if (!cli_parse_ll(argv[++i], &a->rank) || a->rank < 1 || a->rank > 512)
                return bad("--rank takes an integer from 1 to 512");
        } else if (!strcmp(opt, "--lr") && val) {
            if (!cli_parse_double(argv[++i], &a->lr) || !(a->lr > 0) || !isfinite(a->lr))
                return bad("--lr takes a finite number > 0");
        } else if (!strcmp(opt, "--decay") && val) {
            if (!cli_parse_double(argv[++i], &a->decay) || !(a->decay >= 0) || !isfinite(a->decay))
                return bad("--decay takes a finite number >= 0");
        } else if (!strcmp(opt, "--lambda") && val) {
            if (!cli_parse_double(argv[++i], &a->lambda) || !(a->lambda >= 0) ||
                !isfinite(a->lambda))
                return bad("--lambda takes a finite number >= 0");
        } else if (!strcmp(opt, "--epochs") && val) {
            if (!cli_parse_ll(argv[++i], &a->epochs) || a->epochs < 0 || a->epochs > 1000000)
                return bad("--epochs takes an integer >= 0");
        } else if (!strcmp(opt, "--workers") && val) {
            if (!cli_parse_ll(argv[++i], &a->workers) || a->workers < 0 || a->workers > 1 << 24)
                return bad("--workers takes an integer >= 0 (0: all)");
        } else if (!strcmp(opt, "--test-fraction") && val) {
            if (!cli_parse_double(argv[++i], &a->test_fraction) || !(a->test_fraction > 0) ||
                !(a->test_fraction < 1))
                return bad("--test-fraction takes a number between 0 and 1");
        } else if (!strcmp(opt, "--fp16")) {
            a->fp16 = true;
        } else if (!strcmp(opt, "--constant-rate")) {
            a->constant = true;
        } else if (!strcmp(opt, "--gpus") && val) {
            if (!cli_gpus_parse("sgd", argv[++i], &a->gpus))
                return -1;
        } else if (!strcmp(opt, "--order-ratings")) {
            a->by_ratings = true;
        } else if (!strcmp(opt, "--test") && val) {
            a->test_file = argv[++i];
        } else if (!strcmp(opt, "--output-u") && val) {
            a->out_u = argv[++i];
        } else if (!strcmp(opt, "--output-v") && val) {
            a->out_v = argv[++i];
        } else if (opt[0] == '-') {
            cli_error("sgd", "unknown option '%s' (or it lacks its value)", opt);
            return -1;
        } else if (a->file) {
            return bad("one FILE at most");
        } else
            a->file = opt;
    }
    if (!a->common.help && !a->file)
        return bad("a ratings FILE is required");
    if (a->test_file && a->test_fraction > 0)
        return bad("--test and --test-fraction exclude each other");
    return 0;
}

static int on_epoch(void *user, const mf_progress *p)
{
    (void)user;
    cli_print_progress("epoch", p);
    return 0;
}

/* One rank's mf_sgd_hogwild_run (cli_gpus_call): rank 0's options are the tool's; the
 * others have their own test copy and neither print nor report biases. */
typedef struct sgd_call {
    mf_sgd_opts o;
    mf_sgd_report rep; /* rank 0's */
} sgd_call;

static mf_status sgd_rank(const cli_rank *r, void *user)
{
    sgd_call *c = user;
    mf_sgd_opts o = c->o;
    o.test = r->test;
    if (r->rank > 0)
        o.progress = NULL, o.bias_out = NULL;
    mf_sgd_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_sgd_hogwild_run(r->ctx, r->train, &o, r->U, r->V, MF_MEMORY_HOST, &rep);
    if (r->rank == 0)
        c->rep = rep;
    return st;
}

/* mf_sgd_hogwild_run on ctx, or over --gpus N devices with ctx as rank 0 (every rank gets
 * the same factors). Prints a failure. */
static mf_status fit(mf_ctx *ctx, const sgd_args *a, mf_sparse *train, mf_sparse *test,
                     const mf_sgd_opts *o, float *U, float *V, mf_sgd_report *rep)
{
    cli_gpus g;
    if (cli_gpus_open("sgd", &a->common, ctx, (int)a->gpus, train, test, (int)a->rank, U, V, &g) !=
        0)
        return MF_ERR_INVALID_ARGUMENT; /* printed */
    sgd_call call = {*o, {0}};
    mf_status st = cli_gpus_call("sgd", &g, sgd_rank, &call);
    *rep = call.rep;
    cli_gpus_close(&g);
    return st;
}

static int run(mf_ctx *ctx, const void *args, mf_sparse *train, mf_sparse *test)
{
    const sgd_args *a = args;
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    float *U = malloc(((size_t)users * a->rank + 1) * sizeof *U);
    float *V = malloc(((size_t)items * a->rank + 1) * sizeof *V);
    mf_biases bias = {0.0f, NULL, NULL};
    int rc = CLI_FAILED;
    if (!U || !V) {
        cli_error("sgd", "out of host memory for the factors");
        goto done;
    }
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = (int)a->rank, o.epochs = (int)a->epochs, o.workers = (int)a->workers;
    o.learning_rate = (float)a->lr, o.decay = (float)a->decay;
    o.lambda_u = o.lambda_v = (float)a->lambda;
    o.schedule = a->constant ? MF_SGD_SCHEDULE_CONSTANT : MF_SGD_SCHEDULE_INVERSE_TIME;
    o.storage = a->fp16 ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
    o.order = a->by_ratings ? MF_SGD_ORDER_RATINGS : MF_SGD_ORDER_USER_CHUNKS;
    o.test = test;
    o.progress = on_epoch;
    o.biases = a->model.biases;
    if (a->model.lambda_bias >= 0)
        o.lambda_bias = (float)a->model.lambda_bias;
    o.tune = a->model.tune;
    /* The biases come back where a model file or unseen test entries need them. */
    if ((a->model.save_model || cli_test_unseen() > 0) && a->model.biases &&
        cli_bias_room("sgd", train, &bias) != 0)
        goto done;
    o.bias_out = &bias;
    mf_sgd_report rep = {.struct_size = sizeof rep};
    if (fit(ctx, a, train, test, &o, U, V, &rep) != MF_OK)
        goto done; /* printed */
    if (cli_write_factors("sgd", a->out_u, a->out_v, U, V, train, a->rank) != 0)
        goto done;
    char text[256];
    snprintf(text, sizeof text,
             "rank=%d lambda=%g lambda_bias=%g learning_rate=%g decay=%g schedule=%s epochs=%d "
             "storage=%s",
             rep.rank, (double)rep.lambda, (double)o.lambda_bias, a->lr, a->decay,
             a->constant ? "constant" : "inverse-time", rep.epochs, a->fp16 ? "fp16" : "fp32");
    const cli_fit fitted = {"sgd", text, train, rep.rank, (int)a->rank, U, V, &bias};
    if (cli_save_model("sgd", ctx, a->model.save_model, &fitted) != 0)
        goto done;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_ratings(&out, ctx, train, test, a->rank);
    cli_out_str(&out, "storage", a->fp16 ? "fp16" : "fp32");
    cli_out_int(&out, "workers", rep.workers);
    cli_out_model(&out, &a->model, &bias, rep.lambda, rep.rank, rep.validation_rmse);
    cli_out_int(&out, "epochs", rep.epochs);
    cli_out_num(&out, "train RMSE", rep.train_rmse);
    if (test && cli_out_test(&out, "sgd", ctx, &fitted, rep.test_rmse) != 0) {
        cli_out_end(&out);
        goto done;
    }
    cli_out_num(&out, "updates per second", rep.updates_per_second);
    cli_out_num(&out, "seconds", rep.seconds);
    cli_out_end(&out);
    rc = CLI_OK;
done:
    free(U);
    free(V);
    cli_free_biases(&bias);
    return rc;
}

int cmd_sgd(int argc, char **argv)
{
    sgd_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        sgd_help();
        return CLI_OK;
    }
    const char *const inputs[] = {a.file, a.test_file}, *const outputs[] = {a.out_u, a.out_v,
                                                                            a.model.save_model};
    const int out_rc = cli_check_outputs("sgd", inputs, 2, outputs, 3);
    if (out_rc != CLI_OK)
        return out_rc;
    return cli_run_on_ratings("sgd", &a.common, a.file, a.test_file, a.test_fraction, run, &a);
}
