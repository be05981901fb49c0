/* mf_als_run on the CUDA backend: the batched LDL^T solver against float64, CPU/GPU
 * agreement (long rows split over several Gram segments included), planted recovery,
 * device-memory factors, batching under a memory limit, determinism, breakdown, empty
 * rows, and the MovieLens 100K quality bar. */
#include <math.h>
#include <string.h>

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
        ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, k, count, A, b, 0, x), MF_OK);
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
    ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, 2, 1, S, sb, 0, sx), MF_ERR_NUMERIC);
    tu_assert_error_has(ctx, "pivot 1");
    mf_ctx_destroy(ctx);
}
END_TEST

/* The CG solver: from zero with enough steps, the float64 solution; from a start with
 * three steps, the CPU's CG (double) from the same start; an indefinite system breaks down
 * at the step that meets it. */
START_TEST(cg_matches_cpu)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    const int count = quick() ? 3 : 40;
    for (size_t t = 0; t < sizeof solver_k / sizeof *solver_k; t++) {
        int k = solver_k[t];
        if (k > MF_ALS_CG_MAX_ORDER)
            continue;
        float *A = malloc((size_t)count * k * k * sizeof *A), *b = malloc((size_t)count * k * 4);
        float *x = calloc((size_t)count * k, sizeof *x), *x0 = malloc((size_t)count * k * 4);
        float *xc = malloc((size_t)k * 4);
        double *ref = malloc((size_t)k * sizeof *ref), *work = malloc((size_t)4 * k * 8);
        ck_assert(A && b && x && x0 && xc && ref && work);
        for (int s = 0; s < count; s++)
            ax_spd(k, 0.5, 2000 * k + s, A + (size_t)s * k * k, b + (size_t)s * k);
        ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, k, count, A, b, 64, x), MF_OK);
        double worst = 0.0, worst3 = 0.0;
        for (int s = 0; s < count; s++) {
            ax_solve64(k, A + (size_t)s * k * k, b + (size_t)s * k, ref);
            double e = ax_rel_diff(k, x + (size_t)s * k, ref);
            worst = e > worst ? e : worst;
            for (int i = 0; i < k; i++) /* the next start: 10 % off */
                x0[(size_t)s * k + i] = x[(size_t)s * k + i] =
                    (float)(ref[i] * (1.0 + 0.1 * ((i % 3) - 1)));
        }
        ck_assert_msg(worst < 1e-4, "k = %d: worst relative error %g", k, worst);
        ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, k, count, A, b, 3, x), MF_OK);
        for (int s = 0; s < count; s++) {
            memcpy(xc, x0 + (size_t)s * k, (size_t)k * 4);
            ck_assert_int_eq(
                mf_cg_solve(k, A + (size_t)s * k * k, k, b + (size_t)s * k, xc, 3, work), -1);
            double d = 0.0, n = 0.0;
            for (int i = 0; i < k; i++) {
                d +=
                    ((double)x[(size_t)s * k + i] - xc[i]) * ((double)x[(size_t)s * k + i] - xc[i]);
                n += (double)xc[i] * xc[i];
            }
            worst3 = fmax(worst3, sqrt(d / n));
        }
        ck_assert_msg(worst3 < 1e-4, "k = %d: 3 steps differ from the CPU's by %g", k, worst3);
        free(A), free(b), free(x), free(x0), free(xc), free(ref), free(work);
    }
    float S[4] = {1, 0, 0, -1}, sb[2] = {0, 1}, sx[2] = {0, 0};
    ck_assert_int_eq(mf_cuda_als_solve_dense(ctx, 2, 1, S, sb, 6, sx), MF_ERR_NUMERIC);
    tu_assert_error_has(ctx, "CG step 0");
    mf_ctx_destroy(ctx);
}
END_TEST

/* The user systems of R for factors V, as bench_dense writes them (k x k with lambda n on
 * the diagonal, then the right-hand side), against float64: worst |error| / max |entry| of
 * a system. */
