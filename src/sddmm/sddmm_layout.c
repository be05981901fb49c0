#include "sddmm/sddmm_layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "sddmm/sddmm_tc_order.h"

/* Walk the items of rows [r0, r1) of the order (rows[]: the rows in order; NULL: index
 * order): emit(panel, row, begin, count) for each, in that order. With one panel an item is
 * a run of cap entries, found without reading the column indices (on the Netflix shape the
 * scan was most of a layout's build). A macro rather than a callback so both passes stay
 * tight loops. */
#define MF_FOR_EACH_ITEM(S, tj, panels, cap, rows, r0, r1, EMIT)                                   \
    for (int64_t ri = (r0); ri < (r1); ri++) {                                                     \
        const int32_t i = (rows) ? (rows)[ri] : (int32_t)ri;                                       \
        int64_t p = (S)->row_ptr[i], end = (S)->row_ptr[i + 1];                                    \
        while (p < end) {                                                                          \
            int32_t panel = 0;                                                                     \
            int64_t q = end - p < (cap) ? end : p + (cap);                                         \
            if ((panels) > 1) {                                                                    \
                panel = (S)->col[p] / (tj);                                                        \
                int32_t limit = (panel + 1) * (tj) > (S)->cols ? (S)->cols : (panel + 1) * (tj);   \
                q = p + 1;                                                                         \
                while (q < end && q - p < (cap) && (S)->col[q] < limit)                            \
                    q++;                                                                           \
            }                                                                                      \
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

/* Range t of `ranges` fixed ranges of the n rows of the order: the same in both passes,
 * whichever thread takes it (OpenMP may give a team smaller than asked: nested inside a
 * caller's parallel region, or under a thread limit). */
static void range_rows(int64_t n, int ranges, int t, int64_t *r0, int64_t *r1)
{
    *r0 = n * t / ranges;
    *r1 = n * (t + 1) / ranges;
}

static mf_status build_items(mf_ctx *ctx, const mf_sparse *S, const int32_t *rows, int64_t n,
                             mf_sddmm_layout *l, int threads, int64_t *panel_first)
{
    const int32_t tj = l->tj, cap = l->max_item_nnz, panels = l->panels;
    /* counts[t * panels + q]: items of range t's rows in panel q, then its write offset. */
    int64_t *counts = calloc((size_t)threads * (size_t)panels, sizeof *counts);
    if (!counts)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; t++) {
        int64_t r0, r1;
        range_rows(n, threads, t, &r0, &r1);
        int64_t *mine = counts + (size_t)t * (size_t)panels;
#define MF_COUNT(panel, i, p, n) mine[panel]++
        MF_FOR_EACH_ITEM(S, tj, panels, cap, rows, r0, r1, MF_COUNT)
#undef MF_COUNT
    }
    /* Panel-major, then range order = row order. */
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
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; t++) {
        int64_t r0, r1;
        range_rows(n, threads, t, &r0, &r1);
        int64_t *next = counts + (size_t)t * (size_t)panels;
#define MF_FILL(panel, i, p, n) items[next[panel]++] = (mf_sddmm_item){(i), (n), (p)}
        MF_FOR_EACH_ITEM(S, tj, panels, cap, rows, r0, r1, MF_FILL)
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

/* A grouped layout's items of one block, by first column (ties: by row, so the order is
 * unique and the layout does not depend on the thread count). The key packs both: columns
 * and rows are non-negative int32. An inline sort rather than qsort: the comparator call
 * per comparison made qsort most of a grouped layout's build (Netflix shape, 4.5M items). */
typedef struct keyed_item {
    uint64_t key; /* first column << 32 | row */
    mf_sddmm_item item;
} keyed_item;

static void insertion_sort(keyed_item *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        keyed_item x = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1].key > x.key; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* Quicksort on the keys (unique: items of one row start at different columns), median of
 * three pivots, the smaller side first by recursion so the depth stays logarithmic. */
static void sort_keyed(keyed_item *a, size_t n)
{
    while (n > 24) {
        size_t m = n / 2;
        uint64_t x = a[0].key, y = a[m].key, z = a[n - 1].key;
        uint64_t pivot = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
        size_t i = 0, j = n - 1;
        for (;;) {
            while (a[i].key < pivot)
                i++;
            while (a[j].key > pivot)
                j--;
            if (i >= j)
                break;
            keyed_item t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
        /* a[0 .. j] <= pivot <= a[j + 1 .. n) */
        size_t left = j + 1;
        if (left < n - left) {
            sort_keyed(a, left);
            a += left;
            n -= left;
        } else {
            sort_keyed(a + left, n - left);
            n = left;
        }
    }
    insertion_sort(a, n);
}

static mf_status sort_block_items(mf_ctx *ctx, const mf_sparse *S, mf_sddmm_layout *l, int threads)
{
    int32_t most = 0;
    for (int64_t b = 0; b < l->n_blocks; b++)
        if (l->blocks[b].item_count > most)
            most = l->blocks[b].item_count;
    keyed_item *scratch = malloc((size_t)threads * (size_t)(most > 0 ? most : 1) * sizeof *scratch);
    if (!scratch)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
#pragma omp parallel num_threads(threads)
    {
        keyed_item *buf = scratch + (size_t)mf_thread_index() * (size_t)most;
#pragma omp for schedule(dynamic, 64)
        for (int64_t b = 0; b < l->n_blocks; b++) {
            mf_sddmm_item *it = l->items + l->blocks[b].item_begin;
            const size_t n = (size_t)l->blocks[b].item_count;
            for (size_t i = 0; i < n; i++)
                buf[i] = (keyed_item){
                    (uint64_t)(uint32_t)S->col[it[i].begin] << 32 | (uint32_t)it[i].row, it[i]};
            sort_keyed(buf, n);
            for (size_t i = 0; i < n; i++)
                it[i] = buf[i].item;
        }
    }
    free(scratch);
    return MF_OK;
}

mf_status mf_sddmm_layout_build(mf_ctx *ctx, mf_sparse *S, int32_t tj, int32_t max_item_nnz,
                                int64_t block_nnz, int grouped, mf_sddmm_layout *out)
{
    memset(out, 0, sizeof *out);
    out->tj = tj < S->cols ? tj : S->cols;
    out->panels = (S->cols + out->tj - 1) / out->tj;
    out->max_item_nnz = max_item_nnz > 0 ? max_item_nnz : 1; /* the item walks divide by it */
    out->block_nnz = block_nnz;
    out->grouped = grouped != 0;
    /* Fixed row ranges keep the items in the row order within each panel. */
    int threads = S->nnz < 65536 ? 1 : mf_ctx_threads(ctx);
    int64_t *panel_first = malloc(((size_t)out->panels + 1) * sizeof *panel_first);
    const int32_t *rows = NULL;
    int64_t n = S->rows;
    mf_status st = panel_first ? MF_OK
                               : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                         "mf_sddmm: out of host memory for the plan");
    if (st == MF_OK && out->grouped)
        st = mf_tc_order_rows_cached(ctx, S, MF_TC_ORDER_LENGTH_MINHASH, &rows, &n);
    if (st == MF_OK)
        st = build_items(ctx, S, rows, n, out, threads, panel_first);
    if (st == MF_OK)
        st = build_blocks(ctx, out, panel_first);
    if (st == MF_OK && out->grouped)
        st = sort_block_items(ctx, S, out, threads);
    free(panel_first);
    if (st != MF_OK)
        mf_sddmm_layout_free(out);
    return st;
}
