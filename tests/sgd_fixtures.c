#include "sgd_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "als_fixtures.h"
#include "core/ctx.h"
#include "sgd/sgd_internal.h"
#include "sgd/sgd_rules.h"
#include "testutil.h"

void sx_run(mf_ctx *ctx, const mf_sparse *R, const mf_sgd_opts *o, mf_status expect,
            mf_sgd_report *rep, float **U, float **V)
{
    int32_t users, items;
    ck_assert_int_eq(mf_sparse_shape(R, &users, &items, NULL), MF_OK);
    float *u = malloc(((size_t)users * o->rank + 1) * sizeof *u);
    float *v = malloc(((size_t)items * o->rank + 1) * sizeof *v);
    ck_assert(u && v);
    rep->struct_size = sizeof *rep;
    mf_status st = mf_sgd_hogwild_run(ctx, R, o, u, v, MF_MEMORY_HOST, rep);
    ck_assert_msg(st == expect, "status %d, expected %d: %s", (int)st, (int)expect,
                  mf_ctx_last_error(ctx));
    if (U)
        *U = u;
    else
        free(u);
    if (V)
        *V = v;
    else
        free(v);
}

void sx_noisy(mf_ctx *ctx, int32_t users, int32_t items, double density, uint64_t seed,
              mf_sparse **train, mf_sparse **test)
{
    sx_popular(ctx, users, items, density, 0, seed, train, test);
}

void sx_popular(mf_ctx *ctx, int32_t users, int32_t items, double density, int32_t popular,
                uint64_t seed, mf_sparse **train, mf_sparse **test)
{
    enum { RANK = 4 };
    uint64_t s = seed;
    size_t cap = (size_t)users * items;
    int32_t *row = malloc(cap * sizeof *row), *col = malloc(cap * sizeof *col);
    float *val = malloc(cap * sizeof *val);
    int32_t *row2 = malloc(cap * sizeof *row2), *col2 = malloc(cap * sizeof *col2);
    float *val2 = malloc(cap * sizeof *val2);
    double *U = malloc((size_t)users * RANK * sizeof *U), *V = malloc((size_t)items * RANK * 8);
    ck_assert(row && col && val && row2 && col2 && val2 && U && V);
    for (int64_t p = 0; p < (int64_t)users * RANK; p++)
        U[p] = 1.4 * tu_unit(&s) - 0.7;
    for (int64_t p = 0; p < (int64_t)items * RANK; p++)
        V[p] = 1.4 * tu_unit(&s) - 0.7;
    int64_t a = 0, b = 0;
    for (int32_t u = 0; u < users; u++)
        for (int32_t i = 0; i < items; i++) {
            if (tu_unit(&s) >= density && i >= popular && i != u % items && u != i % users)
                continue;
            double d = 3.0;
            for (int t = 0; t < RANK; t++)
                d += U[(int64_t)u * RANK + t] * V[(int64_t)i * RANK + t];
            double g =
                sqrt(-2.0 * log(tu_unit(&s) + 1e-300)) * cos(6.283185307179586 * tu_unit(&s));
            d += 0.25 * g;
            if (tu_unit(&s) < 0.1)
                row2[b] = u, col2[b] = i, val2[b] = (float)d, b++;
            else
                row[a] = u, col[a] = i, val[a] = (float)d, a++;
        }
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, train, users, items, a, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, test, users, items, b, row2, col2, val2, MF_MEMORY_HOST, 0), MF_OK);
    free(row), free(col), free(val), free(row2), free(col2), free(val2), free(U), free(V);
}

/* The update of the documentation, in the CPU engine's operation order. */
static float replay_update(int k, float *u, float *v, float r, float lr, float lu, float lv)
{
    float dot = 0.0f;
    for (int t = 0; t < k; t++)
        dot += u[t] * v[t];
    float err = r - dot;
    for (int t = 0; t < k; t++) {
        float ut = u[t], vt = v[t];
        u[t] = ut + lr * (err * vt - lu * ut);
        v[t] = vt + lr * (err * ut - lv * vt);
    }
    return err;
}

void sx_replay(mf_ctx *ctx, const mf_sparse *R, const mf_sgd_opts *o, float *U, float *V)
{
    mf_sgd_plan plan;
    ck_assert_int_eq(mf_sgd_plan_build(ctx, R, o->order, ctx->seed, &plan), MF_OK);
    const int k = o->rank;
    for (int t = 0; t < o->epochs; t++) {
        float lr =
            mf_sgd_rate(o->learning_rate, o->schedule == MF_SGD_SCHEDULE_INVERSE_TIME, o->decay, t);
        mf_sgd_perm perm = mf_sgd_perm_make((uint64_t)plan.nchunks, ctx->seed, (uint32_t)t);
        for (int64_t s = 0; s < plan.nchunks; s++) {
            int64_t c = (int64_t)mf_sgd_perm_apply(&perm, (uint64_t)s);
            for (int64_t q = plan.chunk_begin[c]; q < plan.chunk_begin[c + 1]; q++)
                replay_update(k, U + (int64_t)plan.user[q] * k, V + (int64_t)plan.entry[q].item * k,
                              plan.entry[q].rating, lr, o->lambda_u, o->lambda_v);
        }
    }
    mf_sgd_plan_free(&plan);
}

void sx_check_movielens(mf_ctx *ctx, const char *label)
{
    mf_sparse *train = NULL, *test = NULL;
    if (!ax_movielens(ctx, &train, &test)) {
        printf("movielens_quality (%s): ../shared/data absent, skipped\n", label);
        return;
    }
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = 10, o.test = test;
    mf_sgd_report rep;
    sx_run(ctx, train, &o, MF_OK, &rep, NULL, NULL);
    printf("movielens_quality (%s): k = 10, %d epochs, %d workers: train RMSE %.4f, test RMSE "
           "%.4f\n",
           label, rep.epochs, rep.workers, rep.train_rmse, rep.test_rmse);
    ck_assert_msg(rep.test_rmse <= 0.93, "%s: test RMSE %.4f above 0.93", label, rep.test_rmse);
    mf_sparse_destroy(train);
    mf_sparse_destroy(test);
}

void sx_run_failing(rk_job *jobs, int n, int64_t step, const char *what)
{
    mf_sgd_debug_fail_rank = 1;
    mf_sgd_debug_fail_step = step;
    rk_run_als(jobs, n);
    mf_sgd_debug_fail_rank = -1;
    mf_sgd_debug_fail_step = -1;
    char named[32];
    snprintf(named, sizeof named, "rank 1 of %d failed", n);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(jobs[i].st == MF_ERR_INTERNAL, "%s, step %lld, rank %d of %d: %s (%s)", what,
                      (long long)step, i, n, mf_status_string(jobs[i].st), jobs[i].error);
        ck_assert_msg(strstr(jobs[i].error, i == 1 ? "a test's failure" : named),
                      "%s, step %lld, rank %d of %d: %s", what, (long long)step, i, n,
                      jobs[i].error);
    }
}
