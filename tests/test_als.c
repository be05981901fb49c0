/* mf_als_run and its LDL^T solver on the CPU backend: a problem solved by hand, the solver
 * against float64, planted recovery, empty rows, cancellation, determinism, breakdown,
 * every bad argument, and the MovieLens 100K quality bar. */
#include <math.h>

#include "als/als_internal.h"
#include "als_fixtures.h"
#include "testutil.h"

static const int solver_k[] = {1, 2, 7, 32, 100, 256};

/* Three users, three items, k = 1, lambda = 0.5, V given as (1, 2, 1). Ratings:
 * user 0: item 0 = 4, item 1 = 2; user 1: item 1 = 4; user 2: item 0 = 1, item 2 = 3.
 * Users: u0 = (4 + 4) / (1 + 4 + 0.5 * 2) = 4/3, u1 = 8 / (4 + 0.5) = 16/9,
 *        u2 = (1 + 3) / (1 + 1 + 0.5 * 2) = 4/3.
 * Items: v0 = (4 * 4/3 + 1 * 4/3) / (16/9 + 16/9 + 1) = 60/41,
 *        v1 = (2 * 4/3 + 4 * 16/9) / (16/9 + 256/81 + 1) = 792/481,
 *        v2 = (3 * 4/3) / (16/9 + 0.5) = 72/41. */
