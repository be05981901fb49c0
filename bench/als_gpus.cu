// bench_als_gpus: mf_als_run (or, with --sgd, mf_sgd_hogwild_run; with --asd, mf_asd_run; with
// --ials, mf_ials_run) over
// the GPUs of one host (a
// group of contexts, one per device, mf_ctx_join_local over NCCL) against the same fit on one GPU,
// measured in the same run on the same data: seconds per iteration (the slowest rank's), the
// speed-up over one GPU and its share of the ideal, the test RMSE, and whether every rank returned
// the bits of the one-GPU fit. The one-GPU baseline is an ungrouped context; "1 (NCCL)" is a group
// of one, the cost of the group's bookkeeping alone.
//
// usage: bench_als_gpus [--gpus 1,2,4,8] [--k 100] [--iterations N] [--lambda L] [--repeat R]
//                       [--solver auto|exact|cg] [--case NAME[,key=value,...]]... [--scale F]
//                       [--seed S] [--train FILE --test FILE] [--sgd | --asd | --ials]
// --no-one: no one-GPU baseline (a case one GPU cannot hold): the groups' rows alone.
// --ranks: every group run also prints one line per rank (stderr): its kernels (ALS), wait
// and exchange per iteration, so that a late rank is seen by name (the one that waits least).
// --split: ALS from input split over the ranks (mf_sparse_set_part): rank i of n holds every
// n-th entry only, and the fit moves the entries to their lines' owners.
// --sgd: Hogwild SGD instead (bench_sgd's settings: fp16 factors, biases, lr 0.08, decay 0.3,
// lambda 0.05; --iterations counts epochs). Its group's factors are not one GPU's (Hogwild's
// order differs), so that column says whether the test RMSE is within 0.5% of one GPU's.
// Before its table, the balance of each group's cells (sgd_cell_balance).
// --asd: ASD (Scaled) completing the training ratings at rank k, --iterations iterations (no
// other stop); seconds per iteration from every rank's progress calls (the setup left out;
// the slowest rank's), the relative residual in the RMSE column, and the last column whether
// it is within 0.1% of one GPU's (a group's sums run in another order).
// --ials: implicit ALS (bench_ials's settings: alpha 1, lambda 0.01, CG 3 steps) on the
// training entries as interactions, e.g. --case lastfm; the factors must be one GPU's bit
// for bit, and the RMSE column holds the loss (NaN: not computed).
// Every table also gives the whole call's seconds (the slowest rank's: setup, iterations and
// the factors handed back), so that a setup that does not scale shows.
// The data are bench_als's (synthetic_ratings.h); group sizes above the machine's device
// count are left out. Medians of --repeat fits, each timed over its iterations.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "mfact/mfact.h"
#include "synthetic_ratings.h"

struct host_csr {
    int32_t rows, cols;
    int64_t nnz;
    std::vector<int64_t> ptr;
    std::vector<int32_t> col;
    std::vector<float> val;
};

static host_csr to_host(mf_ctx *ctx, const mf_sparse *m)
{
    host_csr h;
    MF_CHECK(ctx, mf_sparse_shape(m, &h.rows, &h.cols, &h.nnz));
    h.ptr.resize((size_t)h.rows + 1);
    h.col.resize((size_t)h.nnz);
    h.val.resize((size_t)h.nnz);
    MF_CHECK(ctx, mf_sparse_get_csr(m, h.ptr.data(), h.col.data(), h.val.data(), MF_MEMORY_HOST));
    return h;
}

static mf_sparse *from_host(mf_ctx *ctx, const host_csr &h)
{
    mf_sparse *m = NULL;
    MF_CHECK(ctx, mf_sparse_from_csr(ctx, &m, h.rows, h.cols, h.nnz, h.ptr.data(), h.col.data(),
                                     h.val.data(), MF_MEMORY_HOST, 0));
    return m;
}

// --split: rank `part` of `parts` gets every entry p with p % parts == part (not whole rows
// or columns), marked as a part of the split matrix (mf_sparse_set_part).
static mf_sparse *part_from_host(mf_ctx *ctx, const host_csr &h, int part, int parts)
{
    host_csr mine = {h.rows, h.cols, 0, std::vector<int64_t>(1, 0), {}, {}};
    for (int32_t r = 0; r < h.rows; r++) {
        for (int64_t p = h.ptr[r]; p < h.ptr[r + 1]; p++)
            if (p % parts == part) {
                mine.col.push_back(h.col[p]);
                mine.val.push_back(h.val[p]);
            }
        mine.ptr.push_back((int64_t)mine.col.size());
    }
    mine.nnz = (int64_t)mine.col.size();
    mf_sparse *m = from_host(ctx, mine);
    MF_CHECK(ctx, mf_sparse_set_part(m, 1));
    return m;
}
static bool split_input = false;
static bool rank_lines = false; // --ranks

