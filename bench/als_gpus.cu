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
//                       [--split] [--no-one] [--ranks] [--baseline-out FILE]
//                       [--layout auto|replicated|sharded] [--log]
//        (under a launcher) bench_als_gpus --launched [--launched-out DIR] [--baseline-in FILE]
//                       [the same case and fit options; --gpus is the launcher's]
// A malformed number, an unknown name or case, a group size, k, --iterations or --repeat
// below 1, a negative --lambda, --scale <= 0, two of --sgd, --asd and --ials, or --train
// without --test ends the program with status 2 before any device work
// (tests/tool/check-bench-args.sh).
// --log: the contexts log to stderr at MF_LOG_INFO (ALS: each phase of a fit and its seconds,
// per rank: where a setup of minutes goes).
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
//
// --launched: one process per GPU, started by torchrun, mpirun or srun (what users run; in one
// process the CUDA driver and NCCL serialize some host calls across the ranks' threads:
// docs/scaling.md). Each process reads its rank, the group's size and its device (the local
// rank) from the launcher's environment (mf_launch_detect), makes one context there, joins
// the others (mf_ctx_join_launched; the rendezvous file is MFACT_RENDEZVOUS or DIR/rendezvous),
// builds the same data as every rank (the generators are deterministic by seed; with --split
// it keeps its part) and runs the same --repeat fits on that one context, its cached pool
// memory given back before each (as a fresh context's). The library offers no public
// collective for a few host numbers, so each rank writes its numbers of a case and k to a
// file in DIR (--launched-out, default /tmp/bench_als_gpus-UID: one host, or a shared file
// system), and rank 0 reads every rank's (they leave the collective fit together) and prints
// the group's row as the in-process table does: the slowest rank's seconds, the largest peak,
// whether every rank's factors hash to rank 0's. Only rank 0 prints. The whole call includes
// waiting in the fit's first agreement for the last rank to have built its matrices.
// A launched group cannot hold an ungrouped one-GPU fit, so the baseline is a separate
// invocation in the same command: `bench_als_gpus --gpus 1,2,4 --baseline-out FILE ...` writes
// its one-GPU rows (seconds, RMSE, a hash of the factors) to FILE, and `torchrun
// --nproc_per_node 4 bench_als_gpus --launched --baseline-in FILE ...` with the same case,
// k and settings prints them as its "1 (FILE)" row and its speed-up and last column against
// them; without --baseline-in (or a row of the same key) those columns are "-". One launch
// at a time per DIR. torchrun sets OMP_NUM_THREADS=1 where it is unset: each rank's data are
// then generated on one core (give it cores / ranks).
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "als_gpus.h"
#include "bench_util.h"
#include "mfact/mfact.h"
#include "synthetic_ratings.h"

host_csr to_host(mf_ctx *ctx, const mf_sparse *m)
{
    host_csr h;
    MF_CHECK(ctx, mf_sparse_shape(m, &h.rows, &h.cols, &h.nnz));
    h.ptr.resize((size_t)h.rows + 1);
    h.col.resize((size_t)h.nnz);
    h.val.resize((size_t)h.nnz);
    MF_CHECK(ctx, mf_sparse_get_csr(m, h.ptr.data(), h.col.data(), h.val.data(), MF_MEMORY_HOST));
    return h;
}

mf_sparse *from_host(mf_ctx *ctx, const host_csr &h)
{
    mf_sparse *m = NULL;
    MF_CHECK(ctx, mf_sparse_from_csr(ctx, &m, h.rows, h.cols, h.nnz, h.ptr.data(), h.col.data(),
                                     h.val.data(), MF_MEMORY_HOST, 0));
    return m;
}

