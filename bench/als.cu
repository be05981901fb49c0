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
// The data (synthetic_ratings.h): one table per case, each --case NAME[,key=value,...]
// (a preset with changes), by default every preset (netflix, lognormal-cap45, zipf,
// dense-users); --scale and --seed apply to the cases that do not set their own. Each
// case's table is headed by its shape in the --case syntax and what the generator made,
// and every row names its case.
//
// Each k runs from both seeded starts (--init narrows them): Zhou's (mean: V's first column
// the item's mean rating) and cuMF_als's (uniform: V in [0, 0.1)), the peer's own start.
//
// usage: bench_als [--k 32,64,100,128] [--init mean,uniform] [--iterations N] [--lambda L]
//                  [--repeat R] [--case NAME[,key=value,...]]... [--scale F] [--seed S]
//                  [--limit-gb G] [--train FILE --test FILE]
//                  [--no-biases] [--lambda-bias L] [--write-cumf DIR]
//                  [--solver auto|exact|cg] [--cg-steps N] [--no-tf32]
//                  [--gram auto|fp32|tc|tf32|tf32-long] [--monitor fp32,bf16,fp16]
// --gram forces one Gram kernel (als_internal.h) on every run: a knob for measuring them.
// --limit-gb caps the context's device memory and skips the solver comparison.
// --write-cumf DIR also writes the ratings as cuMF_als's input files into DIR (cumf_files.h).
// --monitor fp32,bf16,fp16 runs each k and start again with the per-iteration train RMSE on
// (a progress callback, as a user watching convergence has), its RMSEs in that precision
// (opts.rmse_precision), and prints the whole call's seconds and their ratio to fp32
// monitoring: what a reduced-precision evaluation gains end to end (issue 45).
// A malformed number, an unknown name, a k, --iterations or --repeat below 1, --cg-steps
// outside 1..64, a negative --lambda, --lambda-bias or --limit-gb, --scale <= 0, or --train
// without --test ends the program with status 2 before any device work
// (tests/tool/check-bench-args.sh).
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
#include "cumf_files.h"
#include "mfact/mfact.h"
#include "synthetic_ratings.h"

#define SOLVER_CHECK(call)                                                                         \
    do {                                                                                           \
        cusolverStatus_t s_ = (call);                                                              \
        if (s_ != CUSOLVER_STATUS_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)s_);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// ---- the solver next to cuSOLVER -----------------------------------------------------------

struct solve_row {
    double ours_ms, peer_ms, rel_diff;
    int32_t systems;
    double gram_tc_ms, gram_fp32_ms; /* the user systems by each Gram kernel */
    int tensor_cores;                /* the tensor-core kernel ran (not its FP32 fallback) */
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
    MF_CHECK(ctx,
             mf_cuda_als_bench_begin(ctx, train, k, lambda, V.data(), count, MF_ALS_GRAM_AUTO, &b));
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

    std::vector<double> ours, peer, gram, gram_fp32;
    int tensor_cores = 0, unused = 0;
    for (int rep = 0; rep <= repeat; rep++) { // the first run of each is a warm-up
        double ms = 0.0, ms32 = 0.0;
        MF_CHECK(ctx, mf_cuda_als_bench_gram(b, MF_ALS_GRAM_TC, &ms, &tensor_cores));
        MF_CHECK(ctx, mf_cuda_als_bench_gram(b, MF_ALS_GRAM_FP32, &ms32, &unused));
        if (rep > 0)
            gram.push_back(ms), gram_fp32.push_back(ms32);
    }
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
    return {median(ours),      median(peer), den > 0 ? sqrt(num / den) : 0.0, count, median(gram),
            median(gram_fp32), tensor_cores};
}

// ---- monitored runs ------------------------------------------------------------------------

static int keep_going(void *, const mf_progress *)
{
    return 0; // its presence turns on the per-iteration train RMSE
}

static const struct {
    const char *name;
    mf_precision p;
} monitor_names[] = {
    {"fp32", MF_PRECISION_FP32}, {"bf16", MF_PRECISION_BF16}, {"fp16", MF_PRECISION_FP16}};

// ---- main ----------------------------------------------------------------------------------

