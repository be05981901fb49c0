// The bench's ratings (synthetic_ratings.h: users x items CSR, `test` marking the held-out
// entries) written as the input files of the two cuMF peers, so that they run on exactly
// the data bench_als and bench_sgd measure (`--write-cumf DIR`). Host code. Every file is
// raw little-endian int32 / float32 arrays (the host's order, as the peers read them with
// fread), no header; indices 0-based. bench/README.md says how the peers are built and run.
//
// cuMF_als (main.cpp, host_utilities.cpp) factors R = items x users, as in its Netflix
// command (M = 17,770 items, N = 480,189 users), and reads from its DATA_DIR:
//   R_train_csr.indptr.bin   int32[M + 1]   training CSR of R: row = item
//   R_train_csr.indices.bin  int32[NNZ]     user of each entry (ascending within an item)
//   R_train_csr.data.bin     float32[NNZ]   rating
//   R_train_csc.indptr.bin   int32[N + 1]   training CSC of R (= the bench's own CSR)
//   R_train_csc.indices.bin  int32[NNZ]     item of each entry
//   R_train_csc.data.bin     float32[NNZ]
//   R_train_coo.row.bin      int32[NNZ]     the item of each CSR entry, in CSR order (its
//                                           training RMSE pairs it with the CSR arrays)
//   R_test_coo.row.bin       int32[NNZ_TEST] item
//   R_test_coo.col.bin       int32[NNZ_TEST] user
//   R_test_coo.data.bin      float32[NNZ_TEST]
// M, N, NNZ and NNZ_TEST are command-line arguments of the peer: they also go to
// cumf_als.env (shell assignments CUMF_ALS_M=..., to source before the run).
//
// cuMF_SGD (sgd.cu read_problem, test/mf.cpp read_problem) reads records of
// {int32 user, int32 item, float32 rating} (12 bytes, nnz = file size / 12); its shape is
// one more than the largest index. Written: sgd_train.bin in item-major order (items
// ascending, users ascending within an item: the order of the netflix_mm file behind its
// published Netflix runs; the kernel updates runs of 128 consecutive records), sgd_test.bin
// (the held-out ratings, for its mf-predict), and cumf_sgd.env (CUMF_SGD_NNZ=...).
#ifndef MFACT_BENCH_CUMF_FILES_H
#define MFACT_BENCH_CUMF_FILES_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mfact/mfact.h"
#include "synthetic_ratings.h"

