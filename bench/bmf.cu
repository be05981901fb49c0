// bench_bmf: Boolean matrix factorization (mf_bmf_run) on the CUDA backend.
//   1. The ../shared/data/bool sets at k = 20: relative error and seconds next to a peer
//      measured in the same run, Asso (Miettinen et al.: candidates from column
//      associations at tau = 0.5, greedy cover) on the CPU, and next to the published
//      CuBin and Asso numbers.
//   2. k = 128 on AMusic, AOffice, ATools, 20News: precision, recall, F1, seconds.
//   3. Planted 50,000 x 20,000 rank 32 at ~5 % density, clean and with 5 % of the entries
//      flipped: F1 against the clean matrix.
//   4. Scale (--scale, k = 128 unless given): by default 500,000 x 200,000 with 30M
//      uniformly random ones, the cuTeBool-sized 726,000 x 259,000 at 0.01 %, and 2M x 1M
//      at 0.01 % = 200M ones under a 16 GB device limit, 1 instance and 6 sweeps each, with
//      C held densely and as its nonzero words (each where it fits; the default takes the
//      smaller): setup and seconds per sweep, peak device memory, relative error, and
//      dense-equivalent bit-operations per second against the b1 MMA and popc peaks; then
//      726,000 x 259,000 from the basket generator, run whole (SWEEPS 0: to the default
//      stop) with 16 instances.
//   5. --case NAME[,key=value...]: generated sparse matrices of given shape (basket-like,
//      check-in-like and Amazon-like presets at about 1M ones): the default start, the
//      sampled and the Asso start at k = 20 and 128, next to the Asso peer (k = 20). With
//      --covers, the Asso start's cover alone from each backend instead (dense tensor-core,
//      sparse device, CPU), and whether their factors agree; --write DIR writes the
//      matrices as pairs files and runs nothing.
// Usage: bench_bmf [--data DIR] [--instances N] [--skip-planted] [--skip-scale]
//                  [--skip-sets] [--case NAME[,rows=R,cols=C,ones=N,row-sigma=S,zipf=A,
//                   bundles=B,bundle-size=S,bundle-p=P,seed=S]]... [--covers
//                   [--no-cpu-cover]] [--write DIR]
//                  [--scale ROWS,COLS,ONES[,K[,SWEEPS[,LIMIT_GB[,STRUCTURED[,INSTANCES]]]]]]...
// An unknown case name or key, a malformed number, --instances below 1 or a value out of its
// range in --case or --scale ends the program with status 2 before any device work
// (tests/tool/check-bench-args.sh).
#include <math.h>
#include <omp.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"

static double now()
{
    return omp_get_wtime();
}

struct bits {
    int32_t m, n;
    int64_t nw;
    std::vector<uint64_t> rows; // m x nw
};

static bits to_bits(const mf_sparse *C)
{
    bits b;
    int64_t nnz;
    mf_sparse_shape(C, &b.m, &b.n, &nnz);
    b.nw = (b.n + 63) / 64;
    b.rows.assign((size_t)b.m * b.nw, 0);
    std::vector<int64_t> ptr(b.m + 1);
    std::vector<int32_t> col(nnz > 0 ? nnz : 1);
    mf_sparse_get_csr(C, ptr.data(), col.data(), NULL, MF_MEMORY_HOST);
    for (int32_t i = 0; i < b.m; i++)
        for (int64_t p = ptr[i]; p < ptr[i + 1]; p++)
            b.rows[(size_t)i * b.nw + col[p] / 64] |= 1ull << (col[p] % 64);
    return b;
}

// Asso with unit weights: candidate c is {j : |col_c & col_j| >= tau |col_c|} for the
// `ncand` most popular columns c; k rounds each take the candidate (and the rows it helps)
// with the largest gain in covered ones minus covered zeros. Returns fp + fn.
static int64_t asso(const bits &b, int k, double tau, int ncand, double *seconds)
{
    double t0 = now();
    std::vector<int64_t> cnt(b.n, 0);
    for (size_t p = 0; p < b.rows.size(); p++)
        for (uint64_t w = b.rows[p]; w; w &= w - 1)
            cnt[(p % b.nw) * 64 + __builtin_ctzll(w)]++;
    std::vector<int32_t> order(b.n);
    for (int32_t j = 0; j < b.n; j++)
        order[j] = j;
    std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return cnt[x] > cnt[y]; });
    ncand = std::min<int>(ncand, b.n);
    std::vector<uint64_t> cand((size_t)ncand * b.nw, 0);
