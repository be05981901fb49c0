/* mf_asd_run on the CUDA backend: iterates against the CPU engine (several ranks, both
 * variants), planted recovery, the ill-conditioned case, host and device factors, test-set
 * RMSE, cancellation and time limit, a rank-deficient start, bad input with device factors
 * untouched, the device transpose against the host one, and runs started in bf16 and fp16
 * (the reduced phase's iterates and its length against the CPU engine's, recovery). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd_fixtures.h"
#include "core/sparse.h"
#include "ranks_fixtures.h"
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int quick(void)
{
    return getenv("MFACT_UNDER_SANITIZER") != NULL;
}

static mf_asd_report run_where(mf_ctx *ctx, const mf_sparse *M, const mf_asd_opts *o, float *X,
                               float *Y, mf_memory where)
{
    mf_asd_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_asd_run(ctx, M, o, X, Y, where, &rep);
    ck_assert_msg(st == MF_OK, "mf_asd_run: %s", mf_ctx_last_error(ctx));
    return rep;
}

/* The same matrix on a CPU and a CUDA context (same seed, so the same random start). */
typedef struct pair {
    mf_ctx *cpu, *gpu;
    planted p;
    mf_sparse *Mg;
} pair;

static pair make_pair(int32_t m, int32_t n, int r, double fraction, const double *scale,
                      uint64_t seed)
{
    pair q;
    q.cpu = tu_cpu_ctx();
    q.gpu = tu_cuda_ctx(0);
    q.p = make_planted(q.cpu, m, n, r, fraction, scale, seed);
    q.Mg = NULL;
    ck_assert_int_eq(mf_sparse_from_csr(q.gpu, &q.Mg, m, n, q.p.M->nnz, q.p.M->row_ptr, q.p.M->col,
                                        q.p.M->val, MF_MEMORY_HOST, 0),
                     MF_OK);
    return q;
}

static void free_pair(pair *q)
{
    mf_sparse_destroy(q->Mg);
    free_planted(&q->p);
    mf_ctx_destroy(q->gpu);
    mf_ctx_destroy(q->cpu);
}

START_TEST(iterates_match_cpu)
{
    /* The bar: relative difference of the iterates below 1e-4 after 20 iterations,
     * on the planted case and at ranks that take every kernel shape (lanes per entry 1 to
     * 32, several float4s per lane, long lines). */
    const struct {
        int32_t m, n;
        int r;
        double fraction;
    } cases[] = {{2000, 1500, 5, 0.10},
                 {300, 250, 1, 0.3},
                 {400, 300, 20, 0.3},
                 {500, 400, 37, 0.4},
                 {600, 500, 150, 0.6},
                 /* lines of 4,096 entries and more go to the long-line kernel (one block a
                  * line): about half the columns here, then half the rows */
                 {5000, 300, 8, 0.82},
                 {300, 5000, 20, 0.82}};
    const size_t ncases = quick() ? 2 : sizeof cases / sizeof *cases;
    for (size_t c = 0; c < ncases; c++) {
        const int r = cases[c].r;
        pair q = make_pair(cases[c].m, cases[c].n, r, cases[c].fraction, NULL, 100 + c);
        const size_t nx = (size_t)q.p.m * r, ny = (size_t)q.p.n * r;
        float *Xc = malloc(nx * 4), *Yc = malloc(ny * 4), *Xg = malloc(nx * 4),
              *Yg = malloc(ny * 4);
        for (int variant = 0; variant < 2; variant++) {
            mf_asd_opts o;
            mf_asd_opts_init(&o);
            o.rank = r;
            o.variant = (mf_asd_variant)variant;
            o.tolerance = 1e-30;
            o.stagnation_window = 0;
            o.max_iterations = 20;
            mf_asd_report rc = run_where(q.cpu, q.p.M, &o, Xc, Yc, MF_MEMORY_HOST);
            mf_asd_report rg = run_where(q.gpu, q.Mg, &o, Xg, Yg, MF_MEMORY_HOST);
            double dx = tu_rel_diff((int64_t)nx, Xg, Xc), dy = tu_rel_diff((int64_t)ny, Yg, Yc);
            /* The residuals agree to 1e-3 relative, or to float rounding once they are that
             * small: at a relative residual of one or two FLT_EPSILON (the dense long-line
             * cases recover their plant that far) the two differ by rounding alone, 1.2e-8
             * measured; a quarter of FLT_EPSILON is the bound. */
            double dres = fabs(rg.relative_residual - rc.relative_residual);
            printf("parity %d x %d r %d %s: X %.1e, Y %.1e, residual %.3e vs %.3e\n", q.p.m, q.p.n,
                   r, variant ? "scaled" : "plain", dx, dy, rg.relative_residual,
                   rc.relative_residual);
            ck_assert_int_eq(rg.iterations, 20);
            ck_assert_msg(dx < 1e-4 && dy < 1e-4, "r %d variant %d: X %g Y %g", r, variant, dx, dy);
            ck_assert_msg(dres < 1e-3 * rc.relative_residual + 0.25 * FLT_EPSILON,
                          "residuals %g vs %g", rg.relative_residual, rc.relative_residual);
        }
        free(Xc), free(Yc), free(Xg), free(Yg);
        free_pair(&q);
    }
}
END_TEST

