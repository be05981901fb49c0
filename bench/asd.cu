// bench_asd: mf_asd_run (ASD and Scaled ASD) against the design of the CuPy write-up
// ("Implementing ASD for big data in CuPy"), built here in CUDA C++ and measured in the same
// run on the same data: a thread per observed entry for each sampled product (binary search
// for its row, a dot product over r with both factors stored r x lines), cuSPARSE SpMM for
// the gradients R Y and R^T X (the transpose as cuSPARSE's transpose operation on the CSR,
// as `R.T @ X` runs in CuPy), two sampled products per half step (the residual recomputed,
// then the direction's), the step length on the device.
//
// Data: the write-up's random test: planted factors A (M x R, columns scaled geometrically
// from 1 to 1/COND with a condition number) and B (N x R), standard normal (--uniform:
// uniform in [-1, 1), the case name then ends in " U"); each row
// observes a binomially distributed number of distinct uniform columns (DENSITY on
// average); values A_i . B_j.
//
// Per case and variant: ms per iteration (wall time between two synchronized iteration
// ends, median over the iterations of a fixed-length run: both sides read their residual
// back each iteration, as a stopping rule needs), iterations and seconds to relative residual
// --tol (mfact: the whole mf_asd_run call on a freshly made matrix, upload and transpose
// included; the peer: its iterations only), relative error against the planted matrix on
// 10^6 random entries, peak device memory, and mfact's ms per iteration over the
// compulsory-traffic floor: one pass over Ω's indices and values per half step, the
// offsets once, both factors read and the stepped one written once per half step, at the
// measured copy bandwidth.
//
// --precision fp32,bf16,fp16 (default fp32) adds a row per variant and precision
// (mf_asd_opts.precision): bf16 and fp16 start in the reduced phase (the gathered factor
// read from a 16-bit copy) and finish in float. Their ms per iteration are the reduced
// phase's (the fixed-length run's iterations before it ended); the last columns give the
// to-tolerance run's reduced iterations and fp32's ms per iteration and whole-call seconds
// over this row's (the same variant; "-" on fp32 rows or without an fp32 row).
//
// usage: bench_asd [--case M,N,R,DENSITY[,COND]]... [--tol T] [--timed N] [--runs N]
//                  [--peer-cap N] [--memory-limit-gb G] [--stagnation W] [--max-iterations N]
//                  [--seed S] [--rank-continuation] [--uniform] [--no-peer]
//                  [--precision fp32,bf16,fp16]
// A malformed number or case, an unknown precision, --tol <= 0, --timed, --runs, --peer-cap
// or --max-iterations below 1, a negative --stagnation or --memory-limit-gb (0: none) ends
// the program with status 2 before any device work (tests/tool/check-bench-args.sh).
#include <cusparse.h>
#include <math.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "bench_cusparse.h"
#include "bench_util.h"

static double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// ---- the data -------------------------------------------------------------------------------
struct problem {
    std::string name;
    int32_t m, n;
    int r;
    double density, cond;
    bool uniform; // factors uniform in [-1, 1) rather than standard normal
    std::vector<float> A, B;
    std::vector<int64_t> ptr;
    std::vector<int32_t> col;
    std::vector<float> val;
};

