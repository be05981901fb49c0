/* Groups of CUDA contexts over NCCL (mf_ctx_join_local): a collective mf_als_run over one
 * rank, and over every device of the machine when it has several, gives the bits of one
 * ungrouped context (each row's solve is the same kernels wherever it runs, and the
 * exchange copies bytes); SGD and ASD give every rank the same factors, close to one
 * context's (ASD: Ω by rows, NCCL's sums in the stream). Without NCCL the suite says so and skips
 * those tests, unless MFACT_REQUIRE_NCCL is set (scripts/device-test sets it). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "als_fixtures.h"
#include "ranks_fixtures.h"
#include "testutil.h"

#define USERS 4000
#define ITEMS 900

static void fit_one_context(const mf_als_opts *opts, float *U, float *V, double *train,
                            mf_biases *biases)
{
    mf_ctx *ctx = rk_cuda_ctx(0);
    ck_assert_ptr_nonnull(ctx);
    mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.03, 9, NULL, NULL);
    mf_als_report rep = {.struct_size = sizeof rep};
    mf_als_opts o = *opts;
    o.bias_out = biases;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    *train = rep.train_rmse;
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}

/* n ranks on devices 0..n-1, grouped, each with the fixture's ratings, outputs for rank k
 * and proto's call (its algorithm and options). Returns 0 (with the group closed again)
 * when NCCL is missing and not required. */
static int open_group(rk_job *jobs, int n, const rk_job *proto, int k)
{
    mf_ctx *ctxs[8];
    for (int i = 0; i < n; i++) {
        jobs[i] = *proto;
        jobs[i].ctx = ctxs[i] = rk_cuda_ctx(i);
        ck_assert_ptr_nonnull(ctxs[i]);
        jobs[i].R = ax_ratings(ctxs[i], USERS, ITEMS, 0.03, 9, NULL, NULL);
        jobs[i].U = malloc((size_t)USERS * k * sizeof(float));
        jobs[i].V = malloc((size_t)ITEMS * k * sizeof(float));
    }
    mf_status st = mf_ctx_join_local(ctxs, n);
    if (!rk_nccl_missing(st, ctxs[0])) {
        ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(ctxs[0]));
        return 1;
    }
    rk_close_group(jobs, n);
    return 0;
}

/* A group of n ranks on devices 0..n-1 against one context, for each solver. */
static void check_group(int n)
{
    static const int solvers[] = {MF_ALS_SOLVER_EXACT, MF_ALS_SOLVER_CG};
    for (int s = 0; s < 2; s++) {
        rk_job proto = {0};
        mf_als_opts_init(&proto.o);
        proto.o.rank = 48, proto.o.iterations = 3, proto.o.lambda = 0.5f;
        proto.o.solver = solvers[s];
        const size_t ub = (size_t)USERS * proto.o.rank * sizeof(float),
                     vb = (size_t)ITEMS * proto.o.rank * sizeof(float);
        float *U1 = malloc(ub), *V1 = malloc(vb);
        double train1;
        fit_one_context(&proto.o, U1, V1, &train1, NULL);
        rk_job jobs[8];
        const int run = open_group(jobs, n, &proto, proto.o.rank);
        if (run) {
            rk_run_als(jobs, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                ck_assert_msg(!memcmp(jobs[i].U, U1, ub), "rank %d of %d: U differs", i, n);
                ck_assert_msg(!memcmp(jobs[i].V, V1, vb), "rank %d of %d: V differs", i, n);
                /* Each rank measures its shard and the sums are added: to rounding. */
                ck_assert_double_eq_tol(jobs[i].rep.train_rmse, train1, 1e-6 * train1);
                ck_assert(jobs[i].rep.train_rmse == jobs[0].rep.train_rmse);
            }
            printf("%d rank(s), %s: the factors of one context, train RMSE %.6f\n", n,
                   s ? "CG" : "exact", train1);
            rk_close_group(jobs, n);
        }
        free(U1);
        free(V1);
        if (!run)
            return;
    }
}

/* Sharded users over n ranks (MF_ALS_LAYOUT_USERS_SHARDED): the item systems summed over
 * NCCL, U gathered once at the end into host memory; the factors are one context's to
 * rounding and the same bits on every rank, the user biases too. chunk_bytes (0: the
 * default) sets MFACT_ALS_SUM_BYTES, so that the items go in many chunks, and
 * MFACT_GATHER_HOST_BYTES, so that U reaches the host in many. */
