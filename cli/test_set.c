#include "test_set.h"

#include <stdlib.h>

static mf_sparse *whole;     /* the test file, when some of it is unseen */
static int64_t unseen_count; /* its entries outside the training shape */

int64_t cli_test_unseen(void)
{
    return unseen_count;
}

void cli_test_release(void)
{
    mf_sparse_destroy(whole);
    whole = NULL;
    unseen_count = 0;
}

mf_status cli_test_split(mf_ctx *ctx, mf_sparse *full, int32_t users, int32_t items,
                         mf_sparse **seen)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_status st = mf_sparse_shape(full, &rows, &cols, &nnz);
    if (st != MF_OK)
        return st;
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)nnz * sizeof *col + 1);
    float *val = malloc((size_t)nnz * sizeof *val + 1);
    int32_t *row = malloc((size_t)nnz * sizeof *row + 1);
    st = ptr && col && val && row ? mf_sparse_get_csr(full, ptr, col, val, MF_MEMORY_HOST)
                                  : MF_ERR_OUT_OF_MEMORY;
    int64_t kept = 0;
    for (int32_t r = 0; st == MF_OK && r < rows && r < users; r++)
        for (int64_t p = ptr[r]; p < ptr[r + 1]; p++)
            if (col[p] < items)
                row[kept] = r, col[kept] = col[p], val[kept] = val[p], kept++;
    if (st == MF_OK)
        st = mf_sparse_from_coo(ctx, seen, users, items, kept, row, col,
                                mf_sparse_has_values(full) ? val : NULL, MF_MEMORY_HOST, 0);
    free(ptr), free(col), free(val), free(row);
    cli_test_release();
    if (st == MF_OK && kept < nnz) {
        unseen_count = nnz - kept;
        whole = full;
    } else {
        mf_sparse_destroy(full);
    }
    return st;
}

int cli_out_test(cli_out *out, const char *cmd, mf_ctx *ctx, const cli_fit *fit, double seen_rmse)
{
    if (!whole) {
        cli_out_num(out, "test RMSE", seen_rmse);
        return 0;
    }
    mf_model m;
    cli_fit_model(fit, &m);
    double all = 0.0;
    if (mf_model_rmse(ctx, &m, whole, &all) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(ctx));
        return -1;
    }
    cli_out_num(out, "test RMSE", all);
    cli_out_num(out, "test RMSE of the seen", seen_rmse);
    return 0;
}
