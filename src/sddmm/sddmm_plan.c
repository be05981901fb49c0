#include "sddmm/sddmm_plan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/staging.h"
#include "sddmm/sddmm_layout.h"

/* The plan lives in the matrix's cache under this key, freed with the matrix. */
static const char plan_key = 0;

static void free_layout(mf_ctx *ctx, mf_sddmm_dev_layout *l)
{
    mf_dmem_free(ctx, &l->items);
    mf_dmem_free(ctx, &l->blocks);
}

static void plan_free(mf_sparse *m, void *value)
{
    mf_sddmm_plan *plan = (mf_sddmm_plan *)value;
    for (int i = 0; i < plan->n_layouts; i++)
        free_layout(m->ctx, &plan->layouts[i]);
    free(plan);
}

mf_status mf_sddmm_plan_get(mf_ctx *ctx, mf_sparse *S, mf_sddmm_plan **out)
{
    mf_sddmm_plan *plan = (mf_sddmm_plan *)mf_sparse_cache_get(S, &plan_key);
    if (!plan) {
        plan = (mf_sddmm_plan *)calloc(1, sizeof(mf_sddmm_plan));
        if (!plan)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        MF_TRY(mf_sparse_cache_put(S, &plan_key, plan, plan_free));
    }
    *out = plan;
    return MF_OK;
}

void mf_sddmm_plan_reset(mf_ctx *ctx, mf_sddmm_plan *plan)
{
    for (int i = 0; i < plan->n_layouts; i++)
        free_layout(ctx, &plan->layouts[i]);
    memset(plan, 0, sizeof *plan);
}

void mf_sddmm_plan_drop_unused(mf_ctx *ctx, mf_sddmm_plan *plan)
{
    for (int i = 0; i < plan->n_layouts; i++) {
        bool used = false;
        for (int c = 0; c < plan->n_choices; c++)
            used = used || plan->choices[c].layout == i;
        if (!used && plan->layouts[i].tj != 0) {
            free_layout(ctx, &plan->layouts[i]);
            memset(&plan->layouts[i], 0, sizeof plan->layouts[i]);
        }
    }
}

int mf_sddmm_plan_free_slots(const mf_sddmm_plan *plan)
{
    int n = MF_SDDMM_MAX_LAYOUTS - plan->n_layouts;
    for (int i = 0; i < plan->n_layouts; i++)
        n += plan->layouts[i].tj == 0;
    return n;
}

mf_status mf_sddmm_plan_layout(mf_ctx *ctx, mf_sparse *S, int32_t tj, int64_t block_nnz,
                               int32_t item_nnz, int grouped, int *index)
{
    mf_sddmm_plan *plan = NULL;
    MF_TRY(mf_sddmm_plan_get(ctx, S, &plan));
    if (tj > S->cols)
        tj = S->cols;
    if (tj < 1)
        tj = 1;
    int slot = plan->n_layouts;
    for (int i = plan->n_layouts - 1; i >= 0; i--) {
        const mf_sddmm_dev_layout *l = &plan->layouts[i];
        if (l->tj == tj && l->block_nnz == block_nnz && l->item_nnz == item_nnz &&
            l->grouped == (grouped != 0)) {
            *index = i;
            return MF_OK;
        }
        if (l->tj == 0)
            slot = i;
    }
    if (slot == MF_SDDMM_MAX_LAYOUTS)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: the plan's layout cache is full");
    mf_sddmm_layout host;
    MF_TRY(mf_sddmm_layout_build(ctx, S, tj, item_nnz, block_nnz, grouped, &host));
    mf_sddmm_dev_layout dev = {0};
    dev.tj = host.tj;
    dev.item_nnz = item_nnz;
    dev.block_nnz = block_nnz;
    dev.grouped = host.grouped;
    dev.panels = host.panels;
    dev.n_blocks = host.n_blocks;
    mf_status st = mf_upload(ctx, &dev.items, host.items,
                             (size_t)host.n_items * sizeof(mf_sddmm_item), "SDDMM plan items");
    if (st == MF_OK)
        st = mf_upload(ctx, &dev.blocks, host.blocks,
                       (size_t)host.n_blocks * sizeof(mf_sddmm_block), "SDDMM plan blocks");
    mf_log(ctx, MF_LOG_DEBUG,
           "mf_sddmm: %slayout tj = %d (%d panels): %lld items of <= %d entries, %lld blocks of "
           "~%lld entries",
           host.grouped ? "grouped " : "", host.tj, host.panels, (long long)host.n_items,
           (int)item_nnz, (long long)host.n_blocks, (long long)block_nnz);
    mf_sddmm_layout_free(&host);
    if (st != MF_OK) {
        free_layout(ctx, &dev);
        return st;
    }
    *index = slot;
    plan->layouts[slot] = dev;
    if (slot == plan->n_layouts)
        plan->n_layouts++;
    return MF_OK;
}
