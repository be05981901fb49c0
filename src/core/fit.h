/* What the explicit-ratings algorithms (ALS, SGD) share around their fits: the search of a
 * tuned run (mf_tune flags), and handing a fitted model's extras over to the caller (the
 * columns past a tuned rank, the mean and the biases). Each algorithm fits its own way; this
 * is the grid, the validation split, the pick and the hand-over, so that both behave alike. */
#ifndef MF_CORE_FIT_H
#define MF_CORE_FIT_H

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fit the candidate (rank, lambda) on fit_part and put its RMSE on valid in *rmse.
 * MF_ERR_NUMERIC means the candidate failed (a system broke down, the updates diverged): it
 * is skipped, not an error of the search. */
typedef mf_status (*mf_tune_fit_fn)(void *user, mf_sparse *fit_part, const mf_sparse *valid,
                                    int rank, float lambda, double *rmse);

typedef struct mf_tune_result {
    int rank;
    float lambda;
    double rmse; /* on the validation part */
} mf_tune_result;

/* Hold out a seeded 10 % of R (by a hash of the positions, the context's seed), fit every
 * candidate on the rest: lambda x 1/4, 1/2, 1, 2, 4, and with MF_TUNE_RANK the ranks rank/2
 * and rank/4 too (unless fixed_rank: a warm start's factors have the caller's rank). The
 * best goes to *best. Every candidate failing is MF_ERR_NUMERIC, named after fn. */
mf_status mf_tune_search(mf_ctx *ctx, const char *fn, const mf_sparse *R, unsigned flags, int rank,
                         float lambda, int fixed_rank, mf_tune_fit_fn fit, void *user,
                         mf_tune_result *best);

/* The model options ALS and SGD share: biases 0 or 1, lambda_bias finite and >= 0, tune
 * only mf_tune flags; else MF_ERR_INVALID_ARGUMENT naming the field after fn. */
mf_status mf_fit_check_model(mf_ctx *ctx, const char *fn, int biases, float lambda_bias,
                             unsigned tune);

/* Before handing over factors of rank k into arrays of leading dimension rank > k (a tuned
 * rank): U (rows) and V (cols) zeroed, so that the columns past k read 0. */
mf_status mf_fit_zero_tail(mf_ctx *ctx, float *U, float *V, int32_t rows, int32_t cols, int k,
                           int rank, mf_memory where);

/* After handing over: out->mean (mean, or 0 for the plain model) and, for the plain model,
 * zero biases in the arrays given (a biased model's engine wrote them). NULL out: nothing. */
mf_status mf_fit_bias_out(mf_ctx *ctx, mf_biases *out, int biases, float mean, int32_t rows,
                          int32_t cols, mf_memory where);

/* A caller's factor as a start: rows x k floats at F (`where` memory) copied to host F0 and
 * checked, since a NaN would spread through every system; a non-finite one is
 * MF_ERR_INVALID_DATA, "<fn>: the given <name>[row][col] = ... is not finite". */
mf_status mf_fit_load_given(mf_ctx *ctx, const char *fn, const char *name, const float *F,
                            int64_t rows, int k, mf_memory where, float *F0);

#ifdef __cplusplus
}
#endif
#endif