int main(int argc, char **argv)
{
    std::vector<int> ks = {32, 64, 100, 128};
    std::vector<mf_als_init> inits = {MF_ALS_INIT_MEAN, MF_ALS_INIT_UNIFORM};
    int iterations = 10, repeat = 5;
    float lambda = 0.048f;
    int biases = 1; // --no-biases: the plain model (the cost of the bias terms)
    mf_als_solver solver = MF_ALS_SOLVER_AUTO; // --solver
    int cg_steps = 6;                          // --cg-steps
    int tf32 = 1;                              // --no-tf32
    float lambda_bias = -1.0f;                 // --lambda-bias; default: lambda (weighted alike)
    double scale = 1.0, limit_gb = 0.0;
    uint64_t seed = 1;
    const char *train_file = NULL, *test_file = NULL, *cumf_dir = NULL;
    std::vector<std::string> specs; // --case
    std::vector<int> monitor;       // --monitor: indices into monitor_names
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        // Every value is checked here, before any device work (bench_util.h's arg_*: a bad
        // one exits with status 2 naming it); a missing value reads as "" and is refused.
        if (!strcmp(a, "--k"))
            ks = arg_ints(a, v, 1), i++;
        else if (!strcmp(a, "--init")) {
            // mean before uniform whatever the list's order, as before
            const char *names[] = {"mean", "uniform"};
            bool want[2] = {false, false};
            for (int n : arg_choices(a, v, names, 2))
                want[n] = true;
            inits.clear();
            if (want[0])
                inits.push_back(MF_ALS_INIT_MEAN);
            if (want[1])
                inits.push_back(MF_ALS_INIT_UNIFORM);
            i++;
        } else if (!strcmp(a, "--iterations"))
            iterations = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--lambda"))
            lambda = (float)arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--solver")) {
            const char *names[] = {"auto", "exact", "cg"};
            const mf_als_solver solvers[] = {MF_ALS_SOLVER_AUTO, MF_ALS_SOLVER_EXACT,
                                             MF_ALS_SOLVER_CG};
            solver = solvers[arg_choice(a, v, names, 3)], i++;
        } else if (!strcmp(a, "--cg-steps")) // 1..64: mf_als_opts.cg_steps' range
            cg_steps = arg_int(a, v, 1, 64), i++;
        else if (!strcmp(a, "--no-tf32")) // CG's systems from float-accurate products
            tf32 = 0;
        else if (!strcmp(a, "--gram")) { // the Gram kernel of every run (als_internal.h)
            const char *names[] = {"auto", "fp32", "tc", "tf32", "tf32-long"};
            mf_als_debug_gram = arg_choice(a, v, names, 5), i++;
        } else if (!strcmp(a, "--no-biases"))
            biases = 0;
        else if (!strcmp(a, "--lambda-bias"))
            lambda_bias = (float)arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--repeat"))
            repeat = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--scale"))
            scale = arg_number(a, v, 0.0, true), i++;
        else if (!strcmp(a, "--case"))
            specs.push_back(v), i++;
        else if (!strcmp(a, "--limit-gb")) // 0: no limit
            limit_gb = arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--seed"))
            seed = arg_seed(a, v), i++;
        else if (!strcmp(a, "--train"))
            train_file = v, i++;
        else if (!strcmp(a, "--test"))
            test_file = v, i++;
        else if (!strcmp(a, "--monitor")) {
            const char *names[] = {monitor_names[0].name, monitor_names[1].name,
                                   monitor_names[2].name};
            for (int p : arg_choices(a, v, names, 3)) // repeated --monitor options add up
                monitor.push_back(p);
            i++;
        } else if (!strcmp(a, "--write-cumf"))
            cumf_dir = v, i++;
        else {
            fprintf(
                stderr,
                "usage: bench_als [--k LIST] [--init mean,uniform] [--iterations N] [--lambda L] "
                "[--repeat R] [--case NAME[,key=value,...]]... [--scale F] [--seed S] "
                "[--limit-gb G] [--train FILE --test FILE] [--no-biases] [--lambda-bias L] "
                "[--write-cumf DIR] [--solver auto|exact|cg] [--cg-steps N] [--no-tf32] "
                "[--gram auto|fp32|tc|tf32|tf32-long] [--monitor fp32,bf16,fp16]\n");
            return 2;
        }
    }
    if (!train_file != !test_file) { // one of them alone would be ignored for the presets
        fprintf(stderr, "bench_als: --train and --test go together\n");
        return 2;
    }
    const std::vector<ratings_shape> cases =
        ratings_cases("bench_als", specs, scale, seed, train_file, test_file);
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device_memory_limit = (size_t)(limit_gb * 1e9);
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) {
        fprintf(stderr, "bench_als: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_device_info info;
    info.struct_size = sizeof info;
    MF_CHECK(ctx, mf_ctx_device_info(ctx, &info));
    printf("bench_als on %s: lambda %g, %d iterations, %zu case(s)\n", info.name, lambda,
           iterations, cases.size());
    for (const ratings_shape &c : cases) {
        mf_sparse *train = NULL, *test = NULL;
        ratings_stats made = {};
        double t0 = omp_get_wtime();
        double oracle = load_ratings(ctx, train_file, test_file, c, &train, &test, &made);
        if (cumf_dir && cumf_write_split(ctx, train, test, cumf_dir, CUMF_ALS) != 0)
            return 1;
        int32_t users, items;
        MF_CHECK(ctx, mf_sparse_shape(train, &users, &items, NULL));
        print_ratings_case(ctx, c, made, oracle, train, test, omp_get_wtime() - t0);
        printf("\n| case | k | start | solver | s / iteration | Gram ms / it | solve ms / it | "
               "test RMSE | "
               "peak device GB | systems | mfact LDL^T ms | cuSOLVER potrf+potrs ms | speed-up | "
               "solution diff | user Gram ms: tensor cores | FP32 |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int k : ks)
            for (mf_als_init init : inits) {
                std::vector<float> U((size_t)users * k), V((size_t)items * k);
                mf_als_opts o;
                mf_als_opts_init(&o);
                o.rank = k, o.lambda = lambda, o.iterations = iterations, o.test = test;
                o.weighting = MF_ALS_WEIGHT_COUNT; /* cuMF_als's weighted lambda */
                o.lambda_bias = lambda_bias >= 0.0f ? lambda_bias : lambda;
                o.init = init, o.biases = biases;
                o.solver = solver, o.cg_steps = cg_steps, o.tf32 = tf32;
                mf_als_report rep;
                rep.struct_size = sizeof rep;
                MF_CHECK(ctx, mf_als_run(ctx, train, &o, U.data(), V.data(), MF_MEMORY_HOST, &rep));
                // Under --limit-gb the comparison (which builds every system at once) is
                // skipped.
                solve_row s = {NAN, NAN, NAN, 0, NAN, NAN, 0};
                if (limit_gb <= 0.0)
                    s = compare_solvers(ctx, train, k, lambda, V, repeat);
                printf(
                    "| %s | %d | %s | %s | %.4f | %.1f | %.1f | %.4f | %.2f | %d | %.2f | %.2f | "
                    "%.2fx | %.1e | %.1f%s | %.1f |\n",
                    c.label.c_str(), k, init == MF_ALS_INIT_MEAN ? "mean" : "uniform",
                    rep.solver == MF_ALS_SOLVER_CG ? "CG" : "LDL^T",
                    rep.iteration_seconds / rep.iterations, 1e3 * rep.gram_seconds / rep.iterations,
                    1e3 * rep.solve_seconds / rep.iterations, rep.test_rmse,
                    rep.peak_device_bytes / 1e9, s.systems, s.ours_ms, s.peer_ms,
                    s.peer_ms / s.ours_ms, s.rel_diff, s.gram_tc_ms,
                    s.tensor_cores ? "" : " (FP32 fallback)", s.gram_fp32_ms);
                fflush(stdout);
                double base_seconds = NAN;
                for (int p : monitor) { // the same run, watched every iteration
                    o.progress = keep_going;
                    o.rmse_precision = monitor_names[p].p;
                    mf_als_report mr;
                    mr.struct_size = sizeof mr;
                    MF_CHECK(ctx,
                             mf_als_run(ctx, train, &o, U.data(), V.data(), MF_MEMORY_HOST, &mr));
                    if (monitor_names[p].p == MF_PRECISION_FP32)
                        base_seconds = mr.seconds;
                    printf("| %s | %d | %s | monitored, RMSE in %s | whole call %.3f s (iterations "
                           "%.3f s) | %.2fx of fp32 monitoring | train RMSE %.5f | test RMSE %.5f "
                           "|\n",
                           c.label.c_str(), k, init == MF_ALS_INIT_MEAN ? "mean" : "uniform",
                           monitor_names[p].name, mr.seconds, mr.iteration_seconds,
                           base_seconds / mr.seconds, mr.train_rmse, mr.test_rmse);
                    fflush(stdout);
                }
                o.progress = NULL;
            }
        mf_sparse_destroy(train);
        mf_sparse_destroy(test);
    }
    mf_ctx_destroy(ctx);
    return 0;
}
