/* Problems and references shared by the ALS suites (CPU and GPU). */
#ifndef MF_ALS_FIXTURES_H
#define MF_ALS_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"

/* users x items ratings with exact rank-`rank` structure: r = U* . V* at a seeded random
 * pattern of the given density, every user and item holding at least 2 * rank entries. */
mf_sparse *ax_planted(mf_ctx *ctx, int32_t users, int32_t items, int rank, double density,
                      uint64_t seed);

/* Integer ratings 1..5 at a seeded random pattern; users listed in `empty_users` (and items
 * in `empty_items`, each list ended by -1, or NULL) get none. */
mf_sparse *ax_ratings(mf_ctx *ctx, int32_t users, int32_t items, double density, uint64_t seed,
                      const int32_t *empty_users, const int32_t *empty_items);

/* A random k x k SPD matrix A = M M^T / k + shift I (row-major) and a right-hand side b. */
void ax_spd(int k, double shift, uint64_t seed, float *A, float *b);

/* x = A^-1 b in float64 by Cholesky (A SPD, row-major k x k). */
void ax_solve64(int k, const float *A, const float *b, double *x);

/* ||got - ref|| / ||ref|| over n entries. */
double ax_rel_diff(int64_t n, const float *got, const double *ref);

/* MovieLens 100K split 80/20 by a seeded coin per rating; 0 when the data set is absent. */
int ax_movielens(mf_ctx *ctx, mf_sparse **train, mf_sparse **test);

/* lambda = 0 with a user holding one rating at rank 3: mf_als_run on ctx must report
 * MF_ERR_NUMERIC naming user 1 and leave U and V as they were. */
void ax_check_breakdown(mf_ctx *ctx);

/* A run's reported train and test RMSEs (biases off: rep->train_rmse over R, test_rmse over T)
 * are mf_rmse_ex's in `precision` of the factors it returned (host, leading dimension k),
 * to a relative `tol`. */
void ax_check_reported_rmse(mf_ctx *ctx, const mf_als_report *rep, const mf_sparse *R,
                            const mf_sparse *T, int k, const float *U, const float *V,
                            mf_precision precision, double tol);

/* MovieLens 100K, k = 10, lambda = 0.1, 10 iterations: the test RMSE must be <= 0.93.
 * Prints the RMSEs with `label`, or that the data set is absent. */
void ax_check_movielens(mf_ctx *ctx, const char *label);

#endif
