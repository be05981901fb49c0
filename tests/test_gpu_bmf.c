/* mf_bmf_run on the CUDA backend: the same factors as the CPU engine for the same seed
 * (ranks around word boundaries, both move kinds, Metropolis, every init), the Asso cover
 * of the tensor-core and sparse device paths against the CPU's, the incremental
 * error against a full recount after every sweep, C held dense and as its nonzero words,
 * device-memory factors, the context's memory limit, noise-free and noisy planted recovery, and the
 * APatio quality bar. */
#include "bmf_fixtures.h"
#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int quick(void)
{
    return getenv("MFACT_UNDER_SANITIZER") != NULL;
}

static mf_bmf_opts opts(int k)
{
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    o.rank = k;
    return o;
}

/* CPU and GPU runs of one problem: identical factors and reports. */
static void check_parity(mf_ctx *cpu, mf_ctx *gpu, int32_t rows, int32_t cols, int k,
                         mf_bmf_flip flip, float temperature, mf_bmf_init init, int sweeps)
{
    mf_sparse *Cc =
        bx_planted(cpu, rows, cols, k < 12 ? k : 12, 0.12, 0.03, 50 + k, NULL, NULL, NULL);
    mf_sparse *Cg =
        bx_planted(gpu, rows, cols, k < 12 ? k : 12, 0.12, 0.03, 50 + k, NULL, NULL, NULL);
    mf_bmf_opts o = opts(k);
    o.instances = 3;
    o.max_sweeps = sweeps;
    o.flip = flip;
    o.temperature = temperature;
    o.init = init;
    uint64_t *A1 = NULL, *B1 = NULL, *A2 = NULL, *B2 = NULL;
    mf_bmf_report r1 = bx_run_recounted(cpu, Cc, &o, &A1, &B1);
    mf_bmf_report r2 = bx_run_recounted(gpu, Cg, &o, &A2, &B2);
    int kw = (k + 63) / 64;
    ck_assert_msg(r1.error == r2.error && r1.sweeps == r2.sweeps &&
                      r1.best_instance == r2.best_instance,
                  "%d x %d k %d flip %d T %g init %d: cpu error %lld (%d sweeps, instance %d), "
                  "gpu %lld (%d, %d)",
                  rows, cols, k, (int)flip, (double)temperature, (int)init, (long long)r1.error,
                  r1.sweeps, r1.best_instance, (long long)r2.error, r2.sweeps, r2.best_instance);
    ck_assert_msg(memcmp(A1, A2, (size_t)rows * kw * 8) == 0, "k %d: A differs", k);
    ck_assert_msg(memcmp(B1, B2, (size_t)cols * kw * 8) == 0, "k %d: B differs", k);
    free(A1), free(B1), free(A2), free(B2);
    mf_sparse_destroy(Cc);
    mf_sparse_destroy(Cg);
}

START_TEST(cpu_gpu_same_factors)
{
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    const int ks[] = {1, 20, 63, 64, 65, 128, 129};
    int sweeps = quick() ? 3 : 15;
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        check_parity(cpu, gpu, 150, 2100, ks[t], MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_SAMPLE,
                     sweeps);
        check_parity(cpu, gpu, 97, 61, ks[t], MF_BMF_FLIP_PER_BIT, 0.0f, MF_BMF_INIT_RANDOM,
                     sweeps);
    }
    check_parity(cpu, gpu, 2100, 70, 33, MF_BMF_FLIP_SINGLE, 1.0f, MF_BMF_INIT_RANDOM, sweeps);
    check_parity(cpu, gpu, 30, 40, 1000, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_SAMPLE, sweeps);
    check_parity(cpu, gpu, 5, 3, 2, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_SAMPLE, sweeps);
    check_parity(cpu, gpu, 150, 300, 20, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_ASSO, sweeps);
    check_parity(cpu, gpu, 70, 90, 65, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_ASSO, sweeps);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}
END_TEST

