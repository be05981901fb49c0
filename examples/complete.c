/* Matrix completion by alternating steepest descent: plant a low-rank matrix, observe a
 * third of its entries, complete it with mf_asd_run (Scaled ASD) and measure the error on
 * every entry. Build: cc complete.c $(pkg-config --cflags --libs mfact) -lm
 *
 * M = A B^T is 60 x 50 of rank 3; about 1,000 of its 3,000 entries are given, against the
 * (60 + 50) * 3 = 330 numbers that fix a rank-3 matrix: enough to recover it. */
#include <math.h>
#include <stdio.h>

#include <mfact/mfact.h>

enum { ROWS = 60, COLS = 50, RANK = 3 };

int main(void)
{
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, NULL) != MF_OK) { /* CUDA when a GPU is usable, else CPU */
        fprintf(stderr, "%s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    /* The planted factors and a coin per entry, from the library's seeded generator. */
    static float A[ROWS * RANK], B[COLS * RANK], coin[ROWS * COLS];
    if (mf_random_uniform(ctx, A, ROWS * RANK, -1, 1, 42, 0, MF_MEMORY_HOST) != MF_OK ||
        mf_random_uniform(ctx, B, COLS * RANK, -1, 1, 42, 1, MF_MEMORY_HOST) != MF_OK ||
        mf_random_uniform(ctx, coin, ROWS * COLS, 0, 1, 42, 2, MF_MEMORY_HOST) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    static int32_t row[ROWS * COLS], col[ROWS * COLS];
    static float val[ROWS * COLS];
    int64_t nnz = 0;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            if (coin[i * COLS + j] < 1.0f / 3) { /* observed */
                float m = 0;
                for (int t = 0; t < RANK; t++)
                    m += A[i * RANK + t] * B[j * RANK + t];
                row[nnz] = i, col[nnz] = j, val[nnz] = m, nnz++;
            }
    mf_sparse *M = NULL;
    if (mf_sparse_from_coo(ctx, &M, ROWS, COLS, nnz, row, col, val, MF_MEMORY_HOST, 0) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    mf_asd_opts opts;
    mf_asd_opts_init(&opts); /* Scaled ASD from a random start */
    opts.rank = RANK;
    opts.tolerance = 1e-6;
    float X[ROWS * RANK], Y[COLS * RANK]; /* row-major: X[i * rank + t] */
    mf_asd_report report = {.struct_size = sizeof report};
    mf_status st = mf_asd_run(ctx, M, &opts, X, Y, MF_MEMORY_HOST, &report);
    if (st != MF_OK) {
        fprintf(stderr, "mf_asd_run: %s: %s\n", mf_status_string(st), mf_ctx_last_error(ctx));
        return 1;
    }
    /* |X Y^T - A B^T| / |A B^T| over every entry, the unobserved ones included */
    double num = 0, den = 0;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            double got = 0, want = 0;
            for (int t = 0; t < RANK; t++) {
                got += (double)X[i * RANK + t] * Y[j * RANK + t];
                want += (double)A[i * RANK + t] * B[j * RANK + t];
            }
            num += (got - want) * (got - want), den += want * want;
        }
    printf("%lld of %d entries observed\n", (long long)nnz, ROWS * COLS);
    printf("%d iterations, relative residual %.1e\n", report.iterations, report.relative_residual);
    printf("relative error on every entry %.1e\n", sqrt(num / den));
    mf_sparse_destroy(M);
    mf_ctx_destroy(ctx);
    return 0;
}
