/* The tuning search and the hand-over of a fitted model's extras (fit.h). */
#include "core/fit.h"

#include <math.h>
#include <string.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"

/* The seed of the validation split, xored into the context's, and its share. */
#define TUNE_SPLIT_SEED 0x74756e65ull
#define TUNE_FRACTION   0.1

mf_status mf_tune_search(mf_ctx *ctx, const char *fn, const mf_sparse *R, unsigned flags, int rank,
                         float lambda, int fixed_rank, mf_tune_fit_fn fit, void *user,
                         mf_tune_result *best)
{
    static const float scales[] = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
    int ranks[3] = {rank, 0, 0}, nranks = 1;
    if ((flags & MF_TUNE_RANK) && !fixed_rank) {
        if (rank / 2 >= 1)
            ranks[nranks++] = rank / 2;
        if (rank / 4 >= 1 && rank / 4 != rank / 2)
            ranks[nranks++] = rank / 4;
    }
    mf_sparse *fit_part = NULL, *valid = NULL;
    MF_TRY(
        mf_sparse_split(ctx, R, TUNE_FRACTION, ctx->seed ^ TUNE_SPLIT_SEED, fn, &fit_part, &valid));
    *best = (mf_tune_result){rank, lambda, INFINITY};
    mf_status st = MF_OK;
    for (int r = 0; r < nranks && st == MF_OK; r++)
        for (size_t c = 0; c < sizeof scales / sizeof *scales && st == MF_OK; c++) {
            double rmse = NAN;
            st = fit(user, fit_part, valid, ranks[r], lambda * scales[c], &rmse);
            if (st == MF_OK && rmse < best->rmse)
                *best = (mf_tune_result){ranks[r], lambda * scales[c], rmse};
            else if (st == MF_ERR_NUMERIC)
                st = MF_OK;
        }
    mf_sparse_destroy(fit_part);
    mf_sparse_destroy(valid);
    if (st == MF_OK && !isfinite(best->rmse))
        st = mf_fail(ctx, MF_ERR_NUMERIC,
                     "%s: every tuning candidate failed (lambda %g x 1/4 .. 4 breaks the solves, "
                     "or the learning rate diverges)",
                     fn, (double)lambda);
    return st;
}

mf_status mf_fit_check_model(mf_ctx *ctx, const char *fn, int biases, float lambda_bias,
                             unsigned tune)
{
    MF_REQUIRE(ctx, biases == 0 || biases == 1, "%s: biases = %d must be 0 or 1", fn, biases);
    MF_REQUIRE(ctx, lambda_bias >= 0.0f && isfinite(lambda_bias),
               "%s: lambda_bias = %g must be finite and >= 0", fn, (double)lambda_bias);
    MF_REQUIRE(ctx, (tune & ~(unsigned)(MF_TUNE_LAMBDA | MF_TUNE_RANK)) == 0,
               "%s: tune = 0x%x holds unknown mf_tune flags", fn, tune);
    return MF_OK;
}

mf_status mf_fit_zero_tail(mf_ctx *ctx, float *U, float *V, int32_t rows, int32_t cols, int k,
                           int rank, mf_memory where)
{
    if (k >= rank)
        return MF_OK;
    MF_TRY(mf_fill_output(ctx, U, (int64_t)rows * rank, 0.0f, where));
    return mf_fill_output(ctx, V, (int64_t)cols * rank, 0.0f, where);
}

mf_status mf_fit_bias_out(mf_ctx *ctx, mf_biases *out, int biases, float mean, int32_t rows,
                          int32_t cols, mf_memory where)
{
    if (!out)
        return MF_OK;
    out->mean = biases ? mean : 0.0f;
    if (biases)
        return MF_OK;
    MF_TRY(mf_fill_output(ctx, out->user, rows, 0.0f, where));
    return mf_fill_output(ctx, out->item, cols, 0.0f, where);
}

mf_status mf_fit_load_given(mf_ctx *ctx, const char *fn, const char *name, const float *F,
                            int64_t rows, int k, mf_memory where, float *F0)
{
    const size_t bytes = (size_t)rows * k * sizeof *F0;
    if (where == MF_MEMORY_DEVICE)
        MF_TRY(mf_cuda_copy(ctx, F0, F, bytes));
    else
        memcpy(F0, F, bytes);
    for (int64_t p = 0; p < rows * k; p++)
        if (!isfinite(F0[p]))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "%s: the given %s[%lld][%lld] = %g is not finite", fn, name,
                           (long long)(p / k), (long long)(p % k), (double)F0[p]);
    return MF_OK;
}
