// bench_ials: implicit-feedback ALS (mf_ials_run) and top-N recommendation (mf_recommend) on
// the GPU, on synthetic interactions whose shape is a parameter (synthetic_ratings.h: the
// "lastfm" and "implicit-1m" presets, or any --case). For each case and rank: seconds per
// iteration (the report's iteration time over the iterations, after a warm-up run that pays
// the uploads), precision@10 / NDCG@10 / MAP / AUC on the held-out part
// (mf_ranking_evaluate), and top-N for every user, the training items left out (median of
// 3), against the FP32 floor of its scoring arithmetic and against writing the scores once
// at HBM bandwidth (which the fused kernel never does). The peer, implicit, runs on the same
// data from bench/ials.py (--write DIR saves the split for it); bench/README.md says how.
// --device-limit GIB sets the context's device-memory limit: below what the interactions
// need on the device, mf_ials_run streams them from host memory (each rank's line says
// which it did, from the library's log).
//
// usage: bench_ials [--k LIST] [--iterations N] [--cg-steps S] [--exact] [--fp16] [--alpha A]
//                   [--lambda L] [--top N] [--case NAME[,key=value,...]]... [--scale F]
//                   [--seed S] [--write DIR] [--no-recommend] [--no-eval] [--device-limit GIB]
// A malformed number, an unknown case, a k, --iterations or --top below 1, --cg-steps outside
// 1..64, a negative --alpha, --lambda or --device-limit, or --scale <= 0 ends the program
// with status 2 before any device work (tests/tool/check-bench-args.sh).
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "bench_util.h"
#include "synthetic_ratings.h"

