// bench_sddmm: mf_sddmm_ex at every precision (mf_precision) against cusparseSDDMM (CSR, fp32)
// on the same matrices and inputs in one run. For each case, k and precision it prints the
// median times of mfact and cuSPARSE (interleaved runs), mfact's GFLOP/s (2 k nnz / t), the
// speed-up, mfact's time over the compulsory-traffic floor (column indices read and outputs
// written once, row offsets, A and B read once, at the device's measured copy bandwidth),
// the error against float64 on a sample of entries (the largest |got - exact| / sum_t
// |a_t b_t|, checked against the header's bound for the precision), and the first call's
// time (the plan: fp32's tuning for this k, or the tensor-core plan, built once per matrix
// for every k and precision, whose build time, row order and tile density the library logs;
// --tc-order sets MFACT_SDDMM_TC_ORDER: natural measures without grouping rows). Both sides
// exclude their one-time preparation from the timed runs: cuSPARSE's SDDMM_preprocess and
// mfact's plan. "% peak" is the fraction of the arithmetic ceiling the useful work (2 k nnz
// flops) reaches: fp32 against the CUDA cores' fp32 peak, the other precisions against the
// tensor cores' dense peak at that precision (3xTF32: a third of TF32's), from the SM count,
// the peak SM clock and the per-SM rates of compute capability 8.0 and 9.0 ("-" on others).
// S is used as a pattern on both sides (cuSPARSE's SDDMM ignores C's values).
//
// --rmse adds, per case and k, the evaluations built on the sampled product (issue 45, "use
// it where it pays"): mf_rmse_ex and mf_predict (model.precision) at fp32, bf16 and fp16 on
// device arrays, each call whole (its buffers, bias pass, reduction and the host wait for the
// result), against the same pipeline from the peers in the same run: the ratings copied into
// C's values, cusparseSDDMM with alpha = -1 and beta = 1, cublasSnrm2 (RMSE); cusparseSDDMM
// alone (predictions, which have no bias terms here). Each row gives the RMSE's relative
// difference from the peer's float RMSE.
//
// usage: bench_sddmm [--cases netflix,nytimes,uniform] [--k 32,128,512] [--repeat N]
//                    [--precisions fp32,3xtf32,tf32,bf16,fp16,bf16-tc,fp16-tc,tf32-tc,
//                                  3xtf32-tc,bf16-cc,fp16-cc,tf32-cc]
//                    [--scale F] [--graph FILE]...
//                    [--seed S] [--tc-order natural|length-minhash|minhash|auto] [--rmse]
//                    [--beta B] [--shape NAME,ROWS,COLS,MEAN,ALPHA,ZIPF[,MAXFRAC]]...
//                    [--factors uniform|normal] [--transpose]
//
// --cases none leaves the built-in shapes out (graphs and --shape cases alone). An unknown
// name in a list, a malformed number, k < 1, --repeat < 1, --scale <= 0 or a seed that is not
// decimal digits ends the program with status 2 before any device work
// (tests/tool/check-bench-args.sh).
//
// --transpose adds each matrix's transpose as a case of its own (name^T): the same entries
// with the roles of the factors swapped, which the tuning may serve with other variants.
//
// --shape adds the generator at another shape: ROWS x COLS, row lengths Pareto(ALPHA) of
// mean MEAN (ALPHA 0: all MEAN), column popularity Zipf(ZIPF) (0: uniform), a row capped at
// MAXFRAC of the columns (default 1); --scale applies to its rows too.
//
// --factors normal fills the factors with N(0, 1/4) values (Box-Muller on 32-bit uniforms:
// magnitudes down to about 2^-30, as continuous factors have) instead of uniform [-1, 1)
// (mf_random_uniform: multiples of 2^-24). TF32's scaled fp16 copies hold only rows whose
// values lie within 28 binades of their largest (B's rows: of B's largest; A's floats, read
// without A's copy, only values 0 or in [2^-64, 2^64)), and a call computes the other rows'
// entries apart, from the floats: uniform factors never have such rows, normal ones at
// large sizes do.
//
// --beta B times out = A B^T + B out on both sides (the checked warm-up runs at beta = 0):
// a kernel that reads out where it writes it (the tensor cores' scattered epilogue) shows here.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench_cusparse.h"
#include "bench_util.h"
#include "mfact/mfact.h"

// ---- synthetic matrices ------------------------------------------------------------------

static double unit(uint64_t seed, uint64_t i)
{
    return (double)(mix(seed ^ mix(i)) >> 11) / 9007199254740992.0;
}

struct csr {
    int32_t rows = 0, cols = 0;
    std::vector<int64_t> ptr;
    std::vector<int32_t> col;
    int64_t nnz() const
    {
        return (int64_t)col.size();
    }
};

