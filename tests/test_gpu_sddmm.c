/* mf_sddmm, mf_spmm and mf_rmse on a real GPU: every compiled kernel variant and the tuned
 * path against the float64 reference, for k in {1, 7, 32, 33, 128, 515} and patterns with
 * empty rows, one very long row, a single entry and all-dense tiles; device and host
 * memory; beta semantics with NaN-poisoned output; the plan cache; GPU/CPU agreement of
 * SpMM and RMSE. Exits 77 (skipped) without a usable device; runs without fork. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <cuda_runtime_api.h>
#include <math.h>

#include "core/sparse.h"
#include "cuda/cuda_backend.h"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_round.h" /* the TF32 copies' rule, checked on the host */
#include "sddmm/sddmm_tc_layout.h"
#include "sddmm/sddmm_tuning.h"
#include "sddmm_fixtures.h"
#include "testutil.h"

#define CUDA_OK(call) ck_assert_msg((call) == cudaSuccess, "%s failed", #call)

static const int test_k[] = {1, 7, 32, 33, 128, 515};

static void *to_device(const void *host, size_t bytes)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 4));
    CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    /* A pageable copy may still be in flight when cudaMemcpy returns, and mfact works on
     * its own non-blocking stream: wait for the data before handing it over. */
    CUDA_OK(cudaDeviceSynchronize());
    return d;
}

/* A CUDA context whose log lines at `level` and above go to fn. */
static mf_ctx *logging_ctx(mf_log_fn fn, void *user, mf_log_level level)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    o.log = fn;
    o.log_user = user;
    o.log_level = level;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    return ctx;
}

/* S's entries as a matrix of context `to` (the CPU backend's copy, for parity checks). */
static mf_sparse *copy_to(mf_ctx *to, const mf_sparse *S)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(S, &rows, &cols, &nnz);
    int32_t *r = malloc((size_t)nnz * 4 + 4), *c = malloc((size_t)nnz * 4 + 4);
    float *v = malloc((size_t)nnz * 4 + 4);
    ck_assert_int_eq(mf_sparse_get_coo(S, r, c, v, MF_MEMORY_HOST), MF_OK);
    mf_sparse *T = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(to, &T, rows, cols, nnz, r, c, v, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(r), free(c), free(v);
    return T;
}

/* One problem: S, A (lda = k + pad), B, the float64 reference and a starting out. */
typedef struct problem {
    mf_sparse *S;
    int k;
    int64_t lda, ldb, nnz;
    float *A, *B, *before;
    double *ref, *bound;
} problem;

static problem make_problem_sized(mf_ctx *ctx, fx_pattern kind, int32_t rows, int32_t cols, int k,
                                  int pad, uint64_t seed)
{
    problem pr;
    pr.S = fx_matrix(ctx, kind, rows, cols, 0.02, 1, seed);
    pr.k = k;
    pr.lda = k + pad;
    pr.ldb = k + pad;
    mf_sparse_shape(pr.S, NULL, NULL, &pr.nnz);
    pr.A = fx_floats(rows * pr.lda, seed + 1);
    pr.B = fx_floats(cols * pr.ldb, seed + 2);
    pr.before = fx_floats(pr.nnz, seed + 3);
    pr.ref = malloc((size_t)pr.nnz * sizeof *pr.ref);
    pr.bound = malloc((size_t)pr.nnz * sizeof *pr.bound);
    fx_sddmm_ref(pr.S, k, pr.A, pr.lda, pr.B, pr.ldb, 0.5, 0, pr.ref, pr.bound);
    return pr;
}

static problem make_problem(mf_ctx *ctx, fx_pattern kind, int k, int pad, uint64_t seed)
{
    return make_problem_sized(ctx, kind, kind == FX_DENSE ? 64 : 700, kind == FX_DENSE ? 96 : 900,
                              k, pad, seed);
}

static void free_problem(problem *pr)
{
    mf_sparse_destroy(pr->S);
    free(pr->A), free(pr->B), free(pr->before), free(pr->ref), free(pr->bound);
}

/* Run variant v (or the tuned path when v < 0) on device copies with out poisoned by NaN
 * (beta = 0), then with beta = -1 on `before`, and check both against the reference. */
