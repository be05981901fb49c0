/* Implicit-feedback ALS and recommendations on the CUDA backend: factors against the CPU
 * engine's (exact and CG, ranks that take every lane width), losses alike, device arrays in
 * place, top-N against a full sort (ties, exclusions, padding, several tiles and blocks, N
 * past the fused kernel), cosine neighbours, fold-in, ranking metrics against the CPU's,
 * planted recovery, bad input with device buffers untouched, and interactions streamed from
 * host memory under a device-memory limit (the resident run's factors bit for bit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sparse.h"
#include "ials_fixtures.h"
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int quick(void)
{
    return getenv("MFACT_UNDER_SANITIZER") != NULL;
}

static void *to_device(const void *src, size_t bytes)
{
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes ? bytes : 4), cudaSuccess);
    if (src)
        ck_assert_int_eq(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    /* A pageable copy may still be in flight when cudaMemcpy returns, and mfact works on
     * its own non-blocking stream: wait for the data before handing it over. */
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    return d;
}

static void from_device(void *dst, const void *src, size_t bytes)
{
    ck_assert_int_eq(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

/* The planted matrix on the GPU context, copied from the CPU one's. */
static mf_sparse *copy_to(mf_ctx *ctx, const mf_sparse *R)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(R, &rows, &cols, &nnz);
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)(nnz + 1) * sizeof *col);
    float *val = malloc((size_t)(nnz + 1) * sizeof *val);
    ck_assert_int_eq(mf_sparse_get_csr(R, ptr, col, val, MF_MEMORY_HOST), MF_OK);
    mf_sparse *S = NULL;
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &S, rows, cols, nnz, ptr, col, val, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(ptr);
    free(col);
    free(val);
    return S;
}

static mf_ials_report run_ok(mf_ctx *ctx, const mf_sparse *R, const mf_ials_opts *o, float *U,
                             float *V, mf_memory where)
{
    mf_ials_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_ials_run(ctx, R, o, U, V, where, &rep);
    ck_assert_msg(st == MF_OK, "mf_ials_run: %s", mf_ctx_last_error(ctx));
    return rep;
}

static int keep_going(void *user, const mf_progress *p)
{
    (void)user, (void)p;
    return 0;
}

