// bench_als_gpus --launched: one process per GPU, started by torchrun, mpirun or srun
// (als_gpus.cu's header says how it is put together): joining the launcher's group, each rank
// handing its numbers to rank 0 through files (the library has no public collective for a few host
// values, and the bench needs neither MPI nor torch), the one-GPU baseline file, and the run.
#include "als_gpus.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <chrono>
#include <map>
#include <thread>

#include "bench_util.h"
#include "synthetic_ratings.h"

uint64_t factors_hash(const std::vector<float> &U, const std::vector<float> &V)
{
    uint64_t h = 14695981039346656037ull;
    for (const std::vector<float> *m : {&U, &V})
        for (float x : *m) {
            uint32_t w;
            memcpy(&w, &x, sizeof w);
            h = (h ^ w) * 1099511628211ull;
        }
    return h;
}

// The launcher's rank and size (mf_launch_detect) and this process's device: its local rank
// among the devices it sees (a launcher that gives each process one GPU leaves it device 0).
// false, with the reason on stderr, when the environment is malformed or no device is seen.
static bool launched_detect(int *rank, int *size, int *device)
{
    int local = 0, devices = 0;
    if (mf_launch_detect(rank, size, &local) != MF_OK) {
        fprintf(stderr, "bench_als_gpus --launched: %s\n", mf_ctx_last_error(NULL));
        return false;
    }
    // The runtime's count creates no context on the devices (probing with mf_ctx_create
    // would put one on every GPU from every process).
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices < 1) {
        fprintf(stderr, "bench_als_gpus --launched: rank %d: no CUDA device (%s)\n", *rank,
                cudaGetErrorString(e));
        return false;
    }
    *device = local % devices;
    return true;
}

static std::string rank_file(const std::string &dir, int rank, int step)
{
    return dir + "/rank" + std::to_string(rank) + ".step" + std::to_string(step);
}

// The numbers files an earlier launch left in dir (a crashed one's would be read as this one's).
static void remove_old_numbers(const std::string &dir)
{
    DIR *d = opendir(dir.c_str());
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int r, s, end = 0;
        if (sscanf(e->d_name, "rank%d.step%d%n", &r, &s, &end) == 2 && end > 0)
            unlink((dir + "/" + e->d_name).c_str());
    }
    closedir(d);
}

// Make ctx rank `rank` of the launch (mf_ctx_join_launched). dir is made (0700) and holds
// the rendezvous file (unless MFACT_RENDEZVOUS names one) and the ranks' numbers; rank 0
// first removes numbers an earlier launch left there. No rank writes numbers before every
// rank has joined (the join is collective), so none is removed late. false: reason on stderr.
static bool launched_join(mf_ctx *ctx, const std::string &dir, int rank, int size)
{
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench_als_gpus --launched: rank %d: cannot create %s: %s\n", rank,
                dir.c_str(), strerror(errno));
        return false;
    }
    if (rank == 0)
        remove_old_numbers(dir);
    const char *env = getenv("MFACT_RENDEZVOUS");
    const std::string rendezvous = env && *env ? std::string(env) : dir + "/rendezvous";
    if (mf_ctx_join_launched(ctx, rendezvous.c_str(), 0.0) != MF_OK) {
        fprintf(stderr, "bench_als_gpus --launched: rank %d of %d: %s\n", rank, size,
                mf_ctx_last_error(ctx));
        return false;
    }
    return true;
}

// Rank `rank` hands its fits' numbers of step `step` (a case and k) to rank 0: written to a
// temporary file and renamed, so rank 0 never reads half of one.
static bool launched_share(const std::string &dir, int rank, int step,
                           const std::vector<rank_stats> &fits)
{
    const std::string path = rank_file(dir, rank, step), part = path + ".part";
    FILE *f = fopen(part.c_str(), "w");
    if (!f) {
        fprintf(stderr, "bench_als_gpus --launched: rank %d: cannot write %s: %s\n", rank,
                part.c_str(), strerror(errno));
        return false;
    }
    for (const rank_stats &s : fits)
        fprintf(f, "%.17g %.17g %.17g %.17g %.17g %.17g %.17g %" PRIx64 "\n",
                s.seconds_per_iteration, s.call_seconds, s.peak_gib, s.compute, s.wait, s.exchange,
                s.test_rmse, s.factors_hash);
    const bool written = fclose(f) == 0;
    if (!written || rename(part.c_str(), path.c_str()) != 0) {
        fprintf(stderr, "bench_als_gpus --launched: rank %d: cannot write %s: %s\n", rank,
                path.c_str(), strerror(errno));
        return false;
    }
    return true;
}