static double gram_error(mf_ctx *ctx, mf_sparse *R, int k, int kernel)
{
    const float lambda = 0.5f;
    int32_t users, items;
    int64_t nnz;
    ck_assert_int_eq(mf_sparse_shape(R, &users, &items, &nnz), MF_OK);
    int64_t *ptr = malloc(((size_t)users + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)nnz * sizeof *col);
    float *val = malloc((size_t)nnz * sizeof *val), *V = malloc((size_t)items * k * 4);
    float *A = malloc((size_t)users * k * k * 4), *b = malloc((size_t)users * k * 4);
    double *G = malloc((size_t)(k + 1) * k * sizeof *G);
    ck_assert(ptr && col && val && V && A && b && G);
    ck_assert_int_eq(mf_sparse_get_csr(R, ptr, col, val, MF_MEMORY_HOST), MF_OK);
    uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)k;
    for (int64_t i = 0; i < (int64_t)items * k; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        V[i] = (float)((double)(x >> 11) / 4503599627370496.0 - 1.0); /* [-1, 1) */
    }
    mf_als_bench *bench = NULL;
    ck_assert_msg(mf_cuda_als_bench_begin(ctx, R, k, lambda, V, users, kernel, &bench) == MF_OK,
                  "%s", mf_ctx_last_error(ctx));
    void *dA = NULL, *db = NULL;
    ck_assert_int_eq(cudaMalloc(&dA, (size_t)users * k * k * 4), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&db, (size_t)users * k * 4), cudaSuccess);
    ck_assert_int_eq(mf_cuda_als_bench_dense(bench, dA, db), MF_OK);
    ck_assert_int_eq(cudaMemcpy(A, dA, (size_t)users * k * k * 4, cudaMemcpyDeviceToHost),
                     cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(b, db, (size_t)users * k * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    double worst = 0.0;
    for (int32_t u = 0; u < users; u++) {
        memset(G, 0, (size_t)(k + 1) * k * sizeof *G); /* row k: the right-hand side */
        for (int64_t p = ptr[u]; p < ptr[u + 1]; p++) {
            const float *f = V + (size_t)col[p] * k;
            for (int i = 0; i < k; i++) {
                for (int m = 0; m < k; m++)
                    G[i * k + m] += (double)f[i] * f[m];
                G[k * k + i] += (double)val[p] * f[i];
            }
        }
        for (int i = 0; i < k; i++)
            G[i * k + i] += (double)lambda * (double)(ptr[u + 1] - ptr[u]);
        double big = 0.0, err = 0.0;
        for (int e = 0; e < (k + 1) * k; e++) {
            const double got = e < k * k ? A[(size_t)u * k * k + e] : b[(size_t)u * k + e - k * k];
            big = fmax(big, fabs(G[e]));
            err = fmax(err, fabs(got - G[e]));
        }
        worst = fmax(worst, big > 0.0 ? err / big : err);
    }
    cudaFree(dA), cudaFree(db);
    mf_cuda_als_bench_end(bench);
    free(ptr), free(col), free(val), free(V), free(A), free(b), free(G);
    return worst;
}

/* Both Gram kernels (tensor cores in 3xTF32 up to k = 127 where the GPU has them, and FP32)
 * form the systems to float accuracy: ranks on both sides of the tensor-core limit and of
 * the odd column block, rows shorter than a stage of 8-rating steps, rows over many stages,
 * and rows spanning two Gram segments. */
START_TEST(gram_matches_float64)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *shapes[] = {ax_ratings(ctx, 120, 90, 0.13, 5, NULL, NULL),
                           ax_ratings(ctx, 12, 2600, 0.9, 6, NULL, NULL)};
    const int ks[] = {1, 7, 16, 33, 100, 127, 150};
    for (size_t r = 0; r < 2; r++)
        for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
            if (quick() && (ks[t] > 33 || r > 0))
                continue;
            for (int kernel = MF_ALS_GRAM_FP32; kernel <= MF_ALS_GRAM_TC; kernel++) {
                double e = gram_error(ctx, shapes[r], ks[t], kernel);
                ck_assert_msg(e < 1e-5, "shape %zu, k = %d, %s kernel: error %g of the largest", r,
                              ks[t], kernel == MF_ALS_GRAM_TC ? "tensor-core" : "FP32", e);
            }
            /* One TF32 product a rating (CG's default): each product to 2^-11 of itself,
             * the sums in FP32, so the systems to about 1e-3 of their largest entry. */
            double e = gram_error(ctx, shapes[r], ks[t], MF_ALS_GRAM_TF32);
            ck_assert_msg(e < 2e-3, "shape %zu, k = %d, TF32 kernel: error %g of the largest", r,
                          ks[t], e);
        }
    mf_sparse_destroy(shapes[0]);
    mf_sparse_destroy(shapes[1]);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The solver run_als asks for (cpu_gpu_agree runs AUTO, cg_agree CG). */
