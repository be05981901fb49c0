/* mf_sgd_hogwild_run on the CUDA backend: one GPU worker against one CPU worker (both
 * orders, fp32 and fp16, lane widths 1 to 16), CPU/GPU quality agreement with all
 * workers, fp16 against fp32, device-memory factors, large ranks, divergence, and the
 * MovieLens 100K quality bar. Hogwild races by design: with more than one worker the
 * tests compare quality, never bits. */
#include <math.h>
#include <stdlib.h>

#include "sgd_fixtures.h"
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "sgd/sgd_internal.h" /* mf_sgd_debug_replicas, _hot_items, _local_bias, _local_items */

static int quick(void)
{
    return getenv("MFACT_UNDER_SANITIZER") != NULL;
}

/* One worker on each side visits the same sequence; only the dot product's summation
 * order differs (a warp's butterfly against a loop), so the factors agree closely. With the
 * item biases held in the block's shared memory (forced on; the user-chunk order only), one
 * block is the whole sequence of bias steps and the merge moves each bias by its copy's
 * change (scale 1), so that holds too. */
START_TEST(one_worker_matches_cpu)
{
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    mf_sparse *Rg = NULL, *Tg = NULL, *Rc = NULL, *Tc = NULL;
    sx_noisy(gpu, 60, 40, 0.25, 21, &Rg, &Tg);
    sx_noisy(cpu, 60, 40, 0.25, 21, &Rc, &Tc);
    static const int ks[] = {1, 7, 32, 33, 100, 300};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++)
        for (int mode = 0; mode < 3; mode++) /* user chunks, ratings, user chunks local */
            for (int half = 0; half < 2; half++) {
                const int order = mode == 1, local = mode == 2;
                mf_sgd_opts o;
                mf_sgd_opts_init(&o);
                o.rank = ks[t], o.epochs = 3, o.workers = 1, o.order = (mf_sgd_order)order;
                o.storage = half ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
                o.learning_rate = 0.02f;
                float *Ug, *Vg, *Uc, *Vc;
                mf_sgd_report rg, rc;
                mf_sgd_debug_local_bias = local ? 1 : -1;
                mf_sgd_debug_local_items = -1;
                sx_run(gpu, Rg, &o, MF_OK, &rg, &Ug, &Vg);
                mf_sgd_debug_local_bias = -1;
                sx_run(cpu, Rc, &o, MF_OK, &rc, &Uc, &Vc);
                ck_assert_int_eq(rg.workers, 1);
                if (local) /* every item's bias in the block */
                    ck_assert_int_ge(mf_sgd_debug_local_items, 40);
                else
                    ck_assert_int_eq(mf_sgd_debug_local_items, 0);
                /* fp16: one rounding apart flips a stored half by one unit (2^-11). */
                double tol = half ? 2e-3 : 1e-5;
                double du = tu_rel_diff(60 * ks[t], Ug, Uc), dv = tu_rel_diff(40 * ks[t], Vg, Vc);
                ck_assert_msg(du < tol && dv < tol, "k %d mode %d half %d: U %g, V %g", ks[t], mode,
                              half, du, dv);
                ck_assert_msg(fabs(rg.train_rmse - rc.train_rmse) < 10 * tol * rc.train_rmse,
                              "k %d: train RMSE %g vs %g", ks[t], rg.train_rmse, rc.train_rmse);
                free(Ug), free(Vg), free(Uc), free(Vc);
            }
    mf_sparse_destroy(Rg), mf_sparse_destroy(Tg), mf_sparse_destroy(Rc), mf_sparse_destroy(Tc);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

