/* Boolean matrix factorization of a tiny 0/1 matrix: two overlapping blocks of ones and a
 * stray one, factorized at rank 2, then the factors read back bit by bit.
 * Build: cc bmf.c $(pkg-config --cflags --libs mfact)
 *
 * Rows 0-2 use columns 0-3 and rows 2-4 use columns 3-5 (row 2 both): a rank-2 Boolean
 * product explains every one except the stray (5, 0), which costs one false negative. */
#include <stdio.h>

#include <mfact/mfact.h>

int main(void)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.seed = 1; /* every random choice of every algorithm draws from the context's seed */
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) { /* CUDA when a GPU is usable, else CPU */
        fprintf(stderr, "%s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    int32_t row[32], col[32];
    int64_t n = 0;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++)
            if ((i <= 2 && j <= 3) || (i >= 2 && i <= 4 && j >= 3) || (i == 5 && j == 0))
                row[n] = i, col[n] = j, n++;
    mf_sparse *C = NULL;
    /* NULL values: a pattern, every listed entry is a 1. */
    if (mf_sparse_from_coo(ctx, &C, 6, 6, n, row, col, NULL, MF_MEMORY_HOST, 0) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    mf_bmf_opts o;
    mf_bmf_opts_init(&o); /* always: it sets struct_size and the defaults */
    o.rank = 2;
    /* A row of A (a column of B) is (rank + 63) / 64 words; factor l is bit l % 64 of word
     * l / 64. Rank 2 fits one word per line. */
    uint64_t A[6], B[6];
    mf_bmf_report rep = {.struct_size = sizeof rep};
    if (mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    printf("error %lld (fp %lld, fn %lld), F1 %.3f after %d sweeps\n", (long long)rep.error,
           (long long)rep.fp, (long long)rep.fn, rep.f1, rep.sweeps);
    for (int i = 0; i < 6; i++) {
        printf("row %d: factors %c%c  ->", i, A[i] & 1 ? '0' : '-', A[i] & 2 ? '1' : '-');
        for (int j = 0; j < 6; j++)
            printf(" %d", (A[i] & B[j]) != 0); /* the Boolean product, entry (i, j) */
        printf("\n");
    }
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
    return 0;
}
