/* mfact bmf: Boolean matrix factorization (mf_bmf_run) of a 0/1 matrix file, the report
 * printed, and the factors optionally written as text (one line per row of A or column of
 * B, k characters '0'/'1', after the row's id when the file had ids) or as the packed words
 * (--packed). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "id_lines.h"
#include "options.h"
#include "outputs.h"

typedef struct bmf_args {
    cli_common common;
    const char *file, *out_a, *out_b;
    long long rank, instances, max_sweeps, patience;
    double time_limit, weight, weight_decay, temperature;
    int init; /* mf_bmf_init */
    bool packed, verbose;
} bmf_args;

static const char about[] =
    "Factorizes the Boolean matrix of FILE (a .in file, MatrixMarket pattern, or pairs 'row "
    "col'; every listed entry is a 1) as A o B of rank K, running N instances from different "
    "seeds and keeping the best. Stops after --max-sweeps, --patience sweeps without "
    "improvement at the final weight, or --time-limit seconds. On a terminal a line on stderr "
    "shows the progress of the Asso start and of the search. --time-limit is checked after each "
    "half-sweep of an instance (CPU) or each sweep (GPU): a run ends within one sweep of it; "
    "the Asso start checks it after each of its rounds and keeps the rounds done. With ids "
    "(--ids, or --user-col and --item-col: FILE's rows and columns named by integer or string "
    "ids) each line of --output-a (-b) starts with its row's (column's) id and a space.";

static int parse(int argc, char **argv, bmf_args *a)
{
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->rank = 20, a->instances = 16, a->max_sweeps = 1000, a->patience = 30;
    a->init = MF_BMF_INIT_AUTO;
    static const int inits[] = {MF_BMF_INIT_AUTO, MF_BMF_INIT_SAMPLE, MF_BMF_INIT_RANDOM,
                                MF_BMF_INIT_ASSO};
    const cli_opt own[] = {
        CLI_OPT_INT("--rank", &a->rank, 1, 1024, "K", "the factors' rank"),
        CLI_OPT_INT("--instances", &a->instances, 1, 1024, "N", "instances from different seeds"),
        CLI_OPT_INT("--max-sweeps", &a->max_sweeps, 1, 100000000, "N", "sweeps at most"),
        CLI_OPT_INT("--patience", &a->patience, 0, 100000000, "N",
                    "sweeps without improvement at the final weight before stopping"),
        CLI_OPT_REAL("--time-limit", &a->time_limit, 0, INFINITY, 0, "S", "seconds (0: none)"),
        {.name = "--weight",
         .kind = CLI_DOUBLE,
         .dest = &a->weight,
         .hi = INFINITY,
         .meta = "W",
         .help = "the starting weight of false negatives",
         .dflt = "from the data"},
        {.name = "--weight-decay",
         .kind = CLI_DOUBLE,
         .dest = &a->weight_decay,
         .hi = INFINITY,
         .meta = "D",
         .help = "the weight's decay per sweep",
         .dflt = "0.98"},
        CLI_OPT_REAL("--temperature", &a->temperature, 0, INFINITY, 0, "T",
                     "turns on Metropolis moves (0: none)"),
        CLI_OPT_CHOICE("--init", &a->init, "auto|sample|random|asso", inits,
                       "the start: auto starts from Asso's greedy cover when it is estimated to "
                       "take at most ~2 s, else from sampled rows"),
        CLI_OPT_STR("--output-a", &a->out_a, "FILE",
                    "write A, one line of k '0'/'1' a row (after its id, with ids)"),
        CLI_OPT_STR("--output-b", &a->out_b, "FILE", "write B, one line a column"),
        CLI_OPT_FLAG("--packed", &a->packed,
                     "write the factors as the 64-bit words of mfact's bit order"),
        CLI_OPT_FLAG("--verbose", &a->verbose,
                     "print every round of the start and every sweep instead of the progress line"),
    };
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {"bmf", "bmf FILE [options]", about, &g, 1, &a->file, 1, "one FILE at most"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r == 0 && !a->file) {
        cli_error("bmf", "a matrix FILE is required");
        return -1;
    }
    if (r == 0 && a->common.rating_col) {
        cli_error("bmf", "--rating-col: bmf reads no values (every listed pair is a 1)");
        return -1;
    }
    if (r == 0 && a->packed && (a->out_a || a->out_b) && cli_id_option(&a->common)) {
        cli_error("bmf",
                  "%s with --packed: packed words carry no ids; the text factors start "
                  "each line with its id",
                  cli_id_option(&a->common));
        return -1;
    }
    return r;
}