/* All warps racing, against the CPU: test RMSE within 1%; fp16 within 1% of fp32. */
START_TEST(all_workers_agree_with_cpu)
{
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    /* Users enough for many workers at one per 128 chunks (a chunk: one user's ratings). */
    const int32_t users = quick() ? 1200 : 12000, items = quick() ? 200 : 1500;
    mf_sparse *Rg = NULL, *Tg = NULL, *Rc = NULL, *Tc = NULL;
    /* Under a sanitizer: fewer rows, denser, so that they still learn past the bar. */
    const double density = quick() ? 0.3 : 0.1;
    sx_noisy(gpu, users, items, density, 23, &Rg, &Tg);
    sx_noisy(cpu, users, items, density, 23, &Rc, &Tc);
    for (int order = 0; order < 2; order++) {
        double rmse[3];
        for (int run = 0; run < 3; run++) {
            mf_sgd_opts o;
            mf_sgd_opts_init(&o);
            o.rank = 16, o.epochs = 30, o.order = (mf_sgd_order)order;
            o.learning_rate = 0.02f, o.schedule = MF_SGD_SCHEDULE_CONSTANT;
            o.lambda_u = o.lambda_v = 0.02f;
            o.storage = run == 2 ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
            o.test = run == 0 ? Tc : Tg;
            mf_sgd_report rep;
            sx_run(run == 0 ? cpu : gpu, run == 0 ? Rc : Rg, &o, MF_OK, &rep, NULL, NULL);
            rmse[run] = rep.test_rmse;
            if (run > 0) /* one worker per 128 chunks, at most */
                ck_assert_int_gt(rep.workers, quick() ? 4 : 100);
        }
        printf("all_workers_agree_with_cpu (order %d): test RMSE cpu %.4f, gpu %.4f, gpu fp16 "
               "%.4f\n",
               order, rmse[0], rmse[1], rmse[2]);
        ck_assert_msg(rmse[0] < 0.32, "cpu test RMSE %.4f (the noise alone: 0.25)", rmse[0]);
        ck_assert_msg(fabs(rmse[1] - rmse[0]) <= 0.01 * rmse[0], "cpu %.4f gpu %.4f", rmse[0],
                      rmse[1]);
        ck_assert_msg(fabs(rmse[2] - rmse[1]) <= 0.01 * rmse[1], "fp32 %.4f fp16 %.4f", rmse[1],
                      rmse[2]);
    }
    mf_sparse_destroy(Rg), mf_sparse_destroy(Tg), mf_sparse_destroy(Rc), mf_sparse_destroy(Tc);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

/* Two items rated by every user: with many workers the CUDA engine gives each its own
 * working rows (sgd_hot.cuh), averaged after every epoch. Test RMSE within 1% of the CPU
 * engine's and of the same engine without replicas, fp32 and fp16, with biases. */
START_TEST(popular_items_agree_with_cpu)
{
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    const int32_t users = quick() ? 3000 : 12000, items = 300;
    mf_sparse *Rg = NULL, *Tg = NULL, *Rc = NULL, *Tc = NULL;
    sx_popular(gpu, users, items, 0.02, 2, 29, &Rg, &Tg);
    sx_popular(cpu, users, items, 0.02, 2, 29, &Rc, &Tc);
    int64_t nnz = 0;
    ck_assert_int_eq(mf_sparse_shape(Rg, NULL, NULL, &nnz), MF_OK);
    for (int half = 0; half < 2; half++) {
        double rmse[3];
        for (int run = 0; run < 3; run++) { /* cpu, gpu, gpu without replicas */
            mf_sgd_opts o;
            mf_sgd_opts_init(&o);
            o.rank = 16, o.epochs = 20, o.learning_rate = 0.02f;
            o.storage = half ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
            o.test = run == 0 ? Tc : Tg;
            mf_sgd_debug_replicas = run == 2 ? 0 : -1;
            mf_sgd_debug_hot_items = -1;
            mf_sgd_report rep;
            sx_run(run == 0 ? cpu : gpu, run == 0 ? Rc : Rg, &o, MF_OK, &rep, NULL, NULL);
            mf_sgd_debug_replicas = -1;
            rmse[run] = rep.test_rmse;
            /* Working rows were made: for the two items every user rated at least (the
             * others may pass the engine's bar too, by the worker count), and none without
             * replicas. */
            if (run == 1)
                ck_assert_msg(mf_sgd_debug_hot_items >= 2 && mf_sgd_debug_hot_items <= items,
                              "%lld items got working rows (%d workers, %lld ratings)",
                              (long long)mf_sgd_debug_hot_items, rep.workers, (long long)nnz);
            if (run == 2)
                ck_assert_int_eq(mf_sgd_debug_hot_items, 0);
        }
        printf("popular_items_agree_with_cpu (half %d): test RMSE cpu %.4f, gpu %.4f, gpu "
               "without replicas %.4f\n",
               half, rmse[0], rmse[1], rmse[2]);
        ck_assert_msg(fabs(rmse[1] - rmse[0]) <= 0.01 * rmse[0], "cpu %.4f gpu %.4f", rmse[0],
                      rmse[1]);
        ck_assert_msg(fabs(rmse[1] - rmse[2]) <= 0.01 * rmse[2], "replicas %.4f none %.4f", rmse[1],
                      rmse[2]);
    }
    mf_sparse_destroy(Rg), mf_sparse_destroy(Tg), mf_sparse_destroy(Rc), mf_sparse_destroy(Tc);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

/* Ratings 3 + b_u + b_i + a rank-4 dot + N(0, 0.25^2), planted biases of spread 0.3 (users)
 * and 0.5 (items); each user rates `per_user` items drawn with probability ~ (i + 1)^-0.9,
 * so a few items are in most chunks and most items have a handful of ratings. 10% held
 * out. */
static void skewed_biased(mf_ctx *ctx, int32_t users, int32_t items, int per_user, uint64_t seed,
                          mf_sparse **train, mf_sparse **test)
{
    enum { RANK = 4 };
    uint64_t s = seed;
    const int64_t cap = (int64_t)users * per_user;
    int32_t *row = malloc((size_t)cap * 2 * sizeof *row), *col = malloc((size_t)cap * 2 * 4);
    float *val = malloc((size_t)cap * 2 * sizeof *val);
    double *U = malloc(((size_t)users * (RANK + 1) + (size_t)items * (RANK + 1)) * sizeof *U);
    double *cdf = malloc((size_t)items * sizeof *cdf);
    unsigned char *seen = calloc((size_t)items, 1);
    ck_assert(row && col && val && U && cdf && seen);
    double *V = U + (size_t)users * (RANK + 1);
    for (int64_t p = 0; p < ((int64_t)users + items) * (RANK + 1); p++) {
        const double g =
            sqrt(-2.0 * log(tu_unit(&s) + 1e-300)) * cos(6.283185307179586 * tu_unit(&s));
        const int t = (int)(p % (RANK + 1));
        U[p] = t < RANK ? 0.5 * g : (p < (int64_t)users * (RANK + 1) ? 0.3 : 0.5) * g;
    }
    double total = 0.0;
    for (int32_t i = 0; i < items; i++)
        cdf[i] = total += pow(i + 1.0, -0.9);
    int64_t a = 0, b = cap; /* train from 0, test from cap */
    for (int32_t u = 0; u < users; u++) {
        int32_t picked[64];
        int n = 0;
        while (n < per_user && n < 64) {
            const double x = tu_unit(&s) * total;
            int32_t lo = 0, hi = items - 1;
            while (lo < hi) {
                const int32_t mid = (lo + hi) / 2;
                if (cdf[mid] < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (seen[lo])
                continue;
            seen[lo] = 1, picked[n++] = lo;
            const double *pu = U + (int64_t)u * (RANK + 1), *pv = V + (int64_t)lo * (RANK + 1);
            double d = 3.0 + pu[RANK] + pv[RANK];
            for (int t = 0; t < RANK; t++)
                d += pu[t] * pv[t];
            d += 0.25 * sqrt(-2.0 * log(tu_unit(&s) + 1e-300)) *
                 cos(6.283185307179586 * tu_unit(&s));
            const int64_t at = tu_unit(&s) < 0.1 ? b++ : a++;
            row[at] = u, col[at] = lo, val[at] = (float)d;
        }
        for (int j = 0; j < n; j++)
            seen[picked[j]] = 0;
    }
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, train, users, items, a, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(mf_sparse_from_coo(ctx, test, users, items, b - cap, row + cap, col + cap,
                                        val + cap, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(row), free(col), free(val), free(U), free(cdf), free(seen);
}

/* The correlation of two runs' item biases over the items with at least `least` training
 * ratings in R. */
static double item_bias_corr(const mf_sparse *R, const float *a, const float *b, int least)
{
    int32_t users, items;
    int64_t nnz;
    ck_assert_int_eq(mf_sparse_shape(R, &users, &items, &nnz), MF_OK);
    int64_t *ptr = malloc(((size_t)users + 1) * sizeof *ptr);
    int32_t *col = malloc(((size_t)nnz + 1) * sizeof *col);
    int *count = calloc((size_t)items, sizeof *count);
    ck_assert(ptr && col && count);
    ck_assert_int_eq(mf_sparse_get_csr(R, ptr, col, NULL, MF_MEMORY_HOST), MF_OK);
    for (int64_t p = 0; p < nnz; p++)
        count[col[p]]++;
    double n = 0, sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int32_t i = 0; i < items; i++)
        if (count[i] >= least) {
            n += 1, sa += a[i], sb += b[i];
            saa += (double)a[i] * a[i], sbb += (double)b[i] * b[i], sab += (double)a[i] * b[i];
        }
    free(ptr), free(col), free(count);
    ck_assert_msg(n >= 20, "%g items with %d ratings", n, least);
    const double va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    return va > 0 && vb > 0 ? (sab - sa * sb / n) / sqrt(va * vb) : 0.0;
}

/* One run on the GPU with the item biases local (1) or global (0): test RMSE, item biases. */
static double local_run(mf_ctx *ctx, const mf_sparse *R, const mf_sparse *T, int k, int half,
                        int epochs, int local, float *item_bias, int64_t *slots)
{
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = k, o.epochs = epochs;
    o.storage = half ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
    o.test = T;
    mf_biases out = {0.0f, NULL, item_bias};
    o.bias_out = &out;
    mf_sgd_debug_local_bias = local;
    mf_sgd_debug_local_items = -1;
    mf_sgd_report rep;
    sx_run(ctx, R, &o, MF_OK, &rep, NULL, NULL);
    mf_sgd_debug_local_bias = -1;
    *slots = mf_sgd_debug_local_items;
    return rep.test_rmse;
}

/* The RMSE over T (users x items) of the model U, V (rank k) and b, in double on the host. */
static double host_rmse(const mf_sparse *T, const float *U, const float *V, int k,
                        const mf_biases *b)
{
    int32_t users;
    int64_t nnz;
    ck_assert_int_eq(mf_sparse_shape(T, &users, NULL, &nnz), MF_OK);
    int64_t *ptr = malloc(((size_t)users + 1) * sizeof *ptr);
    int32_t *col = malloc(((size_t)nnz + 1) * sizeof *col);
    float *val = malloc(((size_t)nnz + 1) * sizeof *val);
    ck_assert(ptr && col && val);
    ck_assert_int_eq(mf_sparse_get_csr(T, ptr, col, val, MF_MEMORY_HOST), MF_OK);
    double sum = 0.0;
    for (int32_t u = 0; u < users; u++)
        for (int64_t p = ptr[u]; p < ptr[u + 1]; p++) {
            double pred = (double)b->mean + b->user[u] + b->item[col[p]];
            for (int j = 0; j < k; j++)
                pred += (double)U[(size_t)u * k + j] * V[(size_t)col[p] * k + j];
            sum += (val[p] - pred) * (val[p] - pred);
        }
    free(ptr), free(col), free(val);
    return nnz > 0 ? sqrt(sum / (double)nnz) : 0.0;
}

/* Item biases held in each block's shared memory and merged after every epoch
 * (sgd_local_bias.cuh), forced on (the engine's rule takes them from 150,000 ratings a block;
 * here the worker rule, one per 128 chunks, spreads a few hundred workers, or a few dozen
 * under a sanitizer, over as many blocks, each seeing a small share of an item), against the
 * same engine updating them in global memory, on skewed ratings with planted biases: test
 * RMSE within 5%, and the learned item biases of the items with 20 ratings or more correlated
 * above 0.95; fp32 (whole warps at k = 128, groups at k = 16) and fp16. The global engine
 * within 10% of the CPU's test RMSE, the local one within 15% (hundreds of Hogwild workers on
 * a few popular items lose a few percent here; with a block per worker each copy sees two or
 * three of an item's ratings an epoch, far below the rule's 150,000 ratings a block, and the
 * local run lost 1.6-3.5% against the global one in five runs on the H100, at k = 16 fp32,
 * where 3% had been the bar); the planted noise is 0.25. More items than
 * slots (100,000): the engine renumbers its rows, the most rated first and local, the rest
 * global (a second pass, rated less than their share of the items), and the same bars hold at
 * correlation 0.9; the factors and biases come back in the items' own numbers (the test RMSE
 * of the returned model, computed here, is the engine's: fp32, fp16, and fp32 with a whole
 * warp an update, the other kernel). One worker: the local
 * copy is exactly the sequence of updates (one_worker_matches_cpu holds it to the CPU). */
START_TEST(local_item_biases_agree)
{
    mf_ctx *gpu = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    const int32_t users = quick() ? 4000 : 30000, items = 3000;
    mf_sparse *Rg = NULL, *Tg = NULL, *Rc = NULL, *Tc = NULL;
    skewed_biased(gpu, users, items, 40, 31, &Rg, &Tg);
    skewed_biased(cpu, users, items, 40, 31, &Rc, &Tc);
    float *bl = malloc((size_t)items * sizeof *bl), *bg = malloc((size_t)items * sizeof *bg);
    ck_assert(bl && bg);
    static const int ks[] = {16, 128};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++)
        for (int half = 0; half < 2; half++) {
            mf_sgd_opts o;
            mf_sgd_opts_init(&o);
            o.rank = ks[t], o.epochs = 20;
            o.storage = half ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
            o.test = Tc;
            mf_sgd_report rep;
            sx_run(cpu, Rc, &o, MF_OK, &rep, NULL, NULL);
            const double cpu_rmse = rep.test_rmse;
            int64_t slots_l, slots_g;
            const double local = local_run(gpu, Rg, Tg, ks[t], half, 20, 1, bl, &slots_l);
            const double global = local_run(gpu, Rg, Tg, ks[t], half, 20, 0, bg, &slots_g);
            const double corr = item_bias_corr(Rg, bl, bg, 20);
            printf("local_item_biases_agree (k %d, half %d): test RMSE cpu %.4f, gpu local %.4f, "
                   "gpu global %.4f; item biases correlated %.4f\n",
                   ks[t], half, cpu_rmse, local, global, corr);
            ck_assert_msg(slots_l >= items, "%lld local biases for %d items", (long long)slots_l,
                          items); /* every item, and the popular items' working rows */
            ck_assert_int_eq(slots_g, 0);
            /* under a sanitizer: 4,000 users, a fifth of the ratings per item */
            ck_assert_msg(cpu_rmse < (quick() ? 0.6 : 0.4),
                          "cpu test RMSE %.4f (the noise alone: 0.25)", cpu_rmse);
            ck_assert_msg(local <= 1.15 * cpu_rmse && global <= 1.1 * cpu_rmse,
                          "cpu %.4f local %.4f global %.4f", cpu_rmse, local, global);
            ck_assert_msg(fabs(local - global) <= 0.05 * global, "local %.4f global %.4f", local,
                          global);
            ck_assert_msg(corr > 0.95, "item biases correlated %.4f", corr);
        }
    mf_sparse_destroy(Rg), mf_sparse_destroy(Tg), mf_sparse_destroy(Rc), mf_sparse_destroy(Tc);
    free(bl), free(bg);
    /* 100,000 items: 400 KB of biases, past any block's shared memory. */
    const int32_t many = 100000;
    mf_sparse *R = NULL, *T = NULL;
    skewed_biased(gpu, quick() ? 3000 : 12000, many, 60, 37, &R, &T);
    bl = malloc((size_t)many * sizeof *bl), bg = malloc((size_t)many * sizeof *bg);
    ck_assert(bl && bg);
    int64_t slots_l, slots_g;
    int64_t nnz = 0;
    ck_assert_int_eq(mf_sparse_shape(R, NULL, NULL, &nnz), MF_OK);
    const double local = local_run(gpu, R, T, 16, 0, 10, 1, bl, &slots_l);
    const int64_t rest = mf_sgd_debug_local_rest;
    const double global = local_run(gpu, R, T, 16, 0, 10, 0, bg, &slots_g);
    const double corr = item_bias_corr(R, bl, bg, 20);
    printf("local_item_biases_agree (100,000 items, %lld slots, %lld of %lld ratings without): "
           "test RMSE gpu local %.4f, gpu global %.4f; item biases correlated %.4f\n",
           (long long)slots_l, (long long)rest, (long long)nnz, local, global, corr);
    ck_assert_msg(slots_l > 1000 && slots_l < many, "%lld slots for %d items", (long long)slots_l,
                  many);
    /* The most rated rows have the slots: the rest, a long tail, is rated far less. Under a
     * sanitizer fewer items than slots have ratings: none is left. */
    ck_assert_msg((rest > 0 || quick()) &&
                      (double)rest < 0.5 * (double)(many - slots_l) / many * (double)nnz,
                  "%lld of %lld ratings without a slot", (long long)rest, (long long)nnz);
    ck_assert_msg(fabs(local - global) <= 0.05 * global, "local %.4f global %.4f", local, global);
    ck_assert_msg(corr > 0.9, "item biases correlated %.4f", corr);
    int32_t raters;
    ck_assert_int_eq(mf_sparse_shape(R, &raters, NULL, NULL), MF_OK);
    float *bu = malloc((size_t)raters * sizeof *bu);
    ck_assert(bu);
    for (int mode = 0; mode < 3; mode++) { /* fp32, fp16, fp32 with a whole warp an update */
        const int half = mode == 1;
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.rank = 16, o.epochs = 10;
        o.storage = half ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
        o.test = T;
        mf_biases out = {0.0f, bu, bl};
        o.bias_out = &out;
        mf_sgd_debug_local_bias = 1;
        mf_sgd_debug_lanes = mode == 2 ? 32 : 0;
        mf_sgd_report rep;
        float *U = NULL, *V = NULL;
        sx_run(gpu, R, &o, MF_OK, &rep, &U, &V);
        mf_sgd_debug_local_bias = -1;
        mf_sgd_debug_lanes = 0;
        ck_assert_int_eq(mf_sgd_debug_local_items, slots_l);
        const double mine = host_rmse(T, U, V, 16, &out);
        printf("local_item_biases_agree (100,000 items, %s): test RMSE reported %.5f, of the "
               "returned model %.5f\n",
               mode == 0   ? "fp32"
               : mode == 1 ? "fp16"
                           : "fp32, whole warps",
               rep.test_rmse, mine);
        ck_assert_msg(fabs(mine - rep.test_rmse) <= 1e-4 * rep.test_rmse,
                      "reported %.6f, returned model %.6f", rep.test_rmse, mine);
        ck_assert_msg(fabs(rep.test_rmse - global) <= 0.05 * global, "test RMSE %.4f global %.4f",
                      rep.test_rmse, global);
        free(U), free(V);
    }
    mf_sparse_destroy(R), mf_sparse_destroy(T);
    free(bl), free(bg), free(bu);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

/* Factors in device memory: read as the start, written with the result, same as host. */
START_TEST(device_factors)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = NULL, *T = NULL;
    sx_noisy(ctx, 80, 50, 0.2, 25, &R, &T);
    const int k = 8;
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = k, o.workers = 1, o.init = MF_SGD_INIT_GIVEN, o.epochs = 4;
    float Uh[80 * 8], Vh[50 * 8], Ud_back[80 * 8], Vd_back[50 * 8];
    for (int p = 0; p < 80 * k; p++)
        Uh[p] = 0.1f + 0.001f * (float)(p % 97);
    for (int p = 0; p < 50 * k; p++)
        Vh[p] = 0.2f - 0.001f * (float)(p % 89);
    float *Ud, *Vd;
    ck_assert_int_eq(cudaMalloc((void **)&Ud, sizeof Uh), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&Vd, sizeof Vh), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(Ud, Uh, sizeof Uh, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(Vd, Vh, sizeof Vh, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    mf_sgd_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, Uh, Vh, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, Ud, Vd, MF_MEMORY_DEVICE, &rep), MF_OK);
    ck_assert_int_eq(cudaMemcpy(Ud_back, Ud, sizeof Uh, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(Vd_back, Vd, sizeof Vh, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(memcmp(Ud_back, Uh, sizeof Uh) == 0 && memcmp(Vd_back, Vh, sizeof Vh) == 0);
    ck_assert(rep.peak_device_bytes > 0);
    /* Host factors on a device-memory request are refused. */
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, Uh, Vh, MF_MEMORY_DEVICE, NULL),
                     MF_ERR_INVALID_ARGUMENT);
    cudaFree(Ud), cudaFree(Vd);
    mf_sparse_destroy(R), mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
#endif
}
END_TEST

START_TEST(divergence_is_reported)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = NULL, *T = NULL;
    sx_noisy(ctx, 200, 100, 0.2, 27, &R, &T);
    for (int h = 0; h < 2; h++) {
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.learning_rate = 50.0f, o.schedule = MF_SGD_SCHEDULE_CONSTANT;
        o.rank = 32; /* the arrays below */
        o.storage = h ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
        float *U = malloc(200 * 32 * sizeof *U), *V = malloc(100 * 32 * sizeof *V);
        for (int p = 0; p < 200 * 32; p++)
            U[p] = -7.0f;
        for (int p = 0; p < 100 * 32; p++)
            V[p] = -9.0f;
        ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &o, U, V, MF_MEMORY_HOST, NULL),
                         MF_ERR_NUMERIC);
        tu_assert_error_has(ctx, "smaller learning_rate");
        for (int p = 0; p < 200 * 32; p++)
            ck_assert(U[p] == -7.0f);
        for (int p = 0; p < 100 * 32; p++)
            ck_assert(V[p] == -9.0f);
        free(U), free(V);
    }
    mf_sparse_destroy(R), mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The widest lanes (k = 512: 16 floats per lane) learn as the narrow ones do. */
START_TEST(large_rank_learns)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *R = NULL, *T = NULL;
    sx_noisy(ctx, 500, 300, 0.1, 29, &R, &T);
    for (int h = 0; h < 2; h++) {
        mf_sgd_opts o;
        mf_sgd_opts_init(&o);
        o.rank = 512, o.epochs = 10, o.learning_rate = 0.02f, o.test = T;
        o.biases = 0; /* the factors alone learn (biases would take the first epoch's share) */
        o.storage = h ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
        mf_sgd_report first, last;
        o.epochs = 1;
        sx_run(ctx, R, &o, MF_OK, &first, NULL, NULL);
        o.epochs = 10;
        sx_run(ctx, R, &o, MF_OK, &last, NULL, NULL);
        ck_assert_msg(last.train_rmse < 0.8 * first.train_rmse, "half %d: %g then %g", h,
                      first.train_rmse, last.train_rmse);
    }
    mf_sparse_destroy(R), mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(movielens_quality)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    sx_check_movielens(ctx, "gpu");
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_sgd", .gpu = true, .timeout = 600};
    const TTest *const tests[] = {one_worker_matches_cpu,
                                  all_workers_agree_with_cpu,
                                  popular_items_agree_with_cpu,
                                  local_item_biases_agree,
                                  device_factors,
                                  divergence_is_reported,
                                  large_rank_learns,
                                  movielens_quality};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