static mf_als_solver run_solver = MF_ALS_SOLVER_AUTO;

/* The run's biases go to run_biases when it is not NULL (parity sets it). */
static mf_biases *run_biases = NULL;

/* opts.tf32 of run_als: 0 for the parity tests, which hold the GPU's CG to the CPU's float
 * products (tf32_close compares the default against that). */
static int run_tf32 = 0;

static void run_als(mf_ctx *ctx, mf_sparse *R, int k, float lambda, int iterations,
                    mf_als_init init, float *U, float *V, mf_als_report *rep)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = k, o.lambda = lambda, o.iterations = iterations, o.init = init;
    o.solver = run_solver;
    o.tf32 = run_tf32;
    o.bias_out = run_biases;
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
    float *buc = malloc((size_t)users * 4), *bic = malloc((size_t)items * 4);
    float *bug = malloc((size_t)users * 4), *big = malloc((size_t)items * 4);
    ck_assert(buc && bic && bug && big);
    mf_biases bc = {0.0f, buc, bic}, bg = {0.0f, bug, big};
    run_biases = &bc;
    run_als(cpu, Rc, k, 0.1f, 5, init, Uc, Vc, &rc);
    run_biases = &bg;
    run_als(gpu, Rg, k, 0.1f, 5, init, Ug, Vg, &rg);
    run_biases = NULL;
    double du = tu_rel_diff(ub, Ug, Uc), dv = tu_rel_diff(vb, Vg, Vc);
    double dr = fabs(rg.train_rmse - rc.train_rmse) / rc.train_rmse;
    ck_assert_int_eq(rg.solver, rc.solver);
    if (rc.solver == MF_ALS_SOLVER_EXACT) {
        ck_assert_msg(du < 1e-4 && dv < 1e-4 && dr < 1e-4,
                      "%d x %d, k = %d, init %d: U differs by %g, V by %g, RMSE by %g", users,
                      items, k, (int)init, du, dv, dr);
    } else {
        /* A few CG steps leave directions the data barely determine near their start, and
         * float and double rounding move them apart across iterations (the factors
         * differed by ~3e-3 at k = 10, U V^T over all cells by as much): the predictions
         * where the data determine them, at the ratings, must agree (measured: 2e-4), and
         * the RMSEs (measured: up to 1.1e-4). */
        int32_t rows_, cols_;
        int64_t nnz = 0;
        ck_assert_int_eq(mf_sparse_shape(Rc, &rows_, &cols_, &nnz), MF_OK);
        int64_t *ptr = malloc(((size_t)users + 1) * sizeof *ptr);
        int32_t *col = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *col);
        ck_assert(ptr && col);
        ck_assert_int_eq(mf_sparse_get_csr(Rc, ptr, col, NULL, MF_MEMORY_HOST), MF_OK);
        double d = 0.0, nrm = 0.0;
        for (int32_t u = 0; u < users; u++)
            for (int64_t p = ptr[u]; p < ptr[u + 1]; p++) {
                double pc = (double)bc.mean + buc[u] + bic[col[p]];
                double pg = (double)bg.mean + bug[u] + big[col[p]];
                for (int t = 0; t < k; t++) {
                    pc += (double)Uc[(size_t)u * k + t] * Vc[(size_t)col[p] * k + t];
                    pg += (double)Ug[(size_t)u * k + t] * Vg[(size_t)col[p] * k + t];
                }
                d += (pg - pc) * (pg - pc), nrm += pc * pc;
            }
        free(ptr), free(col);
        const double dp = sqrt(d / (nrm > 0.0 ? nrm : 1.0));
        ck_assert_msg(
            dp < 1e-3 && dr < 5e-4,
            "%d x %d, k = %d, init %d, CG: predictions at the ratings differ by %g, RMSE by %g",
            users, items, k, (int)init, dp, dr);
    }
    ck_assert(rg.gram_seconds > 0.0 && rg.solve_seconds > 0.0 && rg.peak_device_bytes > 0);
    for (const int32_t *u = eu; u && *u >= 0; u++)
        for (int t = 0; t < k; t++)
            ck_assert_float_eq(Ug[(size_t)*u * k + t], 0.0f);
    free(Uc), free(Vc), free(Ug), free(Vg);
    free(buc), free(bic), free(bug), free(big);
    mf_sparse_destroy(Rc);
    mf_sparse_destroy(Rg);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}

