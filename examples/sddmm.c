/* Sampled products with mfact: the predictions U V^T of a factorization at the rated
 * entries only (mf_sddmm), its RMSE (mf_rmse), and the gradient-like product R U
 * (mf_spmm). Host arrays work on any backend; on the CUDA backend device arrays can be
 * passed with MF_MEMORY_DEVICE instead. Build: cc sddmm.c $(pkg-config --cflags --libs mfact) */
#include <mfact/mfact.h>
#include <stdio.h>

#define K 2

static int fail(mf_ctx *ctx, mf_status st)
{
    fprintf(stderr, "%s: %s\n", mf_status_string(st), mf_ctx_last_error(ctx));
    mf_ctx_destroy(ctx);
    return 1;
}

int main(void)
{
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, NULL) != MF_OK) {
        fprintf(stderr, "no context: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    /* 3 users x 4 items, 5 ratings. */
    const int32_t user[] = {0, 0, 1, 2, 2};
    const int32_t item[] = {0, 3, 1, 2, 3};
    const float rating[] = {5, 1, 4, 2, 3};
    mf_sparse *R = NULL;
    mf_status st = mf_sparse_from_coo(ctx, &R, 3, 4, 5, user, item, rating, MF_MEMORY_HOST, 0);
    if (st != MF_OK)
        return fail(ctx, st);

    /* Factors: row u of U and row i of V, K values each (row-major, leading dimension K). */
    const float U[3 * K] = {2, 0, 0, 2, 1, 1};
    const float V[4 * K] = {2.5f, 0, 0, 2, 1, 1, 0.5f, 1};

    /* pred[p] = U[u] . V[i] for each rating p in canonical (row-major) order; the pattern
     * flag ignores the rating values (without it each product is scaled by its rating). */
    float pred[5];
    st = mf_sddmm(ctx, R, K, U, K, V, K, 1.0f, 0.0f, pred, MF_MEMORY_HOST, MF_SDDMM_PATTERN);
    if (st != MF_OK)
        return fail(ctx, st);
    float got[5];
    int32_t rows[5], cols[5];
    mf_sparse_get_coo(R, rows, cols, got, MF_MEMORY_HOST);
    for (int p = 0; p < 5; p++)
        printf("user %d item %d: rating %.1f predicted %.2f\n", rows[p], cols[p], got[p], pred[p]);

    double rmse = 0;
    if ((st = mf_rmse(ctx, R, K, U, K, V, K, MF_MEMORY_HOST, &rmse)) != MF_OK)
        return fail(ctx, st);
    printf("rmse %.4f\n", rmse);

    /* G = R^T U (items x K): each item's ratings times its raters' factors. */
    float G[4 * K];
    if ((st = mf_spmm(ctx, MF_OP_T, R, K, 1.0f, U, K, 0.0f, G, K, MF_MEMORY_HOST)) != MF_OK)
        return fail(ctx, st);
    for (int i = 0; i < 4; i++)
        printf("R^T U row %d: %.1f %.1f\n", i, G[i * K], G[i * K + 1]);

    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
    return 0;
}
