/* Biased explicit-ratings models on the CPU: ALS's biased solves against a float64
 * reference, planted recovery of mean + biases + U V^T by ALS and SGD, users and items
 * without ratings (and beyond the model) predicted from what is known, the prediction
 * calls against a direct computation and their bad inputs, tuning, and MF_SPARSE_KEEP_LAST. */
#include <math.h>
#include <string.h>

#include "als_fixtures.h"
#include "sddmm/sddmm_round.h"
#include "testutil.h"

/* r = mean + bu + bi + U* . V* at a seeded pattern (every row and column rated at least
 * min_count times), plus noise of standard deviation `noise`. */
static mf_sparse *planted_biased(mf_ctx *ctx, int32_t users, int32_t items, int k, double density,
                                 double noise, uint64_t seed)
{
    uint64_t st = seed;
    double *U = malloc((size_t)users * k * sizeof *U), *V = malloc((size_t)items * k * sizeof *V);
    double *bu = malloc((size_t)users * sizeof *bu), *bi = malloc((size_t)items * sizeof *bi);
    for (int64_t p = 0; p < (int64_t)users * k; p++)
        U[p] = tu_unit(&st) - 0.5;
    for (int64_t p = 0; p < (int64_t)items * k; p++)
        V[p] = tu_unit(&st) - 0.5;
    for (int32_t u = 0; u < users; u++)
        bu[u] = 2.0 * tu_unit(&st) - 1.0;
    for (int32_t i = 0; i < items; i++)
        bi[i] = 2.0 * tu_unit(&st) - 1.0;
    int64_t cap = (int64_t)users * items;
    int32_t *r = malloc((size_t)cap * sizeof *r), *c = malloc((size_t)cap * sizeof *c);
    float *v = malloc((size_t)cap * sizeof *v);
    int64_t n = 0;
    for (int32_t u = 0; u < users; u++)
        for (int32_t i = 0; i < items; i++) {
            /* a diagonal band keeps every row and column rated */
            if (tu_unit(&st) >= density && (u + i) % 7 != 0)
                continue;
            double x = 3.5 + bu[u] + bi[i];
            for (int t = 0; t < k; t++)
                x += U[(int64_t)u * k + t] * V[(int64_t)i * k + t];
            double g = sqrt(-2.0 * log(tu_unit(&st) + 1e-300)) * cos(6.283185307 * tu_unit(&st));
            r[n] = u, c[n] = i, v[n] = (float)(x + noise * g), n++;
        }
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, users, items, n, r, c, v, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(U), free(V), free(bu), free(bi), free(r), free(c), free(v);
    return R;
}

/* One biased ALS half-step in float64: rows of X (and xb) from F (and fb). */
static void ref_half(int32_t rows, const int64_t *ptr, const int32_t *idx, const float *val, int k,
                     double lambda, double lambda_b, int weighted, double mean, const double *F,
                     const double *fb, double *X, double *xb)
{
    const int n = k + 1;
    double *A = malloc((size_t)n * n * sizeof *A), *b = malloc((size_t)n * sizeof *b);
    for (int32_t r = 0; r < rows; r++) {
        memset(A, 0, (size_t)n * n * sizeof *A);
        memset(b, 0, (size_t)n * sizeof *b);
        int64_t cnt = ptr[r + 1] - ptr[r];
        for (int64_t p = ptr[r]; p < ptr[r + 1]; p++) {
            double f[257];
            for (int t = 0; t < k; t++)
                f[t] = F[(int64_t)idx[p] * k + t];
            f[k] = 1.0;
            double y = val[p] - mean - fb[idx[p]];
            for (int a = 0; a < n; a++) {
                for (int c = 0; c < n; c++)
                    A[a * n + c] += f[a] * f[c];
                b[a] += y * f[a];
            }
        }
        const double w = weighted ? (double)cnt : 1.0;
        for (int a = 0; a < k; a++)
            A[a * n + a] += lambda * w;
        A[k * n + k] += lambda_b * w;
        /* Gaussian elimination (SPD: no pivoting needed) */
        for (int a = 0; a < n; a++)
            for (int c = a + 1; c < n; c++) {
                double m = A[c * n + a] / A[a * n + a];
                for (int d = a; d < n; d++)
                    A[c * n + d] -= m * A[a * n + d];
                b[c] -= m * b[a];
            }
        for (int a = n - 1; a >= 0; a--) {
            double s = b[a];
            for (int d = a + 1; d < n; d++)
                s -= A[a * n + d] * b[d];
            b[a] = s / A[a * n + a];
        }
        for (int t = 0; t < k; t++)
            X[(int64_t)r * k + t] = b[t];
        xb[r] = b[k];
    }
    free(A), free(b);
}