// SGD over g ranks waits, in each of an epoch's g sub-steps, for the slowest cell (rank r's
// users against item block (r + q) mod g). The cells as the library cuts them (users and
// items in shares balanced by entries: mf_partition_rows with no cost a line): the epoch's
// sum over the sub-steps of the largest cell, over the ideal nnz / g. 1.00 is even; 1.10
// means the slowest cells alone cost 10% over a perfect split.
static void shares_by_entries(const std::vector<int64_t> &ptr, int parts, std::vector<int64_t> &b)
{
    const int64_t lines = (int64_t)ptr.size() - 1, total = ptr[lines] - ptr[0];
    b.assign((size_t)parts + 1, lines);
    b[0] = 0;
    for (int p = 1; p < parts; p++) {
        const int64_t target = total / parts * p + total % parts * p / parts;
        b[p] =
            std::lower_bound(ptr.begin() + b[p - 1], ptr.end() - 1, ptr[0] + target) - ptr.begin();
    }
}

static double sgd_cell_balance(const host_csr &h, int g)
{
    std::vector<int64_t> colptr((size_t)h.cols + 1, 0), ub, ib;
    for (int64_t p = 0; p < h.nnz; p++)
        colptr[(size_t)h.col[p] + 1]++;
    for (int32_t j = 0; j < h.cols; j++)
        colptr[(size_t)j + 1] += colptr[j];
    shares_by_entries(h.ptr, g, ub);
    shares_by_entries(colptr, g, ib);
    std::vector<int64_t> cell((size_t)g * g, 0);
    for (int r = 0; r < g; r++)
        for (int64_t p = h.ptr[ub[r]]; p < h.ptr[ub[r + 1]]; p++)
            cell[(size_t)r * g +
                 (size_t)(std::upper_bound(ib.begin(), ib.end(), (int64_t)h.col[p]) - ib.begin() -
                          1)]++;
    double worst = 0.0;
    for (int q = 0; q < g; q++) {
        int64_t most = 0;
        for (int r = 0; r < g; r++)
            most = std::max(most, cell[(size_t)r * g + (r + q) % g]);
        worst += (double)most;
    }
    return h.nnz > 0 ? worst / ((double)h.nnz / g) : 1.0;
}

struct rank_job {
    mf_ctx *ctx;
    mf_sparse *train, *test;
    mf_als_opts o;
    bool sgd, asd, ials;
    mf_ials_opts io;
    mf_ials_report irep;
    mf_sgd_opts so;
    mf_sgd_report srep;
    mf_asd_opts ao;
    mf_asd_report arep;
    std::vector<double> ends;            // ASD: each iteration's end, from the call's start
    std::vector<mf_group_stats> at_ends; // ASD: the group's costs at each iteration's end
    std::vector<float> U, V;
    mf_als_report rep;
    mf_status st;
    double call_seconds;  // the whole call, wall clock
    mf_group_stats group; // what the call's collectives cost this rank (mf_ctx_group_stats)
};

// ctx's group stats now (zeros outside a group).
static mf_group_stats group_stats(mf_ctx *ctx)
{
    mf_group_stats g = {};
    g.struct_size = sizeof g;
    MF_CHECK(ctx, mf_ctx_group_stats(ctx, &g));
    return g;
}

