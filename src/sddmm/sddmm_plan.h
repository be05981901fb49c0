/* The CUDA backend's plan for one matrix, cached on it and freed with it: the device layouts
 * (sddmm_layout.h, uploaded) that the cached variant choices use, and the choices, one per
 * call shape (k and the kind of factor rows). sddmm.cu picks and times the choices; this file
 * keeps them. Plain C on the host: the layouts are device buffers it only allocates, uploads
 * and frees. */
#ifndef MF_SDDMM_PLAN_H
#define MF_SDDMM_PLAN_H

#include <stdint.h>

#include "core/device_memory.h"
#include "core/sparse.h"
#include "sddmm/sddmm_tuning.h" /* MF_SDDMM_MAX_CANDIDATES, MF_SDDMM_GROUPED_TRIES */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_sddmm_dev_layout {
    int32_t tj; /* 0: an empty slot (a layout dropped after tuning) */
    int32_t item_nnz;
    int grouped; /* rows grouped, items by column (sddmm_layout.h) */
    int64_t block_nnz;
    int32_t panels;
    int64_t n_blocks;
    mf_dbuf items, blocks;
} mf_sddmm_dev_layout;

/* Every cached choice's layout plus every candidate of one tuning, the grouped layouts of
 * its fastest few and the fine-block SM-SM layout, so that tuning a new k never evicts the
 * choices made for others (the losers' layouts are freed after tuning). */
#define MF_SDDMM_MAX_CHOICES 8
#define MF_SDDMM_MAX_LAYOUTS                                                                       \
    (MF_SDDMM_MAX_CHOICES + MF_SDDMM_MAX_CANDIDATES + MF_SDDMM_GROUPED_TRIES + 1)

typedef struct mf_sddmm_choice {
    int k, vec; /* the call shape the choice is for; vec 100 + the kernel instance (sddmm.cu's
                 * mf_sddmm_half_in): bf16 or fp16 copies, TF32's scaled fp16 copies, or the
                 * floats rounded as they load */
    int variant, layout;
    float ms;
} mf_sddmm_choice;

typedef struct mf_sddmm_plan {
    mf_sddmm_dev_layout layouts[MF_SDDMM_MAX_LAYOUTS];
    int n_layouts;
    mf_sddmm_choice choices[MF_SDDMM_MAX_CHOICES];
    int n_choices, next_choice; /* a small ring: the oldest choice is replaced */
} mf_sddmm_plan;

/* S's plan, made empty on first use. */
mf_status mf_sddmm_plan_get(mf_ctx *ctx, mf_sparse *S, mf_sddmm_plan **out);

/* Drop every layout and choice: done before tuning when the new candidates' layouts might
 * not fit in the cache, so indices held during one tuning never move. */
void mf_sddmm_plan_reset(mf_ctx *ctx, mf_sddmm_plan *plan);

/* Free the layouts that no cached choice uses (the tuning's losers: a layout of short items
 * takes up to 16 bytes per stored entry). Their slots stay, empty, so the layout indices
 * the choices hold do not move. */
void mf_sddmm_plan_drop_unused(mf_ctx *ctx, mf_sddmm_plan *plan);

/* Layout slots still free (never used, or emptied). */
int mf_sddmm_plan_free_slots(const mf_sddmm_plan *plan);

/* *index: the layout for (tj, block_nnz, item_nnz, grouped) in S's plan, built and uploaded
 * on first use (tj clamped to 1 .. S's columns). */
mf_status mf_sddmm_plan_layout(mf_ctx *ctx, mf_sparse *S, int32_t tj, int64_t block_nnz,
                               int32_t item_nnz, int grouped, int *index);

#ifdef __cplusplus
}
#endif
#endif
