#include "ials_fixtures.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

ials_planted ials_make_planted(mf_ctx *ctx, int32_t users, int32_t items, int groups, double p_in,
                               double p_out, double test_fraction, uint64_t seed)
{
    ials_planted p = {NULL, NULL, users, items, NULL, NULL};
    uint64_t s = seed;
    p.user_group = malloc((size_t)users * sizeof *p.user_group);
    p.item_group = malloc((size_t)items * sizeof *p.item_group);
    for (int32_t u = 0; u < users; u++)
        p.user_group[u] = (int32_t)(tu_splitmix64(&s) % (uint64_t)groups);
    for (int32_t i = 0; i < items; i++)
        p.item_group[i] = (int32_t)(tu_splitmix64(&s) % (uint64_t)groups);
    int64_t cap = (int64_t)users * items;
    int32_t *r[2], *c[2];
    float *v[2];
    int64_t n[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        r[t] = malloc((size_t)cap * sizeof *r[t]);
        c[t] = malloc((size_t)cap * sizeof *c[t]);
        v[t] = malloc((size_t)cap * sizeof *v[t]);
    }
    for (int32_t u = 0; u < users; u++)
        for (int32_t i = 0; i < items; i++) {
            const double pop = 1.0 / sqrt(1.0 + i % 97); /* a popularity weight */
            const double q = (p.user_group[u] == p.item_group[i] ? p_in : p_out) * pop;
            if (tu_unit(&s) >= q)
                continue;
            const int t = tu_unit(&s) < test_fraction;
            r[t][n[t]] = u, c[t][n[t]] = i;
            v[t][n[t]] = (float)(1 + tu_splitmix64(&s) % 5);
            n[t]++;
        }
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &p.train, users, items, n[0], r[0], c[0], v[0], MF_MEMORY_HOST, 0),
        MF_OK);
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &p.test, users, items, n[1], r[1], c[1], v[1], MF_MEMORY_HOST, 0),
        MF_OK);
    for (int t = 0; t < 2; t++) {
        free(r[t]);
        free(c[t]);
        free(v[t]);
    }
    return p;
}

void ials_free_planted(ials_planted *p)
{
    mf_sparse_destroy(p->train);
    mf_sparse_destroy(p->test);
    free(p->user_group);
    free(p->item_group);
}

/* Solve the k x k SPD A x = b in place by Cholesky (double). */
static void chol_solve(int k, double *A, double *b)
{
    for (int j = 0; j < k; j++) {
        double d = A[j * k + j];
        for (int t = 0; t < j; t++)
            d -= A[j * k + t] * A[j * k + t];
        ck_assert_msg(d > 0.0, "the reference system is not positive definite");
        d = sqrt(d);
        A[j * k + j] = d;
        for (int i = j + 1; i < k; i++) {
            double s = A[i * k + j];
            for (int t = 0; t < j; t++)
                s -= A[i * k + t] * A[j * k + t];
            A[i * k + j] = s / d;
        }
    }
    for (int i = 0; i < k; i++) {
        double s = b[i];
        for (int t = 0; t < i; t++)
            s -= A[i * k + t] * b[t];
        b[i] = s / A[i * k + i];
    }
    for (int i = k - 1; i >= 0; i--) {
        double s = b[i];
        for (int t = i + 1; t < k; t++)
            s -= A[t * k + i] * b[t];
        b[i] = s / A[i * k + i];
    }
}

void ials_dense_half_step(const mf_sparse *R, int side, int k, double lambda, double alpha,
                          double eps, int log_conf, const double *F, double *X)
{
    int32_t users, items;
    int64_t nnz;
    mf_sparse_shape(R, &users, &items, &nnz);
    int32_t *row = malloc((size_t)(nnz + 1) * sizeof *row), *col = malloc((size_t)(nnz + 1) * 4);
    float *val = malloc((size_t)(nnz + 1) * sizeof *val);
    ck_assert_int_eq(mf_sparse_get_coo(R, row, col, val, MF_MEMORY_HOST), MF_OK);
    double *C = malloc((size_t)users * items * sizeof *C); /* confidence; P = (C stored) */
    unsigned char *P = calloc((size_t)users * items, 1);
    for (int64_t e = 0; e < (int64_t)users * items; e++)
        C[e] = 1.0;
    for (int64_t e = 0; e < nnz; e++) {
        const double r = val[e];
        C[(int64_t)row[e] * items + col[e]] = 1.0 + alpha * (log_conf ? log1p(r / eps) : r);
        P[(int64_t)row[e] * items + col[e]] = 1;
    }
    const int32_t rows = side == 0 ? users : items, others = side == 0 ? items : users;
    double *A = malloc((size_t)k * k * sizeof *A), *b = malloc((size_t)k * sizeof *b);
    for (int32_t r = 0; r < rows; r++) {
        memset(A, 0, (size_t)k * k * sizeof *A);
        memset(b, 0, (size_t)k * sizeof *b);
        int any = 0;
        for (int32_t j = 0; j < others; j++) {
            const int64_t e = side == 0 ? (int64_t)r * items + j : (int64_t)j * items + r;
            const double *f = F + (int64_t)j * k;
            for (int a = 0; a < k; a++) {
                for (int c = 0; c < k; c++)
                    A[a * k + c] += C[e] * f[a] * f[c];
                if (P[e])
                    b[a] += C[e] * f[a];
            }
            any |= P[e];
        }
        for (int a = 0; a < k; a++)
            A[a * k + a] += lambda;
        if (any)
            chol_solve(k, A, b);
        else
            memset(b, 0, (size_t)k * sizeof *b); /* the library's rule for empty rows */
        memcpy(X + (int64_t)r * k, b, (size_t)k * sizeof *b);
    }
    free(A);
    free(b);
    free(C);
    free(P);
    free(row);
    free(col);
    free(val);
}

void ials_brute_topn(const float *scores, const unsigned char *skip, int32_t n, int N,
                     int32_t *items, float *out_scores)
{
    unsigned char *taken = calloc((size_t)n + 1, 1);
    for (int j = 0; j < N; j++) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++) {
            if (taken[i] || (skip && skip[i]) || isnan(scores[i]))
                continue;
            if (best < 0 || scores[i] > scores[best])
                best = i; /* ascending i: the first of equal scores stays */
        }
        items[j] = best;
        out_scores[j] = best >= 0 ? scores[best] : -INFINITY;
        if (best >= 0)
            taken[best] = 1;
    }
    free(taken);
}
