#include "sddmm/sddmm_layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Walk the items of rows [r0, r1): emit(panel, row, begin, count) for each, in row order. A
 * macro rather than a callback so both passes stay tight loops. */
#define MF_FOR_EACH_ITEM(S, tj, cap, r0, r1, EMIT)                                                 \
    for (int32_t i = (r0); i < (r1); i++) {                                                        \
        int64_t p = (S)->row_ptr[i], end = (S)->row_ptr[i + 1];                                    \
        while (p < end) {                                                                          \
            int32_t panel = (S)->col[p] / (tj);                                                    \
            int64_t q = p + 1;                                                                     \
            int32_t limit = (panel + 1) * (tj) > (S)->cols ? (S)->cols : (panel + 1) * (tj);       \
            while (q < end && q - p < (cap) && (S)->col[q] < limit)                                \
                q++;                                                                               \
            EMIT(panel, i, p, (int32_t)(q - p));                                                   \
            p = q;                                                                                 \
        }                                                                                          \
    }

void mf_sddmm_layout_free(mf_sddmm_layout *l)
{
    free(l->items);
    free(l->blocks);
    memset(l, 0, sizeof *l);
}

static int mf_thread_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* This thread's fixed range of rows: the same in both passes, in row order by thread. */
static void thread_rows(const mf_sparse *S, int threads, int32_t *r0, int32_t *r1)
{
    int t = mf_thread_index();
    *r0 = (int32_t)((int64_t)S->rows * t / threads);
    *r1 = (int32_t)((int64_t)S->rows * (t + 1) / threads);
}

static mf_status build_items(mf_ctx *ctx, const mf_sparse *S, mf_sddmm_layout *l, int threads,
                             int64_t *panel_first)
{
    const int32_t tj = l->tj, cap = l->max_item_nnz, panels = l->panels;
    /* counts[t * panels + q]: items of thread t's rows in panel q, then its write offset. */
    int64_t *counts = calloc((size_t)threads * (size_t)panels, sizeof *counts);
    if (!counts)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
#pragma omp parallel num_threads(threads)
    {
        int32_t r0, r1;
        thread_rows(S, threads, &r0, &r1);
        int64_t *mine = counts + (size_t)mf_thread_index() * (size_t)panels;
#define MF_COUNT(panel, i, p, n) mine[panel]++
        MF_FOR_EACH_ITEM(S, tj, cap, r0, r1, MF_COUNT)
#undef MF_COUNT
    }
    /* Panel-major, then thread order = row order. */
    int64_t total = 0;
    for (int32_t q = 0; q < panels; q++) {
        panel_first[q] = total;
        for (int t = 0; t < threads; t++) {
            int64_t c = counts[(size_t)t * (size_t)panels + (size_t)q];
            counts[(size_t)t * (size_t)panels + (size_t)q] = total;
            total += c;
        }
    }
    panel_first[panels] = total;
    l->n_items = total;
    l->items = malloc((size_t)(total > 0 ? total : 1) * sizeof *l->items);
    if (!l->items) {
        free(counts);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_sddmm: out of host memory for %lld plan items", (long long)total);
    }
    mf_sddmm_item *items = l->items;
#pragma omp parallel num_threads(threads)
    {
        int32_t r0, r1;
        thread_rows(S, threads, &r0, &r1);
        int64_t *next = counts + (size_t)mf_thread_index() * (size_t)panels;
#define MF_FILL(panel, i, p, n) items[next[panel]++] = (mf_sddmm_item){(i), (n), (p)}
        MF_FOR_EACH_ITEM(S, tj, cap, r0, r1, MF_FILL)
#undef MF_FILL
    }
    free(counts);
    return MF_OK;
}

/* Cut each panel's items into blocks of about block_nnz entries. */
static mf_status build_blocks(mf_ctx *ctx, mf_sddmm_layout *l, const int64_t *panel_first)
{
    int64_t cap = l->n_items > 0 ? l->n_items : 1, n = 0; /* at most one block per item */
    mf_sddmm_block *blocks = malloc((size_t)cap * sizeof *blocks);
    if (!blocks)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
    for (int32_t q = 0; q < l->panels; q++) {
        int64_t it = panel_first[q], end = panel_first[q + 1];
        while (it < end) {
            int64_t first = it, nnz = 0;
            while (it < end && nnz < l->block_nnz && it - first < INT32_MAX)
                nnz += l->items[it++].count;
            blocks[n++] = (mf_sddmm_block){first, (int32_t)(it - first), q};
        }
    }
    mf_sddmm_block *shrunk = realloc(blocks, (size_t)(n > 0 ? n : 1) * sizeof *blocks);
    l->blocks = shrunk ? shrunk : blocks;
    l->n_blocks = n;
    return MF_OK;
}

mf_status mf_sddmm_layout_build(mf_ctx *ctx, const mf_sparse *S, int32_t tj, int32_t max_item_nnz,
                                int64_t block_nnz, mf_sddmm_layout *out)
{
    memset(out, 0, sizeof *out);
    out->tj = tj < S->cols ? tj : S->cols;
    out->panels = (S->cols + out->tj - 1) / out->tj;
    out->max_item_nnz = max_item_nnz;
    out->block_nnz = block_nnz;
    /* Fixed row ranges per thread keep the items in row order within each panel. */
    int threads = S->nnz < 65536 ? 1 : mf_ctx_threads(ctx);
    int64_t *panel_first = malloc(((size_t)out->panels + 1) * sizeof *panel_first);
    if (!panel_first)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
    mf_status st = build_items(ctx, S, out, threads, panel_first);
    if (st == MF_OK)
        st = build_blocks(ctx, out, panel_first);
    free(panel_first);
    if (st != MF_OK)
        mf_sddmm_layout_free(out);
    return st;
}
