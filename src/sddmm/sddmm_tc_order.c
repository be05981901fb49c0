#include "sddmm/sddmm_tc_order.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"

static const char *const names[MF_TC_ORDERS] = {"natural", "length-minhash", "minhash", "auto"};

const char *mf_tc_order_name(mf_tc_order order)
{
    return (unsigned)order < MF_TC_ORDERS ? names[order] : "?";
}

mf_status mf_tc_order_from_env(mf_ctx *ctx, mf_tc_order *order)
{
    *order = MF_TC_ORDER_AUTO;
    const char *v = getenv("MFACT_SDDMM_TC_ORDER");
    if (!v || !*v)
        return MF_OK;
    for (int o = 0; o < MF_TC_ORDERS; o++)
        if (!strcmp(v, names[o])) {
            *order = (mf_tc_order)o;
            return MF_OK;
        }
    return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                   "mf_sddmm: MFACT_SDDMM_TC_ORDER='%s' is not natural, length-minhash, minhash "
                   "or auto",
                   v);
}

typedef struct row_key {
    uint64_t key;
    int32_t row;
} row_key;

static int key_less(const row_key *a, const row_key *b)
{
    return a->key < b->key || (a->key == b->key && a->row < b->row);
}

static int by_key(const void *x, const void *y)
{
    const row_key *a = x, *b = y;
    return key_less(a, b) ? -1 : key_less(b, a);
}

/* The row's two MinHash values (the smallest of two seeded hashes over its columns) in one
 * key, below its octave of length when `by_length`: the longest rows first. */
static uint64_t row_key_of(const mf_sparse *S, int32_t i, int by_length)
{
    uint32_t h0 = UINT32_MAX, h1 = UINT32_MAX;
    for (int64_t p = S->row_ptr[i]; p < S->row_ptr[i + 1]; p++) {
        uint32_t a = (uint32_t)(mf_split_hash(0, S->col[p], 1) >> 32);
        uint32_t b = (uint32_t)(mf_split_hash(0, S->col[p], 2) >> 32);
        h0 = a < h0 ? a : h0;
        h1 = b < h1 ? b : h1;
    }
    if (!by_length)
        return (uint64_t)h0 << 32 | h1;
    uint64_t len = (uint64_t)(S->row_ptr[i + 1] - S->row_ptr[i]);
    int octave = 0;
    while (len >>= 1)
        octave++; /* < 64: six bits */
    return (uint64_t)(63 - octave) << 58 | (uint64_t)(h0 >> 6) << 32 | h1;
}

/* a[lo, mid) and a[mid, hi), each sorted, merged into out[lo, hi). */
static void merge(const row_key *a, int64_t lo, int64_t mid, int64_t hi, row_key *out)
{
    int64_t i = lo, j = mid, o = lo;
    while (i < mid && j < hi)
        out[o++] = key_less(&a[j], &a[i]) ? a[j++] : a[i++];
    while (i < mid)
        out[o++] = a[i++];
    while (j < hi)
        out[o++] = a[j++];
}

/* Sort a[0, n) by (key, row): the threads sort power-of-two parts, then merge them pairwise;
 * keys and rows are unique together, so every thread count gives the one sorted result. */
static row_key *sort_keys(row_key *a, row_key *tmp, int64_t n, int threads)
{
    int64_t parts = 1;
    while (parts < threads && parts < 256 && n / (2 * parts) >= 4096)
        parts *= 2;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t p = 0; p < parts; p++) {
        int64_t lo = n * p / parts, hi = n * (p + 1) / parts;
        qsort(a + lo, (size_t)(hi - lo), sizeof *a, by_key);
    }
    for (int64_t width = 1; width < parts; width *= 2) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int64_t p = 0; p < parts; p += 2 * width)
            merge(a, n * p / parts, n * (p + width) / parts, n * (p + 2 * width) / parts, tmp);
        row_key *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

int64_t mf_tc_rows_with_entries(const mf_sparse *S)
{
    int64_t n = 0;
    for (int32_t i = 0; i < S->rows; i++)
        n += S->row_ptr[i + 1] > S->row_ptr[i];
    return n;
}

mf_status mf_tc_order_rows(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order, int32_t *rows,
                           int64_t n)
{
    int64_t m = 0;
    for (int32_t i = 0; i < S->rows && m < n; i++)
        if (S->row_ptr[i + 1] > S->row_ptr[i])
            rows[m++] = i;
    if (order == MF_TC_ORDER_NATURAL || n < 2)
        return MF_OK;
    if (order != MF_TC_ORDER_LENGTH_MINHASH && order != MF_TC_ORDER_MINHASH)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: no row order %d", (int)order);
    row_key *keys = malloc((size_t)n * sizeof *keys), *tmp = malloc((size_t)n * sizeof *tmp);
    if (!keys || !tmp) {
        free(keys);
        free(tmp);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
    }
    const int threads = mf_ctx_threads(ctx), by_length = order == MF_TC_ORDER_LENGTH_MINHASH;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (int64_t r = 0; r < n; r++) {
        keys[r].key = row_key_of(S, rows[r], by_length);
        keys[r].row = rows[r];
    }
    const row_key *sorted = sort_keys(keys, tmp, n, threads);
    for (int64_t r = 0; r < n; r++)
        rows[r] = sorted[r].row;
    free(keys);
    free(tmp);
    return MF_OK;
}

/* An order kept on the matrix: rows[0 .. n). */
typedef struct cached_order {
    int64_t n;
    int32_t rows[];
} cached_order;

/* One key per order: the addresses are the keys (sparse.h). */
static const char order_keys[MF_TC_ORDERS];

static void cached_order_free(mf_sparse *m, void *value)
{
    (void)m;
    free(value);
}

mf_status mf_tc_order_rows_cached(mf_ctx *ctx, mf_sparse *S, mf_tc_order order,
                                  const int32_t **rows, int64_t *n)
{
    if ((int)order < 0 || order >= MF_TC_ORDER_AUTO)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: no row order %d", (int)order);
    cached_order *c = mf_sparse_cache_get(S, &order_keys[order]);
    if (!c) {
        const int64_t m = mf_tc_rows_with_entries(S);
        c = malloc(sizeof *c + (size_t)(m > 0 ? m : 1) * sizeof *c->rows);
        if (!c)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        c->n = m;
        mf_status st = mf_tc_order_rows(ctx, S, order, c->rows, m);
        if (st != MF_OK) {
            free(c);
            return st;
        }
        MF_TRY(mf_sparse_cache_put(S, &order_keys[order], c, cached_order_free));
    }
    *rows = c->rows;
    *n = c->n;
    return MF_OK;
}