// Rows with Pareto(alpha) lengths scaled to mean_len (capped at max_frac of the columns);
// each row's columns drawn from a Zipf(beta) popularity over a seeded permutation of the
// column ids, duplicates dropped. beta = 0 with alpha = 0 gives uniform rows of mean_len.
static csr power_law(int32_t rows, int32_t cols, double mean_len, double alpha, double beta,
                     double max_frac, uint64_t seed)
{
    csr m;
    m.rows = rows;
    m.cols = cols;
    std::vector<double> len(rows);
    double sum = 0;
    for (int32_t i = 0; i < rows; i++) {
        double u = unit(seed, i);
        len[i] = alpha > 0 ? pow(1.0 - u, -1.0 / alpha) : 1.0;
        sum += len[i];
    }
    double scale = mean_len * rows / sum, cap = max_frac * cols;
    std::vector<int64_t> want(rows);
    for (int32_t i = 0; i < rows; i++)
        want[i] =
            std::max<int64_t>(1, std::min<int64_t>((int64_t)(len[i] * scale + 0.5), (int64_t)cap));
    // popularity CDF over ranks, and a permutation rank -> column id
    std::vector<double> cdf(cols);
    double acc = 0;
    for (int32_t r = 0; r < cols; r++) {
        acc += beta > 0 ? pow(r + 10.0, -beta) : 1.0;
        cdf[r] = acc;
    }
    for (auto &c : cdf)
        c /= acc;
    std::vector<int32_t> perm(cols);
    for (int32_t j = 0; j < cols; j++)
        perm[j] = j;
    for (int32_t j = cols - 1; j > 0; j--)
        std::swap(perm[j], perm[mix(seed + 77 + j) % (uint64_t)(j + 1)]);
    std::vector<std::vector<int32_t>> per(rows);
#pragma omp parallel for schedule(dynamic, 256)
    for (int32_t i = 0; i < rows; i++) {
        std::vector<int32_t> &r = per[i];
        r.resize(want[i]);
        for (int64_t t = 0; t < want[i]; t++) {
            double u = unit(seed ^ 0x5bd1e995ull, ((uint64_t)i << 24) ^ (uint64_t)t);
            int32_t rank = (int32_t)(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
            r[t] = perm[std::min(rank, cols - 1)];
        }
        std::sort(r.begin(), r.end());
        r.erase(std::unique(r.begin(), r.end()), r.end());
    }
    m.ptr.assign(rows + 1, 0);
    for (int32_t i = 0; i < rows; i++)
        m.ptr[i + 1] = m.ptr[i] + (int64_t)per[i].size();
    m.col.resize(m.ptr[rows]);
#pragma omp parallel for schedule(dynamic, 256)
    for (int32_t i = 0; i < rows; i++)
        std::copy(per[i].begin(), per[i].end(), m.col.begin() + m.ptr[i]);
    return m;
}

// m's transpose (columns become rows, each row's columns ascending).
static csr transposed(const csr &m)
{
    csr t;
    t.rows = m.cols;
    t.cols = m.rows;
    t.ptr.assign((size_t)m.cols + 1, 0);
    for (int32_t j : m.col)
        t.ptr[(size_t)j + 1]++;
    for (int32_t j = 0; j < m.cols; j++)
        t.ptr[j + 1] += t.ptr[j];
    t.col.resize(m.col.size());
    std::vector<int64_t> next(t.ptr.begin(), t.ptr.end() - 1);
    for (int32_t i = 0; i < m.rows; i++)
        for (int64_t p = m.ptr[i]; p < m.ptr[i + 1]; p++)
            t.col[next[m.col[p]]++] = i;
    return t;
}

static csr from_file(mf_ctx *ctx, const char *path)
{
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.flags |= MF_SPARSE_PATTERN | MF_SPARSE_SUM_DUPLICATES; // positions only, repeats merged
    const char *dot = strrchr(path, '.');
    if (dot && !strcmp(dot, ".txt")) // SNAP edge lists with a "nodes edges" first line
        o.format = MF_FORMAT_PAIRS;
    mf_sparse *s = NULL;
    MF_CHECK(ctx, mf_sparse_read(ctx, &s, path, &o));
    csr m;
    int64_t nnz;
    mf_sparse_shape(s, &m.rows, &m.cols, &nnz);
    m.ptr.resize(m.rows + 1);
    m.col.resize(nnz);
    MF_CHECK(ctx, mf_sparse_get_csr(s, m.ptr.data(), m.col.data(), NULL, MF_MEMORY_HOST));
    mf_sparse_destroy(s);
    return m;
}

// ---- measurement -------------------------------------------------------------------------

static char last_plan[512];
static double tc_plan_ms = -1; // the tensor-core plan's build time, from the library's log
static int verbose;
static void capture_log(void *, mf_log_level, const char *msg)
{
    if (verbose)
        fprintf(stderr, "  [mfact] %s\n", msg);
    if (strstr(msg, "plan for k"))
        snprintf(last_plan, sizeof last_plan, "%s", msg);
    const char *built = strstr(msg, "tensor-core plan") ? strstr(msg, "built in ") : NULL;
    if (built) {
        tc_plan_ms = atof(built + 9);
        if (!verbose)
            fprintf(stderr, "  [mfact] %s\n", msg);
    }
}

// bf16 and fp16 run on the CUDA cores, the float kernel's tuned variant reading 16-bit
// copies (the library's default above 200,000 entries); "-tc" forces the tensor-core kernel,
// "-cc" the CUDA cores (MFACT_SDDMM_HALF, set per call).
static const struct {
    const char *name;
    mf_precision p;
    const char *half; // MFACT_SDDMM_HALF for the call (NULL: unset)
} precisions[] = {{"fp32", MF_PRECISION_FP32, NULL},
                  {"3xtf32", MF_PRECISION_3XTF32, NULL},
                  {"tf32", MF_PRECISION_TF32, NULL},
                  {"bf16", MF_PRECISION_BF16, NULL},
                  {"fp16", MF_PRECISION_FP16, NULL},
                  {"bf16-tc", MF_PRECISION_BF16, "tensor-cores"},
                  {"fp16-tc", MF_PRECISION_FP16, "tensor-cores"},
                  {"tf32-tc", MF_PRECISION_TF32, "tensor-cores"},
                  {"3xtf32-tc", MF_PRECISION_3XTF32, "tensor-cores"},
                  {"bf16-cc", MF_PRECISION_BF16, "cuda-cores"},
                  {"fp16-cc", MF_PRECISION_FP16, "cuda-cores"},
                  {"tf32-cc", MF_PRECISION_TF32, "cuda-cores"}};

// The header's bound for the precision (mfact.h, mf_precision), relative to sum |a_t b_t|.
static double precision_bound(mf_precision p, int k)
{
    const double u = ldexp(1.0, -24);
    switch (p) {
    case MF_PRECISION_3XTF32: return (4.0 * k + 16.0) * u;
    case MF_PRECISION_TF32:
    case MF_PRECISION_FP16: return ldexp(1.0, -10) + ldexp(1.0, -22) + 2.0 * k * u;
    case MF_PRECISION_BF16: return ldexp(1.0, -7) + ldexp(1.0, -16) + 2.0 * k * u;
    default: return 2.0 * k * u;
    }
}

// The arithmetic ceiling of precision p on this device in GFLOP/s (dense, per-SM rates of the
// A100 and H100 whitepapers: fp32 on the CUDA cores, the others on the tensor cores, 3xTF32
// three TF32 products per product), or 0 where the per-SM rates are not known here.
static double arith_peak_gflops(const mf_device_info &info, mf_precision p)
{
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, info.device) != cudaSuccess)
        return 0;
    double fp32, tf32; // flops per clock per SM; bf16 and fp16 run at twice TF32's rate
    if (info.compute_major == 9 && info.compute_minor == 0) {
        fp32 = 256;
        tf32 = 2048;
    } else if (info.compute_major == 8 && info.compute_minor == 0) {
        fp32 = 128;
        tf32 = 1024;
    } else {
        return 0;
    }
    double per_sm = p == MF_PRECISION_FP32     ? fp32
                    : p == MF_PRECISION_TF32   ? tf32
                    : p == MF_PRECISION_3XTF32 ? tf32 / 3
                                               : 2 * tf32;
    return per_sm * info.multiprocessors * khz * 1e3 / 1e9;
}

