// bench_als: mf_als_run on Netflix-shaped synthetic ratings (or --train/--test files in the
// packed binary triplet format), and its batched LDL^T phase next to cuSOLVER's batched
// Cholesky (cusolverDnSpotrfBatched + cusolverDnSpotrsBatched) on the same systems in the
// same run.
//
// For each k: seconds per full iteration (users + items; the per-iteration RMSE is off, as
// in a production run), of which Gram and solve, test RMSE on the held-out part, and the
// context's peak device memory. Then the user systems at the final V are built once; the
// batched solver and cuSOLVER each solve all of them (medians of --repeat runs, events;
// cuSOLVER gets freshly written dense systems before every run, untimed), and their
// solutions are compared.
//
// The data: users x items with log-normal user activity (sigma 1) and item popularity
// (sigma 1.5), every user and item rated at least once, ratings round(3.6 + b_u + b_i +
// planted rank-10 dot + N(0, 0.74^2)) clipped to 1..5, seeded; 1% of the ratings held out.
//
// usage: bench_als [--k 32,64,100,128] [--iterations N] [--lambda L] [--repeat R]
//                  [--scale F] [--seed S] [--limit-gb G] [--train FILE --test FILE]
// --limit-gb caps the context's device memory and skips the solver comparison.
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "als/als_internal.h"
#include "bench_util.h"
#include "mfact/mfact.h"

#define SOLVER_CHECK(call)                                                                         \
    do {                                                                                           \
        cusolverStatus_t s_ = (call);                                                              \
        if (s_ != CUSOLVER_STATUS_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)s_);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// ---- the synthetic ratings ---------------------------------------------------------------