static double now()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The split as raw arrays for bench/ials.py: <dir>/<name>.{indptr (int64), indices (int32),
// data (float32)} and <dir>/shape.txt ("users items").
static void write_split(mf_ctx *ctx, const char *dir, const char *name, const mf_sparse *S)
{
    int32_t rows, cols;
    int64_t nnz;
    MF_CHECK(ctx, mf_sparse_shape(S, &rows, &cols, &nnz));
    std::vector<int64_t> ptr(rows + 1);
    std::vector<int32_t> col(nnz + 1);
    std::vector<float> val(nnz + 1);
    MF_CHECK(ctx, mf_sparse_get_csr(S, ptr.data(), col.data(), val.data(), MF_MEMORY_HOST));
    mkdir(dir, 0755);
    const struct {
        const char *ext;
        const void *p;
        size_t bytes;
    } parts[] = {{"indptr", ptr.data(), ptr.size() * 8},
                 {"indices", col.data(), (size_t)nnz * 4},
                 {"data", val.data(), (size_t)nnz * 4}};
    for (const auto &part : parts) {
        std::string path = std::string(dir) + "/" + name + "." + part.ext;
        FILE *f = fopen(path.c_str(), "wb");
        if (!f || fwrite(part.p, 1, part.bytes, f) != part.bytes || fclose(f) != 0) {
            fprintf(stderr, "bench_ials: cannot write %s\n", path.c_str());
            exit(1);
        }
    }
    FILE *f = fopen((std::string(dir) + "/shape.txt").c_str(), "w");
    if (!f) {
        fprintf(stderr, "bench_ials: cannot write %s/shape.txt\n", dir);
        exit(1);
    }
    fprintf(f, "%d %d\n", rows, cols);
    fclose(f);
}

// What mf_ials_run logged about streaming the interactions (src/ials/ials.cu, MF_LOG_INFO).
struct stream_note {
    bool streamed;
    int user_batches, item_batches;
};

static void catch_log(void *user, mf_log_level, const char *message)
{
    static const char key[] = "streaming them from host memory: ";
    stream_note *n = (stream_note *)user;
    const char *q = strstr(message, key);
    if (q && sscanf(q + strlen(key), "%d user batches, %d item batches", &n->user_batches,
                    &n->item_batches) == 2)
        n->streamed = true;
}

int main(int argc, char **argv)
{
    std::vector<int> ks = {64, 128};
    int iterations = 15, cg_steps = 3, top = 10;
    float alpha = 1.0f, lambda = 0.01f;
    mf_als_solver solver = MF_ALS_SOLVER_AUTO;
    double scale = 1.0, device_limit_gib = 0.0;
    uint64_t seed = 1;
    bool skip_recommend = false, skip_eval = false, fp16 = false;
    const char *write_dir = NULL;
    std::vector<std::string> specs;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        // Every value is checked here, before any device work (bench_util.h's arg_*: a bad
        // one exits with status 2 naming it); a missing value reads as "" and is refused.
        if (!strcmp(a, "--k"))
            ks = arg_ints(a, v, 1), i++;
        else if (!strcmp(a, "--iterations"))
            iterations = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--cg-steps")) // 1..64: mf_ials_opts.cg_steps' range
            cg_steps = arg_int(a, v, 1, 64), i++;
        else if (!strcmp(a, "--exact"))
            solver = MF_ALS_SOLVER_EXACT;
        else if (!strcmp(a, "--fp16"))
            fp16 = true;
        else if (!strcmp(a, "--alpha"))
            alpha = (float)arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--lambda"))
            lambda = (float)arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--top"))
            top = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--scale"))
            scale = arg_number(a, v, 0.0, true), i++;
        else if (!strcmp(a, "--case"))
            specs.push_back(v), i++;
        else if (!strcmp(a, "--seed"))
            seed = arg_seed(a, v), i++;
        else if (!strcmp(a, "--write"))
            write_dir = v, i++;
        else if (!strcmp(a, "--no-recommend"))
            skip_recommend = true;
        else if (!strcmp(a, "--no-eval")) // shapes too large to rank every held-out user
            skip_eval = true, skip_recommend = true;
        else if (!strcmp(a, "--device-limit")) // GiB; streams the interactions when below them
            device_limit_gib = arg_number(a, v, 0.0), i++;
        else {
            fprintf(stderr, "usage: bench_ials [--k LIST] [--iterations N] [--cg-steps S] "
                            "[--exact] [--fp16] [--alpha A] [--lambda L] [--top N] "
                            "[--case NAME[,key=value,...]]... [--scale F] [--seed S] "
                            "[--write DIR] [--no-recommend] [--no-eval] [--device-limit GIB]\n");
            return 2;
        }
    }
    if (specs.empty())
        specs.assign(std::begin(ratings_implicit_names), std::end(ratings_implicit_names));
    const std::vector<ratings_shape> cases =
        ratings_cases("bench_ials", specs, scale, seed, NULL, NULL);
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device_memory_limit = (size_t)(device_limit_gib * (double)(1ull << 30));
    stream_note note = {false, 0, 0};
    co.log = catch_log;
    co.log_user = &note;
    co.log_level = MF_LOG_INFO;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) {
        fprintf(stderr, "bench_ials: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_device_info info;
    info.struct_size = sizeof info;
    MF_CHECK(ctx, mf_ctx_device_info(ctx, &info));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, info.device));
    int clock_khz = 0, mem_khz = 0, bus_bits = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, info.device));
    CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, info.device));
    CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, info.device));
    // FP32 peak: 128 lanes per SM, 2 flops per FMA; HBM: DDR, bus bytes per clock.
    const double fp32_peak = 128.0 * prop.multiProcessorCount * 2.0 * clock_khz * 1e3;
    const double hbm = 2.0 * mem_khz * 1e3 * bus_bits / 8.0;
    printf("bench_ials on %s (FP32 peak %.1f TFLOP/s, HBM %.2f TB/s); %d iterations, CG %d "
           "steps%s%s, alpha %g, lambda %g\n",
           prop.name, fp32_peak / 1e12, hbm / 1e12, iterations, cg_steps,
           solver == MF_ALS_SOLVER_EXACT ? " (exact solver)" : "", fp16 ? ", half factors" : "",
           alpha, lambda);
    for (const ratings_shape &s : cases) {
        const double t0 = now();
        mf_sparse *train = NULL, *test = NULL;
        ratings_stats st;
        const double oracle = load_ratings(ctx, NULL, NULL, s, &train, &test, &st);
        print_ratings_case(ctx, s, st, oracle, train, test, now() - t0);
        if (write_dir) {
            write_split(ctx, write_dir, "train", train);
            write_split(ctx, write_dir, "test", test);
        }
        int32_t users, items;
        MF_CHECK(ctx, mf_sparse_shape(train, &users, &items, NULL));
        printf("| rank | s/iteration | precision@%d | NDCG@%d | MAP | AUC | top-%d all users s | "
               "vs FP32 floor | vs writing the scores |\n|---|---|---|---|---|---|---|---|---|\n",
               top, top, top);
        for (int k : ks) {
            std::vector<float> U((size_t)users * k), V((size_t)items * k);
            mf_ials_opts o;
            mf_ials_opts_init(&o);
            o.rank = k, o.alpha = alpha, o.lambda = lambda, o.cg_steps = cg_steps;
            o.solver = solver;
            o.fp16 = fp16;
            o.iterations = 1; // warm-up: uploads, transpose
            MF_CHECK(ctx, mf_ials_run(ctx, train, &o, U.data(), V.data(), MF_MEMORY_HOST, NULL));
            o.iterations = iterations;
            mf_ials_report rep = {};
            rep.struct_size = sizeof rep;
            note = {false, 0, 0};
            MF_CHECK(ctx, mf_ials_run(ctx, train, &o, U.data(), V.data(), MF_MEMORY_HOST, &rep));
            if (note.streamed)
                printf("(rank %d: interactions streamed from host memory, %d user and %d item "
                       "batches; peak device memory %.2f GiB)\n",
                       k, note.user_batches, note.item_batches,
                       (double)rep.peak_device_bytes / (1 << 30));
            else
                printf("(rank %d: interactions resident on the device)\n", k);
            mf_model m;
            mf_model_init(&m);
            m.users = users, m.items = items, m.k = k;
            m.U = U.data(), m.ldu = k, m.V = V.data(), m.ldv = k;
            mf_ranking r = {};
            r.struct_size = sizeof r;
            r.precision = r.ndcg = r.map = r.auc = NAN;
            if (!skip_eval)
                MF_CHECK(ctx, mf_ranking_evaluate(ctx, &m, train, test, top, &r));
            double rec = NAN;
            if (!skip_recommend) {
                // The factors on the device, as a serving process keeps them; lists to the host.
                float *dU, *dV;
                int32_t *dids;
                CUDA_CHECK(cudaMalloc(&dU, U.size() * 4));
                CUDA_CHECK(cudaMalloc(&dV, V.size() * 4));
                CUDA_CHECK(cudaMalloc(&dids, (size_t)users * 4));
                CUDA_CHECK(cudaMemcpy(dU, U.data(), U.size() * 4, cudaMemcpyHostToDevice));
                CUDA_CHECK(cudaMemcpy(dV, V.data(), V.size() * 4, cudaMemcpyHostToDevice));
                std::vector<int32_t> ids(users);
                for (int32_t u = 0; u < users; u++)
                    ids[u] = u;
                CUDA_CHECK(cudaMemcpy(dids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
                int32_t *items_out;
                float *scores_out;
                CUDA_CHECK(cudaMalloc(&items_out, (size_t)users * top * 4));
                CUDA_CHECK(cudaMalloc(&scores_out, (size_t)users * top * 4));
                mf_model d = m;
                d.U = dU, d.V = dV, d.where = MF_MEMORY_DEVICE;
                std::vector<double> runs;
                for (int t = 0; t < 3; t++) {
                    const double a = now();
                    MF_CHECK(ctx,
                             mf_recommend(ctx, &d, users, dids, train, top, items_out, scores_out));
                    CUDA_CHECK(cudaDeviceSynchronize());
                    runs.push_back(now() - a);
                }
                rec = bench_median(runs);
                cudaFree(dU), cudaFree(dV), cudaFree(dids), cudaFree(items_out),
                    cudaFree(scores_out);
            }
            const double flops = 2.0 * users * (double)items * k;
            if (skip_eval)
                printf("(rank %d: peak device memory %.2f GiB)\n", k,
                       (double)rep.peak_device_bytes / (1 << 30));
            printf("| %d | %.4f | %.4f | %.4f | %.4f | %.4f | %.3f | %.2fx | %.2fx |\n", k,
                   rep.iteration_seconds / rep.iterations, r.precision, r.ndcg, r.map, r.auc, rec,
                   rec / (flops / fp32_peak), rec / (4.0 * users * (double)items / hbm));
            fflush(stdout);
        }
        mf_sparse_destroy(train);
        mf_sparse_destroy(test);
    }
    mf_ctx_destroy(ctx);
    return 0;
}