START_TEST(factors_match_cpu)
{
    /* Ranks 5 (1 float a lane), 33 (2), 64, 100 (4), 200 (8), 300 and 512 (16); exact up to
     * the shared-memory solver's limit, CG at every rank. Float on the GPU against double on
     * the CPU, three iterations from the same start. */
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    ials_planted p = ials_make_planted(cpu, 300, 220, 6, 0.5, 0.03, 0.0, 31);
    mf_sparse *Rg = copy_to(gpu, p.train);
    const int ranks[] = {5, 33, 64, 100, 200, 300, 512};
    const int nranks = quick() ? 2 : 7;
    for (int r = 0; r < nranks; r++)
        for (int variant = 0; variant < 3; variant++) { /* exact, CG, CG with half factors */
            const int k = ranks[r], cg = variant > 0, fp16 = variant == 2;
            if (!cg && k > 224)
                continue;
            mf_ials_opts o;
            mf_ials_opts_init(&o);
            o.rank = k;
            o.iterations = 3;
            o.lambda = 0.5f;
            o.alpha = 3.0f;
            o.confidence = r % 2 ? MF_IALS_CONFIDENCE_LOG : MF_IALS_CONFIDENCE_LINEAR;
            o.solver = cg ? MF_ALS_SOLVER_CG : MF_ALS_SOLVER_EXACT;
            o.fp16 = fp16;
            o.progress = keep_going;
            const size_t nu = 300 * (size_t)k, nv = 220 * (size_t)k;
            float *Uc = malloc(nu * 4), *Vc = malloc(nv * 4), *Ug = malloc(nu * 4),
                  *Vg = malloc(nv * 4);
            mf_ials_report rc = run_ok(cpu, p.train, &o, Uc, Vc, MF_MEMORY_HOST);
            mf_ials_report rg = run_ok(gpu, Rg, &o, Ug, Vg, MF_MEMORY_HOST);
            const double du = tu_rel_diff((int64_t)nu, Ug, Uc),
                         dv = tu_rel_diff((int64_t)nv, Vg, Vc);
            /* Half factors: both engines round every stored value, the same up to the
             * float-versus-double arithmetic between the roundings. */
            const double tol = fp16 ? 1e-2 : 2e-3;
            ck_assert_msg(du < tol && dv < tol, "rank %d variant %d: U %g V %g", k, variant, du,
                          dv);
            ck_assert_msg(fabs(rg.loss - rc.loss) <= (fp16 ? 1e-3 : 1e-4) * rc.loss,
                          "rank %d variant %d: loss %g vs %g", k, variant, rg.loss, rc.loss);
            free(Uc);
            free(Vc);
            free(Ug);
            free(Vg);
        }
    mf_sparse_destroy(Rg);
    ials_free_planted(&p);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

START_TEST(device_factors_in_place)
{
    /* Device U and V give what host ones give on the same context, bit for bit; a warm start
     * from device factors continues the run. */
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    ials_planted p = ials_make_planted(cpu, 200, 150, 4, 0.5, 0.03, 0.0, 8);
    mf_sparse *Rg = copy_to(gpu, p.train);
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = 24;
    o.iterations = 4;
    float *U = malloc(200 * 24 * 4), *V = malloc(150 * 24 * 4), *U2 = malloc(200 * 24 * 4),
          *V2 = malloc(150 * 24 * 4);
    run_ok(gpu, Rg, &o, U, V, MF_MEMORY_HOST);
    float *dU = to_device(NULL, 200 * 24 * 4), *dV = to_device(NULL, 150 * 24 * 4);
    run_ok(gpu, Rg, &o, dU, dV, MF_MEMORY_DEVICE);
    from_device(U2, dU, 200 * 24 * 4);
    from_device(V2, dV, 150 * 24 * 4);
    ck_assert_int_eq(memcmp(U, U2, 200 * 24 * 4), 0);
    ck_assert_int_eq(memcmp(V, V2, 150 * 24 * 4), 0);
    /* 2 + 2 warm iterations = 4 straight ones (CG restarts from the factors either way, and
     * the run keeps nothing else). */
    o.iterations = 2;
    run_ok(gpu, Rg, &o, dU, dV, MF_MEMORY_DEVICE);
    o.init = MF_IALS_INIT_GIVEN;
    run_ok(gpu, Rg, &o, dU, dV, MF_MEMORY_DEVICE);
    from_device(U2, dU, 200 * 24 * 4);
    ck_assert_int_eq(memcmp(U, U2, 200 * 24 * 4), 0);
    cudaFree(dU);
    cudaFree(dV);
    free(U);
    free(V);
    free(U2);
    free(V2);
    mf_sparse_destroy(Rg);
    ials_free_planted(&p);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

START_TEST(recommend_matches_full_sort)
{
    mf_ctx *gpu = tu_cuda_ctx(0);
    ials_check_recommend(gpu, 20, 50, 4, 10, 0);
    ials_check_recommend(gpu, 150, 300, 7, 10, 1); /* 3 blocks of rows, 3 tiles of items */
    ials_check_recommend(gpu, 70, 260, 40, 33, 1); /* two lists' worth per lane */
    ials_check_recommend(gpu, 7, 30, 3, 40, 1);    /* N past some users' candidates */
    ials_check_recommend(gpu, 66, 500, 17, 100, 0);
    ials_check_recommend(gpu, 9, 400, 5, 1, 0);
    ials_check_recommend(gpu, 12, 300, 5, 200, 1); /* past the fused kernel: the CPU's */
    ials_check_similar(gpu, 300, 8, 10);
    ials_check_similar(gpu, 70, 3, 70);
    mf_ctx_destroy(gpu);
}
END_TEST

START_TEST(device_arrays_and_bad_ids)
{
    /* A device model, ids and outputs equal the host ones; a negative id on the device is
     * named and nothing is written. */
    mf_ctx *gpu = tu_cuda_ctx(0);
    const int32_t users = 90, items = 170, k = 9, N = 7;
    float *U = malloc(users * k * 4), *V = malloc(items * k * 4), *ib = malloc(items * 4);
    uint64_t s = 3;
    for (int i = 0; i < users * k; i++)
        U[i] = (float)tu_unit(&s) - 0.5f;
    for (int i = 0; i < items * k; i++)
        V[i] = (float)tu_unit(&s) - 0.5f;
    for (int i = 0; i < items; i++)
        ib[i] = (float)tu_unit(&s) * 0.1f;
    int32_t ids[90], hi[90 * 7], di[90 * 7];
    float hs[90 * 7], ds[90 * 7];
    for (int i = 0; i < users; i++)
        ids[i] = (i * 37) % users;
    mf_model m;
    mf_model_init(&m);
    m.users = users, m.items = items, m.k = k, m.U = U, m.ldu = k, m.V = V, m.ldv = k;
    m.mean = 3.0f, m.item_bias = ib;
    ck_assert_int_eq(mf_recommend(gpu, &m, users, ids, NULL, N, hi, hs), MF_OK);
    mf_model d = m;
    d.U = to_device(U, users * k * 4), d.V = to_device(V, items * k * 4);
    d.item_bias = to_device(ib, items * 4);
    d.where = MF_MEMORY_DEVICE;
    int32_t *dids = to_device(ids, sizeof ids), *dout_i = to_device(NULL, sizeof di);
    float *dout_s = to_device(NULL, sizeof ds);
    ck_assert_int_eq(mf_recommend(gpu, &d, users, dids, NULL, N, dout_i, dout_s), MF_OK);
    from_device(di, dout_i, sizeof di);
    from_device(ds, dout_s, sizeof ds);
    ck_assert_int_eq(memcmp(hi, di, sizeof di), 0);
    ck_assert_int_eq(memcmp(hs, ds, sizeof ds), 0);
    /* Host lists against the CPU context's: same items where the scores are apart. */
    mf_ctx *cpu = tu_cpu_ctx();
    int32_t ci[90 * 7];
    float cs[90 * 7];
    ck_assert_int_eq(mf_recommend(cpu, &m, users, ids, NULL, N, ci, cs), MF_OK);
    for (int i = 0; i < users * N; i++)
        ck_assert_float_eq_tol(cs[i], hs[i], 1e-5f);
    ids[5] = -2;
    int32_t *bad = to_device(ids, sizeof ids);
    ck_assert_int_eq(cudaMemset(dout_i, 0x7f, sizeof di), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess); /* see to_device */
    ck_assert_int_eq(mf_recommend(gpu, &d, users, bad, NULL, N, dout_i, dout_s),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(gpu, "users[5] = -2");
    from_device(di, dout_i, sizeof di);
    for (int i = 0; i < users * N; i++)
        ck_assert_int_eq(di[i], 0x7f7f7f7f);
    /* Host ids with a device model: the memory check names them. */
    ck_assert_int_eq(mf_recommend(gpu, &d, users, ids, NULL, N, dout_i, dout_s),
                     MF_ERR_INVALID_ARGUMENT);
    cudaFree((void *)d.U);
    cudaFree((void *)d.V);
    cudaFree((void *)d.item_bias);
    cudaFree(dids);
    cudaFree(bad);
    cudaFree(dout_i);
    cudaFree(dout_s);
    free(U);
    free(V);
    free(ib);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}
END_TEST

START_TEST(planted_quality_and_metrics)
{
    /* Trained on the GPU: precision@10 well above random, metrics equal to the CPU
     * context's on the same factors, fold-in equal to the CPU's. */
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    ials_planted p = ials_make_planted(cpu, 600, 400, 8, 0.6, 0.02, 0.3, 21);
    mf_sparse *Rg = copy_to(gpu, p.train), *Tg = copy_to(gpu, p.test);
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = 16;
    o.lambda = 0.1f;
    o.alpha = 2.0f;
    float *U = malloc(600 * 16 * 4), *V = malloc(400 * 16 * 4);
    run_ok(gpu, Rg, &o, U, V, MF_MEMORY_HOST);
    mf_model m;
    mf_model_init(&m);
    m.users = 600, m.items = 400, m.k = 16, m.U = U, m.ldu = 16, m.V = V, m.ldv = 16;
    mf_ranking rg = {.struct_size = sizeof rg}, rc = {.struct_size = sizeof rc};
    ck_assert_int_eq(mf_ranking_evaluate(gpu, &m, Rg, Tg, 10, &rg), MF_OK);
    ck_assert_int_eq(mf_ranking_evaluate(cpu, &m, p.train, p.test, 10, &rc), MF_OK);
    ck_assert_double_gt(rg.precision, 0.15);
    ck_assert_int_eq(rg.users, rc.users);
    ck_assert_double_eq_tol(rg.precision, rc.precision, 5e-3);
    ck_assert_double_eq_tol(rg.ndcg, rc.ndcg, 5e-3);
    ck_assert_double_eq_tol(rg.auc, rc.auc, 5e-3);
    float *Fg = malloc(600 * 16 * 4), *Fc = malloc(600 * 16 * 4);
    o.solver = MF_ALS_SOLVER_EXACT;
    ck_assert_int_eq(mf_ials_fold_in(gpu, Rg, &o, V, Fg, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(mf_ials_fold_in(cpu, p.train, &o, V, Fc, MF_MEMORY_HOST), MF_OK);
    ck_assert_double_le(tu_rel_diff(600 * 16, Fg, Fc), 1e-4);
    /* Explicit fold-in with a device model: the CPU context's rows. */
    float *bi = calloc(400, 4), *bu = calloc(600, 4), *Fd = malloc(600 * 16 * 4);
    mf_model e = m;
    e.mean = 0.5f, e.item_bias = bi, e.user_bias = bu;
    ck_assert_int_eq(mf_fold_in_users(cpu, &e, p.train, 0.2f, 0.1f, Fc, bu), MF_OK);
    mf_model d = e;
    d.U = to_device(U, 600 * 16 * 4), d.V = to_device(V, 400 * 16 * 4);
    d.item_bias = to_device(bi, 400 * 4), d.user_bias = to_device(bu, 600 * 4);
    d.where = MF_MEMORY_DEVICE;
    float *dF = to_device(NULL, 600 * 16 * 4), *dbu = to_device(NULL, 600 * 4),
          *hbu = malloc(600 * 4);
    ck_assert_int_eq(mf_fold_in_users(gpu, &d, Rg, 0.2f, 0.1f, dF, dbu), MF_OK);
    from_device(Fd, dF, 600 * 16 * 4);
    from_device(hbu, dbu, 600 * 4);
    ck_assert_int_eq(memcmp(Fd, Fc, 600 * 16 * 4), 0);
    ck_assert_int_eq(memcmp(hbu, bu, 600 * 4), 0);
    cudaFree((void *)d.U), cudaFree((void *)d.V), cudaFree((void *)d.item_bias);
    cudaFree((void *)d.user_bias), cudaFree(dF), cudaFree(dbu);
    free(bi), free(bu), free(Fd), free(hbu);
    /* The exact solver past its shared-memory limit is refused, factors untouched. */
    o.rank = 300;
    float *W = malloc(600 * 300 * 4), *Z = malloc(400 * 300 * 4);
    W[0] = 42.0f;
    ck_assert_int_eq(mf_ials_run(gpu, Rg, &o, W, Z, MF_MEMORY_HOST, NULL), MF_ERR_UNSUPPORTED);
    ck_assert_float_eq(W[0], 42.0f);
    /* Fold-in at that rank runs on the CPU engine: the CPU context's rows. */
    uint64_t seed = 5;
    for (int i = 0; i < 400 * 300; i++)
        Z[i] = (float)tu_unit(&seed) * 0.1f;
    float *W2 = malloc(600 * 300 * 4);
    ck_assert_int_eq(mf_ials_fold_in(gpu, Rg, &o, Z, W, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(mf_ials_fold_in(cpu, p.train, &o, Z, W2, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(memcmp(W, W2, 600 * 300 * 4), 0);
    free(W2);
    free(W);
    free(Z);
    free(Fg);
    free(Fc);
    free(U);
    free(V);
    mf_sparse_destroy(Rg);
    mf_sparse_destroy(Tg);
    ials_free_planted(&p);
    mf_ctx_destroy(gpu);
    mf_ctx_destroy(cpu);
}
END_TEST

/* ---- interactions streamed from host memory ---------------------------------------------- */

/* What the library logged about streaming (ials.cu logs the batches at MF_LOG_INFO). */
typedef struct stream_log {
    int streamed, user_batches, item_batches, staged;
} stream_log;

static void catch_stream_log(void *user, mf_log_level level, const char *message)
{
    static const char key[] = "streaming them from host memory: ";
    stream_log *l = user;
    const char *q = strstr(message, key);
    (void)level;
    if (q && sscanf(q + strlen(key), "%d user batches, %d item batches", &l->user_batches,
                    &l->item_batches) == 2)
        l->streamed = 1;
    if (q && strstr(q, "through pinned staging"))
        l->staged = 1;
}

static mf_ctx *logged_ctx(size_t limit, stream_log *log)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    o.device_memory_limit = limit;
    o.log = catch_stream_log;
    o.log_user = log;
    o.log_level = MF_LOG_INFO;
    mf_ctx *ctx = NULL;
    ck_assert_msg(mf_ctx_create(&ctx, &o) == MF_OK, "%s", mf_ctx_last_error(NULL));
    return ctx;
}

/* users x items interactions with long rows on both sides: each user has 5..164 items,
 * drawn so that the first items are popular (item 0 has nearly every user: many CG
 * segments); values 1..5, or a pattern. */
static mf_sparse *skewed(mf_ctx *ctx, int32_t users, int32_t items, int pattern, int64_t *nnz)
{
    uint64_t s = 77;
    int32_t *row = malloc((size_t)users * 165 * sizeof *row),
            *col = malloc((size_t)users * 165 * sizeof *col);
    float *val = malloc((size_t)users * 165 * sizeof *val);
    unsigned char *seen = calloc((size_t)items, 1);
    int64_t n = 0;
    for (int32_t u = 0; u < users; u++) {
        const int64_t start = n, want = 5 + (int64_t)(tu_splitmix64(&s) % 160);
        for (int64_t t = 0; t < 4 * want && n - start < want; t++) {
            const double x = tu_unit(&s);
            const int32_t i = (int32_t)(x * x * items);
            if (seen[i])
                continue;
            seen[i] = 1;
            row[n] = u, col[n] = i, val[n] = (float)(1 + tu_splitmix64(&s) % 5);
            n++;
        }
        for (int64_t e = start; e < n; e++)
            seen[col[e]] = 0;
    }
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, users, items, n, row, col, pattern ? NULL : val,
                                        MF_MEMORY_HOST, pattern ? MF_SPARSE_PATTERN : 0),
                     MF_OK);
    free(row);
    free(col);
    free(val);
    free(seen);
    *nnz = n;
    return R;
}

/* Bytes of both orientations on the device (row offsets, indices, values). */
static size_t orientation_bytes(int32_t users, int32_t items, int64_t nnz, int pattern)
{
    return ((size_t)users + 1 + (size_t)items + 1) * 8 + 2 * (size_t)nnz * (pattern ? 4 : 8);
}

START_TEST(streamed_interactions_match_resident)
{
    /* Under a limit that holds the factors but not the interactions (the resident run's own
     * peak, less 7/8 of the interactions' bytes), the interactions stream from the host in
     * several batches per side, and the factors and the loss are the resident run's bit for
     * bit: every row is solved by the same kernels with the same arithmetic in the same
     * order (and the loss's sums are added in the same order). Exact and CG, float and half
     * factors, values and a pattern; fold-in too. */
    const int32_t users = 4000, items = 1000;
    const struct {
        int k, cg, fp16, pattern, log_conf, staged;
    } variants[] = {{24, 0, 0, 0, 0, 0}, {40, 1, 0, 0, 1, 0}, {64, 1, 1, 0, 0, 0},
                    {33, 1, 0, 1, 0, 0}, {16, 0, 1, 0, 1, 0}, {40, 1, 0, 0, 0, 1}};
    /* The last one pins the users' host arrays first, so that the library's own
     * cudaHostRegister fails and those go through its pinned staging buffers (a failing
     * CUDA call, which the sanitizer would report: not under it). */
    const int nvariants = quick() ? 2 : 6;
    for (int v = 0; v < nvariants; v++) {
        const int k = variants[v].k, pattern = variants[v].pattern;
        stream_log la = {0, 0, 0, 0}, lb = {0, 0, 0, 0};
        mf_ctx *a = logged_ctx(0, &la);
        int64_t nnz = 0;
        mf_sparse *Ra = skewed(a, users, items, pattern, &nnz);
        mf_ials_opts o;
        mf_ials_opts_init(&o);
        o.rank = k;
        o.iterations = 3;
        o.lambda = 0.5f;
        o.alpha = 2.0f;
        o.confidence = variants[v].log_conf ? MF_IALS_CONFIDENCE_LOG : MF_IALS_CONFIDENCE_LINEAR;
        o.solver = variants[v].cg ? MF_ALS_SOLVER_CG : MF_ALS_SOLVER_EXACT;
        o.fp16 = variants[v].fp16;
        o.progress = keep_going; /* the loss every iteration, streamed too */
        const size_t nu = (size_t)users * k, nv = (size_t)items * k;
        float *Ua = malloc(nu * 4), *Va = malloc(nv * 4), *Ub = malloc(nu * 4),
              *Vb = malloc(nv * 4);
        /* The second run's peak: the interactions cached on the matrix plus the engine's
         * buffers, without the first run's transpose scratch. */
        run_ok(a, Ra, &o, Ua, Va, MF_MEMORY_HOST);
        const mf_ials_report ra = run_ok(a, Ra, &o, Ua, Va, MF_MEMORY_HOST);
        ck_assert_int_eq(la.streamed, 0);
        const size_t inter = orientation_bytes(users, items, nnz, pattern);
        ck_assert_uint_gt(ra.peak_device_bytes, inter);
        const size_t limit = ra.peak_device_bytes - inter / 8 * 7;
        mf_ctx *b = logged_ctx(limit, &lb);
        mf_sparse *Rb = skewed(b, users, items, pattern, &nnz);
        if (variants[v].staged) {
            ck_assert_int_eq(cudaHostRegister(Rb->col, (size_t)nnz * 4, 0), cudaSuccess);
            ck_assert_int_eq(cudaHostRegister(Rb->val, (size_t)nnz * 4, 0), cudaSuccess);
        }
        const mf_ials_report rb = run_ok(b, Rb, &o, Ub, Vb, MF_MEMORY_HOST);
        if (variants[v].staged) {
            ck_assert_int_eq(cudaHostUnregister(Rb->col), cudaSuccess);
            ck_assert_int_eq(cudaHostUnregister(Rb->val), cudaSuccess);
            ck_assert(lb.staged);
        }
        ck_assert_msg(lb.streamed && lb.user_batches >= 2 && lb.item_batches >= 2,
                      "variant %d: streamed %d, batches %d + %d", v, lb.streamed, lb.user_batches,
                      lb.item_batches);
        ck_assert_uint_le(rb.peak_device_bytes, limit);
        ck_assert_msg(memcmp(Ua, Ub, nu * 4) == 0 && memcmp(Va, Vb, nv * 4) == 0,
                      "variant %d: factors differ (U %g, V %g)", v,
                      tu_rel_diff((int64_t)nu, Ub, Ua), tu_rel_diff((int64_t)nv, Vb, Va));
        ck_assert_msg(ra.loss == rb.loss, "variant %d: loss %.17g vs %.17g", v, ra.loss, rb.loss);
        if (!variants[v].cg) { /* fold-in (exact) under the limit: the same rows */
            ck_assert_int_eq(mf_ials_fold_in(a, Ra, &o, Va, Ua, MF_MEMORY_HOST), MF_OK);
            ck_assert_int_eq(mf_ials_fold_in(b, Rb, &o, Va, Ub, MF_MEMORY_HOST), MF_OK);
            ck_assert_int_eq(memcmp(Ua, Ub, nu * 4), 0);
        }
        free(Ua);
        free(Va);
        free(Ub);
        free(Vb);
        mf_sparse_destroy(Rb);
        mf_sparse_destroy(Ra);
        mf_ctx_destroy(b);
        mf_ctx_destroy(a);
    }
}
END_TEST

START_TEST(streamed_longest_row_out_of_memory)
{
    /* A limit that holds the factors and working buffers but not the longest row's
     * interactions (item 0's, nearly every user's): MF_ERR_OUT_OF_MEMORY saying what the
     * row needs, the caller's factors untouched. */
    const int32_t users = 4000, items = 1000;
    stream_log la = {0, 0, 0, 0}, lb = {0, 0, 0, 0};
    mf_ctx *a = logged_ctx(0, &la);
    int64_t nnz = 0;
    mf_sparse *Ra = skewed(a, users, items, 0, &nnz);
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = 32;
    o.iterations = 2;
    o.solver = MF_ALS_SOLVER_EXACT;
    float *U = malloc((size_t)users * 32 * 4), *V = malloc((size_t)items * 32 * 4);
    run_ok(a, Ra, &o, U, V, MF_MEMORY_HOST);
    const mf_ials_report ra = run_ok(a, Ra, &o, U, V, MF_MEMORY_HOST);
    const size_t inter = orientation_bytes(users, items, nnz, 0);
    /* The exact solver's buffers and the factors, and half of one user list's worth more:
     * less than the longest row (item 0, about `users` interactions of 8 bytes) needs. */
    const size_t limit = ra.peak_device_bytes - inter + (size_t)users * 4;
    mf_ctx *b = logged_ctx(limit, &lb);
    mf_sparse *Rb = skewed(b, users, items, 0, &nnz);
    for (size_t i = 0; i < (size_t)users * 32; i++)
        U[i] = 42.0f;
    for (size_t i = 0; i < (size_t)items * 32; i++)
        V[i] = 42.0f;
    ck_assert_int_eq(mf_ials_run(b, Rb, &o, U, V, MF_MEMORY_HOST, NULL), MF_ERR_OUT_OF_MEMORY);
    tu_assert_error_has(b, "the longest row");
    ck_assert_int_eq(lb.streamed, 0);
    for (size_t i = 0; i < (size_t)users * 32; i++)
        ck_assert_float_eq(U[i], 42.0f);
    for (size_t i = 0; i < (size_t)items * 32; i++)
        ck_assert_float_eq(V[i], 42.0f);
    free(U);
    free(V);
    mf_sparse_destroy(Rb);
    mf_sparse_destroy(Ra);
    mf_ctx_destroy(b);
    mf_ctx_destroy(a);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_ials", .gpu = true, .timeout = 600};
    const TTest *const tests[] = {factors_match_cpu,
                                  device_factors_in_place,
                                  recommend_matches_full_sort,
                                  device_arrays_and_bad_ids,
                                  planted_quality_and_metrics,
                                  streamed_interactions_match_resident,
                                  streamed_longest_row_out_of_memory};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