static void check_device(mf_ctx *ctx, problem *pr, int v, int32_t tj, int64_t block_nnz,
                         int grouped, float *keep, const char *what)
{
    int32_t rows, cols;
    mf_sparse_shape(pr->S, &rows, &cols, NULL);
    float *dA = to_device(pr->A, (size_t)(rows * pr->lda) * sizeof(float));
    float *dB = to_device(pr->B, (size_t)(cols * pr->ldb) * sizeof(float));
    size_t ob = (size_t)pr->nnz * sizeof(float);
    float *got = malloc(ob + 4), *nan = malloc(ob + 4);
    for (int64_t p = 0; p < pr->nnz; p++)
        nan[p] = NAN;
    float *dout = to_device(nan, ob);
    mf_sddmm_call call = {pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, 0.0f, dout, 0, MF_PRECISION_FP32};
    mf_status st = v < 0 ? mf_sddmm(ctx, pr->S, pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, 0.0f, dout,
                                    MF_MEMORY_DEVICE, 0)
                         : mf_cuda_sddmm_variant(ctx, pr->S, &call, v, tj, block_nnz, grouped);
    ck_assert_msg(st == MF_OK, "%s: %s", what, mf_ctx_last_error(ctx));
    /* device-memory calls are stream-ordered: wait before reading on another stream */
    CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
    CUDA_OK(cudaMemcpy(got, dout, ob, cudaMemcpyDeviceToHost));
    fx_check_sddmm(what, pr->nnz, pr->k, got, pr->ref, pr->bound, 0.0, NULL);
    if (keep)
        memcpy(keep, got, ob);

    CUDA_OK(cudaMemcpy(dout, pr->before, ob, cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    call.beta = -1.0f;
    st = v < 0 ? mf_sddmm(ctx, pr->S, pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, -1.0f, dout,
                          MF_MEMORY_DEVICE, 0)
               : mf_cuda_sddmm_variant(ctx, pr->S, &call, v, tj, block_nnz, grouped);
    ck_assert_msg(st == MF_OK, "%s: %s", what, mf_ctx_last_error(ctx));
    /* device-memory calls are stream-ordered: wait before reading on another stream */
    CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
    CUDA_OK(cudaMemcpy(got, dout, ob, cudaMemcpyDeviceToHost));
    fx_check_sddmm(what, pr->nnz, pr->k, got, pr->ref, pr->bound, -1.0, pr->before);
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
    CUDA_OK(cudaFree(dout));
    free(got);
    free(nan);
}

/* Every variant that can serve k, on every pattern, with one panel and with several; the
 * SM-L2 variants also on the grouped layout (rows regrouped, items by column), which must
 * give the same bits as index order. */
START_TEST(every_variant_matches_float64)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    int nv = mf_sddmm_variant_count();
    /* Under compute-sanitizer every launch is slow: every variant still runs, on fewer
     * patterns and k values. */
    int quick = getenv("MFACT_UNDER_SANITIZER") != NULL;
    for (int pi = 0; pi < FX_PATTERNS; pi++)
        for (size_t ki = 0; ki < sizeof test_k / sizeof *test_k; ki++) {
            int k = test_k[ki];
            if (quick && (pi == FX_RANDOM || pi == FX_SINGLE || k == 1 || k == 32))
                continue;
            problem pr = make_problem(ctx, (fx_pattern)pi, k, k % 4 ? 1 : 4, 40 + pi);
            const size_t ob = (size_t)pr.nnz * sizeof(float) + 4;
            float *plain = malloc(ob), *grouped = malloc(ob);
            for (int v = 0; v < nv; v++) {
                mf_sddmm_config cf = mf_sddmm_variant_config(v);
                if (cf.vec && k % 4)
                    continue;
                int32_t tjs[2] = {100000, cf.smem ? 48 : 37};
                for (int t = 0; t < 2; t++) {
                    int32_t tj = tjs[t];
                    if (cf.smem && tj > 200)
                        tj = 200;
                    char what[128];
                    snprintf(what, sizeof what, "%s k=%d variant %d (V=%d KR=%d %s%s) tj=%d",
                             fx_pattern_name((fx_pattern)pi), k, v, cf.v, cf.kr,
                             cf.vec ? "vec" : "scalar", cf.smem ? " smem" : "", tj);
                    check_device(ctx, &pr, v, tj, 100 + 37 * t, 0, t ? NULL : plain, what);
                    if (t == 0 && !cf.smem) {
                        strncat(what, " grouped", sizeof what - strlen(what) - 1);
                        check_device(ctx, &pr, v, tj, 100, 1, grouped, what);
                        for (int64_t p = 0; p < pr.nnz; p++)
                            ck_assert_msg(!memcmp(&plain[p], &grouped[p], sizeof(float)),
                                          "%s: %.9g, index order %.9g at entry %lld", what,
                                          (double)grouped[p], (double)plain[p], (long long)p);
                    }
                }
            }
            free(plain), free(grouped);
            char what[96];
            snprintf(what, sizeof what, "%s k=%d tuned", fx_pattern_name((fx_pattern)pi), k);
            check_device(ctx, &pr, -1, 0, 0, 0, NULL, what);
            free_problem(&pr);
        }
    mf_ctx_destroy(ctx);
}
END_TEST

/* What a reduced precision's results are checked against, computed once per problem and
 * precision (on the CPU, the test's main cost when every variant recomputed it): float64 on
 * the factors rounded as the CPU backend rounds them, with S's values and as a pattern
 * (alpha = 0.5), the slack the header's bound allows, and the CPU backend's own result with
 * beta = -1 on `before` (parity). */
typedef struct rounded_ref {
    mf_precision prec;
    double acc; /* float accumulation's bound, relative to sum |a_t b_t| */
    double *ref, *bound, *slack, *pref, *pbound;
    float *host;
} rounded_ref;

static rounded_ref make_rounded_ref(mf_ctx *cpu, const problem *pr, mf_precision prec)
{
    rounded_ref r;
    const size_t n = (size_t)pr->nnz + 1;
    r.prec = prec;
    r.ref = malloc(n * sizeof *r.ref), r.bound = malloc(n * sizeof *r.bound);
    r.slack = malloc(n * sizeof *r.slack);
    r.pref = malloc(n * sizeof *r.pref), r.pbound = malloc(n * sizeof *r.pbound);
    r.host = malloc(n * sizeof *r.host);
    fx_sddmm_ref_rounded(pr->S, pr->k, pr->A, pr->lda, pr->B, pr->ldb, 0.5, 0, prec, r.ref, r.bound,
                         r.slack);
    fx_sddmm_ref_rounded(pr->S, pr->k, pr->A, pr->lda, pr->B, pr->ldb, 0.5, 1, prec, r.pref,
                         r.pbound, NULL);
    /* 3xTF32 is float's own product on the CUDA cores and the split's three products on the
     * tensor cores and the CPU: the two differ by the split's dropped terms too (small *
     * small, and small's own rounding: 3 * 2^-22 of each |a_t b_t| at most) */
    r.acc = 2.0 * (pr->k + 2) * ldexp(1.0, -24) +
            (prec == MF_PRECISION_3XTF32 ? 3.0 * ldexp(1.0, -22) : 0.0);
    mf_sparse *Sc = copy_to(cpu, pr->S);
    memcpy(r.host, pr->before, (size_t)pr->nnz * sizeof *r.host);
    ck_assert_int_eq(mf_sddmm_ex(cpu, Sc, pr->k, pr->A, pr->lda, pr->B, pr->ldb, 0.5f, -1.0f,
                                 r.host, MF_MEMORY_HOST, 0, prec),
                     MF_OK);
    mf_sparse_destroy(Sc);
    return r;
}

static void free_rounded_ref(rounded_ref *r)
{
    free(r->ref), free(r->bound), free(r->slack), free(r->pref), free(r->pbound), free(r->host);
}

/* A reduced precision, device arrays: out NaN-poisoned with beta = 0, then beta = -1 on
 * `before`. Each result within the header's bound of float64 on the unrounded factors and
 * within float accumulation (2 (k + 2) 2^-24) of float64 on the factors rounded as the CPU
 * backend rounds them; and the CPU backend's own result within twice that of the GPU's
 * (parity). The call is mf_sddmm_ex's when v < 0, else variant v's instance for the
 * precision through the test hook (panel width tj, grouped layout or not), then once more
 * with S as a pattern and beta = 0 (the instance a prediction runs: MF_SDDMM_PLAIN for a
 * first chunk wholly inside k). */
static void check_precision_of(mf_ctx *ctx, problem *pr, const rounded_ref *rr, int v, int32_t tj,
                               int flags, const char *what)
{
    const mf_precision prec = rr->prec;
    int32_t rows, cols;
    mf_sparse_shape(pr->S, &rows, &cols, NULL);
    size_t ob = (size_t)pr->nnz * sizeof(float);
    float *dA = to_device(pr->A, (size_t)(rows * pr->lda) * sizeof(float));
    float *dB = to_device(pr->B, (size_t)(cols * pr->ldb) * sizeof(float));
    float *got = malloc(ob + 4), *nan = malloc(ob + 4);
    for (int64_t p = 0; p < pr->nnz; p++)
        nan[p] = NAN;
    float *dout = to_device(nan, ob);
    for (int pass = 0; pass < 2; pass++) {
        float beta = pass ? -1.0f : 0.0f;
        const float *before = pass ? pr->before : NULL;
        if (pass) {
            CUDA_OK(cudaMemcpy(dout, pr->before, ob, cudaMemcpyHostToDevice));
            CUDA_OK(cudaDeviceSynchronize());
        }
        mf_sddmm_call call = {pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, beta, dout, 0, prec};
        mf_status st = v < 0 ? mf_sddmm_ex(ctx, pr->S, pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, beta,
                                           dout, MF_MEMORY_DEVICE, 0, prec)
                             : mf_cuda_sddmm_variant(ctx, pr->S, &call, v, tj, 100, flags);
        ck_assert_msg(st == MF_OK, "%s: %s", what, mf_ctx_last_error(ctx));
        CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
        CUDA_OK(cudaMemcpy(got, dout, ob, cudaMemcpyDeviceToHost));
        fx_check_relative(what, pr->nnz, got, pr->ref, pr->bound, fx_precision_bound(prec, pr->k),
                          rr->slack, beta, before);
        fx_check_relative(what, pr->nnz, got, rr->ref, rr->bound, rr->acc, NULL, beta, before);
    }
    if (v >= 0) { /* S as a pattern, beta = 0, out poisoned: against the pattern's reference */
        CUDA_OK(cudaMemcpy(dout, nan, ob, cudaMemcpyHostToDevice));
        CUDA_OK(cudaDeviceSynchronize());
        mf_sddmm_call call = {pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, 0.0f, dout, 1, prec};
        ck_assert_msg(mf_cuda_sddmm_variant(ctx, pr->S, &call, v, tj, 100, flags) == MF_OK,
                      "%s, pattern: %s", what, mf_ctx_last_error(ctx));
        float *pat = malloc(ob + 4);
        CUDA_OK(cudaMemcpy(pat, dout, ob, cudaMemcpyDeviceToHost));
        fx_check_relative(what, pr->nnz, pat, rr->pref, rr->pbound, rr->acc, NULL, 0.0, NULL);
        free(pat);
    }
    /* parity: the CPU backend on the same matrix and factors (beta = -1 on before), against
     * the last pass's result */
    for (int64_t p = 0; p < pr->nnz; p++)
        ck_assert_msg(fabs((double)got[p] - rr->host[p]) <=
                          2.0 * rr->acc * rr->bound[p] + 4.0 * ldexp(1.0, -24) * fabs(rr->host[p]) +
                              1e-30,
                      "%s: GPU %.9g, CPU %.9g at entry %lld", what, (double)got[p],
                      (double)rr->host[p], (long long)p);
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
    CUDA_OK(cudaFree(dout));
    free(got), free(nan);
}

static void check_precision(mf_ctx *ctx, mf_ctx *cpu, problem *pr, mf_precision prec,
                            const char *what)
{
    rounded_ref rr = make_rounded_ref(cpu, pr, prec);
    check_precision_of(ctx, pr, &rr, -1, 0, 0, what);
    free_rounded_ref(&rr);
}

/* Every SM-L2 vector variant's reduced-precision instances (the tuning times them for TF32,
 * BF16 and FP16 calls and keeps the fastest), on every pattern and k (bf16 also on several
 * panels and on grouped rows), with S's values and as a pattern, and the CPU backend's parity
 * (under compute-sanitizer: bf16 on several panels, fewer patterns and k).
 * 16-bit copies hold 8 values a unit, so at k = 1, 7 and 33 the last unit passes k (the
 * copies' zero padding fills it), and 515 needs a tail chunk. TF32 needs 16-byte float rows
 * (its other route reads them), so only where k % 4 == 0. The hook reads the copies (TF32's
 * scaled fp16 copy of B) whatever the pattern's size; every precision also runs the instance
 * that rounds the floats as they load (MF_SDDMM_HOOK_REGISTERS, the calls' route below
 * MF_SDDMM_COPY_B_MIN_PER_COL) on one panel. The hook's copies are the calls': all three read
 * B's alone and round A's floats where k % 4 == 0 (bf16 and fp16 copy both otherwise), so
 * k = 36 on unpadded rows checks A's last unit passing k. */
START_TEST(every_reduced_variant_matches_float64)
{
    mf_ctx *ctx = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    const int nv = mf_sddmm_variant_count();
    const int quick = getenv("MFACT_UNDER_SANITIZER") != NULL;
    const mf_precision precs[] = {MF_PRECISION_TF32, MF_PRECISION_BF16, MF_PRECISION_FP16};
    for (int pi = 0; pi < FX_PATTERNS; pi++)
        for (size_t ki = 0; ki < sizeof test_k / sizeof *test_k; ki++) {
            int k = test_k[ki];
            if (quick && (pi == FX_RANDOM || pi == FX_SINGLE || k == 1 || k == 32))
                continue;
            problem pr = make_problem(ctx, (fx_pattern)pi, k, k % 4 ? 1 : 4, 140 + pi);
            for (size_t q = 0; q < sizeof precs / sizeof *precs; q++) {
                if ((precs[q] == MF_PRECISION_TF32 && k % 4) ||
                    (quick && precs[q] != MF_PRECISION_BF16))
                    continue;
                rounded_ref rr = make_rounded_ref(cpu, &pr, precs[q]);
                for (int v = 0; v < nv; v++) {
                    mf_sddmm_config cf = mf_sddmm_variant_config(v);
                    if (!cf.vec || cf.smem)
                        continue;
                    /* one panel, several, one panel with the rows grouped: bf16 all three, the
                     * others one (panels and grouping are the kernel's, whatever the precision
                     * widens; every_variant_matches_float64 runs them all on floats) */
                    const int bf16 = precs[q] == MF_PRECISION_BF16;
                    for (int t = quick ? 1 : 0; t < (quick ? 2 : bf16 ? 3 : 1); t++) {
                        const int32_t tj = t == 1 ? 37 : 100000;
                        char what[128];
                        snprintf(what, sizeof what,
                                 "%s k=%d variant %d (V=%d KR=%d) precision %d tj=%d%s",
                                 fx_pattern_name((fx_pattern)pi), k, v, cf.v, cf.kr, (int)precs[q],
                                 tj, t == 2 ? " grouped" : "");
                        check_precision_of(ctx, &pr, &rr, v, tj, t == 2 ? MF_SDDMM_HOOK_GROUPED : 0,
                                           what);
                    }
                    /* the instance that rounds the floats as they load (no copies): one panel */
                    if (k % 4 == 0) {
                        char what[128];
                        snprintf(what, sizeof what,
                                 "%s k=%d variant %d (V=%d KR=%d) precision %d in registers",
                                 fx_pattern_name((fx_pattern)pi), k, v, cf.v, cf.kr, (int)precs[q]);
                        check_precision_of(ctx, &pr, &rr, v, 100000, MF_SDDMM_HOOK_REGISTERS, what);
                    }
                }
                free_rounded_ref(&rr);
            }
            free_problem(&pr);
        }
    /* k = 36 with A's rows exactly k floats long (no padding): bf16, fp16 and TF32 read B's
     * copy and A's floats, rounding them as they load, and A's last unit of 8 holds the row's
     * last 4 values (past the last row there is nothing to read: compute-sanitizer would see
     * it) */
    for (int pi = 0; pi < 2; pi++) {
        const fx_pattern kind = pi ? FX_DENSE : FX_POWER_LAW;
        problem pr = make_problem(ctx, kind, 36, 0, 160 + pi);
        for (int q = 0; q < 3; q++) {
            const mf_precision prec = q == 2 ? MF_PRECISION_TF32
                                      : q    ? MF_PRECISION_FP16
                                             : MF_PRECISION_BF16;
            rounded_ref rr = make_rounded_ref(cpu, &pr, prec);
            for (int v = 0; v < nv; v++) {
                mf_sddmm_config cf = mf_sddmm_variant_config(v);
                if (!cf.vec || cf.smem)
                    continue;
                char what[128];
                snprintf(what, sizeof what, "%s k=36 unpadded variant %d (V=%d KR=%d) precision %d",
                         fx_pattern_name(kind), v, cf.v, cf.kr, (int)prec);
                check_precision_of(ctx, &pr, &rr, v, 100000, 0, what);
            }
            free_rounded_ref(&rr);
        }
        free_problem(&pr);
    }
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(ctx);
}
END_TEST

/* TF32 from the scaled fp16 copies (sddmm_tf32.cu), where rows test the scaling: A's rows at
 * 2^60 and 2^-60 times the rest (each A row's own power brings it into fp16's range: still
 * exact; without A's copy, the row at 2^-60 holds values below 2^-64, which the kernel sends
 * to the pass), every third B row at 2^4 and every fifth at 2^-4 (B's one power holds rows 8
 * binades apart). Then rows fp16 cannot hold, whose entries the kernel leaves to the pass on the
 * floats: an A row of 2^20 and 2^-20 against B columns of 0 and 1 (the product is the small
 * value's alone; A's floats, read without A's copy, hold it), and a B row of 1 and 2^-40 (44
 * binades below B's largest, about 2^4; A's third column 0), met by a fitting A row, so that
 * the copies would lose the product; then an A row holding an infinity (each entry NaN,
 * infinite or finite as the CPU backend's). Two variants through the hook (which reads the
 * copies whatever S's size: B's alone, then with MFACT_SDDMM_COPIES=both A's too; at k = 544
 * the V = 4 variant runs in chunks, beta = -1 marking A's rows first), and the tuned call at
 * k = 256 on a dense pattern (small matrices take the CUDA cores above k = 128; this one has
 * entries enough a column for B's copy, MF_SDDMM_COPY_B_MIN_PER_COL, but too little work,
 * MF_SDDMM_TF32_COPY_MIN_WORK, so MFACT_SDDMM_COPIES=on takes the copy). */
/* The first n rows of S that hold entries, in *row, and a column of each in *col. */
static void rows_with_entries(const mf_sparse *S, int n, int32_t *row, int32_t *col)
{
    int64_t nnz;
    mf_sparse_shape(S, NULL, NULL, &nnz);
    int32_t *r = malloc((size_t)nnz * 4 + 4), *c = malloc((size_t)nnz * 4 + 4);
    float *v = malloc((size_t)nnz * 4 + 4);
    ck_assert_int_eq(mf_sparse_get_coo(S, r, c, v, MF_MEMORY_HOST), MF_OK);
    int found = 0;
    for (int64_t p = 0; p < nnz && found < n; p++)
        if (found == 0 || r[p] != row[found - 1]) {
            col[found] = c[p];
            row[found++] = r[p];
        }
    ck_assert_int_eq(found, n);
    free(r), free(c), free(v);
}

static void scale_rows(problem *pr, int wide)
{
    int32_t row[3], col[3], rows, cols;
    rows_with_entries(pr->S, 3, row, col);
    mf_sparse_shape(pr->S, &rows, &cols, NULL);
    for (int t = 0; t < pr->k; t++) {
        pr->A[row[1] * pr->lda + t] = ldexpf(pr->A[row[1] * pr->lda + t], 60);
        pr->A[row[2] * pr->lda + t] = ldexpf(pr->A[row[2] * pr->lda + t], -60);
        if (wide)
            pr->A[row[0] * pr->lda + t] = t == 0 ? 0x1p20f : t == 1 ? 0x1p-20f : 0.f;
    }
    for (int32_t j = 0; j < cols; j++)
        for (int t = 0; t < pr->k && j % 15 && (j % 3 == 0 || j % 5 == 0); t++)
            pr->B[j * pr->ldb + t] = ldexpf(pr->B[j * pr->ldb + t], j % 3 == 0 ? 4 : -4);
    for (int32_t j = 0; wide && j < cols; j++) {
        pr->B[j * pr->ldb] = 0.f;
        pr->B[j * pr->ldb + 1] = 1.f;
    }
    for (int32_t i = 0; wide && i < rows; i++)
        pr->A[i * pr->lda + 2] = 0.f;
    for (int t = 0; wide && t < pr->k; t++) /* the column of row[1]'s first entry */
        pr->B[col[1] * pr->ldb + t] = t == 2 ? 1.f : t == 3 ? 0x1p-40f : 0.f;
    fx_sddmm_ref(pr->S, pr->k, pr->A, pr->lda, pr->B, pr->ldb, 0.5, 0, pr->ref, pr->bound);
}

/* A float's TF32 rounding's magnitude bits (the copies' rule compares these). */
static uint32_t tf32_magnitude(float x)
{
    return mf_float_bits(mf_round_tf32(x)) & 0x7fffffffu;
}

/* An fp16 value from its bits. */
static double half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 0    ? ldexp(m, -24)
                     : e == 31 ? (m ? NAN : INFINITY)
                               : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* The copies themselves (mf_sddmm_tf32_copy16) against their rule worked on the host
 * (sddmm_tf32.cu, sddmm_round.h): B's largest finite TF32 magnitude; each row's power (an A
 * row's from its own largest, B's rows' from B's) or MF_TF32_ROW_UNFIT where a value does not
 * fit; each fitting row's fp16 values its TF32 values times 2^e exactly, zeros past k; an
 * unfit row NaN throughout; the flags. The results alone cannot show a row sent to the pass
 * that the copies could hold. The unfit rows counted in *unfit_a, *unfit_b. Copies of both
 * (MFACT_SDDMM_COPIES=both), then B's alone (the calls' route), whose B rows and flag must be
 * the same, and whose A power bytes and flag are zero (the kernel marks them). */
