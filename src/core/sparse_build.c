/* COO or CSR input to canonical CSR: rows in order, columns sorted within each row,
 * duplicates summed or rejected. Two stable counting-sort passes (by column, then by row)
 * sort any input in O(nnz + rows + cols) time; input that is already in order (most files)
 * is detected and copied straight. A matrix is made here and freed here (mf_sparse_destroy),
 * so that sparse.c, the public functions, only calls in. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/id_map.h"
#include "core/sparse.h"

void mf_sparse_destroy(mf_sparse *m)
{
    if (!m)
        return;
    if (m->ctx)
        mf_sparse_release_device(m);
    free(m->transpose.ptr);
    free(m->transpose.idx);
    free(m->transpose.val);
    free(m->col_ptr);
    free(m->row_ptr);
    free(m->col);
    free(m->val);
    mf_id_map_destroy(m->row_ids);
    mf_id_map_destroy(m->col_ids);
    free(m);
}

static mf_sparse *sparse_alloc(int32_t rows, int32_t cols, int64_t nnz, bool with_values)
{
    mf_sparse *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->rows = rows;
    m->cols = cols;
    m->nnz = nnz;
    m->row_ptr = calloc((size_t)rows + 1, sizeof *m->row_ptr);
    m->col = malloc((size_t)(nnz ? nnz : 1) * sizeof *m->col);
    m->val = with_values ? malloc((size_t)(nnz ? nnz : 1) * sizeof *m->val) : NULL;
    if (!m->row_ptr || !m->col || (with_values && !m->val)) {
        free(m->row_ptr);
        free(m->col);
        free(m->val);
        free(m);
        return NULL;
    }
    return m;
}

/* The shape too: the row offsets take 8 bytes a row, so rows = 2^31 - 1 with 2 entries
 * asks 16 GiB, which "for 2 nonzeros" alone would not explain. */
static mf_status out_of_memory(mf_ctx *ctx, const char *fn, int32_t rows, int32_t cols, int64_t nnz)
{
    return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                   "%s: out of host memory for a %d x %d matrix of %lld nonzeros (%.3g GB, "
                   "the row offsets %.3g GB of it)",
                   fn, rows, cols, (long long)nnz, ((double)rows + 1) * 8e-9 + (double)nnz * 8e-9,
                   ((double)rows + 1) * 8e-9);
}

/* The first index of a[0..n) outside [0, extent), named as "<name>[i] = v". */
/* Validation scans blocks of this many entries without branches (so the compiler
 * vectorizes them) and rescans only a block that holds an offender, to name the first one:
 * the scans of a 48M-rating matrix were a fifth of a Python fit's time on an H100. */
#define CHECK_BLOCK 4096

/* The first offender in [s, e) of an index block (outside [0, extent)) or a value block
 * (NaN or infinite), or -1: one pass without branches, which the compiler vectorizes, and
 * a second only where it found one. */
static int64_t block_index(const void *data, int64_t s, int64_t e, int32_t extent)
{
    const int32_t *a = data;
    unsigned bad = 0;
    for (int64_t i = s; i < e; i++)
        bad |= (uint32_t)a[i] >= (uint32_t)extent; /* negatives wrap past extent */
    for (int64_t i = s; bad && i < e; i++)
        if ((uint32_t)a[i] >= (uint32_t)extent)
            return i;
    return -1;
}

static int64_t block_value(const void *data, int64_t s, int64_t e, int32_t unused)
{
    const float *v = data;
    (void)unused;
    unsigned bad = 0;
    for (int64_t i = s; i < e; i++)
        bad |= !(fabsf(v[i]) <= FLT_MAX); /* false for NaN and the infinities */
    for (int64_t i = s; bad && i < e; i++)
        if (!isfinite(v[i]))
            return i;
    return -1;
}

/* The first offender in [0, n) by `block`, or -1; the blocks split over threads. */
static int64_t first_offender(int64_t (*block)(const void *, int64_t, int64_t, int32_t),
                              const void *data, int64_t n, int32_t extent, int threads)
{
    const int64_t blocks = (n + CHECK_BLOCK - 1) / CHECK_BLOCK;
    int64_t first = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min                                            \
                                                    : first) num_threads(threads) if (blocks > 64)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t s = b * CHECK_BLOCK, e = s + CHECK_BLOCK < n ? s + CHECK_BLOCK : n;
        const int64_t i = block(data, s, e, extent);
        if (i >= 0 && i < first)
            first = i;
    }
    return first == INT64_MAX ? -1 : first;
}

static mf_status check_indices(mf_ctx *ctx, const int32_t *a, int64_t n, int32_t extent,
                               const char *name, const char *fn)
{
    const int64_t i = first_offender(block_index, a, n, extent, mf_ctx_threads(ctx));
    if (i >= 0)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: %s[%lld] = %d is outside [0, %d)", fn, name,
                       (long long)i, a[i], extent);
    return MF_OK;
}

