/* Implicit-feedback ALS, recommendations and ranking metrics on the CPU: half-steps against
 * a float64 solve of the full objective over all pairs, CG against the exact solve, a loss
 * that never rises, planted recovery above popularity, top-N against a full sort (ties,
 * exclusions, fewer candidates than N), similar items, fold-in, metrics by hand, and every
 * bad input with the caller's buffers untouched. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ials/ials_internal.h"
#include "ials_fixtures.h"
#include "testutil.h"

static mf_ials_opts opts_exact(int k)
{
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = k;
    o.solver = MF_ALS_SOLVER_EXACT;
    return o;
}

/* One iteration from given factors matches the float64 solves of the full objective. */
static void check_against_dense(int log_conf)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 40, 30, 3, 0.5, 0.1, 0.0, 5);
    const int k = 6;
    mf_ials_opts o = opts_exact(k);
    o.iterations = 1;
    o.init = MF_IALS_INIT_GIVEN;
    o.lambda = 0.3f;
    o.alpha = 2.0f;
    o.epsilon = 0.5f;
    o.confidence = log_conf ? MF_IALS_CONFIDENCE_LOG : MF_IALS_CONFIDENCE_LINEAR;
    float U[40 * 6], V[30 * 6];
    double Ud[40 * 6], Vd[30 * 6];
    uint64_t s = 9;
    for (int i = 0; i < 40 * k; i++)
        U[i] = (float)tu_unit(&s);
    for (int i = 0; i < 30 * k; i++)
        Vd[i] = V[i] = (float)tu_unit(&s);
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    ials_dense_half_step(p.train, 0, k, o.lambda, o.alpha, o.epsilon, log_conf, Vd, Ud);
    float Uf[40 * 6], Vf[30 * 6];
    for (int i = 0; i < 40 * k; i++)
        Uf[i] = (float)Ud[i];
    ck_assert_double_le(tu_rel_diff(40 * k, U, Uf), 1e-5);
    for (int i = 0; i < 40 * k; i++)
        Ud[i] = U[i]; /* the items from the library's users, as the run did */
    ials_dense_half_step(p.train, 1, k, o.lambda, o.alpha, o.epsilon, log_conf, Ud, Vd);
    for (int i = 0; i < 30 * k; i++)
        Vf[i] = (float)Vd[i];
    ck_assert_double_le(tu_rel_diff(30 * k, V, Vf), 1e-5);
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}

START_TEST(exact_matches_full_objective)
{
    check_against_dense(0);
    check_against_dense(1);
}
END_TEST

START_TEST(cg_converges_to_exact)
{
    /* CG from the same start with as many steps as unknowns reaches the exact rows. */
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 60, 50, 4, 0.4, 0.05, 0.0, 7);
    const int k = 8;
    mf_ials_opts e = opts_exact(k), c = e;
    e.iterations = c.iterations = 3;
    c.solver = MF_ALS_SOLVER_CG;
    c.cg_steps = 40;
    float Ue[60 * 8], Ve[50 * 8], Uc[60 * 8], Vc[50 * 8];
    mf_ials_report re = {.struct_size = sizeof re}, rc = {.struct_size = sizeof rc};
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &e, Ue, Ve, MF_MEMORY_HOST, &re), MF_OK);
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &c, Uc, Vc, MF_MEMORY_HOST, &rc), MF_OK);
    ck_assert_int_eq(re.solver, MF_ALS_SOLVER_EXACT);
    ck_assert_int_eq(rc.solver, MF_ALS_SOLVER_CG);
    ck_assert_double_le(tu_rel_diff(60 * k, Uc, Ue), 1e-4);
    ck_assert_double_le(tu_rel_diff(50 * k, Vc, Ve), 1e-4);
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

typedef struct losses {
    double v[32];
    int n;
} losses;

static int record(void *user, const mf_progress *p)
{
    losses *l = user;
    l->v[l->n++] = p->train_rmse;
    return 0;
}