static void check_tf32_copies_of(mf_ctx *ctx, const problem *pr, const char *what, int copy_a,
                                 int *unfit_a, int *unfit_b);
static void check_tf32_copies(mf_ctx *ctx, const problem *pr, const char *what, int *unfit_a,
                              int *unfit_b)
{
    int a_only, b_only;
    check_tf32_copies_of(ctx, pr, what, 1, unfit_a, unfit_b);
    check_tf32_copies_of(ctx, pr, what, 0, &a_only, &b_only);
    ck_assert_int_eq(a_only, 0);
    ck_assert_int_eq(b_only, *unfit_b);
}

static void check_tf32_copies_of(mf_ctx *ctx, const problem *pr, const char *what, int copy_a,
                                 int *unfit_a, int *unfit_b)
{
    int32_t rows, cols;
    mf_sparse_shape(pr->S, &rows, &cols, NULL);
    const int k = pr->k;
    const int64_t ld16 = (k + 31) / 32 * 32, n = (int64_t)rows + cols;
    const int64_t copied = copy_a ? n : cols; /* rows of y: A's and B's, or B's */
    float *dA = to_device(pr->A, (size_t)(rows * pr->lda) * sizeof(float));
    float *dB = to_device(pr->B, (size_t)(cols * pr->ldb) * sizeof(float));
    mf_sddmm_call call = {k, dA, pr->lda, dB, pr->ldb, 1.f, 0.f, NULL, 1, MF_PRECISION_TF32};
    mf_dbuf copies = {0, 0};
    mf_sddmm_tf32_copies c;
    ck_assert_int_eq(mf_sddmm_tf32_copy16(ctx, pr->S, &call, copy_a, &copies, &c), MF_OK);
    CUDA_OK(cudaDeviceSynchronize());
    ck_assert(copy_a ? c.A16 != NULL && c.B16 == c.A16 + rows * ld16 : c.A16 == NULL);
    uint16_t *y = malloc((size_t)(copied * ld16) * sizeof *y);
    int8_t *pw = malloc((size_t)n);
    int wide[2];
    uint32_t b_top;
    CUDA_OK(cudaMemcpy(y, copy_a ? c.A16 : c.B16, (size_t)(copied * ld16) * sizeof *y,
                       cudaMemcpyDeviceToHost));
    ck_assert(c.pow_b == c.pow_a + rows);
    CUDA_OK(cudaMemcpy(pw, c.pow_a, (size_t)n, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(wide, c.wide, sizeof wide, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&b_top, c.b_top, sizeof b_top, cudaMemcpyDeviceToHost));
    uint32_t top_b = 0;
    for (int32_t j = 0; j < cols; j++)
        for (int t = 0; t < k; t++) {
            uint32_t m = tf32_magnitude(pr->B[j * pr->ldb + t]);
            if (m < 0x7f800000u && m > top_b)
                top_b = m;
        }
    ck_assert_msg(b_top == top_b, "%s: B's largest 0x%08x on the device, 0x%08x here", what, b_top,
                  top_b);
    *unfit_a = *unfit_b = 0;
    for (int64_t r = 0; r < n; r++) {
        const int is_a = r < rows;
        if (is_a && !copy_a) {
            ck_assert_msg(pw[r] == 0, "%s: A row %lld's power byte %d without A's copy", what,
                          (long long)r, pw[r]);
            continue;
        }
        const int64_t yr = copy_a ? r : r - rows; /* the row's place in y */
        const float *x = is_a ? pr->A + r * pr->lda : pr->B + (r - rows) * pr->ldb;
        uint32_t top = top_b;
        if (is_a) {
            top = 0;
            for (int t = 0; t < k; t++) {
                uint32_t m = tf32_magnitude(x[t]);
                top = m > top ? m : top;
            }
        }
        int e = 0, fit = mf_tf32_row_power(top, &e);
        for (int t = 0; t < k; t++)
            fit &= mf_tf32_value_fits(tf32_magnitude(x[t]), top);
        ck_assert_msg(pw[r] == (fit ? e : MF_TF32_ROW_UNFIT),
                      "%s: %s row %lld: power %d on the device, %d here", what, is_a ? "A" : "B",
                      (long long)(is_a ? r : r - rows), pw[r], fit ? e : MF_TF32_ROW_UNFIT);
        *(is_a ? unfit_a : unfit_b) += !fit;
        for (int64_t t = 0; t < ld16; t++) {
            const uint16_t h = y[yr * ld16 + t];
            if (!fit) {
                ck_assert_msg((h & 0x7c00) == 0x7c00 && (h & 0x3ff),
                              "%s: unfit row %lld value %lld is 0x%04x, not NaN", what,
                              (long long)r, (long long)t, h);
                continue;
            }
            const double want = t < k ? ldexp((double)mf_round_tf32(x[t]), e) : 0.0;
            ck_assert_msg(half_value(h) == want, "%s: row %lld value %lld: %.9g, want %.9g", what,
                          (long long)r, (long long)t, half_value(h), want);
        }
    }
    ck_assert_msg(wide[0] == (*unfit_a > 0) && wide[1] == (*unfit_b > 0),
                  "%s: flags %d %d for %d unfit A rows, %d unfit B rows", what, wide[0], wide[1],
                  *unfit_a, *unfit_b);
    mf_dmem_free(ctx, &copies);
    free(y), free(pw);
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
}

START_TEST(tf32_scaled_copies)
{
    mf_ctx *ctx = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    unsetenv("MFACT_SDDMM_HALF");
    /* k = 544: more 4-value units a row (136) than the copies' lanes hold (32 x 4) */
    static const int ks[] = {32, 128, 256, 544};
    for (int wide = 0; wide <= 1; wide++)
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            /* the tuned call on a dense pattern, whose entries a column pass B's copy's gate
             * (its work, entries x k, is under TF32's: MFACT_SDDMM_COPIES=on takes the copy) */
            problem pr = make_problem(ctx, ks[ki] == 256 ? FX_DENSE : FX_POWER_LAW, ks[ki], 4,
                                      300 + (int)ki);
            scale_rows(&pr, wide);
            char what[96];
            int unfit_a, unfit_b;
            snprintf(what, sizeof what, "TF32 k=%d %s copies", ks[ki], wide ? "wide" : "scaled");
            check_tf32_copies(ctx, &pr, what, &unfit_a, &unfit_b);
            ck_assert_msg(!wide || (unfit_a >= 1 && unfit_b >= 1), "%s: the planted rows fit",
                          what);
            if (ks[ki] == 256) { /* the tuned call */
                snprintf(what, sizeof what, "TF32 k=%d %s tuned", ks[ki], wide ? "wide" : "scaled");
                int32_t cols;
                mf_sparse_shape(pr.S, NULL, &cols, NULL);
                ck_assert(pr.nnz >= MF_SDDMM_COPY_B_MIN_PER_COL * (int64_t)cols);
                setenv("MFACT_SDDMM_COPIES", "on", 1);
                check_precision(ctx, cpu, &pr, MF_PRECISION_TF32, what);
                unsetenv("MFACT_SDDMM_COPIES");
            } else {
                rounded_ref rr = make_rounded_ref(cpu, &pr, MF_PRECISION_TF32);
                for (int both = 0; both <= 1; both++) {
                    if (both)
                        setenv("MFACT_SDDMM_COPIES", "both", 1);
                    for (int v = 0; v < mf_sddmm_variant_count(); v++) {
                        mf_sddmm_config cf = mf_sddmm_variant_config(v);
                        if (!cf.vec || cf.smem || (cf.v != 4 && cf.v != 32))
                            continue;
                        snprintf(what, sizeof what, "TF32 k=%d %s variant %d (V=%d KR=%d) %s",
                                 ks[ki], wide ? "wide" : "scaled", v, cf.v, cf.kr,
                                 both ? "copies of both" : "B's copy");
                        check_precision_of(ctx, &pr, &rr, v, 37, 0, what);
                    }
                    unsetenv("MFACT_SDDMM_COPIES");
                }
                free_rounded_ref(&rr);
            }
            free_problem(&pr);
        }
    /* What the kernel leaves, as the unfit pass finds it (its scans of the items and of the
     * column indices). A value 2^30 makes its A row unfit (the rest lie below 1), a value
     * 2^-40 its B row (38 binades or more below B's largest, near 1).
     * - timed: a dense 550 x 550 matrix (302,500 entries, more than the pass's grid has
     *   threads on an H200, so its scans take a second stride) with an unfit A row and an
     *   unfit B row, the tuned call (its candidates timed; beta = -1 checks that the chosen
     *   run writes each entry once) on the copies (MFACT_SDDMM_COPIES=on: its work is under
     *   MF_SDDMM_TF32_COPY_MIN_WORK). Left out under a sanitizer: the timing runs are slow.
     * - every: every row of B unfit, on a random pattern with empty rows, so that each
     *   entry's row is found by search past empty rows; one panel, then the grouped layout. */
    const int quick = getenv("MFACT_UNDER_SANITIZER") != NULL;
    for (int every = quick ? 1 : 0; every <= 1; every++) {
        problem big = every ? make_problem(ctx, FX_RANDOM, 64, 4, 331)
                            : make_problem_sized(ctx, FX_DENSE, 550, 550, 32, 4, 330);
        int32_t cols;
        mf_sparse_shape(big.S, NULL, &cols, NULL);
        if (every) {
            int32_t empty = 0;
            for (int32_t r = 0; r < big.S->rows; r++)
                empty += big.S->row_ptr[r] == big.S->row_ptr[r + 1];
            ck_assert_int_gt(empty, 0);
        } else {
            ck_assert_int_ge(big.nnz, 300000);
            big.A[3 * big.lda + 1] = 0x1p30f;
        }
        for (int32_t j = every ? 0 : 7; j < (every ? cols : 8); j++)
            big.B[j * big.ldb] = 0x1p-40f;
        fx_sddmm_ref(big.S, big.k, big.A, big.lda, big.B, big.ldb, 0.5, 0, big.ref, big.bound);
        int unfit_a, unfit_b;
        check_tf32_copies(ctx, &big, every ? "every B row unfit" : "timed", &unfit_a, &unfit_b);
        ck_assert_int_eq(unfit_a, every ? 0 : 1);
        ck_assert_int_eq(unfit_b, every ? cols : 1);
        if (every) {
            rounded_ref rr = make_rounded_ref(cpu, &big, MF_PRECISION_TF32);
            check_precision_of(ctx, &big, &rr, 0, 100000, 0, "TF32 every B row unfit");
            check_precision_of(ctx, &big, &rr, 0, 100000, 1, "TF32 every B row unfit, grouped");
            free_rounded_ref(&rr);
        } else {
            ck_assert(big.nnz * big.k < MF_SDDMM_TF32_COPY_MIN_WORK);
            setenv("MFACT_SDDMM_COPIES", "on", 1);
            check_precision(ctx, cpu, &big, MF_PRECISION_TF32, "TF32 timed, unfit rows");
            unsetenv("MFACT_SDDMM_COPIES");
        }
        free_problem(&big);
    }
    /* B's copy alone (the calls' route below MF_SDDMM_TF32_COPY_A_MIN_PER_ROW entries a row of
     * A), where A's floats are checked as they load, each launch its own chunk of k:
     * - late: A rows unfit by one value each, 2^120 in the last chunk (k - 1: its products with
     *   B's scaled values, up to 2^15, would overflow), 2^-70 in a middle one (k - 40), a
     *   subnormal in an early one, at k = 544, through the hook's V = 4 (chunks
     *   of 32 or 64) and V = 32 KR = 1 (256) variants: earlier chunks write the entries, the
     *   chunk with the value leaves them, later chunks add to them, and the pass on the floats
     *   must replace them whole (beta = 0, out poisoned), or, in a call in chunks that reads
     *   out (beta = -1), the scratch array must;
     * - sparse timed: 20,000 x 2,000 with 40 entries a row, above the pass's grid, the tuned
     *   call (its candidates timed, each marking the same rows) with an unfit A row (2^120 in
     *   its last value) and an unfit B row. Left out under a sanitizer: the timing runs are
     *   slow. */
    {
        problem pr = make_problem(ctx, FX_POWER_LAW, 544, 4, 350);
        int32_t rows, cols, row[3], col[3];
        mf_sparse_shape(pr.S, &rows, &cols, NULL);
        ck_assert(pr.nnz < MF_SDDMM_TF32_COPY_A_MIN_PER_ROW * (int64_t)rows);
        rows_with_entries(pr.S, 3, row, col);
        pr.A[row[0] * pr.lda + 543] = 0x1p120f;
        pr.A[row[1] * pr.lda + 504] = 0x1p-70f;
        pr.A[row[2] * pr.lda + 100] = 1e-40f;
        fx_sddmm_ref(pr.S, pr.k, pr.A, pr.lda, pr.B, pr.ldb, 0.5, 0, pr.ref, pr.bound);
        rounded_ref rr = make_rounded_ref(cpu, &pr, MF_PRECISION_TF32);
        for (int v = 0; v < mf_sddmm_variant_count(); v++) {
            mf_sddmm_config cf = mf_sddmm_variant_config(v);
            if (!cf.vec || cf.smem || !(cf.v == 4 || (cf.v == 32 && cf.kr == 1)))
                continue;
            char what[96];
            snprintf(what, sizeof what, "TF32 k=544 late unfit A values, variant %d (V=%d KR=%d)",
                     v, cf.v, cf.kr);
            check_precision_of(ctx, &pr, &rr, v, 100000, 0, what);
        }
        free_rounded_ref(&rr);
        free_problem(&pr);
    }
    if (!quick) {
        problem big = make_problem_sized(ctx, FX_RANDOM, 20000, 2000, 544, 4, 332);
        ck_assert_int_ge(big.nnz, 300000);
        ck_assert(big.nnz < MF_SDDMM_TF32_COPY_A_MIN_PER_ROW * (int64_t)20000);
        ck_assert(big.nnz >= MF_SDDMM_COPY_B_MIN_PER_COL * (int64_t)2000);
        ck_assert(big.nnz * big.k >= MF_SDDMM_TF32_COPY_MIN_WORK); /* the library's own route */
        int32_t row, col;
        rows_with_entries(big.S, 1, &row, &col);
        big.A[row * big.lda + 543] = 0x1p120f;
        big.B[7 * big.ldb] = 0x1p-40f;
        fx_sddmm_ref(big.S, big.k, big.A, big.lda, big.B, big.ldb, 0.5, 0, big.ref, big.bound);
        check_precision(ctx, cpu, &big, MF_PRECISION_TF32, "TF32 timed on B's copy, unfit rows");
        free_problem(&big);
    }
    /* B's largest out of fp16's reach (one value 2^70: every B row unfit, whatever its own
     * values) and an all-zero B (power 2^0, every row fit): the copies, then the results */
    for (int zero = 0; zero <= 1; zero++) {
        const char *what = zero ? "TF32 B all zero" : "TF32 B's largest 2^70";
        problem pr = make_problem(ctx, FX_POWER_LAW, 64, 4, 340 + zero);
        int32_t cols;
        mf_sparse_shape(pr.S, NULL, &cols, NULL);
        for (int64_t i = 0; i < (int64_t)cols * pr.ldb; i++)
            pr.B[i] = zero ? 0.f : i == 3 * pr.ldb + 2 ? 0x1p70f : pr.B[i];
        fx_sddmm_ref(pr.S, pr.k, pr.A, pr.lda, pr.B, pr.ldb, 0.5, 0, pr.ref, pr.bound);
        int unfit_a, unfit_b;
        check_tf32_copies(ctx, &pr, what, &unfit_a, &unfit_b);
        ck_assert_int_eq(unfit_b, zero ? 0 : cols);
        rounded_ref rr = make_rounded_ref(cpu, &pr, MF_PRECISION_TF32);
        check_precision_of(ctx, &pr, &rr, 0, 100000, 0, what);
        free_rounded_ref(&rr);
        free_problem(&pr);
    }
    /* an infinity in A, then in B (a row with entries): every entry classed as the CPU
     * backend's, and only the infinity's row unfit */
    for (int in_b = 0; in_b <= 1; in_b++) {
        const char *what = in_b ? "infinity in B" : "infinity in A";
        problem pr = make_problem(ctx, FX_POWER_LAW, 64, 4, 310);
        int32_t inf_row, inf_col;
        rows_with_entries(pr.S, 1, &inf_row, &inf_col);
        if (in_b)
            pr.B[inf_col * pr.ldb + 5] = INFINITY;
        else
            pr.A[inf_row * pr.lda + 5] = INFINITY;
        int unfit_a, unfit_b;
        check_tf32_copies(ctx, &pr, what, &unfit_a, &unfit_b);
        ck_assert_int_eq(unfit_a, !in_b);
        ck_assert_int_eq(unfit_b, in_b);
        int32_t rows, cols;
        mf_sparse_shape(pr.S, &rows, &cols, NULL);
        float *dA = to_device(pr.A, (size_t)(rows * pr.lda) * sizeof(float));
        float *dB = to_device(pr.B, (size_t)(cols * pr.ldb) * sizeof(float));
        size_t ob = (size_t)pr.nnz * sizeof(float);
        float *dout = to_device(pr.before, ob), *got = malloc(ob + 4), *host = malloc(ob + 4);
        mf_sddmm_call call = {64, dA, pr.lda, dB, pr.ldb, 0.5f, 0.0f, dout, 0, MF_PRECISION_TF32};
        ck_assert_msg(mf_cuda_sddmm_variant(ctx, pr.S, &call, 0, 100000, 100, 0) == MF_OK, "%s",
                      mf_ctx_last_error(ctx));
        CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
        CUDA_OK(cudaMemcpy(got, dout, ob, cudaMemcpyDeviceToHost));
        mf_sparse *Sc = copy_to(cpu, pr.S);
        ck_assert_int_eq(mf_sddmm_ex(cpu, Sc, 64, pr.A, pr.lda, pr.B, pr.ldb, 0.5f, 0.0f, host,
                                     MF_MEMORY_HOST, 0, MF_PRECISION_TF32),
                         MF_OK);
        int infinite = 0;
        for (int64_t p = 0; p < pr.nnz; p++) {
            ck_assert_msg(isnan(got[p]) == isnan(host[p]) && isinf(got[p]) == isinf(host[p]) &&
                              (isnan(got[p]) || !isinf(got[p]) || got[p] == host[p]),
                          "%s: GPU %g, CPU %g at entry %lld", what, (double)got[p], (double)host[p],
                          (long long)p);
            if (!isnan(got[p]) && !isinf(got[p]))
                ck_assert_msg(fabs((double)got[p] - host[p]) <= 1e-5 * (pr.bound[p] + 1e-30),
                              "%s: GPU %.9g, CPU %.9g at entry %lld", what, (double)got[p],
                              (double)host[p], (long long)p);
            infinite += isinf(got[p]) || isnan(got[p]);
        }
        ck_assert_int_gt(infinite, 0);
        mf_sparse_destroy(Sc);
        CUDA_OK(cudaFree(dA));
        CUDA_OK(cudaFree(dB));
        CUDA_OK(cudaFree(dout));
        free(got), free(host);
        free_problem(&pr);
    }
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Every reduced precision on every pattern and k, with 16-byte loads (k % 4 == 0, ld padded
 * to a multiple of 4) and without (ld = k + 1); host arrays through the staging path. Each
 * twice: on the CUDA cores and on the tensor cores (MFACT_SDDMM_HALF forces each; TF32
 * without 16-byte rows stays on the tensor cores, 3xTF32 on the CUDA cores is float's own
 * product; the default for bf16 and fp16 picks by timing, below). */
START_TEST(tensor_core_precisions)
{
    mf_ctx *ctx = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    int quick = getenv("MFACT_UNDER_SANITIZER") != NULL;
    /* 12: 16-byte loads whose last 16-wide chunk is partly past k; 516: TF32 on the CUDA
     * cores in chunks (a launch each, the last partly past k) */
    static const int tc_k[] = {1, 7, 12, 32, 33, 128, 515, 516};
    for (int route = 0; route < 2; route++)
        for (int prec = MF_PRECISION_3XTF32; prec <= MF_PRECISION_FP16; prec++)
            for (int pi = 0; pi < FX_PATTERNS; pi++)
                for (size_t ki = 0; ki < sizeof tc_k / sizeof *tc_k; ki++)
                    for (int vec = 0; vec <= 1; vec++) {
                        int k = tc_k[ki];
                        if ((vec && k % 4) || (quick && (k == 1 || k == 515 || k == 516)))
                            continue;
                        setenv("MFACT_SDDMM_HALF", route ? "tensor-cores" : "cuda-cores", 1);
                        problem pr = make_problem(ctx, (fx_pattern)pi, k, vec ? 4 : 1, 60 + pi);
                        char what[128];
                        snprintf(what, sizeof what, "precision %d %s k=%d %s%s", prec,
                                 fx_pattern_name((fx_pattern)pi), k, vec ? "vec4" : "scalar",
                                 route ? ", tensor cores" : ", CUDA cores");
                        check_precision(ctx, cpu, &pr, (mf_precision)prec, what);
                        free_problem(&pr);
                    }
    unsetenv("MFACT_SDDMM_HALF");
    /* host arrays, staged: the same bound */
    problem pr = make_problem(ctx, FX_POWER_LAW, 64, 0, 5);
    float *out = malloc((size_t)pr.nnz * sizeof *out);
    memcpy(out, pr.before, (size_t)pr.nnz * sizeof *out);
    ck_assert_int_eq(mf_sddmm_ex(ctx, pr.S, 64, pr.A, pr.lda, pr.B, pr.ldb, 0.5f, 2.0f, out,
                                 MF_MEMORY_HOST, 0, MF_PRECISION_BF16),
                     MF_OK);
    fx_check_relative("bf16 host memory", pr.nnz, out, pr.ref, pr.bound,
                      fx_precision_bound(MF_PRECISION_BF16, 64), NULL, 2.0, pr.before);
    free(out);
    free_problem(&pr);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(ctx);
}
END_TEST

/* bf16 and fp16 without MFACT_SDDMM_HALF on a matrix large enough to be timed: the call
 * times the float kernel's variants on the 16-bit copies and keeps the fastest, and its
 * results (beta = 0, then beta = -1 with the choice cached) are within the precision's
 * bounds and match the CPU backend; float factors with unaligned rows too (the copies are
 * aligned whatever the factors are). Then the same on the tensor cores, forced (at this
 * size, on the copies), and in 3xTF32 and TF32. MFACT_SDDMM_HALF's unknown values fail. */
START_TEST(half_precision_default_route)
{
    mf_ctx *ctx = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    unsetenv("MFACT_SDDMM_HALF");
    const int quick = getenv("MFACT_UNDER_SANITIZER") != NULL;
    for (int prec = MF_PRECISION_BF16; prec <= MF_PRECISION_FP16; prec++)
        for (int pad = 0; pad <= 1; pad++) {
            if (quick && pad)
                continue;
            problem pr = make_problem_sized(ctx, FX_RANDOM, 4500, 5000, 64, pad, 90 + prec);
            ck_assert_int_gt(pr.nnz, 200000); /* MF_SDDMM_TUNE_MIN_NNZ: timed */
            char what[96];
            snprintf(what, sizeof what, "precision %d timed choice, ld = k + %d", prec, pad);
            check_precision(ctx, cpu, &pr, (mf_precision)prec, what);
            /* the tensor cores forced at this size read the 16-bit copies (below 200,000
             * entries and up to k = 128 they round in registers: tensor_core_precisions) */
            setenv("MFACT_SDDMM_HALF", "tensor-cores", 1);
            snprintf(what, sizeof what, "precision %d tensor cores on copies, ld = k + %d", prec,
                     pad);
            check_precision(ctx, cpu, &pr, (mf_precision)prec, what);
            unsetenv("MFACT_SDDMM_HALF");
            free_problem(&pr);
        }
    /* TF32 kinds at this size: by default on the CUDA cores (TF32 timed on its rounding
     * instances, ld = k: 16-byte rows; ld = k + 1: the tensor cores), then forced onto the
     * tensor cores, where calls that read out or S's values finish in a second pass */
    for (int prec = MF_PRECISION_3XTF32; prec <= MF_PRECISION_TF32; prec++)
        for (int pad = 0; pad <= 1; pad++)
            for (int route = 0; route < 2; route++) {
                if (quick && pad)
                    continue;
                if (route)
                    setenv("MFACT_SDDMM_HALF", "tensor-cores", 1);
                problem big = make_problem_sized(ctx, FX_RANDOM, 4500, 5000, 64, pad, 95 + prec);
                ck_assert_int_gt(big.nnz, 200000);
                char what[96];
                snprintf(what, sizeof what, "precision %d above 200,000 entries, ld = k + %d%s",
                         prec, pad, route ? ", tensor cores" : "");
                check_precision(ctx, cpu, &big, (mf_precision)prec, what);
                free_problem(&big);
                unsetenv("MFACT_SDDMM_HALF");
            }
    /* a value the variable does not name fails the call, out untouched */
    problem pr = make_problem(ctx, FX_RANDOM, 32, 0, 7);
    float *out = malloc((size_t)pr.nnz * sizeof *out);
    memcpy(out, pr.before, (size_t)pr.nnz * sizeof *out);
    setenv("MFACT_SDDMM_HALF", "both", 1);
    ck_assert_int_eq(mf_sddmm_ex(ctx, pr.S, 32, pr.A, pr.lda, pr.B, pr.ldb, 1.0f, 0.0f, out,
                                 MF_MEMORY_HOST, 0, MF_PRECISION_BF16),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "MFACT_SDDMM_HALF='both'");
    ck_assert_int_eq(memcmp(out, pr.before, (size_t)pr.nnz * sizeof *out), 0);
    unsetenv("MFACT_SDDMM_HALF");
    free(out);
    free_problem(&pr);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A copy of S on the same context: a matrix of its own, so its tensor-core plan is built
 * anew (under the MFACT_SDDMM_TC_ORDER set now). */
static mf_sparse *fresh_copy(mf_ctx *ctx, const mf_sparse *S)
{
    mf_sparse *T = NULL;
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &T, S->rows, S->cols, S->nnz, S->row_ptr, S->col,
                                        S->val, MF_MEMORY_HOST, 0),
                     MF_OK);
    return T;
}