#pragma omp parallel for schedule(dynamic)
    for (int c = 0; c < ncand; c++) {
        int32_t seed = order[c];
        std::vector<int64_t> co(b.n, 0);
        for (int32_t i = 0; i < b.m; i++) {
            const uint64_t *r = &b.rows[(size_t)i * b.nw];
            if (!(r[seed / 64] >> (seed % 64) & 1))
                continue;
            for (int64_t w = 0; w < b.nw; w++)
                for (uint64_t x = r[w]; x; x &= x - 1)
                    co[w * 64 + __builtin_ctzll(x)]++;
        }
        for (int32_t j = 0; j < b.n; j++)
            if (co[j] >= tau * cnt[seed] && cnt[seed] > 0)
                cand[(size_t)c * b.nw + j / 64] |= 1ull << (j % 64);
    }
    std::vector<uint64_t> cov((size_t)b.m * b.nw, 0);
    int64_t ones = 0;
    for (int32_t j = 0; j < b.n; j++)
        ones += cnt[j];
    int64_t err = ones;
    for (int round = 0; round < k; round++) {
        std::vector<int64_t> gain(ncand, 0);
#pragma omp parallel for schedule(dynamic)
        for (int c = 0; c < ncand; c++) {
            const uint64_t *s = &cand[(size_t)c * b.nw];
            int64_t g = 0;
            for (int32_t i = 0; i < b.m; i++) {
                const uint64_t *r = &b.rows[(size_t)i * b.nw], *v = &cov[(size_t)i * b.nw];
                int64_t gi = 0;
                for (int64_t w = 0; w < b.nw; w++) {
                    uint64_t fresh = s[w] & ~v[w];
                    gi += __builtin_popcountll(fresh & r[w]) - __builtin_popcountll(fresh & ~r[w]);
                }
                g += gi > 0 ? gi : 0;
            }
            gain[c] = g;
        }
        int best = (int)(std::max_element(gain.begin(), gain.end()) - gain.begin());
        if (gain[best] <= 0)
            break;
        const uint64_t *s = &cand[(size_t)best * b.nw];
        for (int32_t i = 0; i < b.m; i++) {
            const uint64_t *r = &b.rows[(size_t)i * b.nw];
            uint64_t *v = &cov[(size_t)i * b.nw];
            int64_t gi = 0;
            for (int64_t w = 0; w < b.nw; w++) {
                uint64_t fresh = s[w] & ~v[w];
                gi += __builtin_popcountll(fresh & r[w]) - __builtin_popcountll(fresh & ~r[w]);
            }
            if (gi > 0)
                for (int64_t w = 0; w < b.nw; w++)
                    v[w] |= s[w];
        }
        err -= gain[best];
    }
    *seconds = now() - t0;
    return err;
}

// mf_bmf_run with the defaults but rank, instances, init and (when > 0) max_sweeps; the
// factors land in A and B.
static mf_bmf_report run(mf_ctx *ctx, mf_sparse *C, int k, int instances, int max_sweeps,
                         std::vector<uint64_t> &A, std::vector<uint64_t> &B,
                         mf_bmf_init init = MF_BMF_INIT_SAMPLE,
                         mf_bmf_c_layout layout = MF_BMF_C_AUTO,
                         std::vector<double> *sweep_seconds = NULL)
{
    int32_t m, n;
    mf_sparse_shape(C, &m, &n, NULL);
    int kw = (k + 63) / 64;
    A.assign((size_t)m * kw, 0);
    B.assign((size_t)n * kw, 0);
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    o.rank = k;
    o.instances = instances;
    o.init = init;
    if (max_sweeps > 0)
        o.max_sweeps = max_sweeps;
    if (sweep_seconds) {
        // each sweep's end, from the run's start: the sweeps' own time without the setup
        sweep_seconds->clear();
        o.progress = [](void *user, const mf_bmf_progress *p) {
            ((std::vector<double> *)user)->push_back(p->seconds);
            return 0;
        };
        o.progress_user = sweep_seconds;
    }
    mf_bmf_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    mf_bmf_debug debug = {0, layout};
    MF_CHECK(ctx, mf_bmf_run_checked(ctx, C, &o, A.data(), B.data(), MF_MEMORY_HOST, &r, &debug));
    return r;
}

static mf_bmf_report run(mf_ctx *ctx, mf_sparse *C, int k, int instances, int max_sweeps,
                         mf_bmf_init init = MF_BMF_INIT_SAMPLE)
{
    std::vector<uint64_t> A, B;
    return run(ctx, C, k, instances, max_sweeps, A, B, init);
}

static mf_sparse *load(mf_ctx *ctx, const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.in", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    fclose(f);
    mf_read_opts ro;
    mf_read_opts_init(&ro);
    ro.flags |= MF_SPARSE_PATTERN;
    mf_sparse *C = NULL;
    MF_CHECK(ctx, mf_sparse_read(ctx, &C, path, &ro));
    return C;
}

