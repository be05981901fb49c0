/* mfact sddmm: time mf_sddmm on a matrix file or a generated uniform pattern with random
 * dense factors. On a CUDA context A, B and the output live in device memory (so the timed
 * calls are the kernels, not transfers); the first call, which builds the plan, is reported
 * apart from the median of the repeated calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_device.h"

typedef struct sddmm_args {
    cli_common common;
    const char *file;
    long long rows, cols, k, repeat;
    double density;
} sddmm_args;

static void sddmm_help(void)
{
    printf(
        "usage: mfact sddmm [FILE | --shape ROWS,COLS,DENSITY] [--k K] [--repeat R] [options]\n\n"
        "Times out = (A B^T) at the stored entries of S (mf_sddmm) with A (ROWS x K) and B\n"
        "(COLS x K) uniform in [-1, 1). S is FILE (values used when present) or a seeded\n"
        "uniform pattern (default 100000,100000,0.001). Prints the first call (plan\n"
        "included), the median of R more calls (default 10) and GFLOP/s as 2 K nnz / t.\n\n%s",
        cli_common_help());
}

static int parse(int argc, char **argv, sddmm_args *a)
{
    cli_common_init(&a->common);
    a->file = NULL;
    a->rows = 100000, a->cols = 100000, a->density = 0.001, a->k = 32, a->repeat = 10;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse("sddmm", argc, argv, &i, &a->common);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            if (!cli_parse_shape("sddmm", argv[++i], &a->rows, &a->cols, &a->density))
                return -1;
        } else if (strcmp(argv[i], "--k") == 0 && i + 1 < argc) {
            if (!cli_parse_ll(argv[++i], &a->k) || a->k < 1 || a->k > 65536) {
                cli_error("sddmm", "--k takes an integer from 1 to 65536");
                return -1;
            }
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            if (!cli_parse_ll(argv[++i], &a->repeat) || a->repeat < 1 || a->repeat > 100000) {
                cli_error("sddmm", "--repeat takes a positive integer");
                return -1;
            }
        } else if (argv[i][0] == '-') {
            cli_error("sddmm", "unknown option '%s'", argv[i]);
            return -1;
        } else if (a->file) {
            cli_error("sddmm", "one FILE at most");
            return -1;
        } else
            a->file = argv[i];
    }
    return 0;
}

/* A uniform pattern: ROWS x COLS x DENSITY positions drawn at random, repeats merged. */
static mf_status generate(mf_ctx *ctx, const sddmm_args *a, mf_sparse **out)
{
    int64_t n = (int64_t)ceil((double)a->rows * (double)a->cols * a->density);
    int32_t *row = malloc((size_t)n * sizeof *row), *col = malloc((size_t)n * sizeof *col);
    float *u = malloc((size_t)n * sizeof *u);
    mf_status st = row && col && u ? MF_OK : MF_ERR_OUT_OF_MEMORY;
    if (st == MF_OK)
        st = mf_random_uniform(ctx, u, n, 0, (float)a->rows, a->common.seed, 0, MF_MEMORY_HOST);
    for (int64_t i = 0; st == MF_OK && i < n; i++)
        row[i] = (int32_t)u[i] < a->rows ? (int32_t)u[i] : (int32_t)a->rows - 1;
    if (st == MF_OK)
        st = mf_random_uniform(ctx, u, n, 0, (float)a->cols, a->common.seed, 1, MF_MEMORY_HOST);
    for (int64_t i = 0; st == MF_OK && i < n; i++)
        col[i] = (int32_t)u[i] < a->cols ? (int32_t)u[i] : (int32_t)a->cols - 1;
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, out, (int32_t)a->rows, (int32_t)a->cols, n, row, col, NULL,
                                MF_MEMORY_HOST, MF_SPARSE_SUM_DUPLICATES);
    free(row), free(col), free(u);
    return st;
}

static int compare_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int run(mf_ctx *ctx, const sddmm_args *a, mf_sparse *S)
{
    int32_t rows, cols;
    int64_t nnz, k = a->k;
    mf_sparse_shape(S, &rows, &cols, &nnz);
    mf_memory where = mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? MF_MEMORY_DEVICE : MF_MEMORY_HOST;
    float *A = cli_alloc(where, (size_t)rows * k * sizeof(float));
    float *B = cli_alloc(where, (size_t)cols * k * sizeof(float));
    float *out = cli_alloc(where, (size_t)(nnz ? nnz : 1) * sizeof(float));
    double *t = malloc((size_t)a->repeat * sizeof *t);
    int rc = CLI_FAILED;
    if (!A || !B || !out || !t) {
        cli_error("sddmm", "out of %s memory for the dense factors",
                  where == MF_MEMORY_DEVICE ? "device" : "host");
        goto done;
    }
    if (mf_random_uniform(ctx, A, (int64_t)rows * k, -1, 1, a->common.seed, 10, where) != MF_OK ||
        mf_random_uniform(ctx, B, (int64_t)cols * k, -1, 1, a->common.seed, 11, where) != MF_OK) {
        cli_error("sddmm", "%s", mf_ctx_last_error(ctx));
        goto done;
    }
    double first = 0;
    for (long long r = -1; r < a->repeat; r++) {
        double t0 = cli_seconds();
        if (mf_sddmm(ctx, S, (int)k, A, k, B, k, 1.0f, 0.0f, out, where, 0) != MF_OK ||
            cli_sync(ctx) != 0) {
            cli_error("sddmm", "%s", mf_ctx_last_error(ctx));
            goto done;
        }
        double dt = cli_seconds() - t0;
        if (r < 0)
            first = dt;
        else
            t[r] = dt;
    }
    qsort(t, (size_t)a->repeat, sizeof *t, compare_double);
    double med = t[a->repeat / 2];
    mf_device_info d = {.struct_size = sizeof d};
    mf_ctx_device_info(ctx, &d);
    cli_out o;
    cli_out_begin(&o, a->common.json);
    cli_out_str(&o, "backend", where == MF_MEMORY_DEVICE ? "cuda" : "cpu");
    cli_out_str(&o, "device", d.name);
    cli_out_str(&o, "source", a->file ? a->file : "generated");
    cli_out_int(&o, "rows", rows);
    cli_out_int(&o, "cols", cols);
    cli_out_int(&o, "nnz", nnz);
    cli_out_int(&o, "k", k);
    cli_out_num(&o, "first call seconds", first);
    cli_out_num(&o, "median seconds", med);
    cli_out_num(&o, "GFLOP/s", med > 0 ? 2.0 * (double)k * (double)nnz / med / 1e9 : 0.0);
    cli_out_end(&o);
    rc = CLI_OK;
done:
    cli_free(where, A);
    cli_free(where, B);
    cli_free(where, out);
    free(t);
    return rc;
}

int cmd_sddmm(int argc, char **argv)
{
    sddmm_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        sddmm_help();
        return CLI_OK;
    }
    mf_ctx *ctx = cli_make_ctx("sddmm", &a.common);
    if (!ctx)
        return CLI_FAILED;
    mf_sparse *S = NULL;
    mf_read_opts ro;
    cli_read_opts(&a.common, CLI_DUP_SUM, &ro); /* only the pattern is used */
    mf_status st = a.file ? mf_sparse_read(ctx, &S, a.file, &ro) : generate(ctx, &a, &S);
    int rc = CLI_FAILED;
    if (st != MF_OK)
        cli_error("sddmm", "%s", mf_ctx_last_error(ctx));
    else
        rc = run(ctx, &a, S);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
    return rc;
}
