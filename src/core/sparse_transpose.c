/* The host transpose of a matrix (its CSC), by a counting sort over columns: rows come out
 * ascending within each column because rows are visited in order. */
#include <stdlib.h>

#include "core/ctx.h"
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
    for (size_t p = 0; p < n; p++)
        ptr[m->col[p] + 1]++;
    for (int32_t j = 0; j < m->cols; j++)
        ptr[j + 1] += ptr[j];
    int64_t *next = malloc((size_t)m->cols * sizeof *next);
    if (!next) {
        free(ptr);
        free(idx);
        free(val);
        return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory transposing a matrix");
    }
    for (int32_t j = 0; j < m->cols; j++)
        next[j] = ptr[j];
    for (int32_t i = 0; i < m->rows; i++)
        for (int64_t p = m->row_ptr[i]; p < m->row_ptr[i + 1]; p++) {
            int64_t q = next[m->col[p]]++;
            idx[q] = i;
            if (val)
                val[q] = m->val[p];
        }
    free(next);
    m->transpose.ptr = ptr;
    m->transpose.idx = idx;
    m->transpose.val = val;
    return MF_OK;
}
