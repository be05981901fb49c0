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
#include "options.h"

typedef struct sddmm_args {
    cli_common common;
    const char *file;
    long long rows, cols, k, repeat;
    double density;
} sddmm_args;

/* --shape ROWS,COLS,DENSITY (cli_opt's CLI_CALL). */
static bool shape(const char *cmd, const char *name, const char *v, void *dest)
{
    sddmm_args *a = dest;
    (void)name;
    return cli_parse_shape(cmd, v, &a->rows, &a->cols, &a->density);
}

/* 0 parsed, 1 help printed, -1 a usage error (printed). */
static int parse(int argc, char **argv, sddmm_args *a)
{
    cli_common_init(&a->common);
    a->file = NULL;
    a->rows = 100000, a->cols = 100000, a->density = 0.001, a->k = 32, a->repeat = 10;
    const cli_opt own[] = {
        CLI_OPT_CALL("--shape", a, shape, "ROWS,COLS,DENSITY",
                     "a seeded uniform pattern instead of FILE (default 100000,100000,0.001)"),
        CLI_OPT_INT("--k", &a->k, 1, 65536, "K", "the factors' columns"),
        CLI_OPT_INT("--repeat", &a->repeat, 1, 100000, "R", "timed calls after the first"),
    };
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {"sddmm",
                        "sddmm [FILE | --shape ROWS,COLS,DENSITY] [options]",
                        "Times out = (A B^T) at the stored entries of S (mf_sddmm) with A (ROWS x "
                        "K) and B (COLS x K) uniform in [-1, 1). S is FILE (values used when "
                        "present) or a seeded uniform pattern. Prints the first call (plan "
                        "included), the median of R more calls and GFLOP/s as 2 K nnz / t. "
                        "FILE may name its rows and columns by ids (--ids, --user-col, "
                        "--item-col, --rating-col); the report has no per-row lines, so none "
                        "shows them.",
                        &g,
                        1,
                        &a->file,
                        1,
                        "one FILE at most"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r == 0 && !a->file && cli_id_option(&a->common)) {
        cli_error("sddmm", "%s: the generated pattern has no ids (they name FILE's columns)",
                  cli_id_option(&a->common));
        return -1;
    }
    return r;
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
    const int parsed = parse(argc, argv, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
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