/* The covers of one matrix on the CPU (AUTO on a CPU context: the sparse cover) and on the
 * device by `where`: identical factors. */
static void check_cover(mf_ctx *cpu, mf_ctx *gpu, mf_sparse *Cc, mf_sparse *Cg, int k, int inst,
                        mf_bmf_asso_where where, const char *name)
{
    int32_t m, n;
    ck_assert_int_eq(mf_sparse_shape(Cc, &m, &n, NULL), MF_OK);
    int kw = (k + 63) / 64;
    size_t ab = (size_t)inst * m * kw * 8, bb = (size_t)inst * n * kw * 8;
    uint64_t *A1 = malloc(ab), *B1 = malloc(bb), *A2 = malloc(ab), *B2 = malloc(bb);
    ck_assert(A1 && B1 && A2 && B2);
    ck_assert_int_eq(mf_bmf_asso(cpu, Cc, k, inst, MF_BMF_ASSO_AUTO, NULL, A1, B1), MF_OK);
    memset(A2, 0xff, ab), memset(B2, 0xff, bb);
    ck_assert_msg(mf_bmf_asso(gpu, Cg, k, inst, where, NULL, A2, B2) == MF_OK, "%s",
                  mf_ctx_last_error(gpu));
    int nonzero = 0;
    for (size_t t = 0; t < bb / 8; t++)
        nonzero |= B1[t] != 0;
    ck_assert_msg(nonzero, "%s: the cover chose nothing (the test would prove nothing)", name);
    ck_assert_msg(memcmp(A1, A2, ab) == 0, "%s (where %d): A differs", name, (int)where);
    ck_assert_msg(memcmp(B1, B2, bb) == 0, "%s (where %d): B differs", name, (int)where);
    free(A1), free(B1), free(A2), free(B2);
}

/* A basket-like pattern: row lengths 1..len_max, columns drawn with a skewed popularity
 * (the cube of a uniform), plus `bundles` fixed column sets some rows take whole; row
 * `long_row` (or none, -1) holds `long_len` ones, columns 0 .. long_len - 1. */
static mf_sparse *skewed(mf_ctx *ctx, int32_t m, int32_t n, int len_max, int bundles,
                         int32_t long_row, int32_t long_len, uint64_t seed)
{
    int64_t cap = (int64_t)m * (len_max + 8) + long_len;
    int32_t *r = malloc((size_t)cap * sizeof *r), *c = malloc((size_t)cap * sizeof *c);
    ck_assert(r && c);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    int64_t nnz = 0;
    for (int32_t i = 0; i < m; i++) {
        if (i == long_row) {
            for (int32_t j = 0; j < long_len; j++)
                r[nnz] = i, c[nnz++] = j;
            continue;
        }
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((s >> 33) % (uint64_t)len_max);
        for (int t = 0; t < len; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) * 0x1.0p-53;
            r[nnz] = i, c[nnz++] = (int32_t)(u * u * u * n);
        }
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        if (bundles > 0 && (s >> 40) % 3 == 0) {
            int b = (int)((s >> 20) % (uint64_t)bundles);
            for (int t = 0; t < 5; t++)
                r[nnz] = i, c[nnz++] = (int32_t)((b * 7919 + t * 104729) % n);
        }
    }
    mf_sparse *C = NULL;
    ck_assert_msg(mf_sparse_from_coo(ctx, &C, m, n, nnz, r, c, NULL, MF_MEMORY_HOST,
                                     MF_SPARSE_SUM_DUPLICATES | MF_SPARSE_PATTERN) == MF_OK,
                  "%s", mf_ctx_last_error(ctx));
    free(r), free(c);
    return C;
}

/* The device's sparse cover (a block per row, 16-bit counters, ranks by size) on skewed
 * sparse matrices: popular columns in most candidates, bundles, a row of 3,000 ones, ranks
 * around word boundaries; and again with long rows' 32-bit counters taking most rows. */