START_TEST(cpu_gpu_agree)
{
    run_solver = MF_ALS_SOLVER_AUTO; /* k = 100: CG */
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

/* CG forced at small ranks (AUTO runs it from rank 64 only): CPU and GPU agree. */
START_TEST(cg_agree)
{
    int32_t empty[] = {0, 5, 99, -1};
    run_solver = MF_ALS_SOLVER_CG;
    parity(160, 120, 0.2, 10, MF_ALS_INIT_MEAN, empty);
    parity(160, 120, 0.2, 33, MF_ALS_INIT_UNIFORM, empty);
    if (!quick())
        parity(3000, 60, 0.75, 16, MF_ALS_INIT_MEAN, NULL);
    /* and two GPU runs are bit-identical */
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = ax_ratings(ctx, 500, 300, 0.1, 5, NULL, NULL);
    float *U1 = malloc(500 * 33 * 4), *V1 = malloc(300 * 33 * 4), *U2 = malloc(500 * 33 * 4),
          *V2 = malloc(300 * 33 * 4);
    ck_assert(U1 && V1 && U2 && V2);
    mf_als_report rep;
    run_als(ctx, R, 33, 0.1f, 3, MF_ALS_INIT_UNIFORM, U1, V1, &rep);
    run_als(ctx, R, 33, 0.1f, 3, MF_ALS_INIT_UNIFORM, U2, V2, &rep);
    ck_assert_int_eq(rep.solver, MF_ALS_SOLVER_CG);
    ck_assert_mem_eq(U1, U2, 500 * 33 * 4);
    ck_assert_mem_eq(V1, V2, 300 * 33 * 4);
    free(U1), free(V1), free(U2), free(V2);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
    run_solver = MF_ALS_SOLVER_AUTO;
}
END_TEST

/* Whether R's user systems at rank k take the TF32 tensor-core kernel here (not its FP32
 * fallback: a GPU or a build without sm_80 code). */
static int tf32_on_tensor_cores(mf_ctx *ctx, mf_sparse *R, int k)
{
    int32_t users, items;
    ck_assert_int_eq(mf_sparse_shape(R, &users, &items, NULL), MF_OK);
    float *V = calloc((size_t)items * k, sizeof *V);
    ck_assert(V);
    mf_als_bench *b = NULL;
    ck_assert_int_eq(mf_cuda_als_bench_begin(ctx, R, k, 0.05f, V, users, MF_ALS_GRAM_TF32, &b),
                     MF_OK);
    double ms = 0.0;
    int tc = 0;
    ck_assert_int_eq(mf_cuda_als_bench_gram(b, MF_ALS_GRAM_TF32, &ms, &tc), MF_OK);
    mf_cuda_als_bench_end(b);
    free(V);
    return tc;
}

/* CG's default TF32 products against float-accurate ones on the same GPU, at k = 100 (AUTO:
 * CG) on long item rows and at k = 33 (CG forced) on short ones: the fits agree where the
 * data determine them (train RMSE, predictions at the ratings), and where the TF32 kernel
 * runs (tensor cores and sm_80 code in the build) the TF32 run did differ. */
START_TEST(tf32_close)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    struct {
        int32_t users, items;
        double density;
        int k;
        mf_als_solver solver;
    } cases[] = {{1200, 150, 0.4, 100, MF_ALS_SOLVER_AUTO}, {400, 300, 0.1, 33, MF_ALS_SOLVER_CG}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (quick() && c == 0)
            continue;
        const int32_t users = cases[c].users, items = cases[c].items;
        const int k = cases[c].k;
        mf_sparse *R = ax_ratings(ctx, users, items, cases[c].density, 31, NULL, NULL);
        const size_t ub = (size_t)users * k, vb = (size_t)items * k;
        float *U[2], *V[2], *bu[2], *bi[2];
        mf_biases b[2];
        mf_als_report rep[2];
        run_solver = cases[c].solver;
        for (int t = 0; t < 2; t++) {
            U[t] = malloc(ub * 4), V[t] = malloc(vb * 4);
            bu[t] = malloc((size_t)users * 4), bi[t] = malloc((size_t)items * 4);
            ck_assert(U[t] && V[t] && bu[t] && bi[t]);
            b[t] = (mf_biases){0.0f, bu[t], bi[t]};
            run_tf32 = t, run_biases = &b[t];
            run_als(ctx, R, k, 0.05f, 5, MF_ALS_INIT_UNIFORM, U[t], V[t], &rep[t]);
            ck_assert_int_eq(rep[t].solver, MF_ALS_SOLVER_CG);
        }
        run_tf32 = 0, run_solver = MF_ALS_SOLVER_AUTO, run_biases = NULL;
        const double dr = fabs(rep[1].train_rmse - rep[0].train_rmse) / rep[0].train_rmse;
        ck_assert_msg(dr < 2e-3, "k = %d: train RMSE %g with TF32, %g without", k,
                      rep[1].train_rmse, rep[0].train_rmse);
        if (tf32_on_tensor_cores(ctx, R, k))
            ck_assert_msg(memcmp(U[0], U[1], ub * 4) != 0, "k = %d: TF32 changed nothing", k);
        int64_t nnz = 0;
        int32_t r_, c_;
        ck_assert_int_eq(mf_sparse_shape(R, &r_, &c_, &nnz), MF_OK);
        int64_t *ptr = malloc(((size_t)users + 1) * sizeof *ptr);
        int32_t *col = malloc((size_t)nnz * sizeof *col);
        ck_assert(ptr && col);
        ck_assert_int_eq(mf_sparse_get_csr(R, ptr, col, NULL, MF_MEMORY_HOST), MF_OK);
        double d = 0.0, nrm = 0.0;
        for (int32_t u = 0; u < users; u++)
            for (int64_t p = ptr[u]; p < ptr[u + 1]; p++) {
                double p0 = (double)b[0].mean + bu[0][u] + bi[0][col[p]];
                double p1 = (double)b[1].mean + bu[1][u] + bi[1][col[p]];
                for (int t = 0; t < k; t++) {
                    p0 += (double)U[0][(size_t)u * k + t] * V[0][(size_t)col[p] * k + t];
                    p1 += (double)U[1][(size_t)u * k + t] * V[1][(size_t)col[p] * k + t];
                }
                d += (p1 - p0) * (p1 - p0), nrm += p0 * p0;
            }
        ck_assert_msg(sqrt(d / nrm) < 5e-3, "k = %d: predictions at the ratings differ by %g", k,
                      sqrt(d / nrm));
        free(ptr), free(col);
        for (int t = 0; t < 2; t++)
            free(U[t]), free(V[t]), free(bu[t]), free(bi[t]);
        mf_sparse_destroy(R);
    }
    mf_ctx_destroy(ctx);
}
END_TEST

