// bench_sgd: mf_sgd_hogwild_run on synthetic ratings (synthetic_ratings.h: one table per
// --case NAME[,key=value,...], by default every preset: netflix, lognormal-cap45, zipf,
// dense-users; or --train/--test files in the packed binary triplet format), k = 32, 64,
// 128, 256 with fp32 and fp16 factors. Every row names its case.
//
// Each configuration runs twice in the same process on the same data: mfact's default
// order (MF_SGD_ORDER_USER_CHUNKS: a warp keeps the user's row in registers through a
// chunk of that user's ratings) and cuMF_SGD's order (MF_SGD_ORDER_RATINGS: ratings
// shuffled once, both rows loaded and stored at every update, which is the design of
// cuMF_SGD's kernel, here built on the same code). The peer ratio compares the two; the
// published cuMF_SGD figure on an H100 (3.35 G updates/s, k = 128, fp16) is printed
// beside it for reference, since cuMF_SGD itself cannot be built here.
//
// Per row: seconds per epoch (the epochs alone, the per-epoch RMSE off; each epoch ends
// with one 8-byte copy of its loss, as in a production run), updates per second, test
// RMSE after the epochs, the bytes a single update moves through the memory system
// (factor rows read and written, the rating, the chunk's share of the user row), and that
// traffic over the device's measured copy bandwidth (device-to-device cudaMemcpy, read +
// write): above 1 means the factor rows are served from L2, not from DRAM.
//
// usage: bench_sgd [--k 32,64,128,256] [--epochs N] [--lr R] [--decay B] [--lambda L]
//                  [--case NAME[,key=value,...]]... [--scale F] [--seed S]
//                  [--train FILE --test FILE] [--workers W] [--fp32-only | --fp16-only]
//                  [--no-biases | --both-biases] [--lanes LIST] [--replicas LIST]
//                  [--local-bias LIST] [--repeat N] [--write-cumf DIR]
// --both-biases runs each configuration with and without the bias terms. --lanes takes a
// list of 0 (the engine's rule, the default) and 32 (every user-chunk update on a whole
// warp: the engine before update groups), a row each. --repeat N runs each N times and
// reports the medians (test RMSE: the last run's). --replicas takes a list of -1 (the
// engine's rule, the default), 0 or 1 (none) and counts of working rows per popular item;
// --local-bias a list of -1 (the engine's rule, the default), 0 (item biases in global
// memory) and 1 (in each block's shared memory).
// --scale and --seed apply to the cases that do not set their own.
// --write-cumf DIR also writes the ratings as cuMF_SGD's input files into DIR (cumf_files.h;
// with one --case: every case writes to DIR).
// A malformed number, an unknown case, a k, --epochs or --repeat below 1, --lr <= 0, a
// negative --decay, --lambda or --workers, --scale <= 0, a value outside the lists' sets
// above, --replicas below -1, exclusive options together, or --train without --test ends
// the program with status 2 before any device work (tests/tool/check-bench-args.sh).
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cumf_files.h"
#include "mfact/mfact.h"
#include "sgd/sgd_internal.h" // mf_sgd_debug_lanes (--lanes), _replicas, _local_bias
#include "synthetic_ratings.h"

struct result {
    double epoch_s, ups, test_rmse, bytes;
    int workers;
    int64_t local; // item biases held per block (mf_sgd_debug_local_items), 0: global
    double rest;   // of the ratings, the share whose item had none of those (second pass)
};

static int g_workers = 0; // --workers: 0 = all the device holds at once
static int g_repeat = 1;  // --repeat: runs per configuration, medians reported
static int g_biases = 1;  // the bias terms (bias_modes in main)

