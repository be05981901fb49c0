/* The row-group layout of the tensor-core SDDMM (sddmm_tcg.cu), built on the host from S's
 * CSR once per matrix, for every k and 16-bit precision.
 *
 * Rows with entries are taken MF_TCG_ROWS at a time in the plan's row order (sddmm_tc_order.h:
 * rows likely to share columns side by side): a group, the m side of the MMA (two m16
 * fragments). The group's distinct columns, ascending, cut MF_TCG_TILE at a time, are its
 * tiles: the n side (one n8 fragment; the last tile padded by repeating its first column,
 * with no rows). A tile's product, A[group rows] (32 x k) times B[tile columns]^T, is dense
 * and one warp computes it with the group's A rows held in registers for the whole unit, so
 * each B row a group needs is gathered once for all of the group's rows: the gathers per
 * stored entry fall to the group's distinct columns per entry (a window of 8 rows gathers a
 * row for every 16 columns it holds instead). word[g] of a tile holds the masks of rows g,
 * g + 8, g + 16 and g + 24 (one byte each, lowest first; bit c: the row holds col[c]), the
 * rows one lane of the MMA's accumulators holds. Row r's entries in a tile are the set bits of
 * its mask, in order, after those in the earlier tiles (S's columns are sorted within rows),
 * so their places in `out` follow from the unit's pos. A unit is up to MF_TCG_UNIT_TILES
 * consecutive tiles of one group holding up to MF_TCG_UNIT_NNZ entries: one warp's work. Plain C,
 * so the CPU test suites check it. */
#ifndef MF_SDDMM_TCG_LAYOUT_H
#define MF_SDDMM_TCG_LAYOUT_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MF_TCG_ROWS       32
#define MF_TCG_TILE       8
#define MF_TCG_UNIT_TILES 32
#define MF_TCG_UNIT_NNZ   1024 /* a unit's entries, summed in the warp's shared memory */

typedef struct mf_tcg_tile {
    int32_t col[MF_TCG_TILE];
    uint32_t word[MF_TCG_TILE];
} mf_tcg_tile;

typedef struct mf_tcg_unit {
    int32_t row[MF_TCG_ROWS];  /* a short last group repeats its first row, masks clear */
    int64_t pos[MF_TCG_ROWS];  /* row r's first entry in the unit's tiles */
    uint16_t cnt[MF_TCG_ROWS]; /* row r's entries in the unit's tiles (consecutive in out) */
    int64_t tile_begin;
    int64_t ent_begin; /* the unit's entries in ent: its tiles' in order, each tile's by row */
    int32_t n_tiles;   /* 1 .. MF_TCG_UNIT_TILES */
    int32_t group;
} mf_tcg_unit;

typedef struct mf_tcg_layout {
    int64_t n_groups, n_tiles, n_units, n_ent;
    mf_tcg_tile *tiles;
    mf_tcg_unit *units;
    /* An entry of a unit: bits 0-7 its place in a tile's product (row * MF_TCG_TILE + column
     * of the tile), bits 8 and up its place among the unit's entries in `out` order (row by
     * row: each row's consecutive entries). Where a warp takes each product from, and where
     * it puts it. */
    uint32_t *ent;
} mf_tcg_layout;

/* The mask byte of row r (0 .. MF_TCG_ROWS) in a tile. */
static inline unsigned mf_tcg_mask(const mf_tcg_tile *t, int r)
{
    return (t->word[r % MF_TCG_TILE] >> (8 * (r / MF_TCG_TILE))) & 0xffu;
}

/* Build the layout over `rows` (the n rows of S that hold entries, in the order the groups
 * take them; OpenMP over groups). On failure (out of host memory) *out is empty and the
 * status recorded. */
mf_status mf_tcg_layout_build(mf_ctx *ctx, const mf_sparse *S, const int32_t *rows, int64_t n,
                              mf_tcg_layout *out);
void mf_tcg_layout_free(mf_tcg_layout *l);

#ifdef __cplusplus
}
#endif
#endif