static void *run_rank(void *arg)
{
    rank_job *j = (rank_job *)arg;
    j->o.test = j->so.test = j->test;
    j->rep.struct_size = sizeof j->rep;
    j->srep.struct_size = sizeof j->srep;
    const mf_group_stats before = group_stats(j->ctx);
    const double start = omp_get_wtime();
    if (j->asd) {
        j->ao.test = NULL; // a test set would be measured every iteration (progress)
        j->arep.struct_size = sizeof j->arep;
        j->st = mf_asd_run(j->ctx, j->train, &j->ao, j->U.data(), j->V.data(), MF_MEMORY_HOST,
                           &j->arep);
        const size_t n = j->ends.size();
        j->rep.iterations = n > 1 ? (int)n - 1 : 1;
        j->rep.iteration_seconds = n > 1 ? j->ends[n - 1] - j->ends[0] : j->arep.seconds;
        j->rep.test_rmse = j->arep.relative_residual;
        j->rep.peak_device_bytes = j->arep.peak_device_bytes;
    } else if (j->ials) {
        j->irep.struct_size = sizeof j->irep;
        j->st = mf_ials_run(j->ctx, j->train, &j->io, j->U.data(), j->V.data(), MF_MEMORY_HOST,
                            &j->irep);
        j->rep.iterations = j->irep.iterations;
        j->rep.iteration_seconds = j->irep.iteration_seconds;
        j->rep.test_rmse = j->irep.loss;
        j->rep.peak_device_bytes = j->irep.peak_device_bytes;
    } else if (j->sgd) {
        j->st = mf_sgd_hogwild_run(j->ctx, j->train, &j->so, j->U.data(), j->V.data(),
                                   MF_MEMORY_HOST, &j->srep);
        j->rep.iterations = j->srep.epochs; // as ALS reports them, for the table
        j->rep.iteration_seconds = j->srep.epoch_seconds;
        j->rep.test_rmse = j->srep.test_rmse;
        j->rep.peak_device_bytes = j->srep.peak_device_bytes;
    } else {
        j->st =
            mf_als_run(j->ctx, j->train, &j->o, j->U.data(), j->V.data(), MF_MEMORY_HOST, &j->rep);
    }
    j->call_seconds = omp_get_wtime() - start;
    j->group = group_stats(j->ctx);
    j->group.wait_seconds -= before.wait_seconds;
    j->group.exchange_seconds -= before.exchange_seconds;
    j->group.exchange_bytes -= before.exchange_bytes;
    j->group.calls -= before.calls;
    if (!j->asd && !j->ials && !j->sgd) { // ALS reports its iterations' share alone
        j->group.wait_seconds = j->rep.group_wait_seconds;
        j->group.exchange_seconds = j->rep.group_exchange_seconds;
    } else if (j->asd && j->at_ends.size() > 1) { // from the first iteration's end to the last
        const mf_group_stats &a = j->at_ends.front(), &b = j->at_ends.back();
        j->group.wait_seconds = b.wait_seconds - a.wait_seconds;
        j->group.exchange_seconds = b.exchange_seconds - a.exchange_seconds;
    }
    return NULL;
}

static mf_ctx *ctx_on(int device)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device = device;
    co.seed = 1;
    mf_ctx *ctx = NULL;
    return mf_ctx_create(&ctx, &co) == MF_OK ? ctx : NULL;
}

struct fit_result {
    double seconds_per_iteration; // the slowest rank's
    double call_seconds;          // the slowest rank's whole call
    double test_rmse;
    double peak_gib; // the largest rank's peak device memory during the call
    // ALS: each rank's own device work per iteration (its Gram and solve kernels, timed by
    // events: mf_als_report's gram_seconds + solve_seconds), least and most over the ranks.
    // The most against the iteration shows the exchange and waits; the spread, imbalance.
    double compute_min, compute_max;
    // Per iteration, the most over the ranks: host time in agreements (waiting for the
    // slowest rank included) and the exchanges' time; ALS's over its iterations alone
    // (mf_als_report), the others' over the whole call, setup included (mf_group_stats).
    double wait_min, wait_max, exchange_max; // wait: least and most (imbalance vs latency)
    bool same_on_ranks;                      // every rank returned rank 0's factors
    std::vector<float> U, V;                 // rank 0's
};

// One fit over `ranks` devices (0: one ungrouped context on device 0).
static int record_end(void *user, const mf_progress *p)
{
    rank_job *j = (rank_job *)user;
    j->ends.push_back(p->seconds);
    j->at_ends.push_back(group_stats(j->ctx));
    return 0;
}

