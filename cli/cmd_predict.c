/* mfact predict: the predictions of a saved model (mf_model_load, mf_predict_pairs) for the
 * (user, item) pairs of a file, one a line in the file's order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "id_lines.h"
#include "model_file.h"
#include "options.h"
#include "outputs.h"

typedef struct predict_args {
    cli_common common;
    const char *model, *pairs, *out;
} predict_args;

static const char about[] =
    "Predicts a rating for each (user, item) pair of PAIRS with the model file MODEL (written "
    "by mfact als, sgd or ials --save-model): mean + user bias + item bias + U_u . V_i, or U_u . "
    "V_i for a model without biases. PAIRS holds one pair a line, 'user item', and what follows "
    "on the line is ignored, so a ratings file serves; fields are separated by spaces, tabs, "
    "commas or '::'; blank lines, lines starting with '#' or '%' and a header line are skipped; "
    "a MatrixMarket file is read as one. Ids are the training file's: those it had with "
    "--user-col/--item-col or --ids (the model keeps them; --user-col/--item-col here pick "
    "PAIRS's columns, by name in its header or by position), else indices numbered as the "
    "training file was (its index base, which the model records; --index-base overrides). A "
    "user or item the model has not seen is predicted from what is known (the mean and the "
    "known bias).\n"
    "Prints one prediction a line, in the order of PAIRS, or writes them to --output FILE and "
    "prints a summary; --json prints one JSON object (the predictions in it unless --output is "
    "given).";

/* 0 parsed, 1 help printed, -1 a usage error (printed). */
static int parse(int argc, char **argv, predict_args *a)
{
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    const cli_opt own[] = {
        CLI_OPT_STR("--output", &a->out, "FILE", "write the predictions to FILE"),
    };
    const char *files[2] = {NULL, NULL};
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {"predict", "predict MODEL PAIRS [options]", about, &g, 1, files,
                        2,         "MODEL and PAIRS, no more files"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r != 0)
        return r;
    a->model = files[0], a->pairs = files[1];
    if (!a->pairs) {
        cli_error("predict", "a MODEL file and a PAIRS file are required");
        return -1;
    }
    return 0;
}

/* The predictions as lines to `path` (NULL: standard output). */
static int write_lines(const char *path, const float *p, int64_t n)
{
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        cli_error("predict", "cannot write %s: %s", path, strerror(errno));
        return CLI_FAILED;
    }
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%.9g\n", (double)p[i]);
    const int failed = ferror(f);
    if ((path ? fclose(f) : fflush(f)) != 0 || failed) {
        cli_error("predict", "cannot write %s: %s", path ? path : "the standard output",
                  strerror(errno ? errno : EIO));
        return CLI_FAILED;
    }
    return CLI_OK;
}

static int predict(mf_ctx *ctx, const predict_args *a)
{
    mf_saved_model *saved;
    mf_model m;
    int base;
    if (cli_load_model("predict", ctx, a->model, a->common.index_base, &saved, &m, &base) != 0)
        return CLI_FAILED;
    int32_t *ids = NULL;
    int64_t n = 0;
    /* A model with ids reads PAIRS's ids through its maps (unseen ones past its shape). */
    cli_names names = {mf_saved_model_user_ids(saved), mf_saved_model_item_ids(saved), 0, NULL, 0};
    int rc = names.users || names.items
                 ? cli_read_named_ids("predict", a->pairs, 2, &a->common, &names, &ids, &n)
                 : cli_read_ids("predict", a->pairs, 2, base, &ids, &n);
    cli_names_free(&names);
    float *out = rc == CLI_OK ? malloc((size_t)(n ? n : 1) * sizeof *out) : NULL;
    int32_t *user = rc == CLI_OK ? malloc((size_t)(n ? n : 1) * sizeof *user) : NULL;
    int32_t *item = rc == CLI_OK ? malloc((size_t)(n ? n : 1) * sizeof *item) : NULL;
    if (rc == CLI_OK && (!out || !user || !item)) {
        cli_error("predict", "out of host memory for %lld pairs", (long long)n);
        rc = CLI_FAILED;
    }
    int64_t unseen = 0;
    for (int64_t p = 0; rc == CLI_OK && p < n; p++) {
        user[p] = ids[2 * p], item[p] = ids[2 * p + 1];
        unseen += user[p] >= m.users || item[p] >= m.items;
    }
    if (rc == CLI_OK && mf_predict_pairs(ctx, &m, n, user, item, out) != MF_OK) {
        cli_error("predict", "%s", mf_ctx_last_error(ctx));
        rc = CLI_FAILED;
    }
    const bool lines = rc == CLI_OK && (a->out || !a->common.json);
    if (lines)
        rc = write_lines(a->out, out, n);
    if (rc == CLI_OK && (a->out || a->common.json)) {
        cli_out o;
        cli_out_begin(&o, a->common.json);
        cli_out_str(&o, "model", a->model);
        cli_out_str(&o, "algorithm", mf_saved_model_algorithm(saved));
        cli_out_int(&o, "users", m.users);
        cli_out_int(&o, "items", m.items);
        cli_out_int(&o, "rank", m.k);
        cli_out_int(&o, "pairs", n);
        cli_out_int(&o, "unseen pairs", unseen);
        if (a->out)
            cli_out_str(&o, "output", a->out);
        else
            cli_out_floats(&o, "predictions", out, n);
        cli_out_end(&o);
    }
    free(ids), free(user), free(item), free(out);
    mf_saved_model_destroy(saved);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    predict_args a;
    const int parsed = parse(argc, argv, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    const char *const inputs[] = {a.model, a.pairs}, *const outputs[] = {a.out};
    const int out_rc = cli_check_outputs("predict", inputs, 2, outputs, 1);
    if (out_rc != CLI_OK)
        return out_rc;
    mf_ctx *ctx = cli_make_ctx("predict", &a.common);
    if (!ctx)
        return CLI_FAILED;
    const int rc = predict(ctx, &a);
    mf_ctx_destroy(ctx);
    return rc;
}
