/* The host transpose of a matrix (its CSC), by a counting sort over columns: rows come out
 * ascending within each column because rows are visited in order (block by block, each
 * thread's block of rows after the previous thread's). */
#include <stdlib.h>

#include "core/ctx.h"
#include "core/row_blocks.h"
#include "core/sparse.h"

mf_status mf_sparse_host_transpose(mf_sparse *m)
{
    if (m->transpose.ptr)
        return MF_OK;
    size_t n = (size_t)m->nnz;
    int64_t *ptr = calloc((size_t)m->cols + 1, sizeof *ptr);
    int32_t *idx = malloc((n ? n : 1) * sizeof *idx);
    float *val = m->val ? malloc((n ? n : 1) * sizeof *val) : NULL;
    if (!ptr || !idx || (m->val && !val)) {
        free(ptr);
        free(idx);
        free(val);
        return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY,
                       "out of host memory transposing a matrix with %lld entries",
                       (long long)m->nnz);
    }
    /* Each thread takes a block of rows and its own column counts, so that its entries land
     * at offsets of their own: the result is the serial one (rows ascending within a
     * column, thread blocks in row order), and the scatter, a random write per entry, runs
     * on every thread (0.54 s for 48M entries on one core of the build machine). The
     * counts take threads x cols words: past a cols-sized budget per entry fewer threads
     * share the work. */
    int threads = mf_ctx_threads(m->ctx);
    while (threads > 1 && (size_t)threads * (size_t)m->cols > 2 * n + 65536)
        threads /= 2;
    if (threads < 1)
        threads = 1;
    int64_t *count = calloc((size_t)threads * m->cols + 1, sizeof *count);
    if (!count) {
        free(ptr);
        free(idx);
        free(val);
        return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory transposing a matrix");
    }
    const int32_t cols = m->cols;
#pragma omp parallel num_threads(threads)
    {
        const mf_row_block blk = mf_row_block_of(m->rows);
        const int t = blk.t, nt = blk.nt;
        const int32_t r0 = blk.r0, r1 = blk.r1;
        int64_t *mine = count + (size_t)t * cols;
        for (int64_t p = m->row_ptr[r0]; p < m->row_ptr[r1]; p++)
            mine[m->col[p]]++;
#pragma omp barrier
#pragma omp single
        { /* column by column, thread by thread: each thread's first slot in each column */
            int64_t at = 0;
            for (int32_t j = 0; j < cols; j++) {
                ptr[j] = at;
                for (int u = 0; u < nt; u++) {
                    const int64_t c = count[(size_t)u * cols + j];
                    count[(size_t)u * cols + j] = at;
                    at += c;
                }
            }
            ptr[cols] = at;
        }
        for (int32_t i = r0; i < r1; i++)
            for (int64_t p = m->row_ptr[i]; p < m->row_ptr[i + 1]; p++) {
                const int64_t q = mine[m->col[p]]++;
                idx[q] = i;
                if (val)
                    val[q] = m->val[p];
            }
    }
    free(count);
    m->transpose.ptr = ptr;
    m->transpose.idx = idx;
    m->transpose.val = val;
    return MF_OK;
}

mf_status mf_sparse_col_ptr(mf_sparse *m, const int64_t **out)
{
    if (m->transpose.ptr || m->col_ptr) {
        *out = m->transpose.ptr ? m->transpose.ptr : m->col_ptr;
        return MF_OK;
    }
    /* Each thread counts its block of rows into its own row of counts (integers: the sum
     * is the same in any order); as in the transpose, fewer threads for many columns. */
    int threads = mf_ctx_threads(m->ctx);
    while (threads > 1 && (size_t)threads * (size_t)m->cols > (size_t)m->nnz + 65536)
        threads /= 2;
    if (threads < 1)
        threads = 1;
    int64_t *ptr = calloc((size_t)m->cols + 1, sizeof *ptr);
    int64_t *count = calloc((size_t)threads * m->cols + 1, sizeof *count);
    if (!ptr || !count) {
        free(ptr);
        free(count);
        return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory for %d column offsets",
                       m->cols);
    }
    int used = 1;
#pragma omp parallel num_threads(threads) if (m->nnz > 4096)
    {
        const mf_row_block blk = mf_row_block_of(m->rows);
        const int t = blk.t, nt = blk.nt;
        const int32_t r0 = blk.r0, r1 = blk.r1;
        int64_t *mine = count + (size_t)t * m->cols;
        for (int64_t p = m->row_ptr[r0]; p < m->row_ptr[r1]; p++)
            mine[m->col[p]]++;
        if (t == 0)
            used = nt;
    }
    for (int32_t j = 0; j < m->cols; j++) {
        int64_t c = 0;
        for (int u = 0; u < used; u++)
            c += count[(size_t)u * m->cols + j];
        ptr[j + 1] = ptr[j] + c;
    }
    free(count);
    m->col_ptr = ptr;
    *out = ptr;
    return MF_OK;
}