static double unit(uint64_t h)
{
    return (double)(h >> 11) * 0x1.0p-53;
}
// A standard normal from two hashed uniforms (Box-Muller).
static double normal(uint64_t key)
{
    double u1 = unit(mix(key)) + 1e-300, u2 = unit(mix(key ^ 0x5851f42d4c957f2dull));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

struct ratings {
    int32_t users, items;
    std::vector<int64_t> ptr;
    std::vector<int32_t> col;
    std::vector<float> val;
    std::vector<uint8_t> test; // per entry: held out
    double oracle_rmse;        // the planted model's RMSE on the held-out part
};

// Vose alias table over weights w.
struct alias {
    std::vector<double> prob;
    std::vector<int32_t> other;
    explicit alias(const std::vector<double> &w)
    {
        size_t n = w.size();
        double sum = 0.0;
        for (double x : w)
            sum += x;
        prob.resize(n), other.resize(n);
        std::vector<double> p(n);
        std::vector<int32_t> small, large;
        for (size_t i = 0; i < n; i++) {
            p[i] = w[i] * n / sum;
            (p[i] < 1.0 ? small : large).push_back((int32_t)i);
        }
        while (!small.empty() && !large.empty()) {
            int32_t s = small.back(), l = large.back();
            small.pop_back();
            prob[s] = p[s], other[s] = l;
            p[l] -= 1.0 - p[s];
            if (p[l] < 1.0) {
                large.pop_back();
                small.push_back(l);
            }
        }
        for (int32_t i : small)
            prob[i] = 1.0, other[i] = i;
        for (int32_t i : large)
            prob[i] = 1.0, other[i] = i;
    }
    int32_t draw(uint64_t h) const
    {
        size_t n = prob.size();
        size_t i = (size_t)((h >> 32) * n >> 32);
        return unit(mix(h)) < prob[i] ? (int32_t)i : other[i];
    }
};

static void generate(ratings *r, int32_t users, int32_t items, double target, uint64_t seed)
{
    r->users = users, r->items = items;
    const int rank = 10;
    std::vector<double> w(items), bi(items), Vs((size_t)items * rank);
    for (int32_t i = 0; i < items; i++) {
        w[i] = exp(1.5 * normal(seed ^ mix(0x1000000000ull + i)));
        bi[i] = 0.4 * normal(seed ^ mix(0x2000000000ull + i));
        for (int t = 0; t < rank; t++)
            Vs[(size_t)i * rank + t] = 0.4 * normal(seed ^ mix(0x3000000000ull + i * 16 + t));
    }
    alias table(w);
    const double mu = log(target / users) - 0.5;
    std::vector<int32_t> deg(users);
    for (int32_t u = 0; u < users; u++) {
        double d = exp(mu + normal(seed ^ mix(0x4000000000ull + u)));
        deg[u] = (int32_t)std::min<double>(std::max(1.0, round(d)), items / 2);
    }
    std::vector<int64_t> cap(users + 1, 0);
    for (int32_t u = 0; u < users; u++)
        cap[u + 1] = cap[u] + deg[u];
    std::vector<int32_t> items_of(cap[users]);
    std::vector<int32_t> got(users);
#pragma omp parallel
    {
        std::vector<uint64_t> seen((items + 63) / 64);
#pragma omp for schedule(dynamic, 256)
        for (int32_t u = 0; u < users; u++) {
            int32_t *out = items_of.data() + cap[u];
            int32_t n = 0;
            uint64_t h = mix(seed ^ mix(0x5000000000ull + u));
            for (int64_t tries = 0; n < deg[u] && tries < 50ll * deg[u]; tries++) {
                h = mix(h);
                int32_t i = table.draw(h);
                if (seen[i >> 6] >> (i & 63) & 1)
                    continue;
                seen[i >> 6] |= 1ull << (i & 63);
                out[n++] = i;
            }
            for (int32_t p = 0; p < n; p++)
                seen[out[p] >> 6] = 0;
            std::sort(out, out + n);
            got[u] = n;
        }
    }
    // Items nobody drew go to a hashed user each.
    std::vector<int32_t> count(items, 0), extra_user;
    std::vector<int32_t> extra_item;
    for (int32_t u = 0; u < users; u++)
        for (int32_t p = 0; p < got[u]; p++)
            count[items_of[cap[u] + p]]++;
    std::vector<std::vector<int32_t>> extra(users);
    for (int32_t i = 0; i < items; i++)
        if (count[i] == 0)
            extra[(int32_t)(mix(seed ^ mix(0x6000000000ull + i)) % users)].push_back(i);
    r->ptr.assign(users + 1, 0);
    for (int32_t u = 0; u < users; u++)
        r->ptr[u + 1] = r->ptr[u] + got[u] + (int64_t)extra[u].size();
    int64_t nnz = r->ptr[users];
    r->col.resize(nnz), r->val.resize(nnz), r->test.resize(nnz);
    double oracle_se = 0.0;
    int64_t oracle_n = 0;
#pragma omp parallel for schedule(dynamic, 256) reduction(+ : oracle_se, oracle_n)
    for (int32_t u = 0; u < users; u++) {
        int32_t *c = r->col.data() + r->ptr[u];
        int32_t n = got[u];
        memcpy(c, items_of.data() + cap[u], n * sizeof *c);
        for (int32_t i : extra[u])
            c[n++] = i;
        std::sort(c, c + n);
        double bu = 0.3 * normal(seed ^ mix(0x7000000000ull + u)), Us[rank];
        for (int t = 0; t < rank; t++)
            Us[t] = 0.4 * normal(seed ^ mix(0x8000000000ull + (uint64_t)u * 16 + t));
        for (int32_t p = 0; p < n; p++) {
            int32_t i = c[p];
            double mean = 3.6 + bu + bi[i];
            for (int t = 0; t < rank; t++)
                mean += Us[t] * Vs[(size_t)i * rank + t];
            uint64_t key = mix(seed ^ mix(((uint64_t)u << 20) ^ (uint64_t)i ^ 0x9000000000000ull));
            double v = std::min(5.0, std::max(1.0, round(mean + 0.74 * normal(key))));
            int64_t q = r->ptr[u] + p;
            r->val[q] = (float)v;
            r->test[q] = unit(mix(key ^ 0xabcdefull)) < 0.01;
            if (r->test[q]) {
                double e = std::min(5.0, std::max(1.0, mean)) - v;
                oracle_se += e * e;
                oracle_n++;
            }
        }
    }
    r->oracle_rmse = oracle_n ? sqrt(oracle_se / oracle_n) : NAN;
}

// Split r into train and test handles.
static void split(mf_ctx *ctx, const ratings &r, mf_sparse **train, mf_sparse **test)
{
    std::vector<int64_t> ptr[2];
    std::vector<int32_t> col[2];
    std::vector<float> val[2];
    for (int s = 0; s < 2; s++)
        ptr[s].assign(r.users + 1, 0);
    for (int32_t u = 0; u < r.users; u++) {
        for (int s = 0; s < 2; s++)
            ptr[s][u + 1] = ptr[s][u];
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++) {
            int s = r.test[p];
            ptr[s][u + 1]++;
            col[s].push_back(r.col[p]);
            val[s].push_back(r.val[p]);
        }
    }
    MF_CHECK(ctx, mf_sparse_from_csr(ctx, train, r.users, r.items, ptr[0][r.users], ptr[0].data(),
                                     col[0].data(), val[0].data(), MF_MEMORY_HOST, 0));
    MF_CHECK(ctx, mf_sparse_from_csr(ctx, test, r.users, r.items, ptr[1][r.users], ptr[1].data(),
                                     col[1].data(), val[1].data(), MF_MEMORY_HOST, 0));
}

