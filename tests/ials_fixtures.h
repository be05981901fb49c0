/* Shared by the iALS and recommendation suites (CPU and GPU): planted implicit data, a
 * float64 reference of the full objective's row solves, and a brute-force top-N. */
#ifndef MF_IALS_FIXTURES_H
#define MF_IALS_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"

/* Interactions drawn from a planted preference: users and items in `groups` clusters, a user
 * interacting with items of its own cluster with probability p_in and others with p_out,
 * values (counts) 1..5; popular items (a Zipf-like weight) come up more often in every
 * cluster. *train and *test split the interactions (test_fraction of each user's). */
typedef struct ials_planted {
    mf_sparse *train, *test;
    int32_t users, items;
    int32_t *user_group, *item_group;
} ials_planted;

ials_planted ials_make_planted(mf_ctx *ctx, int32_t users, int32_t items, int groups, double p_in,
                               double p_out, double test_fraction, uint64_t seed);
void ials_free_planted(ials_planted *p);

/* One half-step of the full objective in float64, straight from its definition over every
 * (row, other) pair: X[r] = (sum_j c_rj F_j F_j^T + lambda I)^-1 sum_j c_rj p_rj F_j, with the
 * dense users x items C and P built from R (values r: c = 1 + alpha r, or 1 + alpha log(1 +
 * r / eps) with log_conf). side 0 solves users (rows of R) from F = V, side 1 items from U. */
void ials_dense_half_step(const mf_sparse *R, int side, int k, double lambda, double alpha,
                          double eps, int log_conf, const double *F, double *X);

/* The top-N of scores[0..n) by brute force (higher first, ties by smaller index), skipping
 * indices with skip[i] != 0 (skip may be NULL); padding -1 / -INFINITY. */
void ials_brute_topn(const float *scores, const unsigned char *skip, int32_t n, int N,
                     int32_t *items, float *out_scores);

/* mf_recommend on ctx (host arrays) for users + 2 ids (two unseen), with exclusions (a
 * third of the items; all but 3 for user 1), against ials_brute_topn on a model of small
 * integer factors (exact dot products, so exact ties): items and scores equal. */
void ials_check_recommend(mf_ctx *ctx, int32_t users, int32_t items, int k, int N, int biases);

/* mf_similar_items on ctx for every item against cosines in double (a zero row included). */
void ials_check_similar(mf_ctx *ctx, int32_t items, int k, int N);

#endif