static void datasets(mf_ctx *ctx, const char *dir, int instances)
{
    struct {
        const char *name;
        double cubin, asso;
    } sets[] = {{"APatio", 7.33e-3, 6.50e-3},
                {"AOffice", 4.21e-3, 3.94e-3},
                {"AMusic", 2.95e-3, 2.82e-3},
                {"ATools", 0.73e-3, 0.71e-3},
                {"c_salt_MovieRec", 24.72e-3, 23.45e-3}};
    printf("\n## k = 20, %d instances (Asso peer: tau 0.5, 512 most popular columns, CPU, %d "
           "threads)\n\n",
           instances, omp_get_max_threads());
    printf("| data | mfact, sample start | s | mfact, Asso start | s | Asso here | s | error "
           "ratio | speed-up | CuBin (publ.) | Asso (publ.) |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (auto &s : sets) {
        mf_sparse *C = load(ctx, dir, s.name);
        if (!C) {
            printf("| %s | absent | | | | | | | |\n", s.name);
            continue;
        }
        mf_bmf_report r = run(ctx, C, 20, instances, 0);
        mf_bmf_report ra = run(ctx, C, 20, instances, 0, MF_BMF_INIT_ASSO);
        bits b = to_bits(C);
        double as;
        int64_t ae = asso(b, 20, 0.5, 512, &as);
        double cells = (double)b.m * b.n;
        // The ratios compare Asso here with mfact's Asso start (the better of the two).
        printf("| %s | %.3e | %.3f | %.3e | %.3f | %.3e | %.2f | %.3f | %.1fx | %.2e | %.2e |\n",
               s.name, r.relative_error, r.seconds, ra.relative_error, ra.seconds, ae / cells, as,
               ra.relative_error / (ae / cells), as / ra.seconds, s.cubin, s.asso);
        fflush(stdout);
        mf_sparse_destroy(C);
    }
    printf("\n## k = 128, %d instances\n\n| data | precision | recall | F1 | rel. error | sweeps | "
           "s |\n|---|---|---|---|---|---|---|\n",
           instances);
    for (const char *name : {"AMusic", "AOffice", "ATools", "20News"}) {
        mf_sparse *C = load(ctx, dir, name);
        if (!C) {
            printf("| %s | absent | | | | | |\n", name);
            continue;
        }
        mf_bmf_report r = run(ctx, C, 128, instances, 0);
        printf("| %s | %.4f | %.4f | %.4f | %.3e | %d | %.2f |\n", name, r.precision, r.recall,
               r.f1, r.relative_error, r.sweeps, r.seconds);
        fflush(stdout);
        mf_sparse_destroy(C);
    }
}

// Rows of the planted matrix from factor lists: row i is the union of the column sets of
// its factors, then each entry flips with probability `noise` (geometric skips).
static mf_sparse *planted(mf_ctx *ctx, int32_t m, int32_t n, int k, double p, double noise,
                          uint64_t seed, mf_sparse **clean)
{
    std::vector<std::vector<int32_t>> fcols(k);
    uint64_t h = seed;
    auto u01 = [&]() { return (double)(mix(h++) >> 11) * 0x1.0p-53; };
    for (int32_t j = 0; j < n; j++)
        for (int l = 0; l < k; l++)
            if (u01() < p)
                fcols[l].push_back(j);
    std::vector<int32_t> r, c, r2, c2;
    std::vector<char> row(n);
    for (int32_t i = 0; i < m; i++) {
        std::fill(row.begin(), row.end(), 0);
        for (int l = 0; l < k; l++)
            if (u01() < p)
                for (int32_t j : fcols[l])
                    row[j] = 1;
        for (int32_t j = 0; j < n; j++)
            if (row[j])
                r.push_back(i), c.push_back(j);
        if (noise > 0) {
            for (double pos = floor(log(1 - u01()) / log(1 - noise)); pos < n;
                 pos += 1 + floor(log(1 - u01()) / log(1 - noise)))
                row[(int32_t)pos] ^= 1;
        }
        for (int32_t j = 0; j < n; j++)
            if (row[j])
                r2.push_back(i), c2.push_back(j);
    }
    MF_CHECK(ctx, mf_sparse_from_coo(ctx, clean, m, n, (int64_t)r.size(), r.data(), c.data(), NULL,
                                     MF_MEMORY_HOST, 0));
    mf_sparse *C = NULL;
    MF_CHECK(ctx, mf_sparse_from_coo(ctx, &C, m, n, (int64_t)r2.size(), r2.data(), c2.data(), NULL,
                                     MF_MEMORY_HOST, 0));
    return C;
}

static void planted_cases(mf_ctx *ctx, int instances)
{
    const int32_t m = 50000, n = 20000;
    const int k = 32;
    double p = sqrt(1 - pow(0.95, 1.0 / k)); // ~5 % density
    printf("\n## planted %d x %d, rank %d, factor bits p = %.4f, %d instances\n\n| noise | "
           "start | ones | F1 vs clean | F1 vs input | sweeps | s |\n"
           "|---|---|---|---|---|---|---|\n",
           m, n, k, p, instances);
    for (int t = 0; t < 4; t++) {
        double noise = t / 2 ? 0.05 : 0.0;
        mf_bmf_init init = t % 2 ? MF_BMF_INIT_ASSO : MF_BMF_INIT_SAMPLE;
        mf_sparse *clean = NULL;
        mf_sparse *C = planted(ctx, m, n, k, p, noise, 1234, &clean);
        std::vector<uint64_t> A, B; // rank 32: one word per line
        mf_bmf_report r = run(ctx, C, k, instances, 0, A, B, init);
        // F1 against the clean matrix: count the reconstruction against it.
        int64_t cn;
        mf_sparse_shape(clean, NULL, NULL, &cn);
        std::vector<int64_t> ptr(m + 1);
        std::vector<int32_t> col(cn);
        mf_sparse_get_csr(clean, ptr.data(), col.data(), NULL, MF_MEMORY_HOST);
        int64_t tp = 0, pred = 0;
#pragma omp parallel for reduction(+ : tp, pred)
        for (int32_t i = 0; i < m; i++) {
            int64_t q = ptr[i];
            for (int32_t j = 0; j < n; j++) {
                int v = (A[i] & B[j]) != 0, one = q < ptr[i + 1] && col[q] == j;
                q += one;
                tp += v && one;
                pred += v;
            }
        }
        double f1 = 2.0 * tp / (double)(pred + cn);
        int64_t ones;
        mf_sparse_shape(C, NULL, NULL, &ones);
        printf("| %.2f | %s | %lld | %.4f | %.4f | %d | %.2f |\n", noise,
               init == MF_BMF_INIT_ASSO ? "Asso" : "sample", (long long)ones, f1, r.f1, r.sweeps,
               r.seconds);
        fflush(stdout);
        mf_sparse_destroy(C);
        mf_sparse_destroy(clean);
    }
}

