/* mf_fold_in_users: new users of an explicit-ratings model, each row's regularized least
 * squares (factors and, with biases, the user bias as one more unknown whose feature is 1)
 * solved by Cholesky in double on the host, OpenMP over the rows. On a CUDA context the
 * model's arrays are staged to the host and the results copied back: a fold-in touches
 * each new user once, and the rows are short. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cholesky.h"
#include "core/ctx.h"
#include "core/model.h"
#include "core/sparse.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"
#include "recommend/recommend_internal.h"

#define MF_FOLD_IN_MAX_K 1024

/* Every value the solves read from the model is finite: a NaN in V would fail a row's
 * Cholesky as "not positive definite", and an infinite item bias would give NaN factors
 * and MF_OK. Names the first value that is not (mf_model_check has seen to the mean). */
static mf_status check_finite(mf_ctx *ctx, const char *fn, const mf_model *m, const float *V,
                              const float *item_bias)
{
    for (int32_t i = 0; i < m->items; i++) {
        for (int a = 0; a < m->k; a++)
            if (!isfinite(V[(int64_t)i * m->ldv + a]))
                return mf_fail(ctx, MF_ERR_INVALID_DATA,
                               "%s: the model's V[%d][%d] = %g is not finite", fn, i, a,
                               (double)V[(int64_t)i * m->ldv + a]);
        if (item_bias && !isfinite(item_bias[i]))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "%s: the model's item_bias[%d] = %g is not finite", fn, i,
                           (double)item_bias[i]);
    }
    return MF_OK;
}

mf_status mf_fold_in_users(mf_ctx *ctx, const mf_model *model, const mf_sparse *ratings,
                           float lambda, float lambda_bias, float *U, float *user_bias)
{
    static const char fn[] = "mf_fold_in_users";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    mf_model m;
    MF_TRY(mf_model_check(ctx, model, fn, &m));
    /* Each thread holds a (k + 1)^2 system in double and each row's solve is O(k^3): beyond
     * the ranks mfact's explicit trainers fit (ALS 256, SGD 512), with margin, that is memory
     * and time out of proportion to a model that may have a handful of items. */
    MF_REQUIRE(ctx, m.k <= MF_FOLD_IN_MAX_K,
               "%s: the model's k = %d is above %d, the largest this exact solve takes", fn, m.k,
               MF_FOLD_IN_MAX_K);
    MF_REQUIRE(ctx, ratings, "%s: ratings is NULL", fn);
    MF_REQUIRE(ctx, ratings->ctx == ctx, "%s: ratings belongs to another context", fn);
    MF_REQUIRE(ctx, ratings->cols == m.items,
               "%s: ratings has %d columns but the model has %d items", fn, ratings->cols, m.items);
    MF_REQUIRE(ctx, lambda >= 0.0f && isfinite(lambda), "%s: lambda = %g must be finite and >= 0",
               fn, (double)lambda);
    MF_REQUIRE(ctx, lambda_bias >= 0.0f && isfinite(lambda_bias),
               "%s: lambda_bias = %g must be finite and >= 0", fn, (double)lambda_bias);
    const int biased = m.user_bias != NULL;
    MF_REQUIRE(ctx, U, "%s: U is NULL", fn);
    MF_REQUIRE(ctx, !biased || user_bias,
               "%s: the model has user biases, so user_bias must not be NULL", fn);
    MF_TRY(mf_check_memory(ctx, U, m.where, fn, "U"));
    if (biased)
        MF_TRY(mf_check_memory(ctx, user_bias, m.where, fn, "user_bias"));
    const int k = m.k, n = k + biased;
    const int32_t rows = ratings->rows;
    void *own[2] = {NULL, NULL};
    const void *V = m.V, *ib = m.item_bias;
    mf_status st = mf_rec_host_copy(ctx, &V, mf_matrix_bytes(m.items, k, m.ldv), m.where, &own[0]);
    if (st == MF_OK)
        st = mf_rec_host_copy(ctx, &ib, (size_t)m.items * sizeof(float), m.where, &own[1]);
    if (st == MF_OK)
        st = check_finite(ctx, fn, &m, V, ib);
    float *X = st == MF_OK ? malloc(((size_t)rows * k + 1) * sizeof *X) : NULL;
    float *B = st == MF_OK ? malloc(((size_t)rows + 1) * sizeof *B) : NULL;
    if (st == MF_OK && (!X || !B))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    int32_t failed = -1;
    int failed_pivot = -1, no_memory = 0;
    if (st == MF_OK) {
        const float *Vh = V, *ibh = ib;
        const mf_sparse *R = ratings;
#pragma omp parallel num_threads(mf_ctx_threads(ctx))
        {
            double *A = malloc(((size_t)n * n + n) * sizeof *A);
            if (!A) {
#pragma omp atomic write
                no_memory = 1;
            }
#pragma omp for schedule(dynamic, 16)
            for (int32_t r = 0; r < rows; r++) {
                if (!A)
                    continue;
                double *b = A + (size_t)n * n;
                memset(A, 0, ((size_t)n * n + n) * sizeof *A);
                const int64_t p0 = R->row_ptr[r], p1 = R->row_ptr[r + 1];
                for (int64_t p = p0; p < p1; p++) {
                    const int32_t i = R->col[p];
                    const float *v = Vh + (int64_t)i * m.ldv;
                    const double t =
                        (double)(R->val ? R->val[p] : 1.0f) - m.mean - (ibh ? ibh[i] : 0.0f);
                    for (int a = 0; a < k; a++) {
                        for (int c = 0; c <= a; c++)
                            A[(size_t)a * n + c] += (double)v[a] * v[c];
                        b[a] += t * v[a];
                    }
                    if (biased) { /* the bias unknown: feature 1 */
                        for (int c = 0; c < k; c++)
                            A[(size_t)k * n + c] += v[c];
                        A[(size_t)k * n + k] += 1.0;
                        b[k] += t;
                    }
                }
                float *x = X + (int64_t)r * k;
                if (p0 == p1) {
                    memset(x, 0, (size_t)k * sizeof *x);
                    B[r] = 0.0f;
                    continue;
                }
                for (int a = 0; a < k; a++)
                    A[(size_t)a * n + a] += lambda;
                if (biased)
                    A[(size_t)k * n + k] += lambda_bias;
                const int bad = mf_cholesky_solve(n, A, b);
                if (bad >= 0) {
#pragma omp critical(mf_fold_in_failed)
                    if (failed < 0 || r < failed)
                        failed = r, failed_pivot = bad;
                    continue;
                }
                for (int a = 0; a < k; a++)
                    x[a] = (float)b[a];
                B[r] = biased ? (float)b[k] : 0.0f;
            }
            free(A);
        }
        if (no_memory)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
        else if (failed >= 0)
            st = mf_fail(ctx, MF_ERR_NUMERIC,
                         "%s: the system of row %d is not positive definite (pivot %d); lambda > "
                         "0 keeps every system positive definite",
                         fn, failed, failed_pivot);
    }
    if (st == MF_OK && rows > 0) { /* hand over */
        if (m.where == MF_MEMORY_DEVICE) {
            st = mf_cuda_copy(ctx, U, X, (size_t)rows * k * sizeof *X);
            if (st == MF_OK && biased)
                st = mf_cuda_copy(ctx, user_bias, B, (size_t)rows * sizeof *B);
        } else {
            memcpy(U, X, (size_t)rows * k * sizeof *X);
            if (biased)
                memcpy(user_bias, B, (size_t)rows * sizeof *B);
        }
    }
    free(X);
    free(B);
    free(own[0]);
    free(own[1]);
    return st;
}