static result run(mf_ctx *ctx, mf_sparse *train, mf_sparse *test, int k, bool fp16,
                  mf_sgd_order order, int epochs, float lr, float decay, float lambda)
{
    int32_t users, items;
    int64_t nnz;
    MF_CHECK(ctx, mf_sparse_shape(train, &users, &items, &nnz));
    std::vector<float> U((size_t)users * k), V((size_t)items * k);
    mf_sgd_opts o;
    mf_sgd_opts_init(&o);
    o.rank = k, o.epochs = epochs, o.learning_rate = lr, o.decay = decay;
    o.lambda_u = o.lambda_v = lambda;
    o.storage = fp16 ? MF_SGD_STORAGE_FP16 : MF_SGD_STORAGE_FP32;
    o.order = order;
    o.workers = g_workers;
    o.biases = g_biases;
    o.test = test;
    mf_sgd_report rep;
    rep.struct_size = sizeof rep;
    std::vector<double> secs, ups;
    for (int rep_i = 0; rep_i < g_repeat; rep_i++) {
        MF_CHECK(ctx, mf_sgd_hogwild_run(ctx, train, &o, U.data(), V.data(), MF_MEMORY_HOST, &rep));
        secs.push_back(rep.epoch_seconds / rep.epochs);
        ups.push_back(rep.updates_per_second);
    }
    std::sort(secs.begin(), secs.end());
    std::sort(ups.begin(), ups.end());
    // Traffic of one update: rows are padded to a multiple of 32 elements.
    const int kp = (k + 31) / 32 * 32;
    const double row = (double)kp * (fp16 ? 2 : 4);
    double bytes = 2 * row + 8; // the item row in and out, the (item, rating) entry
    if (order == MF_SGD_ORDER_RATINGS)
        bytes += 2 * row + 4; // the user row in and out, the user index
    // (user chunks: the caller adds the chunk's share of the user row)
    return {secs[secs.size() / 2],
            ups[ups.size() / 2],
            rep.test_rmse,
            bytes,
            rep.workers,
            mf_sgd_debug_local_items,
            nnz > 0 ? (double)mf_sgd_debug_local_rest / (double)nnz : 0.0};
}

