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

/* A model with small integer factors: dot products are exact, so ties are exact too. */
typedef struct int_model {
    mf_model m;
    float *U, *V, *ub, *ib;
} int_model;

static int_model make_int_model(int32_t users, int32_t items, int k, int biases, uint64_t seed)
{
    int_model t;
    uint64_t s = seed;
    t.U = malloc((size_t)users * k * sizeof *t.U);
    t.V = malloc((size_t)items * k * sizeof *t.V);
    t.ub = malloc((size_t)users * sizeof *t.ub);
    t.ib = malloc((size_t)items * sizeof *t.ib);
    for (int64_t i = 0; i < (int64_t)users * k; i++)
        t.U[i] = (float)((int)(tu_splitmix64(&s) % 5) - 2);
    for (int64_t i = 0; i < (int64_t)items * k; i++)
        t.V[i] = (float)((int)(tu_splitmix64(&s) % 3) - 1);
    for (int32_t i = 0; i < users; i++)
        t.ub[i] = (float)(tu_splitmix64(&s) % 3);
    for (int32_t i = 0; i < items; i++)
        t.ib[i] = (float)(tu_splitmix64(&s) % 2);
    mf_model_init(&t.m);
    t.m.users = users, t.m.items = items, t.m.k = k;
    t.m.U = t.U, t.m.ldu = k, t.m.V = t.V, t.m.ldv = k;
    t.m.mean = biases ? 0.5f : 0.0f;
    t.m.user_bias = biases ? t.ub : NULL;
    t.m.item_bias = biases ? t.ib : NULL;
    return t;
}

static void free_int_model(int_model *t)
{
    free(t->U);
    free(t->V);
    free(t->ub);
    free(t->ib);
}

void ials_check_recommend(mf_ctx *ctx, int32_t users, int32_t items, int k, int N, int biases)
{
    int_model t = make_int_model(users, items, k, biases, (uint64_t)(N * 131 + k));
    const mf_model *m = &t.m;
    /* Exclusions: a random third of the items, and all but 3 for user 1. */
    uint64_t s = 77;
    int32_t *er = malloc((size_t)users * items * sizeof *er),
            *ec = malloc((size_t)users * items * sizeof *ec);
    int64_t ne = 0;
    for (int32_t u = 0; u < users; u++)
        for (int32_t i = 0; i < items; i++)
            if (u == 1 ? i >= 3 : tu_unit(&s) < 0.33)
                er[ne] = u, ec[ne] = i, ne++;
    mf_sparse *E = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &E, users, items, ne, er, ec, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    const int64_t n = users + 2;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int64_t b = 0; b < n; b++)
        ids[b] = (int32_t)(n - 1 - b); /* unseen users first, any order */
    int32_t *got = malloc((size_t)n * N * sizeof *got), *want = malloc((size_t)N * sizeof *want);
    float *gs = malloc((size_t)n * N * sizeof *gs), *ws = malloc((size_t)N * sizeof *ws);
    float *sc = malloc((size_t)items * sizeof *sc);
    unsigned char *skip = malloc((size_t)items);
    ck_assert_msg(mf_recommend(ctx, m, n, ids, E, N, got, gs) == MF_OK, "%s",
                  mf_ctx_last_error(ctx));
    for (int64_t b = 0; b < n; b++) {
        const int32_t u = ids[b];
        for (int32_t i = 0; i < items; i++) {
            float dot = 0.0f;
            if (u < users)
                for (int c = 0; c < k; c++)
                    dot += t.U[(int64_t)u * k + c] * t.V[(int64_t)i * k + c];
            sc[i] = biases ? (m->mean + (u < users ? t.ub[u] : 0.0f) + t.ib[i]) + dot : dot;
            skip[i] = 0;
        }
        if (u < users)
            for (int64_t e = 0; e < ne; e++)
                if (er[e] == u)
                    skip[ec[e]] = 1;
        ials_brute_topn(sc, skip, items, N, want, ws);
        for (int j = 0; j < N; j++) {
            ck_assert_msg(got[b * N + j] == want[j], "user %d place %d: item %d, want %d", u, j,
                          got[b * N + j], want[j]);
            ck_assert_float_eq(gs[b * N + j], ws[j]);
        }
    }
    free(ids);
    free(got);
    free(want);
    free(gs);
    free(ws);
    free(sc);
    free(skip);
    free(er);
    free(ec);
    mf_sparse_destroy(E);
    free_int_model(&t);
}

void ials_check_similar(mf_ctx *ctx, int32_t items, int k, int N)
{
    int_model t = make_int_model(1, items, k, 0, 5);
    for (int c = 0; c < k; c++)
        t.V[3 * k + c] = 0.0f; /* a zero row: similarity 0 both ways */
    int32_t *ids = malloc((size_t)items * sizeof *ids), *got = malloc((size_t)items * N * 4);
    float *gs = malloc((size_t)items * N * sizeof *gs), *sc = malloc((size_t)items * 4);
    int32_t *want = malloc((size_t)N * sizeof *want);
    float *ws = malloc((size_t)N * sizeof *ws);
    unsigned char *skip = calloc((size_t)items, 1);
    for (int32_t i = 0; i < items; i++)
        ids[i] = i;
    ck_assert_int_eq(mf_similar_items(ctx, &t.m, items, ids, N, got, gs), MF_OK);
    for (int32_t q = 0; q < items; q++) {
        double nq = 0.0;
        for (int c = 0; c < k; c++)
            nq += (double)t.V[q * k + c] * t.V[q * k + c];
        for (int32_t i = 0; i < items; i++) {
            double d = 0.0, ni = 0.0;
            for (int c = 0; c < k; c++) {
                d += (double)t.V[q * k + c] * t.V[i * k + c];
                ni += (double)t.V[i * k + c] * t.V[i * k + c];
            }
            sc[i] = nq > 0 && ni > 0 ? (float)(d / sqrt(nq * ni)) : 0.0f;
        }
        skip[q] = 1;
        ials_brute_topn(sc, skip, items, N, want, ws);
        skip[q] = 0;
        for (int j = 0; j < N; j++) {
            /* Cosines in float may order near-equal values apart from double: compare the
             * scores, and the items where the scores are clearly apart. */
            if (isinf(ws[j])) { /* padding past the candidates */
                ck_assert(isinf(gs[q * N + j]) && gs[q * N + j] < 0 && got[q * N + j] == -1);
                continue;
            }
            ck_assert_float_eq_tol(gs[q * N + j], ws[j], 1e-5f);
            ck_assert(got[q * N + j] != q);
        }
    }
    free(ids);
    free(got);
    free(gs);
    free(sc);
    free(want);
    free(ws);
    free(skip);
    free_int_model(&t);
}