// A sparse matrix shaped like retail baskets, check-ins or reviews: row sizes log-normal
// (row-sigma) scaled to about `ones` in all, columns drawn with Zipf popularity (exponent
// zipf, over a fixed random permutation of the columns), and, so that there is Boolean
// structure to find, `bundles` planted column sets of `bundle-size` columns of which each
// row takes one with probability bundle-p.
struct sparse_shape {
    std::string name;
    int32_t rows = 88162, cols = 16470;
    int64_t ones = 908576;
    double row_sigma = 0.8, zipf = 1.0;
    int bundles = 400, bundle_size = 6;
    double bundle_p = 0.3;
    uint64_t seed = 1;
};

// A whole number in [min, max] (strtod's "1e6" too): the whole of v; false on anything else.
static bool whole(const char *v, double min, double max, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return end != v && *end == '\0' && *out >= min && *out <= max && *out == floor(*out);
}

// A finite number in [min, max]: the whole of v; false on anything else.
static bool number(const char *v, double min, double max, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return end != v && *end == '\0' && isfinite(*out) && *out >= min && *out <= max;
}

// One --case spec, NAME[,key=value...]; false, with a message naming what it refused, on an
// unknown name or key or a value out of its range.
static bool parse_shape(const char *spec, sparse_shape *s)
{
    std::string all(spec);
    size_t comma = all.find(',');
    s->name = all.substr(0, comma);
    if (s->name == "basket") {
    } else if (s->name == "checkin") {
        s->rows = 29858, s->cols = 40981, s->ones = 1027370, s->row_sigma = 1.0, s->zipf = 0.8;
        s->bundles = 300, s->bundle_size = 4, s->bundle_p = 0.2;
    } else if (s->name == "amazon") {
        s->rows = 130000, s->cols = 80000, s->ones = 1000000, s->row_sigma = 0.7, s->zipf = 0.6;
        s->bundles = 2000, s->bundle_size = 5, s->bundle_p = 0.5;
    } else {
        fprintf(stderr, "bench_bmf: unknown case %s (basket, checkin, amazon)\n", s->name.c_str());
        return false;
    }
    while (comma != std::string::npos) {
        size_t next = all.find(',', comma + 1);
        std::string kv = all.substr(comma + 1, next - comma - 1);
        size_t eq = kv.find('=');
        std::string k = kv.substr(0, eq);
        const char *val = eq == std::string::npos ? "" : kv.c_str() + eq + 1;
        double v = 0.0;
        bool ok = eq != std::string::npos;
        if (k == "rows")
            ok = ok && whole(val, 1, INT32_MAX, &v), s->rows = (int32_t)v;
        else if (k == "cols")
            ok = ok && whole(val, 1, INT32_MAX, &v), s->cols = (int32_t)v;
        else if (k == "ones")
            ok = ok && whole(val, 1, 1e15, &v), s->ones = (int64_t)v;
        else if (k == "row-sigma")
            ok = ok && number(val, 0, 100, &v), s->row_sigma = v;
        else if (k == "zipf")
            ok = ok && number(val, 0, 100, &v), s->zipf = v;
        else if (k == "bundles") // 0: none planted
            ok = ok && whole(val, 0, INT32_MAX, &v), s->bundles = (int)v;
        else if (k == "bundle-size")
            ok = ok && whole(val, 1, INT32_MAX, &v), s->bundle_size = (int)v;
        else if (k == "bundle-p")
            ok = ok && number(val, 0, 1, &v), s->bundle_p = v;
        else if (k == "seed") {
            char *end;
            errno = 0;
            s->seed = strtoull(val, &end, 10);
            ok = ok && isdigit((unsigned char)val[0]) && *end == '\0' && errno != ERANGE;
        } else {
            fprintf(stderr,
                    "bench_bmf: --case %s: unknown key '%s' (rows, cols, ones, row-sigma, "
                    "zipf, bundles, bundle-size, bundle-p, seed)\n",
                    spec, k.c_str());
            return false;
        }
        if (!ok) {
            fprintf(stderr, "bench_bmf: --case %s: bad value in '%s'\n", spec, kv.c_str());
            return false;
        }
        comma = next;
    }
    return true;
}

