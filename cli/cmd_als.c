/* mfact als: ALS-WR (mf_als_run) on a ratings file, with a held-out part from a second file
 * or split off at random, the train and test RMSE printed after every iteration, and the
 * factors optionally written as text (one row per line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct als_args {
    cli_common common;
    const char *file, *test_file, *out_u, *out_v;
    long long rank, iterations;
    double lambda, test_fraction;
} als_args;

static void als_help(void)
{
    printf("usage: mfact als FILE [--rank K] [--lambda L] [--iterations N]\n"
           "                [--test FILE | --test-fraction F] [--output-u FILE] [--output-v FILE]\n"
           "                [options]\n\n"
           "Factorizes the ratings of FILE (users x items) by ALS-WR: rank K (1..256, default\n"
           "10), weighted regularization L (default 0.05), N sweeps (default 10). The test RMSE\n"
           "is measured on --test FILE, or on a random fraction F of FILE's ratings held out\n"
           "with --seed. Prints the train and test RMSE after every iteration; --output-u and\n"
           "--output-v write the factors as text, one row per line.\n\n%s",
           cli_common_help());
}

static int parse(int argc, char **argv, als_args *a)
{
    cli_common_init(&a->common);
    a->file = a->test_file = a->out_u = a->out_v = NULL;
    a->rank = 10, a->iterations = 10, a->lambda = 0.05, a->test_fraction = 0.0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse("als", argc, argv, &i, &a->common);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--rank") && val) {
            if (!cli_parse_ll(argv[++i], &a->rank) || a->rank < 1 || a->rank > 256) {
                cli_error("als", "--rank takes an integer from 1 to 256");
                return -1;
            }
        } else if (!strcmp(opt, "--lambda") && val) {
            if (!cli_parse_double(argv[++i], &a->lambda) || !(a->lambda >= 0) ||
                !isfinite(a->lambda)) {
                cli_error("als", "--lambda takes a finite number >= 0");
                return -1;
            }
        } else if (!strcmp(opt, "--iterations") && val) {
            if (!cli_parse_ll(argv[++i], &a->iterations) || a->iterations < 1 ||
                a->iterations > 1000000) {
                cli_error("als", "--iterations takes a positive integer");
                return -1;
            }
        } else if (!strcmp(opt, "--test-fraction") && val) {
            if (!cli_parse_double(argv[++i], &a->test_fraction) || !(a->test_fraction > 0) ||
                !(a->test_fraction < 1)) {
                cli_error("als", "--test-fraction takes a number between 0 and 1");
                return -1;
            }
        } else if (!strcmp(opt, "--test") && val) {
            a->test_file = argv[++i];
        } else if (!strcmp(opt, "--output-u") && val) {
            a->out_u = argv[++i];
        } else if (!strcmp(opt, "--output-v") && val) {
            a->out_v = argv[++i];
        } else if (opt[0] == '-') {
            cli_error("als", "unknown option '%s' (or it lacks its value)", opt);
            return -1;
        } else if (a->file) {
            cli_error("als", "one FILE at most");
            return -1;
        } else
            a->file = opt;
    }
    if (!a->common.help && !a->file) {
        cli_error("als", "a ratings FILE is required");
        return -1;
    }
    if (a->test_file && a->test_fraction > 0) {
        cli_error("als", "--test and --test-fraction exclude each other");
        return -1;
    }
    return 0;
}

/* Hold out a seeded random fraction of R: *train and *test share R's shape. */
static mf_status split(mf_ctx *ctx, mf_sparse *R, double fraction, uint64_t seed, mf_sparse **train,
                       mf_sparse **test)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(R, &rows, &cols, &nnz);
    size_t n = (size_t)(nnz ? nnz : 1);
    int32_t *r = malloc(n * sizeof *r), *c = malloc(n * sizeof *c);
    int32_t *r2 = malloc(n * sizeof *r2), *c2 = malloc(n * sizeof *c2);
    float *v = malloc(n * sizeof *v), *v2 = malloc(n * sizeof *v2),
          *coin = malloc(n * sizeof *coin);
    mf_status st = r && c && r2 && c2 && v && v2 && coin ? MF_OK : MF_ERR_OUT_OF_MEMORY;
    if (st == MF_OK)
        st = mf_sparse_get_coo(R, r, c, v, MF_MEMORY_HOST);
    if (st == MF_OK)
        st = mf_random_uniform(ctx, coin, nnz, 0.0f, 1.0f, seed, 0x73706c6974ull, MF_MEMORY_HOST);
    int64_t a = 0, b = 0;
    for (int64_t p = 0; st == MF_OK && p < nnz; p++) {
        if (coin[p] < fraction)
            r2[b] = r[p], c2[b] = c[p], v2[b] = v[p], b++;
        else
            r[a] = r[p], c[a] = c[p], v[a] = v[p], a++;
    }
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, train, rows, cols, a, r, c, v, MF_MEMORY_HOST, 0);
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, test, rows, cols, b, r2, c2, v2, MF_MEMORY_HOST, 0);
    free(r), free(c), free(r2), free(c2), free(v), free(v2), free(coin);
    return st;
}

