/* What the ratings subcommands (als, sgd) share: reading the ratings with their held-out
 * part, and writing factors as text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gpus.h"
#include "id_lines.h"
#include "launched.h"
#include "options.h"
#include "outputs.h"
#include "test_set.h"

/* Whether rating (row, col) is held out: a seeded hash of its coordinates, so that the split
 * does not depend on the order of the file's lines. The library's tuning split
 * (src/core/sparse_split.c) and bench/quality.py use the same rule: splitmix64's finalizer
 * of ((row << 32) | col) ^ (seed * golden ratio), its top 53 bits as a uniform below
 * `fraction`. */
static int held_out(int32_t row, int32_t col, uint64_t seed, double fraction)
{
    uint64_t z = (((uint64_t)(uint32_t)row << 32) | (uint32_t)col) ^ (seed * 0x9E3779B97F4A7C15ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 < fraction;
}

/* Hold out a seeded fraction of R: *train and *test share R's shape. */
static mf_status split(mf_ctx *ctx, mf_sparse *R, double fraction, uint64_t seed, mf_sparse **train,
                       mf_sparse **test)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(R, &rows, &cols, &nnz);
    size_t n = (size_t)(nnz ? nnz : 1);
    int32_t *r = malloc(n * sizeof *r), *c = malloc(n * sizeof *c);
    int32_t *r2 = malloc(n * sizeof *r2), *c2 = malloc(n * sizeof *c2);
    float *v = malloc(n * sizeof *v), *v2 = malloc(n * sizeof *v2);
    mf_status st = r && c && r2 && c2 && v && v2 ? MF_OK : MF_ERR_OUT_OF_MEMORY;
    if (st == MF_OK)
        st = mf_sparse_get_coo(R, r, c, v, MF_MEMORY_HOST);
    int64_t a = 0, b = 0;
    for (int64_t p = 0; st == MF_OK && p < nnz; p++) {
        if (held_out(r[p], c[p], seed, fraction))
            r2[b] = r[p], c2[b] = c[p], v2[b] = v[p], b++;
        else
            r[a] = r[p], c[a] = c[p], v[a] = v[p], a++;
    }
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, train, rows, cols, a, r, c, v, MF_MEMORY_HOST, 0);
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, test, rows, cols, b, r2, c2, v2, MF_MEMORY_HOST, 0);
    if (st == MF_OK && mf_sparse_is_part(R) == 1) /* a rank's part: its halves are parts too */
        st = mf_sparse_set_part(*train, 1) == MF_OK ? mf_sparse_set_part(*test, 1) : st;
    free(r), free(c), free(r2), free(c2), free(v), free(v2);
    return st;
}

bool cli_is_matrix_market(const char *path, mf_format format)
{
    if (format != MF_FORMAT_AUTO)
        return format == MF_FORMAT_MATRIX_MARKET;
    /* As mf_sparse_read's detection: the banner (after a UTF-8 byte-order mark), else the
     * name's .mtx. */
    const size_t len = strlen(path);
    if (len >= 4 && !strcmp(path + len - 4, ".mtx"))
        return true;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    FILE *f = fopen(path, "rb");
    char head[18] = {0};
    const size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
    if (f)
        fclose(f);
    const size_t skip = n >= 3 && !memcmp(head, "\xEF\xBB\xBF", 3) ? 3 : 0;
    return n >= skip + 14 && !strncmp(head + skip, "%%MatrixMarket", 14);
}

/* The index base the ratings file was read with (a split's halves, built from arrays, no
 * longer know it). */
static int ratings_base;

int cli_ratings_base(void)
{
    return ratings_base;
}

/* The ratings file as read, for its id maps: the training matrix itself, or, when a
 * fraction was split off (the halves, built from arrays, have no maps), the whole file,
 * kept (owned) until the command ends. */
static const mf_sparse *source;
static mf_sparse *source_owned;

const mf_id_map *cli_user_ids(void)
{
    return mf_sparse_row_ids(source);
}

const mf_id_map *cli_item_ids(void)
{
    return mf_sparse_col_ids(source);
}

static void release_source(void)
{
    mf_sparse_destroy(source_owned);
    source = source_owned = NULL;
}

