/* The mfact command-line tool: what its subcommands share. */
#ifndef MFACT_CLI_H
#define MFACT_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "mfact/mfact.h"

/* Exit statuses. */
enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

/* The flags every algorithm subcommand takes. */
typedef struct cli_common {
    int backend; /* mf_backend */
    long long device, seed, threads;
    bool json;
    bool help;
    /* How a FILE argument is read: --format (mf_format), --index-base (-1: auto) and
     * --duplicates (CLI_DUP_*, or -1: the command's rule, cli_read_opts). */
    int format;
    int index_base;
    int duplicates;
    long long rows, cols; /* --rows, --cols: FILE's shape (0: from the file) */
    /* Ids as users have them: --ids, and --user-col/--item-col/--rating-col (a header name,
     * or a 1-based position when digits alone); any of them maps FILE's ids. */
    bool ids;
    const char *user_col, *item_col, *rating_col;
    /* --split-input: under a launcher, each rank keeps every N-th entry of FILE (N ranks)
     * and the fit gathers them (mf_read_opts.part_count): no rank holds all the ratings. */
    bool split_input;
    /* --log: the library's messages at or above this level to stderr (mf_log_level; 0:
     * none), e.g. info: where a fit's time goes. */
    int log_level;
} cli_common;

/* What a repeated (row, col) entry of a file becomes, one rule for every command
 * (--duplicates): the last one kept (ratings: a rating entered again replaces the earlier
 * one), the values summed (interactions: plays add up), or an error naming both lines. */
enum { CLI_DUP_LAST = 0, CLI_DUP_SUM = 1, CLI_DUP_ERROR = 2 };

void cli_common_init(cli_common *c);
/* How far a run with an iteration cap and an optional time limit (0: none) has come, in
 * [0, 1]: for a progress line. */
double cli_run_fraction(int done, long long most, double seconds, double time_limit);
/* mf_read_opts from the common flags: --format, --index-base, and --duplicates, or the
 * command's own rule `dflt` (CLI_DUP_*) when --duplicates is not given. */
void cli_read_opts(const cli_common *c, int dflt, mf_read_opts *ro);
/* The first id option given (--user-col, --item-col, --rating-col, --ids), or NULL: for
 * commands to refuse one where there is no FILE whose ids it could map. */
const char *cli_id_option(const cli_common *c);
/* The id maps of the ratings file that cli_read_ratings read (NULL: it held indices). */
const mf_id_map *cli_user_ids(void);
const mf_id_map *cli_item_ids(void);
/* How the tool names users and items in what it writes: by the maps when there are any,
 * else by index + base; unseen[i] names index count + i (ids that a model has not seen,
 * read from a file). */
typedef struct cli_names {
    const mf_id_map *users, *items;
    int base;
    char **unseen;
    int64_t n_unseen;
} cli_names;
/* The name of user (side 0) or item (side 1) `index` into buf. Returns buf or the map's id. */
const char *cli_name(const cli_names *n, int side, int32_t index, char *buf, size_t cap);
/* Why the last context made with backend auto is a CPU one ("" when it is not). */
const char *cli_cpu_reason(void);
/* A context from the common flags; prints the failure and returns NULL. */
mf_ctx *cli_make_ctx(const char *cmd, const cli_common *c);
/* "mfact CMD: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parse "ROWS,COLS,DENSITY" (--shape): positive sizes that fit int32 and a density in
 * (0, 1]; prints the problem and returns false otherwise. */
bool cli_parse_shape(const char *cmd, const char *spec, long long *rows, long long *cols,
                     double *density);
/* Parse a whole decimal of type long long / double, or fail. */
bool cli_parse_ll(const char *s, long long *out);
bool cli_parse_double(const char *s, double *out);
/* The index of s in names[0..n), or -1: for options whose words are an enum's values in
 * order. */
int cli_choice(const char *s, const char *const *names, int n);

/* Results as labelled lines ("test RMSE 0.9247") or, with --json, one JSON object whose
 * keys are the labels with '_' for spaces. */
typedef struct cli_out {
    bool json;
    int items;
} cli_out;

