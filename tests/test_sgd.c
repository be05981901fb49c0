/* mf_sgd_hogwild_run on the CPU backend: updates computed by hand, one worker replaying
 * the documented sequence bit for bit, planted recovery, fp16 storage, divergence,
 * cancellation, every bad argument, and the MovieLens 100K quality bar. */
#include <math.h>

#include "als_fixtures.h"
#include "sgd_fixtures.h"
#include "testutil.h"

static mf_sparse *two_pairs(mf_ctx *ctx)
{
    int32_t r[] = {0, 1}, c[] = {0, 1};
    float v[] = {2, 2};
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, 2, 2, 2, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    return R;
}

/* Two users, two items, one rating 2 each: (0, 0) and (1, 1), so the order of the updates
 * does not matter. k = 2, U = ((1, 0.5), (0.5, 1)), V = ((0.5, 1), (1, 0.5)),
 * lambda 0.5, rate 0.25 / (1 + t^1.5): 0.25, then 0.125. Every value is a short binary
 * fraction, so float computes it exactly.
 * Epoch 1, pair 0: e = 2 - (0.5 + 0.5) = 1; u = (1 + 0.25 (0.5 - 0.5), 0.5 + 0.25 (1 - 0.25))
 *   = (1, 0.6875); v = (0.5 + 0.25 (1 - 0.25), 1 + 0.25 (0.5 - 0.5)) = (0.6875, 1).
 * Epoch 2: e = 2 - 2 * 0.6875 = 0.625; u = (1 + 0.125 (0.625 * 0.6875 - 0.5),
 *   0.6875 + 0.125 (0.625 - 0.34375)) = (0.9912109375, 0.72265625), v mirrored:
 *   (0.72265625, 0.9912109375). Pair 1 is pair 0 mirrored. Both predictions are then
 *   2 * 0.9912109375 * 0.72265625 = 1.43260955810546875. */
START_TEST(hand_computed)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = two_pairs(ctx);
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = 2, o.learning_rate = 0.25f, o.decay = 1.0f, o.lambda_u = o.lambda_v = 0.5f;
    o.epochs = 2, o.workers = 1, o.init = MF_SGD_INIT_GIVEN;
    o.biases = 0; /* the plain updates, by hand */
    float U[4] = {1, 0.5f, 0.5f, 1}, V[4] = {0.5f, 1, 1, 0.5f};
    mf_sgd_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    const float a = 0.9912109375f, b = 0.72265625f;
    ck_assert(U[0] == a && U[1] == b && U[2] == b && U[3] == a);
    ck_assert(V[0] == b && V[1] == a && V[2] == a && V[3] == b);
    ck_assert_int_eq(rep.epochs, 2);
    ck_assert_int_eq(rep.workers, 1);
    ck_assert_double_eq_tol(rep.train_rmse, 2.0 - 1.43260955810546875, 1e-7);
    ck_assert(isnan(rep.test_rmse));
    ck_assert(rep.updates_per_second > 0);
    /* The first epoch alone, at the constant rate. */
    float U1[4] = {1, 0.5f, 0.5f, 1}, V1[4] = {0.5f, 1, 1, 0.5f};
    o.epochs = 1, o.schedule = MF_SGD_SCHEDULE_CONSTANT;
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U1, V1, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert(U1[0] == 1 && U1[1] == 0.6875f && V1[0] == 0.6875f && V1[1] == 1);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* One worker makes exactly the documented sequence: the chunks of each epoch in the order
 * of its permutation, each chunk's ratings in plan order, in float. */
