#include "bmf_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"

#include "testutil.h"

static mf_sparse *from_dense(mf_ctx *ctx, int32_t rows, int32_t cols, const unsigned char *d)
{
    int64_t nnz = 0;
    for (int64_t p = 0; p < (int64_t)rows * cols; p++)
        nnz += d[p];
    int32_t *r = malloc((size_t)(nnz ? nnz : 1) * 4), *c = malloc((size_t)(nnz ? nnz : 1) * 4);
    ck_assert(r && c);
    int64_t t = 0;
    for (int32_t i = 0; i < rows; i++)
        for (int32_t j = 0; j < cols; j++)
            if (d[(int64_t)i * cols + j])
                r[t] = i, c[t] = j, t++;
    mf_sparse *m = NULL;
    ck_assert_msg(mf_sparse_from_coo(ctx, &m, rows, cols, nnz, r, c, NULL, MF_MEMORY_HOST, 0) ==
                      MF_OK,
                  "%s", mf_ctx_last_error(ctx));
    free(r);
    free(c);
    return m;
}

mf_sparse *bx_planted(mf_ctx *ctx, int32_t rows, int32_t cols, int k, double p, double noise,
                      uint64_t seed, uint64_t **A, uint64_t **B, mf_sparse **clean)
{
    int kw = (k + 63) / 64;
    uint64_t s = seed;
    uint64_t *a = calloc((size_t)rows * kw, 8), *b = calloc((size_t)cols * kw, 8);
    unsigned char *d = malloc((size_t)rows * cols);
    ck_assert(a && b && d);
    for (int64_t i = 0; i < rows; i++)
        for (int l = 0; l < k; l++)
            if (tu_unit(&s) < p)
                a[i * kw + l / 64] |= 1ull << (l % 64);
    for (int64_t j = 0; j < cols; j++)
        for (int l = 0; l < k; l++)
            if (tu_unit(&s) < p)
                b[j * kw + l / 64] |= 1ull << (l % 64);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int v = 0;
            for (int w = 0; w < kw; w++)
                v |= (a[i * kw + w] & b[j * kw + w]) != 0;
            d[i * cols + j] = (unsigned char)v;
        }
    if (clean)
        *clean = from_dense(ctx, rows, cols, d);
    for (int64_t t = 0; t < (int64_t)rows * cols; t++)
        if (noise > 0 && tu_unit(&s) < noise)
            d[t] ^= 1;
    mf_sparse *C = from_dense(ctx, rows, cols, d);
    free(d);
    if (A)
        *A = a;
    else
        free(a);
    if (B)
        *B = b;
    else
        free(b);
    return C;
}

void bx_count(const mf_sparse *C, int k, const uint64_t *A, const uint64_t *B, int64_t *fp,
              int64_t *fn)
{
    int32_t rows, cols;
    int64_t nnz;
    ck_assert_int_eq(mf_sparse_shape(C, &rows, &cols, &nnz), MF_OK);
    int64_t *ptr = malloc((size_t)(rows + 1) * 8);
    int32_t *col = malloc((size_t)(nnz ? nnz : 1) * 4);
    ck_assert(ptr && col);
    ck_assert_int_eq(mf_sparse_get_csr(C, ptr, col, NULL, MF_MEMORY_HOST), MF_OK);
    int kw = (k + 63) / 64;
    *fp = *fn = 0;
    for (int32_t i = 0; i < rows; i++) {
        int64_t p = ptr[i];
        for (int32_t j = 0; j < cols; j++) {
            int one = p < ptr[i + 1] && col[p] == j;
            p += one;
            int v = 0;
            for (int w = 0; w < kw; w++)
                v |= (A[(int64_t)i * kw + w] & B[(int64_t)j * kw + w]) != 0;
            *fp += v && !one;
            *fn += one && !v;
        }
    }
    free(ptr);
    free(col);
}

static mf_bmf_report run(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                         uint64_t **B, int recount, int c_layout)
{
    int32_t rows, cols;
    ck_assert_int_eq(mf_sparse_shape(C, &rows, &cols, NULL), MF_OK);
    int kw = (o->rank + 63) / 64;
    if (!*A)
        *A = calloc((size_t)rows * kw, 8);
    if (!*B)
        *B = calloc((size_t)cols * kw, 8);
    ck_assert(*A && *B);
    mf_bmf_report rep = {.struct_size = sizeof rep};
    mf_bmf_debug debug = {recount, (mf_bmf_c_layout)c_layout};
    mf_status st = mf_bmf_run_checked(ctx, C, o, *A, *B, MF_MEMORY_HOST, &rep, &debug);
    ck_assert_msg(st == MF_OK, "mf_bmf_run: %s", mf_ctx_last_error(ctx));
    int64_t fp, fn;
    bx_count(C, o->rank, *A, *B, &fp, &fn);
    ck_assert_msg(fp == rep.fp && fn == rep.fn, "report fp %lld fn %lld, recount %lld %lld",
                  (long long)rep.fp, (long long)rep.fn, (long long)fp, (long long)fn);
    ck_assert_int_eq(rep.error, fp + fn);
    return rep;
}

