/* The condensed-column layout of the tensor-core SDDMM (the reduced precisions of
 * mf_sddmm_ex), built on the host from S's CSR once per matrix, for every k and precision.
 *
 * Rows with entries are taken eight at a time, in the plan's row order (mf_tc_order below:
 * index order, or grouped so that a window's rows share columns): a window, the n = 8 side
 * of the MMA. The distinct columns of a window's entries, ascending, are its condensed
 * columns; cut sixteen at a time they are its tiles, the m = 16 side (the last tile padded by
 * repeating a column, its mask bits clear). A tile's product, B[tile columns] (16 x k) times
 * A[window rows]^T (k x 8), is dense; rowmask[r] bit c says whether row r of the window
 * holds column col[c], and the stored entries come out in canonical order: row r's entries
 * in the tile are the set bits of rowmask[r], in order, following those of the earlier
 * tiles. A unit is up to MF_TC_UNIT_TILES consecutive tiles of one window, one warp's work;
 * pos[r] is the index of row r's first entry in the unit's tiles. Plain C, so the CPU test
 * suites check it. */
#ifndef MF_SDDMM_TC_LAYOUT_H
#define MF_SDDMM_TC_LAYOUT_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The row orders: which rows share a window. A tile holds 8 rows x 16 of their distinct
 * columns, so its share of stored entries (the plan's density) is the rows' overlap: 8 rows that
 * share columns fill tiles, 8 rows that share none leave 7/8 of each tile empty. The orders here
 * put rows that are likely to share columns next to each other, so that consecutive rows of the
 * order make the windows: MinHash values of the rows' column sets (rows with a larger Jaccard
 * similarity are more likely to share them), optionally within octaves of row length (long rows
 * together: they hold most of a skewed matrix's entries and overlap on its popular columns).
 * Results do not depend on the order: every entry is still one row's and one column's dot product,
 * computed alike wherever the pair sits in a tile, and written to its own position. */
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

/* The n rows of S that hold entries, in `order` (not AUTO), into rows[0 .. n). Ties keep
 * index order, so the result does not depend on the thread count. */
mf_status mf_tc_order_rows(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order, int32_t *rows,
                           int64_t n);

#define MF_TC_WINDOW     8
#define MF_TC_TILE       16
#define MF_TC_UNIT_TILES 4

typedef struct mf_tc_tile {
    int32_t col[MF_TC_TILE];
    uint16_t rowmask[MF_TC_WINDOW];
} mf_tc_tile;

typedef struct mf_tc_unit {
    int32_t row[MF_TC_WINDOW]; /* a short last window repeats its first row, masks clear */
    int64_t pos[MF_TC_WINDOW];
    int64_t tile_begin;
    int32_t n_tiles; /* 1 .. MF_TC_UNIT_TILES */
    int32_t window;
} mf_tc_unit;

typedef struct mf_tc_layout {
    int64_t n_windows, n_tiles, n_units;
    mf_tc_tile *tiles;
    mf_tc_unit *units;
    mf_tc_order order;     /* the row order the windows follow (never AUTO) */
    int64_t natural_tiles; /* the tiles of index order, when it was counted; else -1 */
} mf_tc_layout;

/* Build the layout (OpenMP over windows) with the rows in `order`; MF_TC_ORDER_AUTO counts
 * the tiles of every order and keeps the one with the fewest, index order unless another
 * saves at least MF_TC_ORDER_MIN_GAIN of them. On failure (out of host memory) *out is
 * empty and the status recorded. A matrix without entries has no units. */
#define MF_TC_ORDER_MIN_GAIN 0.02
mf_status mf_tc_layout_build(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order, mf_tc_layout *out);
void mf_tc_layout_free(mf_tc_layout *l);

#ifdef __cplusplus
}
#endif
#endif