/* Whether S's windows differ between index order and `order`: the test below must move rows
 * between windows, or it would compare a plan with itself. */
static int order_moves_rows(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order)
{
    mf_tc_layout a, b;
    ck_assert_int_eq(mf_tc_layout_build(ctx, S, MF_TC_ORDER_NATURAL, &a), MF_OK);
    ck_assert_int_eq(mf_tc_layout_build(ctx, S, order, &b), MF_OK);
    int moved = a.n_units != b.n_units;
    for (int64_t u = 0; !moved && u < a.n_units; u++)
        moved = memcmp(a.units[u].row, b.units[u].row, sizeof a.units[u].row) != 0;
    mf_tc_layout_free(&a);
    mf_tc_layout_free(&b);
    return moved;
}

/* The plan's row order changes which rows share a window and where an entry sits in its
 * tile (MMA row and column), never the entry's value: each entry is its own row's and
 * column's dot product over the same k chunks in the same lanes, and is written to its own
 * position. So under every order (MFACT_SDDMM_TC_ORDER) each precision's output must be
 * index order's bit for bit, and within the precision's bound of float64: a kernel that
 * took a window's rows as consecutive, or wrote by tile position, fails here. Patterns
 * where grouping moves rows: interleaved groups (moved a lot), power law, random with empty
 * rows, one long row. A value the variable does not name fails the call, out untouched.
 * Every precision on the tensor cores (MFACT_SDDMM_HALF: TF32 and 3xTF32 default to the
 * float kernel). */