START_TEST(reduced_precision_matches_cpu_and_recovers)
{
    /* bf16 and fp16, both variants, on the planted case. (a) 4 iterations, every one in
     * the reduced phase (its level, 4 units of the format's rounding, ends it after 5 to 9
     * here; no stagnation test: the phase's own window of 15 has not seen it stagnate by
     * then), against the CPU engine, which rounds as the GPU does: the iterates
     * differ by the float sums' order, which can flip a rounding of the copy (2^-9 of a
     * value in bf16), hence bounds well above float's 1e-4 (a start perturbed by one ulp
     * moved bf16's iterates 4e-4 and fp16's 6e-5 on the CPU after 20 iterations); the
     * residuals, reported in float at the end, agree to 1e-2. (b) To the tolerance: the
     * GPU meets it with the planted matrix recovered, some iterations reduced and not all,
     * and as many reduced iterations as the CPU engine within a small slack (the
     * stagnation test reads residuals that differ in their last bits). */
    pair q = make_pair(2000, 1500, 5, 0.10, NULL, 11);
    const size_t nx = (size_t)q.p.m * 5, ny = (size_t)q.p.n * 5;
    float *Xc = malloc(nx * 4), *Yc = malloc(ny * 4), *Xg = malloc(nx * 4), *Yg = malloc(ny * 4);
    static const mf_precision precisions[] = {MF_PRECISION_BF16, MF_PRECISION_FP16};
    for (int k = 0; k < 2; k++)
        for (int variant = 0; variant < 2; variant++) {
            const char *name = k == 0 ? "bf16" : "fp16";
            mf_asd_opts o;
            mf_asd_opts_init(&o);
            o.rank = 5;
            o.variant = (mf_asd_variant)variant;
            o.precision = precisions[k];
            o.tolerance = 1e-30;
            o.stagnation_window = 0;
            o.max_iterations = 4;
            mf_asd_report rc = run_where(q.cpu, q.p.M, &o, Xc, Yc, MF_MEMORY_HOST);
            mf_asd_report rg = run_where(q.gpu, q.Mg, &o, Xg, Yg, MF_MEMORY_HOST);
            const double dx = tu_rel_diff((int64_t)nx, Xg, Xc),
                         dy = tu_rel_diff((int64_t)ny, Yg, Yc);
            const double dres = fabs(rg.relative_residual / rc.relative_residual - 1);
            printf("reduced parity %s %s, 4 iterations: X %.1e, Y %.1e, residual %.3e vs %.3e\n",
                   name, variant ? "scaled" : "plain", dx, dy, rg.relative_residual,
                   rc.relative_residual);
            ck_assert_int_eq(rc.reduced_iterations, 4);
            ck_assert_int_eq(rg.reduced_iterations, 4);
            const double bound = k == 0 ? 1e-2 : 2e-3;
            ck_assert_msg(dx < bound && dy < bound, "%s: X %g Y %g", name, dx, dy);
            ck_assert_msg(dres < 1e-2, "%s: residuals %g vs %g", name, rg.relative_residual,
                          rc.relative_residual);
            o.tolerance = 1e-6;
            o.stagnation_window = 15;
            o.max_iterations = 3000;
            rc = run_where(q.cpu, q.p.M, &o, Xc, Yc, MF_MEMORY_HOST);
            rg = run_where(q.gpu, q.Mg, &o, Xg, Yg, MF_MEMORY_HOST);
            const double err = full_error(&q.p, Xg, Yg, 5);
            printf("GPU planted %s %s: %d iterations (%d reduced; CPU %d, %d reduced), residual "
                   "%.2e, error %.2e, %.3f s\n",
                   name, variant ? "scaled" : "plain", rg.iterations, rg.reduced_iterations,
                   rc.iterations, rc.reduced_iterations, rg.relative_residual, err, rg.seconds);
            ck_assert_int_eq(rg.stopped, MF_ASD_STOP_TOLERANCE);
            ck_assert_double_le(rg.relative_residual, 1e-6);
            ck_assert_msg(err < 1e-4, "%s: error %g", name, err);
            ck_assert_msg(rg.reduced_iterations > 0 && rg.reduced_iterations < rg.iterations,
                          "%s: %d of %d reduced", name, rg.reduced_iterations, rg.iterations);
            ck_assert_msg(abs(rg.reduced_iterations - rc.reduced_iterations) <=
                              3 + rc.reduced_iterations / 10,
                          "%s: %d reduced iterations, the CPU's %d", name, rg.reduced_iterations,
                          rc.reduced_iterations);
        }
    free(Xc), free(Yc), free(Xg), free(Yg);
    free_pair(&q);
}
END_TEST