mf_bmf_report bx_run(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                     uint64_t **B)
{
    return run(ctx, C, o, A, B, 0, MF_BMF_C_AUTO);
}

mf_bmf_report bx_run_recounted(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                               uint64_t **B)
{
    return run(ctx, C, o, A, B, 1, MF_BMF_C_AUTO);
}

mf_bmf_report bx_run_layout(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                            uint64_t **B, int c_layout)
{
    return run(ctx, C, o, A, B, 1, c_layout);
}

mf_sparse *bx_dataset(mf_ctx *ctx, const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "bool/%s.in", name);
    const char *path = tu_data_path(rel);
    if (!path)
        return NULL;
    mf_read_opts ro;
    mf_read_opts_init(&ro);
    ro.flags |= MF_SPARSE_PATTERN;
    mf_sparse *C = NULL;
    ck_assert_msg(mf_sparse_read(ctx, &C, path, &ro) == MF_OK, "%s", mf_ctx_last_error(ctx));
    return C;
}

void bx_check_apatio(mf_ctx *ctx, const char *label, int instances, mf_bmf_init init)
{
    const int asso = init == MF_BMF_INIT_ASSO;
    mf_sparse *C = bx_dataset(ctx, "APatio");
    if (!C) {
        printf("APatio (%s%s): data set absent, skipped\n", label, asso ? ", Asso start" : "");
        return;
    }
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    o.rank = 20;
    o.instances = instances;
    o.init = init;
    uint64_t *A = NULL, *B = NULL;
    mf_bmf_report rep = bx_run(ctx, C, &o, &A, &B);
    printf("APatio (%s%s): k 20, %d instances: relative error %.4e (CuBin 7.33e-3, Asso "
           "6.50e-3), %d sweeps, %.2f s\n",
           label, asso ? ", Asso start" : "", instances, rep.relative_error, rep.sweeps,
           rep.seconds);
    if (asso)
        ck_assert_msg(rep.relative_error <= 6.50e-3, "relative error %g", rep.relative_error);
    else
        ck_assert_msg(rep.relative_error < 7.33e-3, "relative error %g", rep.relative_error);
    free(A);
    free(B);
    mf_sparse_destroy(C);
}

/* Asso as bmf_asso.h states it, with dense arrays and no shortcuts. */
void bx_asso_reference(const mf_sparse *C, int k, int q, uint64_t *A, uint64_t *B)
{
    int32_t m, n;
    int64_t nnz;
    mf_sparse_shape(C, &m, &n, &nnz);
    int64_t *ptr = malloc(((size_t)m + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)(nnz ? nnz : 1) * sizeof *col);
    unsigned char *d = calloc((size_t)m * n, 1), *cov = calloc((size_t)m * n, 1);
    int64_t *cnt = calloc((size_t)n, sizeof *cnt);
    int32_t *seeds = malloc((size_t)n * sizeof *seeds);
    ck_assert(ptr && col && d && cov && cnt && seeds);
    mf_sparse_get_csr(C, ptr, col, NULL, MF_MEMORY_HOST);
    for (int32_t i = 0; i < m; i++)
        for (int64_t p = ptr[i]; p < ptr[i + 1]; p++)
            d[(int64_t)i * n + col[p]] = 1, cnt[col[p]]++;
    /* seeds: selection by count descending, index ascending, ones only */
    int P = 0;
    unsigned char *taken = calloc((size_t)n, 1);
    ck_assert(taken);
    while (P < BMF_ASSO_CANDIDATES) {
        int32_t best = -1;
        for (int32_t j = 0; j < n; j++)
            if (!taken[j] && cnt[j] > 0 && (best < 0 || cnt[j] > cnt[best]))
                best = j;
        if (best < 0)
            break;
        taken[best] = 1;
        seeds[P++] = best;
    }
    unsigned char *S = calloc((size_t)(P ? P : 1) * n, 1);
    ck_assert(S);
    for (int c = 0; c < P; c++)
        for (int32_t j = 0; j < n; j++) {
            int64_t co = 0;
            for (int32_t i = 0; i < m; i++)
                co += d[(int64_t)i * n + seeds[c]] & d[(int64_t)i * n + j];
            S[(int64_t)c * n + j] =
                (unsigned char)bmf_asso_member(co, cnt[seeds[c]], bmf_asso_tau(q));
        }
    int kw = (k + 63) / 64;
    memset(A, 0, (size_t)m * kw * 8);
    memset(B, 0, (size_t)n * kw * 8);
    for (int l = 0; l < k && P > 0; l++) {
        int64_t best_gain = 0;
        int best = -1;
        for (int c = 0; c < P; c++) {
            int64_t g = 0;
            for (int32_t i = 0; i < m; i++) {
                int64_t gi = 0;
                for (int32_t j = 0; j < n; j++)
                    if (S[(int64_t)c * n + j] && !cov[(int64_t)i * n + j])
                        gi += d[(int64_t)i * n + j] ? 1 : -1;
                g += gi > 0 ? gi : 0;
            }
            if (g > best_gain)
                best_gain = g, best = c;
        }
        if (best < 0)
            break;
        for (int32_t j = 0; j < n; j++)
            if (S[(int64_t)best * n + j])
                B[(int64_t)j * kw + l / 64] |= (uint64_t)1 << (l % 64);
        for (int32_t i = 0; i < m; i++) {
            int64_t gi = 0;
            for (int32_t j = 0; j < n; j++)
                if (S[(int64_t)best * n + j] && !cov[(int64_t)i * n + j])
                    gi += d[(int64_t)i * n + j] ? 1 : -1;
            if (gi <= 0)
                continue;
            A[(int64_t)i * kw + l / 64] |= (uint64_t)1 << (l % 64);
            for (int32_t j = 0; j < n; j++)
                if (S[(int64_t)best * n + j])
                    cov[(int64_t)i * n + j] = 1;
        }
    }
    free(ptr), free(col), free(d), free(cov), free(cnt), free(seeds), free(taken), free(S);
}