static void check_sharded_group(int n, const char *chunk_bytes)
{
    static const int solvers[] = {MF_ALS_SOLVER_EXACT, MF_ALS_SOLVER_CG};
    if (chunk_bytes) { /* and U to the host in chunks of about 100 users */
        setenv("MFACT_ALS_SUM_BYTES", chunk_bytes, 1);
        setenv("MFACT_GATHER_HOST_BYTES", "20000", 1);
    }
    for (int s = 0; s < 2; s++) {
        rk_job proto = {0};
        mf_als_opts_init(&proto.o);
        proto.o.rank = 48, proto.o.iterations = 3, proto.o.lambda = 0.5f;
        proto.o.solver = solvers[s];
        /* products to float accuracy (TF32's rounding, CG's default, moved U by 0.011 on 2
         * H200). CG's few steps still amplify the sums' order: 0.0044 in U, 0.0013 in V
         * measured with float products, against 3.5e-6 for the exact solver, so CG's factors
         * are held to 2% and its train RMSE to 1e-4. */
        proto.o.tf32 = 0;
        const double tol = s ? 2e-2 : 1e-3, rmse_tol = s ? 1e-4 : 5e-5;
        const size_t ub = (size_t)USERS * proto.o.rank * sizeof(float),
                     vb = (size_t)ITEMS * proto.o.rank * sizeof(float);
        float *U1 = malloc(ub), *V1 = malloc(vb);
        double train1;
        /* the user biases travel with U (in chunks when chunk_bytes is set) */
        mf_biases b1 = {0.0f, malloc(USERS * sizeof(float)), NULL}, bs[8];
        fit_one_context(&proto.o, U1, V1, &train1, &b1);
        proto.o.layout = MF_ALS_LAYOUT_USERS_SHARDED;
        rk_job jobs[8];
        const int run = open_group(jobs, n, &proto, proto.o.rank);
        for (int i = 0; run && i < n; i++) {
            bs[i] = (mf_biases){0.0f, malloc(USERS * sizeof(float)), NULL};
            jobs[i].o.bias_out = &bs[i];
        }
        if (run) {
            rk_run_als(jobs, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                /* CG's biases move most with the sums' order: 0.026 measured on 2 H200 */
                const double db = rk_max_rel_diff(bs[i].user, b1.user, USERS);
                ck_assert_msg(db < (s ? 5e-2 : tol), "rank %d of %d: user biases off by %g", i, n,
                              db);
                ck_assert(!memcmp(bs[i].user, bs[0].user, USERS * sizeof(float)));
                const double du = rk_max_rel_diff(jobs[i].U, U1, (int64_t)USERS * proto.o.rank);
                const double dv = rk_max_rel_diff(jobs[i].V, V1, (int64_t)ITEMS * proto.o.rank);
                ck_assert_msg(du < tol && dv < tol, "rank %d of %d: U off by %g, V by %g", i, n, du,
                              dv);
                ck_assert(!memcmp(jobs[i].U, jobs[0].U, ub) && !memcmp(jobs[i].V, jobs[0].V, vb));
                ck_assert_double_eq_tol(jobs[i].rep.train_rmse, train1, rmse_tol * train1);
                ck_assert(jobs[i].rep.train_rmse == jobs[0].rep.train_rmse);
            }
            printf("%d rank(s), %s, sharded users%s: U within %.2g, V within %.2g, user biases "
                   "within %.2g of one context, train RMSE %.6f (one context %.6f)\n",
                   n, s ? "CG" : "exact", chunk_bytes ? " in chunks" : "",
                   rk_max_rel_diff(jobs[0].U, U1, (int64_t)USERS * proto.o.rank),
                   rk_max_rel_diff(jobs[0].V, V1, (int64_t)ITEMS * proto.o.rank),
                   rk_max_rel_diff(bs[0].user, b1.user, USERS), jobs[0].rep.train_rmse, train1);
            rk_close_group(jobs, n);
            for (int i = 0; i < n; i++)
                free(bs[i].user);
        }
        free(U1);
        free(V1);
        free(b1.user);
        if (!run)
            break;
    }
    if (chunk_bytes) {
        unsetenv("MFACT_ALS_SUM_BYTES");
        unsetenv("MFACT_GATHER_HOST_BYTES");
    }
}