/* The first value that is NaN or infinite; val NULL (a pattern) passes. */
static mf_status check_values(mf_ctx *ctx, const float *val, int64_t n, const char *fn)
{
    const int64_t i = val ? first_offender(block_value, val, n, 0, mf_ctx_threads(ctx)) : -1;
    if (i >= 0)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: val[%lld] = %g is not finite", fn,
                       (long long)i, (double)val[i]);
    return MF_OK;
}

mf_status mf_coo_validate(mf_ctx *ctx, const mf_coo_view *coo, const char *fn)
{
    MF_TRY(check_indices(ctx, coo->row, coo->nnz, coo->rows, "row", fn));
    MF_TRY(check_indices(ctx, coo->col, coo->nnz, coo->cols, "col", fn));
    return check_values(ctx, coo->val, coo->nnz, fn);
}

static bool coo_is_sorted(const mf_coo_view *coo)
{
    for (int64_t i = 1; i < coo->nnz; i++)
        if (coo->row[i] < coo->row[i - 1] ||
            (coo->row[i] == coo->row[i - 1] && coo->col[i] < coo->col[i - 1]))
            return false;
    return true;
}

/* Stable counting sort of COO into m (col/val), row_ptr filled. Needs nnz scratch. */
static bool coo_sort_into(const mf_coo_view *coo, mf_sparse *m)
{
    int64_t nnz = coo->nnz;
    int64_t *count = calloc((size_t)coo->cols + 1, sizeof *count);
    int32_t *tmp_row = malloc((size_t)nnz * sizeof *tmp_row);
    int32_t *tmp_col = malloc((size_t)nnz * sizeof *tmp_col);
    float *tmp_val = coo->val ? malloc((size_t)nnz * sizeof *tmp_val) : NULL;
    int64_t *next = malloc(((size_t)coo->rows + 1) * sizeof *next);
    bool ok = count && tmp_row && tmp_col && next && (!coo->val || tmp_val);
    if (ok) {
        /* Pass 1: by column into tmp. */
        for (int64_t i = 0; i < nnz; i++)
            count[coo->col[i] + 1]++;
        for (int32_t c = 0; c < coo->cols; c++)
            count[c + 1] += count[c];
        for (int64_t i = 0; i < nnz; i++) {
            int64_t dst = count[coo->col[i]]++;
            tmp_row[dst] = coo->row[i];
            tmp_col[dst] = coo->col[i];
            if (tmp_val)
                tmp_val[dst] = coo->val[i];
        }
        /* Pass 2: stably by row into m; columns stay sorted within each row. */
        for (int64_t i = 0; i < nnz; i++)
            m->row_ptr[tmp_row[i] + 1]++;
        for (int32_t r = 0; r < coo->rows; r++)
            m->row_ptr[r + 1] += m->row_ptr[r];
        memcpy(next, m->row_ptr, ((size_t)coo->rows + 1) * sizeof *next);
        for (int64_t i = 0; i < nnz; i++) {
            int64_t dst = next[tmp_row[i]]++;
            m->col[dst] = tmp_col[i];
            if (m->val)
                m->val[dst] = tmp_val[i];
        }
    }
    free(count);
    free(tmp_row);
    free(tmp_col);
    free(tmp_val);
    free(next);
    return ok;
}

typedef struct col_pos col_pos;
static bool sort_row(int32_t *col, float *val, int64_t len, col_pos **scratch, int64_t *cap);

/* Rows bucketed in input order, then each row sorted stably: what a matrix with far more
 * columns than entries needs, where counting by column would cost memory per column (a
 * caller-given shape of 2^31 columns and two entries). */
static bool coo_sort_by_rows(const mf_coo_view *coo, mf_sparse *m)
{
    int64_t *next = malloc(((size_t)coo->rows + 1) * sizeof *next);
    if (!next)
        return false;
    for (int64_t i = 0; i < coo->nnz; i++)
        m->row_ptr[coo->row[i] + 1]++;
    for (int32_t r = 0; r < coo->rows; r++)
        m->row_ptr[r + 1] += m->row_ptr[r];
    memcpy(next, m->row_ptr, ((size_t)coo->rows + 1) * sizeof *next);
    for (int64_t i = 0; i < coo->nnz; i++) {
        int64_t dst = next[coo->row[i]]++;
        m->col[dst] = coo->col[i];
        if (m->val)
            m->val[dst] = coo->val[i];
    }
    free(next);
    col_pos *scratch = NULL;
    int64_t cap = 0;
    bool ok = true;
    for (int32_t r = 0; ok && r < coo->rows; r++) {
        int64_t b = m->row_ptr[r];
        ok =
            sort_row(m->col + b, m->val ? m->val + b : NULL, m->row_ptr[r + 1] - b, &scratch, &cap);
    }
    free(scratch);
    return ok;
}

