/* mfact demo: the README's main job. Loads a matrix file, or generates a seeded
 * power-law one, builds it in the library's canonical form, and reports what it holds.
 * Algorithm issues extend it with a factorization of that matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct demo_args {
    cli_common common;
    const char *file;
    long long rows, cols;
    double density;
} demo_args;

static void demo_help(void)
{
    printf("usage: mfact demo [FILE] [--shape ROWS,COLS,DENSITY] [options]\n\n"
           "Loads FILE (MatrixMarket, triplets, .in pairs, .bin binary triplets) or generates\n"
           "a ratings-like matrix with power-law row popularity (default 100000,20000,0.001),\n"
           "and reports its shape and statistics. Repeated entries in FILE are an error unless\n"
           "--sum-duplicates is given.\n\n%s",
           cli_common_help());
}

static int parse(int argc, char **argv, demo_args *a)
{
    cli_common_init(&a->common);
    a->file = NULL;
    a->rows = 100000, a->cols = 20000, a->density = 0.001;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse("demo", argc, argv, &i, &a->common);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            if (!cli_parse_shape("demo", argv[++i], &a->rows, &a->cols, &a->density))
                return -1;
        } else if (argv[i][0] == '-') {
            cli_error("demo", "unknown option '%s'", argv[i]);
            return -1;
        } else if (a->file) {
            cli_error("demo", "one FILE at most");
            return -1;
        } else
            a->file = argv[i];
    }
    return 0;
}

/* A ratings-like pattern: rows drawn with probability falling as a power of their index
 * (a few very active users), columns uniform, values 1..5; duplicates merged. */
static mf_status generate(mf_ctx *ctx, const demo_args *a, mf_sparse **out, cli_progress *p)
{
    double want = (double)a->rows * (double)a->cols * a->density;
    int64_t n = (int64_t)ceil(want);
    int32_t *row = malloc((size_t)n * sizeof *row), *col = malloc((size_t)n * sizeof *col);
    float *u = malloc((size_t)n * sizeof *u);
    mf_status st = row && col && u ? MF_OK : MF_ERR_OUT_OF_MEMORY;
    const int64_t chunk = 1 << 22;
    for (int64_t b = 0; st == MF_OK && b < n; b += chunk) {
        int64_t m = n - b < chunk ? n - b : chunk;
        /* Each chunk draws from streams of its own (rows, columns, values): element i of a
         * stream is fixed by (seed, stream, i), so reusing streams would repeat the chunk. */
        uint64_t stream = 3 * (uint64_t)(b / chunk);
        cli_progress_update(p, "generating", (double)b / (double)n);
        st = mf_random_uniform(ctx, u + b, m, 0, 1, a->common.seed, stream, MF_MEMORY_HOST);
        for (int64_t i = b; st == MF_OK && i < b + m; i++)
            row[i] = (int32_t)((double)a->rows * pow(u[i], 3.0)); /* P(r) ~ r^(-2/3) */
        if (st == MF_OK)
            st = mf_random_uniform(ctx, u + b, m, 0, (float)a->cols, a->common.seed, stream + 1,
                                   MF_MEMORY_HOST);
        for (int64_t i = b; st == MF_OK && i < b + m; i++)
            col[i] = (int32_t)u[i] < a->cols ? (int32_t)u[i] : (int32_t)a->cols - 1;
        if (st == MF_OK)
            st = mf_random_uniform(ctx, u + b, m, 1, 6, a->common.seed, stream + 2, MF_MEMORY_HOST);
        for (int64_t i = b; st == MF_OK && i < b + m; i++)
            u[i] = floorf(u[i]);
    }
    cli_progress_update(p, "building", 1.0);
    /* Duplicates of one (row, col) keep the sum of their ratings capped at 5 by building the
     * pattern first, then attaching one rating per distinct entry. */
    mf_sparse *pattern = NULL;
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, &pattern, (int32_t)a->rows, (int32_t)a->cols, n, row, col,
                                NULL, MF_MEMORY_HOST, MF_SPARSE_SUM_DUPLICATES);
    int64_t nnz = 0;
    int64_t *ptr = NULL;
    if (st == MF_OK) {
        mf_sparse_shape(pattern, NULL, NULL, &nnz);
        ptr = malloc(((size_t)a->rows + 1) * sizeof *ptr);
        st =
            ptr ? mf_sparse_get_csr(pattern, ptr, col, NULL, MF_MEMORY_HOST) : MF_ERR_OUT_OF_MEMORY;
    }
    if (st == MF_OK)
        st = mf_sparse_from_csr(ctx, out, (int32_t)a->rows, (int32_t)a->cols, nnz, ptr, col, u,
                                MF_MEMORY_HOST, 0);
    mf_sparse_destroy(pattern);
    free(ptr), free(row), free(col), free(u);
    return st;
}

