/* Biased models on the CUDA backend: ALS's and SGD's biases against the CPU engine's (one
 * SGD worker on each side), with biases on and off; the prediction calls on device and host
 * arrays against the CPU's, their bad input on the device; tuning and unseen users; models
 * saved from device memory. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "als_fixtures.h"
#include "sgd_fixtures.h"
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct fitted {
    float *U, *V, *bu, *bi;
    mf_biases b;
    double train, test;
} fitted;

static void fit_als(mf_ctx *ctx, mf_sparse *R, mf_sparse *T, int k, int biases, fitted *f)
{
    int32_t users, items;
    mf_sparse_shape(R, &users, &items, NULL);
    f->U = malloc((size_t)users * k * sizeof *f->U), f->V = malloc((size_t)items * k * 4);
    f->bu = malloc((size_t)users * 4), f->bi = malloc((size_t)items * 4);
    f->b = (mf_biases){NAN, f->bu, f->bi};
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = k, o.lambda = 0.1f, o.iterations = 5, o.test = T, o.biases = biases;
    o.weighting = MF_ALS_WEIGHT_COUNT; /* systems well posed at k = 100 with ~20 ratings a row */
    /* Factor-level parity needs the exact solver (AUTO takes CG at k = 100, whose CPU and GPU
     * factors agree only in their predictions: test_gpu_als's cg_agree). */
    o.solver = MF_ALS_SOLVER_EXACT;
    o.bias_out = &f->b;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_msg(mf_als_run(ctx, R, &o, f->U, f->V, MF_MEMORY_HOST, &rep) == MF_OK, "%s",
                  mf_ctx_last_error(ctx));
    f->train = rep.train_rmse, f->test = rep.test_rmse;
}

static void fit_sgd(mf_ctx *ctx, mf_sparse *R, mf_sparse *T, int k, int half, fitted *f)
{
    int32_t users, items;
    mf_sparse_shape(R, &users, &items, NULL);
    f->U = malloc((size_t)users * k * sizeof *f->U), f->V = malloc((size_t)items * k * 4);
    f->bu = malloc((size_t)users * 4), f->bi = malloc((size_t)items * 4);
    f->b = (mf_biases){NAN, f->bu, f->bi};
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = k, o.epochs = 3, o.workers = 1, o.learning_rate = 0.02f, o.test = T;
    o.storage = half ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
    o.bias_out = &f->b;
    mf_sgd_report rep = {.struct_size = sizeof rep};
    ck_assert_msg(mf_sgd_hogwild_run(ctx, R, &o, f->U, f->V, MF_MEMORY_HOST, &rep) == MF_OK, "%s",
                  mf_ctx_last_error(ctx));
    f->train = rep.train_rmse, f->test = rep.test_rmse;
}

static void release(fitted *f)
{
    free(f->U), free(f->V), free(f->bu), free(f->bi);
}

START_TEST(biases_match_cpu)
{
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    const int32_t empty[] = {7, -1};
    mf_sparse *Rg = ax_ratings(gpu, 300, 200, 0.1, 17, empty, empty);
    mf_sparse *Rc = ax_ratings(cpu, 300, 200, 0.1, 17, empty, empty);
    mf_sparse *Tg = ax_ratings(gpu, 300, 200, 0.02, 18, NULL, NULL);
    mf_sparse *Tc = ax_ratings(cpu, 300, 200, 0.02, 18, NULL, NULL);
    static const int ks[] = {1, 7, 8, 31, 100};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++)
        for (int biases = 0; biases < 2; biases++) {
            const int k = ks[t];
            fitted g, c;
            fit_als(gpu, Rg, Tg, k, biases, &g);
            fit_als(cpu, Rc, Tc, k, biases, &c);
            double du = tu_rel_diff(300 * k, g.U, c.U), dv = tu_rel_diff(200 * k, g.V, c.V);
            double dbu = tu_rel_diff(300, g.bu, c.bu), dbi = tu_rel_diff(200, g.bi, c.bi);
            ck_assert_msg(du < 1e-3 && dv < 1e-3, "ALS k %d biases %d: U %g V %g", k, biases, du,
                          dv);
            if (biases) {
                ck_assert_msg(dbu < 1e-3 && dbi < 1e-3, "ALS k %d: bu %g bi %g", k, dbu, dbi);
                ck_assert_float_eq(g.b.mean, c.b.mean);
                ck_assert_float_eq(g.bu[7], 0.0f);
            } else {
                ck_assert(g.b.mean == 0.0f && g.bu[0] == 0.0f && g.bi[0] == 0.0f);
            }
            ck_assert_double_eq_tol(g.test, c.test, 1e-4 * c.test);
            release(&g), release(&c);
        }
    /* k = 32 and 100: the CUDA engine's update groups of 4, 8 and 16 lanes and a whole warp
     * (fp32 at k = 100). */
    for (int k = 32; k <= 100; k += 68)
        for (int half = 0; half < 2; half++) {
            fitted g, c;
            fit_sgd(gpu, Rg, Tg, k, half, &g);
            fit_sgd(cpu, Rc, Tc, k, half, &c);
            double tol = half ? 3e-3 : 1e-4;
            double dbu = tu_rel_diff(300, g.bu, c.bu), dbi = tu_rel_diff(200, g.bi, c.bi);
            ck_assert_msg(dbu < tol && dbi < tol, "SGD k %d half %d: bu %g bi %g", k, half, dbu,
                          dbi);
            ck_assert_double_eq_tol(g.test, c.test, 10 * tol * c.test);
            release(&g), release(&c);
        }
    mf_sparse_destroy(Rg), mf_sparse_destroy(Rc), mf_sparse_destroy(Tg), mf_sparse_destroy(Tc);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