START_TEST(tensor_core_row_orders_agree)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    setenv("MFACT_SDDMM_HALF", "tensor-cores", 1);
    const int quick = getenv("MFACT_UNDER_SANITIZER") != NULL, ks[] = {7, 32, 128};
    for (int pi = 0; pi < 4; pi++) {
        const fx_pattern kinds[] = {FX_POWER_LAW, FX_POWER_LAW, FX_RANDOM, FX_LONG_ROW};
        mf_sparse *S = pi == 0 ? fx_interleaved_groups(ctx, 1000, 1600, 8, 11)
                               : fx_matrix(ctx, kinds[pi], 700, 900, 0.02, 0, 30 + pi);
        const char *name = pi == 0 ? "interleaved groups" : fx_pattern_name(kinds[pi]);
        ck_assert_msg(order_moves_rows(ctx, S, MF_TC_ORDER_MINHASH), "%s: no row moved", name);
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            const int k = ks[ki];
            if (quick && k != 32)
                continue;
            const int64_t ld = k % 4 ? k + 1 : k + 4, nnz = S->nnz;
            float *A = fx_floats(S->rows * ld, 3 + k), *B = fx_floats(S->cols * ld, 4 + k);
            double *ref = malloc((size_t)nnz * sizeof *ref + 8),
                   *bound = malloc((size_t)nnz * sizeof *bound + 8),
                   *rref = malloc((size_t)nnz * sizeof *rref + 8),
                   *slack = malloc((size_t)nnz * sizeof *slack + 8);
            fx_sddmm_ref(S, k, A, ld, B, ld, 1.0, 1, ref, bound);
            float *dA = to_device(A, (size_t)(S->rows * ld) * 4),
                  *dB = to_device(B, (size_t)(S->cols * ld) * 4), *dout;
            CUDA_OK(cudaMalloc((void **)&dout, (size_t)nnz * 4 + 4));
            float *got = malloc((size_t)nnz * 4 + 4), *first = malloc((size_t)nnz * 4 + 4);
            for (int prec = MF_PRECISION_3XTF32; prec <= MF_PRECISION_FP16; prec++) {
                double *rb = malloc((size_t)nnz * sizeof *rb + 8);
                fx_sddmm_ref_rounded(S, k, A, ld, B, ld, 1.0, 1, (mf_precision)prec, rref, rb,
                                     slack);
                free(rb);
                for (int o = 0; o < MF_TC_ORDERS; o++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s k=%d precision %d, %s order", name, k, prec,
                             mf_tc_order_name((mf_tc_order)o));
                    setenv("MFACT_SDDMM_TC_ORDER", mf_tc_order_name((mf_tc_order)o), 1);
                    mf_sparse *T = fresh_copy(ctx, S);
                    CUDA_OK(cudaMemset(dout, 0xff, (size_t)nnz * 4)); /* NaN */
                    CUDA_OK(cudaDeviceSynchronize());
                    mf_status st = mf_sddmm_ex(ctx, T, k, dA, ld, dB, ld, 1.0f, 0.0f, dout,
                                               MF_MEMORY_DEVICE, MF_SDDMM_PATTERN, prec);
                    ck_assert_msg(st == MF_OK, "%s: %s", what, mf_ctx_last_error(ctx));
                    CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
                    CUDA_OK(cudaMemcpy(got, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost));
                    fx_check_relative(what, nnz, got, ref, bound,
                                      fx_precision_bound((mf_precision)prec, k), slack, 0.0, NULL);
                    if (o == MF_TC_ORDER_NATURAL)
                        memcpy(first, got, (size_t)nnz * 4);
                    for (int64_t p = 0; p < nnz; p++)
                        if (memcmp(&got[p], &first[p], sizeof *got) != 0)
                            ck_abort_msg("%s: entry %lld = %.9g, %.9g in index order", what,
                                         (long long)p, (double)got[p], (double)first[p]);
                    mf_sparse_destroy(T);
                }
            }
            CUDA_OK(cudaFree(dA));
            CUDA_OK(cudaFree(dB));
            CUDA_OK(cudaFree(dout));
            free(A), free(B), free(ref), free(bound), free(rref), free(slack), free(got),
                free(first);
        }
        mf_sparse_destroy(S);
    }
    /* an order the variable does not name: the plan is not built, out is untouched */
    setenv("MFACT_SDDMM_TC_ORDER", "rows", 1);
    mf_sparse *S = fx_matrix(ctx, FX_RANDOM, 50, 60, 0.1, 1, 9);
    float *A = fx_floats(50 * 4, 1), *B = fx_floats(60 * 4, 2);
    float *out = malloc((size_t)S->nnz * 4 + 4);
    for (int64_t p = 0; p < S->nnz; p++)
        out[p] = 7.0f;
    ck_assert_int_eq(
        mf_sddmm_ex(ctx, S, 4, A, 4, B, 4, 1.0f, 0.0f, out, MF_MEMORY_HOST, 0, MF_PRECISION_TF32),
        MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "MFACT_SDDMM_TC_ORDER='rows'");
    for (int64_t p = 0; p < S->nnz; p++)
        ck_assert_float_eq(out[p], 7.0f);
    unsetenv("MFACT_SDDMM_TC_ORDER");
    ck_assert_int_eq(
        mf_sddmm_ex(ctx, S, 4, A, 4, B, 4, 1.0f, 0.0f, out, MF_MEMORY_HOST, 0, MF_PRECISION_TF32),
        MF_OK);
    unsetenv("MFACT_SDDMM_HALF");
    free(A), free(B), free(out);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Host arrays through a CUDA context (staged), against the CPU backend's result. */