START_TEST(one_worker_replays_the_plan)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = NULL, *test = NULL;
    sx_noisy(ctx, 150, 90, 0.2, 3, &R, &test);
    for (int order = 0; order < 2; order++) {
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.rank = 5, o.epochs = 3, o.workers = 1, o.order = (mf_sgd_order)order;
        o.learning_rate = 0.02f;
        o.biases = 0; /* sx_replay replays the plain updates */
        float *U = NULL, *V = NULL;
        mf_sgd_report rep;
        sx_run(ctx, R, &o, MF_OK, &rep, &U, &V);
        /* The replay starts where the run did: its random start, taken with epochs = 0. */
        mf_sgd_opts z = o;
        z.epochs = 0;
        float *U0 = NULL, *V0 = NULL;
        sx_run(ctx, R, &z, MF_OK, &rep, &U0, &V0);
        for (int p = 0; p < 150 * 5; p++)
            ck_assert(U0[p] >= 0.0f && U0[p] < 1.0f / sqrtf(5.0f));
        sx_replay(ctx, R, &o, U0, V0);
        ck_assert_msg(memcmp(U, U0, 150 * 5 * sizeof *U) == 0, "order %d: U differs", order);
        ck_assert_msg(memcmp(V, V0, 90 * 5 * sizeof *V) == 0, "order %d: V differs", order);
        free(U), free(V), free(U0), free(V0);
    }
    mf_sparse_destroy(R);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(planted_recovery)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = ax_planted(ctx, 300, 200, 8, 0.25, 7);
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = 8, o.lambda_u = o.lambda_v = 0.0f, o.epochs = 400;
    o.learning_rate = 0.05f, o.schedule = MF_SGD_SCHEDULE_CONSTANT;
    mf_sgd_report rep;
    sx_run(ctx, R, &o, MF_OK, &rep, NULL, NULL);
    ck_assert_msg(rep.train_rmse < 0.01, "train RMSE %g", rep.train_rmse);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Half storage rounds every stored element to 11 bits; the arithmetic stays float, and
 * the test RMSE stays within 1% of the float run's. */
START_TEST(fp16_close_to_fp32)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = NULL, *test = NULL;
    sx_noisy(ctx, 400, 300, 0.3, 5, &R, &test);
    double rmse[2];
    for (int h = 0; h < 2; h++) {
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.rank = 8, o.epochs = 40, o.test = test, o.learning_rate = 0.02f;
        o.schedule = MF_SGD_SCHEDULE_CONSTANT;
        o.lambda_u = o.lambda_v = 0.02f;
        o.storage = h ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
        mf_sgd_report rep;
        sx_run(ctx, R, &o, MF_OK, &rep, NULL, NULL);
        rmse[h] = rep.test_rmse;
    }
    printf("fp16_close_to_fp32: test RMSE fp32 %.4f, fp16 %.4f\n", rmse[0], rmse[1]);
    ck_assert_msg(rmse[0] < 0.3, "fp32 test RMSE %.4f: the noise alone is 0.25", rmse[0]);
    ck_assert_msg(fabs(rmse[1] - rmse[0]) <= 0.01 * rmse[0], "fp32 %.4f, fp16 %.4f", rmse[0],
                  rmse[1]);
    mf_sparse_destroy(R);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(divergence_is_reported)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = NULL, *test = NULL;
    sx_noisy(ctx, 100, 80, 0.2, 9, &R, &test);
    for (int h = 0; h < 2; h++) {
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.learning_rate = 50.0f, o.schedule = MF_SGD_SCHEDULE_CONSTANT;
        o.rank = 32; /* the arrays below */
        o.storage = h ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
        float U[100 * 32], V[80 * 32];
        for (int p = 0; p < 100 * 32; p++)
            U[p] = -7.0f;
        for (int p = 0; p < 80 * 32; p++)
            V[p] = -9.0f;
        mf_sgd_report rep = {.struct_size = sizeof rep, .epochs = -5};
        ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep),
                         MF_ERR_NUMERIC);
        tu_assert_error_has(ctx, "diverged");
        tu_assert_error_has(ctx, "smaller learning_rate");
        for (int p = 0; p < 100 * 32; p++)
            ck_assert(U[p] == -7.0f);
        for (int p = 0; p < 80 * 32; p++)
            ck_assert(V[p] == -9.0f);
        ck_assert_int_eq(rep.epochs, -5);
    }
    /* A huge lambda at the default rate: the message names lambda, not the rate alone. */
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.lambda_u = o.lambda_v = 1000.0f;
    o.schedule = MF_SGD_SCHEDULE_CONSTANT;
    o.rank = 32, o.learning_rate = 0.1f; /* the arrays below; the message's numbers */
    float *U = malloc(100 * 32 * sizeof *U), *V = malloc(80 * 32 * sizeof *V);
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_NUMERIC);
    tu_assert_error_has(ctx, "lambda_u 1000, lambda_v 1000) = 100 >= 1");
    free(U);
    free(V);
    mf_sparse_destroy(R);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
}
END_TEST

