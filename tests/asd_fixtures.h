/* Shared by the CPU and GPU suites of mf_asd_run: a planted low-rank matrix observed on a
 * random sample of its entries, and the error of a completion against all of it. */
#ifndef MF_TEST_ASD_FIXTURES_H
#define MF_TEST_ASD_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"

/* A planted rank-r matrix A B^T (A rows x r, B cols x r, uniform in [-1, 1), column t of A
 * scaled by scale[t] when scale is given) observed on a uniform random fraction of its
 * entries; M is built on ctx. */
typedef struct planted {
    int32_t m, n;
    int r;
    float *A, *B;
    mf_sparse *M;
} planted;

planted make_planted(mf_ctx *ctx, int32_t m, int32_t n, int r, double fraction, const double *scale,
                     uint64_t seed);
/* The same with standard normal factors when `normal` is nonzero. */
planted make_planted_dist(mf_ctx *ctx, int32_t m, int32_t n, int r, double fraction,
                          const double *scale, uint64_t seed, int normal);
void free_planted(planted *p);

/* |X Y^T - A B^T|_F / |A B^T|_F over every entry, in double (X rows x r, Y cols x r). */
double full_error(const planted *p, const float *X, const float *Y, int r);

/* A progress callback counting its calls in *(int *)user, checking what it is given, and
 * cancelling after the third iteration. */
int asd_stop_at_3(void *user, const mf_progress *p);

/* Rank i's context of a group: CUDA on device i (NULL where there is none), or CPU with one
 * thread; seed 42. */
mf_ctx *asd_rank_ctx(mf_backend backend, int i);

/* A planted case: m x n, rank r, the fraction observed, the seed. */
typedef struct asd_case {
    int32_t m, n;
    int r;
    double fraction;
    uint64_t seed;
} asd_case;

/* One fit over a group of n ranks (asd_rank_ctx, joined with mf_ctx_join_local; n <= 8),
 * a thread each: rank i fits its own copy of case c (p[i]) with options o, the progress
 * callback only on rank `who` (-1: none); jobs[i] gets the factors (U, V: X and Y), the
 * report and the status. Returns 0 when the group could not be made (no NCCL, too few
 * devices); else asd_group_free frees what it made. */
struct rk_job;
int asd_group_fit(mf_backend backend, int n, const asd_case *c, const mf_asd_opts *o, int who,
                  struct rk_job *jobs, planted *p);
void asd_group_free(struct rk_job *jobs, planted *p, int n);

/* A group's fit against one context's (asd_rank_ctx(backend, 0)), for groups of each size
 * in sizes: a planted 900 x 700 rank-8 case, 6% observed, 30 iterations, scaled and plain
 * from the random start and scaled from the spectral one, in `precision` (mf_asd_opts).
 * Every rank returns the same factors, and they are one context's within tol (relative; 0:
 * bit for bit), as is the residual (a double sum in another order: within 1e-12 at least);
 * every rank counts one context's reduced iterations (tol 0; else within 1); prints each.
 * Returns 0 when a group could not be made. */
int asd_check_group_matches_alone(mf_backend backend, const int *sizes, int count, double tol,
                                  mf_precision precision);
/* The same on case c, for `iterations` iterations (30 above; fewer keeps a case that
 * recovers its plant fast off float's floor, where the residual is rounding alone). */
int asd_check_group_matches_alone_on(mf_backend backend, const int *sizes, int count, double tol,
                                     mf_precision precision, const asd_case *c, int iterations);

/* The way a group of n ranks stops (src/asd/asd_internal.h: a rank's reason to stop travels
 * with the next iteration's sums, and that iteration moves nothing). Each rank has its own
 * context (asd_rank_ctx) and copy of a planted 120 x 90 rank-3 matrix. One rank cancels
 * after iteration 3 (asd_stop_at_3), the others have no callback: every rank stops
 * cancelled after 3 iterations, the callback is called 3 times, and the factors are those
 * of the group's run of max_iterations = 3 (tol 0: bit for bit; else within tol, relative,
 * where two runs of the same fit differ in rounding), which differ from 4 iterations'; the
 * same when the cancel comes at the last iteration. Returns 0 when the group could not be
 * made (no NCCL, too few devices). */
int asd_check_group_cancel(mf_backend backend, int n, double tol);

#endif