// --split: rank `part` of `parts` gets every entry p with p % parts == part (not whole rows
// or columns), marked as a part of the split matrix (mf_sparse_set_part).
mf_sparse *part_from_host(mf_ctx *ctx, const host_csr &h, int part, int parts)
{
    // Entry p is kept when p % parts == part: the kept entries before p number upto(p), so
    // every row's offset and every kept entry's place are known without a pass (3 billion
    // ratings a rank took most of a minute one by one).
    const int64_t pt = part, n = parts;
    auto upto = [&](int64_t x) { return x <= pt ? (int64_t)0 : (x - 1 - pt) / n + 1; };
    host_csr mine = {h.rows, h.cols, upto(h.nnz), std::vector<int64_t>((size_t)h.rows + 1), {}, {}};
    mine.col.resize((size_t)mine.nnz);
    mine.val.resize((size_t)mine.nnz);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r <= (int64_t)h.rows; r++)
        mine.ptr[(size_t)r] = upto(h.ptr[(size_t)r]);
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < mine.nnz; q++) {
        mine.col[(size_t)q] = h.col[(size_t)(q * n + pt)];
        mine.val[(size_t)q] = h.val[(size_t)(q * n + pt)];
    }
    mf_sparse *m = from_host(ctx, mine);
    MF_CHECK(ctx, mf_sparse_set_part(m, 1));
    return m;
}

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

double sgd_cell_balance(const host_csr &h, int g)
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

// ctx's group stats now (zeros outside a group).
static mf_group_stats group_stats(mf_ctx *ctx)
{
    mf_group_stats g = {};
    g.struct_size = sizeof g;
    MF_CHECK(ctx, mf_ctx_group_stats(ctx, &g));
    return g;
}

void *run_rank(void *arg)
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

bool bench_log = false;

// --log: the library's messages (MF_LOG_INFO: the phases of a fit) to stderr, with the time.
static void log_to_stderr(void *, mf_log_level, const char *message)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(stderr, "[%lld.%03ld] %s\n", (long long)t.tv_sec, t.tv_nsec / 1000000, message);
}

mf_ctx *ctx_on(int device)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    co.device = device;
    co.seed = 1;
    if (bench_log)
        co.log = log_to_stderr, co.log_level = MF_LOG_INFO;
    mf_ctx *ctx = NULL;
    return mf_ctx_create(&ctx, &co) == MF_OK ? ctx : NULL;
}

static const char *algorithm_name(const fit_opts &f)
{
    return f.asd ? "asd" : f.sgd ? "sgd" : f.ials ? "ials" : "als";
}

static int record_end(void *user, const mf_progress *p)
{
    rank_job *j = (rank_job *)user;
    j->ends.push_back(p->seconds);
    j->at_ends.push_back(group_stats(j->ctx));
    return 0;
}

// A job on ctx with f's options and room for the factors; the matrices are the caller's.
void setup_job(rank_job *j, mf_ctx *ctx, const fit_opts &f, const host_csr &train)
{
    j->ctx = ctx;
    j->o = f.o;
    j->sgd = f.sgd, j->so = f.so;
    j->ials = f.ials, j->io = f.io;
    j->asd = f.asd, j->ao = f.ao;
    if (f.asd) // every rank times its iterations (a rank without a progress call would
               // report its whole call as one iteration)
        j->ao.progress = record_end, j->ao.progress_user = j;
    j->U.resize((size_t)train.rows * f.o.rank);
    j->V.resize((size_t)train.cols * f.o.rank);
}

// A rank's numbers from its finished job (the factors' hash left to the caller).
rank_stats stats_of(const rank_job &j)
{
    const int its = std::max(1, j.rep.iterations);
    rank_stats s = {};
    s.seconds_per_iteration = j.rep.iteration_seconds / j.rep.iterations;
    s.call_seconds = j.call_seconds;
    s.peak_gib = j.rep.peak_device_bytes / 1073741824.0;
    s.compute = (j.rep.gram_seconds + j.rep.solve_seconds) / its;
    s.wait = j.group.wait_seconds / its;
    s.exchange = j.group.exchange_seconds / its;
    s.test_rmse = j.rep.test_rmse;
    s.sharded = !j.sgd && !j.asd && !j.ials && j.rep.layout == MF_ALS_LAYOUT_USERS_SHARDED;
    s.workers = j.sgd ? j.srep.workers : 0;
    return s;
}

