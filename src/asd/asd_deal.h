/* How ASD's CUDA pass deals its lines to the warps: largest first, each to the least-loaded
 * warp (LPT), computed on the host once per side and run. Plain C, so the CPU suites check
 * it.
 *
 * Every warp of the pass grid is resident at once, so a pass ends with its busiest warp. A
 * host simulation of the warps' loads (bench/README.md, 2026-11-29, twelfth session; the
 * busiest warp's load over the mean) gave:
 * - log-normal 200,000^2 rows: 1.19 for contiguous ranges of equal work, 1.21 for snake
 *   order over the sorted lines, 1.005 for LPT;
 * - zipf rows: 1.59, 1.38 and 1.005.
 * On 2 GPUs, at 12 lines a warp, the log-normal case gave 1.28-1.40 for contiguous ranges
 * and 1.006 for LPT. On an H200 (2026-11-29, thirteenth session) one GPU's iteration on the
 * 200,000^2 case went from 0.0040 s (snake) to 0.0035 s, and no case measured slower.
 *
 * Cost: one thread, 39 ns a line at 8,448 warps on the development host (a radix heap of
 * the warps: asd_deal.c; a binary heap took 130), so about 0.4 s for 10M lines and 2 s for
 * 50M, per side, plus 4 bytes a line and 16 a warp of host memory while it runs. */
#ifndef MF_ASD_DEAL_H
#define MF_ASD_DEAL_H

#include <stdint.h>

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deal `lines` lines to `warps` warps. sorted[0 .. lines) holds the lines by decreasing cost
 * and cost[k] is sorted[k]'s cost (not negative). Each line in turn goes to a warp with the
 * least load so far (the first lines to warps 0, 1, ... in turn; later ties in an order that
 * the input alone decides), so the result depends on the input alone.
 * Out: first[0 .. warps] and order[0 .. lines): warp w takes lines order[first[w] ..
 * first[w + 1]), largest first. MF_ERR_OUT_OF_MEMORY (recorded on ctx) when host memory
 * runs out, with the outputs unwritten. */
mf_status mf_asd_deal_lines(mf_ctx *ctx, const int32_t *sorted, const uint64_t *cost, int32_t lines,
                            int64_t warps, int32_t *first, int32_t *order);

#ifdef __cplusplus
}
#endif
#endif
