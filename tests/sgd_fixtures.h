/* Problems and references shared by the SGD suites (CPU and GPU). */
#ifndef MF_SGD_FIXTURES_H
#define MF_SGD_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"
#include "ranks_fixtures.h"

/* Run mf_sgd_hogwild_run on fresh factors; the test fails unless it returns `expect`.
 * U and V are allocated (users x k, items x k floats) and returned through *U and *V when
 * those are not NULL, else freed. */
void sx_run(mf_ctx *ctx, const mf_sparse *R, const mf_sgd_opts *o, mf_status expect,
            mf_sgd_report *rep, float **U, float **V);

/* Ratings round-free: r = 3 + U* . V* (rank 4, entries uniform in [-0.7, 0.7)) + N(0, 0.25)
 * noise at a seeded pattern of the given density, split 90/10 by a seeded coin into
 * *train and *test of the same shape. */
void sx_noisy(mf_ctx *ctx, int32_t users, int32_t items, double density, uint64_t seed,
              mf_sparse **train, mf_sparse **test);
/* The same with items [0, popular) rated by every user (a train or test rating each). */
void sx_popular(mf_ctx *ctx, int32_t users, int32_t items, double density, int32_t popular,
                uint64_t seed, mf_sparse **train, mf_sparse **test);

/* The sequence of updates one worker makes, replayed in float from the documented plan
 * (mf_sgd_plan_build and the epoch permutations): U and V hold the start and receive the
 * result. fp32 storage. */
void sx_replay(mf_ctx *ctx, const mf_sparse *R, const mf_sgd_opts *o, float *U, float *V);

/* MovieLens 100K, k = 10, the default options otherwise (20 epochs): the test RMSE must
 * be <= 0.93. Prints the RMSEs with `label`, or that the data set is absent. */
void sx_check_movielens(mf_ctx *ctx, const char *label);

/* The group's jobs run (rk_run_als) with rank 1's part of sub-step `step` failing
 * (mf_sgd_debug_fail_rank, _step); then every rank must have returned MF_ERR_INTERNAL, rank
 * 1 with that failure's own message, the others naming it. `what` names the case. */
void sx_run_failing(rk_job *jobs, int n, int64_t step, const char *what);

/* ||a - b|| / ||b|| over n floats. */

#endif