// Creates dir when missing (its parent must exist).
static int cumf_make_dir(const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "cumf_files: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

// Writes n elements of size bytes each to dir/name, replacing the file.
static int cumf_write_array(const char *dir, const char *name, const void *data, size_t size,
                            size_t n)
{
    std::string path = std::string(dir) + "/" + name;
    FILE *f = fopen(path.c_str(), "wb");
    if (!f) {
        fprintf(stderr, "cumf_files: cannot open %s: %s\n", path.c_str(), strerror(errno));
        return -1;
    }
    size_t done = n ? fwrite(data, size, n, f) : 0;
    int err = done != n ? errno : 0;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    if (done != n || err) {
        fprintf(stderr, "cumf_files: cannot write %s: %s\n", path.c_str(),
                strerror(err ? err : EIO));
        return -1;
    }
    return 0;
}

// Writes text to dir/name.
static int cumf_write_text(const char *dir, const char *name, const std::string &text)
{
    return cumf_write_array(dir, name, text.data(), 1, text.size());
}

// The training entries of r in item-major order: item_ptr[items + 1], and per entry its
// user and its position in r (users ascending within an item). -1 when the entries do not
// fit the peers' int32 indices.
static int cumf_item_major(const ratings &r, std::vector<int32_t> &item_ptr,
                           std::vector<int32_t> &user, std::vector<int64_t> &where)
{
    int64_t nnz = r.ptr[r.users], ntrain = 0;
    for (int64_t p = 0; p < nnz; p++)
        ntrain += !r.test[p];
    if (ntrain > INT32_MAX || nnz - ntrain > INT32_MAX) {
        fprintf(stderr, "cumf_files: %lld ratings do not fit the peers' int32 indices\n",
                (long long)nnz);
        return -1;
    }
    std::vector<int64_t> next(r.items + 1, 0);
    for (int64_t p = 0; p < nnz; p++)
        if (!r.test[p])
            next[r.col[p] + 1]++;
    for (int32_t i = 0; i < r.items; i++)
        next[i + 1] += next[i];
    item_ptr.assign(next.begin(), next.end());
    user.resize(ntrain), where.resize(ntrain);
    for (int32_t u = 0; u < r.users; u++)
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            if (!r.test[p]) {
                int64_t q = next[r.col[p]]++;
                user[q] = u, where[q] = p;
            }
    return 0;
}

// Checks the shape and the column indices of r.
static int cumf_check(const ratings &r)
{
    if (r.users <= 0 || r.items <= 0 || (int64_t)r.ptr.size() != (int64_t)r.users + 1 ||
        r.ptr[0] != 0 || (int64_t)r.col.size() != r.ptr[r.users] || r.val.size() != r.col.size() ||
        r.test.size() != r.col.size()) {
        fprintf(stderr, "cumf_files: the ratings' arrays do not match their shape\n");
        return -1;
    }
    for (int32_t u = 0; u < r.users; u++)
        if (r.ptr[u + 1] < r.ptr[u]) {
            fprintf(stderr, "cumf_files: the row offsets decrease at user %d\n", (int)u);
            return -1;
        }
    for (int32_t c : r.col)
        if (c < 0 || c >= r.items) {
            fprintf(stderr, "cumf_files: an item index (%d) is outside 0..%d\n", (int)c,
                    (int)r.items - 1);
            return -1;
        }
    return 0;
}

// The files cuMF_als reads (see the head of this file) into dir. 0 or -1 (message printed).
static int cumf_write_als(const ratings &r, const char *dir)
{
    std::vector<int32_t> item_ptr, idx;
    std::vector<int64_t> where;
    if (cumf_check(r) != 0 || cumf_make_dir(dir) != 0 ||
        cumf_item_major(r, item_ptr, idx, where) != 0)
        return -1;
    const size_t ntrain = where.size();
    // CSR of R = items x users (idx: the users), and the item of each entry (the COO rows).
    std::vector<int32_t> row(ntrain);
    std::vector<float> val(ntrain);
    for (int32_t i = 0; i < r.items; i++)
        for (int32_t q = item_ptr[i]; q < item_ptr[i + 1]; q++)
            row[q] = i, val[q] = r.val[where[q]];
    if (cumf_write_array(dir, "R_train_csr.indptr.bin", item_ptr.data(), 4, item_ptr.size()) ||
        cumf_write_array(dir, "R_train_csr.indices.bin", idx.data(), 4, ntrain) ||
        cumf_write_array(dir, "R_train_csr.data.bin", val.data(), 4, ntrain) ||
        cumf_write_array(dir, "R_train_coo.row.bin", row.data(), 4, ntrain))
        return -1;
    // CSC of R = the bench's CSR without the held-out entries; the test COO from the same pass.
    std::vector<int32_t> user_ptr(r.users + 1, 0), trow, tcol;
    std::vector<float> tval;
    size_t t = 0;
    for (int32_t u = 0; u < r.users; u++) {
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            if (r.test[p]) {
                trow.push_back(r.col[p]), tcol.push_back(u), tval.push_back(r.val[p]);
            } else {
                idx[t] = r.col[p], val[t] = r.val[p], t++;
            }
        user_ptr[u + 1] = (int32_t)t;
    }
    if (cumf_write_array(dir, "R_train_csc.indptr.bin", user_ptr.data(), 4, user_ptr.size()) ||
        cumf_write_array(dir, "R_train_csc.indices.bin", idx.data(), 4, ntrain) ||
        cumf_write_array(dir, "R_train_csc.data.bin", val.data(), 4, ntrain) ||
        cumf_write_array(dir, "R_test_coo.row.bin", trow.data(), 4, trow.size()) ||
        cumf_write_array(dir, "R_test_coo.col.bin", tcol.data(), 4, tcol.size()) ||
        cumf_write_array(dir, "R_test_coo.data.bin", tval.data(), 4, tval.size()))
        return -1;
    char env[256];
    snprintf(env, sizeof env,
             "CUMF_ALS_M=%d\nCUMF_ALS_N=%d\nCUMF_ALS_NNZ=%lld\nCUMF_ALS_NNZ_TEST=%lld\n",
             (int)r.items, (int)r.users, (long long)ntrain, (long long)trow.size());
    if (cumf_write_text(dir, "cumf_als.env", env) != 0)
        return -1;
    printf("cuMF_als input written to %s: R = %d items x %d users, %lld training and %lld test "
           "ratings (cumf_als %d %d F %lld %lld LAMBDA X_BATCH THETA_BATCH %s)\n",
           dir, (int)r.items, (int)r.users, (long long)ntrain, (long long)trow.size(), (int)r.items,
           (int)r.users, (long long)ntrain, (long long)trow.size(), dir);
    return 0;
}

// The files cuMF_SGD and its mf-predict read (see the head of this file) into dir.
static int cumf_write_sgd(const ratings &r, const char *dir)
{
    struct record {
        int32_t u, v;
        float r;
    };
    static_assert(sizeof(record) == 12, "cuMF_SGD reads 12-byte records");
    std::vector<int32_t> item_ptr, user;
    std::vector<int64_t> where;
    if (cumf_check(r) != 0 || cumf_make_dir(dir) != 0 ||
        cumf_item_major(r, item_ptr, user, where) != 0)
        return -1;
    std::vector<record> train(where.size()), test;
    for (int32_t i = 0; i < r.items; i++)
        for (int32_t q = item_ptr[i]; q < item_ptr[i + 1]; q++)
            train[q] = {user[q], i, r.val[where[q]]};
    for (int32_t u = 0; u < r.users; u++)
        for (int64_t p = r.ptr[u]; p < r.ptr[u + 1]; p++)
            if (r.test[p])
                test.push_back({u, r.col[p], r.val[p]});
    if (cumf_write_array(dir, "sgd_train.bin", train.data(), sizeof(record), train.size()) ||
        cumf_write_array(dir, "sgd_test.bin", test.data(), sizeof(record), test.size()))
        return -1;
    char env[128];
    snprintf(env, sizeof env, "CUMF_SGD_NNZ=%lld\nCUMF_SGD_NNZ_TEST=%lld\n",
             (long long)train.size(), (long long)test.size());
    if (cumf_write_text(dir, "cumf_sgd.env", env) != 0)
        return -1;
    printf("cuMF_SGD input written to %s: sgd_train.bin (%lld ratings, item-major) and "
           "sgd_test.bin (%lld), %d users x %d items\n",
           dir, (long long)train.size(), (long long)test.size(), (int)r.users, (int)r.items);
    return 0;
}

// The ratings of a train/test pair of the same users x items shape (what load_ratings
// returns, synthetic or read from files), merged into one `ratings` with `test` set on the
// held-out entries. 0 or -1 (message printed).
static int cumf_ratings_from_split(mf_ctx *ctx, const mf_sparse *train, const mf_sparse *test,
                                   ratings *r)
{
    int32_t rows[2], cols[2];
    int64_t nnz[2];
    const mf_sparse *m[2] = {train, test};
    std::vector<int64_t> ptr[2];
    std::vector<int32_t> col[2];
    std::vector<float> val[2];
    for (int s = 0; s < 2; s++) {
        if (mf_sparse_shape(m[s], &rows[s], &cols[s], &nnz[s]) != MF_OK) {
            fprintf(stderr, "cumf_files: %s\n", mf_ctx_last_error(ctx));
            return -1;
        }
        ptr[s].resize((size_t)rows[s] + 1), col[s].resize(nnz[s]), val[s].resize(nnz[s]);
        if (mf_sparse_get_csr(m[s], ptr[s].data(), col[s].data(), val[s].data(), MF_MEMORY_HOST) !=
            MF_OK) {
            fprintf(stderr, "cumf_files: %s\n", mf_ctx_last_error(ctx));
            return -1;
        }
    }
    if (rows[0] != rows[1] || cols[0] != cols[1]) {
        fprintf(stderr, "cumf_files: train (%d x %d) and test (%d x %d) differ in shape\n",
                (int)rows[0], (int)cols[0], (int)rows[1], (int)cols[1]);
        return -1;
    }
    r->users = rows[0], r->items = cols[0], r->oracle_rmse = NAN;
    r->ptr.assign((size_t)rows[0] + 1, 0);
    r->col.clear(), r->val.clear(), r->test.clear();
    r->col.reserve(nnz[0] + nnz[1]), r->val.reserve(nnz[0] + nnz[1]);
    r->test.reserve(nnz[0] + nnz[1]);
    for (int32_t u = 0; u < rows[0]; u++) {
        for (int s = 0; s < 2; s++)
            for (int64_t p = ptr[s][u]; p < ptr[s][u + 1]; p++) {
                r->col.push_back(col[s][p]);
                r->val.push_back(val[s][p]);
                r->test.push_back((uint8_t)s);
            }
        r->ptr[u + 1] = (int64_t)r->col.size();
    }
    return 0;
}

// What the benches call: the peer's files for the pair train/test into dir.
enum cumf_peer { CUMF_ALS, CUMF_SGD };
static int cumf_write_split(mf_ctx *ctx, const mf_sparse *train, const mf_sparse *test,
                            const char *dir, cumf_peer peer)
{
    ratings r;
    if (cumf_ratings_from_split(ctx, train, test, &r) != 0)
        return -1;
    return peer == CUMF_ALS ? cumf_write_als(r, dir) : cumf_write_sgd(r, dir);
}

#endif