mf_status cli_read_ratings(mf_ctx *ctx, const cli_common *common, const char *file,
                           const char *test_file, double fraction, mf_sparse **train,
                           mf_sparse **test)
{
    mf_sparse *all = NULL;
    *train = *test = NULL;
    mf_read_opts ro;
    cli_read_opts(common, CLI_DUP_LAST, &ro); /* a rating entered again replaces the earlier one */
    if (common->split_input && cli_launched_size() > 1) /* this rank's part of FILE */
        ro.part_index = cli_launched_rank(), ro.part_count = cli_launched_size();
    mf_status st = mf_sparse_read(ctx, &all, file, &ro);
    if (st != MF_OK)
        return st;
    ratings_base = mf_sparse_index_base(all);
    release_source();
    source = all;
    if (fraction > 0) {
        st = split(ctx, all, fraction, common->seed, train, test);
        if (mf_sparse_row_ids(all))
            source_owned = all;
        else
            mf_sparse_destroy(all), source = NULL;
        return st;
    }
    *train = all;
    if (!test_file)
        return MF_OK;
    /* The test set is numbered as the training set: detected on its own, a test file that
     * happens to hold no 0 index would be taken as 1-based and every entry shifted. A
     * MatrixMarket test file keeps its own convention (1-based by definition). */
    if (ro.index_base < 0 && !cli_is_matrix_market(test_file, ro.format))
        ro.index_base = mf_sparse_index_base(all);
    /* With ids, the test file is read with FILE's maps: its known users and items keep
     * their indices and the unseen follow, past the training shape (cli_test_split). */
    ro.row_ids = mf_sparse_row_ids(all);
    ro.col_ids = mf_sparse_col_ids(all);
    /* Read with a shape of its own: users or items the training file lacks are unseen,
     * predicted from what is known (cli_out_test), never an error. */
    mf_sparse *full = NULL;
    ro.rows = ro.cols = 0; /* --rows/--cols are FILE's: the test file's shape is its own */
    ro.part_index = ro.part_count = 0; /* every rank measures the whole test file */
    st = mf_sparse_read(ctx, &full, test_file, &ro);
    if (st != MF_OK)
        return st;
    int32_t users, items;
    mf_sparse_shape(all, &users, &items, NULL);
    return cli_test_split(ctx, full, users, items, test);
}

void cli_model_init(cli_model_args *m, double lambda)
{
    memset(m, 0, sizeof *m);
    m->biases = 1;
    m->lambda_bias = -1.0;
    m->tune = MF_TUNE_NONE;
    m->lambda = lambda;
    m->gpus = 1;
}

cli_group cli_model_group(cli_model_args *m, const char *lambda_bias, cli_opt out[CLI_MODEL_OPTS])
{
    const cli_opt t[] = {
        CLI_OPT_REAL("--lambda", &m->lambda, 0, INFINITY, 0, "L", "the factors' regularization"),
        CLI_OPT_SET("--no-biases", &m->biases, 0,
                    "fit U V^T alone (the model is otherwise mean + user bias + item bias + "
                    "U_u . V_i)"),
        {.name = "--lambda-bias",
         .kind = CLI_DOUBLE,
         .dest = &m->lambda_bias,
         .lo = 0,
         .hi = INFINITY,
         .meta = "L",
         .help = "the biases' regularization",
         .dflt = lambda_bias},
        CLI_OPT_OR("--auto", &m->tune, MF_TUNE_LAMBDA,
                   "hold out 10% of FILE's training ratings, fit lambda x 1/4, 1/2, 1, 2, 4 on "
                   "the rest, keep the best and refit on all of them; the output says what it "
                   "chose"),
        CLI_OPT_OR("--auto-rank", &m->tune, MF_TUNE_LAMBDA | MF_TUNE_RANK,
                   "--auto that also tries rank/2 and rank/4"),
        CLI_OPT_STR("--save-model", &m->save_model, "FILE",
                    "write the fitted model (factors, mean, biases, options) as a model file "
                    "for mfact predict and mfact recommend --model"),
        CLI_OPT_STR("--test", &m->test_file, "FILE", "measure the test RMSE on FILE's ratings"),
        CLI_OPT_REAL("--test-fraction", &m->test_fraction, 0, 1, CLI_ABOVE | CLI_BELOW, "F",
                     "measure it on a fraction F of FILE's ratings held out by a hash of their "
                     "position and --seed"),
        CLI_OPT_STR("--output-u", &m->out_u, "FILE", "write U as text, one row per line"),
        CLI_OPT_STR("--output-v", &m->out_v, "FILE", "write V as text, one row per line"),
        CLI_OPT_INT("--gpus", &m->gpus, 1, CLI_MAX_GPUS, "N",
                    "one fit over N GPUs (--device and the N - 1 after it); the factors are "
                    "those of one GPU"),
    };
    _Static_assert(CLI_COUNT(t) <= CLI_MODEL_OPTS, "CLI_MODEL_OPTS is too small");
    memcpy(out, t, sizeof t);
    return (cli_group){"model options (als and sgd)", out, CLI_COUNT(t)};
}

int cli_ratings_main(const cli_ratings_cmd *c, int argc, char **argv, cli_common *common,
                     const char **file, cli_model_args *m, double lambda, const void *args)
{
    cli_common_init(common);
    cli_model_init(m, lambda);
    cli_opt model[CLI_MODEL_OPTS];
    const cli_group groups[] = {{"options", c->own, c->n_own},
                                cli_model_group(m, c->lambda_bias, model)};
    const cli_spec s = {c->cmd, c->usage, c->about, groups, 2, file, 1, "one FILE at most"};
    const int parsed = cli_parse_command(&s, common, argc, argv);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    if (cli_model_check(c->cmd, *file, m) < 0)
        return CLI_USAGE;
    const char *const inputs[] = {*file, m->test_file}, *const outputs[] = {m->out_u, m->out_v,
                                                                            m->save_model};
    const int out_rc = cli_check_outputs(c->cmd, inputs, 2, outputs, 3);
    if (out_rc != CLI_OK)
        return out_rc;
    return cli_run_on_ratings(c->cmd, common, *file, m->test_file, m->test_fraction, c->run, args);
}