void cli_out_begin(cli_out *o, bool json);
void cli_out_str(cli_out *o, const char *label, const char *value);
void cli_out_int(cli_out *o, const char *label, long long value);
void cli_out_num(cli_out *o, const char *label, double value);
/* n floats: a JSON array, or without --json one labelled line each. */
void cli_out_floats(cli_out *o, const char *label, const float *v, int64_t n);
void cli_out_end(cli_out *o);
/* The lines every ratings subcommand prints first: backend, users, items, train and test
 * ratings, rank. */
void cli_out_ratings(cli_out *out, mf_ctx *ctx, const mf_sparse *train, const mf_sparse *test,
                     long long rank);

/* A progress line on a terminal (stderr), shown only once a task has run for a second. */
typedef struct cli_progress {
    double start, last;
    bool shown, enabled;
} cli_progress;

void cli_progress_begin(cli_progress *p);
void cli_progress_update(cli_progress *p, const char *what, double fraction);
void cli_progress_end(cli_progress *p);
double cli_seconds(void);

/* The ratings of FILE (read as the common flags say), and a held-out part: test_file's
 * ratings (read with FILE's shape and FILE's index base), or a random fraction of FILE's drawn with
 * the common seed (0 < fraction < 1), or none (*test NULL). On failure the message is on ctx and
 * both handles are NULL or the caller's to destroy. */
mf_status cli_read_ratings(mf_ctx *ctx, const cli_common *common, const char *file,
                           const char *test_file, double fraction, mf_sparse **train,
                           mf_sparse **test);
/* Whether path is read as MatrixMarket: the format given, or with auto a regular file that
 * opens with the banner (a stream is not peeked at: reading would consume it). */
bool cli_is_matrix_market(const char *path, mf_format format);
/* The index base (0 or 1) that cli_read_ratings read the ratings file with. */
int cli_ratings_base(void);
/* The body of a ratings subcommand once its arguments are parsed: a context from `common`,
 * the ratings read as cli_read_ratings does, then run(ctx, args, train, test); everything
 * released after. Returns run's code, or CLI_FAILED (with the message printed). */
typedef int (*cli_ratings_run)(mf_ctx *ctx, const void *args, mf_sparse *train, mf_sparse *test);
int cli_run_on_ratings(const char *cmd, const cli_common *common, const char *file,
                       const char *test_file, double fraction, cli_ratings_run run,
                       const void *args);
/* Write U and V of a factorization of train as text, one row per line, to the files given
 * (NULL: skip); prints the failure and returns -1. */
int cli_write_factors(const char *cmd, const char *out_u, const char *out_v, const float *U,
                      const float *V, const mf_sparse *train, long long k);
/* The options als and sgd share (one table, cli_model_group): the model (--no-biases,
 * --lambda-bias L, --auto tuning lambda on a validation split, --auto-rank lambda and rank,
 * --save-model FILE), --lambda, the test set (--test FILE, --test-fraction F), the factors'
 * files (--output-u, --output-v) and --gpus N. */
typedef struct cli_model_args {
    int biases;             /* 1 unless --no-biases */
    double lambda_bias;     /* < 0: the library's default */
    unsigned tune;          /* mf_tune flags */
    const char *save_model; /* the model file to write, or NULL */
    double lambda, test_fraction;
    const char *test_file, *out_u, *out_v;
    long long gpus;
} cli_model_args;
/* Defaults: biases on, the library's lambda_bias, no tuning, lambda `lambda`, one GPU. */
void cli_model_init(cli_model_args *m, double lambda);
/* After parsing: FILE given and at most one test set; prints the problem and returns -1. */
int cli_model_check(const char *cmd, const char *file, const cli_model_args *m);
/* What the run fitted: biases on or off, the mean, lambda and rank, and with tuning the
 * validation RMSE. */
void cli_out_model(cli_out *out, const cli_model_args *m, const mf_biases *b, double lambda,
                   int rank, double validation_rmse);

/* "epoch 3: train RMSE 0.8123, test RMSE 0.9012 (0.41 s)" on stderr. */
void cli_print_progress(const char *unit, const mf_progress *p);

int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_sddmm(int argc, char **argv);
int cmd_als(int argc, char **argv);
int cmd_bmf(int argc, char **argv);
int cmd_sgd(int argc, char **argv);
int cmd_complete(int argc, char **argv);
int cmd_ials(int argc, char **argv);
int cmd_recommend(int argc, char **argv);
int cmd_recommend_model(int argc, char **argv);
int cmd_predict(int argc, char **argv);

#endif