START_TEST(planted_recovery)
{
    pair q = make_pair(2000, 1500, 5, 0.10, NULL, 11);
    float *X = malloc((size_t)q.p.m * 5 * 4), *Y = malloc((size_t)q.p.n * 5 * 4);
    for (int variant = 0; variant < 2; variant++) {
        mf_asd_opts o;
        mf_asd_opts_init(&o);
        o.rank = 5;
        o.variant = (mf_asd_variant)variant;
        o.tolerance = 1e-6;
        o.max_iterations = 3000;
        mf_asd_report rep = run_where(q.gpu, q.Mg, &o, X, Y, MF_MEMORY_HOST);
        double err = full_error(&q.p, X, Y, 5);
        printf("GPU planted 2000 x 1500 r 5 %s: %d iterations, residual %.2e, error %.2e\n",
               variant ? "scaled" : "plain", rep.iterations, rep.relative_residual, err);
        ck_assert_int_eq(rep.stopped, MF_ASD_STOP_TOLERANCE);
        ck_assert_msg(err < 1e-4, "variant %d: error %g", variant, err);
        ck_assert(rep.peak_device_bytes > 0);
    }
    free(X), free(Y);
    free_pair(&q);
}
END_TEST

START_TEST(scaling_pays_when_ill_conditioned)
{
    const double scale[5] = {100, 31.6, 10, 3.16, 1};
    pair q = make_pair(800, 600, 5, 0.2, scale, 23);
    float *X = malloc((size_t)q.p.m * 5 * 4), *Y = malloc((size_t)q.p.n * 5 * 4);
    int its[2];
    for (int variant = 0; variant < 2; variant++) {
        mf_asd_opts o;
        mf_asd_opts_init(&o);
        o.rank = 5;
        o.variant = (mf_asd_variant)variant;
        o.tolerance = 1e-4;
        o.stagnation_window = 0;
        o.max_iterations = 600;
        mf_asd_report rep = run_where(q.gpu, q.Mg, &o, X, Y, MF_MEMORY_HOST);
        its[variant] = rep.stopped == MF_ASD_STOP_TOLERANCE ? rep.iterations : o.max_iterations + 1;
    }
    printf("GPU ill-conditioned: scaled %d, plain %d iterations\n", its[1], its[0]);
    ck_assert_msg(its[1] <= 600 && 3 * its[1] <= its[0], "scaled %d plain %d", its[1], its[0]);
    free(X), free(Y);
    free_pair(&q);
}
END_TEST

