/* Matrices and references shared by the SDDMM, SpMM and RMSE suites (CPU and GPU). */
#ifndef MF_SDDMM_FIXTURES_H
#define MF_SDDMM_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"

typedef enum fx_pattern {
    FX_RANDOM,    /* ~density, with about a third of the rows empty            */
    FX_LONG_ROW,  /* sparse, plus one row holding every column                  */
    FX_SINGLE,    /* exactly one stored entry                                   */
    FX_DENSE,     /* every entry stored: all-dense tiles                        */
    FX_POWER_LAW, /* row lengths and column popularity from a power law         */
    FX_PATTERNS
} fx_pattern;

const char *fx_pattern_name(fx_pattern p);

/* A rows x cols matrix of the given kind with values in [-1, 1) (or a pattern when
 * `values` is 0), deterministic in seed. */
mf_sparse *fx_matrix(mf_ctx *ctx, fx_pattern kind, int32_t rows, int32_t cols, double density,
                     int values, uint64_t seed);

/* Rows in `groups` interleaved groups (row i in group i % groups), each row holding about
 * half of its group's block of cols / groups columns and, one row in four, one column
 * anywhere: index order puts rows of different groups in one tensor-core window, a
 * grouping order rows of one group. A pattern (no values). */
mf_sparse *fx_interleaved_groups(mf_ctx *ctx, int32_t rows, int32_t cols, int groups,
                                 uint64_t seed);

/* n floats uniform in [-1, 1) from seed (host memory; free with free()). */
float *fx_floats(int64_t n, uint64_t seed);

/* The float64 reference of mf_sddmm on host arrays: ref[p] = alpha * s * dot and the bound
 * bound[p] = |alpha * s| * sum_t |A_it B_jt| that the float error is measured against. */
void fx_sddmm_ref(const mf_sparse *S, int k, const float *A, int64_t lda, const float *B,
                  int64_t ldb, double alpha, int pattern, double *ref, double *bound);

/* The float64 reference of mf_sddmm_ex at `precision` on the factors as the precision rounds
 * them (sddmm_round.h; 3xTF32 as big*big + big*small + small*big): what an exact sum of the
 * rounded products gives, so that CPU and GPU differ from it by float accumulation alone.
 * bound[p] is alpha * s * sum_t |rounded products|. slack (NULL: not wanted) gets fp16's
 * absolute loss below 2^-14, which the header's relative bound leaves out: |alpha s| sum_t
 * (2^-24 (|A_it| + |B_jt|) + 2^-48) for MF_PRECISION_FP16, 0 for the others. */
void fx_sddmm_ref_rounded(const mf_sparse *S, int k, const float *A, int64_t lda, const float *B,
                          int64_t ldb, double alpha, int pattern, mf_precision precision,
                          double *ref, double *bound, double *slack);

/* The header's bound for `precision` (mfact.h, mf_precision), relative to
 * |alpha s| sum_t |A_it B_jt|, for factors whose entries lie in fp16's normal range. */
double fx_precision_bound(mf_precision precision, int k);

/* Check got[p] against ref[p] + beta * before[p] (before NULL when beta == 0): every entry
 * within rel * bound[p] + slack[p] (slack NULL: 0) plus the rounding of alpha, s and beta's
 * terms. Returns the largest error relative to bound[p]. */
double fx_check_relative(const char *what, int64_t nnz, const float *got, const double *ref,
                         const double *bound, double rel, const double *slack, double beta,
                         const float *before);

/* Check got[p] against ref[p] + beta * before[p] (before NULL when beta == 0): every entry
 * within 2 k 2^-24 bound[p] plus beta's rounding, and the norm-wise relative error below
 * 1e-5. Fails the running test with `what` in the message. */
void fx_check_sddmm(const char *what, int64_t nnz, int k, const float *got, const double *ref,
                    const double *bound, double beta, const float *before);

/* mf_spmm(op, n columns, alpha 0.75, beta -2) on host arrays with padded leading
 * dimensions, checked against a float64 loop; the padding must stay untouched. */
void fx_check_spmm(mf_ctx *ctx, mf_sparse *S, mf_op op, int64_t n);

#endif
