#include "asd/asd_deal.h"

#include <stdlib.h>

#include "core/ctx.h"

/* The warps as a binary min-heap on (load, warp). */
typedef struct warp_load {
    uint64_t load;
    int64_t warp;
} warp_load;

static int lighter(const warp_load *a, const warp_load *b)
{
    return a->load < b->load || (a->load == b->load && a->warp < b->warp);
}

/* Restore the heap below position i (the root's load just grew). */
static void sift_down(warp_load *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && lighter(&h[l], &h[m]))
            m = l;
        if (r < n && lighter(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        warp_load t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

mf_status mf_asd_deal_lines(mf_ctx *ctx, const int32_t *sorted, const uint64_t *cost, int32_t lines,
                            int64_t warps, int32_t *first, int32_t *order)
{
    if (warps < 1 || lines < 0)
        return mf_fail(ctx, MF_ERR_INTERNAL, "ASD: %lld warps for %d lines", (long long)warps,
                       (int)lines);
    /* Warps past the lines' count would get nothing: the heap holds the first min(warps,
     * lines) of them (all with load 0 at first, in index order, so already a heap). */
    const int64_t n = warps < lines ? warps : lines;
    warp_load *heap = malloc((size_t)(n > 0 ? n : 1) * sizeof *heap);
    int32_t *warp_of = malloc((size_t)(lines > 0 ? lines : 1) * sizeof *warp_of);
    if (!heap || !warp_of) {
        free(heap);
        free(warp_of);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "ASD: out of host memory dealing %d lines",
                       (int)lines);
    }
    for (int64_t w = 0; w < n; w++)
        heap[w] = (warp_load){0, w};
    for (int32_t k = 0; k < lines; k++) {
        warp_of[k] = (int32_t)heap[0].warp;
        heap[0].load += cost[k];
        sift_down(heap, n, 0);
    }
    /* Group by warp (a counting sort), each warp's lines in dealing order. */
    for (int64_t w = 0; w <= warps; w++)
        first[w] = 0;
    for (int32_t k = 0; k < lines; k++)
        first[warp_of[k] + 1]++;
    for (int64_t w = 0; w < warps; w++)
        first[w + 1] += first[w];
    for (int32_t k = 0; k < lines; k++)
        order[first[warp_of[k]]++] = sorted[k];
    for (int64_t w = warps; w > 0; w--) /* first[w] moved to first[w + 1]: shift back */
        first[w] = first[w - 1];
    first[0] = 0;
    free(heap);
    free(warp_of);
    return MF_OK;
}