static fit_result fit(int ranks, const host_csr &train, const host_csr &test, const mf_als_opts &o,
                      const mf_sgd_opts *so, const mf_asd_opts *ao, const mf_ials_opts *io)
{
    const int n = ranks > 0 ? ranks : 1;
    std::vector<rank_job> jobs(n);
    std::vector<mf_ctx *> ctxs(n);
    for (int i = 0; i < n; i++) {
        ctxs[i] = ctx_on(i);
        if (!ctxs[i]) {
            fprintf(stderr, "bench_als_gpus: device %d: %s\n", i, mf_ctx_last_error(NULL));
            exit(1);
        }
        jobs[i].ctx = ctxs[i];
        jobs[i].o = o;
        jobs[i].sgd = so != NULL;
        jobs[i].ials = io != NULL;
        if (io)
            jobs[i].io = *io;
        if (so)
            jobs[i].so = *so;
        jobs[i].asd = ao != NULL;
        if (ao) {
            jobs[i].ao = *ao;
            // Every rank times its iterations (a rank without a progress call would report
            // its whole call as one iteration).
            jobs[i].ao.progress = record_end, jobs[i].ao.progress_user = &jobs[i];
        }
        jobs[i].U.resize((size_t)train.rows * o.rank);
        jobs[i].V.resize((size_t)train.cols * o.rank);
    }
    // The ranks' matrices are built side by side (each build uses every core): for billions
    // of ratings, one after another took minutes before any fit began.
    std::vector<std::thread> builders;
    for (int i = 0; i < n; i++)
        builders.emplace_back([&, i] {
            jobs[i].train = split_input && ranks > 1 ? part_from_host(ctxs[i], train, i, n)
                                                     : from_host(ctxs[i], train);
            jobs[i].test = from_host(ctxs[i], test);
        });
    for (std::thread &b : builders)
        b.join();
    if (ranks > 0)
        MF_CHECK(ctxs[0], mf_ctx_join_local(ctxs.data(), n));
    std::vector<pthread_t> threads(n);
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, run_rank, &jobs[i]);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    fit_result r = {
        0.0,       0.0,      jobs[0].rep.test_rmse, 0.0, 1e300, 0.0, 1e300, 0.0, 0.0, true,
        jobs[0].U, jobs[0].V};
    for (int i = 0; i < n; i++) {
        if (jobs[i].st != MF_OK) {
            fprintf(stderr, "bench_als_gpus: rank %d: %s\n", i, mf_ctx_last_error(ctxs[i]));
            exit(1);
        }
        r.seconds_per_iteration = std::max(r.seconds_per_iteration,
                                           jobs[i].rep.iteration_seconds / jobs[i].rep.iterations);
        r.call_seconds = std::max(r.call_seconds, jobs[i].call_seconds);
        r.peak_gib = std::max(r.peak_gib, jobs[i].rep.peak_device_bytes / 1073741824.0);
        const double compute = (jobs[i].rep.gram_seconds + jobs[i].rep.solve_seconds) /
                               std::max(1, jobs[i].rep.iterations);
        r.compute_min = std::min(r.compute_min, compute);
        r.compute_max = std::max(r.compute_max, compute);
        const int its = std::max(1, jobs[i].rep.iterations);
        r.wait_min = std::min(r.wait_min, jobs[i].group.wait_seconds / its);
        r.wait_max = std::max(r.wait_max, jobs[i].group.wait_seconds / its);
        r.exchange_max = std::max(r.exchange_max, jobs[i].group.exchange_seconds / its);
        r.same_on_ranks = r.same_on_ranks && jobs[i].U == jobs[0].U && jobs[i].V == jobs[0].V;
        if (rank_lines && ranks > 0)
            fprintf(stderr,
                    "  %d GPUs, rank %d: %.4f s / it, kernels %.4f, wait %.4f, exchange %.4f\n", n,
                    i, jobs[i].rep.iteration_seconds / its, compute,
                    jobs[i].group.wait_seconds / its, jobs[i].group.exchange_seconds / its);
    }
    for (int i = 0; i < n; i++) {
        mf_sparse_destroy(jobs[i].train);
        mf_sparse_destroy(jobs[i].test);
    }
    for (int i = 0; i < n; i++)
        mf_ctx_destroy(ctxs[i]);
    return r;
}

// "0.0123 - 0.0131", or "-" where the algorithm does not report its device work (all but ALS).
static std::string compute_span(const fit_result &r)
{
    if (r.compute_max <= 0.0)
        return "-";
    char b[64];
    snprintf(b, sizeof b, "%.4f - %.4f", r.compute_min, r.compute_max);
    return b;
}

// "0.0004 - 0.0011 / 0.0023": the least and most wait and the most exchange seconds per
// iteration over the ranks (a spread of waits is imbalance, equal waits latency).
static std::string group_span(const fit_result &r)
{
    char b[80];
    snprintf(b, sizeof b, "%.4f - %.4f / %.4f", r.wait_min, r.wait_max, r.exchange_max);
    return b;
}