#ifdef MFACT_HAVE_CUDA
static void *to_device(const void *src, size_t bytes)
{
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes ? bytes : 4), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    /* A pageable copy may still be in flight when cudaMemcpy returns, and mfact works on
     * its own non-blocking stream: wait for the data before handing it over. */
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    return d;
}
#endif

/* Predictions on device and host arrays equal the CPU's; a negative index on the device is
 * named and out keeps its contents; the model RMSE agrees; a matrix beyond the model. */
START_TEST(predictions_match_cpu)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    mf_sparse *Rg = ax_ratings(gpu, 120, 80, 0.2, 3, NULL, NULL);
    mf_sparse *Rc = ax_ratings(cpu, 120, 80, 0.2, 3, NULL, NULL);
    int64_t nnz;
    mf_sparse_shape(Rc, NULL, NULL, &nnz);
    fitted f;
    fit_als(cpu, Rc, NULL, 6, 1, &f);
    mf_model m;
    mf_model_init(&m);
    m.users = 120, m.items = 80, m.k = 6, m.U = f.U, m.ldu = 6, m.V = f.V, m.ldv = 6;
    m.mean = f.b.mean, m.user_bias = f.bu, m.item_bias = f.bi;
    float *pc = malloc((size_t)nnz * 4), *ph = malloc((size_t)nnz * 4),
          *pd = malloc((size_t)nnz * 4);
    ck_assert_int_eq(mf_predict(cpu, &m, Rc, pc), MF_OK);
    ck_assert_int_eq(mf_predict(gpu, &m, Rg, ph), MF_OK); /* host arrays, staged */
    ck_assert(tu_rel_diff(nnz, ph, pc) < 1e-6);
    double rc = 0, rg = 0;
    ck_assert_int_eq(mf_model_rmse(cpu, &m, Rc, &rc), MF_OK);
    ck_assert_int_eq(mf_model_rmse(gpu, &m, Rg, &rg), MF_OK);
    ck_assert_double_eq_tol(rg, rc, 1e-6 * rc);

    mf_model d = m; /* the same model in device memory */
    d.where = MF_MEMORY_DEVICE;
    d.U = to_device(f.U, 120 * 6 * 4), d.V = to_device(f.V, 80 * 6 * 4);
    d.user_bias = to_device(f.bu, 120 * 4), d.item_bias = to_device(f.bi, 80 * 4);
    float *dout = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&dout, (size_t)nnz * 4), cudaSuccess);
    ck_assert_int_eq(mf_predict(gpu, &d, Rg, dout), MF_OK);
    ck_assert_int_eq(cudaMemcpy(pd, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(tu_rel_diff(nnz, pd, pc) < 1e-6);
    ck_assert_int_eq(mf_model_rmse(gpu, &d, Rg, &rg), MF_OK);
    ck_assert_double_eq_tol(rg, rc, 1e-6 * rc);

    int32_t *r = malloc((size_t)nnz * 4), *c = malloc((size_t)nnz * 4);
    ck_assert_int_eq(mf_sparse_get_coo(Rc, r, c, NULL, MF_MEMORY_HOST), MF_OK);
    int32_t *dr = to_device(r, (size_t)nnz * 4), *dc = to_device(c, (size_t)nnz * 4);
    ck_assert_int_eq(mf_predict_pairs(gpu, &d, nnz, dr, dc, dout), MF_OK);
    ck_assert_int_eq(cudaMemcpy(pd, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(tu_rel_diff(nnz, pd, pc) < 1e-6);
    /* a negative item on the device: named, nothing written */
    r[3] = 1, c[3] = -4;
    ck_assert_int_eq(cudaMemcpy(dc, c, (size_t)nnz * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemset(dout, 0, (size_t)nnz * 4), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess); /* see to_device */
    ck_assert_int_eq(mf_predict_pairs(gpu, &d, nnz, dr, dc, dout), MF_ERR_INVALID_DATA);
    tu_assert_error_has(gpu, "pair 3");
    ck_assert_int_eq(cudaMemcpy(pd, dout, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_float_eq(pd[0], 0.0f);
    /* beyond the model: unseen rows and columns */
    int32_t br[] = {0, 130}, bc[] = {90, 5};
    mf_sparse *Sg = NULL, *Sc = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(gpu, &Sg, 140, 100, 2, br, bc, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_from_coo(cpu, &Sc, 140, 100, 2, br, bc, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    float two_g[2], two_c[2];
    ck_assert_int_eq(mf_predict(gpu, &m, Sg, two_g), MF_OK);
    ck_assert_int_eq(mf_predict(cpu, &m, Sc, two_c), MF_OK);
    ck_assert_float_eq_tol(two_g[0], f.b.mean + f.bu[0], 1e-6f);
    ck_assert_float_eq_tol(two_g[1], f.b.mean + f.bi[5], 1e-6f);
    ck_assert_float_eq_tol(two_c[0], two_g[0], 1e-6f);
    cudaFree((void *)d.U), cudaFree((void *)d.V), cudaFree((void *)d.user_bias);
    cudaFree((void *)d.item_bias), cudaFree(dout), cudaFree(dr), cudaFree(dc);
    free(pc), free(ph), free(pd), free(r), free(c);
    release(&f);
    mf_sparse_destroy(Rg), mf_sparse_destroy(Rc), mf_sparse_destroy(Sg), mf_sparse_destroy(Sc);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
#endif
}
END_TEST

#ifdef MFACT_HAVE_CUDA
/* A model of factors and biases uniform in [-0.5, 0.5) and mean 3.5: rows users x k and
 * items x k, on the host (host) and copied to the device (dev). */
typedef struct random_model {
    float *U, *V, *bu, *bi;
    mf_model host, dev;
} random_model;

static void make_random_model(random_model *r, int32_t users, int32_t items, int k, uint64_t seed)
{
    r->U = malloc((size_t)users * k * 4), r->V = malloc((size_t)items * k * 4);
    r->bu = malloc((size_t)users * 4), r->bi = malloc((size_t)items * 4);
    for (int64_t p = 0; p < (int64_t)users * k; p++)
        r->U[p] = (float)(tu_unit(&seed) - 0.5);
    for (int64_t p = 0; p < (int64_t)items * k; p++)
        r->V[p] = (float)(tu_unit(&seed) - 0.5);
    for (int p = 0; p < users; p++)
        r->bu[p] = (float)(tu_unit(&seed) - 0.5);
    for (int p = 0; p < items; p++)
        r->bi[p] = (float)(tu_unit(&seed) - 0.5);
    mf_model *m = &r->host, *d = &r->dev;
    mf_model_init(m);
    m->users = users, m->items = items, m->k = k, m->U = r->U, m->ldu = k, m->V = r->V;
    m->ldv = k, m->mean = 3.5f, m->user_bias = r->bu, m->item_bias = r->bi;
    *d = *m;
    d->where = MF_MEMORY_DEVICE;
    d->U = to_device(r->U, (size_t)users * k * 4), d->V = to_device(r->V, (size_t)items * k * 4);
    d->user_bias = to_device(r->bu, (size_t)users * 4);
    d->item_bias = to_device(r->bi, (size_t)items * 4);
}

static void free_random_model(random_model *r)
{
    cudaFree((void *)r->dev.U), cudaFree((void *)r->dev.V);
    cudaFree((void *)r->dev.user_bias), cudaFree((void *)r->dev.item_bias);
    free(r->U), free(r->V), free(r->bu), free(r->bi);
}

#endif

/* model.precision and ALS's rmse_precision on the GPU: predictions (the SDDMM path, staged
 * and on device; the pairs kernel; a matrix beyond the model) and RMSEs in TF32, BF16, FP16
 * and 3XTF32 equal the CPU's in that precision up to float accumulation order, and are
 * visibly not float's; a GPU ALS run's reported RMSEs are mf_rmse_ex's of its factors. The
 * matrix has over 200,000 entries, so the 16-bit calls time their CUDA-core variants first. */
START_TEST(reduced_precision_matches_cpu)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    enum { USERS = 3000, ITEMS = 2000, K = 40 };
    mf_sparse *Rg = ax_ratings(gpu, USERS, ITEMS, 0.05, 41, NULL, NULL);
    mf_sparse *Rc = ax_ratings(cpu, USERS, ITEMS, 0.05, 41, NULL, NULL);
    int64_t nnz;
    mf_sparse_shape(Rc, NULL, NULL, &nnz);
    ck_assert(nnz > 200000);
    random_model rm;
    make_random_model(&rm, USERS, ITEMS, K, 5);
    mf_model m = rm.host, d = rm.dev;
    float *U = rm.U, *V = rm.V; /* the ALS run below writes its factors here */
    float *exact = malloc((size_t)nnz * 4), *pc = malloc((size_t)nnz * 4),
          *pg = malloc((size_t)nnz * 4), *dout = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&dout, (size_t)nnz * 4), cudaSuccess);
    int32_t *r = malloc((size_t)nnz * 4), *c = malloc((size_t)nnz * 4);
    ck_assert_int_eq(mf_sparse_get_coo(Rc, r, c, NULL, MF_MEMORY_HOST), MF_OK);
    int32_t *dr = to_device(r, (size_t)nnz * 4), *dc = to_device(c, (size_t)nnz * 4);
    ck_assert_int_eq(mf_predict(cpu, &m, Rc, exact), MF_OK);
    /* a few entries beyond the model: the pairs path of mf_predict */
    int32_t br[] = {0, 5, USERS + 3, 77}, bc[] = {1, ITEMS + 1, 9, 1999};
    mf_sparse *Bg = NULL, *Bc = NULL;
    ck_assert_int_eq(
        mf_sparse_from_coo(gpu, &Bg, USERS + 5, ITEMS + 5, 4, br, bc, NULL, MF_MEMORY_HOST, 0),
        MF_OK);
    ck_assert_int_eq(
        mf_sparse_from_coo(cpu, &Bc, USERS + 5, ITEMS + 5, 4, br, bc, NULL, MF_MEMORY_HOST, 0),
        MF_OK);
    for (int prec = MF_PRECISION_3XTF32; prec <= MF_PRECISION_FP16; prec++) {
        m.precision = d.precision = (mf_precision)prec;
        ck_assert_int_eq(mf_predict(cpu, &m, Rc, pc), MF_OK);
        ck_assert_msg(mf_predict(gpu, &m, Rg, pg) == MF_OK, "%s", mf_ctx_last_error(gpu));
        double dh = tu_rel_diff(nnz, pg, pc);
        ck_assert_int_eq(mf_predict(gpu, &d, Rg, dout), MF_OK);
        ck_assert_int_eq(cudaMemcpy(pg, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        double dd = tu_rel_diff(nnz, pg, pc);
        ck_assert_int_eq(mf_predict_pairs(gpu, &d, nnz, dr, dc, dout), MF_OK);
        ck_assert_int_eq(cudaMemcpy(pg, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        double dp = tu_rel_diff(nnz, pg, pc), apart = tu_rel_diff(nnz, pc, exact);
        ck_assert_msg(dh < 1e-6 && dd < 1e-6 && dp < 1e-6,
                      "precision %d: staged %g, device %g, pairs %g from the CPU", prec, dh, dd,
                      dp);
        if (prec == MF_PRECISION_3XTF32)
            ck_assert_msg(apart < 1e-6, "3xTF32 %g from float", apart);
        else
            ck_assert_msg(apart > 1e-6, "precision %d %g from float: as if unrounded", prec, apart);
        double rc = 0, rg = 0, rd = 0;
        ck_assert_int_eq(mf_model_rmse(cpu, &m, Rc, &rc), MF_OK);
        ck_assert_int_eq(mf_model_rmse(gpu, &m, Rg, &rg), MF_OK);
        ck_assert_int_eq(mf_model_rmse(gpu, &d, Rg, &rd), MF_OK);
        ck_assert_double_eq_tol(rg, rc, 1e-6 * rc);
        ck_assert_double_eq_tol(rd, rc, 1e-6 * rc);
        float four_g[4], four_c[4];
        ck_assert_int_eq(mf_predict(gpu, &m, Bg, four_g), MF_OK);
        ck_assert_int_eq(mf_predict(cpu, &m, Bc, four_c), MF_OK);
        for (int p = 0; p < 4; p++)
            ck_assert_float_eq_tol(four_g[p], four_c[p], 1e-5f);
    }
    /* ALS on the GPU: the reported RMSEs are mf_rmse_ex's of the factors it returns */
    mf_sparse *Tg = ax_ratings(gpu, USERS, ITEMS, 0.01, 42, NULL, NULL);
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = K, o.iterations = 2, o.test = Tg, o.biases = 0;
    o.rmse_precision = MF_PRECISION_BF16;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_msg(mf_als_run(gpu, Rg, &o, U, V, MF_MEMORY_HOST, &rep) == MF_OK, "%s",
                  mf_ctx_last_error(gpu));
    ax_check_reported_rmse(gpu, &rep, Rg, Tg, K, U, V, MF_PRECISION_BF16, 1e-6);
    free_random_model(&rm);
    cudaFree(dout), cudaFree(dr), cudaFree(dc);
    free(exact), free(pc), free(pg), free(r), free(c);
    mf_sparse_destroy(Rg), mf_sparse_destroy(Rc), mf_sparse_destroy(Tg);
    mf_sparse_destroy(Bg), mf_sparse_destroy(Bc);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
#endif
}
END_TEST

/* mf_predict on device arrays under device-memory limits from an eighth of the call's peak
 * to all of it (a fresh context and matrix each, so the SDDMM tunes again): each call
 * matches the CPU's predictions or fails with MF_ERR_OUT_OF_MEMORY and out unchanged. fp32,
 * TF32 and bf16 (TF32's copies of both, bf16's of B: about 100 entries a user, 150 an item;
 * TF32's forced by MFACT_SDDMM_COPIES=on, the call's work being under the library's gate for
 * them, MF_SDDMM_TF32_COPY_MIN_WORK). */
START_TEST(device_predictions_fail_cleanly)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *cpu = tu_cpu_ctx();
    enum { USERS = 3000, ITEMS = 2000, K = 40, STEPS = 8 };
    mf_sparse *Rc = ax_ratings(cpu, USERS, ITEMS, 0.05, 43, NULL, NULL);
    int64_t nnz;
    mf_sparse_shape(Rc, NULL, NULL, &nnz);
    ck_assert(nnz > 200000); /* timed: the tuning allocates a layout per candidate */
    random_model rm;
    make_random_model(&rm, USERS, ITEMS, K, 9);
    mf_model m = rm.host, d = rm.dev;
    float *want = malloc((size_t)nnz * 4), *got = malloc((size_t)nnz * 4), *dout = NULL;
    unsigned char *poison = malloc((size_t)nnz * 4);
    memset(poison, 0x7f, (size_t)nnz * 4);
    ck_assert_int_eq(cudaMalloc((void **)&dout, (size_t)nnz * 4), cudaSuccess);
    static const mf_precision precs[] = {MF_PRECISION_FP32, MF_PRECISION_TF32, MF_PRECISION_BF16};
    for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
        m.precision = d.precision = precs[pi];
        if (precs[pi] == MF_PRECISION_TF32)
            setenv("MFACT_SDDMM_COPIES", "on", 1);
        ck_assert_int_eq(mf_predict(cpu, &m, Rc, want), MF_OK);
        size_t peak = 0;
        int failed = 0, passed = 0;
        for (int step = -1; step <= STEPS; step++) {
            if (step == 0) /* a limit of 0 is none */
                continue;
            mf_ctx *gpu = tu_cuda_ctx(step < 0 ? 0 : peak * (size_t)step / STEPS);
            mf_sparse *Rg = ax_ratings(gpu, USERS, ITEMS, 0.05, 43, NULL, NULL);
            ck_assert_int_eq(cudaMemcpy(dout, poison, (size_t)nnz * 4, cudaMemcpyHostToDevice),
                             cudaSuccess);
            ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
            mf_status s = mf_predict(gpu, &d, Rg, dout);
            ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
            ck_assert_int_eq(cudaMemcpy(got, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost),
                             cudaSuccess);
            if (step < 0)
                peak = tu_memory_stats(gpu).peak_bytes;
            if (s == MF_OK) {
                passed++;
                double diff = tu_rel_diff(nnz, got, want);
                ck_assert_msg(diff < 1e-6, "precision %d, limit %d/%d: %g from the CPU",
                              (int)precs[pi], step, STEPS, diff);
            } else {
                failed++;
                ck_assert_msg(s == MF_ERR_OUT_OF_MEMORY, "precision %d, limit %d/%d: %s",
                              (int)precs[pi], step, STEPS, mf_ctx_last_error(gpu));
                ck_assert_msg(step < STEPS, "precision %d failed with its whole peak allowed",
                              (int)precs[pi]);
                ck_assert_msg(!memcmp(got, poison, (size_t)nnz * 4),
                              "precision %d, limit %d/%d: out changed by a failed call",
                              (int)precs[pi], step, STEPS);
            }
            mf_sparse_destroy(Rg);
            mf_ctx_destroy(gpu);
        }
        ck_assert_uint_gt(peak, 0);
        ck_assert_int_gt(failed, 0);
        ck_assert_int_gt(passed, 1);
        unsetenv("MFACT_SDDMM_COPIES");
    }
    cudaFree(dout);
    free_random_model(&rm);
    free(want), free(got), free(poison);
    mf_sparse_destroy(Rc);
    mf_ctx_destroy(cpu);
#endif
}
END_TEST

/* Tuning on the GPU, factors in device memory: a candidate is chosen and reported. */
START_TEST(tuning_on_device)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = ax_ratings(ctx, 200, 150, 0.2, 23, NULL, NULL);
    float *dU = NULL, *dV = NULL, *dbu = NULL, *dbi = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&dU, 200 * 16 * 4), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dV, 150 * 16 * 4), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dbu, 200 * 4), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dbi, 150 * 4), cudaSuccess);
    mf_biases b = {NAN, dbu, dbi};
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 16, o.tune = MF_TUNE_LAMBDA | MF_TUNE_RANK, o.bias_out = &b;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &o, dU, dV, MF_MEMORY_DEVICE, &rep), MF_OK);
    ck_assert(rep.rank == 16 || rep.rank == 8 || rep.rank == 4);
    ck_assert(isfinite(rep.validation_rmse) && isfinite(b.mean));
    float U[200 * 16];
    ck_assert_int_eq(cudaMemcpy(U, dU, sizeof U, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int u = 0; u < 200; u++)
        for (int t = rep.rank; t < 16; t++)
            ck_assert_float_eq(U[u * 16 + t], 0.0f);
    mf_sgd_opts s;
    mf_sgd_opts_init(&s);
    s.rank = 16, s.tune = MF_TUNE_LAMBDA, s.bias_out = &b;
    mf_sgd_report srep = {.struct_size = sizeof srep};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &s, dU, dV, MF_MEMORY_DEVICE, &srep), MF_OK);
    ck_assert(isfinite(srep.validation_rmse));
    cudaFree(dU), cudaFree(dV), cudaFree(dbu), cudaFree(dbi);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