START_TEST(hand_solved)
{
    mf_ctx *ctx = tu_cpu_ctx();
    int32_t r[] = {0, 0, 1, 2, 2}, c[] = {0, 1, 1, 0, 2};
    float v[] = {4, 2, 4, 1, 3};
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, 3, 3, 5, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 1, o.lambda = 0.5f, o.iterations = 1, o.init = MF_ALS_INIT_GIVEN;
    o.biases = 0; /* the plain model's solves, by hand */
    o.weighting = MF_ALS_WEIGHT_COUNT;
    float U[3] = {NAN, NAN, NAN}, V[3] = {1, 2, 1};
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_float_eq_tol(U[0], 4.0f / 3, 1e-6f);
    ck_assert_float_eq_tol(U[1], 16.0f / 9, 1e-6f);
    ck_assert_float_eq_tol(U[2], 4.0f / 3, 1e-6f);
    ck_assert_float_eq_tol(V[0], 60.0f / 41, 1e-6f);
    ck_assert_float_eq_tol(V[1], 792.0f / 481, 1e-6f);
    ck_assert_float_eq_tol(V[2], 72.0f / 41, 1e-6f);
    ck_assert_int_eq(rep.iterations, 1);
    ck_assert(isnan(rep.test_rmse));
    double se = 0.0;
    for (int p = 0; p < 5; p++) {
        double e = v[p] - (double)U[r[p]] * V[c[p]];
        se += e * e;
    }
    ck_assert_double_eq_tol(rep.train_rmse, sqrt(se / 5), 1e-6);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(ldlt_matches_float64)
{
    for (size_t t = 0; t < sizeof solver_k / sizeof *solver_k; t++) {
        int k = solver_k[t];
        float *A = malloc((size_t)k * k * sizeof *A), *b = malloc((size_t)k * sizeof *b);
        double *x = malloc((size_t)k * sizeof *x);
        ck_assert(A && b && x);
        ax_spd(k, 0.5, 100 + k, A, b);
        ax_solve64(k, A, b, x);
        ck_assert_int_eq(mf_ldlt_solve(k, A, k, b), -1);
        double err = ax_rel_diff(k, b, x);
        ck_assert_msg(err < 1e-5, "k = %d: relative error %g", k, err);
        free(A), free(b), free(x);
    }
}
END_TEST

START_TEST(ldlt_breakdown)
{
    /* Rank one: [[1, 2], [2, 4]] has a zero second pivot. */
    float A[4] = {1, 2, 2, 4}, b[2] = {1, 1};
    ck_assert_int_eq(mf_ldlt_solve(2, A, 2, b), 1);
    float N[4] = {1, 0, 0, NAN}, c[2] = {1, 1};
    ck_assert_int_eq(mf_ldlt_solve(2, N, 2, c), 1);
    float I[1] = {-1}, d[1] = {1};
    ck_assert_int_eq(mf_ldlt_solve(1, I, 1, d), 0);
}
END_TEST

/* CG from zero reaches the float64 solution; from a given start with few steps it still
 * lowers the residual; an indefinite system breaks down at the step that meets it. */
START_TEST(cg_solver)
{
    for (size_t t = 0; t < sizeof solver_k / sizeof *solver_k; t++) {
        int k = solver_k[t];
        if (k > MF_ALS_CG_MAX_ORDER)
            continue;
        float *A = malloc((size_t)k * k * sizeof *A), *b = malloc((size_t)k * sizeof *b);
        float *x = calloc((size_t)k, sizeof *x);
        double *ref = malloc((size_t)k * sizeof *ref), *work = malloc((size_t)4 * k * 8);
        ck_assert(A && b && x && ref && work);
        ax_spd(k, 0.5, 300 + k, A, b);
        ax_solve64(k, A, b, ref);
        ck_assert_int_eq(mf_cg_solve(k, A, k, b, x, 64, work), -1);
        double err = ax_rel_diff(k, x, ref);
        ck_assert_msg(err < 1e-5, "k = %d: relative error %g", k, err);
        /* Two steps from a perturbed solution: closer than the start. */
        for (int i = 0; i < k; i++)
            x[i] = (float)(ref[i] * (1.0 + 0.1 * ((i % 3) - 1)));
        double start = ax_rel_diff(k, x, ref);
        ck_assert_int_eq(mf_cg_solve(k, A, k, b, x, 2, work), -1);
        ck_assert_msg(k == 1 || ax_rel_diff(k, x, ref) < 0.5 * start,
                      "k = %d: two steps went from %g to %g", k, start, ax_rel_diff(k, x, ref));
        free(A), free(b), free(x), free(ref), free(work);
    }
    float I[4] = {1, 0, 0, -1}, b[2] = {0, 1}, x[2] = {0, 0};
    double work[8];
    ck_assert_int_eq(mf_cg_solve(2, I, 2, b, x, 6, work), 0);
}
END_TEST

/* MF_ALS_SOLVER_CG's few warm-started steps fit as well as the exact solver: the train
 * RMSE of 10 iterations at rank 64 within 1 %, and AUTO picks CG there (EXACT below). */
START_TEST(cg_fits_like_exact)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_ratings(ctx, 400, 300, 0.3, 21, NULL, NULL);
    float *U = malloc(400 * 64 * sizeof *U), *V = malloc(300 * 64 * sizeof *V);
    ck_assert(U && V);
    double rmse[2];
    const mf_als_solver solvers[] = {MF_ALS_SOLVER_EXACT, MF_ALS_SOLVER_AUTO};
    for (int s = 0; s < 2; s++) {
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = 64, o.lambda = 2.0f, o.solver = solvers[s];
        mf_als_report rep = {.struct_size = sizeof rep};
        ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
        ck_assert_int_eq(rep.solver, s == 0 ? MF_ALS_SOLVER_EXACT : MF_ALS_SOLVER_CG);
        rmse[s] = rep.train_rmse;
    }
    ck_assert_msg(fabs(rmse[1] - rmse[0]) < 0.01 * rmse[0], "exact %g, CG %g", rmse[0], rmse[1]);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 32;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_int_eq(rep.solver, MF_ALS_SOLVER_EXACT);
    free(U), free(V);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Both seeded starts recover a noise-free rank-8 model. */
START_TEST(planted_recovery)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_planted(ctx, 300, 200, 8, 0.25, 7);
    float *U = malloc(300 * 8 * sizeof *U), *V = malloc(200 * 8 * sizeof *V);
    const mf_als_init inits[] = {MF_ALS_INIT_MEAN, MF_ALS_INIT_UNIFORM};
    for (int s = 0; s < 2; s++) {
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = 8, o.lambda = 1e-5f, o.iterations = 20, o.init = inits[s];
        o.biases = 0; /* the planted model has none (test_model.c plants biases too) */
        mf_als_report rep = {.struct_size = sizeof rep};
        ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
        ck_assert_msg(rep.train_rmse < 1e-3, "init %d: train RMSE %g", (int)inits[s],
                      rep.train_rmse);
        ck_assert_int_eq(rep.iterations, 20);
    }
    free(U), free(V);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(empty_rows_get_zero)
{
    mf_ctx *ctx = tu_cpu_ctx();
    int32_t eu[] = {0, 17, 39, -1}, ei[] = {3, 29, -1};
    mf_sparse *R = ax_ratings(ctx, 40, 30, 0.3, 3, eu, ei);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 5, o.iterations = 3;
    float U[40 * 5], V[30 * 5];
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    for (int p = 0; p < 40 * 5; p++)
        ck_assert(isfinite(U[p]));
    for (int p = 0; p < 30 * 5; p++)
        ck_assert(isfinite(V[p]));
    for (int t = 0; t < 5; t++) {
        ck_assert_float_eq(U[0 * 5 + t], 0.0f);
        ck_assert_float_eq(U[17 * 5 + t], 0.0f);
        ck_assert_float_eq(U[39 * 5 + t], 0.0f);
        ck_assert_float_eq(V[3 * 5 + t], 0.0f);
        ck_assert_float_eq(V[29 * 5 + t], 0.0f);
    }
    ck_assert(U[1 * 5] != 0.0f && V[0] != 0.0f);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

typedef struct seen {
    int calls, stop_at;
    double last_seconds;
} seen;

static int on_progress(void *user, const mf_progress *p)
{
    seen *s = user;
    s->calls++;
    ck_assert_int_eq(p->iteration, s->calls);
    ck_assert(p->seconds >= s->last_seconds);
    ck_assert(isfinite(p->train_rmse) && isfinite(p->test_rmse));
    s->last_seconds = p->seconds;
    return s->calls == s->stop_at;
}

START_TEST(progress_and_cancel)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_ratings(ctx, 50, 40, 0.3, 5, NULL, NULL);
    mf_sparse *T = ax_ratings(ctx, 50, 40, 0.05, 6, NULL, NULL);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4, o.iterations = 6, o.test = T;
    float U1[50 * 4], V1[40 * 4], U2[50 * 4], V2[40 * 4];
    /* Two iterations run to the end ... */
    o.iterations = 2;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U1, V1, MF_MEMORY_HOST, NULL), MF_OK);
    /* ... equal six iterations cancelled after the second. */
    o.iterations = 6;
    seen s = {0, 2, 0.0};
    o.progress = on_progress, o.progress_user = &s;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U2, V2, MF_MEMORY_HOST, &rep), MF_ERR_CANCELLED);
    tu_assert_error_has(ctx, "after iteration 2");
    ck_assert_int_eq(s.calls, 2);
    ck_assert_int_eq(rep.iterations, 2);
    ck_assert(isfinite(rep.test_rmse));
    ck_assert_mem_eq(U1, U2, sizeof U1);
    ck_assert_mem_eq(V1, V2, sizeof V1);
    mf_sparse_destroy(R);
    mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
}
END_TEST