int cli_model_check(const char *cmd, const char *file, const cli_model_args *m)
{
    if (!file) {
        cli_error(cmd, "a ratings FILE is required");
        return -1;
    }
    if (m->test_file && m->test_fraction > 0) {
        cli_error(cmd, "--test and --test-fraction exclude each other");
        return -1;
    }
    return 0;
}

void cli_out_model(cli_out *out, const cli_model_args *m, const mf_biases *b, double lambda,
                   int rank, double validation_rmse)
{
    cli_out_str(out, "biases", m->biases ? "on" : "off");
    if (m->biases)
        cli_out_num(out, "mean", b->mean);
    cli_out_num(out, "lambda", lambda);
    cli_out_int(out, "fitted rank", rank);
    if (m->tune)
        cli_out_num(out, "validation RMSE", validation_rmse);
}

/* A factor's row as text: its k floats. */
typedef struct factor_rows {
    const float *X;
    long long k;
} factor_rows;

static void factor_row(FILE *f, int32_t r, const void *user)
{
    const factor_rows *x = user;
    for (long long t = 0; t < x->k; t++)
        fprintf(f, t ? " %.7g" : "%.7g", (double)x->X[(size_t)r * x->k + t]);
}

/* rows x k floats as text, one row per line; each line starts with its row's id when the
 * ratings file had ids (ids: NULL otherwise). */
static int write_rows(const char *cmd, const char *path, const float *X, int32_t rows, long long k,
                      const mf_id_map *ids)
{
    const factor_rows x = {X, k};
    return cli_write_id_lines(cmd, path, rows, ids, factor_row, &x);
}

int cli_write_factors(const char *cmd, const char *out_u, const char *out_v, const float *U,
                      const float *V, const mf_sparse *train, long long k)
{
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    if (cli_launched_rank() != 0) /* rank 0 writes what every rank holds */
        return 0;
    /* The maps when train is the ratings file's rows and columns (complete --synthetic's
     * planted matrix has none: its rows are written as they are). */
    const bool ids = mf_id_map_count(cli_user_ids()) == users &&
                     mf_id_map_count(cli_item_ids()) == items && cli_user_ids();
    if (out_u && write_rows(cmd, out_u, U, users, k, ids ? cli_user_ids() : NULL) != 0)
        return -1;
    if (out_v && write_rows(cmd, out_v, V, items, k, ids ? cli_item_ids() : NULL) != 0)
        return -1;
    return 0;
}

void cli_out_ratings(cli_out *out, mf_ctx *ctx, const mf_sparse *train, const mf_sparse *test,
                     long long rank)
{
    int32_t users, items;
    int64_t nnz, ntest = 0;
    mf_sparse_shape(train, &users, &items, &nnz);
    if (test)
        mf_sparse_shape(test, NULL, NULL, &ntest);
    cli_out_str(out, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    cli_out_int(out, "users", users);
    cli_out_int(out, "items", items);
    cli_out_int(out, "train ratings", nnz);
    cli_out_int(out, "test ratings", ntest);
    if (cli_test_unseen() > 0) /* outside the training shape: in the test RMSE of als, sgd */
        cli_out_int(out, "test ratings unseen", cli_test_unseen());
    cli_out_int(out, "rank", rank);
}

void cli_print_progress(const char *unit, const mf_progress *p)
{
    if (cli_quiet()) /* a launched rank other than 0 */
        return;
    fprintf(stderr, "%s %d: train RMSE %.4f", unit, p->iteration, p->train_rmse);
    if (!isnan(p->test_rmse))
        fprintf(stderr, ", test RMSE %.4f", p->test_rmse);
    fprintf(stderr, " (%.2f s)\n", p->seconds);
}

int cli_run_on_ratings(const char *cmd, const cli_common *common, const char *file,
                       const char *test_file, double fraction, cli_ratings_run run,
                       const void *args)
{
    mf_ctx *ctx = cli_make_group_ctx(cmd, common);
    if (!ctx)
        return CLI_FAILED;
    mf_sparse *train = NULL, *test = NULL;
    mf_status st = cli_read_ratings(ctx, common, file, test_file, fraction, &train, &test);
    int rc = CLI_FAILED;
    if (st != MF_OK)
        cli_error(cmd, "%s", mf_ctx_last_error(ctx));
    else
        rc = run(ctx, args, train, test);
    mf_sparse_destroy(train);
    mf_sparse_destroy(test);
    cli_test_release();
    source = NULL;    /* train was the file itself, or ... */
    release_source(); /* ... the whole file was kept beside the split */
    mf_ctx_destroy(ctx);
    return rc;
}
