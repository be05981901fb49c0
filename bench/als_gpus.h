// bench_als_gpus: what its two files share (als_gpus.cu: the in-process groups, main and the
// table; als_gpus_launched.cu: --launched, one process per GPU). als_gpus.cu's header says
// what the bench measures and how a launched run is put together.
#ifndef MFACT_BENCH_ALS_GPUS_H
#define MFACT_BENCH_ALS_GPUS_H

#include <stdint.h>
#include <stdio.h>

#include <string>
#include <vector>

#include "mfact/mfact.h"

// One rank's numbers from one fit (per iteration: over its iterations).
struct rank_stats {
    double seconds_per_iteration, call_seconds, peak_gib;
    double compute, wait, exchange; // per iteration: own kernels (ALS), agreements, exchanges
    double test_rmse;
    uint64_t factors_hash; // of U's and V's bits (factors_hash)
    bool sharded;          // ALS with sharded users (mf_als_report.layout)
    int workers;           // SGD: the concurrent updates the rank ran (mf_sgd_report.workers)
};

// A one-GPU row (an ungrouped context, medians as the table's) under its key: the algorithm,
// case and settings that must match for a launched row to compare with it.
struct baseline_row {
    double seconds_per_iteration, call_seconds, peak_gib, test_rmse;
    uint64_t factors_hash;
};

struct host_csr {
    int32_t rows, cols;
    int64_t nnz;
    std::vector<int64_t> ptr;
    std::vector<int32_t> col;
    std::vector<float> val;
};

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

struct fit_result {
    double seconds_per_iteration; // the slowest rank's
    double call_seconds;          // the slowest rank's whole call
    double test_rmse;
    double peak_gib; // the largest rank's peak device memory during the call
    bool sharded;    // ALS ran with sharded users (mf_als_report.layout)
    // ALS: each rank's own device work per iteration (its Gram and solve kernels, timed by
    // events: mf_als_report's gram_seconds + solve_seconds), least and most over the ranks.
    // The most against the iteration shows the exchange and waits; the spread, imbalance.
    double compute_min, compute_max;
    // Per iteration, the most over the ranks: host time in agreements (waiting for the
    // slowest rank included) and the exchanges' time; ALS's over its iterations alone
    // (mf_als_report), the others' over the whole call, setup included (mf_group_stats).
    double wait_min, wait_max, exchange_max; // wait: least and most (imbalance vs latency)
    bool same_on_ranks;                      // every rank returned rank 0's factors
    std::vector<float> U, V;                 // rank 0's (in-process)
    uint64_t factors_hash;                   // rank 0's (--launched)
};

// What the bench runs at one k: the algorithm and its options.
struct fit_opts {
    bool sgd, asd, ials; // none: ALS
    bool split;          // --split: rank i of n gets every n-th entry (part_from_host)
    bool rank_lines;     // --ranks: every rank's line (stderr)
    mf_als_opts o;
    mf_sgd_opts so;
    mf_asd_opts ao;
    mf_ials_opts io;
};

struct bench_args {
    std::vector<int> gpus = {1, 2, 4, 8}, ks = {100};
    int iterations = 10, repeat = 3;
    float lambda = 0.048f; // bench_als's (cuMF_als's Netflix setting)
    mf_als_solver solver = MF_ALS_SOLVER_AUTO;
    mf_als_layout layout = MF_ALS_LAYOUT_AUTO; // --layout: ALS's U in a group (mfact.h)
    double scale = 1.0;
    uint64_t seed = 2024;
    const char *train_file = NULL, *test_file = NULL;
    bool sgd = false, asd = false, ials = false, baseline = true, launched = false;
    bool split = false, rank_lines = false;
    std::string launched_out;                             // --launched-out DIR
    const char *baseline_out = NULL, *baseline_in = NULL; // --baseline-out / --baseline-in FILE
};

// ---- als_gpus.cu ----------------------------------------------------------------------------

host_csr to_host(mf_ctx *ctx, const mf_sparse *m);
mf_sparse *from_host(mf_ctx *ctx, const host_csr &h);
// --split: rank `part` of `parts` gets every entry p with p % parts == part, marked as a part.
mf_sparse *part_from_host(mf_ctx *ctx, const host_csr &h, int part, int parts);
// SGD over g ranks: the sub-steps' largest cells over the ideal nnz / g (1.00 is even).
double sgd_cell_balance(const host_csr &h, int g);
// A CUDA context on `device`, seed 1 (NULL on failure: mf_ctx_last_error(NULL)).
mf_ctx *ctx_on(int device);
extern bool bench_log; // --log: ctx_on's contexts log their fits' phases to stderr
// A job on ctx with f's options and room for the factors; the matrices are the caller's.
void setup_job(rank_job *j, mf_ctx *ctx, const fit_opts &f, const host_csr &train);
// Runs the job's fit (a pthread start routine): its status, report and costs into *arg.
void *run_rank(void *arg);
// A rank's numbers from its finished job (factors_hash left to the caller).
rank_stats stats_of(const rank_job &j);
// A group's numbers before any rank is added (add_rank).
fit_result start_fit(double test_rmse);
void add_rank(fit_result *r, const rank_stats &s);
void print_rank_line(int n, int i, const rank_stats &s); // --ranks (stderr)
fit_result median_of(std::vector<fit_result> runs);      // the median s / iteration's run
fit_opts make_opts(const bench_args &a, int k);
// What a one-GPU row of --baseline-out must share with a launched row to be its baseline.
std::string baseline_key(const bench_args &a, const fit_opts &f, const std::string &label, int k);
void print_table_head(const fit_opts &f, const char *speedup_title);
void print_one_row(const std::string &label, int k, const char *gpus, double spi,
                   double call_seconds, double peak_gib, const std::string &compute,
                   double test_rmse);
// one_spi <= 0: no baseline (speed-up and last column "-"); same_bits: factors are one GPU's.
void print_group_row(const std::string &label, int k, const std::string &gpus, int g,
                     const fit_result &r, const fit_opts &f, double one_spi, double one_rmse,
                     bool same_bits);

// ---- als_gpus_launched.cu -------------------------------------------------------------------

// FNV-1a over the 32-bit words of U, then V: equal factors, equal hashes.
uint64_t factors_hash(const std::vector<float> &U, const std::vector<float> &V);

// --baseline-out: a first line "# what" (the machine, the time), then one line per row.
void baseline_write_head(FILE *f, const std::string &what);
void baseline_write_row(FILE *f, const std::string &key, const baseline_row &row);

// --launched: this process is one rank of the launcher's group; rank 0 prints. The exit status.
int run_launched(const bench_args &a, const std::vector<std::string> &specs);

#endif