START_TEST(als_biases_match_float64)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int32_t users = 40, items = 30;
    const int k = 4, iterations = 3;
    mf_sparse *R = ax_ratings(ctx, users, items, 0.3, 5, NULL, NULL);
    int64_t nnz;
    mf_sparse_shape(R, NULL, NULL, &nnz);
    int64_t *rp = malloc((users + 1) * sizeof *rp);
    int32_t *ci = malloc((size_t)nnz * sizeof *ci), *ri = malloc((size_t)nnz * sizeof *ri);
    float *val = malloc((size_t)nnz * sizeof *val);
    ck_assert_int_eq(mf_sparse_get_csr(R, rp, ci, val, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(mf_sparse_get_coo(R, ri, NULL, NULL, MF_MEMORY_HOST), MF_OK);
    /* the transpose by counting */
    int64_t *cp = calloc(items + 1, sizeof *cp);
    int32_t *cr = malloc((size_t)nnz * sizeof *cr);
    float *cv = malloc((size_t)nnz * sizeof *cv);
    for (int64_t p = 0; p < nnz; p++)
        cp[ci[p] + 1]++;
    for (int32_t i = 0; i < items; i++)
        cp[i + 1] += cp[i];
    int64_t *next = malloc((items + 1) * sizeof *next);
    memcpy(next, cp, (items + 1) * sizeof *next);
    double mean = 0.0;
    for (int64_t p = 0; p < nnz; p++) {
        int64_t d = next[ci[p]]++;
        cr[d] = ri[p], cv[d] = val[p];
        mean += val[p];
    }
    mean = (double)(float)(mean / (double)nnz);
    float V0[30 * 4];
    uint64_t st = 3;
    for (int p = 0; p < items * k; p++)
        V0[p] = (float)tu_unit(&st);
    /* Both weightings: lambda times each row's count (ALS-WR), and lambda alone (with
     * penalties that matter at this size). */
    for (int weighted = 0; weighted < 2; weighted++) {
        const double lambda = weighted ? 0.1 : 1.5, lambda_b = weighted ? 0.3 : 2.0;
        double U[40 * 4], V[30 * 4], bu[40] = {0}, bi[30] = {0};
        for (int p = 0; p < items * k; p++)
            V[p] = V0[p];
        for (int it = 0; it < iterations; it++) {
            ref_half(users, rp, ci, val, k, lambda, lambda_b, weighted, mean, V, bi, U, bu);
            ref_half(items, cp, cr, cv, k, lambda, lambda_b, weighted, mean, U, bu, V, bi);
        }
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = k, o.lambda = (float)lambda, o.lambda_bias = (float)lambda_b;
        o.iterations = iterations, o.init = MF_ALS_INIT_GIVEN;
        o.weighting = weighted ? MF_ALS_WEIGHT_COUNT : MF_ALS_WEIGHT_NONE;
        float Uf[40 * 4], Vf[30 * 4], buf[40], bif[30];
        memcpy(Vf, V0, sizeof Vf);
        mf_biases out = {NAN, buf, bif};
        o.bias_out = &out;
        ck_assert_int_eq(mf_als_run(ctx, R, &o, Uf, Vf, MF_MEMORY_HOST, NULL), MF_OK);
        ck_assert_double_eq_tol(out.mean, mean, 1e-6);
        double worst = 0.0;
        for (int p = 0; p < users * k; p++)
            worst = fmax(worst, fabs(Uf[p] - U[p]));
        for (int p = 0; p < items * k; p++)
            worst = fmax(worst, fabs(Vf[p] - V[p]));
        for (int p = 0; p < users; p++)
            worst = fmax(worst, fabs(buf[p] - bu[p]));
        for (int p = 0; p < items; p++)
            worst = fmax(worst, fabs(bif[p] - bi[p]));
        ck_assert_msg(worst < 2e-4, "weighted %d: largest difference from float64: %g", weighted,
                      worst);
    }
    free(rp), free(ci), free(ri), free(val), free(cp), free(cr), free(cv), free(next);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Both algorithms recover mean + biases + U V^T; held-out entries too. */
START_TEST(planted_biases_recovered)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = planted_biased(ctx, 200, 150, 3, 0.3, 0.0, 21);
    mf_sparse *T = planted_biased(ctx, 200, 150, 3, 0.05, 0.0, 21); /* the same model */
    float U[200 * 3], V[150 * 3], bu[200], bi[150];
    mf_biases out = {NAN, bu, bi};
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 3, o.lambda = 1e-4f, o.lambda_bias = 1e-4f, o.iterations = 40, o.bias_out = &out;
    o.test = T;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_msg(rep.train_rmse < 5e-3 && rep.test_rmse < 1e-2, "ALS: train %g, test %g",
                  rep.train_rmse, rep.test_rmse);
    /* the model's RMSE, through the public call, is the report's */
    mf_model m;
    mf_model_init(&m);
    m.users = 200, m.items = 150, m.k = 3, m.U = U, m.ldu = 3, m.V = V, m.ldv = 3;
    m.mean = out.mean, m.user_bias = bu, m.item_bias = bi;
    double rmse = NAN;
    ck_assert_int_eq(mf_model_rmse(ctx, &m, T, &rmse), MF_OK);
    ck_assert_double_eq_tol(rmse, rep.test_rmse, 1e-5);

    mf_sgd_opts s;
    mf_sgd_opts_init(&s);
    s.rank = 3, s.epochs = 300, s.learning_rate = 0.02f, s.lambda_u = s.lambda_v = 1e-4f;
    s.schedule = MF_SGD_SCHEDULE_CONSTANT;
    s.lambda_bias = 1e-4f, s.workers = 1, s.test = T, s.bias_out = &out;
    mf_sgd_report srep = {.struct_size = sizeof srep};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &s, U, V, MF_MEMORY_HOST, &srep), MF_OK);
    ck_assert_msg(srep.test_rmse < 0.1, "SGD: train %g, test %g", srep.train_rmse, srep.test_rmse);
    /* the plain model on the same data: far worse, so the biases did the work */
    const double biased = srep.test_rmse;
    s.biases = 0;
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &s, U, V, MF_MEMORY_HOST, &srep), MF_OK);
    ck_assert_msg(srep.test_rmse > 2 * biased, "plain %g, biased %g", srep.test_rmse, biased);
    ck_assert_float_eq(out.mean, 0.0f);
    ck_assert_float_eq(bu[0], 0.0f);
    mf_sparse_destroy(R);
    mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A user and an item without ratings, and ids past the model: mean + the known bias. */