START_TEST(device_factors_and_test_rmse)
{
    /* Device factors give the host run's result; a given start from device memory; the
     * test-set RMSE agrees with the CPU engine's. */
    pair q = make_pair(500, 400, 4, 0.2, NULL, 31);
    planted t = make_planted(q.cpu, 500, 400, 4, 0.02, NULL, 31); /* same factors, new sample */
    mf_sparse *Tg = NULL;
    ck_assert_int_eq(mf_sparse_from_csr(q.gpu, &Tg, 500, 400, t.M->nnz, t.M->row_ptr, t.M->col,
                                        t.M->val, MF_MEMORY_HOST, 0),
                     MF_OK);
    const size_t nx = 500 * 4, ny = 400 * 4;
    float *Xh = malloc(nx * 4), *Yh = malloc(ny * 4), *Xb = malloc(nx * 4), *Yb = malloc(ny * 4);
#ifdef MFACT_HAVE_CUDA
    float *Xd = NULL, *Yd = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&Xd, nx * 4), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&Yd, ny * 4), cudaSuccess);
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    o.rank = 4;
    o.max_iterations = 15;
    o.test = Tg;
    mf_asd_report rh = run_where(q.gpu, q.Mg, &o, Xh, Yh, MF_MEMORY_HOST);
    mf_asd_report rd = run_where(q.gpu, q.Mg, &o, Xd, Yd, MF_MEMORY_DEVICE);
    ck_assert_int_eq(cudaMemcpy(Xb, Xd, nx * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(Yb, Yd, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(memcmp(Xb, Xh, nx * 4) == 0 && memcmp(Yb, Yh, ny * 4) == 0);
    ck_assert_double_eq(rh.test_rmse, rd.test_rmse);
    o.test = t.M;
    mf_asd_report rc = run_where(q.cpu, q.p.M, &o, Xb, Yb, MF_MEMORY_HOST);
    ck_assert_msg(fabs(rc.test_rmse - rh.test_rmse) <= 1e-3 * rc.test_rmse + 1e-6,
                  "test RMSE CPU %g GPU %g", rc.test_rmse, rh.test_rmse);
    /* Continue from the device factors (a given start) for 5 more iterations. */
    o.test = NULL;
    o.init = MF_ASD_INIT_GIVEN;
    o.max_iterations = 5;
    mf_asd_report rg = run_where(q.gpu, q.Mg, &o, Xd, Yd, MF_MEMORY_DEVICE);
    ck_assert_double_lt(rg.relative_residual, rh.relative_residual);
    cudaFree(Xd);
    cudaFree(Yd);
#endif
    free(Xh), free(Yh), free(Xb), free(Yb);
    mf_sparse_destroy(Tg);
    free_planted(&t);
    free_pair(&q);
}
END_TEST

START_TEST(rank_continuation_on_the_gpu)
{
    /* The ill-conditioned N(0, 1) case grown one rank at a time on the GPU; then a time
     * limit met at rank 1 with device factors: rank-5 factors, zero past column 1. */
    const double scale[5] = {1, 0.316, 0.1, 0.0316, 0.01};
    mf_ctx *gpu = tu_cuda_ctx(0);
    planted p = make_planted_dist(gpu, 800, 600, 5, 0.2, scale, 40, 1);
    const size_t nx = (size_t)p.m * 5, ny = (size_t)p.n * 5;
    float *X = malloc(nx * 4), *Y = malloc(ny * 4);
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    o.rank = 5;
    o.rank_continuation = 1;
    o.max_iterations = 2000;
    mf_asd_report rep = run_where(gpu, p.M, &o, X, Y, MF_MEMORY_HOST);
    double err = full_error(&p, X, Y, 5);
    printf("GPU continuation: %d iterations, error %.2e\n", rep.iterations, err);
    ck_assert_int_eq(rep.stopped, MF_ASD_STOP_TOLERANCE);
    ck_assert_msg(err < 1e-4, "error %g", err);
#ifdef MFACT_HAVE_CUDA
    float *Xd = NULL, *Yd = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&Xd, nx * 4), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&Yd, ny * 4), cudaSuccess);
    o.time_limit = 1e-9;
    rep = run_where(gpu, p.M, &o, Xd, Yd, MF_MEMORY_DEVICE);
    ck_assert_int_eq(rep.stopped, MF_ASD_STOP_TIME_LIMIT);
    ck_assert_int_eq(cudaMemcpy(X, Xd, nx * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < nx; i++)
        ck_assert(isfinite(X[i]) && (i % 5 == 0 || X[i] == 0.0f));
    cudaFree(Xd);
    cudaFree(Yd);
#endif
    free(X), free(Y);
    free_planted(&p);
    mf_ctx_destroy(gpu);
}
END_TEST