/* Hogwild SGD over n ranks (devices 0..n-1): every rank returns the same factors, and the
 * test RMSE is within 1% of one context's (the updates' order differs: Hogwild). */
static void check_sgd_group(int n)
{
    rk_job proto = {0};
    proto.sgd = 1;
    mf_sgd_opts_init(&proto.so);
    proto.so.rank = 32, proto.so.epochs = 15;
    const size_t ub = (size_t)USERS * proto.so.rank * sizeof(float),
                 vb = (size_t)ITEMS * proto.so.rank * sizeof(float);
    mf_ctx *one = rk_cuda_ctx(0);
    mf_sparse *R1 = ax_ratings(one, USERS, ITEMS, 0.03, 9, NULL, NULL);
    float *U1 = malloc(ub), *V1 = malloc(vb);
    mf_sgd_report r1 = {.struct_size = sizeof r1};
    ck_assert_int_eq(mf_sgd_hogwild_run(one, R1, &proto.so, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    mf_sparse_destroy(R1);
    mf_ctx_destroy(one);
    rk_job jobs[8];
    if (open_group(jobs, n, &proto, proto.so.rank)) {
        rk_run_als(jobs, n);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
            ck_assert(!memcmp(jobs[i].U, jobs[0].U, ub) && !memcmp(jobs[i].V, jobs[0].V, vb));
        }
        printf("SGD over %d rank(s): train RMSE %.5f, one context %.5f\n", n,
               jobs[0].srep.train_rmse, r1.train_rmse);
        ck_assert_double_le(fabs(jobs[0].srep.train_rmse / r1.train_rmse - 1.0), 0.01);
        rk_close_group(jobs, n);
    }
    free(U1);
    free(V1);
}

static int progress_ok(void *user, const mf_progress *p)
{
    (void)user, (void)p;
    return 0;
}

/* Implicit ALS's case c of IALS_CASES as a group's prototype job: CG and exact at rank 64;
 * CG in half precision with log confidence at rank 100, 128 wide: 10 tiles a chunk. Its
 * fit on one context (device 0, with a progress callback, so that the loss is computed)
 * into U1 and V1 (host, the caller's to free); returns the loss. */
enum { IALS_CASES = 3 };
static double ials_case(int c, rk_job *proto, float **U1, float **V1)
{
    static const struct {
        int solver, rank, fp16, log;
    } cases[IALS_CASES] = {{MF_ALS_SOLVER_CG, 64, 0, 0},
                           {MF_ALS_SOLVER_EXACT, 64, 0, 0},
                           {MF_ALS_SOLVER_CG, 100, 1, 1}};
    *proto = (rk_job){0};
    proto->ials = 1;
    mf_ials_opts_init(&proto->io);
    proto->io.rank = cases[c].rank, proto->io.iterations = 3, proto->io.solver = cases[c].solver;
    proto->io.fp16 = cases[c].fp16;
    proto->io.confidence = cases[c].log ? MF_IALS_CONFIDENCE_LOG : MF_IALS_CONFIDENCE_LINEAR;
    mf_ctx *one = rk_cuda_ctx(0);
    ck_assert_ptr_nonnull(one);
    mf_sparse *R1 = ax_ratings(one, USERS, ITEMS, 0.03, 9, NULL, NULL);
    *U1 = malloc((size_t)USERS * proto->io.rank * sizeof(float));
    *V1 = malloc((size_t)ITEMS * proto->io.rank * sizeof(float));
    mf_ials_opts o1 = proto->io;
    o1.progress = progress_ok;
    mf_ials_report r1 = {.struct_size = sizeof r1};
    ck_assert_int_eq(mf_ials_run(one, R1, &o1, *U1, *V1, MF_MEMORY_HOST, &r1), MF_OK);
    ck_assert(isfinite(r1.loss));
    mf_sparse_destroy(R1);
    mf_ctx_destroy(one);
    return r1.loss;
}

/* Implicit ALS over n ranks: one context's factors, bit for bit. The ranks form even shares
 * of the Gram matrices' chunks (1024 rows each: the users' 4, the items' 1, so that most
 * ranks form none of the items') and add all of them in chunk order, as one context does. */
static void check_ials_group(int n)
{
    for (int c = 0; c < IALS_CASES; c++) {
        rk_job proto;
        float *U1, *V1;
        ials_case(c, &proto, &U1, &V1);
        const size_t ub = (size_t)USERS * proto.io.rank * sizeof(float),
                     vb = (size_t)ITEMS * proto.io.rank * sizeof(float);
        rk_job jobs[8];
        const int run = open_group(jobs, n, &proto, proto.io.rank);
        if (run) {
            rk_run_als(jobs, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                ck_assert_msg(!memcmp(jobs[i].U, U1, ub) && !memcmp(jobs[i].V, V1, vb),
                              "implicit ALS, case %d: rank %d of %d differs from one context", c, i,
                              n);
            }
            printf("implicit ALS over %d rank(s), case %d: one context's factors\n", n, c);
            rk_close_group(jobs, n);
        }
        free(U1);
        free(V1);
        if (!run)
            return;
    }
}

/* ASD over n ranks, plain and scaled, the spectral start and rank continuation, with a test
 * set: every rank the same X, Y and report; one context's result up to the order of the
 * sums. */
static void check_asd_group(int n)
{
    static const struct {
        int variant, init, continuation;
    } cases[] = {{MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 0},
                 {MF_ASD_PLAIN, MF_ASD_INIT_RANDOM, 0},
                 {MF_ASD_SCALED, MF_ASD_INIT_SPECTRAL, 0},
                 {MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 1}};
    for (int v = 0; v < 4; v++) {
        rk_job proto = {0};
        proto.asd = 1;
        mf_asd_opts_init(&proto.ao);
        const int r = 8;
        proto.ao.rank = r, proto.ao.variant = cases[v].variant, proto.ao.max_iterations = 30;
        proto.ao.init = cases[v].init, proto.ao.rank_continuation = cases[v].continuation;
        proto.ao.tolerance = 1e-12, proto.ao.stagnation_window = 0;
        const int64_t nx = (int64_t)USERS * r, ny = (int64_t)ITEMS * r;
        mf_ctx *one = rk_cuda_ctx(0);
        mf_sparse *R1 = ax_ratings(one, USERS, ITEMS, 0.03, 9, NULL, NULL);
        mf_sparse *T1 = ax_ratings(one, USERS, ITEMS, 0.01, 11, NULL, NULL);
        float *X1 = malloc((size_t)nx * sizeof *X1), *Y1 = malloc((size_t)ny * sizeof *Y1);
        mf_asd_opts o1 = proto.ao;
        o1.test = T1;
        mf_asd_report r1 = {.struct_size = sizeof r1};
        ck_assert_msg(mf_asd_run(one, R1, &o1, X1, Y1, MF_MEMORY_HOST, &r1) == MF_OK, "%s",
                      mf_ctx_last_error(one));
        mf_sparse_destroy(R1);
        mf_sparse_destroy(T1);
        mf_ctx_destroy(one);
        rk_job jobs[8];
        mf_sparse *T[8];
        const int run = open_group(jobs, n, &proto, r);
        if (run) {
            for (int i = 0; i < n; i++) {
                T[i] = ax_ratings(jobs[i].ctx, USERS, ITEMS, 0.01, 11, NULL, NULL);
                jobs[i].ao.test = T[i];
            }
            rk_run_als(jobs, n);
            double dx = 0.0, dy = 0.0, mx = 0.0, my = 0.0;
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                ck_assert(!memcmp(jobs[i].U, jobs[0].U, (size_t)nx * sizeof(float)));
                ck_assert(!memcmp(jobs[i].V, jobs[0].V, (size_t)ny * sizeof(float)));
                ck_assert(jobs[i].arep.relative_residual == jobs[0].arep.relative_residual);
                ck_assert(jobs[i].arep.test_rmse == jobs[0].arep.test_rmse);
                ck_assert_int_eq(jobs[i].arep.iterations, jobs[0].arep.iterations);
                if (!cases[v].continuation || n == 1) /* else stagnation may tip on rounding */
                    ck_assert_int_eq(jobs[i].arep.iterations, r1.iterations);
            }
            for (int64_t p = 0; p < nx; p++)
                dx = fmax(dx, fabs((double)jobs[0].U[p] - X1[p])), mx = fmax(mx, fabs(X1[p]));
            for (int64_t p = 0; p < ny; p++)
                dy = fmax(dy, fabs((double)jobs[0].V[p] - Y1[p])), my = fmax(my, fabs(Y1[p]));
            const double dres = fabs(jobs[0].arep.relative_residual / r1.relative_residual - 1.0);
            const double dtest = fabs(jobs[0].arep.test_rmse / r1.test_rmse - 1.0);
            static const char *const names[] = {"scaled", "plain", "spectral start",
                                                "rank continuation"};
            printf("ASD (%s) over %d rank(s): residual %.6g (one context %.6g), test RMSE %.6g "
                   "(%.6g), factors within %.1e, %.1e\n",
                   names[v], n, jobs[0].arep.relative_residual, r1.relative_residual,
                   jobs[0].arep.test_rmse, r1.test_rmse, dx / mx, dy / my);
            ck_assert_msg(dres < 1e-3 && dtest < 1e-3 && dx / mx < 1e-2 && dy / my < 1e-2,
                          "residual %g test %g X %g Y %g", dres, dtest, dx / mx, dy / my);
            for (int i = 0; i < n; i++)
                mf_sparse_destroy(T[i]);
            rk_close_group(jobs, n);
        }
        free(X1);
        free(Y1);
        if (!run)
            return;
    }
}