START_TEST(unseen_predict_from_what_is_known)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int32_t no_users[] = {3, -1}, no_items[] = {5, -1};
    mf_sparse *R = ax_ratings(ctx, 20, 12, 0.5, 9, no_users, no_items);
    for (int algo = 0; algo < 2; algo++) {
        float U[20 * 4], V[12 * 4], bu[20], bi[12];
        mf_biases out = {NAN, bu, bi};
        if (algo == 0) {
            mf_als_opts o;
            mf_als_opts_init(&o);
            o.rank = 4, o.bias_out = &out;
            ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
        } else {
            mf_sgd_opts o;
            mf_sgd_opts_init(&o);
            o.rank = 4, o.bias_out = &out;
            ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
        }
        ck_assert_float_eq(bu[3], 0.0f);
        ck_assert_float_eq(bi[5], 0.0f);
        for (int t = 0; t < 4; t++)
            ck_assert(U[3 * 4 + t] == 0.0f && V[5 * 4 + t] == 0.0f);
        mf_model m;
        mf_model_init(&m);
        m.users = 20, m.items = 12, m.k = 4, m.U = U, m.ldu = 4, m.V = V, m.ldv = 4;
        m.mean = out.mean, m.user_bias = bu, m.item_bias = bi;
        int32_t pu[] = {3, 25, 25, 0}, pi[] = {2, 2, 40, 5};
        float pred[4];
        ck_assert_int_eq(mf_predict_pairs(ctx, &m, 4, pu, pi, pred), MF_OK);
        ck_assert_float_eq_tol(pred[0], out.mean + bi[2], 1e-6f); /* unrated user */
        ck_assert_float_eq_tol(pred[1], out.mean + bi[2], 1e-6f); /* user past the model */
        ck_assert_float_eq_tol(pred[2], out.mean, 1e-6f);         /* both past it */
        ck_assert_float_eq_tol(pred[3], out.mean + bu[0], 1e-6f); /* unrated item */
        /* a matrix larger than the model: the same rule at its entries */
        int32_t r[] = {0, 25}, c[] = {40, 2};
        mf_sparse *S = NULL;
        ck_assert_int_eq(mf_sparse_from_coo(ctx, &S, 30, 50, 2, r, c, NULL, MF_MEMORY_HOST, 0),
                         MF_OK);
        ck_assert_int_eq(mf_predict(ctx, &m, S, pred), MF_OK);
        ck_assert_float_eq_tol(pred[0], out.mean + bu[0], 1e-6f);
        ck_assert_float_eq_tol(pred[1], out.mean + bi[2], 1e-6f);
        mf_sparse_destroy(S);
    }
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* mf_predict at a model-shaped matrix equals the direct sum; pairs agree. */
START_TEST(predictions_are_the_model)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_ratings(ctx, 15, 10, 0.4, 4, NULL, NULL);
    int64_t nnz;
    mf_sparse_shape(R, NULL, NULL, &nnz);
    float U[15 * 3], V[10 * 3], bu[15], bi[10];
    uint64_t st = 8;
    for (int p = 0; p < 45; p++)
        U[p] = (float)tu_unit(&st);
    for (int p = 0; p < 30; p++)
        V[p] = (float)tu_unit(&st);
    for (int p = 0; p < 15; p++)
        bu[p] = (float)tu_unit(&st);
    for (int p = 0; p < 10; p++)
        bi[p] = (float)tu_unit(&st);
    mf_model m;
    mf_model_init(&m);
    m.users = 15, m.items = 10, m.k = 3, m.U = U, m.ldu = 3, m.V = V, m.ldv = 3;
    m.mean = 3.25f, m.user_bias = bu, m.item_bias = bi;
    int32_t *r = malloc((size_t)nnz * sizeof *r), *c = malloc((size_t)nnz * sizeof *c);
    float *pred = malloc((size_t)nnz * sizeof *pred), *pp = malloc((size_t)nnz * sizeof *pp);
    ck_assert_int_eq(mf_sparse_get_coo(R, r, c, NULL, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(mf_predict(ctx, &m, R, pred), MF_OK);
    ck_assert_int_eq(mf_predict_pairs(ctx, &m, nnz, r, c, pp), MF_OK);
    for (int64_t p = 0; p < nnz; p++) {
        double x = 3.25 + bu[r[p]] + bi[c[p]];
        for (int t = 0; t < 3; t++)
            x += (double)U[r[p] * 3 + t] * V[c[p] * 3 + t];
        ck_assert_double_eq_tol(pred[p], x, 1e-5);
        ck_assert_double_eq_tol(pp[p], x, 1e-5);
    }
    /* Bad inputs: a clear status, out untouched. */
    float keep[2] = {-7.0f, -7.0f};
    int32_t bad_u[] = {1, -2}, bad_i[] = {0, 0};
    ck_assert_int_eq(mf_predict_pairs(ctx, &m, 2, bad_u, bad_i, keep), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "pair 1");
    ck_assert(keep[0] == -7.0f && keep[1] == -7.0f);
    mf_model b = m;
    b.k = 0;
    ck_assert_int_eq(mf_predict(ctx, &b, R, pred), MF_ERR_INVALID_ARGUMENT);
    b = m, b.mean = NAN;
    ck_assert_int_eq(mf_predict(ctx, &b, R, pred), MF_ERR_INVALID_ARGUMENT);
    b = m, b.ldv = 2;
    ck_assert_int_eq(mf_predict_pairs(ctx, &b, 1, r, c, keep), MF_ERR_INVALID_ARGUMENT);
    /* leading dimensions whose span overflows the address space (10 items, 15 users) */
    b = m, b.ldv = INT64_MAX / 4;
    ck_assert_int_eq(mf_predict_pairs(ctx, &b, 1, r, c, keep), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ldv = 2305843009213693951 over 10 rows spans more memory");
    b = m, b.ldu = INT64_MAX;
    ck_assert_int_eq(mf_predict(ctx, &b, R, pred), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ldu = 9223372036854775807 over 15 rows");
    b = m, b.struct_size = 0;
    ck_assert_int_eq(mf_model_rmse(ctx, &b, R, &(double){0}), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_predict(ctx, NULL, R, pred), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_predict(ctx, &m, NULL, pred), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_predict_pairs(ctx, &m, -1, r, c, pp), MF_ERR_INVALID_ARGUMENT);
    ck_assert(keep[0] == -7.0f);
    free(r), free(c), free(pred), free(pp);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* model.precision: mf_predict (the SDDMM path and, for a matrix with unseen users, the pairs
 * path), mf_predict_pairs and mf_model_rmse use the rounded factors: each prediction within
 * float accumulation of the float64 sum of the rounded products, TF32, BF16 and FP16
 * visibly apart from float, 3XTF32 within float's bound; a precision outside the enum fails
 * with out untouched. */
START_TEST(reduced_precision_predictions)
{
    mf_ctx *ctx = tu_cpu_ctx();
    enum { USERS = 40, ITEMS = 30, K = 20 };
    mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.5, 4, NULL, NULL);
    /* the same entries plus a row of an unseen user: mf_predict's pairs path */
    mf_sparse *W = ax_ratings(ctx, USERS + 1, ITEMS, 0.5, 4, NULL, NULL);
    int64_t nnz, wnz;
    mf_sparse_shape(R, NULL, NULL, &nnz);
    mf_sparse_shape(W, NULL, NULL, &wnz);
    float U[USERS * K], V[ITEMS * K], bu[USERS], bi[ITEMS];
    uint64_t st = 21;
    for (int p = 0; p < USERS * K; p++)
        U[p] = (float)(tu_unit(&st) - 0.5);
    for (int p = 0; p < ITEMS * K; p++)
        V[p] = (float)(tu_unit(&st) - 0.5);
    for (int p = 0; p < USERS; p++)
        bu[p] = (float)tu_unit(&st);
    for (int p = 0; p < ITEMS; p++)
        bi[p] = (float)tu_unit(&st);
    mf_model m;
    mf_model_init(&m);
    ck_assert_int_eq(m.precision, MF_PRECISION_FP32);
    m.users = USERS, m.items = ITEMS, m.k = K, m.U = U, m.ldu = K, m.V = V, m.ldv = K;
    m.mean = 3.0f, m.user_bias = bu, m.item_bias = bi;
    const int64_t n = wnz > nnz ? wnz : nnz;
    int32_t *r = malloc((size_t)n * sizeof *r), *c = malloc((size_t)n * sizeof *c);
    float *vals = malloc((size_t)nnz * sizeof *vals), *pred = malloc((size_t)n * sizeof *pred),
          *pp = malloc((size_t)n * sizeof *pp), *exact = malloc((size_t)nnz * sizeof *exact);
    ck_assert_int_eq(mf_sparse_get_coo(R, r, c, vals, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(mf_predict(ctx, &m, R, exact), MF_OK);
    for (int prec = MF_PRECISION_3XTF32; prec <= MF_PRECISION_FP16; prec++) {
        m.precision = (mf_precision)prec;
        ck_assert_int_eq(mf_predict(ctx, &m, R, pred), MF_OK);
        ck_assert_int_eq(mf_predict_pairs(ctx, &m, nnz, r, c, pp), MF_OK);
        double worst_apart = 0.0, sq = 0.0;
        for (int64_t p = 0; p < nnz; p++) {
            double x = 0.0, mag = 0.0;
            for (int t = 0; t < K; t++) {
                const double a = mf_round_to(U[r[p] * K + t], prec),
                             b = mf_round_to(V[c[p] * K + t], prec);
                x += a * b, mag += fabs(a * b);
            }
            const double base = 3.0 + bu[r[p]] + bi[c[p]];
            /* float sums of K exact products, then three bias additions */
            const double tol = 2.0 * (K + 4) * ldexp(1.0, -24) * (mag + fabs(base) + 2.0);
            ck_assert_msg(fabs(pred[p] - (base + x)) <= tol,
                          "precision %d entry %lld: %.9g vs %.9g", prec, (long long)p,
                          (double)pred[p], base + x);
            ck_assert_msg(fabs(pp[p] - (base + x)) <= tol, "precision %d pair %lld: %.9g vs %.9g",
                          prec, (long long)p, (double)pp[p], base + x);
            worst_apart = fmax(worst_apart, fabs((double)pred[p] - exact[p]));
            sq += ((double)vals[p] - pred[p]) * ((double)vals[p] - pred[p]);
        }
        if (prec == MF_PRECISION_3XTF32)
            ck_assert_msg(worst_apart < 1e-5, "3xTF32 %.3g from float", worst_apart);
        else
            ck_assert_msg(worst_apart > 1e-5, "precision %d: %.3g from float, as if unrounded",
                          prec, worst_apart);
        double rmse = -1.0;
        ck_assert_int_eq(mf_model_rmse(ctx, &m, R, &rmse), MF_OK);
        ck_assert_double_eq_tol(rmse, sqrt(sq / (double)nnz), 1e-5);
        /* an unseen user: the pairs path rounds too, and agrees with the pairs call */
        ck_assert_int_eq(mf_predict(ctx, &m, W, pred), MF_OK);
        ck_assert_int_eq(mf_sparse_get_coo(W, r, c, NULL, MF_MEMORY_HOST), MF_OK);
        ck_assert_int_eq(mf_predict_pairs(ctx, &m, wnz, r, c, pp), MF_OK);
        for (int64_t p = 0; p < wnz; p++)
            ck_assert_float_eq(pred[p], pp[p]);
        ck_assert_int_eq(mf_sparse_get_coo(R, r, c, NULL, MF_MEMORY_HOST), MF_OK);
    }
    /* bad precisions: MF_ERR_INVALID_ARGUMENT naming the field, out untouched */
    const int bad[] = {-1, 5};
    for (int b = 0; b < 2; b++) {
        m.precision = (mf_precision)bad[b];
        float keep = -7.0f;
        ck_assert_int_eq(mf_predict(ctx, &m, R, pred), MF_ERR_INVALID_ARGUMENT);
        tu_assert_error_has(ctx, "precision");
        ck_assert_int_eq(mf_predict_pairs(ctx, &m, 1, r, c, &keep), MF_ERR_INVALID_ARGUMENT);
        ck_assert(keep == -7.0f);
        double rmse = -1.0;
        ck_assert_int_eq(mf_model_rmse(ctx, &m, R, &rmse), MF_ERR_INVALID_ARGUMENT);
        ck_assert(rmse == -1.0);
    }
    free(r), free(c), free(vals), free(pred), free(pp), free(exact);
    mf_sparse_destroy(R);
    mf_sparse_destroy(W);
    mf_ctx_destroy(ctx);
}
END_TEST

/* opts.tune picks a candidate, reports it, and the chosen rank's factors fill the first
 * columns; bad option values are rejected with the factors untouched. */
START_TEST(tuning_and_bad_options)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = planted_biased(ctx, 120, 90, 2, 0.3, 0.3, 5);
    float U[120 * 8], V[90 * 8];
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.lambda = 0.1f, o.tune = MF_TUNE_LAMBDA | MF_TUNE_RANK;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert(rep.rank == 8 || rep.rank == 4 || rep.rank == 2);
    int ok = 0;
    const float scales[] = {0.25f, 0.5f, 1, 2, 4};
    for (int i = 0; i < 5; i++)
        ok |= fabsf(rep.lambda - 0.1f * scales[i]) < 1e-7f;
    ck_assert_msg(ok, "lambda %g is not a candidate", (double)rep.lambda);
    ck_assert(isfinite(rep.validation_rmse) && rep.validation_rmse < 1.0);
    for (int u = 0; u < 120; u++)
        for (int t = rep.rank; t < 8; t++)
            ck_assert_float_eq(U[u * 8 + t], 0.0f);

    mf_sgd_opts s;
    mf_sgd_opts_init(&s);
    s.rank = 4, s.tune = MF_TUNE_LAMBDA;
    mf_sgd_report srep = {.struct_size = sizeof srep};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &s, U, V, MF_MEMORY_HOST, &srep), MF_OK);
    ck_assert(isfinite(srep.validation_rmse) && srep.rank == 4);

    float keep = U[0];
    mf_als_opts_init(&o);
    o.biases = 2;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    mf_als_opts_init(&o);
    o.lambda_bias = -1.0f;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "lambda_bias");
    mf_als_opts_init(&o);
    o.tune = 8;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    mf_sgd_opts_init(&s);
    s.lambda_bias = NAN;
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &s, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_float_eq(U[0], keep);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A rating given twice keeps the later value (building and reading); the flag does not
 * combine with summing. */
START_TEST(keep_last_duplicates)
{
    mf_ctx *ctx = tu_cpu_ctx();
    int32_t r[] = {1, 0, 1}, c[] = {2, 0, 2};
    float v[] = {3.0f, 4.0f, 1.5f};
    mf_sparse *S = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &S, 2, 3, 3, r, c, v, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &S, 2, 3, 3, r, c, v, MF_MEMORY_HOST, MF_SPARSE_KEEP_LAST), MF_OK);
    float got[2];
    tu_expect_shape(S, 2, 3, 2);
    ck_assert_int_eq(mf_sparse_get_coo(S, NULL, NULL, got, MF_MEMORY_HOST), MF_OK);
    ck_assert(got[0] == 4.0f && got[1] == 1.5f);
    mf_sparse_destroy(S);
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &S, 2, 3, 3, r, c, v, MF_MEMORY_HOST,
                                        MF_SPARSE_KEEP_LAST | MF_SPARSE_SUM_DUPLICATES),
                     MF_ERR_INVALID_ARGUMENT);
    const char *path = tu_write_text(".txt", "1 1 3\n2 2 4\n1 1 2.5\n");
    mf_read_opts ro;
    mf_read_opts_init(&ro);
    ro.flags = MF_SPARSE_KEEP_LAST;
    ck_assert_int_eq(mf_sparse_read(ctx, &S, path, &ro), MF_OK);
    ck_assert_int_eq(mf_sparse_get_coo(S, NULL, NULL, got, MF_MEMORY_HOST), MF_OK);
    ck_assert(got[0] == 2.5f && got[1] == 4.0f);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "model"};
    const TTest *const tests[] = {
        als_biases_match_float64,     planted_biases_recovered, unseen_predict_from_what_is_known,
        predictions_are_the_model,    tuning_and_bad_options,   keep_last_duplicates,
        reduced_precision_predictions};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