START_TEST(host_memory_and_cpu_parity)
{
    mf_ctx *ctx = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    for (size_t ki = 0; ki < sizeof test_k / sizeof *test_k; ki++) {
        int k = test_k[ki];
        problem pr = make_problem(ctx, FX_POWER_LAW, k, 0, 90 + k);
        float *out = malloc((size_t)pr.nnz * sizeof *out);
        memcpy(out, pr.before, (size_t)pr.nnz * sizeof *out);
        ck_assert_int_eq(
            mf_sddmm(ctx, pr.S, k, pr.A, pr.lda, pr.B, pr.ldb, 0.5f, 2.0f, out, MF_MEMORY_HOST, 0),
            MF_OK);
        char what[64];
        snprintf(what, sizeof what, "host memory k=%d", k);
        fx_check_sddmm(what, pr.nnz, k, out, pr.ref, pr.bound, 2.0, pr.before);
        free(out);
        free_problem(&pr);
    }
    mf_ctx_destroy(ctx);
    mf_ctx_destroy(cpu);
}
END_TEST

/* Which kernel a call ran, from the INFO lines a matrix's first call logs: "mf_sddmm: plan
 * for k" when the float kernel's variants were tuned for it (the CUDA cores), "mf_sddmm:
 * tensor-core plan" when the tensor-core plan was built. */
typedef struct route_log {
    int cores, tensor_cores;
    int timed; /* float-kernel plans whose line reports candidates timed */
    int vec8;  /* float-kernel plans on 16-bit copies (8 values a 16-byte unit) */
} route_log;

static void count_routes(void *user, mf_log_level level, const char *message)
{
    route_log *r = user;
    (void)level;
    if (strstr(message, "mf_sddmm: tensor-core plan"))
        r->tensor_cores++;
    else if (strstr(message, "mf_sddmm: plan for k")) {
        r->cores++;
        r->timed += strstr(message, "candidates timed in") != NULL;
        r->vec8 += strstr(message, " vec8,") != NULL;
    }
}

/* Each precision takes the route the header promises (both routes meet the bounds, so the
 * result tests alone would not notice a silent reroute): a fresh matrix per case, its first
 * call's log read. */