// One rank's file, once it is there: its `fits` lines into *out.
static bool read_rank_file(const std::string &path, size_t fits, double timeout_seconds,
                           std::vector<rank_stats> *out)
{
    const auto start = std::chrono::steady_clock::now();
    FILE *f;
    while ((f = fopen(path.c_str(), "r")) == NULL) {
        const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
        if (waited.count() > timeout_seconds) {
            fprintf(stderr, "bench_als_gpus --launched: %s did not come in %.0f s (a rank died?)\n",
                    path.c_str(), timeout_seconds);
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    out->resize(fits);
    size_t got = 0;
    for (rank_stats &s : *out)
        got += fscanf(f, "%lf %lf %lf %lf %lf %lf %lf %" SCNx64, &s.seconds_per_iteration,
                      &s.call_seconds, &s.peak_gib, &s.compute, &s.wait, &s.exchange, &s.test_rmse,
                      &s.factors_hash) == 8;
    fclose(f);
    unlink(path.c_str());
    if (got != fits) {
        fprintf(stderr, "bench_als_gpus --launched: %s: %zu of %zu fits readable\n", path.c_str(),
                got, fits);
        return false;
    }
    return true;
}

// Rank 0: every rank's numbers of step `step`, (*out)[rank][fit], waiting for each file up to
// timeout_seconds (the ranks leave a collective fit together, so a file missing for long
// means a rank died); each file is removed once read. false: reason on stderr.
static bool launched_collect(const std::string &dir, int size, int step, size_t fits,
                             double timeout_seconds, std::vector<std::vector<rank_stats>> *out)
{
    out->assign((size_t)size, {});
    for (int r = 0; r < size; r++)
        if (!read_rank_file(rank_file(dir, r, step), fits, timeout_seconds, &(*out)[(size_t)r]))
            return false;
    return true;
}

void baseline_write_head(FILE *f, const std::string &what)
{
    fprintf(f, "# %s\n", what.c_str());
}

void baseline_write_row(FILE *f, const std::string &key, const baseline_row &row)
{
    fprintf(f, "%s\t%.17g %.17g %.17g %.17g %" PRIx64 "\n", key.c_str(), row.seconds_per_iteration,
            row.call_seconds, row.peak_gib, row.test_rmse, row.factors_hash);
    fflush(f); // a later row's crash keeps the rows measured
}

// --baseline-in: the file's rows by key and its first line's text. false: reason on stderr.
static bool baseline_read(const char *path, std::string *what,
                          std::map<std::string, baseline_row> *rows)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_als_gpus: --baseline-in %s: %s\n", path, strerror(errno));
        return false;
    }
    what->clear();
    rows->clear();
    char line[4096];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#') {
            *what = line + (line[1] == ' ' ? 2 : 1);
            continue;
        }
        char *tab = strchr(line, '\t');
        baseline_row row;
        ok =
            tab && sscanf(tab + 1, "%lf %lf %lf %lf %" SCNx64, &row.seconds_per_iteration,
                          &row.call_seconds, &row.peak_gib, &row.test_rmse, &row.factors_hash) == 5;
        if (ok)
            (*rows)[std::string(line, (size_t)(tab - line))] = row;
        else
            fprintf(stderr, "bench_als_gpus: --baseline-in %s: not a row: %s\n", path, line);
    }
    fclose(f);
    return ok;
}

// --launched, one rank's fit on its context: the same matrices as an in-process rank's, built
// afresh, and its pool's cached memory given back first, as a fresh context starts.
static rank_stats launched_fit(mf_ctx *ctx, int rank, int size, const host_csr &train,
                               const host_csr &test, const fit_opts &f)
{
    rank_job j = rank_job();
    setup_job(&j, ctx, f, train);
    MF_CHECK(ctx, mf_ctx_release_cached_memory(ctx));
    j.train = f.split && size > 1 ? part_from_host(ctx, train, rank, size) : from_host(ctx, train);
    j.test = from_host(ctx, test);
    run_rank(&j);
    if (j.st != MF_OK) {
        fprintf(stderr, "bench_als_gpus: rank %d of %d: %s\n", rank, size, mf_ctx_last_error(ctx));
        exit(1);
    }
    rank_stats s = stats_of(j);
    s.factors_hash = factors_hash(j.U, j.V);
    mf_sparse_destroy(j.train);
    mf_sparse_destroy(j.test);
    return s;
}