START_TEST(loss_never_rises)
{
    /* Each exact half-step minimizes the objective over one side: the loss cannot rise. CG
     * (3 steps, warm) decreases it too on this data. */
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 120, 90, 4, 0.3, 0.03, 0.0, 3);
    for (int cg = 0; cg < 2; cg++) {
        mf_ials_opts o = opts_exact(8);
        if (cg)
            o.solver = MF_ALS_SOLVER_CG;
        o.iterations = 12;
        losses l = {.n = 0};
        o.progress = record;
        o.progress_user = &l;
        float U[120 * 8], V[90 * 8];
        mf_ials_report rep = {.struct_size = sizeof rep};
        ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
        ck_assert_int_eq(l.n, 12);
        for (int i = 1; i < l.n; i++)
            ck_assert_msg(l.v[i] <= l.v[i - 1] * (1 + 1e-9), "loss rose at %d: %g -> %g", i,
                          l.v[i - 1], l.v[i]);
        ck_assert_double_lt(l.v[l.n - 1], l.v[0]);
        ck_assert_double_eq(rep.loss, l.v[l.n - 1]);
    }
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Popularity as a model: k = 1, U all ones, V the item's training count. */
static mf_ranking popularity(mf_ctx *ctx, const ials_planted *p, int N)
{
    float *U = malloc((size_t)p->users * sizeof *U), *V = calloc((size_t)p->items, sizeof *V);
    int32_t *row = malloc(1 << 22), *col = malloc(1 << 22);
    int64_t nnz;
    mf_sparse_shape(p->train, NULL, NULL, &nnz);
    ck_assert_int_eq(mf_sparse_get_coo(p->train, row, col, NULL, MF_MEMORY_HOST), MF_OK);
    for (int64_t e = 0; e < nnz; e++)
        V[col[e]] += 1.0f;
    for (int32_t u = 0; u < p->users; u++)
        U[u] = 1.0f;
    mf_model m;
    mf_model_init(&m);
    m.users = p->users, m.items = p->items, m.k = 1, m.U = U, m.ldu = 1, m.V = V, m.ldv = 1;
    mf_ranking r = {.struct_size = sizeof r};
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p->train, p->test, N, &r), MF_OK);
    free(U);
    free(V);
    free(row);
    free(col);
    return r;
}