START_TEST(precision_routes)
{
    route_log seen = {0, 0, 0, 0};
    mf_ctx *ctx = logging_ctx(count_routes, &seen, MF_LOG_INFO);
    static const struct {
        mf_precision prec;
        int big, k, pad;  /* big: above MF_SDDMM_TUNE_MIN_NNZ; pad 1: rows not 16-byte vectors */
        const char *knob; /* MFACT_SDDMM_HALF */
        int tensor_cores;
    } cases[] = {
        {MF_PRECISION_FP32, 1, 64, 0, NULL, 0},
        {MF_PRECISION_3XTF32, 1, 64, 0, NULL, 0},
        {MF_PRECISION_TF32, 1, 64, 0, NULL, 0},
        {MF_PRECISION_TF32, 1, 64, 1, NULL, 1},  /* no 16-byte rows */
        {MF_PRECISION_TF32, 0, 32, 0, NULL, 1},  /* small, k <= 128 */
        {MF_PRECISION_TF32, 0, 256, 0, NULL, 0}, /* small, k > 128: the CUDA cores */
        {MF_PRECISION_TF32, 0, 32, 0, "cuda-cores", 0},
        {MF_PRECISION_TF32, 1, 64, 0, "tensor-cores", 1},
        {MF_PRECISION_3XTF32, 1, 64, 0, "tensor-cores", 1},
        {MF_PRECISION_BF16, 1, 64, 0, NULL, 0},
        {MF_PRECISION_FP16, 1, 64, 1, NULL, 0}, /* the copies are aligned */
        {MF_PRECISION_BF16, 0, 32, 0, NULL, 1}, /* small */
        {MF_PRECISION_BF16, 0, 32, 0, "cuda-cores", 0},
        {MF_PRECISION_FP16, 1, 64, 0, "tensor-cores", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (cases[c].knob)
            setenv("MFACT_SDDMM_HALF", cases[c].knob, 1);
        else
            unsetenv("MFACT_SDDMM_HALF");
        const int k = cases[c].k;
        problem pr = cases[c].big
                         ? make_problem_sized(ctx, FX_RANDOM, 4500, 5000, k, cases[c].pad, 200 + c)
                         : make_problem(ctx, FX_RANDOM, k, cases[c].pad, 200 + c);
        ck_assert(cases[c].big ? pr.nnz > 200000 : pr.nnz < 200000);
        int32_t rows, cols;
        mf_sparse_shape(pr.S, &rows, &cols, NULL);
        float *dA = to_device(pr.A, (size_t)rows * pr.lda * sizeof(float));
        float *dB = to_device(pr.B, (size_t)cols * pr.ldb * sizeof(float));
        float *dout = to_device(pr.before, (size_t)pr.nnz * sizeof(float));
        seen.cores = seen.tensor_cores = seen.timed = seen.vec8 = 0;
        ck_assert_msg(mf_sddmm_ex(ctx, pr.S, k, dA, pr.lda, dB, pr.ldb, 1.0f, 0.0f, dout,
                                  MF_MEMORY_DEVICE, 0, cases[c].prec) == MF_OK,
                      "case %zu: %s", c, mf_ctx_last_error(ctx));
        CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
        ck_assert_msg(seen.tensor_cores == cases[c].tensor_cores &&
                          seen.cores == !cases[c].tensor_cores,
                      "case %zu (precision %d, %s, k = %d, pad %d, MFACT_SDDMM_HALF %s): %d "
                      "tensor-core plans, %d float-kernel plans",
                      c, (int)cases[c].prec, cases[c].big ? "big" : "small", k, cases[c].pad,
                      cases[c].knob ? cases[c].knob : "unset", seen.tensor_cores, seen.cores);
        /* the plan's line says what choosing it cost: timed above 200,000 entries (every
         * big case here has several candidates), the rule's pick below */
        ck_assert_msg(seen.timed == (cases[c].big ? seen.cores : 0),
                      "case %zu: %d of %d float-kernel plans timed", c, seen.timed, seen.cores);
        /* bf16 and fp16 on the CUDA cores with entries enough a column read 16-bit copies
         * (MF_SDDMM_COPY_B_MIN_PER_COL): B's alone, or without 16-byte rows both; the log does
         * not tell which, reduced_precisions_without_copies's memory peak does */
        if ((cases[c].prec == MF_PRECISION_BF16 || cases[c].prec == MF_PRECISION_FP16) &&
            cases[c].big && !cases[c].tensor_cores)
            ck_assert_msg(seen.vec8 == seen.cores, "case %zu: %d of %d plans on 16-bit copies", c,
                          seen.vec8, seen.cores);
        CUDA_OK(cudaFree(dA));
        CUDA_OK(cudaFree(dB));
        CUDA_OK(cudaFree(dout));
        free_problem(&pr);
    }
    unsetenv("MFACT_SDDMM_HALF");
    mf_ctx_destroy(ctx);
}
END_TEST

/* A matrix with few entries per row of A (about 4) but many per column
 * (MF_SDDMM_COPY_B_MIN_PER_COL), enough to be timed, on each route of each reduced precision:
 * the library's (bf16 and fp16: B's 16-bit copy alone, A's floats rounded as they load; TF32:
 * no copies, its work being under MF_SDDMM_TF32_COPY_MIN_WORK), no copies
 * (MFACT_SDDMM_COPIES=off: both factors' floats rounded as they load) and, for TF32, copies of
 * both (MFACT_SDDMM_COPIES=both: A's scaled copy is TF32's alone; bf16's and fp16's copies of
 * both, taken where rows are not 16-byte vectors, are precision_routes's and
 * every_reduced_variant_matches_float64's) and B's scaled copy alone (MFACT_SDDMM_COPIES=on).
 * Plans read 16-bit units exactly where B's copy is read; the route with B's copy alone keeps
 * the device-memory peak below the route without copies plus half of what a copy of A would
 * take, and below the route with both copies by at least half of it. Every route gives the
 * rounded inputs' products within the precision's bounds. */
START_TEST(reduced_precisions_without_copies)
{
    mf_ctx *cpu = tu_cpu_ctx();
    const int k = 64;
    const int32_t rows = 200000, cols = 300;
    problem pr = make_problem_sized(cpu, FX_RANDOM, rows, cols, k, 0, 61);
    ck_assert_int_gt(pr.nnz, 200000);
    ck_assert(pr.nnz < 8 * (int64_t)rows);
    ck_assert(pr.nnz >= MF_SDDMM_COPY_B_MIN_PER_COL * (int64_t)cols);
    ck_assert(pr.nnz * k < MF_SDDMM_TF32_COPY_MIN_WORK);
    const size_t copy_a = (size_t)rows * k * 2;
    static const mf_precision precs[] = {MF_PRECISION_TF32, MF_PRECISION_BF16, MF_PRECISION_FP16};
    static const char *const knobs[] = {NULL, "off", "both", "on"};
    static const char *const names[] = {"the library's route", "no copies", "copies of both",
                                        "B's copy alone"};
    for (size_t q = 0; q < sizeof precs / sizeof *precs; q++) {
        const int tf32 = precs[q] == MF_PRECISION_TF32;
        const int b_copy = tf32 ? 3 : 0; /* the route that reads B's copy alone */
        size_t peak[4] = {0, 0, 0, 0};
        for (int route = 0; route < (tf32 ? 4 : 2); route++) {
            if (knobs[route])
                setenv("MFACT_SDDMM_COPIES", knobs[route], 1);
            route_log seen = {0, 0, 0, 0};
            mf_ctx *ctx = logging_ctx(count_routes, &seen, MF_LOG_INFO);
            mf_sparse *S = fresh_copy(ctx, pr.S);
            problem mine = pr;
            mine.S = S;
            char what[96];
            snprintf(what, sizeof what, "precision %d, %s", (int)precs[q], names[route]);
            check_precision(ctx, cpu, &mine, precs[q], what);
            peak[route] = tu_memory_stats(ctx).peak_bytes;
            /* the CUDA cores, tuned: the bounds alone would pass the tensor cores too */
            ck_assert_msg(seen.cores >= 1 && seen.tensor_cores == 0 && seen.timed >= 1,
                          "%s: %d float-kernel plans (%d timed), %d tensor-core plans", what,
                          seen.cores, seen.timed, seen.tensor_cores);
            /* 16-bit units where B's copy is read */
            const int reads_copy = route >= 2 || route == b_copy;
            ck_assert_msg(reads_copy ? seen.vec8 == seen.cores : seen.vec8 == 0,
                          "%s: %d of %d plans on 16-bit copies", what, seen.vec8, seen.cores);
            mf_sparse_destroy(S);
            mf_ctx_destroy(ctx);
            unsetenv("MFACT_SDDMM_COPIES");
        }
        ck_assert_msg(
            peak[b_copy] < peak[1] + copy_a / 2 &&
                (!tf32 || (peak[b_copy] + copy_a / 2 < peak[2] && peak[0] < peak[1] + copy_a / 2)),
            "precision %d: peak %zu bytes with B's copy, %zu without copies, %zu with "
            "both, %zu on the library's route (a copy of A: %zu)",
            (int)precs[q], peak[b_copy], peak[1], peak[2], peak[0], copy_a);
    }
    free_problem(&pr);
    mf_ctx_destroy(cpu);
}
END_TEST

/* Under every device-memory limit from none of the call's memory to all of it, a call on a
 * matrix big enough to be timed (the tuning allocates a layout per candidate, and with beta
 * = 0 writes candidates' results into out) either succeeds with the right result or fails
 * with MF_ERR_OUT_OF_MEMORY and out as it was; fp32, TF32 (B's scaled fp16 copy, forced by
 * MFACT_SDDMM_COPIES=on: the call's work is under MF_SDDMM_TF32_COPY_MIN_WORK) and bf16 (the
 * 16-bit copies), beta = 0 and -1, a fresh context and matrix each time (nothing cached). */
START_TEST(memory_limits_fail_cleanly)
{
    mf_ctx *big = tu_cuda_ctx(0);
    problem pr = make_problem_sized(big, FX_RANDOM, 4500, 5000, 64, 0, 31);
    ck_assert_int_gt(pr.nnz, 200000); /* MF_SDDMM_TUNE_MIN_NNZ: timed */
    const size_t ob = (size_t)pr.nnz * sizeof(float);
    float *dA = to_device(pr.A, (size_t)4500 * 64 * sizeof(float));
    float *dB = to_device(pr.B, (size_t)5000 * 64 * sizeof(float));
    float *got = malloc(ob);
    double *rref = malloc((size_t)pr.nnz * sizeof *rref),
           *rbound = malloc((size_t)pr.nnz * sizeof *rbound),
           *slack = malloc((size_t)pr.nnz * sizeof *slack);
    static const mf_precision precs[] = {MF_PRECISION_FP32, MF_PRECISION_TF32, MF_PRECISION_BF16};
    const int steps = getenv("MFACT_UNDER_SANITIZER") ? 4 : 12;
    for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
        fx_sddmm_ref_rounded(pr.S, 64, pr.A, pr.lda, pr.B, pr.ldb, 0.5, 0, precs[pi], rref, rbound,
                             slack);
        if (precs[pi] == MF_PRECISION_TF32)
            setenv("MFACT_SDDMM_COPIES", "on", 1);
        for (int pass = 0; pass < 2; pass++) {
            const float beta = pass ? -1.0f : 0.0f;
            /* the call's peak with no limit: the matrix's CSR, the layouts, the copies */
            size_t peak = 0;
            int failed = 0, passed = 0;
            for (int step = -1; step <= steps; step++) {
                if (step == 0) /* a limit of 0 is none */
                    continue;
                mf_ctx *ctx = tu_cuda_ctx(step < 0 ? 0 : peak * (size_t)step / (size_t)steps);
                mf_sparse *S = fresh_copy(ctx, pr.S);
                float *dout = to_device(pr.before, ob);
                mf_status st = mf_sddmm_ex(ctx, S, 64, dA, pr.lda, dB, pr.ldb, 0.5f, beta, dout,
                                           MF_MEMORY_DEVICE, 0, precs[pi]);
                CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
                CUDA_OK(cudaMemcpy(got, dout, ob, cudaMemcpyDeviceToHost));
                char what[128];
                snprintf(what, sizeof what, "precision %d beta %g limit %d/%d of %zu bytes",
                         (int)precs[pi], (double)beta, step, steps, peak);
                if (step < 0)
                    peak = tu_memory_stats(ctx).peak_bytes;
                if (st == MF_OK) {
                    passed++;
                    fx_check_relative(what, pr.nnz, got, rref, rbound,
                                      2.0 * (64 + 2) * ldexp(1.0, -24), NULL, beta,
                                      pass ? pr.before : NULL);
                } else {
                    failed++;
                    ck_assert_msg(st == MF_ERR_OUT_OF_MEMORY, "%s: %s", what,
                                  mf_ctx_last_error(ctx));
                    ck_assert_msg(step < steps, "%s: failed with the whole peak allowed", what);
                    ck_assert_msg(memcmp(got, pr.before, ob) == 0,
                                  "%s: out changed by a failed call", what);
                }
                CUDA_OK(cudaFree(dout));
                mf_sparse_destroy(S);
                mf_ctx_destroy(ctx);
            }
            ck_assert_uint_gt(peak, 0);
            ck_assert_int_gt(failed, 0); /* the small limits must fail, or nothing was tested */
            ck_assert_int_gt(passed, 1);
        }
        unsetenv("MFACT_SDDMM_COPIES");
    }
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
    free(got), free(rref), free(rbound), free(slack);
    free_problem(&pr);
    mf_ctx_destroy(big);
}
END_TEST

/* Big enough to be timed: the tuned plan is built once per k, later calls reuse it (no new
 * device memory), and the result stays right; tuning another k (which builds and then drops
 * the losing candidates' layouts) leaves the earlier choices usable. */