// ---- the solver next to cuSOLVER -----------------------------------------------------------

struct solve_row {
    double ours_ms, peer_ms, rel_diff;
    int32_t systems;
};

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static solve_row compare_solvers(mf_ctx *ctx, mf_sparse *train, int k, float lambda,
                                 const std::vector<float> &V, int repeat)
{
    int32_t users;
    MF_CHECK(ctx, mf_sparse_shape(train, &users, NULL, NULL));
    // All users when the systems fit in half the free memory (dense k x k for the peer,
    // packed tiles for mfact), else the first that do.
    size_t free_b, total;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    int kp = (k + 1 + 7) / 8 * 8;
    size_t per =
        (size_t)k * k * 4 + (size_t)(kp / 8) * (kp / 8 + 1) / 2 * 256 + 3 * (size_t)k * 4 + 8;
    int32_t count = (int32_t)std::min<size_t>(users, free_b / 2 / per);
    mf_als_bench *b = NULL;
    MF_CHECK(ctx, mf_cuda_als_bench_begin(ctx, train, k, lambda, V.data(), count, &b));
    float *A, *rhs, *x_ours, **Aptr, **Bptr;
    int *info;
    CUDA_CHECK(cudaMalloc(&A, (size_t)count * k * k * 4));
    CUDA_CHECK(cudaMalloc(&rhs, (size_t)count * k * 4));
    CUDA_CHECK(cudaMalloc(&x_ours, (size_t)count * k * 4));
    CUDA_CHECK(cudaMalloc(&Aptr, (size_t)count * sizeof(float *)));
    CUDA_CHECK(cudaMalloc(&Bptr, (size_t)count * sizeof(float *)));
    CUDA_CHECK(cudaMalloc(&info, ((size_t)count + 1) * sizeof(int)));
    std::vector<float *> hp(count);
    for (int32_t s = 0; s < count; s++)
        hp[s] = A + (size_t)s * k * k;
    CUDA_CHECK(cudaMemcpy(Aptr, hp.data(), count * sizeof(float *), cudaMemcpyHostToDevice));
    for (int32_t s = 0; s < count; s++)
        hp[s] = rhs + (size_t)s * k;
    CUDA_CHECK(cudaMemcpy(Bptr, hp.data(), count * sizeof(float *), cudaMemcpyHostToDevice));

    std::vector<double> ours, peer;
    for (int rep = 0; rep <= repeat; rep++) { // the first run of each is a warm-up
        double ms = 0.0;
        MF_CHECK(ctx, mf_cuda_als_bench_solve(b, x_ours, &ms));
        if (rep > 0)
            ours.push_back(ms);
    }
    cusolverDnHandle_t h;
    SOLVER_CHECK(cusolverDnCreate(&h));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    int host_info = 0;
    for (int rep = 0; rep <= repeat; rep++) {
        MF_CHECK(ctx, mf_cuda_als_bench_dense(b, A, rhs));
        CUDA_CHECK(cudaEventRecord(e0));
        SOLVER_CHECK(cusolverDnSpotrfBatched(h, CUBLAS_FILL_MODE_LOWER, k, Aptr, k, info, count));
        // potrsBatched's info is one int in device memory.
        SOLVER_CHECK(cusolverDnSpotrsBatched(h, CUBLAS_FILL_MODE_LOWER, k, 1, Aptr, k, Bptr, k,
                                             info + count, count));
        CUDA_CHECK(cudaEventRecord(e1));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0)
            peer.push_back(ms);
    }
    std::vector<int> infos(count + 1);
    CUDA_CHECK(cudaMemcpy(infos.data(), info, (count + 1) * sizeof(int), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int32_t s = 0; s < count; s++)
        bad += infos[s] != 0;
    host_info = infos[count];
    if (bad || host_info)
        fprintf(stderr, "cuSOLVER reported %d failed factorizations (potrs info %d)\n", bad,
                host_info);
    std::vector<float> xo((size_t)count * k), xp((size_t)count * k);
    CUDA_CHECK(cudaMemcpy(xo.data(), x_ours, xo.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(xp.data(), rhs, xp.size() * 4, cudaMemcpyDeviceToHost));
    double num = 0.0, den = 0.0;
    for (size_t p = 0; p < xo.size(); p++) {
        num += ((double)xo[p] - xp[p]) * ((double)xo[p] - xp[p]);
        den += (double)xp[p] * xp[p];
    }
    cusolverDnDestroy(h);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaFree(A), cudaFree(rhs), cudaFree(x_ours), cudaFree(Aptr), cudaFree(Bptr), cudaFree(info);
    mf_cuda_als_bench_end(b);
    return {median(ours), median(peer), den > 0 ? sqrt(num / den) : 0.0, count};
}

// ---- main ----------------------------------------------------------------------------------

static std::vector<int> parse_list(const char *s)
{
    std::vector<int> v;
    for (const char *p = s; *p;) {
        v.push_back(atoi(p));
        p = strchr(p, ',');
        if (!p)
            break;
        p++;
    }
    return v;
}

int main(int argc, char **argv)
{
    std::vector<int> ks = {32, 64, 100, 128};
    int iterations = 10, repeat = 5;
    float lambda = 0.048f;
    double scale = 1.0, limit_gb = 0.0;
    uint64_t seed = 1;
    const char *train_file = NULL, *test_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--k"))
            ks = parse_list(v), i++;
        else if (!strcmp(a, "--iterations"))
            iterations = atoi(v), i++;
        else if (!strcmp(a, "--lambda"))
            lambda = (float)atof(v), i++;
        else if (!strcmp(a, "--repeat"))
            repeat = atoi(v), i++;
        else if (!strcmp(a, "--scale"))
            scale = atof(v), i++;
        else if (!strcmp(a, "--limit-gb"))
            limit_gb = atof(v), i++;
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--train"))
            train_file = v, i++;
        else if (!strcmp(a, "--test"))
            test_file = v, i++;
        else {
            fprintf(
                stderr,
                "usage: bench_als [--k LIST] [--iterations N] [--lambda L] "
                "[--repeat R] [--scale F] [--seed S] [--limit-gb G] [--train FILE --test FILE]\n");
            return 2;
        }
    }
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device_memory_limit = (size_t)(limit_gb * 1e9);
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) {
        fprintf(stderr, "bench_als: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_sparse *train = NULL, *test = NULL;
    double oracle = NAN;
    double t0 = omp_get_wtime();
    if (train_file && test_file) {
        mf_read_opts ro;
        mf_read_opts_init(&ro);
        ro.format = MF_FORMAT_BINARY_TRIPLETS;
        MF_CHECK(ctx, mf_sparse_read(ctx, &train, train_file, &ro));
        MF_CHECK(ctx, mf_sparse_shape(train, &ro.rows, &ro.cols, NULL));
        MF_CHECK(ctx, mf_sparse_read(ctx, &test, test_file, &ro));
    } else {
        ratings r;
        generate(&r, (int32_t)(480189 * scale), (int32_t)(17770 * std::min(1.0, 4 * scale)),
                 99e6 * scale, seed);
        oracle = r.oracle_rmse;
        split(ctx, r, &train, &test);
    }
    int32_t users, items;
    int64_t ntrain, ntest;
    MF_CHECK(ctx, mf_sparse_shape(train, &users, &items, &ntrain));
    MF_CHECK(ctx, mf_sparse_shape(test, NULL, NULL, &ntest));
    mf_device_info info;
    info.struct_size = sizeof info;
    MF_CHECK(ctx, mf_ctx_device_info(ctx, &info));
    printf("bench_als on %s: %d users x %d items, %lld training and %lld test ratings "
           "(prepared in %.1f s); lambda %g, %d iterations\n",
           info.name, users, items, (long long)ntrain, (long long)ntest, omp_get_wtime() - t0,
           lambda, iterations);
    if (!isnan(oracle))
        printf("best possible test RMSE (the planted model itself): %.4f\n", oracle);
    printf("\n| k | s / iteration | Gram ms / it | solve ms / it | test RMSE | peak device GB "
           "| systems | mfact LDL^T ms | cuSOLVER potrf+potrs ms | speed-up | solution diff |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k : ks) {
        std::vector<float> U((size_t)users * k), V((size_t)items * k);
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = k, o.lambda = lambda, o.iterations = iterations, o.test = test;
        mf_als_report rep;
        rep.struct_size = sizeof rep;
        MF_CHECK(ctx, mf_als_run(ctx, train, &o, U.data(), V.data(), &rep));
        // Under --limit-gb the comparison (which builds every system at once) is skipped.
        solve_row s = {NAN, NAN, NAN, 0};
        if (limit_gb <= 0.0)
            s = compare_solvers(ctx, train, k, lambda, V, repeat);
        printf("| %d | %.4f | %.1f | %.1f | %.4f | %.2f | %d | %.2f | %.2f | %.2fx | %.1e |\n", k,
               rep.iteration_seconds / rep.iterations, 1e3 * rep.gram_seconds / rep.iterations,
               1e3 * rep.solve_seconds / rep.iterations, rep.test_rmse, rep.peak_device_bytes / 1e9,
               s.systems, s.ours_ms, s.peer_ms, s.peer_ms / s.ours_ms, s.rel_diff);
        fflush(stdout);
    }
    mf_sparse_destroy(train);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
    return 0;
}