static mf_sparse *generate(mf_ctx *ctx, const sparse_shape &s)
{
    uint64_t h = s.seed * 0x9e3779b97f4a7c15ull;
    auto u01 = [&]() { return (double)(mix(h++) >> 11) * 0x1.0p-53; };
    // Zipf over a permutation: the cumulative weights, drawn by binary search.
    std::vector<double> cdf(s.cols);
    double acc = 0.0;
    for (int32_t j = 0; j < s.cols; j++)
        cdf[j] = acc += 1.0 / pow((double)(j + 1), s.zipf);
    std::vector<int32_t> perm(s.cols);
    for (int32_t j = 0; j < s.cols; j++)
        perm[j] = j;
    for (int32_t j = s.cols - 1; j > 0; j--)
        std::swap(perm[j], perm[(int32_t)(u01() * (j + 1))]);
    auto draw = [&]() {
        double x = u01() * acc;
        return perm[std::lower_bound(cdf.begin(), cdf.end(), x) - cdf.begin()];
    };
    std::vector<std::vector<int32_t>> bundle(s.bundles);
    for (auto &b : bundle)
        for (int t = 0; t < s.bundle_size; t++)
            b.push_back(draw());
    // Row sizes: log-normal, scaled to the ones wanted (the bundles' share included).
    std::vector<double> size(s.rows);
    double total = 0.0;
    for (auto &z : size) {
        double g = sqrt(-2.0 * log(1.0 - u01())) * cos(6.283185307179586 * u01());
        total += z = exp(s.row_sigma * g);
    }
    const double own = (double)s.ones - s.bundle_p * s.rows * s.bundle_size;
    std::vector<int32_t> r, c, row;
    for (int32_t i = 0; i < s.rows; i++) {
        row.clear();
        int64_t n = (int64_t)llround(size[i] / total * (own > 0 ? own : 0));
        n = std::min<int64_t>(std::max<int64_t>(n, 1), s.cols / 4);
        for (int64_t t = 0; t < n; t++)
            row.push_back(draw());
        if (s.bundles > 0 && u01() < s.bundle_p) {
            const auto &b = bundle[(size_t)(u01() * s.bundles) % s.bundles];
            row.insert(row.end(), b.begin(), b.end());
        }
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
        for (int32_t j : row)
            r.push_back(i), c.push_back(j);
    }
    mf_sparse *C = NULL;
    MF_CHECK(ctx, mf_sparse_from_coo(ctx, &C, s.rows, s.cols, (int64_t)r.size(), r.data(), c.data(),
                                     NULL, MF_MEMORY_HOST, 0));
    return C;
}

// The default start (MF_BMF_INIT_AUTO), the sampled start and the Asso start at k = 20 and
// 128, and the Asso peer at k = 20 (tau 0.5, 512 candidates; skipped past 4e9 cells).
static void sparse_cases(mf_ctx *ctx, const std::vector<sparse_shape> &cases, int instances)
{
    if (cases.empty())
        return;
    printf("\n## generated sparse matrices, %d instances (Asso peer: tau 0.5, 512 most popular "
           "columns, CPU, %d threads)\n\n| case | rows | cols | ones | k | default: rel. error "
           "| s | sample start | s | Asso start | s | Asso here | s |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
           instances, omp_get_max_threads());
    for (const sparse_shape &s : cases) {
        mf_sparse *C = generate(ctx, s);
        int64_t ones;
        MF_CHECK(ctx, mf_sparse_shape(C, NULL, NULL, &ones));
        const double cells = (double)s.rows * s.cols;
        for (int k : {20, 128}) {
            mf_bmf_report d = run(ctx, C, k, instances, 0, MF_BMF_INIT_AUTO);
            mf_bmf_report sm = run(ctx, C, k, instances, 0, MF_BMF_INIT_SAMPLE);
            mf_bmf_report as = run(ctx, C, k, instances, 0, MF_BMF_INIT_ASSO);
            double ps = NAN, pe = NAN;
            if (k == 20 && cells <= 4e9) {
                bits b = to_bits(C);
                pe = (double)asso(b, k, 0.5, 512, &ps) / cells;
            }
            printf("| %s | %d | %d | %lld | %d | %.3e | %.2f | %.3e | %.2f | %.3e | %.2f | %.3e | "
                   "%.1f |\n",
                   s.name.c_str(), s.rows, s.cols, (long long)ones, k, d.relative_error, d.seconds,
                   sm.relative_error, sm.seconds, as.relative_error, as.seconds, pe, ps);
            fflush(stdout);
        }
        mf_sparse_destroy(C);
    }
}