static double unit(uint64_t key)
{
    return ((mix(key) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double normal(uint64_t key)
{
    return sqrt(-2.0 * log(unit(key))) * cos(6.283185307179586 * unit(key ^ 0x5bd1e995ull));
}

static void generate(problem &p, uint64_t seed)
{
    const int r = p.r;
    p.A.resize((size_t)p.m * r);
    p.B.resize((size_t)p.n * r);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < (int64_t)p.m * r; i++) {
        const int t = (int)(i % r);
        const double s = p.cond > 1.0 && r > 1 ? pow(p.cond, -(double)t / (r - 1)) : 1.0;
        const uint64_t key = mix(seed) ^ (uint64_t)i;
        p.A[i] = (float)(s * (p.uniform ? 2.0 * unit(key) - 1.0 : normal(key)));
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < (int64_t)p.n * r; i++)
        p.B[i] = (float)(p.uniform ? 2.0 * unit(mix(seed + 1) ^ (uint64_t)i) - 1.0
                                   : normal(mix(seed + 1) ^ (uint64_t)i));
    // Row lengths: binomial(N, DENSITY) by its normal approximation (Poisson below a mean of
    // 30), then distinct uniform columns.
    const double mu = p.n * p.density;
    std::vector<int64_t> len(p.m);
#pragma omp parallel for schedule(static)
    for (int32_t i = 0; i < p.m; i++) {
        uint64_t key = mix(seed + 2) ^ (uint64_t)i;
        int64_t c;
        if (mu >= 30.0)
            c = llround(mu + sqrt(mu * (1.0 - p.density)) * normal(key));
        else {
            double L = exp(-mu), q = unit(key);
            c = 0;
            while (q > L)
                q *= unit(key + 1000003ull * (uint64_t)(++c));
        }
        len[i] = c < 0 ? 0 : c > p.n ? p.n : c;
    }
    p.ptr.assign((size_t)p.m + 1, 0);
    for (int32_t i = 0; i < p.m; i++)
        p.ptr[i + 1] = p.ptr[i] + len[i];
    p.col.resize(p.ptr[p.m]);
#pragma omp parallel for schedule(dynamic, 256)
    for (int32_t i = 0; i < p.m; i++) {
        int32_t *c = p.col.data() + p.ptr[i];
        const int64_t want = len[i];
        int64_t got = 0;
        for (uint64_t draw = 0; got < want; draw++) {
            int32_t j = (int32_t)(mix(mix(seed + 3) ^ ((uint64_t)i << 32) ^ draw) % (uint64_t)p.n);
            bool seen = false;
            for (int64_t u = 0; u < got && !seen; u++) // short rows; long rows sort below
                seen = want <= 64 && c[u] == j;
            if (!seen)
                c[got++] = j;
        }
        std::sort(c, c + want);
        len[i] = std::unique(c, c + want) - c; // long rows: duplicates merged
    }
    // Compact rows whose duplicates merged.
    int64_t out = 0;
    for (int32_t i = 0; i < p.m; i++) {
        const int64_t b = p.ptr[i];
        p.ptr[i] = out;
        for (int64_t u = 0; u < len[i]; u++)
            p.col[out++] = p.col[b + u];
    }
    p.ptr[p.m] = out;
    p.col.resize(out);
    p.val.resize(out);
#pragma omp parallel for schedule(dynamic, 256)
    for (int32_t i = 0; i < p.m; i++)
        for (int64_t q = p.ptr[i]; q < p.ptr[i + 1]; q++) {
            double d = 0.0;
            for (int t = 0; t < r; t++)
                d += (double)p.A[(size_t)i * r + t] * p.B[(size_t)p.col[q] * r + t];
            p.val[q] = (float)d;
        }
}

// |X Y^T - A B^T| / |A B^T| on 10^6 uniformly random entries, in double. X and Y are
// row-major lines x r with leading dimension ldx (the peer's are r x lines: transposed).
static double planted_error(const problem &p, const float *X, const float *Y, bool transposed)
{
    const int samples = 1000000, r = p.r;
    double num = 0.0, den = 0.0;
#pragma omp parallel for reduction(+ : num, den)
    for (int s = 0; s < samples; s++) {
        const int32_t i = (int32_t)(mix(0xe770ull ^ (uint64_t)s) % (uint64_t)p.m);
        const int32_t j = (int32_t)(mix(0xe771ull ^ (uint64_t)s) % (uint64_t)p.n);
        double a = 0.0, b = 0.0;
        for (int t = 0; t < r; t++) {
            a += transposed ? (double)X[(size_t)t * p.m + i] * Y[(size_t)t * p.n + j]
                            : (double)X[(size_t)i * r + t] * Y[(size_t)j * r + t];
            b += (double)p.A[(size_t)i * r + t] * p.B[(size_t)j * r + t];
        }
        num += (a - b) * (a - b), den += b * b;
    }
    return sqrt(num / den);
}

// ---- the peer: the write-up's design ----------------------------------------------------------
__global__ void peer_sddmm(int64_t nnz, const int *row_ptr, int m, const int *col, const float *Xt,
                           int ldx, const float *Yt, int ldy, int r, const float *M, float *out,
                           double *sumsq)
{
    double s = 0.0;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nnz;
         t += (int64_t)gridDim.x * blockDim.x) {
        int lo = 0, hi = m - 1; // the row of entry t
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (row_ptr[mid] <= t)
                lo = mid;
            else
                hi = mid - 1;
        }
        const int j = col[t];
        float d = 0.0f;
        for (int k = 0; k < r; k++)
            d += Xt[(int64_t)k * ldx + lo] * Yt[(int64_t)k * ldy + j];
        if (M)
            d -= M[t];
        out[t] = d;
        s += (double)d * d;
    }
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    if (threadIdx.x % 32 == 0 && s != 0.0)
        atomicAdd(sumsq, s);
}

