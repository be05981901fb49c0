/* Which rows share a window of the tensor-core SDDMM's layout (sddmm_tc_layout.h). A tile
 * holds 8 rows x 16 of their distinct columns, so its share of stored entries (the plan's
 * density) is the rows' overlap: 8 rows that share columns fill tiles, 8 rows that share
 * none leave 7/8 of each tile empty. The orders here put rows that are likely to share
 * columns next to each other, so that consecutive rows of the order make the windows:
 * MinHash values of the rows' column sets (rows with a larger Jaccard similarity are more
 * likely to share them), optionally within octaves of row length (long rows together: they
 * hold most of a skewed matrix's entries and overlap on its popular columns). Results do
 * not depend on the order: every entry is still one row's and one column's dot product,
 * computed alike wherever the pair sits in a tile, and written to its own position. Plain
 * C, so the CPU test suites check it. */
#ifndef MF_SDDMM_TC_ORDER_H
#define MF_SDDMM_TC_ORDER_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mf_tc_order {
    MF_TC_ORDER_NATURAL = 0,        /* the rows with entries in index order */
    MF_TC_ORDER_LENGTH_MINHASH = 1, /* by octave of length, then two MinHash values */
    MF_TC_ORDER_MINHASH = 2,        /* by two MinHash values */
    MF_TC_ORDER_AUTO = 3,           /* the layout builder's pick: the fewest tiles */
    MF_TC_ORDERS = 4
} mf_tc_order;

/* "natural", "length-minhash", "minhash", "auto". */
const char *mf_tc_order_name(mf_tc_order order);

/* The order a plan is built with: MFACT_SDDMM_TC_ORDER when set (one of the names above;
 * for measurements: bench_sddmm with and without grouping), else MF_TC_ORDER_AUTO. Another
 * value is MF_ERR_INVALID_ARGUMENT. */
mf_status mf_tc_order_from_env(mf_ctx *ctx, mf_tc_order *order);

/* How many rows of S hold entries: the n that mf_tc_order_rows orders. */
int64_t mf_tc_rows_with_entries(const mf_sparse *S);

/* The n rows of S that hold entries, in `order` (not AUTO), into rows[0 .. n). Ties keep
 * index order, so the result does not depend on the thread count. */
mf_status mf_tc_order_rows(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order, int32_t *rows,
                           int64_t n);

/* mf_tc_order_rows into an array kept on S (its cache: sparse.h) and reused by later
 * calls, *n rows of it; S's rows with entries in `order` (not AUTO). The float kernel's
 * grouped layouts, one per tuned k and precision, share it (Netflix: 0.28 s an order). */
mf_status mf_tc_order_rows_cached(mf_ctx *ctx, mf_sparse *S, mf_tc_order order,
                                  const int32_t **rows, int64_t *n);

#ifdef __cplusplus
}
#endif
#endif