// --write DIR: the --case matrices as pairs files DIR/NAME-SEED.pairs (for `mfact bmf`, other
// tools and the CPU), on a CPU context; nothing is run.
static int write_cases(const std::vector<sparse_shape> &cases, const char *dir)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    mf_ctx *ctx = NULL;
    MF_CHECK(NULL, mf_ctx_create(&ctx, &co));
    for (const sparse_shape &s : cases) {
        mf_sparse *C = generate(ctx, s);
        int64_t nnz;
        MF_CHECK(ctx, mf_sparse_shape(C, NULL, NULL, &nnz));
        std::vector<int32_t> r((size_t)nnz), c((size_t)nnz);
        MF_CHECK(ctx, mf_sparse_get_coo(C, r.data(), c.data(), NULL, MF_MEMORY_HOST));
        std::string path =
            std::string(dir) + "/" + s.name + "-" + std::to_string(s.seed) + ".pairs";
        FILE *f = fopen(path.c_str(), "w");
        if (!f) {
            fprintf(stderr, "bench_bmf: cannot write %s\n", path.c_str());
            return 1;
        }
        fprintf(f, "%d %d %lld\n", s.rows, s.cols, (long long)nnz);
        for (int64_t t = 0; t < nnz; t++)
            fprintf(f, "%d %d\n", r[(size_t)t], c[(size_t)t]);
        fclose(f);
        printf("%s: %d x %d, %lld ones\n", path.c_str(), s.rows, s.cols, (long long)nnz);
        mf_sparse_destroy(C);
    }
    mf_ctx_destroy(ctx);
    return 0;
}

// --covers: the Asso start's cover alone (mf_bmf_asso, every instance's) from each backend
// on the --case matrices: the dense tensor-core cover (k = 20 only: its later rounds cost a
// fifth of the first each, so k = 128 takes minutes), the sparse one on the device, and the
// CPU's (16 threads; k = 20, skipped with --no-cpu-cover). The factors must be identical.
static void cover_cases(mf_ctx *ctx, const std::vector<sparse_shape> &cases, int instances,
                        bool cpu_cover)
{
    if (cases.empty())
        return;
    printf(
        "\n## the Asso start's cover alone, %d instances: seconds by backend (CPU: %d threads)\n\n"
        "| case | rows | cols | ones | k | dense (tensor cores) | sparse (device) | CPU | "
        "sparse vs dense | same factors |\n|---|---|---|---|---|---|---|---|---|---|\n",
        instances, omp_get_max_threads());
    for (const sparse_shape &s : cases) {
        mf_sparse *C = generate(ctx, s);
        int64_t ones;
        MF_CHECK(ctx, mf_sparse_shape(C, NULL, NULL, &ones));
        for (int k : {20, 128}) {
            const size_t kw = (size_t)(k + 63) / 64;
            const size_t ab = (size_t)instances * s.rows * kw, bb = (size_t)instances * s.cols * kw;
            std::vector<uint64_t> A0(ab), B0(bb), A1(ab), B1(bb);
            double dense = NAN, cpu = NAN;
            bool same = true;
            /* warm: the device CSR and CSC uploads, the transposes, the pool */
            MF_CHECK(ctx, mf_bmf_asso(ctx, C, k, 1, MF_BMF_ASSO_DEVICE_SPARSE, NULL, A1.data(),
                                      B1.data()));
            double t = now();
            MF_CHECK(ctx, mf_bmf_asso(ctx, C, k, instances, MF_BMF_ASSO_DEVICE_SPARSE, NULL,
                                      A1.data(), B1.data()));
            const double sparse = now() - t;
            if (k == 20) {
                t = now();
                MF_CHECK(ctx, mf_bmf_asso(ctx, C, k, instances, MF_BMF_ASSO_DEVICE, NULL, A0.data(),
                                          B0.data()));
                dense = now() - t;
                same = A0 == A1 && B0 == B1;
                if (cpu_cover) {
                    t = now();
                    MF_CHECK(ctx, mf_bmf_asso(ctx, C, k, instances, MF_BMF_ASSO_CPU, NULL,
                                              A0.data(), B0.data()));
                    cpu = now() - t;
                    same = same && A0 == A1 && B0 == B1;
                }
            }
            printf("| %s | %d | %d | %lld | %d | %.3f | %.3f | %.2f | %.1fx | %s |\n",
                   s.name.c_str(), s.rows, s.cols, (long long)ones, k, dense, sparse, cpu,
                   dense / sparse, k == 20 ? (same ? "yes" : "NO") : "");
            fflush(stdout);
        }
        mf_sparse_destroy(C);
    }
}

struct scale_shape {
    int32_t rows, cols;
    int64_t ones;
    int k = 128, sweeps = 6;
    double limit_gb = 0.0;   /* the context's device limit; 0: none */
    bool structured = false; /* the basket generator's ones (sparse_shape) instead of uniform */
    int instances = 1;
};