static int report(mf_ctx *ctx, const demo_args *a, const mf_sparse *m, double seconds)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(m, &rows, &cols, &nnz);
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    float *val = malloc((size_t)(nnz ? nnz : 1) * sizeof *val);
    if (!ptr || !val || mf_sparse_get_csr(m, ptr, NULL, val, MF_MEMORY_HOST) != MF_OK) {
        cli_error("demo", "cannot read the matrix back: %s", mf_ctx_last_error(ctx));
        free(ptr), free(val);
        return CLI_FAILED;
    }
    int64_t longest = 0, empty = 0;
    for (int32_t r = 0; r < rows; r++) {
        int64_t len = ptr[r + 1] - ptr[r];
        longest = len > longest ? len : longest;
        empty += len == 0;
    }
    double sum = 0;
    for (int64_t i = 0; i < nnz; i++)
        sum += val[i];
    mf_device_info d = {.struct_size = sizeof d};
    mf_ctx_device_info(ctx, &d);
    cli_out o;
    cli_out_begin(&o, a->common.json);
    cli_out_str(&o, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    cli_out_str(&o, "device", d.name);
    cli_out_str(&o, "source", a->file ? a->file : "generated");
    cli_out_int(&o, "rows", rows);
    cli_out_int(&o, "cols", cols);
    cli_out_int(&o, "nnz", nnz);
    cli_out_num(&o, "density", (double)nnz / ((double)rows * (double)cols));
    cli_out_int(&o, "empty rows", empty);
    cli_out_int(&o, "longest row", longest);
    cli_out_str(&o, "values", mf_sparse_has_values(m) ? "stored" : "pattern");
    cli_out_num(&o, "mean value", nnz ? sum / (double)nnz : 0.0);
    cli_out_num(&o, "load seconds", seconds);
    cli_out_end(&o);
    free(ptr), free(val);
    return CLI_OK;
}

int cmd_demo(int argc, char **argv)
{
    demo_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        demo_help();
        return CLI_OK;
    }
    mf_ctx *ctx = cli_make_ctx("demo", &a.common);
    if (!ctx)
        return CLI_FAILED;
    cli_progress p;
    cli_progress_begin(&p);
    double t0 = cli_seconds();
    mf_sparse *m = NULL;
    mf_read_opts ro;
    cli_read_opts(&a.common, false, &ro);
    mf_status st = a.file ? mf_sparse_read(ctx, &m, a.file, &ro) : generate(ctx, &a, &m, &p);
    double seconds = cli_seconds() - t0;
    cli_progress_end(&p);
    int rc;
    if (st != MF_OK) {
        cli_error("demo", "%s",
                  st == MF_ERR_OUT_OF_MEMORY && !m ? mf_ctx_last_error(ctx)
                                                   : mf_ctx_last_error(ctx));
        rc = CLI_FAILED;
    } else
        rc = report(ctx, &a, m, seconds);
    mf_sparse_destroy(m);
    mf_ctx_destroy(ctx);
    return rc;
}