START_TEST(asso_sparse_device_same_cover)
{
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    struct {
        int32_t m, n;
        int len_max, bundles;
        int32_t long_row, long_len;
        int k, inst;
    } cases[] = {{3000, 900, 30, 40, -1, 0, 20, 4},
                 {2000, 5000, 12, 100, -1, 0, 65, 3},
                 {400, 7000, 8, 20, 7, 3000, 20, 2},
                 {1, 3, 3, 0, -1, 0, 1, 2},
                 {500, 300, 40, 10, -1, 0, 128, 2}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        mf_sparse *Cc = skewed(cpu, cases[t].m, cases[t].n, cases[t].len_max, cases[t].bundles,
                               cases[t].long_row, cases[t].long_len, 70 + t);
        mf_sparse *Cg = skewed(gpu, cases[t].m, cases[t].n, cases[t].len_max, cases[t].bundles,
                               cases[t].long_row, cases[t].long_len, 70 + t);
        char name[64];
        snprintf(name, sizeof name, "skewed case %zu", t);
        check_cover(cpu, gpu, Cc, Cg, cases[t].k, cases[t].inst, MF_BMF_ASSO_DEVICE_SPARSE, name);
        /* rows past 4 uncovered ones count in 32-bit counters, as past 65535 they would */
        mf_bmf_asso_sparse_debug_narrow(4);
        snprintf(name, sizeof name, "skewed case %zu, wide counters", t);
        check_cover(cpu, gpu, Cc, Cg, cases[t].k, cases[t].inst, MF_BMF_ASSO_DEVICE_SPARSE, name);
        mf_bmf_asso_sparse_debug_narrow(-1);
        check_cover(cpu, gpu, Cc, Cg, cases[t].k, cases[t].inst, MF_BMF_ASSO_AUTO, name);
        mf_sparse_destroy(Cc);
        mf_sparse_destroy(Cg);
    }
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}
END_TEST

/* Both device covers stop where their watch tells them, after a round, keeping what they
 * built (bx_check_asso_watch); the same as the CPU's (test_bmf). */
START_TEST(asso_watch_on_device)
{
    mf_ctx *gpu = tu_cuda_ctx(0);
    mf_sparse *C = bx_planted(gpu, 200, 150, 8, 0.15, 0.02, 21, NULL, NULL, NULL);
    bx_check_asso_watch(gpu, C, 10, MF_BMF_ASSO_DEVICE);
    bx_check_asso_watch(gpu, C, 10, MF_BMF_ASSO_DEVICE_SPARSE);
    bx_check_asso_watch(gpu, C, 70, MF_BMF_ASSO_DEVICE_SPARSE);
    mf_sparse_destroy(C);
    mf_ctx_destroy(gpu);
}
END_TEST

/* The tensor-core Asso (b1 MMA products, forced) and the sparse device cover pick the same
 * cover as the CPU's sparse one, and so does the automatic choice on the CUDA context:
 * shapes spanning several 64 x 64 tiles, columns not a multiple of 256, fewer rows than a
 * fragment, many seeds. */