fit_result start_fit(double test_rmse)
{
    fit_result r = {};
    r.test_rmse = test_rmse;
    r.compute_min = r.wait_min = 1e300;
    r.same_on_ranks = true;
    return r;
}

// Folds rank s into the group's numbers: the slowest, the largest, least and most.
void add_rank(fit_result *r, const rank_stats &s)
{
    r->seconds_per_iteration = std::max(r->seconds_per_iteration, s.seconds_per_iteration);
    r->call_seconds = std::max(r->call_seconds, s.call_seconds);
    r->peak_gib = std::max(r->peak_gib, s.peak_gib);
    r->sharded = r->sharded || s.sharded;
    r->compute_min = std::min(r->compute_min, s.compute);
    r->compute_max = std::max(r->compute_max, s.compute);
    r->wait_min = std::min(r->wait_min, s.wait);
    r->wait_max = std::max(r->wait_max, s.wait);
    r->exchange_max = std::max(r->exchange_max, s.exchange);
}

// --ranks: one rank's line (stderr), so that a late rank is seen by name.
void print_rank_line(int n, int i, const rank_stats &s)
{
    fprintf(stderr, "  %d GPUs, rank %d: %.4f s / it, kernels %.4f, wait %.4f, exchange %.4f", n, i,
            s.seconds_per_iteration, s.compute, s.wait, s.exchange);
    if (s.workers > 0) // SGD: the waves rule's cap shows here (sgd.c)
        fprintf(stderr, ", workers %d", s.workers);
    fputc('\n', stderr);
}