__global__ void peer_sumsq(const float *x, int64_t n, double *out)
{
    double s = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        s += (double)x[i] * x[i];
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    if (threadIdx.x % 32 == 0 && s != 0.0)
        atomicAdd(out, s);
}

__global__ void peer_step(float *F, const float *G, int64_t n, const double *num, const double *den)
{
    const double t = *den > 0.0 ? *num / *den : 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        F[i] -= (float)t * G[i];
}

__global__ void peer_scale(float *F, int64_t n, float s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        F[i] *= s;
}

struct peer {
    int m, n, r;
    int64_t nnz;
    int *ptr, *col;
    float *M, *R, *q, *Xt, *Yt, *G;
    double *sums; // |R|^2, |G|^2, |q|^2
    cusparseHandle_t sp;
    cusparseSpMatDescr_t Rd;
    void *buf;
    double norm;
};

static unsigned grid_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 132 * 16 ? 132 * 16 : g);
}

static void peer_spmm(peer &P, bool transpose, const float *F, float *out)
{
    // out (lines x r, column-major) = op(R) F (F column-major: the r x lines storage).
    const int in_lines = transpose ? P.m : P.n, out_lines = transpose ? P.n : P.m;
    cusparseDnMatDescr_t Fd, Od;
    SP_CHECK(cusparseCreateDnMat(&Fd, in_lines, P.r, in_lines, (void *)F, CUDA_R_32F,
                                 CUSPARSE_ORDER_COL));
    SP_CHECK(
        cusparseCreateDnMat(&Od, out_lines, P.r, out_lines, out, CUDA_R_32F, CUSPARSE_ORDER_COL));
    const float one = 1.0f, zero = 0.0f;
    SP_CHECK(cusparseSpMM(
        P.sp, transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE,
        CUSPARSE_OPERATION_NON_TRANSPOSE, &one, P.Rd, Fd, &zero, Od, CUDA_R_32F,
        CUSPARSE_SPMM_ALG_DEFAULT, P.buf));
    SP_CHECK(cusparseDestroyDnMat(Fd));
    SP_CHECK(cusparseDestroyDnMat(Od));
}

