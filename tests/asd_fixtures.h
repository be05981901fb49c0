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

#endif
