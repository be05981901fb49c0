/* The condensed-column layout of the tensor-core SDDMM (the reduced precisions of
 * mf_sddmm_ex), built on the host from S's CSR once per matrix, for every k and precision.
 *
 * Rows with entries are taken eight at a time, in the plan's row order (sddmm_tc_order.h:
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
#include "sddmm/sddmm_tc_order.h"

#ifdef __cplusplus
extern "C" {
#endif

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