static void peer_setup(peer &P, const problem &p, uint64_t seed)
{
    P.m = p.m, P.n = p.n, P.r = p.r, P.nnz = (int64_t)p.col.size();
    std::vector<int> ptr32(p.ptr.begin(), p.ptr.end());
    CUDA_CHECK(cudaMalloc(&P.ptr, ptr32.size() * 4));
    CUDA_CHECK(cudaMalloc(&P.col, P.nnz * 4));
    CUDA_CHECK(cudaMalloc(&P.M, P.nnz * 4));
    CUDA_CHECK(cudaMalloc(&P.R, P.nnz * 4));
    CUDA_CHECK(cudaMalloc(&P.q, P.nnz * 4));
    CUDA_CHECK(cudaMalloc(&P.Xt, (size_t)P.m * P.r * 4));
    CUDA_CHECK(cudaMalloc(&P.Yt, (size_t)P.n * P.r * 4));
    CUDA_CHECK(cudaMalloc(&P.G, (size_t)std::max(P.m, P.n) * P.r * 4));
    CUDA_CHECK(cudaMalloc(&P.sums, 3 * sizeof(double)));
    CUDA_CHECK(cudaMemcpy(P.ptr, ptr32.data(), ptr32.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(P.col, p.col.data(), P.nnz * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(P.M, p.val.data(), P.nnz * 4, cudaMemcpyHostToDevice));
    double norm2 = 0.0;
    for (float v : p.val)
        norm2 += (double)v * v;
    P.norm = sqrt(norm2);
    SP_CHECK(cusparseCreate(&P.sp));
    SP_CHECK(cusparseCreateCsr(&P.Rd, P.m, P.n, P.nnz, P.ptr, P.col, P.R, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    // One buffer for both operations.
    size_t most = 0;
    for (int t = 0; t < 2; t++) {
        cusparseDnMatDescr_t Fd, Od;
        const int in_lines = t ? P.m : P.n, out_lines = t ? P.n : P.m;
        SP_CHECK(
            cusparseCreateDnMat(&Fd, in_lines, P.r, in_lines, P.G, CUDA_R_32F, CUSPARSE_ORDER_COL));
        SP_CHECK(cusparseCreateDnMat(&Od, out_lines, P.r, out_lines, P.G, CUDA_R_32F,
                                     CUSPARSE_ORDER_COL));
        const float one = 1.0f, zero = 0.0f;
        size_t b = 0;
        SP_CHECK(cusparseSpMM_bufferSize(
            P.sp, t ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE,
            CUSPARSE_OPERATION_NON_TRANSPOSE, &one, P.Rd, Fd, &zero, Od, CUDA_R_32F,
            CUSPARSE_SPMM_ALG_DEFAULT, &b));
        most = std::max(most, b);
        SP_CHECK(cusparseDestroyDnMat(Fd));
        SP_CHECK(cusparseDestroyDnMat(Od));
    }
    CUDA_CHECK(cudaMalloc(&P.buf, most + 16));
    // The random start: uniform in [-1, 1), scaled so that |P(X Y^T)| = |P(M)|.
    std::vector<float> h((size_t)std::max(P.m, P.n) * P.r);
    for (size_t i = 0; i < (size_t)P.m * P.r; i++)
        h[i] = (float)(2.0 * unit(mix(seed + 7) ^ i) - 1.0);
    CUDA_CHECK(cudaMemcpy(P.Xt, h.data(), (size_t)P.m * P.r * 4, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < (size_t)P.n * P.r; i++)
        h[i] = (float)(2.0 * unit(mix(seed + 8) ^ i) - 1.0);
    CUDA_CHECK(cudaMemcpy(P.Yt, h.data(), (size_t)P.n * P.r * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(P.sums, 0, 3 * sizeof(double)));
    peer_sddmm<<<grid_for(P.nnz), 256>>>(P.nnz, P.ptr, P.m, P.col, P.Xt, P.m, P.Yt, P.n, P.r,
                                         nullptr, P.q, P.sums);
    double p2 = 0.0;
    CUDA_CHECK(cudaMemcpy(&p2, P.sums, sizeof p2, cudaMemcpyDeviceToHost));
    const float s = (float)sqrt(sqrt(norm2 / p2));
    peer_scale<<<grid_for((int64_t)P.m * P.r), 256>>>(P.Xt, (int64_t)P.m * P.r, s);
    peer_scale<<<grid_for((int64_t)P.n * P.r), 256>>>(P.Yt, (int64_t)P.n * P.r, s);
    CUDA_CHECK(cudaDeviceSynchronize());
}

// One half step of the write-up's ASD; returns nothing, |R|^2 (before the step) in sums[0].
static void peer_half(peer &P, bool y_side)
{
    CUDA_CHECK(cudaMemsetAsync(P.sums, 0, 3 * sizeof(double)));
    const unsigned g = grid_for(P.nnz);
    peer_sddmm<<<g, 256>>>(P.nnz, P.ptr, P.m, P.col, P.Xt, P.m, P.Yt, P.n, P.r, P.M, P.R, P.sums);
    const int lines = y_side ? P.n : P.m;
    peer_spmm(P, y_side, y_side ? P.Xt : P.Yt, P.G);
    peer_sumsq<<<grid_for((int64_t)lines * P.r), 256>>>(P.G, (int64_t)lines * P.r, P.sums + 1);
    if (y_side)
        peer_sddmm<<<g, 256>>>(P.nnz, P.ptr, P.m, P.col, P.Xt, P.m, P.G, P.n, P.r, nullptr, P.q,
                               P.sums + 2);
    else
        peer_sddmm<<<g, 256>>>(P.nnz, P.ptr, P.m, P.col, P.G, P.m, P.Yt, P.n, P.r, nullptr, P.q,
                               P.sums + 2);
    peer_step<<<grid_for((int64_t)lines * P.r), 256>>>(
        y_side ? P.Yt : P.Xt, P.G, (int64_t)lines * P.r, P.sums + 1, P.sums + 2);
    CUDA_CHECK(cudaGetLastError());
}

// One iteration; returns the relative residual at its start (read back, as a stopping rule
// does).
static double peer_iteration(peer &P)
{
    peer_half(P, false);
    double res2 = 0.0;
    CUDA_CHECK(cudaMemcpy(&res2, P.sums, sizeof res2, cudaMemcpyDeviceToHost));
    peer_half(P, true);
    CUDA_CHECK(cudaDeviceSynchronize());
    return sqrt(res2) / P.norm;
}

static void peer_free(peer &P)
{
    cusparseDestroySpMat(P.Rd);
    cusparseDestroy(P.sp);
    for (void *b : {(void *)P.ptr, (void *)P.col, (void *)P.M, (void *)P.R, (void *)P.q,
                    (void *)P.Xt, (void *)P.Yt, (void *)P.G, (void *)P.sums, P.buf})
        cudaFree(b);
}

// ---- mfact ------------------------------------------------------------------------------------
struct timing {
    std::vector<double> at; // seconds at each iteration's end
};
static int record(void *user, const mf_progress *p)
{
    ((timing *)user)->at.push_back(p->seconds);
    return 0;
}

static double per_iteration_ms(const std::vector<double> &at)
{
    std::vector<double> d;
    for (size_t i = 1; i < at.size(); i++)
        d.push_back(at[i] - at[i - 1]);
    return d.empty() ? NAN : bench_median(d) * 1e3;
}

// One mf_sddmm (sddmm.h's kernel, the library's SDDMM) over Ω at rank r with device factors:
// the sampled product alone, against which each of mfact's fused passes (sampled product,
// gradient and norms in one) is set. Median of 7 after a warm-up that builds the plan.
static double library_sddmm_ms(mf_ctx *ctx, mf_sparse *M, const problem &p)
{
    float *A, *B, *out;
    CUDA_CHECK(cudaMalloc(&A, (size_t)p.m * p.r * 4));
    CUDA_CHECK(cudaMalloc(&B, (size_t)p.n * p.r * 4));
    CUDA_CHECK(cudaMalloc(&out, p.col.size() * 4 + 4));
    CUDA_CHECK(cudaMemcpy(A, p.A.data(), (size_t)p.m * p.r * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(B, p.B.data(), (size_t)p.n * p.r * 4, cudaMemcpyHostToDevice));
    cudaStream_t st = (cudaStream_t)mf_ctx_stream(ctx);
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int k = 0; k < 8; k++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        MF_CHECK(ctx, mf_sddmm(ctx, M, p.r, A, p.r, B, p.r, 1.0f, 0.0f, out, MF_MEMORY_DEVICE, 0));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (k > 0)
            t.push_back(ms);
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    cudaFree(A), cudaFree(B), cudaFree(out);
    return bench_median(t);
}

static const char *const precision_names[] = {"fp32", "3xtf32", "tf32", "bf16", "fp16"};

struct options {
    std::vector<mf_precision> precisions{MF_PRECISION_FP32}; // fp32, bf16, fp16 in that order
    double tol = 1e-5;
    int timed = 20, runs = 3, peer_cap = 400, stagnation = 15, max_its = 5000;
    uint64_t seed = 0; // the mfact context's seed: its random start
    bool continuation = false;
    double limit_gb = 16.0;
    bool peer = true;
};

static void run_case(problem &p, const options &opt, double bandwidth)
{
    const double t0 = now();
    generate(p, 0xa5d0ull + (uint64_t)p.m * 31 + p.r);
    const int64_t nnz = (int64_t)p.col.size();
    fprintf(stderr, "[%s] generated %lld entries in %.1f s\n", p.name.c_str(), (long long)nnz,
            now() - t0);
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device_memory_limit = (size_t)(opt.limit_gb * (1 << 30));
    co.seed = opt.seed;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) {
        fprintf(stderr, "mf_ctx_create: %s\n", mf_ctx_last_error(NULL));
        exit(1);
    }
    const int r = p.r;
    std::vector<float> X((size_t)p.m * r), Y((size_t)p.n * r);
    // Compulsory traffic of one iteration (see the top).
    const double floor_bytes = 2.0 * 8.0 * nnz + 8.0 * ((double)p.m + p.n + 2) +
                               2.0 * 4.0 * r * ((double)p.m + p.n) + 4.0 * r * ((double)p.m + p.n);
    const double floor_ms = floor_bytes / bandwidth * 1e3;

    double peer_ms = NAN, peer_s = NAN, peer_res = NAN, peer_err = NAN;
    int peer_its = -1;
    if (opt.peer) {
        peer P;
        peer_setup(P, p, 0xbeefull);
        std::vector<double> at;
        double res = 1.0;
        const double start = now();
        for (int it = 1; it <= opt.peer_cap && res > opt.tol; it++) {
            res = peer_iteration(P);
            at.push_back(now());
            if (res <= opt.tol)
                peer_its = it - 1; // the residual read is the one before this iteration
        }
        peer_s = at.empty() ? NAN : at.back() - start;
        peer_ms = per_iteration_ms(at);
        peer_res = res;
        std::vector<float> Xt((size_t)p.m * r), Yt((size_t)p.n * r);
        CUDA_CHECK(cudaMemcpy(Xt.data(), P.Xt, Xt.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(Yt.data(), P.Yt, Yt.size() * 4, cudaMemcpyDeviceToHost));
        peer_err = planted_error(p, Xt.data(), Yt.data(), true);
        peer_free(P);
    }
    for (int variant = 0; variant < 2; variant++) {
        double fp32_ms = NAN, fp32_s = NAN; // this variant's fp32 row, for the ratios
        for (size_t pi = 0; pi < opt.precisions.size(); pi++) {
            const mf_precision prec = opt.precisions[pi];
            mf_asd_opts o;
            mf_asd_opts_init(&o);
            o.rank = r;
            o.variant = (mf_asd_variant)variant;
            o.precision = prec;
            // ms per iteration: a fixed-length run (bf16, fp16: its reduced iterations).
            timing tm;
            o.tolerance = 1e-30;
            o.stagnation_window = 0;
            o.max_iterations = opt.timed;
            o.progress = record;
            o.progress_user = &tm;
            mf_sparse *M = NULL;
            MF_CHECK(ctx, mf_sparse_from_csr(ctx, &M, p.m, p.n, nnz, p.ptr.data(), p.col.data(),
                                             p.val.data(), MF_MEMORY_HOST, 0));
            mf_asd_report rep;
            memset(&rep, 0, sizeof rep);
            rep.struct_size = sizeof rep;
            MF_CHECK(ctx, mf_asd_run(ctx, M, &o, X.data(), Y.data(), MF_MEMORY_HOST, &rep));
            if (variant == 0 && pi == 0)
                fprintf(stderr,
                        "[%s] one library SDDMM (sddmm.h, k = %d) over Ω: %.3f ms; mfact's "
                        "iteration makes 4 fused passes\n",
                        p.name.c_str(), r, library_sddmm_ms(ctx, M, p));
            mf_sparse_destroy(M);
            if (prec != MF_PRECISION_FP32 && (size_t)rep.reduced_iterations < tm.at.size())
                tm.at.resize((size_t)rep.reduced_iterations);
            const double ms = per_iteration_ms(tm.at);
            // To the tolerance, the whole call on a fresh matrix; median of opt.runs.
            mf_asd_opts_init(&o);
            o.rank = r;
            o.variant = (mf_asd_variant)variant;
            o.precision = prec;
            o.tolerance = opt.tol;
            o.stagnation_window = opt.stagnation;
            o.max_iterations = opt.max_its;
            o.rank_continuation = opt.continuation;
            std::vector<double> secs;
            for (int run = 0; run < opt.runs; run++) {
                MF_CHECK(ctx, mf_sparse_from_csr(ctx, &M, p.m, p.n, nnz, p.ptr.data(), p.col.data(),
                                                 p.val.data(), MF_MEMORY_HOST, 0));
                const double w0 = now();
                MF_CHECK(ctx, mf_asd_run(ctx, M, &o, X.data(), Y.data(), MF_MEMORY_HOST, &rep));
                secs.push_back(now() - w0);
                mf_sparse_destroy(M);
            }
            const double err = planted_error(p, X.data(), Y.data(), false);
            static const char *why[] = {"tolerance", "stagnation", "max iterations", "time",
                                        "cancel"};
            char conv[64];
            snprintf(conv, sizeof conv, "%d (%s, %.1e)", rep.iterations, why[rep.stopped],
                     rep.relative_residual);
            char peer_conv[64];
            if (peer_its >= 0)
                snprintf(peer_conv, sizeof peer_conv, "%d", peer_its);
            else
                snprintf(peer_conv, sizeof peer_conv, ">%d (%.1e)", opt.peer_cap, peer_res);
            const double mf_s = bench_median(secs);
            if (prec == MF_PRECISION_FP32)
                fp32_ms = ms, fp32_s = mf_s;
            char vs_ms[32] = "-", vs_s[32] = "-";
            if (prec != MF_PRECISION_FP32 && !std::isnan(fp32_s)) {
                snprintf(vs_ms, sizeof vs_ms, "%.2fx", fp32_ms / ms);
                snprintf(vs_s, sizeof vs_s, "%.2fx", fp32_s / mf_s);
            }
            printf("| %s | %lld | %s | %.3f | %.3f | %.2fx | %.2f | %s | %.3f | %s | %.2f | %s | "
                   "%.1e | %.1e | %.2f | %.1f | %s | %d | %s | %s |\n",
                   p.name.c_str(), (long long)nnz, variant ? "scaled" : "plain", ms, peer_ms,
                   peer_ms / ms, ms / floor_ms, conv, mf_s, peer_conv, peer_s,
                   peer_its >= 0 ? (std::to_string(peer_s / mf_s).substr(0, 5) + "x").c_str() : "-",
                   err, peer_err, rep.peak_device_bytes / 1073741824.0, floor_ms,
                   precision_names[prec], rep.reduced_iterations, vs_ms, vs_s);
            fflush(stdout);
        }
    }
    mf_ctx_destroy(ctx);
}

// "fp32,bf16,fp16" (any of them, in any order) into opt.precisions, fp32 first; an unknown
// name ends the program with status 2 (arg_choices).
static void parse_precisions(const char *s, options &opt)
{
    const char *names[] = {"fp32", "bf16", "fp16"};
    const mf_precision precs[] = {MF_PRECISION_FP32, MF_PRECISION_BF16, MF_PRECISION_FP16};
    bool want[3] = {false, false, false};
    for (int n : arg_choices("--precision", s, names, 3))
        want[n] = true;
    opt.precisions.clear();
    for (int n = 0; n < 3; n++)
        if (want[n])
            opt.precisions.push_back(precs[n]);
}

// "M,N,R,DENSITY[,COND]", each field a number whole (strtod's "1e6" too): M, N and R whole,
// 1 <= R <= min(M, N) (the factors' rank), DENSITY in (0, 1], COND at least 1 (a condition
// number). False on anything else, a sixth field or a trailing "x" included.
static bool parse_case(const char *s, problem &p)
{
    double v[5] = {0, 0, 0, 0, 1};
    int k = 0;
    for (const char *q = s; k < 5;) {
        char *end;
        v[k++] = strtod(q, &end);
        if (end == q || (*end != ',' && *end != '\0') || !std::isfinite(v[k - 1]))
            return false;
        if (*end == '\0')
            break;
        if (k == 5)
            return false;
        q = end + 1;
    }
    for (int t = 0; t < 3; t++)
        if (!(v[t] >= 1 && v[t] <= INT32_MAX && v[t] == floor(v[t])))
            return false;
    if (k < 4 || v[2] > std::min(v[0], v[1]) || !(v[3] > 0 && v[3] <= 1) || !(v[4] >= 1))
        return false;
    p.m = (int32_t)v[0], p.n = (int32_t)v[1], p.r = (int)v[2], p.density = v[3], p.cond = v[4];
    p.name = s;
    p.uniform = false;
    return true;
}

int main(int argc, char **argv)
{
    options opt;
    bool uniform = false;
    std::vector<problem> cases;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--case" && i + 1 < argc) {
            problem p;
            if (!parse_case(argv[++i], p)) {
                fprintf(stderr,
                        "--case: '%s' is not M,N,R,DENSITY[,COND] (whole M, N and R, 1 <= R <= "
                        "min(M, N); DENSITY in (0, 1]; COND >= 1)\n",
                        argv[i]);
                return 2;
            }
            cases.push_back(p);
        } else if (a == "--tol" && i + 1 < argc) // values checked before any device work
            opt.tol = arg_number(argv[i], argv[i + 1], 0.0, true), i++;
        else if (a == "--timed" && i + 1 < argc)
            opt.timed = arg_int(argv[i], argv[i + 1], 1), i++;
        else if (a == "--runs" && i + 1 < argc)
            opt.runs = arg_int(argv[i], argv[i + 1], 1), i++;
        else if (a == "--peer-cap" && i + 1 < argc) // --no-peer leaves the peer out
            opt.peer_cap = arg_int(argv[i], argv[i + 1], 1), i++;
        else if (a == "--memory-limit-gb" && i + 1 < argc) // 0: no limit
            opt.limit_gb = arg_number(argv[i], argv[i + 1], 0.0), i++;
        else if (a == "--stagnation" && i + 1 < argc) // 0: no stagnation test
            opt.stagnation = arg_int(argv[i], argv[i + 1], 0), i++;
        else if (a == "--max-iterations" && i + 1 < argc)
            opt.max_its = arg_int(argv[i], argv[i + 1], 1), i++;
        else if (a == "--seed" && i + 1 < argc)
            opt.seed = arg_seed(argv[i], argv[i + 1]), i++;
        else if (a == "--rank-continuation")
            opt.continuation = true;
        else if (a == "--uniform")
            uniform = true;
        else if (a == "--no-peer")
            opt.peer = false;
        else if (a == "--precision" && i + 1 < argc)
            parse_precisions(argv[++i], opt);
        else {
            fprintf(stderr,
                    "usage: bench_asd [--case M,N,R,DENSITY[,COND]]... [--tol T] [--timed N] "
                    "[--runs N] [--peer-cap N] [--memory-limit-gb G] [--stagnation W] "
                    "[--max-iterations N] [--seed S] [--rank-continuation] [--uniform] [--no-peer] "
                    "[--precision fp32,bf16,fp16]\n");
            return 2;
        }
    }
    if (cases.empty())
        for (const char *s : {"10000,10000,10,0.05", "200000,200000,20,0.001",
                              "200000,200000,20,0.001,100", "1000000,1000000,20,0.0001"}) {
            problem p;
            parse_case(s, p);
            cases.push_back(p);
        }
    for (problem &p : cases) {
        p.uniform = uniform;
        if (uniform)
            p.name += " U";
        if (opt.continuation)
            p.name += " RC";
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const double bw = bench_copy_bandwidth(0);
    printf(
        "device: %s, copy bandwidth %.0f GB/s, %s; tolerance %g, device memory limit %.0f GB\n\n",
        prop.name, bw / 1e9, mf_version_string(), opt.tol, opt.limit_gb);
    printf(
        "| case M,N,R,density[,cond] | nnz | variant | mfact ms/it | peer ms/it | per-it ratio | "
        "x floor | mfact its to tol | mfact s (whole call) | peer its to tol | peer s | "
        "to-tol ratio | mfact rel err | peer rel err | peak GB | floor ms | precision | "
        "reduced its to tol | fp32 ms/it over this | fp32 s over this |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (problem &p : cases)
        run_case(p, opt, bw);
    return 0;
}