static float median(std::vector<float> v)
{
    return bench_median(v);
}

struct row {
    char name[64];
    int k;
    int64_t nnz;
    int precision; // index into precisions[]
    float mf_ms, sp_ms, first_ms;
    double floor_ms, err, rms_err; // err: the largest |got - exact| / sum |a b| sampled
    char plan[160];
};

// The sampled entries' error relative to sum_t |a_t b_t|: the largest, and the root mean
// square; exits when one passes `bound`.
static void check_sample(const char *what, const csr &m, int k, const float *A, const float *B,
                         const std::vector<float> &got, double bound, double *worst_out,
                         double *rms_out)
{
    int64_t nnz = m.nnz();
    int64_t samples = std::min<int64_t>(nnz, 20000);
    double worst = 0, sq = 0;
    for (int64_t s = 0; s < samples; s++) {
        int64_t p = (int64_t)(mix(0xabcdef + s) % (uint64_t)nnz);
        int32_t i = (int32_t)(std::upper_bound(m.ptr.begin(), m.ptr.end(), p) - m.ptr.begin() - 1);
        double d = 0, mag = 0;
        for (int t = 0; t < k; t++) {
            double x = (double)A[(int64_t)i * k + t] * B[(int64_t)m.col[p] * k + t];
            d += x;
            mag += fabs(x);
        }
        double err = mag > 0 ? fabs(got[p] - d) / mag : fabs(got[p] - d);
        worst = std::max(worst, err);
        sq += err * err;
        if (!(err <= bound)) {
            fprintf(stderr, "%s: entry %lld = %.9g, float64 %.9g: beyond the error bound\n", what,
                    (long long)p, (double)got[p], d);
            exit(1);
        }
    }
    *worst_out = worst;
    *rms_out = sqrt(sq / (double)(samples > 0 ? samples : 1));
}