typedef struct rounds_seen {
    int64_t calls, last_done, total;
} rounds_seen;

static int stop_after_three(void *user, int64_t done, int64_t total)
{
    rounds_seen *r = user;
    ck_assert_int_eq(done, r->last_done + 1); /* one instance: one round a call */
    r->calls++;
    r->last_done = done;
    r->total = total;
    return done >= 3;
}

void bx_check_asso_watch(mf_ctx *ctx, mf_sparse *C, int k, int where)
{
    int32_t m, n;
    ck_assert_int_eq(mf_sparse_shape(C, &m, &n, NULL), MF_OK);
    const int kw = (k + 63) / 64;
    const size_t ab = (size_t)m * kw, bb = (size_t)n * kw;
    uint64_t *A = malloc(ab * 8), *B = malloc(bb * 8), *Ap = malloc(ab * 8), *Bp = malloc(bb * 8);
    ck_assert(A && B && Ap && Bp);
    ck_assert_msg(mf_bmf_asso(ctx, C, k, 1, (mf_bmf_asso_where)where, NULL, A, B) == MF_OK, "%s",
                  mf_ctx_last_error(ctx));
    rounds_seen seen = {0, 0, 0};
    mf_bmf_asso_watch w = {.round = stop_after_three, .user = &seen};
    ck_assert_int_eq(mf_bmf_asso(ctx, C, k, 1, (mf_bmf_asso_where)where, &w, Ap, Bp), MF_OK);
    ck_assert_int_eq(w.stopped, 1);
    ck_assert_int_eq(seen.calls, 3);
    ck_assert_int_eq(seen.total, k);
    /* the whole cover's first three factors, and nothing after them */
    for (size_t t = 0; t < ab; t++)
        ck_assert_msg(Ap[t] == (t % kw == 0 ? A[t] & 7u : 0), "where %d: A word %zu", where, t);
    for (size_t t = 0; t < bb; t++)
        ck_assert_msg(Bp[t] == (t % kw == 0 ? B[t] & 7u : 0), "where %d: B word %zu", where, t);
    int some = 0;
    for (size_t t = 0; t < bb; t += kw)
        some |= (B[t] >> 3) != 0;
    ck_assert_msg(some, "the whole cover has no fourth factor: the test would prove nothing");
    /* a deadline already past: nothing built */
    mf_bmf_asso_watch late = {.deadline = 1e-9};
    ck_assert_int_eq(mf_bmf_asso(ctx, C, k, 1, (mf_bmf_asso_where)where, &late, Ap, Bp), MF_OK);
    ck_assert_int_eq(late.stopped, 2);
    for (size_t t = 0; t < ab; t++)
        ck_assert(Ap[t] == 0);
    for (size_t t = 0; t < bb; t++)
        ck_assert(Bp[t] == 0);
    free(A), free(B), free(Ap), free(Bp);
}