/* A given start on matrices no run has touched (nothing derived from them cached yet, the
 * transpose included): the GPU runs, and agrees with the CPU. */
START_TEST(given_start_on_fresh_matrix)
{
    enum { users = 90, items = 70, k = 12 };
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    mf_sparse *Rc = ax_ratings(cpu, users, items, 0.2, 21, NULL, NULL);
    mf_sparse *Rg = ax_ratings(gpu, users, items, 0.2, 21, NULL, NULL);
    static float Vc[items * k], Vg[items * k], Uc[users * k], Ug[users * k];
    for (int i = 0; i < items * k; i++)
        Vc[i] = Vg[i] = (float)((i * 37) % 101) / 1010.0f;
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = k, o.lambda = 0.1f, o.iterations = 2, o.init = MF_ALS_INIT_GIVEN;
    ck_assert_int_eq(mf_als_run(cpu, Rc, &o, Uc, Vc, MF_MEMORY_HOST, NULL), MF_OK);
    ck_assert_msg(mf_als_run(gpu, Rg, &o, Ug, Vg, MF_MEMORY_HOST, NULL) == MF_OK, "%s",
                  mf_ctx_last_error(gpu));
    double du = tu_rel_diff(users * k, Ug, Uc), dv = tu_rel_diff(items * k, Vg, Vc);
    ck_assert_msg(du < 1e-4 && dv < 1e-4, "U differs by %g, V by %g", du, dv);
    mf_sparse_destroy(Rc);
    mf_sparse_destroy(Rg);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
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
    run_solver = MF_ALS_SOLVER_AUTO;
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
    const TTest *const tests[] = {ldlt_matches_float64,
                                  cg_matches_cpu,
                                  gram_matches_float64,
                                  cpu_gpu_agree,
                                  cg_agree,
                                  tf32_close,
                                  given_start_on_fresh_matrix,
                                  planted_recovery,
                                  device_memory_batches_determinism,
                                  breakdown_is_numeric,
                                  movielens_quality};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