static int on_sweep(void *user, const mf_bmf_progress *p)
{
    (void)user;
    if (p->sweep == 0) { /* building the Asso start */
        fprintf(stderr, "Asso start: %.0f%% of its rounds (%.2f s)\n", 100.0 * p->start_done,
                p->seconds);
        return 0;
    }
    fprintf(stderr, "sweep %d: error %" PRId64 " (relative %.4e), F1 %.4f, weight %.3f (%.2f s)\n",
            p->sweep, p->error, p->relative_error, p->f1, p->weight, p->seconds);
    return 0;
}

/* Without --verbose, on a terminal: one line kept up to date, so that a long run is seen
 * to be running. */
typedef struct bmf_watch {
    cli_progress line;
    const bmf_args *a;
} bmf_watch;

static int on_sweep_line(void *user, const mf_bmf_progress *p)
{
    bmf_watch *w = user;
    char what[96];
    if (p->sweep == 0) {
        snprintf(what, sizeof what, "Asso start: %.0f%% of its rounds", 100.0 * p->start_done);
        cli_progress_update(&w->line, what, p->start_done);
        return 0;
    }
    snprintf(what, sizeof what, "sweep %d: relative error %.4e, F1 %.4f", p->sweep,
             p->relative_error, p->f1);
    cli_progress_update(&w->line, what,
                        cli_run_fraction(p->sweep, w->a->max_sweeps, p->seconds, w->a->time_limit));
    return 0;
}

/* A factor's row as text: k characters '0'/'1'. */
typedef struct bit_rows {
    const uint64_t *X;
    int k;
} bit_rows;

static void bit_row(FILE *f, int32_t i, const void *user)
{
    const bit_rows *b = user;
    const uint64_t *x = b->X + (size_t)i * ((b->k + 63) / 64);
    for (int l = 0; l < b->k; l++)
        fputc(x[l / 64] >> (l % 64) & 1 ? '1' : '0', f);
}

/* A factor's lines as text (each starting with its id when FILE had ids: ids, else NULL)
 * or its packed words. */
static int write_factor(const char *path, const uint64_t *X, int32_t lines, int k, bool packed,
                        const mf_id_map *ids)
{
    if (!packed) {
        const bit_rows b = {X, k};
        return cli_write_id_lines("bmf", path, lines, ids, bit_row, &b);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        cli_error("bmf", "cannot write %s", path);
        return -1;
    }
    fwrite(X, sizeof *X, (size_t)lines * ((k + 63) / 64), f);
    if (fclose(f) != 0) {
        cli_error("bmf", "cannot write %s", path);
        return -1;
    }
    return 0;
}