START_TEST(cancel_time_limit_rank_deficient)
{
    pair q = make_pair(300, 200, 3, 0.4, NULL, 5);
    float *X = malloc((size_t)q.p.m * 3 * 4), *Y = malloc((size_t)q.p.n * 3 * 4);
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    o.rank = 3;
    o.tolerance = 1e-12;
    int calls = 0;
    o.progress = asd_stop_at_3;
    o.progress_user = &calls;
    mf_asd_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_asd_run(q.gpu, q.Mg, &o, X, Y, MF_MEMORY_HOST, &rep), MF_ERR_CANCELLED);
    ck_assert_int_eq(calls, 3);
    ck_assert_int_eq(rep.stopped, MF_ASD_STOP_CANCELLED);
    ck_assert_int_eq(rep.iterations, 3);
    mf_asd_opts_init(&o);
    o.rank = 3;
    o.tolerance = 1e-30;
    o.stagnation_window = 0;
    o.max_iterations = 100000000;
    o.time_limit = 0.2;
    rep = run_where(q.gpu, q.Mg, &o, X, Y, MF_MEMORY_HOST);
    ck_assert_int_eq(rep.stopped, MF_ASD_STOP_TIME_LIMIT);
    ck_assert_double_lt(rep.seconds, 2.0);
    /* A start whose Y has a zero column: singular Gram, reported, and no NaN. */
    uint64_t st = 77;
    for (int64_t i = 0; i < (int64_t)q.p.m * 3; i++)
        X[i] = (float)tu_unit(&st);
    for (int64_t i = 0; i < (int64_t)q.p.n * 3; i++)
        Y[i] = i % 3 == 2 ? 0.0f : (float)tu_unit(&st);
    mf_asd_opts_init(&o);
    o.rank = 3;
    o.init = MF_ASD_INIT_GIVEN;
    o.max_iterations = 2000;
    rep = run_where(q.gpu, q.Mg, &o, X, Y, MF_MEMORY_HOST);
    ck_assert_int_ge(rep.singular_steps, 1);
    ck_assert_int_eq(rep.stopped, MF_ASD_STOP_TOLERANCE);
    ck_assert_msg(full_error(&q.p, X, Y, 3) < 1e-3, "error %g", full_error(&q.p, X, Y, 3));
    free(X), free(Y);
    free_pair(&q);
}
END_TEST