// --launched: this process is one rank; rank 0 prints (see the header).
int run_launched(const bench_args &a, const std::vector<std::string> &specs)
{
    int rank = 0, size = 1, device = 0;
    if (!launched_detect(&rank, &size, &device))
        return 1;
    std::string about; // rank 0 reads the baseline before joining: a bad file fails it alone
    std::map<std::string, baseline_row> base; // at once, and the launcher ends the others
    if (rank == 0 && a.baseline_in && !baseline_read(a.baseline_in, &about, &base))
        return 1;
    mf_ctx *ctx = ctx_on(device);
    if (!ctx) {
        fprintf(stderr, "bench_als_gpus: rank %d: device %d: %s\n", rank, device,
                mf_ctx_last_error(NULL));
        return 1;
    }
    if (!launched_join(ctx, a.launched_out, rank, size))
        return 1;
    char gpus[64];
    snprintf(gpus, sizeof gpus, "%d (launched)", size);
    std::string speedup_title = "speed-up over 1 GPU (none: no --baseline-in)";
    if (a.baseline_in)
        speedup_title = std::string("speed-up over 1 GPU of --baseline-in ") + a.baseline_in;
    if (rank == 0) {
        mf_device_info info;
        info.struct_size = sizeof info;
        MF_CHECK(ctx, mf_ctx_device_info(ctx, &info));
        printf("bench_als_gpus --launched: %d processes, one GPU each (rank 0: %s, device %d); "
               "lambda %g (weighted), %d iterations, medians of %d\n",
               size, info.name, device, a.lambda, a.iterations, a.repeat);
        if (a.baseline_in)
            printf("one-GPU baseline: %s (%s)\n", a.baseline_in, about.c_str());
    }
    const std::vector<ratings_shape> cases =
        ratings_cases("bench_als_gpus", specs, a.scale, a.seed, a.train_file, a.test_file);
    int step = 0;
    for (const ratings_shape &c : cases) {
        mf_sparse *train = NULL, *test = NULL;
        ratings_stats made = {};
        const double t0 = omp_get_wtime();
        const double oracle = load_ratings(ctx, a.train_file, a.test_file, c, &train, &test, &made);
        if (rank == 0)
            print_ratings_case(ctx, c, made, oracle, train, test, omp_get_wtime() - t0);
        const host_csr htrain = to_host(ctx, train), htest = to_host(ctx, test);
        mf_sparse_destroy(train);
        mf_sparse_destroy(test);
        for (int k : a.ks) {
            const fit_opts f = make_opts(a, k);
            if (rank == 0 && k == a.ks.front()) {
                if (a.sgd && size > 1)
                    printf("SGD cells over %d GPUs: the sub-steps' largest cells sum to %.3f x "
                           "nnz / %d\n",
                           size, sgd_cell_balance(htrain, size), size);
                print_table_head(f, speedup_title.c_str());
            }
            std::vector<rank_stats> mine;
            for (int r = 0; r < a.repeat; r++)
                mine.push_back(launched_fit(ctx, rank, size, htrain, htest, f));
            if (!launched_share(a.launched_out, rank, step, mine))
                return 1;
            if (rank == 0) {
                std::vector<std::vector<rank_stats>> all;
                if (!launched_collect(a.launched_out, size, step, mine.size(), 300.0, &all))
                    return 1;
                std::vector<fit_result> runs;
                for (size_t r = 0; r < mine.size(); r++) {
                    fit_result fr = start_fit(all[0][r].test_rmse);
                    fr.factors_hash = all[0][r].factors_hash;
                    for (int i = 0; i < size; i++) {
                        add_rank(&fr, all[(size_t)i][r]);
                        fr.same_on_ranks =
                            fr.same_on_ranks && all[(size_t)i][r].factors_hash == fr.factors_hash;
                        if (a.rank_lines)
                            print_rank_line(size, i, all[(size_t)i][r]);
                    }
                    runs.push_back(fr);
                }
                const fit_result m = median_of(runs);
                const auto one = base.find(baseline_key(a, f, c.label, k));
                if (one != base.end()) {
                    const baseline_row &b = one->second;
                    const std::string from = std::string("1 (") + a.baseline_in + ")";
                    print_one_row(c.label, k, from.c_str(), b.seconds_per_iteration, b.call_seconds,
                                  b.peak_gib, "-", b.test_rmse);
                    print_group_row(c.label, k, gpus, size, m, f, b.seconds_per_iteration,
                                    b.test_rmse, m.factors_hash == b.factors_hash);
                } else {
                    if (a.baseline_in)
                        fprintf(stderr, "bench_als_gpus: no row '%s' in %s\n",
                                baseline_key(a, f, c.label, k).c_str(), a.baseline_in);
                    print_group_row(c.label, k, gpus, size, m, f, 0.0, 0.0, false);
                }
            }
            step++;
        }
    }
    mf_ctx_destroy(ctx);
    return 0;
}
