// Netflix-shaped synthetic ratings for the benchmarks of explicit-ratings algorithms
// (bench_als, bench_sgd): users x items with log-normal user activity (sigma 1) and item
// popularity (sigma 1.5), every user and item rated at least once, ratings round(3.6 + b_u
// + b_i + planted rank-10 dot + N(0, 0.74^2)) clipped to 1..5, seeded; 1% of the ratings
// held out. Host code, built with OpenMP.
#ifndef MFACT_BENCH_SYNTHETIC_RATINGS_H
#define MFACT_BENCH_SYNTHETIC_RATINGS_H

#include <math.h>
#include <omp.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "bench_util.h"

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

// The benchmark's ratings: --train and --test files in the packed binary triplet format
// when both are given, else the synthetic Netflix shape at `scale` (1: 480,189 x 17,770,
// 99M ratings). Returns the planted model's test RMSE (NaN for files).
static double load_ratings(mf_ctx *ctx, const char *train_file, const char *test_file, double scale,
                           uint64_t seed, mf_sparse **train, mf_sparse **test)
{
    if (train_file && test_file) {
        mf_read_opts ro;
        mf_read_opts_init(&ro);
        ro.format = MF_FORMAT_BINARY_TRIPLETS;
        MF_CHECK(ctx, mf_sparse_read(ctx, train, train_file, &ro));
        MF_CHECK(ctx, mf_sparse_shape(*train, &ro.rows, &ro.cols, NULL));
        MF_CHECK(ctx, mf_sparse_read(ctx, test, test_file, &ro));
        return NAN;
    }
    ratings r;
    generate(&r, (int32_t)(480189 * scale), (int32_t)(17770 * std::min(1.0, 4 * scale)),
             99e6 * scale, seed);
    split(ctx, r, train, test);
    return r.oracle_rmse;
}

#endif
