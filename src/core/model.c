/* The public model struct (mf_model): its initializer and the one check of a caller's
 * model that every function taking one (predictions, recommendations) applies. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/ctx.h"
#include "core/model.h"
#include "core/opts.h"

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void model_defaults(mf_model *model)
{
    memset(model, 0, sizeof *model);
    model->struct_size = sizeof *model;
    model->where = MF_MEMORY_HOST;
}

MF_OPTS_INITIALIZERS(mf_model, mf_model_init, model_defaults, where)

int mf_model_size_valid(size_t size)
{
    return size >= MF_OPTS_END(mf_model, where) &&
           mf_opts_size_valid(size, _Alignof(mf_model), MF_OPTS_LEGACY_SIZE(mf_model));
}

mf_status mf_model_check(mf_ctx *ctx, const mf_model *model, const char *fn, mf_model *m)
{
    MF_REQUIRE(ctx, model, "%s: model is NULL", fn);
    MF_REQUIRE(ctx, model->struct_size >= offsetof(mf_model, where) + sizeof model->where,
               "%s: model->struct_size = %zu is too small (set it with mf_model_init)", fn,
               model->struct_size);
    MF_REQUIRE(ctx, mf_model_size_valid(model->struct_size),
               "%s: model->struct_size = %zu ends inside a field (set it with mf_model_init)", fn,
               model->struct_size);
    mf_model_init(m);
    memcpy(m, model, sizeof *m < model->struct_size ? sizeof *m : model->struct_size);
    MF_REQUIRE(ctx, m->users >= 1 && m->items >= 1,
               "%s: the model's users = %d and items = %d must be at least 1", fn, m->users,
               m->items);
    MF_REQUIRE(ctx, m->k >= 1, "%s: the model's k = %d must be at least 1", fn, m->k);
    MF_TRY(mf_check_dense(ctx, fn, "ldu", m->ldu, "k", m->k, m->users));
    MF_TRY(mf_check_dense(ctx, fn, "ldv", m->ldv, "k", m->k, m->items));
    MF_REQUIRE(ctx, m->U && m->V, "%s: the model's U and V must not be NULL", fn);
    MF_REQUIRE(ctx, isfinite(m->mean), "%s: the model's mean = %g is not finite", fn,
               (double)m->mean);
    MF_REQUIRE(ctx, m->where == MF_MEMORY_HOST || m->where == MF_MEMORY_DEVICE,
               "%s: the model's where = %d is not an mf_memory value", fn, (int)m->where);
    MF_TRY(mf_precision_check(ctx, fn, "the model's precision", (int)m->precision));
    MF_TRY(mf_check_memory(ctx, m->U, m->where, fn, "U"));
    MF_TRY(mf_check_memory(ctx, m->V, m->where, fn, "V"));
    if (m->user_bias)
        MF_TRY(mf_check_memory(ctx, m->user_bias, m->where, fn, "user_bias"));
    if (m->item_bias)
        MF_TRY(mf_check_memory(ctx, m->item_bias, m->where, fn, "item_bias"));
    return MF_OK;
}