/* Implicit ALS over 2 devices from input split over the ranks: each rank gathers its users'
 * rows and its items' columns and its engine holds those shards alone; U, V and the loss
 * (collective: only rank 0 has a progress callback) are one context's bit for bit, as the
 * whole input's group gives them. The third pass stages the entries through 4 KiB of
 * device memory (MFACT_NCCL_EXCHANGE_BYTES): pieces of 2 KiB, hundreds of rounds of an
 * alltoallv whose blocks are of different sizes. */
START_TEST(ials_split_input_over_two)
{
    if (rk_device_count() < 2) {
        printf("ials_split_input_over_two: needs 2 devices: skipped\n");
        return;
    }
    for (int c = 0; c < IALS_CASES; c++) {
        rk_job proto;
        float *U1, *V1;
        const double loss1 = ials_case(c, &proto, &U1, &V1);
        const size_t ub = (size_t)USERS * proto.io.rank * sizeof(float),
                     vb = (size_t)ITEMS * proto.io.rank * sizeof(float);
        static const char *const ways[] = {"whole", "split", "split, staged in pieces"};
        for (int split = 0; split < 3; split++) {
            rk_job jobs[2];
            if (!open_group(jobs, 2, &proto, proto.io.rank)) {
                free(U1), free(V1);
                return;
            }
            jobs[0].io.progress = progress_ok;
            for (int i = 0; i < 2 && split; i++)
                rk_keep_part(&jobs[i], i, 2, USERS, ITEMS);
            if (split == 2)
                setenv("MFACT_NCCL_EXCHANGE_BYTES", "4096", 1);
            rk_run_als(jobs, 2);
            unsetenv("MFACT_NCCL_EXCHANGE_BYTES");
            for (int i = 0; i < 2; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "split %d, rank %d: %s", split, i,
                              jobs[i].error);
                ck_assert_msg(!memcmp(jobs[i].U, U1, ub) && !memcmp(jobs[i].V, V1, vb),
                              "case %d, split %d: rank %d differs from one context", c, split, i);
                ck_assert_msg(jobs[i].irep.loss == loss1,
                              "case %d, split %d: rank %d's loss %.17g, one context's %.17g", c,
                              split, i, jobs[i].irep.loss, loss1);
            }
            printf("implicit ALS over 2 ranks, case %d, %s input: one context's factors and "
                   "loss %.9g; peak device bytes %zu, %zu\n",
                   c, ways[split], loss1, jobs[0].irep.peak_device_bytes,
                   jobs[1].irep.peak_device_bytes);
            rk_close_group(jobs, 2);
        }
        free(U1), free(V1);
    }
}
END_TEST