START_TEST(planted_beats_popularity)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 600, 400, 8, 0.6, 0.02, 0.3, 21);
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = 16;
    o.lambda = 0.1f;
    o.alpha = 2.0f;
    float *U = malloc(600 * 16 * sizeof *U), *V = malloc(400 * 16 * sizeof *V);
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    mf_model m;
    mf_model_init(&m);
    m.users = 600, m.items = 400, m.k = 16, m.U = U, m.ldu = 16, m.V = V, m.ldv = 16;
    mf_ranking r = {.struct_size = sizeof r}, pop = popularity(ctx, &p, 10);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, p.test, 10, &r), MF_OK);
    /* Random: about (in-cluster test items) / 400 per slot; measured 0.2 or so here. */
    ck_assert_int_gt(r.users, 300);
    ck_assert_msg(r.precision > 1.5 * pop.precision && r.precision > 0.15,
                  "precision@10 %.3f vs popularity %.3f", r.precision, pop.precision);
    ck_assert_double_gt(r.ndcg, pop.ndcg);
    ck_assert_double_gt(r.auc, pop.auc);
    ck_assert_double_gt(r.map, pop.map);
    /* N past the items (400) gives the metrics of N = 400, and INT_MAX costs no more memory
     * than that (the lists stop at the items). */
    mf_ranking all = {.struct_size = sizeof all}, huge = {.struct_size = sizeof huge};
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, p.test, 400, &all), MF_OK);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, p.test, INT_MAX, &huge), MF_OK);
    ck_assert(all.users == huge.users && all.precision == huge.precision && all.map == huge.map &&
              all.ndcg == huge.ndcg && all.auc == huge.auc);
    ck_assert_double_gt(all.precision, 0.0);
    free(U);
    free(V);
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(recommend_matches_full_sort)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ials_check_recommend(ctx, 20, 50, 4, 10, 0);
    ials_check_recommend(ctx, 20, 50, 4, 10, 1);
    ials_check_recommend(ctx, 7, 30, 3, 40, 1); /* N beyond some users' candidates */
    ials_check_recommend(ctx, 9, 200, 5, 1, 0);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(similar_items_by_cosine)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ials_check_similar(ctx, 60, 4, 5);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(fold_in_reproduces_users)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 80, 60, 4, 0.3, 0.03, 0.0, 13);
    const int k = 6;
    mf_ials_opts o = opts_exact(k);
    o.iterations = 1;
    o.init = MF_IALS_INIT_GIVEN;
    float U[80 * 6], V[60 * 6], V0[60 * 6], F[80 * 6];
    uint64_t s = 4;
    for (int i = 0; i < 80 * k; i++)
        U[i] = (float)tu_unit(&s);
    for (int i = 0; i < 60 * k; i++)
        V0[i] = V[i] = (float)tu_unit(&s);
    /* The run's user half-step solved against V0: fold-in against V0 gives the same rows. */
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    ck_assert_int_eq(mf_ials_fold_in(ctx, p.train, &o, V0, F, MF_MEMORY_HOST), MF_OK);
    ck_assert_double_le(tu_rel_diff(80 * k, F, U), 1e-6);
    /* After 60 iterations, fold-in against the final V reproduces the trained users up to
     * the last item half-step's movement (measured 1.2e-3). */
    o.iterations = 60;
    o.lambda = 1.0f;
    o.init = MF_IALS_INIT_RANDOM;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    ck_assert_int_eq(mf_ials_fold_in(ctx, p.train, &o, V, F, MF_MEMORY_HOST), MF_OK);
    ck_assert_double_le(tu_rel_diff(80 * k, F, U), 5e-3);
    /* Fields the fold-in does not read (the header's list) change nothing, fp16 included:
     * not refused when out of range, and no half-precision V. */
    float G[80 * 6];
    mf_ials_opts odd = o;
    odd.fp16 = 5, odd.iterations = -3, odd.cg_steps = 0, odd.init = (mf_ials_init)99;
    for (int fp16 = 5; fp16 >= 1; fp16 -= 4) {
        odd.fp16 = fp16;
        ck_assert_int_eq(mf_ials_fold_in(ctx, p.train, &odd, V, G, MF_MEMORY_HOST), MF_OK);
        ck_assert(memcmp(F, G, sizeof G) == 0);
    }
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(explicit_fold_in_is_the_user_half_step)
{
    /* ALS from a given V (biases start at zero) solves the users first: folding the same
     * users into a model of that V, the mean and zero item biases gives the same rows. */
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 70, 50, 3, 0.5, 0.05, 0.0, 17);
    const int k = 5;
    float U[70 * 5], V[50 * 5], V0[50 * 5], bu[70], bi[50], F[70 * 5], fb[70], zeros[50] = {0};
    uint64_t s = 2;
    for (int i = 0; i < 50 * k; i++)
        V0[i] = V[i] = (float)tu_unit(&s) - 0.5f;
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = k, o.iterations = 1, o.init = MF_ALS_INIT_GIVEN, o.solver = MF_ALS_SOLVER_EXACT;
    o.lambda = 0.7f, o.lambda_bias = 0.3f;
    mf_biases out = {0.0f, bu, bi};
    o.bias_out = &out;
    ck_assert_int_eq(mf_als_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    mf_model m;
    mf_model_init(&m);
    m.users = 70, m.items = 50, m.k = k, m.U = U, m.ldu = k, m.V = V0, m.ldv = k;
    m.mean = out.mean, m.user_bias = bu, m.item_bias = zeros;
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, o.lambda, o.lambda_bias, F, fb), MF_OK);
    ck_assert_double_le(tu_rel_diff(70 * k, F, U), 1e-4);
    ck_assert_double_le(tu_rel_diff(70, fb, bu), 1e-4);
    /* Without biases: the factors alone. */
    m.user_bias = m.item_bias = NULL, m.mean = 0.0f;
    o.biases = 0;
    memcpy(V, V0, sizeof V); /* the run moved V after its user half-step */
    ck_assert_int_eq(mf_als_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, o.lambda, 0.0f, F, NULL), MF_OK);
    ck_assert_double_le(tu_rel_diff(70 * k, F, U), 1e-4);
    /* Bad input leaves the outputs alone. */
    for (int i = 0; i < 70 * k; i++)
        F[i] = 5.0f;
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, -1.0f, 0.0f, F, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    m.user_bias = bu;
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, 0.1f, 0.1f, F, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "user_bias");
    m.items = 49;
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, 0.1f, 0.1f, F, fb),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "50 columns");
    m.items = 50, m.user_bias = NULL;
    /* a k past what the exact solve takes: refused before a (k + 1)^2 system per thread (the
     * model's arrays are never read; ld = k keeps the span check quiet) */
    mf_model wide = m;
    wide.k = 20000, wide.ldu = 20000, wide.ldv = 20000;
    ck_assert_int_eq(mf_fold_in_users(ctx, &wide, p.train, 0.1f, 0.0f, F, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "k = 20000 is above 1024");
    mf_sparse *one = NULL;
    const int32_t r1[1] = {0}, c1[1] = {0};
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &one, 2, 50, 1, r1, c1, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, one, 0.0f, 0.0f, F, NULL), MF_ERR_NUMERIC);
    tu_assert_error_has(ctx, "row 0");
    /* A value of the model that is not finite is named (it was a failed solve's "not
     * positive definite" for a NaN in V, and NaN rows with MF_OK for an infinite bias). */
    const float kept = V0[3 * k + 1];
    V0[3 * k + 1] = NAN;
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, 0.1f, 0.0f, F, NULL), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "V[3][1] = nan");
    V0[3 * k + 1] = kept;
    float ib[50] = {0};
    ib[7] = INFINITY;
    m.item_bias = ib;
    ck_assert_int_eq(mf_fold_in_users(ctx, &m, p.train, 0.1f, 0.0f, F, NULL), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "item_bias[7] = inf");
    m.item_bias = NULL;
    for (int i = 0; i < 70 * k; i++)
        ck_assert_float_eq(F[i], 5.0f);
    mf_sparse_destroy(one);
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(half_precision_factors)
{
    /* The rounding the CPU engine shares with the CUDA engine's half stores. */
    ck_assert_float_eq(mf_ials_round_half(1.0f), 1.0f);
    ck_assert_float_eq(mf_ials_round_half(1.0f + 1.0f / 2048), 1.0f); /* a tie: to even */
    ck_assert_float_eq(mf_ials_round_half(1.0f + 3.0f / 2048), 1.0f + 4.0f / 2048);
    ck_assert_float_eq(mf_ials_round_half(-65519.0f), -65504.0f);
    ck_assert(isinf(mf_ials_round_half(65520.0f)));
    ck_assert_float_eq(mf_ials_round_half(1e-8f), 0.0f);
    ck_assert_float_eq(mf_ials_round_half(4e-8f), 5.9604644775390625e-08f); /* subnormal */
    ck_assert_float_eq(mf_ials_round_half(0.1f), 0.0999755859375f);
    /* A half-precision run: every factor is a half, and the ranking holds up. */
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 600, 400, 8, 0.6, 0.02, 0.3, 21);
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = 16, o.lambda = 0.1f, o.alpha = 2.0f;
    float *U = malloc(600 * 16 * sizeof *U), *V = malloc(400 * 16 * sizeof *V);
    mf_model m;
    mf_model_init(&m);
    m.users = 600, m.items = 400, m.k = 16, m.U = U, m.ldu = 16, m.V = V, m.ldv = 16;
    mf_ranking r32 = {.struct_size = sizeof r32}, r16 = {.struct_size = sizeof r16};
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, p.test, 10, &r32), MF_OK);
    o.fp16 = 1;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    for (int i = 0; i < 600 * 16; i++)
        ck_assert_float_eq(mf_ials_round_half(U[i]), U[i]);
    for (int i = 0; i < 400 * 16; i++)
        ck_assert_float_eq(mf_ials_round_half(V[i]), V[i]);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, p.test, 10, &r16), MF_OK);
    ck_assert_msg(fabs(r16.precision - r32.precision) < 0.02, "precision@10 %.4f (half) vs %.4f",
                  r16.precision, r32.precision);
    o.fp16 = 2;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    free(U);
    free(V);
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(metrics_by_hand)
{
    /* 1 user, 5 items, k = 1: scores V = 5, 4, 3, 2, 1 rank items 0..4 in order. Train
     * holds item 0 (excluded), test items 2 and 4. Top-2: items 1, 2: one hit at rank 2.
     * precision = 1 / min(2, 2); AP = (1/2) / 2; NDCG = (1/log2 3) / (1 + 1/log2 3);
     * AUC: miss at 1 (auc += 0), hit at 2; then + (1 + 2) / 2 * (neg - miss) with neg = 3,
     * miss = 1: 3; / (2 * 3) = 0.5. */
    mf_ctx *ctx = tu_cpu_ctx();
    float U[1] = {1.0f}, V[5] = {5, 4, 3, 2, 1};
    mf_model m;
    mf_model_init(&m);
    m.users = 1, m.items = 5, m.k = 1, m.U = U, m.ldu = 1, m.V = V, m.ldv = 1;
    const int32_t tr_r[1] = {0}, tr_c[1] = {0}, te_r[2] = {0, 0}, te_c[2] = {2, 4};
    mf_sparse *tr = NULL, *te = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &tr, 1, 5, 1, tr_r, tr_c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &te, 1, 5, 2, te_r, te_c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    mf_ranking r = {.struct_size = sizeof r};
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, tr, te, 2, &r), MF_OK);
    ck_assert_int_eq(r.users, 1);
    ck_assert_double_eq_tol(r.precision, 0.5, 1e-12);
    ck_assert_double_eq_tol(r.map, 0.25, 1e-12);
    const double g = 1.0 / log2(3.0);
    ck_assert_double_eq_tol(r.ndcg, g / (1.0 + g), 1e-12);
    ck_assert_double_eq_tol(r.auc, 0.5, 1e-12);
    /* Fewer candidates than N, held-out items among the training ones (implicit's split
     * does not overlap, a caller's may): 10 items, train 0..8, test 0 and 1, N = 10. The
     * list is item 9 and padding; the padding is no miss: AUC = (0 + 2) / 2 * (8 - 1) /
     * (2 * 8). */
    float V10[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    m.items = 10, m.V = V10;
    const int32_t tr2_r[9] = {0}, tr2_c[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, te2_c[2] = {0, 1};
    mf_sparse *tr2 = NULL, *te2 = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &tr2, 1, 10, 9, tr2_r, tr2_c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &te2, 1, 10, 2, tr2_r, te2_c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, tr2, te2, 10, &r), MF_OK);
    ck_assert_double_eq_tol(r.auc, 7.0 / 16.0, 1e-12);
    ck_assert_double_eq_tol(r.precision, 0.0, 1e-12);
    mf_sparse_destroy(tr2);
    mf_sparse_destroy(te2);
    mf_sparse_destroy(tr);
    mf_sparse_destroy(te);
    mf_ctx_destroy(ctx);
}
END_TEST