// ROWS,COLS,ONES[,K[,SWEEPS[,LIMIT_GB[,STRUCTURED[,INSTANCES]]]]]: whole ROWS, COLS, ONES, K
// and INSTANCES of at least 1, whole SWEEPS of at least 0 (0: a whole run), LIMIT_GB of at
// least 0 (0: none), STRUCTURED 0 or 1; false on anything else (sscanf read "12x" as 12).
static bool parse_scale(const char *spec, scale_shape *s)
{
    double v[8] = {0, 0, 0, 128, 6, 0, 0, 1};
    const double lo[8] = {1, 1, 1, 1, 0, 0, 0, 1};
    const double hi[8] = {INT32_MAX, INT32_MAX, 1e15, INT32_MAX, INT32_MAX, 1e9, 1, INT32_MAX};
    int n = 0;
    for (const char *p = spec;;) {
        if (n == 8)
            return false;
        const size_t len = strcspn(p, ",");
        const std::string field(p, len);
        if (!(n == 5 ? number(field.c_str(), lo[n], hi[n], &v[n])
                     : whole(field.c_str(), lo[n], hi[n], &v[n])))
            return false;
        n++;
        if (!p[len])
            break;
        p += len + 1;
    }
    s->rows = (int32_t)v[0], s->cols = (int32_t)v[1], s->ones = (int64_t)v[2];
    s->k = (int)v[3], s->sweeps = (int)v[4], s->limit_gb = v[5];
    s->structured = v[6] != 0, s->instances = (int)v[7];
    return n >= 3;
}

// Uniformly random ones (repeats merged) or the basket generator's, the sampled start: each
// layout of C that fits the device (dense needs rows x cols / 4 bytes) under the case's
// limit, for SWEEPS sweeps; with SWEEPS 0 a whole run to the default stop, C held as the
// default picks. Bit-operations per sweep count dense work: for each side, each (line, other line)
// pair ANDs the k-bit factor lines (cover counts) and two k-bit mask columns (the flip
// deltas); a sweep skips what holds neither ones nor covered entries, so this is an
// equivalent rate, not the work done.
static void scale_cases(const std::vector<scale_shape> &cases)
{
    printf("\n## scale: sampled start\n\n| ones drawn | rows | cols | ones | k | instances | "
           "C held | device limit GB | sweeps | setup s | s per sweep | peak device GB | rel. "
           "error | dense-equiv. bit-ops/s | vs b1 MMA peak 3.86e15 | vs popc peak 0.27e15 |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const scale_shape &sc : cases) {
        mf_ctx_opts co;
        mf_ctx_opts_init(&co);
        co.backend = MF_BACKEND_CUDA;
        co.device_memory_limit = (size_t)(sc.limit_gb * 1e9);
        mf_ctx *ctx = NULL;
        if (mf_ctx_create(&ctx, &co) != MF_OK) {
            fprintf(stderr, "bench_bmf: %s\n", mf_ctx_last_error(NULL));
            exit(1);
        }
        double t0 = now();
        mf_sparse *C = NULL;
        if (sc.structured) {
            sparse_shape sh;
            sh.name = "basket";
            sh.rows = sc.rows, sh.cols = sc.cols, sh.ones = sc.ones;
            C = generate(ctx, sh);
        } else {
            std::vector<int32_t> r(sc.ones), c(sc.ones);
#pragma omp parallel for
            for (int64_t t = 0; t < sc.ones; t++) {
                uint64_t h = mix(0x5ca1e + t);
                r[t] = (int32_t)((h >> 32) % (uint64_t)sc.rows);
                c[t] = (int32_t)((uint32_t)h % (uint64_t)sc.cols);
            }
            MF_CHECK(ctx, mf_sparse_from_coo(ctx, &C, sc.rows, sc.cols, sc.ones, r.data(), c.data(),
                                             NULL, MF_MEMORY_HOST, MF_SPARSE_SUM_DUPLICATES));
        }
        int64_t nnz;
        mf_sparse_shape(C, NULL, NULL, &nnz);
        fprintf(stderr, "bench_bmf: %d x %d, %lld ones made in %.1f s\n", sc.rows, sc.cols,
                (long long)nnz, now() - t0);
        mf_device_info info;
        info.struct_size = sizeof info;
        mf_ctx_device_info(ctx, &info);
        const double dense_c = 2.0 * (double)sc.rows * sc.cols / 8.0;
        const double room = sc.limit_gb > 0 ? sc.limit_gb * 1e9 : (double)info.total_memory;
        std::vector<mf_bmf_c_layout> layouts = {MF_BMF_C_SPARSE, MF_BMF_C_DENSE};
        if (sc.sweeps == 0)
            layouts = {MF_BMF_C_AUTO};
        for (mf_bmf_c_layout layout : layouts) {
            const char *held = layout == MF_BMF_C_SPARSE  ? "nonzero words"
                               : layout == MF_BMF_C_DENSE ? "dense bits"
                                                          : "default (the smaller)";
            if (layout == MF_BMF_C_DENSE && dense_c > 0.8 * room) {
                printf(
                    "| %s | %d | %d | %lld | %d | %d | %s | %.0f | (needs %.0f GB) | | | | | | | "
                    "|\n",
                    sc.structured ? "basket-like" : "uniform", sc.rows, sc.cols, (long long)nnz,
                    sc.k, sc.instances, held, sc.limit_gb, dense_c / 1e9);
                continue;
            }
            mf_ctx_reset_peak_memory(ctx);
            std::vector<uint64_t> A, B;
            std::vector<double> ends;
            mf_bmf_report rep =
                run(ctx, C, sc.k, sc.instances, sc.sweeps, A, B, MF_BMF_INIT_SAMPLE, layout, &ends);
            // seconds per sweep between the first sweep's end and the last's; the setup
            // (C packed, factors made, first counts) is what the first sweep's end adds
            const int n = (int)ends.size();
            const double per = n > 1 ? (ends[n - 1] - ends[0]) / (n - 1) : rep.seconds;
            const double setup = n > 1 ? ends[0] - per : 0.0;
            double ops = 2.0 * 3.0 * (double)sc.rows * sc.cols * sc.k * sc.instances;
            printf("| %s | %d | %d | %lld | %d | %d | %s | %.0f | %d | %.2f | %.4f | %.2f | %.4e | "
                   "%.3e | %.3f | %.3f |\n",
                   sc.structured ? "basket-like" : "uniform", sc.rows, sc.cols, (long long)nnz,
                   sc.k, sc.instances, held, sc.limit_gb, rep.sweeps, setup, per,
                   rep.peak_device_bytes / 1e9, rep.relative_error, ops / per, ops / per / 3.86e15,
                   ops / per / 0.27e15);
            fflush(stdout);
        }
        mf_sparse_destroy(C);
        mf_ctx_destroy(ctx);
    }
}