static int run(mf_ctx *ctx, const bmf_args *a, mf_sparse *C)
{
    int32_t rows, cols;
    int64_t ones;
    mf_sparse_shape(C, &rows, &cols, &ones);
    int kw = (int)(a->rank + 63) / 64;
    uint64_t *A = calloc((size_t)rows * kw, sizeof *A), *B = calloc((size_t)cols * kw, sizeof *B);
    int rc = CLI_FAILED;
    if (!A || !B) {
        cli_error("bmf", "out of host memory for the factors");
        goto done;
    }
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    o.rank = (int)a->rank, o.instances = (int)a->instances, o.max_sweeps = (int)a->max_sweeps;
    o.patience = (int)a->patience, o.time_limit = a->time_limit;
    o.weight = (float)a->weight, o.weight_decay = (float)a->weight_decay,
    o.temperature = (float)a->temperature, o.init = a->init;
    bmf_watch watch = {.a = a};
    cli_progress_begin(&watch.line);
    if (a->verbose)
        o.progress = on_sweep;
    else if (watch.line.enabled) {
        o.progress = on_sweep_line;
        o.progress_user = &watch;
        if (a->init == MF_BMF_INIT_ASSO || a->init == MF_BMF_INIT_AUTO)
            fprintf(stderr, "mfact bmf: building the %s start (%lld instances, rank %lld)\n",
                    a->init == MF_BMF_INIT_ASSO ? "Asso" : "default", a->instances, a->rank);
    }
    mf_bmf_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep);
    cli_progress_end(&watch.line);
    if (st != MF_OK) {
        cli_error("bmf", "%s", mf_ctx_last_error(ctx));
        goto done;
    }
    if ((a->out_a &&
         write_factor(a->out_a, A, rows, (int)a->rank, a->packed, mf_sparse_row_ids(C)) != 0) ||
        (a->out_b &&
         write_factor(a->out_b, B, cols, (int)a->rank, a->packed, mf_sparse_col_ids(C)) != 0))
        goto done;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_str(&out, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    cli_out_int(&out, "rows", rows);
    cli_out_int(&out, "cols", cols);
    cli_out_int(&out, "ones", ones);
    cli_out_int(&out, "rank", a->rank);
    cli_out_int(&out, "error", rep.error);
    cli_out_num(&out, "relative error", rep.relative_error);
    cli_out_int(&out, "false positives", rep.fp);
    cli_out_int(&out, "false negatives", rep.fn);
    cli_out_num(&out, "precision", rep.precision);
    cli_out_num(&out, "recall", rep.recall);
    cli_out_num(&out, "F1", rep.f1);
    cli_out_int(&out, "sweeps", rep.sweeps);
    /* Say when the clock, not the search, ended the run, and when what it returns is no
     * factorization at all (an all-zero A o B): a number alone read as a result. */
    const bool timed_out = a->time_limit > 0 && rep.seconds >= a->time_limit;
    cli_out_str(&out, "stopped", timed_out ? "time limit" : "search ended");
    if (rep.tp == 0 && rep.fp == 0 && ones > 0)
        cli_error("bmf", "the factors are all zero (A o B has no ones)%s",
                  timed_out ? ": the time limit came before the search found any; raise "
                              "--time-limit"
                            : "");
    cli_out_int(&out, "best instance", rep.best_instance);
    cli_out_num(&out, "seconds", rep.seconds);
    cli_out_end(&out);
    rc = CLI_OK;
done:
    free(A);
    free(B);
    return rc;
}

int cmd_bmf(int argc, char **argv)
{
    bmf_args a;
    const int parsed = parse(argc, argv, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    const char *const outputs[] = {a.out_a, a.out_b};
    const int out_rc = cli_check_outputs("bmf", &a.file, 1, outputs, 2);
    if (out_rc != CLI_OK)
        return out_rc;
    mf_ctx *ctx = cli_make_ctx("bmf", &a.common);
    if (!ctx)
        return CLI_FAILED;
    mf_read_opts ro;
    cli_read_opts(&a.common, CLI_DUP_SUM, &ro); /* a repeated 1 is the same 1 */
    ro.flags |= MF_SPARSE_PATTERN;
    mf_sparse *C = NULL;
    int rc = CLI_FAILED;
    if (mf_sparse_read(ctx, &C, a.file, &ro) != MF_OK)
        cli_error("bmf", "%s", mf_ctx_last_error(ctx));
    else
        rc = run(ctx, &a, C);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
    return rc;
}