static int cancel_at_2(void *user, const mf_progress *p)
{
    (void)user;
    return p->iteration == 2;
}

START_TEST(bad_inputs_leave_buffers)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ials_planted p = ials_make_planted(ctx, 30, 20, 2, 0.4, 0.05, 0.3, 1);
    float U[30 * 4], V[20 * 4];
    for (int i = 0; i < 30 * 4; i++)
        U[i] = 7.0f;
    for (int i = 0; i < 20 * 4; i++)
        V[i] = 7.0f;
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = 4;
    mf_ials_opts b = o;
    b.alpha = -1.0f;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "alpha");
    b = o, b.lambda = -0.5f;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "lambda");
    b = o, b.rank = 513;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    b = o, b.epsilon = 0.0f;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    b = o, b.cg_steps = 0;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    b = o, b.solver = (mf_als_solver)9;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    b = o, b.iterations = 0;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ials_run(ctx, NULL, &o, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &o, NULL, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    /* A negative stored value names its interaction. */
    const int32_t r[2] = {0, 3}, c[2] = {1, 2};
    const float v[2] = {1.0f, -2.0f};
    mf_sparse *neg = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &neg, 30, 20, 2, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(mf_ials_run(ctx, neg, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "(3, 2)");
    tu_assert_error_has(ctx, "need values >= 0");
    /* A value >= 0 whose confidence overflows says so (linear: 1 + FLT_MAX * 3)... */
    const float big[2] = {1.0f, 3.0f};
    mf_sparse *hot = NULL, *pat = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &hot, 30, 20, 2, r, c, big, MF_MEMORY_HOST, 0), MF_OK);
    b = o, b.alpha = FLT_MAX;
    ck_assert_int_eq(mf_ials_run(ctx, hot, &b, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "(3, 2) with the value 3 has the confidence inf");
    /* ...and so does a pattern (every value 1) on the log scale with a tiny epsilon. */
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &pat, 30, 20, 2, r, c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    b = o, b.confidence = MF_IALS_CONFIDENCE_LOG, b.alpha = 1e38f, b.epsilon = 1e-45f;
    ck_assert_int_eq(mf_ials_run(ctx, pat, &b, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "(value 1: a pattern)");
    mf_sparse_destroy(hot);
    mf_sparse_destroy(pat);
    /* A given factor that is not finite. */
    b = o, b.init = MF_IALS_INIT_GIVEN;
    V[9] = NAN;
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, NULL),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "V[2][1]");
    V[9] = 7.0f;
    for (int i = 0; i < 30 * 4; i++)
        ck_assert_float_eq(U[i], 7.0f);
    for (int i = 0; i < 20 * 4; i++)
        ck_assert_float_eq(V[i], 7.0f);
    /* lambda = 0 with a user of one interaction and rank 4: singular (exact). */
    b = o, b.lambda = 0.0f, b.solver = MF_ALS_SOLVER_EXACT;
    mf_sparse *one = NULL;
    const int32_t r1[1] = {0}, c1[1] = {0};
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &one, 3, 2, 1, r1, c1, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_ials_run(ctx, one, &b, U, V, MF_MEMORY_HOST, NULL), MF_ERR_NUMERIC);
    tu_assert_error_has(ctx, "not positive definite");
    ck_assert_float_eq(U[0], 7.0f);
    /* Cancellation keeps the last completed iteration and reports it. */
    b = o, b.progress = cancel_at_2;
    mf_ials_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_ials_run(ctx, p.train, &b, U, V, MF_MEMORY_HOST, &rep), MF_ERR_CANCELLED);
    ck_assert_int_eq(rep.iterations, 2);
    ck_assert(U[0] != 7.0f);

    /* Recommendations. */
    mf_model m;
    mf_model_init(&m);
    m.users = 30, m.items = 20, m.k = 4, m.U = U, m.ldu = 4, m.V = V, m.ldv = 4;
    int32_t ids[3] = {0, -4, 2}, items[30];
    float scores[30];
    for (int i = 0; i < 30; i++)
        items[i] = 99, scores[i] = 99.0f;
    ck_assert_int_eq(mf_recommend(ctx, &m, 3, ids, NULL, 0, items, scores),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_recommend(ctx, &m, 3, ids, NULL, 5, items, scores), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "users[1] = -4");
    ck_assert_int_eq(mf_recommend(ctx, &m, -1, ids, NULL, 5, items, scores),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_recommend(ctx, &m, 3, NULL, NULL, 5, items, scores),
                     MF_ERR_INVALID_ARGUMENT);
    mf_sparse *wrong = NULL;
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &wrong, 30, 21, 0, NULL, NULL, NULL, MF_MEMORY_HOST, 0), MF_OK);
    ids[1] = 1;
    ck_assert_int_eq(mf_recommend(ctx, &m, 3, ids, wrong, 5, items, scores),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "21 columns");
    ids[1] = 20;
    ck_assert_int_eq(mf_similar_items(ctx, &m, 3, ids, 5, items, scores), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "items[1] = 20");
    for (int i = 0; i < 30; i++)
        ck_assert(items[i] == 99 && scores[i] == 99.0f);
    m.k = 0;
    ck_assert_int_eq(mf_recommend(ctx, &m, 3, ids, NULL, 5, items, scores),
                     MF_ERR_INVALID_ARGUMENT);
    m.k = 4;
    mf_ranking rk = {.struct_size = 8};
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, p.test, 0, &rk),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, wrong, 5, &rk), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ranking_evaluate(ctx, &m, p.train, NULL, 5, &rk), MF_ERR_INVALID_ARGUMENT);
    /* Fold-in: bad alpha, NULL V. */
    b = o, b.alpha = -1.0f;
    ck_assert_int_eq(mf_ials_fold_in(ctx, p.train, &b, V, U, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ials_fold_in(ctx, p.train, &o, NULL, U, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    mf_sparse_destroy(wrong);
    mf_sparse_destroy(one);
    mf_sparse_destroy(neg);
    ials_free_planted(&p);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "ials", .timeout = 300};
    const TTest *const tests[] = {exact_matches_full_objective,
                                  cg_converges_to_exact,
                                  loss_never_rises,
                                  planted_beats_popularity,
                                  recommend_matches_full_sort,
                                  similar_items_by_cosine,
                                  fold_in_reproduces_users,
                                  explicit_fold_in_is_the_user_half_step,
                                  half_precision_factors,
                                  metrics_by_hand,
                                  bad_inputs_leave_buffers};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