START_TEST(asso_same_cover)
{
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    struct {
        int32_t m, n;
        int rank, k;
        double p, noise;
    } cases[] = {{300, 700, 10, 20, 0.1, 0.03},
                 {5, 3, 2, 2, 0.5, 0.0},
                 {1000, 40, 6, 65, 0.2, 0.02},
                 {17, 2100, 5, 1, 0.2, 0.05},
                 {129, 257, 12, 129, 0.1, 0.05}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int k = cases[c].k, kw = (k + 63) / 64, inst = 3;
        mf_sparse *Cc = bx_planted(cpu, cases[c].m, cases[c].n, cases[c].rank, cases[c].p,
                                   cases[c].noise, 300 + c, NULL, NULL, NULL);
        mf_sparse *Cg = bx_planted(gpu, cases[c].m, cases[c].n, cases[c].rank, cases[c].p,
                                   cases[c].noise, 300 + c, NULL, NULL, NULL);
        size_t ab = (size_t)inst * cases[c].m * kw * 8, bb = (size_t)inst * cases[c].n * kw * 8;
        uint64_t *A1 = malloc(ab), *B1 = malloc(bb), *A2 = malloc(ab), *B2 = malloc(bb);
        ck_assert(A1 && B1 && A2 && B2);
        ck_assert_int_eq(mf_bmf_asso(cpu, Cc, k, inst, MF_BMF_ASSO_AUTO, NULL, A1, B1), MF_OK);
        ck_assert_msg(mf_bmf_asso(gpu, Cg, k, inst, MF_BMF_ASSO_DEVICE, NULL, A2, B2) == MF_OK,
                      "%s", mf_ctx_last_error(gpu));
        ck_assert_msg(memcmp(A1, A2, ab) == 0, "case %zu: A differs", c);
        ck_assert_msg(memcmp(B1, B2, bb) == 0, "case %zu: B differs", c);
        /* AUTO on the CUDA context (the CPU's sparse cover where it is cheaper): the same. */
        memset(A2, 0xff, ab), memset(B2, 0xff, bb);
        ck_assert_int_eq(mf_bmf_asso(gpu, Cg, k, inst, MF_BMF_ASSO_AUTO, NULL, A2, B2), MF_OK);
        ck_assert_msg(memcmp(A1, A2, ab) == 0 && memcmp(B1, B2, bb) == 0, "case %zu: AUTO differs",
                      c);
        free(A1), free(B1), free(A2), free(B2);
        check_cover(cpu, gpu, Cc, Cg, k, inst, MF_BMF_ASSO_DEVICE_SPARSE, "planted");
        mf_sparse_destroy(Cc);
        mf_sparse_destroy(Cg);
    }
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}
END_TEST

