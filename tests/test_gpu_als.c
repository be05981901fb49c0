/* mf_als_run on the CUDA backend: the batched LDL^T solver against float64, CPU/GPU
 * agreement (long rows split over several Gram segments included), planted recovery,
 * device-memory factors, batching under a memory limit, determinism, breakdown, empty
 * rows, and the MovieLens 100K quality bar. */
#include <math.h>

#include "als/als_internal.h"
#include "als_fixtures.h"
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static const int solver_k[] = {1, 2, 7, 32, 100, 256};

static int quick(void)
{
    return getenv("MFACT_UNDER_SANITIZER") != NULL;
}

START_TEST(ldlt_matches_float64)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    const int count = quick() ? 3 : 40;
    for (size_t t = 0; t < sizeof solver_k / sizeof *solver_k; t++) {
        int k = solver_k[t];
        float *A = malloc((size_t)count * k * k * sizeof *A), *b = malloc((size_t)count * k * 4);
        float *x = malloc((size_t)count * k * sizeof *x);
        double *ref = malloc((size_t)k * sizeof *ref);
        ck_assert(A && b && x && ref);
        for (int s = 0; s < count; s++)
            ax_spd(k, 0.5, 1000 * k + s, A + (size_t)s * k * k, b + (size_t)s * k);
        ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, k, count, A, b, x), MF_OK);
        double worst = 0.0;
        for (int s = 0; s < count; s++) {
            ax_solve64(k, A + (size_t)s * k * k, b + (size_t)s * k, ref);
            double e = ax_rel_diff(k, x + (size_t)s * k, ref);
            worst = e > worst ? e : worst;
        }
        ck_assert_msg(worst < 1e-5, "k = %d: worst relative error %g", k, worst);
        free(A), free(b), free(x), free(ref);
    }
    /* A singular system breaks down and is reported, with its pivot. */
    float S[4] = {1, 2, 2, 4}, sb[2] = {1, 1}, sx[2];
    ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, 2, 1, S, sb, sx), MF_ERR_NUMERIC);
    tu_assert_error_has(ctx, "pivot 1");
    mf_ctx_destroy(ctx);
}
END_TEST

static void run_als(mf_ctx *ctx, mf_sparse *R, int k, float lambda, int iterations,
                    mf_als_init init, float *U, float *V, mf_als_report *rep)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = k, o.lambda = lambda, o.iterations = iterations, o.init = init;
    o.weighting = MF_ALS_WEIGHT_COUNT; /* the lambdas below are ALS-WR's */
    rep->struct_size = sizeof *rep;
    ck_assert_msg(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, rep) == MF_OK, "%s",
                  mf_ctx_last_error(ctx));
}

/* 5 iterations on the CPU and the GPU from the same start agree within 1e-4. */
static void parity(int32_t users, int32_t items, double density, int k, mf_als_init init,
                   const int32_t *eu)
{
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    mf_sparse *Rc = ax_ratings(cpu, users, items, density, 77, eu, NULL);
    mf_sparse *Rg = ax_ratings(gpu, users, items, density, 77, eu, NULL);
    size_t ub = (size_t)users * k, vb = (size_t)items * k;
    float *Uc = malloc(ub * 4), *Vc = malloc(vb * 4), *Ug = malloc(ub * 4), *Vg = malloc(vb * 4);
    ck_assert(Uc && Vc && Ug && Vg);
    mf_als_report rc, rg;
    run_als(cpu, Rc, k, 0.1f, 5, init, Uc, Vc, &rc);
    run_als(gpu, Rg, k, 0.1f, 5, init, Ug, Vg, &rg);
    double du = tu_rel_diff(ub, Ug, Uc), dv = tu_rel_diff(vb, Vg, Vc);
    double dr = fabs(rg.train_rmse - rc.train_rmse) / rc.train_rmse;
    ck_assert_msg(du < 1e-4 && dv < 1e-4 && dr < 1e-4,
                  "%d x %d, k = %d, init %d: U differs by %g, V by %g, RMSE by %g", users, items, k,
                  (int)init, du, dv, dr);
    ck_assert(rg.gram_seconds > 0.0 && rg.solve_seconds > 0.0 && rg.peak_device_bytes > 0);
    for (const int32_t *u = eu; u && *u >= 0; u++)
        for (int t = 0; t < k; t++)
            ck_assert_float_eq(Ug[(size_t)*u * k + t], 0.0f);
    free(Uc), free(Vc), free(Ug), free(Vg);
    mf_sparse_destroy(Rc);
    mf_sparse_destroy(Rg);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}