static int on_iteration(void *user, const mf_progress *p)
{
    (void)user;
    fprintf(stderr, "iteration %d: train RMSE %.4f", p->iteration, p->train_rmse);
    if (!isnan(p->test_rmse))
        fprintf(stderr, ", test RMSE %.4f", p->test_rmse);
    fprintf(stderr, " (%.2f s)\n", p->seconds);
    return 0;
}

static int write_factors(const char *path, const float *X, int32_t rows, long long k)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        cli_error("als", "cannot write %s", path);
        return -1;
    }
    for (int32_t r = 0; r < rows; r++)
        for (long long t = 0; t < k; t++)
            fprintf(f, "%.7g%c", (double)X[(size_t)r * k + t], t + 1 < k ? ' ' : '\n');
    if (fclose(f) != 0) {
        cli_error("als", "cannot write %s", path);
        return -1;
    }
    return 0;
}

static int run(mf_ctx *ctx, const als_args *a, mf_sparse *train, mf_sparse *test)
{
    int32_t users, items;
    int64_t nnz, ntest = 0;
    mf_sparse_shape(train, &users, &items, &nnz);
    if (test)
        mf_sparse_shape(test, NULL, NULL, &ntest);
    float *U = malloc((size_t)users * a->rank * sizeof *U);
    float *V = malloc((size_t)items * a->rank * sizeof *V);
    int rc = CLI_FAILED;
    if (!U || !V) {
        cli_error("als", "out of host memory for the factors");
        goto done;
    }
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = (int)a->rank, o.lambda = (float)a->lambda, o.iterations = (int)a->iterations;
    o.test = test;
    o.progress = on_iteration;
    mf_als_report rep = {.struct_size = sizeof rep};
    if (mf_als_run(ctx, train, &o, U, V, &rep) != MF_OK) {
        cli_error("als", "%s", mf_ctx_last_error(ctx));
        goto done;
    }
    if ((a->out_u && write_factors(a->out_u, U, users, a->rank) != 0) ||
        (a->out_v && write_factors(a->out_v, V, items, a->rank) != 0))
        goto done;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_str(&out, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    cli_out_int(&out, "users", users);
    cli_out_int(&out, "items", items);
    cli_out_int(&out, "train ratings", nnz);
    cli_out_int(&out, "test ratings", ntest);
    cli_out_int(&out, "rank", a->rank);
    cli_out_int(&out, "iterations", rep.iterations);
    cli_out_num(&out, "train RMSE", rep.train_rmse);
    if (test)
        cli_out_num(&out, "test RMSE", rep.test_rmse);
    cli_out_num(&out, "seconds per iteration", rep.iteration_seconds / rep.iterations);
    cli_out_num(&out, "seconds", rep.seconds);
    cli_out_end(&out);
    rc = CLI_OK;
done:
    free(U);
    free(V);
    return rc;
}

int cmd_als(int argc, char **argv)
{
    als_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        als_help();
        return CLI_OK;
    }
    mf_ctx *ctx = cli_make_ctx("als", &a.common);
    if (!ctx)
        return CLI_FAILED;
    mf_sparse *all = NULL, *train = NULL, *test = NULL;
    mf_status st = mf_sparse_read(ctx, &all, a.file, NULL);
    if (st == MF_OK && a.test_fraction > 0) {
        st = split(ctx, all, a.test_fraction, a.common.seed, &train, &test);
    } else if (st == MF_OK) {
        train = all, all = NULL;
        if (a.test_file) {
            mf_read_opts ro;
            mf_read_opts_init(&ro);
            mf_sparse_shape(train, &ro.rows, &ro.cols, NULL);
            st = mf_sparse_read(ctx, &test, a.test_file, &ro);
        }
    }
    int rc = CLI_FAILED;
    if (st != MF_OK)
        cli_error("als", "%s", mf_ctx_last_error(ctx));
    else
        rc = run(ctx, &a, train, test);
    mf_sparse_destroy(all);
    mf_sparse_destroy(train);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
    return rc;
}