START_TEST(device_factors_and_limit)
{
#ifdef MFACT_HAVE_CUDA
    mf_ctx *gpu = tu_cuda_ctx(0);
    uint64_t *At = NULL, *Bt = NULL;
    mf_sparse *C = bx_planted(gpu, 300, 200, 70, 0.03, 0.0, 5, &At, &Bt, NULL);
    int kw = 2;
    uint64_t *dA = NULL, *dB = NULL;
    ck_assert_int_eq(cudaMalloc((void **)&dA, 300 * kw * 8), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dB, 200 * kw * 8), cudaSuccess);
    /* A warm start from the planted factors, read from and written to device memory. */
    ck_assert_int_eq(cudaMemcpy(dA, At, 300 * kw * 8, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dB, Bt, 200 * kw * 8, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    mf_bmf_opts o = opts(70);
    o.init = MF_BMF_INIT_GIVEN;
    mf_bmf_report rep = {.struct_size = sizeof rep};
    ck_assert_msg(mf_bmf_run(gpu, C, &o, dA, dB, MF_MEMORY_DEVICE, &rep) == MF_OK, "%s",
                  mf_ctx_last_error(gpu));
    ck_assert_int_eq(rep.error, 0);
    ck_assert(rep.peak_device_bytes > 0);
    uint64_t *A = malloc(300 * kw * 8), *B = malloc(200 * kw * 8);
    ck_assert_int_eq(cudaMemcpy(A, dA, 300 * kw * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(B, dB, 200 * kw * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert(memcmp(A, At, 300 * kw * 8) == 0 && memcmp(B, Bt, 200 * kw * 8) == 0);
    /* From the default start into device memory: the report matches a recount. */
    o.init = MF_BMF_INIT_SAMPLE;
    o.max_sweeps = 20;
    ck_assert_msg(mf_bmf_run(gpu, C, &o, dA, dB, MF_MEMORY_DEVICE, &rep) == MF_OK, "%s",
                  mf_ctx_last_error(gpu));
    ck_assert_int_eq(cudaMemcpy(A, dA, 300 * kw * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(B, dB, 200 * kw * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t fp, fn;
    bx_count(C, 70, A, B, &fp, &fn);
    ck_assert(fp == rep.fp && fn == rep.fn);
    cudaFree(dA), cudaFree(dB);
    free(A), free(B), free(At), free(Bt);
    mf_sparse_destroy(C);
    mf_ctx_destroy(gpu);
    /* C and the factors beyond the context's limit: MF_ERR_OUT_OF_MEMORY, buffers
     * untouched. */
    mf_ctx *small = tu_cuda_ctx(1 << 20);
    mf_sparse *Big = bx_planted(small, 3000, 2000, 4, 0.05, 0.0, 9, NULL, NULL, NULL);
    uint64_t *a = calloc(3000, 8), *b = calloc(2000, 8);
    a[0] = 3;
    o = opts(4);
    ck_assert_int_eq(mf_bmf_run(small, Big, &o, a, b, MF_MEMORY_HOST, &rep), MF_ERR_OUT_OF_MEMORY);
    tu_assert_error_has(small, "device memory limit");
    ck_assert(a[0] == 3 && b[0] == 0);
    free(a), free(b);
    mf_sparse_destroy(Big);
    mf_ctx_destroy(small);
#endif
}
END_TEST

/* Planted rank 16, noise-free and with 5 % of the entries flipped: F1 against the clean
 * matrix (the bars: 0.99 and 0.95). */
/* C held as its nonzero words (MF_BMF_C_SPARSE) and densely: the same factors and counts
 * as the CPU engine, both move kinds, ranks across word boundaries, lines spanning several
 * 32-word chunks (the sparse reader's unit) and empty lines; and the automatic choice on a
 * 15,000 x 20,000 matrix at 0.03 % density takes device memory that follows its ones, far
 * below the 75 MB its dense bits would take. */
static void layout_parity(mf_ctx *cpu, mf_ctx *gpu, int32_t rows, int32_t cols, int k, double p,
                          mf_bmf_flip flip, mf_bmf_init init, int sweeps)
{
    mf_sparse *Cc = bx_planted(cpu, rows, cols, 8, p, 0.0005, 300 + k, NULL, NULL, NULL);
    mf_sparse *Cg = bx_planted(gpu, rows, cols, 8, p, 0.0005, 300 + k, NULL, NULL, NULL);
    mf_bmf_opts o = opts(k);
    o.instances = 2;
    o.max_sweeps = sweeps;
    o.flip = flip;
    o.init = init;
    int kw = (k + 63) / 64;
    uint64_t *A1 = NULL, *B1 = NULL;
    mf_bmf_report r1 = bx_run_recounted(cpu, Cc, &o, &A1, &B1);
    const int layouts[] = {MF_BMF_C_SPARSE, MF_BMF_C_DENSE, MF_BMF_C_AUTO};
    for (int t = 0; t < 3; t++) {
        uint64_t *A2 = NULL, *B2 = NULL;
        mf_bmf_report r2 = bx_run_layout(gpu, Cg, &o, &A2, &B2, layouts[t]);
        ck_assert_msg(r1.error == r2.error && r1.sweeps == r2.sweeps &&
                          r1.best_instance == r2.best_instance,
                      "%d x %d k %d flip %d layout %d: cpu error %lld (%d sweeps), gpu %lld (%d)",
                      rows, cols, k, (int)flip, layouts[t], (long long)r1.error, r1.sweeps,
                      (long long)r2.error, r2.sweeps);
        ck_assert_msg(memcmp(A1, A2, (size_t)rows * kw * 8) == 0, "layout %d: A differs",
                      layouts[t]);
        ck_assert_msg(memcmp(B1, B2, (size_t)cols * kw * 8) == 0, "layout %d: B differs",
                      layouts[t]);
        free(A2), free(B2);
    }
    free(A1), free(B1);
    mf_sparse_destroy(Cc);
    mf_sparse_destroy(Cg);
}

START_TEST(sparse_c_layout)
{
    mf_ctx *cpu = tu_cpu_ctx(), *gpu = tu_cuda_ctx(0);
    int sweeps = quick() ? 3 : 12;
    const int ks[] = {1, 20, 65};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        layout_parity(cpu, gpu, 700, 5000, ks[t], 0.04, MF_BMF_FLIP_SINGLE, MF_BMF_INIT_SAMPLE,
                      sweeps);
        layout_parity(cpu, gpu, 4100, 300, ks[t], 0.05, MF_BMF_FLIP_PER_BIT, MF_BMF_INIT_RANDOM,
                      sweeps);
    }
    layout_parity(cpu, gpu, 3000, 2500, 20, 0.2, MF_BMF_FLIP_SINGLE, MF_BMF_INIT_ASSO, sweeps);
    if (!quick()) {
        mf_sparse *C = bx_planted(gpu, 15000, 20000, 10, 0.005, 0.00002, 41, NULL, NULL, NULL);
        mf_bmf_opts o = opts(20);
        o.instances = 4;
        o.max_sweeps = 10;
        o.init = MF_BMF_INIT_SAMPLE;
        uint64_t *A = NULL, *B = NULL;
        mf_bmf_report rep = bx_run_recounted(gpu, C, &o, &A, &B);
        int64_t ones;
        mf_sparse_shape(C, NULL, NULL, &ones);
        printf("15000 x 20000, %lld ones: peak device memory %.1f MB (dense C: 75 MB)\n",
               (long long)ones, rep.peak_device_bytes / 1e6);
        ck_assert_msg(rep.peak_device_bytes < (size_t)15e6, "peak %zu bytes",
                      rep.peak_device_bytes);
        free(A), free(B);
        mf_sparse_destroy(C);
    }
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(gpu);
}
END_TEST

START_TEST(planted_recovery)
{
    if (quick()) {
        printf("planted_recovery (gpu): skipped under the sanitizer\n");
        return;
    }
    mf_ctx *gpu = tu_cuda_ctx(0);
    for (int noisy = 0; noisy < 2; noisy++) {
        mf_sparse *clean = NULL;
        mf_sparse *C =
            bx_planted(gpu, 2000, 1000, 16, 0.1, noisy ? 0.05 : 0.0, 77, NULL, NULL, &clean);
        mf_bmf_opts o = opts(16);
        uint64_t *A = NULL, *B = NULL;
        mf_bmf_report rep = bx_run(gpu, C, &o, &A, &B);
        int64_t fp, fn, ones;
        bx_count(clean, 16, A, B, &fp, &fn);
        mf_sparse_shape(clean, NULL, NULL, &ones);
        double tp = (double)(ones - fn), f1 = 2 * tp / (2 * tp + fp + fn);
        printf("planted 2000 x 1000 rank 16, noise %.2f: F1 vs clean %.4f, %d sweeps, %.2f s\n",
               noisy ? 0.05 : 0.0, f1, rep.sweeps, rep.seconds);
        ck_assert_msg(f1 >= (noisy ? 0.95 : 0.99), "F1 %g", f1);
        free(A), free(B);
        mf_sparse_destroy(C);
        mf_sparse_destroy(clean);
    }
    mf_ctx_destroy(gpu);
}
END_TEST

START_TEST(apatio_quality)
{
    if (quick()) {
        printf("apatio_quality (gpu): skipped under the sanitizer\n");
        return;
    }
    mf_ctx *gpu = tu_cuda_ctx(0);
    bx_check_apatio(gpu, "gpu", 16, MF_BMF_INIT_SAMPLE);
    mf_ctx_destroy(gpu);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_bmf", .gpu = true, .timeout = 600};
    const TTest *const tests[] = {cpu_gpu_same_factors,
                                  asso_same_cover,
                                  asso_sparse_device_same_cover,
                                  asso_watch_on_device,
                                  device_factors_and_limit,
                                  sparse_c_layout,
                                  planted_recovery,
                                  apatio_quality};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