START_TEST(bad_input_leaves_device_factors)
{
    pair q = make_pair(8, 6, 2, 0.5, NULL, 3);
#ifdef MFACT_HAVE_CUDA
    float *Xd = NULL, *Yd = NULL, Xh[16], Yh[12];
    for (int i = 0; i < 16; i++)
        Xh[i] = 7.0f;
    for (int i = 0; i < 12; i++)
        Yh[i] = 7.0f;
    ck_assert_int_eq(cudaMalloc((void **)&Xd, sizeof Xh), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&Yd, sizeof Yh), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(Xd, Xh, sizeof Xh, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(Yd, Yh, sizeof Yh, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    o.rank = 7;
    ck_assert_int_eq(mf_asd_run(q.gpu, q.Mg, &o, Xd, Yd, MF_MEMORY_DEVICE, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(q.gpu, "rank = 7");
    o.rank = 2;
    o.tolerance = 0;
    ck_assert_int_eq(mf_asd_run(q.gpu, q.Mg, &o, Xd, Yd, MF_MEMORY_DEVICE, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    /* Host factors declared as device memory. */
    o.tolerance = 1e-5;
    ck_assert_int_ne(mf_asd_run(q.gpu, q.Mg, &o, Xh, Yh, MF_MEMORY_DEVICE, NULL), MF_OK);
    /* A NaN in a given device start. */
    float nan = NAN;
    ck_assert_int_eq(cudaMemcpy(Xd + 3, &nan, 4, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    o.init = MF_ASD_INIT_GIVEN;
    ck_assert_int_eq(mf_asd_run(q.gpu, q.Mg, &o, Xd, Yd, MF_MEMORY_DEVICE, NULL),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(q.gpu, "X[3]");
    float back[16];
    ck_assert_int_eq(cudaMemcpy(back, Xd, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 16; i++)
        ck_assert(i == 3 ? isnan(back[i]) : back[i] == 7.0f);
    ck_assert_int_eq(cudaMemcpy(back, Yd, sizeof Yh, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 12; i++)
        ck_assert(back[i] == 7.0f);
    cudaFree(Xd);
    cudaFree(Yd);
#endif
    free_pair(&q);
}
END_TEST

START_TEST(device_transpose_matches_host)
{
    /* The CSC sorted on the device equals the host's counting sort: empty rows and
     * columns, a pattern, and a wide matrix (many key bits). */
    mf_ctx *gpu = tu_cuda_ctx(0);
    const struct {
        int32_t m, n;
        double fraction;
        unsigned flags;
    } cases[] = {{300, 200, 0.05, 0}, {50, 100000, 0.001, 0}, {120, 90, 0.1, MF_SPARSE_PATTERN}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        planted p = make_planted(gpu, cases[c].m, cases[c].n, 1, cases[c].fraction, NULL, 7 + c);
        mf_sparse *S = NULL;
        ck_assert_int_eq(mf_sparse_from_csr(gpu, &S, p.m, p.n, p.M->nnz, p.M->row_ptr, p.M->col,
                                            p.M->val, MF_MEMORY_HOST, cases[c].flags),
                         MF_OK);
        const int64_t *dptr;
        const int32_t *drow;
        const float *dval;
        ck_assert_int_eq(mf_sparse_device_csc(S, &dptr, &drow, &dval), MF_OK);
        ck_assert_int_eq(mf_sparse_host_transpose(S), MF_OK);
        const size_t nnz = (size_t)S->nnz;
        int64_t *ptr = malloc(((size_t)p.n + 1) * 8);
        int32_t *row = malloc(nnz * 4 + 4);
        float *val = malloc(nnz * 4 + 4);
#ifdef MFACT_HAVE_CUDA
        /* The transpose is stream-ordered on the context's stream. */
        ck_assert_int_eq(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(gpu)), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(ptr, dptr, ((size_t)p.n + 1) * 8, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(row, drow, nnz * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert(memcmp(ptr, S->transpose.ptr, ((size_t)p.n + 1) * 8) == 0);
        ck_assert(memcmp(row, S->transpose.idx, nnz * 4) == 0);
        if (cases[c].flags & MF_SPARSE_PATTERN)
            ck_assert(dval == NULL);
        else {
            ck_assert_int_eq(cudaMemcpy(val, dval, nnz * 4, cudaMemcpyDeviceToHost), cudaSuccess);
            ck_assert(memcmp(val, S->transpose.val, nnz * 4) == 0);
        }
#endif
        free(ptr), free(row), free(val);
        mf_sparse_destroy(S);
        free_planted(&p);
    }
    mf_ctx_destroy(gpu);
}
END_TEST

/* A group over NCCL fits one GPU's factors (asd_check_group_matches_alone), over a group
 * of one and of every device (up to 4); the bound allows a float step length that a last
 * double bit of a sum tipped, and the output says whether the factors were bit for bit. */
START_TEST(group_fits_one_gpus_factors)
{
    int devices = 0;
    for (mf_ctx *c; devices < 4 && (c = asd_rank_ctx(MF_BACKEND_CUDA, devices)) != NULL; devices++)
        mf_ctx_destroy(c);
    const int sizes[] = {1, devices};
    if (!asd_check_group_matches_alone(MF_BACKEND_CUDA, sizes, devices > 1 ? 2 : 1, 1e-6,
                                       MF_PRECISION_FP32))
        printf("group_fits_one_gpus_factors: no group (NCCL?): skipped\n");
    else if (!asd_check_group_matches_alone(MF_BACKEND_CUDA, sizes, devices > 1 ? 2 : 1, 1e-6,
                                            MF_PRECISION_BF16))
        printf("group_fits_one_gpus_factors, bf16: no group (NCCL?): skipped\n");
    else {
        /* columns of about 4,100 entries, half of them past the long-line count (4,096):
         * the long-line kernel in every rank count; 8 iterations, off float's floor */
        const asd_case long_lines = {4500, 300, 8, 0.91, 22};
        ck_assert(asd_check_group_matches_alone_on(MF_BACKEND_CUDA, sizes, devices > 1 ? 2 : 1,
                                                   1e-6, MF_PRECISION_FP32, &long_lines, 8));
    }
}
END_TEST

/* A group's ranks over NCCL stop together on one rank's cancel, carried by the next
 * iteration's device sums (no round trip of their own), with the last iteration's
 * factors: a group of one and one of every device (up to 4). Two runs of one fit differ
 * only by the order of atomic adds, hence a bound rather than bits. Skipped without NCCL. */
START_TEST(group_stops_together_over_nccl)
{
    int devices = 0;
    for (mf_ctx *c; devices < 4 && (c = asd_rank_ctx(MF_BACKEND_CUDA, devices)) != NULL; devices++)
        mf_ctx_destroy(c);
    for (int n = 1; n <= devices; n = n == 1 && devices > 1 ? devices : n + devices) {
        if (!asd_check_group_cancel(MF_BACKEND_CUDA, n, 1e-5)) {
            printf("group_stops_together_over_nccl: no group of %d (NCCL?): skipped\n", n);
            return;
        }
    }
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_asd", .gpu = true, .timeout = 300};
    const TTest *const tests[] = {iterates_match_cpu,
                                  reduced_precision_matches_cpu_and_recovers,
                                  group_stops_together_over_nccl,
                                  group_fits_one_gpus_factors,
                                  planted_recovery,
                                  scaling_pays_when_ill_conditioned,
                                  device_factors_and_test_rmse,
                                  cancel_time_limit_rank_deficient,
                                  bad_input_leaves_device_factors,
                                  device_transpose_matches_host,
                                  rank_continuation_on_the_gpu};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