static fit_result median_fit(int ranks, int repeat, const host_csr &train, const host_csr &test,
                             const mf_als_opts &o, const mf_sgd_opts *so, const mf_asd_opts *ao,
                             const mf_ials_opts *io)
{
    std::vector<fit_result> runs;
    for (int r = 0; r < repeat; r++)
        runs.push_back(fit(ranks, train, test, o, so, ao, io));
    std::sort(runs.begin(), runs.end(), [](const fit_result &a, const fit_result &b) {
        return a.seconds_per_iteration < b.seconds_per_iteration;
    });
    return runs[runs.size() / 2];
}

int main(int argc, char **argv)
{
    std::vector<int> gpus = {1, 2, 4, 8}, ks = {100};
    int iterations = 10, repeat = 3;
    float lambda = 0.048f; // bench_als's (cuMF_als's Netflix setting)
    mf_als_solver solver = MF_ALS_SOLVER_AUTO;
    double scale = 1.0;
    uint64_t seed = 2024;
    const char *train_file = NULL, *test_file = NULL;
    bool sgd = false, asd = false, ials = false, baseline = true;
    std::vector<std::string> specs;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--gpus"))
            gpus = parse_ints(argv[++i]);
        else if (!strcmp(a, "--k"))
            ks = parse_ints(argv[++i]);
        else if (!strcmp(a, "--iterations"))
            iterations = atoi(argv[++i]);
        else if (!strcmp(a, "--lambda"))
            lambda = (float)atof(argv[++i]);
        else if (!strcmp(a, "--repeat"))
            repeat = atoi(argv[++i]);
        else if (!strcmp(a, "--solver")) {
            i++;
            solver = !strcmp(v, "exact") ? MF_ALS_SOLVER_EXACT
                     : !strcmp(v, "cg")  ? MF_ALS_SOLVER_CG
                                         : MF_ALS_SOLVER_AUTO;
        } else if (!strcmp(a, "--case"))
            specs.push_back(argv[++i]);
        else if (!strcmp(a, "--scale"))
            scale = atof(argv[++i]);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--train"))
            train_file = argv[++i];
        else if (!strcmp(a, "--test"))
            test_file = argv[++i];
        else if (!strcmp(a, "--split"))
            split_input = true;
        else if (!strcmp(a, "--no-one"))
            baseline = false;
        else if (!strcmp(a, "--ranks"))
            rank_lines = true;
        else if (!strcmp(a, "--sgd"))
            sgd = true;
        else if (!strcmp(a, "--ials"))
            ials = true;
        else if (!strcmp(a, "--asd"))
            asd = true;
        else {
            fprintf(stderr,
                    "usage: bench_als_gpus [--gpus LIST] [--k LIST] [--iterations N] [--lambda L] "
                    "[--repeat R] [--solver auto|exact|cg] [--case NAME[,key=value,...]]... "
                    "[--scale F] [--seed S] [--train FILE --test FILE] [--split] [--no-one] "
                    "[--ranks] [--sgd | --asd | --ials]\n");
            return 2;
        }
    }
    if (specs.empty() && !train_file)
        specs.push_back("netflix");
    int devices = 0;
    for (mf_ctx *c; devices < 64 && (c = ctx_on(devices)) != NULL; devices++)
        mf_ctx_destroy(c);
    if (devices == 0) {
        fprintf(stderr, "bench_als_gpus: no CUDA device: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_ctx *ctx = ctx_on(0);
    mf_device_info info;
    info.struct_size = sizeof info;
    MF_CHECK(ctx, mf_ctx_device_info(ctx, &info));
    printf("bench_als_gpus: %d x %s; lambda %g (weighted), %d iterations, medians of %d\n", devices,
           info.name, lambda, iterations, repeat);
    const std::vector<ratings_shape> cases =
        ratings_cases("bench_als_gpus", specs, scale, seed, train_file, test_file);
    for (const ratings_shape &c : cases) {
        mf_sparse *train = NULL, *test = NULL;
        ratings_stats made = {};
        double t0 = omp_get_wtime();
        double oracle = load_ratings(ctx, train_file, test_file, c, &train, &test, &made);
        print_ratings_case(ctx, c, made, oracle, train, test, omp_get_wtime() - t0);
        const host_csr htrain = to_host(ctx, train), htest = to_host(ctx, test);
        mf_sparse_destroy(train);
        mf_sparse_destroy(test);
        for (int g : gpus)
            if (sgd && g > 1 && g <= devices)
                printf("SGD cells over %d GPUs: the sub-steps' largest cells sum to %.3f x nnz / "
                       "%d\n",
                       g, sgd_cell_balance(htrain, g), g);
        printf("\n%s\n| case | k | GPUs | s / iteration | speed-up over 1 GPU | of ideal | "
               "whole call s | peak GiB / GPU | rank compute s / it, least - most | "
               "group wait least - most / exchange most, s / it (ALS, ASD: iterations; others: "
               "call) | test RMSE | "
               "ranks agree | factors = 1 GPU's "
               "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
               asd    ? "ASD (Scaled; the RMSE column holds the relative residual)"
               : sgd  ? "Hogwild SGD (an iteration is an epoch)"
               : ials ? "implicit ALS (the RMSE column holds the loss)"
                      : "ALS");
        for (int k : ks) {
            mf_als_opts o;
            mf_als_opts_init(&o);
            o.rank = k, o.lambda = lambda, o.iterations = iterations;
            o.weighting = MF_ALS_WEIGHT_COUNT, o.lambda_bias = lambda, o.solver = solver;
            mf_sgd_opts so;
            mf_sgd_opts_init(&so);
            so.rank = k, so.epochs = iterations, so.learning_rate = 0.08f, so.decay = 0.3f;
            so.lambda_u = so.lambda_v = so.lambda_bias = 0.05f;
            so.storage = MF_SGD_STORAGE_FP16;
            const mf_sgd_opts *use_sgd = sgd ? &so : NULL;
            mf_ials_opts io;
            mf_ials_opts_init(&io);
            io.rank = k, io.iterations = iterations, io.alpha = 1.0f, io.lambda = 0.01f;
            io.cg_steps = 3;
            const mf_ials_opts *use_ials = ials ? &io : NULL;
            mf_asd_opts ao;
            mf_asd_opts_init(&ao);
            ao.rank = k, ao.max_iterations = iterations, ao.tolerance = 1e-12;
            ao.stagnation_window = 0;
            const mf_asd_opts *use_asd = asd ? &ao : NULL;
            fit_result one = {};
            if (baseline) {
                one = median_fit(0, repeat, htrain, htest, o, use_sgd, use_asd, use_ials);
                printf("| %s | %d | 1 | %.4f | 1.00x | 100%% | %.3f | %.2f | %s | - | %.4f | - | - "
                       "|\n",
                       c.label.c_str(), k, one.seconds_per_iteration, one.call_seconds,
                       one.peak_gib, compute_span(one).c_str(), one.test_rmse);
                fflush(stdout);
            }
            for (int g : gpus) {
                if (g > devices)
                    continue;
                const fit_result r =
                    median_fit(g, repeat, htrain, htest, o, use_sgd, use_asd, use_ials);
                if (!baseline) { // the group alone: nothing to compare with
                    printf("| %s | %d | %d | %.4f | - | - | %.3f | %.2f | %s | %s | %.4f | %s | - "
                           "|\n",
                           c.label.c_str(), k, g, r.seconds_per_iteration, r.call_seconds,
                           r.peak_gib, compute_span(r).c_str(), group_span(r).c_str(), r.test_rmse,
                           r.same_on_ranks ? "yes" : "NO");
                    fflush(stdout);
                    continue;
                }
                const double speedup = one.seconds_per_iteration / r.seconds_per_iteration;
                printf("| %s | %d | %d%s | %.4f | %.2fx | %.0f%% | %.3f | %.2f | %s | %s | %.4f | "
                       "%s | %s |\n",
                       c.label.c_str(), k, g, g == 1 ? " (NCCL)" : "", r.seconds_per_iteration,
                       speedup, 100.0 * speedup / g, r.call_seconds, r.peak_gib,
                       compute_span(r).c_str(), group_span(r).c_str(), r.test_rmse,
                       r.same_on_ranks ? "yes" : "NO",
                       asd   ? (fabs(r.test_rmse / one.test_rmse - 1) <= 0.001
                                    ? "residual within 0.1%"
                                    : "residual NOT within 0.1%")
                       : sgd ? (fabs(r.test_rmse / one.test_rmse - 1) <= 0.005
                                    ? "RMSE within 0.5%"
                                    : "RMSE NOT within 0.5%")
                       : r.U == one.U && r.V == one.V ? "yes"
                                                      : "NO");
                fflush(stdout);
            }
        }
    }
    mf_ctx_destroy(ctx);
    return 0;
}