#endif
}
END_TEST

#ifdef MFACT_HAVE_CUDA
/* A device copy of host rows (rows x k, ld k) at leading dimension ld, the padding NaN: the
 * saved file must not see it. */
static float *to_device_padded(const float *src, int32_t rows, int k, int ld)
{
    float *h = malloc((size_t)rows * ld * sizeof(float));
    ck_assert_ptr_nonnull(h);
    for (int64_t p = 0; p < (int64_t)rows * ld; p++)
        h[p] = p % ld < k ? src[p / ld * k + p % ld] : NAN;
    float *d = to_device(h, (size_t)rows * ld * sizeof(float));
    free(h);
    return d;
}

/* Every array of the loaded model equals the host model's, bit for bit. */
static void check_loaded(mf_ctx *ctx, const mf_model *want, const char *path)
{
    mf_saved_model *s = NULL;
    ck_assert_int_eq(mf_model_load(ctx, path, &s), MF_OK);
    mf_model got;
    mf_model_init(&got);
    ck_assert_int_eq(mf_saved_model_view(s, &got), MF_OK);
    ck_assert_int_eq(got.where, MF_MEMORY_HOST);
    ck_assert(got.users == want->users && got.items == want->items && got.k == want->k);
    ck_assert(memcmp(&got.mean, &want->mean, sizeof got.mean) == 0);
    ck_assert(memcmp(got.U, want->U, (size_t)want->users * want->k * sizeof(float)) == 0);
    ck_assert(memcmp(got.V, want->V, (size_t)want->items * want->k * sizeof(float)) == 0);
    ck_assert_int_eq(!got.user_bias, !want->user_bias);
    ck_assert_int_eq(!got.item_bias, !want->item_bias);
    if (want->user_bias)
        ck_assert(memcmp(got.user_bias, want->user_bias, (size_t)want->users * 4) == 0);
    if (want->item_bias)
        ck_assert(memcmp(got.item_bias, want->item_bias, (size_t)want->items * 4) == 0);
    mf_saved_model_destroy(s);
}
#endif

