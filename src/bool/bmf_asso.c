/* MF_BMF_INIT_ASSO: the seeds both backends share, and the dispatch (see bmf_asso.h). */
#include "bool/bmf_asso.h"

#include <stdlib.h>
#include <string.h>

#include "bool/bmf_internal.h"
#include "core/ctx.h"

/* Keys sort ascending as (count descending, index ascending): a total order. */
static int by_key(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

mf_status mf_bmf_asso(mf_ctx *ctx, mf_sparse *C, int k, int instances, uint64_t *A, uint64_t *B)
{
    MF_TRY(mf_sparse_host_transpose(C));
    mf_bmf_asso_plan p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.C = C;
    p.k = k;
    p.kw = mf_bmf_words(k);
    p.instances = instances;
    p.col_count = malloc((size_t)C->cols * sizeof *p.col_count);
    int32_t *order = malloc((size_t)C->cols * sizeof *order);
    uint64_t *keys = malloc((size_t)C->cols * sizeof *keys);
    if (!p.col_count || !order || !keys) {
        free(p.col_count);
        free(order);
        free(keys);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    }
    int32_t nonzero = 0;
    for (int32_t j = 0; j < C->cols; j++) {
        p.col_count[j] = C->transpose.ptr[j + 1] - C->transpose.ptr[j];
        nonzero += p.col_count[j] > 0;
        keys[j] = ((uint64_t)(INT32_MAX - p.col_count[j]) << 32) | (uint32_t)j;
    }
    qsort(keys, (size_t)C->cols, sizeof *keys, by_key);
    for (int32_t j = 0; j < C->cols; j++)
        order[j] = (int32_t)(keys[j] & 0xffffffffu);
    free(keys);
    p.P = nonzero < BMF_ASSO_CANDIDATES ? nonzero : BMF_ASSO_CANDIDATES;
    p.seeds = order;
    size_t abytes = (size_t)instances * C->rows * p.kw * 8;
    size_t bbytes = (size_t)instances * C->cols * p.kw * 8;
    memset(A, 0, abytes);
    memset(B, 0, bbytes);
    mf_status st = MF_OK;
    if (p.P > 0)
        st = ctx->backend == MF_BACKEND_CUDA ? mf_cuda_bmf_asso(&p, A, B)
                                             : mf_bmf_asso_cpu(&p, A, B);
    free(p.col_count);
    free(order);
    return st;
}