int main(int argc, char **argv)
{
    std::vector<int> ks = {32, 64, 128, 256};
    std::vector<int> bias_modes = {1};     // --no-biases: {0}; --both-biases: {1, 0}
    std::vector<int> lanes_list = {0};     // --lanes
    std::vector<int> replicas_list = {-1}; // --replicas
    std::vector<int> local_list = {-1};    // --local-bias
    int epochs = 20;
    float lr = 0.08f, decay = 0.3f, lambda = 0.05f;
    double scale = 1.0;
    uint64_t seed = 1;
    bool fp32_only = false, fp16_only = false, no_biases = false, both_biases = false;
    const char *train_file = NULL, *test_file = NULL, *cumf_dir = NULL;
    std::vector<std::string> specs; // --case
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        // Every value is checked here, before any device work (bench_util.h's arg_*: a bad
        // one exits with status 2 naming it); a missing value reads as "" and is refused.
        if (!strcmp(a, "--k"))
            ks = arg_ints(a, v, 1), i++;
        else if (!strcmp(a, "--epochs")) // at least 1: the table is per epoch
            epochs = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--lr"))
            lr = (float)arg_number(a, v, 0.0, true), i++;
        else if (!strcmp(a, "--decay"))
            decay = (float)arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--lambda"))
            lambda = (float)arg_number(a, v, 0.0), i++;
        else if (!strcmp(a, "--scale"))
            scale = arg_number(a, v, 0.0, true), i++;
        else if (!strcmp(a, "--case"))
            specs.push_back(v), i++;
        else if (!strcmp(a, "--seed"))
            seed = arg_seed(a, v), i++;
        else if (!strcmp(a, "--train"))
            train_file = v, i++;
        else if (!strcmp(a, "--test"))
            test_file = v, i++;
        else if (!strcmp(a, "--write-cumf"))
            cumf_dir = v, i++;
        else if (!strcmp(a, "--workers")) // 0: all the device holds at once
            g_workers = arg_int(a, v, 0), i++;
        else if (!strcmp(a, "--fp32-only"))
            fp32_only = true;
        else if (!strcmp(a, "--fp16-only"))
            fp16_only = true;
        else if (!strcmp(a, "--no-biases"))
            bias_modes = {0}, no_biases = true;
        else if (!strcmp(a, "--both-biases"))
            bias_modes = {1, 0}, both_biases = true;
        else if (!strcmp(a, "--repeat"))
            g_repeat = arg_int(a, v, 1), i++;
        else if (!strcmp(a, "--lanes")) { // the engine knows 32 alone; any other is its rule
            lanes_list = arg_ints(a, v, 0);
            for (int l : lanes_list)
                if (l != 0 && l != 32) {
                    fprintf(stderr, "--lanes: %d in '%s' is not 0 or 32\n", l, v);
                    return 2;
                }
            i++;
        } else if (!strcmp(a, "--replicas")) // -1: the engine's rule; 0 or 1: none
            replicas_list = arg_ints(a, v, -1), i++;
        else if (!strcmp(a, "--local-bias")) // -1: the engine's rule, 0: global, 1: local
            local_list = arg_ints(a, v, -1, 1), i++;
        else {
            fprintf(stderr,
                    "usage: bench_sgd [--k LIST] [--epochs N] [--lr R] [--decay B] "
                    "[--lambda L] [--case NAME[,key=value,...]]... [--scale F] "
                    "[--seed S] [--train FILE --test FILE] [--workers W] "
                    "[--fp32-only | --fp16-only] [--no-biases | --both-biases] [--lanes LIST] "
                    "[--replicas LIST] [--local-bias LIST] "
                    "[--repeat N] [--write-cumf DIR]\n");
            return 2;
        }
    }
    if (fp32_only && fp16_only) { // together they ran nothing
        fprintf(stderr, "bench_sgd: --fp32-only and --fp16-only exclude each other\n");
        return 2;
    }
    if (no_biases && both_biases) { // the last one won
        fprintf(stderr, "bench_sgd: --no-biases and --both-biases exclude each other\n");
        return 2;
    }
    if (!train_file != !test_file) { // one of them alone would be ignored for the presets
        fprintf(stderr, "bench_sgd: --train and --test go together\n");
        return 2;
    }
    const std::vector<ratings_shape> cases =
        ratings_cases("bench_sgd", specs, scale, seed, train_file, test_file);
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) {
        fprintf(stderr, "bench_sgd: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_device_info info;
    info.struct_size = sizeof info;
    MF_CHECK(ctx, mf_ctx_device_info(ctx, &info));
    const double bw = bench_copy_bandwidth(0);
    printf("bench_sgd on %s: lr %g, decay %g, lambda %g, %d epochs; copy bandwidth %.0f GB/s; "
           "%zu case(s)\n",
           info.name, (double)lr, (double)decay, (double)lambda, epochs, bw / 1e9, cases.size());
    printf("cuMF_SGD on an H100 (published in the issue, k = 128, fp16, on Netflix): 3.35 G "
           "updates/s, 0.0296 s per epoch, test RMSE 0.7864 after 20 epochs\n");
    for (const ratings_shape &c : cases) {
        mf_sparse *train = NULL, *test = NULL;
        ratings_stats made = {};
        double t0 = omp_get_wtime();
        double oracle = load_ratings(ctx, train_file, test_file, c, &train, &test, &made);
        if (cumf_dir && cumf_write_split(ctx, train, test, cumf_dir, CUMF_SGD) != 0)
            return 1;
        double seconds = omp_get_wtime() - t0;
        int32_t users;
        int64_t ntrain;
        MF_CHECK(ctx, mf_sparse_shape(train, &users, NULL, &ntrain));
        // The user chunks of MF_SGD_ORDER_USER_CHUNKS: at most 64 ratings of one user each.
        std::vector<int64_t> ptr(users + 1);
        MF_CHECK(ctx, mf_sparse_get_csr(train, ptr.data(), NULL, NULL, MF_MEMORY_HOST));
        int64_t chunks = 0;
        for (int32_t u = 0; u < users; u++)
            chunks += (ptr[u + 1] - ptr[u] + 63) / 64;
        const double per_chunk = (double)chunks / (double)ntrain;
        print_ratings_case(ctx, c, made, oracle, train, test, seconds);
        printf("%.1f ratings per user chunk\n", 1.0 / per_chunk);
        printf(
            "\n| case | k | factors | biases | item biases | order | lanes | replicas | workers | "
            "s / epoch | G updates/s "
            "| vs cuMF order | vs cuMF_SGD 3.35 G | test RMSE | bytes / update | traffic / copy "
            "bandwidth |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int k : ks)
            for (int h = fp16_only ? 1 : 0; h < (fp32_only ? 1 : 2); h++)
                for (int b : bias_modes) {
                    g_biases = b;
                    mf_sgd_debug_lanes = 0;
                    result peer = run(ctx, train, test, k, h, MF_SGD_ORDER_RATINGS, epochs, lr,
                                      decay, lambda);
                    struct row {
                        int lanes, replicas; // lanes -1: the peer order
                        result r;
                    };
                    std::vector<row> rows = {{-1, 0, peer}};
                    // without biases there is nothing to hold locally: one run
                    const std::vector<int> locals = b ? local_list : std::vector<int>{-1};
                    for (int lanes : lanes_list)
                        for (int reps : replicas_list)
                            for (int local : locals) {
                                mf_sgd_debug_lanes = lanes;
                                mf_sgd_debug_replicas = reps;
                                mf_sgd_debug_local_bias = local;
                                result ours = run(ctx, train, test, k, h, MF_SGD_ORDER_USER_CHUNKS,
                                                  epochs, lr, decay, lambda);
                                const double row_bytes = (double)((k + 31) / 32 * 32) * (h ? 2 : 4);
                                ours.bytes += per_chunk * (2 * row_bytes + 8);
                                rows.push_back({lanes, reps, ours});
                            }
                    mf_sgd_debug_lanes = 0;
                    mf_sgd_debug_replicas = -1;
                    mf_sgd_debug_local_bias = -1;
                    for (const row &x : rows) {
                        const bool mine = x.lanes >= 0;
                        char lanes[16], reps[16];
                        snprintf(lanes, sizeof lanes, "%s",
                                 !mine          ? "32"
                                 : x.lanes == 0 ? "rule"
                                                : std::to_string(x.lanes).c_str());
                        snprintf(reps, sizeof reps, "%s",
                                 !mine            ? "-"
                                 : x.replicas < 0 ? "rule"
                                                  : std::to_string(x.replicas).c_str());
                        char rest[48] = "";
                        if (x.r.rest > 0)
                            snprintf(rest, sizeof rest, ", %.1f%% global", 100.0 * x.r.rest);
                        const std::string held =
                            !b              ? "-"
                            : x.r.local > 0 ? "local (" + std::to_string(x.r.local) + rest + ")"
                                            : "global";
                        printf("| %s | %d | %s | %s | %s | %s | %s | %s | %d | %.4f | %.2f | %.2fx "
                               "| %.2fx | %.4f | %.0f | %.2f |\n",
                               c.label.c_str(), k, h ? "fp16" : "fp32", b ? "on" : "off",
                               held.c_str(), mine ? "user chunks" : "ratings (cuMF)", lanes, reps,
                               x.r.workers, x.r.epoch_s, x.r.ups / 1e9, x.r.ups / peer.ups,
                               x.r.ups / 3.35e9, x.r.test_rmse, x.r.bytes,
                               x.r.bytes * x.r.ups / bw);
                    }
                    fflush(stdout);
                }
        mf_sparse_destroy(train);
        mf_sparse_destroy(test);
    }
    mf_ctx_destroy(ctx);
    return 0;
}
