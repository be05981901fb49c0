/* mfact recommend --model: top-N lists from a saved model (mf_model_load, mf_recommend),
 * without training: for every user of the model or those of --users FILE, the items of
 * --exclude FILE (the training interactions, which the model file does not hold) left out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "id_lines.h"
#include "model_file.h"
#include "options.h"
#include "outputs.h"
#include "recommendations.h"
#include "test_set.h"

typedef struct rec_args {
    cli_common common;
    const char *model, *users, *exclude, *out;
    long long top;
} rec_args;

static const char about[] =
    "Writes the top N items of each user by the model file MODEL (written by mfact als, sgd or "
    "ials --save-model), as 'user item score' lines, to --output FILE (default standard "
    "output), as mfact recommend does after training. Users and items are named as the "
    "training file named them: by its ids when it was read with --user-col/--item-col or --ids "
    "(the model keeps them), else by index in its base. A user the model has not seen gets the "
    "items of the highest mean + item bias. Without --exclude nothing is left out, not even the "
    "training items, which the model file does not hold. Ids in both files are numbered as the "
    "training file was (the model records its index base; --index-base overrides).";

/* 0 parsed, 1 help printed, -1 a usage error (printed). */
static int parse(int argc, char **argv, rec_args *a)
{
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->common.duplicates = CLI_DUP_SUM; /* interactions: repeated pairs add up */
    a->top = 10;
    const cli_opt own[] = {
        CLI_OPT_STR("--model", &a->model, "MODEL", "the model file"),
        CLI_OPT_STR("--users", &a->users, "FILE",
                    "the users, one id a line (default every user of the model)"),
        CLI_OPT_STR("--exclude", &a->exclude, "FILE",
                    "interactions (user item lines, as the training file) whose items are left "
                    "out of their user's list"),
        CLI_OPT_INT("--top", &a->top, 1, 100000, "N", "items per user"),
        CLI_OPT_STR("--output", &a->out, "FILE", "write the lists to FILE"),
    };
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {
        "recommend", "recommend --model MODEL [options]",          about, &g, 1, NULL,
        0,           "with --model nothing is trained, so no FILE"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r != 0)
        return r;
    if (!a->model) {
        cli_error("recommend", "--model needs a MODEL file");
        return -1;
    }
    return 0;
}

/* --exclude FILE as the model's users x items, numbered as the model says: by its ids
 * when it has them (users and items it lacks exclude nothing, and are dropped). */
static int read_exclude(mf_ctx *ctx, const rec_args *a, const mf_model *m, int base,
                        const cli_names *names, mf_sparse **out)
{
    mf_read_opts ro;
    cli_read_opts(&a->common, CLI_DUP_SUM, &ro);
    if (!names->users)
        ro.cols = m->items;
    if (ro.index_base < 0 && base >= 0 && !cli_is_matrix_market(a->exclude, ro.format))
        ro.index_base = base;
    ro.row_ids = names->users, ro.col_ids = names->items;
    if (names->users && !ro.row_column && !ro.row_field)
        ro.map_ids = 1;
    mf_sparse *full = NULL;
    mf_status st = mf_sparse_read(ctx, names->users ? &full : out, a->exclude, &ro);
    if (st == MF_OK && full) {
        int32_t rows;
        mf_sparse_shape(full, &rows, NULL, NULL);
        st = cli_test_split(ctx, full, rows < m->users ? rows : m->users, m->items, out);
        cli_test_release();
    }
    if (st != MF_OK) {
        cli_error("recommend", "%s", mf_ctx_last_error(ctx));
        return CLI_FAILED;
    }
    return CLI_OK;
}

static int recommend(mf_ctx *ctx, const rec_args *a)
{
    mf_saved_model *saved;
    mf_model m;
    int base;
    if (cli_load_model("recommend", ctx, a->model, a->common.index_base, &saved, &m, &base) != 0)
        return CLI_FAILED;
    int32_t *users = NULL;
    int64_t n = 0;
    mf_sparse *exclude = NULL;
    /* Users and items as the training file named them: its ids, or its index base. */
    cli_names names = {mf_saved_model_user_ids(saved), mf_saved_model_item_ids(saved),
                       base > 0 ? base : 0, NULL, 0};
    int rc = CLI_OK;
    if (a->users && names.users)
        rc = cli_read_named_ids("recommend", a->users, 1, &a->common, &names, &users, &n);
    else if (a->users)
        rc = cli_read_ids("recommend", a->users, 1, base, &users, &n);
    if (rc == CLI_OK && a->exclude)
        rc = read_exclude(ctx, a, &m, base, &names, &exclude);
    static const int32_t none[1] = {0}; /* --users FILE that lists nobody: no lists */
    if (rc == CLI_OK)
        rc = cli_write_recommendations("recommend", ctx, a->out, &m,
                                       a->users && !users ? none : users, n, exclude, (int)a->top,
                                       &names);
    cli_names_free(&names);
    if (rc == CLI_OK && a->out) {
        cli_out o;
        cli_out_begin(&o, a->common.json);
        cli_out_str(&o, "model", a->model);
        cli_out_str(&o, "algorithm", mf_saved_model_algorithm(saved));
        cli_out_int(&o, "users", a->users ? n : m.users);
        cli_out_int(&o, "top", a->top);
        cli_out_str(&o, "output", a->out);
        cli_out_end(&o);
    }
    free(users);
    mf_sparse_destroy(exclude);
    mf_saved_model_destroy(saved);
    return rc;
}

int cmd_recommend_model(int argc, char **argv)
{
    rec_args a;
    const int parsed = parse(argc, argv, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    const char *const inputs[] = {a.model, a.users, a.exclude}, *const outputs[] = {a.out};
    const int out_rc = cli_check_outputs("recommend", inputs, 3, outputs, 1);
    if (out_rc != CLI_OK)
        return out_rc;
    mf_ctx *ctx = cli_make_ctx("recommend", &a.common);
    if (!ctx)
        return CLI_FAILED;
    const int rc = recommend(ctx, &a);
    mf_ctx_destroy(ctx);
    return rc;
}