static void coo_copy_sorted(const mf_coo_view *coo, mf_sparse *m)
{
    for (int64_t i = 0; i < coo->nnz; i++)
        m->row_ptr[coo->row[i] + 1]++;
    for (int32_t r = 0; r < coo->rows; r++)
        m->row_ptr[r + 1] += m->row_ptr[r];
    if (coo->nnz == 0)
        return; /* the arrays may be NULL: memcpy must not see them */
    memcpy(m->col, coo->col, (size_t)coo->nnz * sizeof *m->col);
    if (m->val)
        memcpy(m->val, coo->val, (size_t)coo->nnz * sizeof *m->val);
}

/* Sorted rows in place: merge equal neighbours (summing values) or reject them. On a
 * rejected repeat (or a sum that is not finite) dup, when given, gets its row and column. */
static mf_status merge_duplicates(mf_ctx *ctx, mf_sparse *m, unsigned flags, const char *fn,
                                  int32_t *dup)
{
    int64_t w = 0;
    for (int32_t r = 0; r < m->rows; r++) {
        int64_t begin = m->row_ptr[r], end = m->row_ptr[r + 1];
        m->row_ptr[r] = w;
        for (int64_t i = begin; i < end; i++) {
            if (i > begin && m->col[i] == m->col[w - 1]) {
                if (dup)
                    dup[0] = r, dup[1] = m->col[i];
                if (flags & MF_SPARSE_KEEP_LAST) { /* the sorts are stable: i came later */
                    if (m->val)
                        m->val[w - 1] = m->val[i];
                    continue;
                }
                if (!(flags & MF_SPARSE_SUM_DUPLICATES))
                    return mf_fail(ctx, MF_ERR_INVALID_DATA,
                                   "%s: duplicate entry at row %d, column %d (0-based; pass "
                                   "MF_SPARSE_SUM_DUPLICATES to sum duplicates)",
                                   fn, r, m->col[i]);
                if (m->val) {
                    m->val[w - 1] += m->val[i];
                    if (!isfinite(m->val[w - 1]))
                        return mf_fail(ctx, MF_ERR_INVALID_DATA,
                                       "%s: the duplicates at row %d, column %d sum to %g", fn, r,
                                       m->col[i], (double)m->val[w - 1]);
                }
                continue;
            }
            if (w != i) { /* entries move only after a merged duplicate */
                m->col[w] = m->col[i];
                if (m->val)
                    m->val[w] = m->val[i];
            }
            w++;
        }
    }
    m->row_ptr[m->rows] = w;
    m->nnz = w;
    return MF_OK;
}

mf_status mf_sparse_build_coo(mf_ctx *ctx, mf_sparse **out, const mf_coo_view *coo, unsigned flags,
                              const char *fn, int32_t *dup)
{
    mf_sparse *m = sparse_alloc(coo->rows, coo->cols, coo->nnz, coo->val != NULL);
    if (!m)
        return out_of_memory(ctx, fn, coo->rows, coo->cols, coo->nnz);
    m->ctx = ctx;
    /* Counting by column costs 8 bytes a column: worth it while columns are few. */
    bool by_rows = coo->cols > (int64_t)1 << 20 && coo->cols / 4 > coo->nnz;
    if (coo_is_sorted(coo))
        coo_copy_sorted(coo, m);
    else if (!(by_rows ? coo_sort_by_rows(coo, m) : coo_sort_into(coo, m))) {
        mf_sparse_destroy(m);
        return out_of_memory(ctx, fn, coo->rows, coo->cols, coo->nnz);
    }
    mf_status st = merge_duplicates(ctx, m, flags, fn, dup);
    if (st != MF_OK) {
        mf_sparse_destroy(m);
        return st;
    }
    *out = m;
    return MF_OK;
}

/* ---- CSR input ---------------------------------------------------------------------- */

struct col_pos {
    int32_t col;
    int64_t pos; /* position in the row: the tie-break that makes the sort stable */
};