typedef struct seen {
    int calls, stop_after;
    double last_train;
} seen;

static int on_epoch(void *user, const mf_progress *p)
{
    seen *s = user;
    s->calls++;
    ck_assert_int_eq(p->iteration, s->calls);
    ck_assert(isfinite(p->train_rmse) && isfinite(p->test_rmse) && p->seconds >= 0);
    s->last_train = p->train_rmse;
    return s->calls >= s->stop_after;
}

START_TEST(cancellation)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = NULL, *test = NULL;
    sx_noisy(ctx, 100, 80, 0.2, 11, &R, &test);
    seen s = {0, 2, NAN};
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = 4, o.test = test, o.progress = on_epoch, o.progress_user = &s;
    float bu[100], bi[80];
    mf_biases out = {NAN, bu, bi};
    o.bias_out = &out;
    float *U = NULL, *V = NULL;
    mf_sgd_report rep;
    sx_run(ctx, R, &o, MF_ERR_CANCELLED, &rep, &U, &V);
    tu_assert_error_has(ctx, "cancelled");
    ck_assert_int_eq(s.calls, 2);
    ck_assert_int_eq(rep.epochs, 2);
    ck_assert_double_eq(rep.train_rmse, s.last_train);
    /* The model of the last completed epoch (factors and biases) was handed over. */
    double rmse = 0.0;
    mf_model m;
    mf_model_init(&m);
    m.users = 100, m.items = 80, m.k = 4, m.U = U, m.ldu = 4, m.V = V, m.ldv = 4;
    m.mean = out.mean, m.user_bias = bu, m.item_bias = bi;
    ck_assert_int_eq(mf_model_rmse(ctx, &m, R, &rmse), MF_OK);
    ck_assert_double_eq_tol(rmse, rep.train_rmse, 1e-5);
    free(U), free(V);
    mf_sparse_destroy(R);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A user without ratings keeps its starting row; everything stays finite. */
START_TEST(empty_rows_keep_their_start)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int32_t empty_users[] = {3, 17, -1}, empty_items[] = {0, -1};
    mf_sparse *R = ax_ratings(ctx, 40, 30, 0.3, 4, empty_users, empty_items);
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = 3, o.init = MF_SGD_INIT_GIVEN;
    float U[40 * 3], V[30 * 3];
    for (int p = 0; p < 40 * 3; p++)
        U[p] = 0.25f;
    for (int p = 0; p < 30 * 3; p++)
        V[p] = 0.5f;
    mf_sgd_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    for (int t = 0; t < 3; t++) {
        ck_assert(U[3 * 3 + t] == 0.25f && U[17 * 3 + t] == 0.25f && V[t] == 0.5f);
        ck_assert(U[4 * 3 + t] != 0.25f);
    }
    for (int p = 0; p < 40 * 3; p++)
        ck_assert(isfinite(U[p]));
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Every bad argument: the documented status, and U and V untouched. */
START_TEST(bad_arguments)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *R = two_pairs(ctx), *other = NULL;
    int32_t r[] = {0}, c[] = {2};
    float v[] = {1};
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &other, 2, 3, 1, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    float U[2 * 600], V[2 * 600];
    for (int p = 0; p < 2 * 600; p++)
        U[p] = V[p] = 3.0f;
    mf_sgd_opts good;
    mf_sgd_opts_init(&good);
    struct {
        const char *what, *needle;
        mf_sgd_opts o;
    } cases[16];
    int n = 0;
