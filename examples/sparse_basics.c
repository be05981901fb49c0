/* The first steps with mfact: a context, a sparse matrix from coordinates, its canonical
 * order, and what an error looks like. Build: cc sparse_basics.c $(pkg-config --cflags
 * --libs mfact) */
#include <mfact/mfact.h>
#include <stdio.h>

int main(void)
{
    /* NULL options: the CUDA backend when a GPU is usable, else the CPU. */
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, NULL) != MF_OK) {
        fprintf(stderr, "no context: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    printf("mfact %s on the %s backend\n", mf_version_string(),
           mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "CUDA" : "CPU");

    /* Ratings of 3 users for 4 items, in any order; one rating is given twice and the
     * flag asks for duplicates to be summed (without it they are an error). */
    const int32_t user[] = {2, 0, 1, 0, 2, 0};
    const int32_t item[] = {3, 1, 2, 0, 0, 1};
    const float rating[] = {4.0f, 2.0f, 5.0f, 3.0f, 1.0f, 1.5f};
    mf_sparse *ratings = NULL;
    mf_status st = mf_sparse_from_coo(ctx, &ratings, 3, 4, 6, user, item, rating, MF_MEMORY_HOST,
                                      MF_SPARSE_SUM_DUPLICATES);
    if (st != MF_OK) {
        fprintf(stderr, "%s: %s\n", mf_status_string(st), mf_ctx_last_error(ctx));
        mf_ctx_destroy(ctx);
        return 1;
    }

    /* Entries come back in the canonical order: by row, then by column. Algorithms return
     * per-entry results in this order too. */
    int32_t r[6], c[6];
    float v[6];
    int64_t nnz = 0;
    mf_sparse_shape(ratings, NULL, NULL, &nnz);
    mf_sparse_get_coo(ratings, r, c, v, MF_MEMORY_HOST);
    printf("canonical order:");
    for (int64_t i = 0; i < nnz; i++)
        printf(" (%d,%d)=%g", r[i], c[i], (double)v[i]);
    printf("\n");

    /* Bad input is reported, never printed by the library, and the output is untouched. */
    const int32_t bad_item[] = {3, 1, 2, 9, 0, 1};
    mf_sparse *bad = NULL;
    st = mf_sparse_from_coo(ctx, &bad, 3, 4, 6, user, bad_item, rating, MF_MEMORY_HOST, 0);
    printf("bad input: %s (%s); handle still %s\n", mf_status_string(st), mf_ctx_last_error(ctx),
           bad ? "set" : "NULL");

    mf_sparse_destroy(ratings);
    mf_ctx_destroy(ctx);
    return 0;
}