int main(int argc, char **argv)
{
    const char *dir = "../shared/data/bool";
    int instances = 16;
    bool skip_planted = false, skip_scale = false, skip_sets = false;
    std::vector<sparse_shape> cases;
    std::vector<scale_shape> scales;
    const char *write_dir = NULL;
    bool covers = false, cpu_cover = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--instances") && i + 1 < argc) // checked before device work
            instances = arg_int(argv[i], argv[i + 1], 1), i++;
        else if (!strcmp(argv[i], "--skip-planted"))
            skip_planted = true;
        else if (!strcmp(argv[i], "--skip-scale"))
            skip_scale = true;
        else if (!strcmp(argv[i], "--skip-sets"))
            skip_sets = true;
        else if (!strcmp(argv[i], "--write") && i + 1 < argc)
            write_dir = argv[++i];
        else if (!strcmp(argv[i], "--covers"))
            covers = true;
        else if (!strcmp(argv[i], "--no-cpu-cover"))
            cpu_cover = false;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) {
            sparse_shape sh;
            if (!parse_shape(argv[++i], &sh))
                return 2;
            cases.push_back(sh);
        } else if (!strcmp(argv[i], "--scale") && i + 1 < argc) {
            scale_shape sc;
            if (!parse_scale(argv[++i], &sc)) {
                fprintf(stderr,
                        "bench_bmf: --scale: '%s' is not "
                        "ROWS,COLS,ONES[,K[,SWEEPS[,LIMIT_GB[,STRUCTURED[,INSTANCES]]]]] (whole "
                        "numbers of at least 1, SWEEPS of at least 0, LIMIT_GB >= 0, STRUCTURED "
                        "0 or 1)\n",
                        argv[i]);
                return 2;
            }
            scales.push_back(sc);
        } else {
            fprintf(
                stderr,
                "usage: bench_bmf [--data DIR] [--instances N] [--skip-planted] "
                "[--skip-scale] [--skip-sets] [--case NAME[,key=value...]]... [--write DIR] "
                "[--covers [--no-cpu-cover]] "
                "[--scale ROWS,COLS,ONES[,K[,SWEEPS[,LIMIT_GB[,STRUCTURED[,INSTANCES]]]]]]...\n");
            return 2;
        }
    }
    if (write_dir)
        return write_cases(cases, write_dir);
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CUDA;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &co) != MF_OK) {
        fprintf(stderr, "bench_bmf: %s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    mf_device_info info;
    info.struct_size = sizeof info;
    mf_ctx_device_info(ctx, &info);
    printf("# bench_bmf on %s (mfact %s)\n", info.name, mf_version_string());
    if (!skip_sets)
        datasets(ctx, dir, instances);
    if (covers)
        cover_cases(ctx, cases, instances, cpu_cover);
    else
        sparse_cases(ctx, cases, instances);
    if (!skip_planted)
        planted_cases(ctx, 4);
    mf_ctx_destroy(ctx);
    if (scales.empty() && !skip_scale) {
        scale_shape sc;
        sc.rows = 500000, sc.cols = 200000, sc.ones = 30000000;
        scales.push_back(sc);
        sc.rows = 726000, sc.cols = 259000, sc.ones = 18803400; /* 0.01 % */
        scales.push_back(sc);
        sc.rows = 2000000, sc.cols = 1000000, sc.ones = 200000000, sc.limit_gb = 16;
        scales.push_back(sc);
        /* the cuTeBool-sized case with structure, run whole with the default instances */
        sc.rows = 726000, sc.cols = 259000, sc.ones = 18803400, sc.limit_gb = 0;
        sc.structured = true, sc.sweeps = 0, sc.instances = 16;
        scales.push_back(sc);
    }
    scale_cases(scales);
    return 0;
}