#define CASE(field, value, text)                                                                   \
    cases[n].what = #field " = " #value, cases[n].needle = text, cases[n].o = good,                \
    cases[n].o.field = value, n++
    CASE(rank, 0, "rank = 0");
    CASE(rank, 513, "rank = 513");
    CASE(learning_rate, 0.0f, "learning_rate");
    CASE(learning_rate, -1.0f, "learning_rate");
    CASE(learning_rate, NAN, "learning_rate");
    CASE(decay, -0.5f, "decay");
    CASE(lambda_u, -1.0f, "lambda_u");
    CASE(lambda_v, INFINITY, "lambda_v");
    CASE(epochs, -1, "epochs = -1");
    CASE(workers, -2, "workers = -2");
    CASE(schedule, (mf_sgd_schedule)7, "schedule");
    CASE(storage, (mf_sgd_storage)2, "storage");
    CASE(init, (mf_sgd_init)3, "init");
    CASE(order, (mf_sgd_order)9, "order");
    CASE(test, other, "test set is 2 x 3");
#undef CASE
    for (int i = 0; i < n; i++) {
        mf_status st = mf_sgd_hogwild_run(ctx, R, &cases[i].o, U, V, MF_MEMORY_HOST, NULL);
        ck_assert_msg(st == MF_ERR_INVALID_ARGUMENT, "%s: status %d", cases[i].what, (int)st);
        tu_assert_error_has(ctx, cases[i].needle);
    }
    ck_assert_int_eq(mf_sgd_hogwild_run(NULL, R, &good, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, NULL, &good, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &good, NULL, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &good, U, NULL, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    /* where is a parameter: not an mf_memory value; device memory on a CPU context */
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &good, U, V, (mf_memory)5, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "where = 5");
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &good, U, V, MF_MEMORY_DEVICE, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "CPU backend");
    for (int p = 0; p < 2 * 600; p++)
        ck_assert(U[p] == 3.0f && V[p] == 3.0f);
    /* A given start with a NaN is bad data, named by its position. */
    mf_sgd_opts o = good;
    o.rank = 2, o.init = MF_SGD_INIT_GIVEN;
    V[3] = NAN;
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "V[1][1]");
    for (int p = 0; p < 2 * 600; p++)
        ck_assert(U[p] == 3.0f && (p == 3 || V[p] == 3.0f));
    mf_sparse_destroy(R);
    mf_sparse_destroy(other);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Threads race by design, yet reach the quality of one worker. */
START_TEST(threads_converge_like_one_worker)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU, co.cpu_threads = 4;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &co), MF_OK);
    mf_sparse *R = NULL, *test = NULL;
    sx_noisy(ctx, 800, 300, 0.1, 13, &R, &test); /* chunks for 4 workers at 128 each */
    double rmse[2];
    for (int w = 0; w < 2; w++) {
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.rank = 16, o.epochs = 30, o.test = test, o.workers = w ? 4 : 1;
        o.learning_rate = 0.05f, o.lambda_u = o.lambda_v = 0.05f;
        mf_sgd_report rep;
        sx_run(ctx, R, &o, MF_OK, &rep, NULL, NULL);
        ck_assert_int_eq(rep.workers, w ? 4 : 1);
        rmse[w] = rep.test_rmse;
    }
    ck_assert_msg(fabs(rmse[1] - rmse[0]) <= 0.01 * rmse[0], "1 worker %.4f, 4 workers %.4f",
                  rmse[0], rmse[1]);
    mf_sparse_destroy(R);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(movielens_quality)
{
    mf_ctx *ctx = tu_cpu_ctx();
    sx_check_movielens(ctx, "cpu");
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "sgd", .timeout = 300};
    const TTest *const tests[] = {hand_computed,
                                  one_worker_replays_the_plan,
                                  planted_recovery,
                                  fp16_close_to_fp32,
                                  divergence_is_reported,
                                  cancellation,
                                  empty_rows_keep_their_start,
                                  bad_arguments,
                                  threads_converge_like_one_worker,
                                  movielens_quality};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