static int col_pos_cmp(const void *a, const void *b)
{
    const col_pos *x = a, *y = b;
    if (x->col != y->col)
        return (x->col > y->col) - (x->col < y->col);
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sort one row's (col, val) pairs, stably, so that summed duplicates add in input order.
 * Short rows by insertion, long ones through a (col, position) buffer. */
static bool sort_row(int32_t *col, float *val, int64_t len, col_pos **scratch, int64_t *cap)
{
    int64_t sorted = 1;
    while (sorted < len && col[sorted - 1] <= col[sorted])
        sorted++;
    if (sorted >= len)
        return true; /* most inputs: nothing to move */
    if (len <= 32) {
        for (int64_t i = 1; i < len; i++) {
            int32_t c = col[i];
            float v = val ? val[i] : 0.0f;
            int64_t j = i;
            for (; j > 0 && col[j - 1] > c; j--) {
                col[j] = col[j - 1];
                if (val)
                    val[j] = val[j - 1];
            }
            col[j] = c;
            if (val)
                val[j] = v;
        }
        return true;
    }
    if (len > *cap) {
        col_pos *p = realloc(*scratch, (size_t)len * sizeof *p);
        if (!p)
            return false;
        *scratch = p;
        *cap = len;
    }
    col_pos *pairs = *scratch;
    for (int64_t i = 0; i < len; i++) {
        pairs[i].col = col[i];
        pairs[i].pos = i;
    }
    qsort(pairs, (size_t)len, sizeof *pairs, col_pos_cmp);
    if (val) {
        float *vals = malloc((size_t)len * sizeof *vals);
        if (!vals)
            return false;
        for (int64_t i = 0; i < len; i++)
            vals[i] = val[pairs[i].pos];
        memcpy(val, vals, (size_t)len * sizeof *vals);
        free(vals);
    }
    for (int64_t i = 0; i < len; i++)
        col[i] = pairs[i].col;
    return true;
}

mf_status mf_csr_validate(mf_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz,
                          const int64_t *row_ptr, const int32_t *col, const float *val,
                          const char *fn)
{
    if (row_ptr[0] != 0)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: row_ptr[0] = %lld, expected 0", fn,
                       (long long)row_ptr[0]);
    for (int32_t r = 0; r < rows; r++)
        if (row_ptr[r + 1] < row_ptr[r])
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "%s: row_ptr[%d] = %lld is less than row_ptr[%d] = %lld", fn, r + 1,
                           (long long)row_ptr[r + 1], r, (long long)row_ptr[r]);
    if (row_ptr[rows] != nnz)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: row_ptr[%d] = %lld, expected nnz = %lld", fn,
                       rows, (long long)row_ptr[rows], (long long)nnz);
    MF_TRY(check_indices(ctx, col, nnz, cols, "col", fn));
    return check_values(ctx, val, nnz, fn);
}

/* memcpy by the context's threads, in chunks of 8 MiB: the copy lands in freshly allocated
 * memory, whose first-touch page faults cost more than the copy itself and are served in
 * parallel when the threads fault their own chunks. */
static void parallel_copy(mf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    const size_t chunk = (size_t)8 << 20;
    const int64_t chunks = (int64_t)((bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) num_threads(mf_ctx_threads(ctx)) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        const size_t at = (size_t)c * chunk;
        memcpy((char *)dst + at, (const char *)src + at, bytes - at < chunk ? bytes - at : chunk);
    }
}

mf_status mf_sparse_build_csr(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols, int64_t nnz,
                              const int64_t *row_ptr, const int32_t *col, const float *val,
                              unsigned flags, const char *fn)
{
    mf_sparse *m = sparse_alloc(rows, cols, nnz, val != NULL);
    if (!m)
        return out_of_memory(ctx, fn, rows, cols, nnz);
    m->ctx = ctx;
    memcpy(m->row_ptr, row_ptr, ((size_t)rows + 1) * sizeof *row_ptr);
    if (nnz > 0) {
        parallel_copy(ctx, m->col, col, (size_t)nnz * sizeof *col);
        if (val)
            parallel_copy(ctx, m->val, val, (size_t)nnz * sizeof *val);
    }
    /* Rows sort apart, each thread with its own scratch; then one parallel scan says
     * whether any row holds a repeat, and only then the (sequential) merge runs. A large
     * matrix is therefore two passes over its entries by every thread, not one by one. */
    int failed = 0, repeats = 0;
#pragma omp parallel num_threads(mf_ctx_threads(ctx)) if (nnz > 4096)
    {
        col_pos *scratch = NULL;
        int64_t cap = 0;
#pragma omp for schedule(dynamic, 4096) reduction(| : failed, repeats)
        for (int32_t r = 0; r < rows; r++) {
            const int64_t b = m->row_ptr[r], len = m->row_ptr[r + 1] - b;
            if (!sort_row(m->col + b, m->val ? m->val + b : NULL, len, &scratch, &cap)) {
                failed |= 1;
                continue;
            }
            for (int64_t i = b + 1; i < b + len; i++)
                repeats |= m->col[i] == m->col[i - 1];
        }
        free(scratch);
    }
    if (failed) {
        mf_sparse_destroy(m);
        return out_of_memory(ctx, fn, rows, cols, nnz);
    }
    mf_status st = repeats ? merge_duplicates(ctx, m, flags, fn, NULL) : MF_OK;
    if (st != MF_OK) {
        mf_sparse_destroy(m);
        return st;
    }
    *out = m;
    return MF_OK;
}