START_TEST(cpu_gpu_agree)
{
    int32_t empty[] = {0, 5, 99, -1};
    const int ks[] = {1, 10, 33, 100, 256};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        if (quick() && ks[t] > 33)
            continue;
        parity(160, 120, 0.2, ks[t], MF_ALS_INIT_MEAN, empty);
    }
    parity(160, 120, 0.2, 33, MF_ALS_INIT_UNIFORM, empty);
    /* Every item rated by ~2250 users: the item systems span two Gram segments. */
    if (!quick())
        parity(3000, 60, 0.75, 16, MF_ALS_INIT_MEAN, NULL);
}
END_TEST

START_TEST(planted_recovery)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = ax_planted(ctx, 300, 200, 8, 0.25, 7);
    float *U = malloc(300 * 8 * 4), *V = malloc(200 * 8 * 4);
    /* The plain model: the planted one has no biases (test_model.c plants biases too). */
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.lambda = 1e-5f, o.iterations = 20, o.init = MF_ALS_INIT_MEAN, o.biases = 0;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_msg(rep.train_rmse < 1e-3, "train RMSE %g", rep.train_rmse);
    free(U), free(V);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Device factors, a tight memory limit (many batches) and a second run all give the
 * bit-identical result of the plain run, all from the default start. */
START_TEST(device_memory_batches_determinism)
{
    const int k = 24;
    const int32_t users = 900, items = 500;
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = ax_ratings(ctx, users, items, 0.05, 11, NULL, NULL);
    size_t ub = (size_t)users * k * 4, vb = (size_t)items * k * 4;
    float *U1 = malloc(ub), *V1 = malloc(vb), *U2 = malloc(ub), *V2 = malloc(vb);
    mf_als_report rep;
    run_als(ctx, R, k, 0.05f, 3, MF_ALS_INIT_UNIFORM, U1, V1, &rep);
    run_als(ctx, R, k, 0.05f, 3, MF_ALS_INIT_UNIFORM, U2, V2, &rep);
    ck_assert_mem_eq(U1, U2, ub);
    ck_assert_mem_eq(V1, V2, vb);

    void *dU = NULL, *dV = NULL;
    ck_assert_int_eq(cudaMalloc(&dU, ub), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&dV, vb), cudaSuccess);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = k, o.lambda = 0.05f, o.iterations = 3, o.weighting = MF_ALS_WEIGHT_COUNT;
    ck_assert_int_eq(mf_als_run(ctx, R, &o, dU, dV, MF_MEMORY_DEVICE, NULL), MF_OK);
    memset(U2, 0, ub), memset(V2, 0, vb);
    ck_assert_int_eq(cudaMemcpy(U2, dU, ub, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(V2, dV, vb, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_mem_eq(U1, U2, ub);
    ck_assert_mem_eq(V1, V2, vb);
    cudaFree(dU), cudaFree(dV);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);

    /* 1.5 MB: the ratings (both ways), factors and plans take ~0.6 MB, leaving room for
     * ~330 of the 2.5 KB partial systems: 3 batches for the 900 users, 2 for the items. */
    mf_ctx *tight = tu_cuda_ctx((size_t)3 << 19);
    R = ax_ratings(tight, users, items, 0.05, 11, NULL, NULL);
    run_als(tight, R, k, 0.05f, 3, MF_ALS_INIT_UNIFORM, U2, V2, &rep);
    ck_assert_mem_eq(U1, U2, ub);
    ck_assert_mem_eq(V1, V2, vb);
    mf_sparse_destroy(R);
    mf_ctx_destroy(tight);
    free(U1), free(V1), free(U2), free(V2);
}
END_TEST

START_TEST(breakdown_is_numeric)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    ax_check_breakdown(ctx);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(movielens_quality)
{
    /* Skipped under the sanitizers, whose slowdown it does not need. */
    if (quick()) {
        printf("movielens_quality (gpu): skipped under the sanitizer\n");
        return;
    }
    mf_ctx *ctx = tu_cuda_ctx(0);
    ax_check_movielens(ctx, "gpu");
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_als", .gpu = true, .timeout = 600};
    const TTest *const tests[] = {ldlt_matches_float64, cpu_gpu_agree,
                                  planted_recovery,     device_memory_batches_determinism,
                                  breakdown_is_numeric, movielens_quality};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