// The peer's view of one case: S's pattern on the device in 32-bit CSR, C over it (values
// in `out`), A (rows x k, row-major) and B given as k x cols column-major, which is the same
// memory as cols x k row-major.
struct sp_operands {
    int32_t *ptr32 = nullptr, *col = nullptr;
    cusparseSpMatDescr_t C;
    cusparseDnMatDescr_t dA, dB;
    sp_operands(const csr &m, int k, float *A, float *B, float *out)
    {
        const int64_t nnz = m.nnz();
        CUDA_CHECK(cudaMalloc(&ptr32, ((size_t)m.rows + 1) * 4));
        CUDA_CHECK(cudaMalloc(&col, (size_t)nnz * 4));
        std::vector<int32_t> p32(m.ptr.begin(), m.ptr.end());
        CUDA_CHECK(cudaMemcpy(ptr32, p32.data(), p32.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(col, m.col.data(), (size_t)nnz * 4, cudaMemcpyHostToDevice));
        SP_CHECK(cusparseCreateCsr(&C, m.rows, m.cols, nnz, ptr32, col, out, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
        SP_CHECK(cusparseCreateDnMat(&dA, m.rows, k, k, A, CUDA_R_32F, CUSPARSE_ORDER_ROW));
        SP_CHECK(cusparseCreateDnMat(&dB, k, m.cols, k, B, CUDA_R_32F, CUSPARSE_ORDER_COL));
    }
    ~sp_operands()
    {
        cusparseDestroySpMat(C);
        cusparseDestroyDnMat(dA);
        cusparseDestroyDnMat(dB);
        CUDA_CHECK(cudaFree(ptr32));
        CUDA_CHECK(cudaFree(col));
    }
};

// --factors normal: N(0, 1/4) values, Box-Muller on two 32-bit uniforms from mix(key ^ i),
// so that magnitudes reach about 2^-30 of the largest as continuous data does.
static int factors_normal;
__global__ void fill_normal(float *x, int64_t n, uint64_t key)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t z = mix(key ^ (uint64_t)i);
        const double u1 = ((double)(uint32_t)(z >> 32) + 1.0) * 0x1p-32; // (0, 1]
        const double u2 = (double)(uint32_t)z * 0x1p-32;
        x[i] = (float)(0.5 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

static void fill_factor(mf_ctx *ctx, float *x, int64_t n, uint64_t seed, uint64_t stream)
{
    if (factors_normal) {
        fill_normal<<<1024, 256, 0, (cudaStream_t)mf_ctx_stream(ctx)>>>(x, n, mix(seed + stream));
        CUDA_CHECK(cudaGetLastError());
    } else {
        MF_CHECK(ctx, mf_random_uniform(ctx, x, n, -1, 1, seed, stream, MF_MEMORY_DEVICE));
    }
}

// Milliseconds of fn's work on stream st, between two events.
struct event_timer {
    cudaStream_t st;
    cudaEvent_t e0, e1;
    explicit event_timer(cudaStream_t s) : st(s)
    {
        CUDA_CHECK(cudaEventCreate(&e0));
        CUDA_CHECK(cudaEventCreate(&e1));
    }
    ~event_timer()
    {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    template <class F> float operator()(F fn)
    {
        float ms;
        CUDA_CHECK(cudaEventRecord(e0, st));
        fn();
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        return ms;
    }
};

// One case at one k: cuSPARSE and every precision asked for, on the same inputs, S (created
// once per matrix, so that its tensor-core plan serves every k) used as a pattern.
static std::vector<row> run_case(mf_ctx *ctx, cusparseHandle_t sp, const char *name, const csr &m,
                                 mf_sparse *S, int k, const std::vector<int> &precs, int repeat,
                                 uint64_t seed, double bandwidth, float beta)
{
    cudaStream_t st = (cudaStream_t)mf_ctx_stream(ctx);
    int64_t nnz = m.nnz();
    float *A, *B, *out_sp;
    std::vector<float *> out_mf(precs.size());
    CUDA_CHECK(cudaMalloc(&A, (size_t)m.rows * k * 4));
    CUDA_CHECK(cudaMalloc(&B, (size_t)m.cols * k * 4));
    for (auto &o : out_mf)
        CUDA_CHECK(cudaMalloc(&o, (size_t)nnz * 4));
    CUDA_CHECK(cudaMalloc(&out_sp, (size_t)nnz * 4));
    // cuSPARSE: C (CSR pattern) = A B^T
    sp_operands op(m, k, A, B, out_sp);
    CUDA_CHECK(cudaDeviceSynchronize()); // mfact's stream does not wait for the legacy one
    fill_factor(ctx, A, (int64_t)m.rows * k, seed, 1);
    fill_factor(ctx, B, (int64_t)m.cols * k, seed, 2);
    cusparseSpMatDescr_t C = op.C;
    cusparseDnMatDescr_t dA = op.dA, dB = op.dB;
    float one = 1.f, zero = 0.f;
    size_t bytes = 0;
    SP_CHECK(cusparseSetStream(sp, st));
    SP_CHECK(cusparseSDDMM_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, &one, dA, dB, &zero, C,
                                      CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes));
    void *work = NULL;
    CUDA_CHECK(cudaMalloc(&work, bytes ? bytes : 16));
    SP_CHECK(cusparseSDDMM_preprocess(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, &one, dA, dB, &zero, C,
                                      CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, work));
    // b: beta, 0 in the checked warm-up, the --beta value in the timed runs (both sides)
    auto run_sp = [&](float b) {
        SP_CHECK(cusparseSDDMM(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                               CUSPARSE_OPERATION_NON_TRANSPOSE, &one, dA, dB, &b, C, CUDA_R_32F,
                               CUSPARSE_SDDMM_ALG_DEFAULT, work));
    };
    // The knob of precision i, set outside the timed region.
    auto select = [&](size_t i) {
        if (precisions[precs[i]].half)
            setenv("MFACT_SDDMM_HALF", precisions[precs[i]].half, 1);
        else
            unsetenv("MFACT_SDDMM_HALF");
    };
    auto run_mf = [&](size_t i, float b) {
        MF_CHECK(ctx, mf_sddmm_ex(ctx, S, k, A, k, B, k, 1.f, b, out_mf[i], MF_MEMORY_DEVICE,
                                  MF_SDDMM_PATTERN, precisions[precs[i]].p));
    };
    event_timer timed(st);
    // Warm-up: each precision's first call (its plan built here, timed on the host since
    // the plan is built there), then check every result against float64.
    std::vector<row> rows(precs.size());
    run_sp(0.f);
    for (size_t i = 0; i < precs.size(); i++) {
        row &r = rows[i];
        snprintf(r.name, sizeof r.name, "%s", name);
        r.k = k;
        r.nnz = nnz;
        r.precision = precs[i];
        last_plan[0] = 0;
        tc_plan_ms = -1;
        select(i);
        CUDA_CHECK(cudaStreamSynchronize(st));
        auto t0 = std::chrono::steady_clock::now();
        run_mf(i, 0.f);
        CUDA_CHECK(cudaStreamSynchronize(st));
        r.first_ms =
            std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (last_plan[0]) { // a route through the float kernel: the variant picked
            // "mf_sddmm: plan for k = K: <plan>": keep <plan>.
            const char *plan = strstr(last_plan, "plan for k");
            plan = plan ? strstr(plan, ": ") : NULL;
            snprintf(r.plan, sizeof r.plan, "%s%s",
                     precisions[precs[i]].p == MF_PRECISION_FP32 ? "" : "CUDA cores, ",
                     plan ? plan + 2 : "?");
        } else if (!precisions[precs[i]].half) {
            snprintf(r.plan, sizeof r.plan, "cached");
        } else if (tc_plan_ms >= 0) {
            snprintf(r.plan, sizeof r.plan, "forced %s, plan built in %.1f ms",
                     precisions[precs[i]].half, tc_plan_ms);
        } else {
            snprintf(r.plan, sizeof r.plan, "forced %s, plan cached", precisions[precs[i]].half);
        }
    }
    double sp_err, sp_rms;
    {
        std::vector<float> hA((size_t)m.rows * k), hB((size_t)m.cols * k), got(nnz);
        CUDA_CHECK(cudaMemcpy(hA.data(), A, hA.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hB.data(), B, hB.size() * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < precs.size(); i++) {
            CUDA_CHECK(cudaMemcpy(got.data(), out_mf[i], (size_t)nnz * 4, cudaMemcpyDeviceToHost));
            char what[64];
            snprintf(what, sizeof what, "mfact %s", precisions[precs[i]].name);
            check_sample(what, m, k, hA.data(), hB.data(), got,
                         precision_bound(precisions[precs[i]].p, k), &rows[i].err,
                         &rows[i].rms_err);
        }
        CUDA_CHECK(cudaMemcpy(got.data(), out_sp, (size_t)nnz * 4, cudaMemcpyDeviceToHost));
        check_sample("cuSPARSE", m, k, hA.data(), hB.data(), got,
                     precision_bound(MF_PRECISION_FP32, k), &sp_err, &sp_rms);
    }
    std::vector<float> t_sp;
    std::vector<std::vector<float>> t_mf(precs.size());
    for (int rep = 0; rep < repeat; rep++) { // interleaved, so clocks and caches treat all alike
        t_sp.push_back(timed([&] { run_sp(beta); }));
        for (size_t i = 0; i < precs.size(); i++) {
            select(i);
            t_mf[i].push_back(timed([&] { run_mf(i, beta); }));
        }
    }
    // beta != 0 reads out once more
    double traffic = (double)nnz * (beta != 0.f ? 12 : 8) + (double)(m.rows + 1) * 8 +
                     ((double)m.rows + m.cols) * k * 4;
    for (size_t i = 0; i < precs.size(); i++) {
        rows[i].mf_ms = median(t_mf[i]);
        rows[i].sp_ms = median(t_sp);
        rows[i].floor_ms = traffic / bandwidth * 1e3;
    }
    printf("%-22s %5d %11lld %-7s %10s %10.3f %9s %8s %9s %10.2e %10.2e\n", name, k, (long long)nnz,
           "cuSP", "", median(t_sp), "", "", "", sp_err, sp_rms);

    CUDA_CHECK(cudaFree(work));
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(B));
    for (auto o : out_mf)
        CUDA_CHECK(cudaFree(o));
    CUDA_CHECK(cudaFree(out_sp));
    return rows;
}

// ---- evaluations: RMSE and predictions ------------------------------------------------------

#define BLAS_CHECK(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)s_);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// The --rmse rows of one case and k: mfact's RMSE and predictions at fp32, bf16 and fp16
// against the peers' pipeline on the same inputs, interleaved, medians of `repeat` runs.
static void run_eval(mf_ctx *ctx, cusparseHandle_t sp, cublasHandle_t blas, const char *name,
                     const csr &m, mf_sparse *S, int k, int repeat, uint64_t seed)
{
    cudaStream_t st = (cudaStream_t)mf_ctx_stream(ctx);
    unsetenv("MFACT_SDDMM_HALF"); // the library's own route (a -tc row above forced it)
    const int64_t nnz = m.nnz();
    float *A, *B, *ones, *out_sp, *out_mf;
    CUDA_CHECK(cudaMalloc(&A, (size_t)m.rows * k * 4));
    CUDA_CHECK(cudaMalloc(&B, (size_t)m.cols * k * 4));
    CUDA_CHECK(cudaMalloc(&ones, (size_t)nnz * 4));
    CUDA_CHECK(cudaMalloc(&out_sp, (size_t)nnz * 4));
    CUDA_CHECK(cudaMalloc(&out_mf, (size_t)nnz * 4));
    sp_operands op(m, k, A, B, out_sp);
    std::vector<float> h1((size_t)nnz, 1.0f); // S is a pattern: its ratings count as 1
    CUDA_CHECK(cudaMemcpy(ones, h1.data(), (size_t)nnz * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    // Factors scaled so that predictions sit near the ratings (an RMSE of order 1).
    const float a = (float)sqrt(3.0 / k);
    MF_CHECK(ctx, mf_random_uniform(ctx, A, (int64_t)m.rows * k, 0, a, seed, 3, MF_MEMORY_DEVICE));
    MF_CHECK(ctx, mf_random_uniform(ctx, B, (int64_t)m.cols * k, 0, a, seed, 4, MF_MEMORY_DEVICE));

    cusparseSpMatDescr_t C = op.C;
    cusparseDnMatDescr_t dA = op.dA, dB = op.dB;
    const float minus = -1.f, one = 1.f, zero = 0.f;
    size_t bytes = 0;
    SP_CHECK(cusparseSetStream(sp, st));
    BLAS_CHECK(cublasSetStream(blas, st));
    SP_CHECK(cusparseSDDMM_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, &minus, dA, dB, &one, C,
                                      CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes));
    void *work = NULL;
    CUDA_CHECK(cudaMalloc(&work, bytes ? bytes : 16));
    SP_CHECK(cusparseSDDMM_preprocess(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, &minus, dA, dB, &one, C,
                                      CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, work));
    double peer_rmse = 0;
    auto peer_rmse_run = [&] { // residuals r - A B^T in C's values, then their norm
        CUDA_CHECK(cudaMemcpyAsync(out_sp, ones, (size_t)nnz * 4, cudaMemcpyDeviceToDevice, st));
        SP_CHECK(cusparseSDDMM(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                               CUSPARSE_OPERATION_NON_TRANSPOSE, &minus, dA, dB, &one, C,
                               CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, work));
        float norm = 0;
        BLAS_CHECK(cublasSnrm2(blas, (int)nnz, out_sp, 1, &norm)); // host result: waits
        peer_rmse = norm / sqrt((double)nnz);
    };
    auto peer_predict = [&] {
        SP_CHECK(cusparseSDDMM(sp, CUSPARSE_OPERATION_NON_TRANSPOSE,
                               CUSPARSE_OPERATION_NON_TRANSPOSE, &one, dA, dB, &zero, C, CUDA_R_32F,
                               CUSPARSE_SDDMM_ALG_DEFAULT, work));
    };
    static const mf_precision evals[] = {MF_PRECISION_FP32, MF_PRECISION_BF16, MF_PRECISION_FP16};
    static const char *const eval_names[] = {"fp32", "bf16", "fp16"};
    double got[3] = {0, 0, 0};
    mf_model model;
    mf_model_init(&model);
    model.users = m.rows, model.items = m.cols, model.k = k;
    model.U = A, model.ldu = k, model.V = B, model.ldv = k, model.where = MF_MEMORY_DEVICE;
    auto mf_rmse_run = [&](int e) {
        MF_CHECK(ctx, mf_rmse_ex(ctx, S, k, A, k, B, k, MF_MEMORY_DEVICE, evals[e], &got[e]));
    };
    auto mf_predict_run = [&](int e) {
        model.precision = evals[e];
        MF_CHECK(ctx, mf_predict(ctx, &model, S, out_mf));
    };
    event_timer timed(st);
    peer_rmse_run(); // warm-up; each precision's first call makes its plan or timed choice
    peer_predict();
    for (int e = 0; e < 3; e++)
        mf_rmse_run(e), mf_predict_run(e);
    std::vector<float> t_peer_rmse, t_peer_pred, t_rmse[3], t_pred[3];
    for (int rep = 0; rep < repeat; rep++) {
        t_peer_rmse.push_back(timed(peer_rmse_run));
        t_peer_pred.push_back(timed(peer_predict));
        for (int e = 0; e < 3; e++) {
            t_rmse[e].push_back(timed([&] { mf_rmse_run(e); }));
            t_pred[e].push_back(timed([&] { mf_predict_run(e); }));
        }
    }
    const float pr = median(t_peer_rmse), pp = median(t_peer_pred);
    const float r32 = median(t_rmse[0]), p32_ms = median(t_pred[0]);
    printf("%-22s %5d %11lld %-10s %10.3f %10.3f %8.2fx %9s %12.4f  cuSPARSE SDDMM + cublasSnrm2\n",
           name, k, (long long)nnz, "rmse-peer", pr, pr, 1.0, "", peer_rmse);
    for (int e = 0; e < 3; e++) {
        const float t = median(t_rmse[e]);
        printf("%-22s %5d %11lld rmse-%-5s %10.3f %10.3f %8.2fx %8.2fx %12.4f  rel diff %.2e\n",
               name, k, (long long)nnz, eval_names[e], t, pr, pr / t, r32 / t, got[e],
               fabs(got[e] - peer_rmse) / peer_rmse);
    }
    for (int e = 0; e < 3; e++) {
        const float t = median(t_pred[e]);
        printf("%-22s %5d %11lld pred-%-5s %10.3f %10.3f %8.2fx %8.2fx %12s  vs cuSPARSE SDDMM\n",
               name, k, (long long)nnz, eval_names[e], t, pp, pp / t, p32_ms / t, "");
    }
    fflush(stdout);
    for (void *p :
         {(void *)work, (void *)A, (void *)B, (void *)ones, (void *)out_sp, (void *)out_mf})
        CUDA_CHECK(cudaFree(p));
}

// --shape NAME,ROWS,COLS,MEAN,ALPHA,ZIPF[,MAXFRAC]: the generator at another shape. Whether
// s is one (into *g when given).
struct gen_shape {
    char name[64];
    int rows, cols;
    double mean, alpha, zipf, max_frac;
};
static bool parse_shape(const char *s, gen_shape *g)
{
    gen_shape t = {"", 0, 0, 0.0, 0.0, 0.0, 1.0};
    int got = sscanf(s, "%63[^,],%d,%d,%lf,%lf,%lf,%lf", t.name, &t.rows, &t.cols, &t.mean,
                     &t.alpha, &t.zipf, &t.max_frac);
    if (got < 6 || t.rows < 1 || t.cols < 1 || !(t.mean > 0) || !(t.max_frac > 0))
        return false;
    if (g)
        *g = t;
    return true;
}

int main(int argc, char **argv)
{
    const char *cases = "netflix,nytimes,uniform";
    std::vector<int> ks = {32, 128, 512};
    std::vector<const char *> graphs, shapes;
    int repeat = 10;
    std::vector<int> precs = {0, 1, 2, 3, 4, 5, 6};
    double scale = 1.0;
    uint64_t seed = 2026;
    int eval = 0;      // --rmse
    float beta = 0.f;  // --beta: the timed runs' beta (out = A B^T + beta out), both sides
    int transpose = 0; // --transpose
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            cases = argv[++i];
        else if (!strcmp(argv[i], "--k") && i + 1 < argc)
            ks = arg_ints("--k", argv[++i], 1);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = arg_int("--repeat", argv[++i], 1);
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
            scale = arg_number("--scale", argv[++i], 0.0, true);
        else if (!strcmp(argv[i], "--precisions") && i + 1 < argc) {
            // comma-separated names, each exactly (tf32 is not 3xtf32); an unknown one fails
            const int n = (int)(sizeof precisions / sizeof *precisions);
            const char *names[n];
            for (int p = 0; p < n; p++)
                names[p] = precisions[p].name;
            precs = arg_choices("--precisions", argv[++i], names, n);
        } else if (!strcmp(argv[i], "--graph") && i + 1 < argc)
            graphs.push_back(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
            shapes.push_back(argv[++i]);
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--beta") && i + 1 < argc)
            beta = (float)arg_number("--beta", argv[++i], -HUGE_VAL);
        else if (!strcmp(argv[i], "--rmse"))
            eval = 1;
        else if (!strcmp(argv[i], "--transpose"))
            transpose = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = arg_seed("--seed", argv[++i]);
        else if (!strcmp(argv[i], "--factors") && i + 1 < argc) {
            const char *f = argv[++i];
            if (strcmp(f, "uniform") && strcmp(f, "normal")) {
                fprintf(stderr, "--factors %s: uniform or normal\n", f);
                return 2;
            }
            factors_normal = !strcmp(f, "normal");
        } else if (!strcmp(argv[i], "--tc-order") && i + 1 < argc)
            setenv("MFACT_SDDMM_TC_ORDER", argv[++i], 1); // read when a matrix's plan is built
        else {
            fprintf(stderr,
                    "usage: %s [--cases netflix,nytimes,uniform] [--k 32,128,512] "
                    "[--precisions "
                    "fp32,3xtf32,tf32,bf16,fp16,bf16-tc,fp16-tc,tf32-tc,3xtf32-tc,bf16-cc,"
                    "fp16-cc,tf32-cc] "
                    "[--repeat N] "
                    "[--scale F] "
                    "[--graph FILE]... [--seed S] [--tc-order natural|length-minhash|minhash|auto] "
                    "[--verbose] [--rmse] [--beta B] "
                    "[--shape NAME,ROWS,COLS,MEAN,ALPHA,ZIPF[,MAXFRAC]]... "
                    "[--factors uniform|normal] [--transpose]\n",
                    argv[0]);
            return 2;
        }
    }
    // The settings, checked before anything runs: a typo must not measure something else.
    const char *case_names[] = {"netflix", "nytimes", "uniform", "none"}; // built-in, or none
    arg_choices("--cases", cases, case_names, 4);
    for (const char *sh : shapes)
        if (!parse_shape(sh, NULL)) {
            fprintf(stderr, "--shape %s: want NAME,ROWS,COLS,MEAN,ALPHA,ZIPF[,MAXFRAC]\n", sh);
            return 2;
        }

    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    o.log = capture_log;
    o.log_level = verbose ? MF_LOG_DEBUG : MF_LOG_INFO;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &o) != MF_OK) {
        fprintf(stderr, "bench_sddmm needs a CUDA device: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_device_info info = {};
    info.struct_size = sizeof info;
    mf_ctx_device_info(ctx, &info);
    cusparseHandle_t sp;
    SP_CHECK(cusparseCreate(&sp));
    cublasHandle_t blas;
    BLAS_CHECK(cublasCreate(&blas));
    double bw = bench_copy_bandwidth((cudaStream_t)mf_ctx_stream(ctx));
    printf("device: %s, copy bandwidth %.0f GB/s, %s\n", info.name, bw / 1e9, mf_version_string());
    printf("times: median of %d interleaved runs at beta = %g; preparation (cuSPARSE preprocess, "
           "mfact plan) excluded from both\n\n",
           repeat, (double)beta);

    struct spec {
        const char *name;
        int32_t rows, cols;
        double mean, alpha, beta, max_frac;
    } specs[] = {
        {"netflix", 480189, 17770, 200.0, 1.5, 1.0, 0.5},
        {"nytimes", 300000, 102660, 232.0, 2.5, 1.0, 0.1},
        {"uniform", 100000, 100000, 100.0, 0.0, 0.0, 1.0},
    };
    std::vector<std::pair<std::string, csr>> mats;
    for (auto &sp_ : specs)
        if (strstr(cases, sp_.name)) {
            int32_t rows = (int32_t)(sp_.rows * scale);
            csr m = power_law(rows, sp_.cols, sp_.mean, sp_.alpha, sp_.beta, sp_.max_frac, seed);
            mats.push_back({sp_.name, std::move(m)});
        }
    for (const char *s : shapes) { // the generator at another shape (checked above)
        gen_shape g;
        parse_shape(s, &g);
        mats.push_back({g.name, power_law((int32_t)(g.rows * scale), g.cols, g.mean, g.alpha,
                                          g.zipf, g.max_frac, seed)});
    }
    for (const char *g : graphs) {
        const char *base = strrchr(g, '/');
        mats.push_back({base ? base + 1 : g, from_file(ctx, g)});
    }
    if (transpose)
        for (size_t i = 0, n = mats.size(); i < n; i++)
            mats.push_back({mats[i].first + "^T", transposed(mats[i].second)});

    printf("%-22s %5s %11s %-7s %10s %10s %9s %7s %8s %9s %10s %10s %9s  %s\n", "case", "k", "nnz",
           "prec", "mfact ms", "cuSP ms", "GFLOP/s", "% peak", "speedup", "x floor", "max err",
           "rms err", "first ms", "plan");
    printf("(errors: |got - float64| / sum_t |a_t b_t| over 20000 sampled entries; first ms: "
           "the first call, its plan included)\n");
    const int np = (int)(sizeof precisions / sizeof *precisions);
    std::vector<double> log_sum(np, 0.0);
    std::vector<int> n_main(np, 0);
    for (auto &nm : mats) {
        const csr &m = nm.second;
        mf_sparse *S = NULL;
        MF_CHECK(ctx, mf_sparse_from_csr(ctx, &S, m.rows, m.cols, m.nnz(), m.ptr.data(),
                                         m.col.data(), NULL, MF_MEMORY_HOST, 0));
        for (int k : ks) {
            std::vector<row> rows =
                run_case(ctx, sp, nm.first.c_str(), m, S, k, precs, repeat, seed + k, bw, beta);
            for (const row &r : rows) {
                double gflops = 2.0 * k * r.nnz / (r.mf_ms * 1e-3) / 1e9;
                double peak = arith_peak_gflops(info, precisions[r.precision].p);
                char pct[16] = "-";
                if (peak > 0)
                    snprintf(pct, sizeof pct, "%.1f", 100.0 * gflops / peak);
                printf("%-22s %5d %11lld %-7s %10.3f %10.3f %9.0f %7s %7.2fx %9.2f %10.2e %10.2e "
                       "%9.1f  %s\n",
                       r.name, k, (long long)r.nnz, precisions[r.precision].name, r.mf_ms, r.sp_ms,
                       gflops, pct, r.sp_ms / r.mf_ms, r.mf_ms / r.floor_ms, r.err, r.rms_err,
                       r.first_ms, r.plan);
                if (nm.first == "netflix" || nm.first == "nytimes") {
                    log_sum[r.precision] += log(r.sp_ms / r.mf_ms);
                    n_main[r.precision]++;
                }
            }
            fflush(stdout);
            if (eval) {
                printf("%-22s %5s %11s %-10s %10s %10s %9s %9s %12s\n", "", "k", "nnz", "eval",
                       "mfact ms", "peer ms", "speedup", "vs fp32", "rmse");
                run_eval(ctx, sp, blas, nm.first.c_str(), m, S, k, repeat, seed + k);
            }
        }
        mf_sparse_destroy(S);
    }
    for (int p = 0; p < np; p++)
        if (n_main[p])
            printf("%sgeometric-mean speed-up over cuSPARSE, Netflix and NYTimes cases, %s: %.2fx "
                   "(%d cases)\n",
                   p == precs[0] ? "\n" : "", precisions[p].name, exp(log_sum[p] / n_main[p]),
                   n_main[p]);
    cusparseDestroy(sp);
    cublasDestroy(blas);
    mf_ctx_destroy(ctx);
    return 0;
}