/* mf_model_save of a model in device memory (CUDA context) writes the same bytes as the
 * same model on the host, with padded leading dimensions and without biases too, and
 * loads back bit for bit; a device model that cannot be written leaves no file. */
START_TEST(saved_from_device)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *ctx = tu_cuda_ctx(0);
    random_model r;
    make_random_model(&r, 300, 200, 24, 91);
    char dir[256];
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/mfact-gpu-model-XXXXXX", tmp);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char host_path[300], dev_path[300], bad_path[300];
    snprintf(host_path, sizeof host_path, "%s/host.mfm", dir);
    snprintf(dev_path, sizeof dev_path, "%s/device.mfm", dir);
    snprintf(bad_path, sizeof bad_path, "%s/no-such-dir/device.mfm", dir);
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = "als", o.options = "rank=24";
    for (int variant = 0; variant < 3; variant++) {
        /* 0: the device model as made; 1: padded leading dimensions; 2: no biases */
        mf_model host = r.host, dev = r.dev;
        float *dU = NULL, *dV = NULL;
        if (variant == 1) {
            dU = to_device_padded(r.U, 300, 24, 27), dV = to_device_padded(r.V, 200, 24, 31);
            dev.U = dU, dev.ldu = 27, dev.V = dV, dev.ldv = 31;
        }
        if (variant == 2)
            host.user_bias = host.item_bias = dev.user_bias = dev.item_bias = NULL;
        ck_assert_int_eq(mf_model_save(ctx, &host, &o, host_path), MF_OK);
        ck_assert_int_eq(mf_model_save(ctx, &dev, &o, dev_path), MF_OK);
        size_t nh = 0, nd = 0;
        unsigned char *bh = tu_read_file(host_path, &nh), *bd = tu_read_file(dev_path, &nd);
        ck_assert_uint_gt(nh, 0);
        ck_assert_uint_eq(nh, nd);
        ck_assert(memcmp(bh, bd, nh) == 0);
        free(bh), free(bd);
        check_loaded(ctx, &host, dev_path);
        /* A directory that does not exist: MF_ERR_IO naming it, no file left behind. */
        ck_assert_int_eq(mf_model_save(ctx, &dev, &o, bad_path), MF_ERR_IO);
        ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "no-such-dir"));
        ck_assert_int_eq(unlink(host_path), 0);
        ck_assert_int_eq(unlink(dev_path), 0);
        cudaFree(dU), cudaFree(dV);
    }
    ck_assert_int_eq(rmdir(dir), 0); /* nothing else was left in it */
    free_random_model(&r);
    mf_ctx_destroy(ctx);
#endif
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_model", .gpu = true, .timeout = 600};
    const TTest *const tests[] = {biases_match_cpu,
                                  predictions_match_cpu,
                                  tuning_on_device,
                                  reduced_precision_matches_cpu,
                                  device_predictions_fail_cleanly,
                                  saved_from_device};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