START_TEST(auto_tune_and_plan_cache)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    mf_sparse *S = fx_matrix(ctx, FX_POWER_LAW, 6000, 4000, 0.25, 1, 77);
    int64_t nnz;
    mf_sparse_shape(S, NULL, NULL, &nnz);
    ck_assert_int_gt(nnz, MF_SDDMM_TUNE_MIN_NNZ);
    const int ld = 128, ks[] = {64, 32, 128, 64, 32};
    float *A = fx_floats(6000 * ld, 1), *B = fx_floats(4000 * ld, 2);
    double *ref = malloc((size_t)nnz * sizeof *ref), *bound = malloc((size_t)nnz * sizeof *bound);
    float *dA = to_device(A, 6000 * ld * 4), *dB = to_device(B, 4000 * ld * 4), *dout;
    CUDA_OK(cudaMalloc((void **)&dout, (size_t)nnz * 4));
    float *got = malloc((size_t)nnz * 4);
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int k = ks[ki], seen = 0;
        for (size_t j = 0; j < ki; j++)
            seen = seen || ks[j] == k;
        fx_sddmm_ref(S, k, A, ld, B, ld, 1.0, 0, ref, bound);
        for (int rep = 0; rep < 2; rep++) {
            mf_memory_stats before = tu_memory_stats(ctx);
            ck_assert_int_eq(
                mf_sddmm(ctx, S, k, dA, ld, dB, ld, 1.0f, 0.0f, dout, MF_MEMORY_DEVICE, 0), MF_OK);
            CUDA_OK(cudaStreamSynchronize((cudaStream_t)mf_ctx_stream(ctx)));
            mf_memory_stats after = tu_memory_stats(ctx);
            if (rep > 0 || seen) /* the plan for k is reused: nothing new is allocated */
                ck_assert_msg(after.allocations == before.allocations,
                              "k = %d (call %zu): %llu allocations, before %llu", k, ki,
                              (unsigned long long)after.allocations,
                              (unsigned long long)before.allocations);
            CUDA_OK(cudaMemcpy(got, dout, (size_t)nnz * 4, cudaMemcpyDeviceToHost));
            fx_check_sddmm("tuned 6000 x 4000", nnz, k, got, ref, bound, 0.0, NULL);
        }
    }
    /* Destroying the matrix gives the plan's device memory back. */
    mf_sparse_destroy(S);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 0);
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
    CUDA_OK(cudaFree(dout));
    free(A), free(B), free(ref), free(bound), free(got);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(spmm_and_rmse_match_cpu)
{
    mf_ctx *ctx = tu_cuda_ctx(0), *cpu = tu_cpu_ctx();
    mf_sparse *S = fx_matrix(ctx, FX_LONG_ROW, 300, 200, 0.05, 1, 5);
    for (int64_t n = 1; n <= 65; n += 32) {
        fx_check_spmm(ctx, S, MF_OP_N, n);
        fx_check_spmm(ctx, S, MF_OP_T, n);
    }
    /* device memory gives the same as host memory */
    int32_t rows = 300, cols = 200;
    int64_t n = 8;
    float *X = fx_floats(cols * n, 3), *Y1 = fx_floats(rows * n, 4), *Y2 = malloc(rows * n * 4);
    memcpy(Y2, Y1, rows * n * 4);
    float *dX = to_device(X, cols * n * 4), *dY = to_device(Y2, rows * n * 4);
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, S, n, 1.5f, X, n, 0.5f, Y1, n, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, S, n, 1.5f, dX, n, 0.5f, dY, n, MF_MEMORY_DEVICE),
                     MF_OK);
    CUDA_OK(cudaMemcpy(Y2, dY, rows * n * 4, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < rows * n; i++)
        ck_assert_float_eq_tol(Y1[i], Y2[i], 1e-5f * (1.0f + fabsf(Y1[i])));

    /* RMSE: GPU (host and device factors) against the CPU backend on the same data */
    int k = 12;
    float *U = fx_floats(rows * k, 8), *V = fx_floats(cols * k, 9);
    mf_sparse *Sc = copy_to(cpu, S);
    double g = -1, gd = -1, h = -2;
    ck_assert_int_eq(mf_rmse(ctx, S, k, U, k, V, k, MF_MEMORY_HOST, &g), MF_OK);
    float *dU = to_device(U, rows * k * 4), *dV = to_device(V, cols * k * 4);
    ck_assert_int_eq(mf_rmse(ctx, S, k, dU, k, dV, k, MF_MEMORY_DEVICE, &gd), MF_OK);
    ck_assert_int_eq(mf_rmse(cpu, Sc, k, U, k, V, k, MF_MEMORY_HOST, &h), MF_OK);
    ck_assert_double_eq_tol(g, h, 1e-5 * h);
    ck_assert_double_eq_tol(gd, h, 1e-5 * h);
    ck_assert_double_gt(h, 0.1);
    /* the same factors in padded rows (ld = k + 5; the padding is NaN and must not be
     * read), staged from the host and in place on the device */
    const int64_t ld = k + 5;
    float *Up = malloc(rows * ld * 4), *Vp = malloc(cols * ld * 4);
    for (int64_t i = 0; i < rows * ld; i++)
        Up[i] = i % ld < k ? U[i / ld * k + i % ld] : NAN;
    for (int64_t i = 0; i < cols * ld; i++)
        Vp[i] = i % ld < k ? V[i / ld * k + i % ld] : NAN;
    float *dUp = to_device(Up, rows * ld * 4), *dVp = to_device(Vp, cols * ld * 4);
    double gp = -1, gpd = -1;
    ck_assert_int_eq(mf_rmse(ctx, S, k, Up, ld, Vp, ld, MF_MEMORY_HOST, &gp), MF_OK);
    ck_assert_int_eq(mf_rmse(ctx, S, k, dUp, ld, dVp, ld, MF_MEMORY_DEVICE, &gpd), MF_OK);
    ck_assert_double_eq_tol(gp, h, 1e-5 * h);
    ck_assert_double_eq_tol(gpd, h, 1e-5 * h);
    CUDA_OK(cudaFree(dUp)), CUDA_OK(cudaFree(dVp));
    free(Up), free(Vp);

    /* where = HOST with a device pointer is refused, out untouched */
    float keep = 3.0f, out1 = 3.0f;
    ck_assert_int_eq(mf_sddmm(ctx, S, 4, dU, 4, dV, 4, 1, 0, &out1, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "device memory but where = MF_MEMORY_HOST");
    ck_assert_float_eq(out1, keep);

    CUDA_OK(cudaFree(dX)), CUDA_OK(cudaFree(dY)), CUDA_OK(cudaFree(dU)), CUDA_OK(cudaFree(dV));
    free(X), free(Y1), free(Y2), free(U), free(V);
    mf_sparse_destroy(Sc);
    mf_sparse_destroy(S);
    mf_ctx_destroy(cpu);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The two ways a tensor-core call finishes its entries give the same bits: in the kernel
 * (below 200,000 entries, or where a scratch array would pass the memory limit) and in a
 * pass in index order (from 200,000 entries). Against a pattern call at beta = 0 (t: alpha
 * times the products, written alone), every call that reads S's values or out must give
 * t * val, then fmaf(beta, before, that), rounded as the device rounds. S (in ctx) carries
 * its values; prec runs with the tensor cores forced. */
static void check_finish_bits(mf_ctx *ctx, mf_sparse *S, const problem *pr, mf_precision prec,
                              const char *what)
{
    int32_t rows, cols;
    mf_sparse_shape(S, &rows, &cols, NULL);
    const size_t ob = (size_t)pr->nnz * sizeof(float);
    float *dA = to_device(pr->A, (size_t)(rows * pr->lda) * sizeof(float));
    float *dB = to_device(pr->B, (size_t)(cols * pr->ldb) * sizeof(float));
    float *dout = to_device(pr->before, ob), *t = malloc(ob + 4), *got = malloc(ob + 4);
    cudaStream_t stream = (cudaStream_t)mf_ctx_stream(ctx);
    setenv("MFACT_SDDMM_HALF", "tensor-cores", 1);
    for (int c = 0; c < 4; c++) {
        /* c = 0: t; then values at beta = 0, values at beta = -1, pattern at beta = -1 */
        const unsigned flags = c == 0 || c == 3 ? MF_SDDMM_PATTERN : 0;
        const float beta = c >= 2 ? -1.0f : 0.0f;
        CUDA_OK(cudaMemcpy(dout, pr->before, ob, cudaMemcpyHostToDevice));
        CUDA_OK(
            cudaDeviceSynchronize()); /* the copy may be in flight: mfact's stream does not wait */
        mf_status st = mf_sddmm_ex(ctx, S, pr->k, dA, pr->lda, dB, pr->ldb, 0.5f, beta, dout,
                                   MF_MEMORY_DEVICE, flags, prec);
        ck_assert_msg(st == MF_OK, "%s, call %d: %s", what, c, mf_ctx_last_error(ctx));
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(cudaMemcpy(c == 0 ? t : got, dout, ob, cudaMemcpyDeviceToHost));
        for (int64_t p = 0; c > 0 && p < pr->nnz; p++) {
            float want = flags ? t[p] : t[p] * S->val[p];
            if (beta != 0.0f)
                want = fmaf(beta, pr->before[p], want);
            if (memcmp(&want, &got[p], sizeof want) != 0)
                ck_abort_msg("%s, call %d (beta %g, %s): entry %lld = %.9g, want %.9g", what, c,
                             (double)beta, flags ? "pattern" : "values", (long long)p,
                             (double)got[p], (double)want);
        }
    }
    unsetenv("MFACT_SDDMM_HALF");
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
    CUDA_OK(cudaFree(dout));
    free(t), free(got);
}

/* check_finish_bits below and above 200,000 entries, TF32 and bf16; and above it in a context
 * whose memory limit leaves no room for the scratch array (the limit: the peak of the same
 * calls in a context without one, less half the array): the calls still succeed, finishing
 * in the kernel, after a refused allocation. */
START_TEST(tensor_core_finish_bits)
{
    mf_ctx *ctx = tu_cuda_ctx(0);
    const mf_precision precs[] = {MF_PRECISION_TF32, MF_PRECISION_BF16};
    for (int big = 0; big <= 1; big++) {
        problem pr = big ? make_problem_sized(ctx, FX_RANDOM, 4500, 5000, 64, 0, 120)
                         : make_problem(ctx, FX_POWER_LAW, 64, 0, 121);
        ck_assert(big ? pr.nnz >= 200000 : pr.nnz < 200000);
        for (int i = 0; i < 2; i++) {
            char what[96];
            snprintf(what, sizeof what, "finish bits, precision %d, %lld entries", precs[i],
                     (long long)pr.nnz);
            check_finish_bits(ctx, pr.S, &pr, precs[i], what);
        }
        if (big) {
            mf_memory_stats m = {.struct_size = sizeof m};
            mf_ctx *probe = tu_cuda_ctx(0);
            mf_sparse *Sp = copy_to(probe, pr.S);
            check_finish_bits(probe, Sp, &pr, MF_PRECISION_TF32, "finish bits, probe");
            ck_assert_int_eq(mf_ctx_memory_stats(probe, &m), MF_OK);
            const size_t scratch = (size_t)pr.nnz * sizeof(float);
            ck_assert_uint_gt(m.peak_bytes, scratch);
            const size_t limit = m.peak_bytes - scratch / 2;
            mf_sparse_destroy(Sp);
            mf_ctx_destroy(probe);
            mf_ctx *lim = tu_cuda_ctx(limit);
            mf_sparse *Sl = copy_to(lim, pr.S);
            check_finish_bits(lim, Sl, &pr, MF_PRECISION_TF32, "finish bits, no room to spare");
            ck_assert_int_eq(mf_ctx_memory_stats(lim, &m), MF_OK);
            ck_assert_uint_gt(m.failed_allocations, 0);
            ck_assert_uint_le(m.peak_bytes, limit);
            mf_sparse_destroy(Sl);
            mf_ctx_destroy(lim);
        }
        free_problem(&pr);
    }
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "gpu_sddmm", .gpu = true, .timeout = 600};
    const TTest *const tests[] = {every_variant_matches_float64,
                                  every_reduced_variant_matches_float64,
                                  tf32_scaled_copies,
                                  tensor_core_precisions,
                                  half_precision_default_route,
                                  tensor_core_row_orders_agree,
                                  host_memory_and_cpu_parity,
                                  auto_tune_and_plan_cache,
                                  spmm_and_rmse_match_cpu,
                                  tensor_core_finish_bits,
                                  memory_limits_fail_cleanly,
                                  precision_routes,
                                  reduced_precisions_without_copies};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