START_TEST(one_rank_over_nccl)
{
    check_group(1);
    check_sgd_group(1);
    check_ials_group(1);
    check_asd_group(1);
}
END_TEST

START_TEST(every_device)
{
    int n = rk_device_count();
    if (n < 2) {
        printf("every_device: %d device(s), needs 2 or more: skipped\n", n);
        return;
    }
    for (int g = 2; g <= n; g++) {
        check_group(g);
        check_sgd_group(g);
        check_ials_group(g);
        check_asd_group(g);
    }
}
END_TEST

/* The exchange's all-gather in many chunks: a staging of 64 KiB (MFACT_NCCL_GATHER_BYTES)
 * sends these tables (ALS's users: about 900 KB) in chunks of 32 KiB or less per rank, with
 * SGD's blocks in their rotated order; the factors must still be one context's. The default
 * staging (256 MiB) sends the benches' tables in one chunk; these fit under its threshold.
 * MFACT_NCCL_GATHER=allgather: groups of 2 gather by broadcasts unless told otherwise, and
 * this is the staging's test on a 2-GPU machine. */
START_TEST(gathers_in_chunks)
{
    int n = rk_device_count();
    if (n < 2) {
        printf("gathers_in_chunks: %d device(s), needs 2 or more: skipped\n", n);
        return;
    }
    setenv("MFACT_NCCL_GATHER_BYTES", "65536", 1);
    setenv("MFACT_NCCL_GATHER", "allgather", 1);
    setenv("MFACT_GATHER_HOST_BYTES", "4096", 1); /* ASD's X to the host in chunks */
    check_group(n);
    check_sgd_group(n);
    check_ials_group(n);
    check_asd_group(n);
    unsetenv("MFACT_GATHER_HOST_BYTES");
    unsetenv("MFACT_NCCL_GATHER");
    unsetenv("MFACT_NCCL_GATHER_BYTES");
}
END_TEST

