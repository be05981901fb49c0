/* The work layout of the CUDA SDDMM kernels, built on the host from S's CSR.
 *
 * The columns of S are cut into panels of width tj (one panel when tj >= cols). An item is
 * a run of at most max_item_nnz stored entries of one row inside one panel: since columns
 * are sorted within a row, a row's entries in a panel are contiguous in canonical order,
 * so an item is (row, first entry, count). Long rows become many items, which is how a row
 * with 200K entries spreads over many warps instead of serializing one. Items are ordered
 * panel by panel, rows ascending within a panel; rows with no entries in a panel have no
 * item there (the "active rows" of the panel). A block is a run of items of one panel
 * holding about block_nnz entries: one CUDA thread block's work.
 *
 * A grouped layout takes the rows in the tensor-core plan's length-MinHash order
 * (sddmm_tc_order.h: rows likely to share columns side by side) instead of index order, and
 * sorts each block's items by their first column. A block's virtual warps then gather B rows
 * of nearby columns at about the same time, from rows that share many of them, and L1 serves
 * the repeats (H200, bench_sddmm, fp32: Netflix shape k = 128 3.05 -> 2.71 ms, k = 512 14.3
 * -> 12.6 ms; at k = 32 5% slower). Which entries a block computes, and how, do not change,
 * so results are the same bit for bit; the tuning times it beside index order.
 * Plain C, so the CPU test suites check it. */
#ifndef MF_SDDMM_LAYOUT_H
#define MF_SDDMM_LAYOUT_H

#include <stdint.h>

#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_sddmm_item {
    int32_t row;
    int32_t count;
    int64_t begin;
} mf_sddmm_item;

typedef struct mf_sddmm_block {
    int64_t item_begin;
    int32_t item_count;
    int32_t panel;
} mf_sddmm_block;

typedef struct mf_sddmm_layout {
    int32_t tj, panels;
    int32_t max_item_nnz;
    int grouped;
    int64_t block_nnz;
    int64_t n_items, n_blocks;
    mf_sddmm_item *items;
    mf_sddmm_block *blocks;
} mf_sddmm_layout;

/* Build the layout (grouped: see above); on failure (out of host memory) *out is empty and the
 * status recorded. */
mf_status mf_sddmm_layout_build(mf_ctx *ctx, mf_sparse *S, int32_t tj, int32_t max_item_nnz,
                                int64_t block_nnz, int grouped, mf_sddmm_layout *out);
void mf_sddmm_layout_free(mf_sddmm_layout *l);

#ifdef __cplusplus
}
#endif
#endif