/* opts.rmse_precision changes the reported RMSEs alone: the factors are the float run's bit
 * for bit, the RMSEs those of mf_rmse_ex in that precision (here, within its rounding of the
 * float ones); a value outside mf_precision is refused with the factors untouched. */
START_TEST(rmse_precision_reports_only)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_ratings(ctx, 60, 50, 0.3, 9, NULL, NULL);
    mf_sparse *T = ax_ratings(ctx, 60, 50, 0.05, 10, NULL, NULL);
    enum { K = 24 };
    float U1[60 * K], V1[50 * K], U2[60 * K], V2[50 * K];
    mf_als_opts o;
    mf_als_opts_init(&o);
    ck_assert_int_eq(o.rmse_precision, MF_PRECISION_FP32);
    o.rank = K, o.iterations = 4, o.test = T, o.biases = 0;
    mf_als_report r1 = {.struct_size = sizeof r1}, r2 = {.struct_size = sizeof r2};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    o.rmse_precision = MF_PRECISION_BF16;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U2, V2, MF_MEMORY_HOST, &r2), MF_OK);
    ck_assert_mem_eq(U1, U2, sizeof U1);
    ck_assert_mem_eq(V1, V2, sizeof V1);
    ax_check_reported_rmse(ctx, &r2, R, T, K, U2, V2, MF_PRECISION_BF16, 1e-9);
    ck_assert(r2.train_rmse != r1.train_rmse);
    ck_assert_double_eq_tol(r2.train_rmse, r1.train_rmse, 1e-2 * r1.train_rmse);
    ck_assert_double_eq_tol(r2.test_rmse, r1.test_rmse, 1e-2 * r1.test_rmse);
    /* with opts.tune the candidates' validation RMSEs, which pick the fit, stay float */
    o.tune = MF_TUNE_LAMBDA;
    o.rmse_precision = MF_PRECISION_FP32;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    o.rmse_precision = MF_PRECISION_BF16;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U2, V2, MF_MEMORY_HOST, &r2), MF_OK);
    ck_assert(r2.validation_rmse == r1.validation_rmse && r2.lambda == r1.lambda);
    ck_assert_mem_eq(U1, U2, sizeof U1);
    ck_assert(r2.test_rmse != r1.test_rmse);
    o.tune = MF_TUNE_NONE;
    memcpy(U2, U1, sizeof U1);
    o.rmse_precision = (mf_precision)7;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U2, V2, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "rmse_precision = 7");
    ck_assert_mem_eq(U1, U2, sizeof U1);
    mf_sparse_destroy(R);
    mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(warm_start_continues)
{
    /* Three iterations equal two, then one more warm-started from the V they reached (the
     * plain model: a warm start passes V alone, so a biased one restarts its biases). */
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_ratings(ctx, 60, 45, 0.2, 8, NULL, NULL);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 6, o.iterations = 3, o.biases = 0;
    float U3[60 * 6], V3[45 * 6], U[60 * 6], V[45 * 6];
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U3, V3, MF_MEMORY_HOST, NULL), MF_OK);
    o.iterations = 2;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    o.iterations = 1, o.init = MF_ALS_INIT_GIVEN;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    ck_assert_mem_eq(U, U3, sizeof U);
    ck_assert_mem_eq(V, V3, sizeof V);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(breakdown_is_numeric)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ax_check_breakdown(ctx);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_ratings(ctx, 10, 8, 0.5, 9, NULL, NULL);
    mf_sparse *T = ax_ratings(ctx, 10, 9, 0.5, 9, NULL, NULL);
    float U[10 * 4], V[8 * 4];
    for (int p = 0; p < 40; p++)
        U[p] = 7.0f;
    for (int p = 0; p < 32; p++)
        V[p] = 7.0f;
    mf_als_opts o;
    struct {
        const char *field, *needle;
    } cases[] = {{"rank0", "rank = 0"},
                 {"rank257", "rank = 257"},
                 {"lambda", "lambda = -1"},
                 {"lambdanan", "lambda = nan"},
                 {"iterations", "iterations"},
                 {"init", "init = 7"},
                 {"test", "the test set is 10 x 9"},
                 {"solver", "solver = 7"},
                 {"cgsteps", "cg_steps = 0"},
                 {"cgrank", "rank + biases <= 127"},
                 {"tf32", "tf32 = 2"},
                 {"size", "struct_size"}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        mf_als_opts_init(&o);
        o.rank = 4;
        const char *f = cases[t].field;
        if (!strcmp(f, "rank0"))
            o.rank = 0;
        else if (!strcmp(f, "rank257"))
            o.rank = 257;
        else if (!strcmp(f, "lambda"))
            o.lambda = -1.0f;
        else if (!strcmp(f, "lambdanan"))
            o.lambda = NAN;
        else if (!strcmp(f, "iterations"))
            o.iterations = 0;
        else if (!strcmp(f, "init"))
            o.init = (mf_als_init)7;
        else if (!strcmp(f, "test"))
            o.test = T;
        else if (!strcmp(f, "solver"))
            o.solver = (mf_als_solver)7;
        else if (!strcmp(f, "cgsteps"))
            o.cg_steps = 0;
        else if (!strcmp(f, "cgrank"))
            o.rank = 127, o.solver = MF_ALS_SOLVER_CG;
        else if (!strcmp(f, "tf32"))
            o.tf32 = 2;
        else
            o.struct_size = 3;
        ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL),
                         MF_ERR_INVALID_ARGUMENT);
        tu_assert_error_has(ctx, cases[t].needle);
    }
    mf_als_opts_init(&o);
    o.rank = 4;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, NULL, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_als_run(ctx, NULL, &o, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_als_run(NULL, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    /* where is a parameter: not an mf_memory value; device memory on a CPU context */
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, (mf_memory)5, NULL), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "where = 5");
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_DEVICE, NULL), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "CPU backend");
    mf_als_report bad = {.struct_size = 1};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &bad), MF_ERR_INVALID_ARGUMENT);
    /* A non-finite warm start is bad data, named by position. */
    o.init = MF_ALS_INIT_GIVEN;
    V[2 * 4 + 1] = INFINITY;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "V[2][1]");
    V[2 * 4 + 1] = 7.0f;
    for (int p = 0; p < 40; p++)
        ck_assert(U[p] == 7.0f);
    for (int p = 0; p < 32; p++)
        ck_assert(V[p] == 7.0f);
    /* NaN ratings never reach ALS: the matrix refuses them, naming the entry. */
    int32_t r[] = {0, 1}, c[] = {0, 1};
    float v[] = {1.0f, NAN};
    mf_sparse *N = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &N, 2, 2, 2, r, c, v, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "val[1]");
    ck_assert_ptr_null(N);
    mf_sparse_destroy(R);
    mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(movielens_quality)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ax_check_movielens(ctx, "cpu");
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "als"};
    const TTest *const tests[] = {hand_solved,
                                  ldlt_matches_float64,
                                  ldlt_breakdown,
                                  cg_solver,
                                  cg_fits_like_exact,
                                  planted_recovery,
                                  empty_rows_get_zero,
                                  progress_and_cancel,
                                  rmse_precision_reports_only,
                                  warm_start_continues,
                                  breakdown_is_numeric,
                                  bad_arguments,
                                  movielens_quality};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