/* A breakdown over two devices: every rank fails, the first failure's message wins. */
static void breakdown_over_two(const char *name, void (*jobs)(rk_job *, mf_ctx *const *),
                               void (*check)(const rk_job *))
{
    if (rk_device_count() < 2) {
        printf("%s: needs 2 devices: skipped\n", name);
        return;
    }
    mf_ctx *ctxs[2] = {rk_cuda_ctx(0), rk_cuda_ctx(1)};
    ck_assert(ctxs[0] && ctxs[1]);
    rk_job j[2];
    jobs(j, ctxs);
    const mf_status st = mf_ctx_join_local(ctxs, 2);
    if (!rk_nccl_missing(st, ctxs[0])) {
        ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(ctxs[0]));
        rk_run_als(j, 2);
        check(j);
    }
    rk_close_group(j, 2);
}

/* A breakdown in one rank's share fails both ranks, the other naming the first (as
 * test_ranks' ials_first_failure_wins on the CPU, rk_ials_breakdown_jobs): a group reads
 * the breakdown words and agrees once an iteration, after both half steps. */
START_TEST(ials_first_failure_wins)
{
    breakdown_over_two("ials_first_failure_wins", rk_ials_breakdown_jobs, rk_ials_breakdown_check);
}
END_TEST

/* ALS queues a whole iteration, exchanges included, before it waits: a breakdown found
 * on one rank at the iteration's end still fails both, naming the user. */
START_TEST(als_first_failure_wins)
{
    breakdown_over_two("als_first_failure_wins", rk_als_breakdown_jobs, rk_als_breakdown_check);
}
END_TEST

/* Sharded users on every group of devices, and on 2 with the items in many chunks. */
START_TEST(sharded_users_over_every_device)
{
    int n = rk_device_count();
    if (n < 2) {
        printf("sharded_users_over_every_device: %d device(s), needs 2 or more: skipped\n", n);
        return;
    }
    for (int g = 2; g <= n; g++)
        check_sharded_group(g, NULL);
    check_sharded_group(2, "200000");
}
END_TEST

START_TEST(one_device_per_rank)
{
    mf_ctx *a = rk_cuda_ctx(0), *b = rk_cuda_ctx(0), *cpu = tu_cpu_ctx();
    mf_ctx *same[2] = {a, b}, *mixed[2] = {a, cpu};
    ck_assert_int_eq(mf_ctx_join_local(same, 2), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "both on device 0");
    ck_assert_int_eq(mf_ctx_join_local(mixed, 2), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "CPU");
    mf_ctx_destroy(a);
    mf_ctx_destroy(b);
    mf_ctx_destroy(cpu);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_ranks", .gpu = true, .timeout = 300};
    const TTest *const tests[] = {one_rank_over_nccl,        every_device,
                                  gathers_in_chunks,         ials_first_failure_wins,
                                  als_first_failure_wins,    one_device_per_rank,
                                  ials_split_input_over_two, sharded_users_over_every_device};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