// One fit over `ranks` devices (0: one ungrouped context on device 0).
static fit_result fit(int ranks, const host_csr &train, const host_csr &test, const fit_opts &f)
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
        setup_job(&jobs[i], ctxs[i], f, train);
    }
    // The ranks' matrices are built side by side (each build uses every core): for billions
    // of ratings, one after another took minutes before any fit began.
    std::vector<std::thread> builders;
    for (int i = 0; i < n; i++)
        builders.emplace_back([&, i] {
            jobs[i].train = f.split && ranks > 1 ? part_from_host(ctxs[i], train, i, n)
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
    fit_result r = start_fit(jobs[0].rep.test_rmse);
    r.U = jobs[0].U, r.V = jobs[0].V;
    for (int i = 0; i < n; i++) {
        if (jobs[i].st != MF_OK) {
            fprintf(stderr, "bench_als_gpus: rank %d: %s\n", i, mf_ctx_last_error(ctxs[i]));
            exit(1);
        }
        const rank_stats s = stats_of(jobs[i]);
        add_rank(&r, s);
        r.same_on_ranks = r.same_on_ranks && jobs[i].U == jobs[0].U && jobs[i].V == jobs[0].V;
        if (f.rank_lines && ranks > 0)
            print_rank_line(n, i, s);
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

// The run of median seconds per iteration.
fit_result median_of(std::vector<fit_result> runs)
{
    std::sort(runs.begin(), runs.end(), [](const fit_result &a, const fit_result &b) {
        return a.seconds_per_iteration < b.seconds_per_iteration;
    });
    return runs[runs.size() / 2];
}

static fit_result median_fit(int ranks, int repeat, const host_csr &train, const host_csr &test,
                             const fit_opts &f)
{
    std::vector<fit_result> runs;
    for (int r = 0; r < repeat; r++)
        runs.push_back(fit(ranks, train, test, f));
    return median_of(runs);
}

fit_opts make_opts(const bench_args &a, int k)
{
    fit_opts f;
    f.sgd = a.sgd, f.asd = a.asd, f.ials = a.ials;
    f.split = a.split, f.rank_lines = a.rank_lines;
    mf_als_opts_init(&f.o);
    f.o.rank = k, f.o.lambda = a.lambda, f.o.iterations = a.iterations;
    f.o.weighting = MF_ALS_WEIGHT_COUNT, f.o.lambda_bias = a.lambda, f.o.solver = a.solver;
    f.o.layout = a.layout;
    mf_sgd_opts_init(&f.so);
    f.so.rank = k, f.so.epochs = a.iterations, f.so.learning_rate = 0.08f, f.so.decay = 0.3f;
    f.so.lambda_u = f.so.lambda_v = f.so.lambda_bias = 0.05f;
    f.so.storage = MF_SGD_STORAGE_FP16;
    mf_ials_opts_init(&f.io);
    f.io.rank = k, f.io.iterations = a.iterations, f.io.alpha = 1.0f, f.io.lambda = 0.01f;
    f.io.cg_steps = 3;
    mf_asd_opts_init(&f.ao);
    f.ao.rank = k, f.ao.max_iterations = a.iterations, f.ao.tolerance = 1e-12;
    f.ao.stagnation_window = 0;
    return f;
}

// What a one-GPU row of --baseline-out must share with a launched row to be its baseline.
std::string baseline_key(const bench_args &a, const fit_opts &f, const std::string &label, int k)
{
    char b[256];
    snprintf(b, sizeof b, " k=%d iterations=%d lambda=%g solver=%d scale=%g seed=%llu", k,
             a.iterations, a.lambda, (int)a.solver, a.scale, (unsigned long long)a.seed);
    return std::string(algorithm_name(f)) + " " + label + b;
}

void print_table_head(const fit_opts &f, const char *speedup_title)
{
    printf("\n%s\n| case | k | GPUs | s / iteration | %s | of ideal | "
           "whole call s | peak GiB / GPU | rank compute s / it, least - most | "
           "group wait least - most / exchange most, s / it (ALS, ASD: iterations; others: "
           "call) | test RMSE | "
           "ranks agree | factors = 1 GPU's "
           "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
           f.asd    ? "ASD (Scaled; the RMSE column holds the relative residual)"
           : f.sgd  ? "Hogwild SGD (an iteration is an epoch)"
           : f.ials ? "implicit ALS (the RMSE column holds the loss)"
                    : "ALS",
           speedup_title);
}

// The last metric column: "-" where the fit reports none (iALS without its loss measured
// reports NaN).
static std::string metric(double v)
{
    char b[32] = "-";
    if (isfinite(v))
        snprintf(b, sizeof b, "%.4f", v);
    return b;
}

// The one-GPU row: `compute` is "-" where unknown (a baseline read from a file).
void print_one_row(const std::string &label, int k, const char *gpus, double spi,
                   double call_seconds, double peak_gib, const std::string &compute,
                   double test_rmse)
{
    printf("| %s | %d | %s | %.4f | 1.00x | 100%% | %.3f | %.2f | %s | - | %s | - | - |\n",
           label.c_str(), k, gpus, spi, call_seconds, peak_gib, compute.c_str(),
           metric(test_rmse).c_str());
    fflush(stdout);
}

// A group's row of g GPUs against one GPU's seconds and RMSE (one_spi <= 0: no baseline, so
// the speed-up and last columns are "-"). same_bits: the group's factors are one GPU's.
void print_group_row(const std::string &label, int k, const std::string &gpus, int g,
                     const fit_result &r, const fit_opts &f, double one_spi, double one_rmse,
                     bool same_bits)
{
    char speed[32] = "-", ideal[16] = "-";
    const char *last = "-";
    if (one_spi > 0) {
        const double speedup = one_spi / r.seconds_per_iteration;
        snprintf(speed, sizeof speed, "%.2fx", speedup);
        snprintf(ideal, sizeof ideal, "%.0f%%", 100.0 * speedup / g);
        last = f.asd   ? (fabs(r.test_rmse / one_rmse - 1) <= 0.001 ? "residual within 0.1%"
                                                                    : "residual NOT within 0.1%")
               : f.sgd ? (fabs(r.test_rmse / one_rmse - 1) <= 0.005 ? "RMSE within 0.5%"
                                                                    : "RMSE NOT within 0.5%")
               : r.sharded
                   ? (fabs(r.test_rmse / one_rmse - 1) <= 1e-4 ? "sharded: RMSE within 0.01%"
                                                               : "sharded: RMSE NOT within 0.01%")
               : same_bits ? "yes"
                           : "NO";
    }
    printf("| %s | %d | %s | %.4f | %s | %s | %.3f | %.2f | %s | %s | %s | %s | %s |\n",
           label.c_str(), k, gpus.c_str(), r.seconds_per_iteration, speed, ideal, r.call_seconds,
           r.peak_gib, compute_span(r).c_str(), group_span(r).c_str(), metric(r.test_rmse).c_str(),
           r.same_on_ranks ? "yes" : "NO", last);
    fflush(stdout);
}

// A switch of the command line: its name, what it sets and to what.
struct switch_arg {
    const char *name;
    bool *flag, value;
};

// Sets the switch named `name`; false when none is.
static bool set_switch(const std::vector<switch_arg> &switches, const char *name)
{
    for (const switch_arg &s : switches)
        if (!strcmp(s.name, name)) {
            *s.flag = s.value;
            return true;
        }
    return false;
}

int main(int argc, char **argv)
{
    bench_args a;
    std::vector<std::string> specs;
    const std::vector<switch_arg> switches = {
        {"--log", &bench_log, true},      {"--split", &a.split, true},
        {"--no-one", &a.baseline, false}, {"--ranks", &a.rank_lines, true},
        {"--sgd", &a.sgd, true},          {"--ials", &a.ials, true},
        {"--asd", &a.asd, true},          {"--launched", &a.launched, true}};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        // Every value is checked here, before any device work (bench_util.h's arg_*: a bad
        // one exits with status 2 naming it); a missing value reads as "" and is refused.
        if (!strcmp(o, "--gpus"))
            a.gpus = arg_ints(o, v, 1), i++;
        else if (!strcmp(o, "--k"))
            a.ks = arg_ints(o, v, 1), i++;
        else if (!strcmp(o, "--iterations"))
            a.iterations = arg_int(o, v, 1), i++;
        else if (!strcmp(o, "--lambda"))
            a.lambda = (float)arg_number(o, v, 0.0), i++;
        else if (!strcmp(o, "--repeat"))
            a.repeat = arg_int(o, v, 1), i++;
        else if (!strcmp(o, "--solver")) {
            const char *names[] = {"auto", "exact", "cg"};
            const mf_als_solver solvers[] = {MF_ALS_SOLVER_AUTO, MF_ALS_SOLVER_EXACT,
                                             MF_ALS_SOLVER_CG};
            a.solver = solvers[arg_choice(o, v, names, 3)], i++;
        } else if (!strcmp(o, "--layout")) {
            const char *names[] = {"auto", "replicated", "sharded"};
            const mf_als_layout layouts[] = {MF_ALS_LAYOUT_AUTO, MF_ALS_LAYOUT_REPLICATED,
                                             MF_ALS_LAYOUT_USERS_SHARDED};
            a.layout = layouts[arg_choice(o, v, names, 3)], i++;
        } else if (!strcmp(o, "--case"))
            specs.push_back(v), i++;
        else if (!strcmp(o, "--scale"))
            a.scale = arg_number(o, v, 0.0, true), i++;
        else if (!strcmp(o, "--seed"))
            a.seed = arg_seed(o, v), i++;
        else if (!strcmp(o, "--train"))
            a.train_file = v, i++;
        else if (!strcmp(o, "--test"))
            a.test_file = v, i++;
        else if (set_switch(switches, o))
            continue;
        else if (!strcmp(o, "--launched-out") && i + 1 < argc)
            a.launched_out = argv[++i];
        else if (!strcmp(o, "--baseline-out") && i + 1 < argc)
            a.baseline_out = argv[++i];
        else if (!strcmp(o, "--baseline-in") && i + 1 < argc)
            a.baseline_in = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_als_gpus [--gpus LIST] [--k LIST] [--iterations N] [--lambda L] "
                    "[--repeat R] [--solver auto|exact|cg] [--layout auto|replicated|sharded] "
                    "[--case NAME[,key=value,...]]... "
                    "[--scale F] [--seed S] [--train FILE --test FILE] [--split] [--no-one] "
                    "[--ranks] [--log] [--sgd | --asd | --ials] [--baseline-out FILE]\n"
                    "       (under torchrun/mpirun/srun) bench_als_gpus --launched "
                    "[--launched-out DIR] [--baseline-in FILE] [the same case and fit options]\n");
            return 2;
        }
    }
    if (specs.empty() && !a.train_file)
        specs.push_back("netflix");
    if (a.launched_out.empty())
        a.launched_out = "/tmp/bench_als_gpus-" + std::to_string((long)geteuid());
    if ((a.launched && a.baseline_out) || (!a.launched && a.baseline_in) ||
        (a.baseline_out && !a.baseline)) {
        fprintf(stderr, "bench_als_gpus: --baseline-out goes with the one-GPU fit of an "
                        "in-process run, --baseline-in with --launched\n");
        return 2;
    }
    if ((int)a.sgd + (int)a.asd + (int)a.ials > 1) { // the code paths disagree on which wins
        fprintf(stderr, "bench_als_gpus: --sgd, --asd and --ials exclude each other\n");
        return 2;
    }
    if (!a.train_file != !a.test_file) { // one of them alone would be ignored for the presets
        fprintf(stderr, "bench_als_gpus: --train and --test go together\n");
        return 2;
    }
    // The cases too are checked before any device work (a bad --case exits with status 2);
    // --launched makes them again from the same specs.
    const std::vector<ratings_shape> cases =
        ratings_cases("bench_als_gpus", specs, a.scale, a.seed, a.train_file, a.test_file);
    if (a.launched)
        return run_launched(a, specs);
    FILE *baseline_file = NULL;
    if (a.baseline_out && !(baseline_file = fopen(a.baseline_out, "w"))) {
        fprintf(stderr, "bench_als_gpus: --baseline-out %s: %s\n", a.baseline_out, strerror(errno));
        return 1;
    }
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
           info.name, a.lambda, a.iterations, a.repeat);
    if (baseline_file) {
        char when[64];
        const time_t now = time(NULL);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
        baseline_write_head(baseline_file,
                            std::string("bench_als_gpus one-GPU rows, ") + info.name + ", " + when);
    }
    for (const ratings_shape &c : cases) {
        mf_sparse *train = NULL, *test = NULL;
        ratings_stats made = {};
        double t0 = omp_get_wtime();
        double oracle = load_ratings(ctx, a.train_file, a.test_file, c, &train, &test, &made);
        print_ratings_case(ctx, c, made, oracle, train, test, omp_get_wtime() - t0);
        const host_csr htrain = to_host(ctx, train), htest = to_host(ctx, test);
        mf_sparse_destroy(train);
        mf_sparse_destroy(test);
        for (int g : a.gpus)
            if (a.sgd && g > 1 && g <= devices)
                printf("SGD cells over %d GPUs: the sub-steps' largest cells sum to %.3f x nnz / "
                       "%d\n",
                       g, sgd_cell_balance(htrain, g), g);
        print_table_head(make_opts(a, a.ks.front()), "speed-up over 1 GPU");
        for (int k : a.ks) {
            const fit_opts f = make_opts(a, k);
            fit_result one = {};
            if (a.baseline) {
                one = median_fit(0, a.repeat, htrain, htest, f);
                print_one_row(c.label, k, "1", one.seconds_per_iteration, one.call_seconds,
                              one.peak_gib, compute_span(one), one.test_rmse);
                if (baseline_file)
                    baseline_write_row(baseline_file, baseline_key(a, f, c.label, k),
                                       {one.seconds_per_iteration, one.call_seconds, one.peak_gib,
                                        one.test_rmse, factors_hash(one.U, one.V)});
            }
            for (int g : a.gpus) {
                if (g > devices)
                    continue;
                const fit_result r = median_fit(g, a.repeat, htrain, htest, f);
                const std::string cell =
                    std::to_string(g) + (a.baseline && g == 1 ? " (NCCL)" : "");
                print_group_row(c.label, k, cell, g, r, f,
                                a.baseline ? one.seconds_per_iteration : 0.0, one.test_rmse,
                                r.U == one.U && r.V == one.V);
            }
        }
    }
    if (baseline_file)
        fclose(baseline_file);
    mf_ctx_destroy(ctx);
    return 0;
}
