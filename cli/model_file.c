/* Saving a fit as a model file, and loading one, for the tool (model_file.h). */
#include "model_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launched.h"

void cli_fit_model(const cli_fit *fit, mf_model *m)
{
    int32_t users, items;
    mf_sparse_shape(fit->train, &users, &items, NULL);
    mf_model_init(m);
    m->users = users, m->items = items, m->k = fit->k;
    m->U = fit->U, m->ldu = fit->ld, m->V = fit->V, m->ldv = fit->ld;
    if (fit->bias) {
        m->mean = fit->bias->mean;
        m->user_bias = fit->bias->user, m->item_bias = fit->bias->item;
    }
}

int cli_save_model(const char *cmd, mf_ctx *ctx, const char *path, const cli_fit *fit)
{
    if (!path || cli_launched_rank() != 0) /* rank 0 writes what every rank holds */
        return 0;
    mf_model m;
    cli_fit_model(fit, &m);
    char options[1024];
    snprintf(options, sizeof options, "%s index_base=%d", fit->options, cli_ratings_base());
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = fit->algorithm;
    o.options = options;
    /* With ids, the file's users and items by their ids: predict and recommend --model read
     * and write those. */
    if (mf_id_map_count(cli_user_ids()) == m.users && mf_id_map_count(cli_item_ids()) == m.items)
        o.user_ids = cli_user_ids(), o.item_ids = cli_item_ids();
    if (mf_model_save(ctx, &m, &o, path) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(ctx));
        return -1;
    }
    return 0;
}

int cli_bias_room(const char *cmd, const mf_sparse *train, mf_biases *b)
{
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    b->user = malloc((size_t)users * sizeof *b->user);
    b->item = malloc((size_t)items * sizeof *b->item);
    if (b->user && b->item)
        return 0;
    cli_free_biases(b);
    cli_error(cmd, "out of host memory for the biases");
    return -1;
}

void cli_free_biases(mf_biases *b)
{
    free(b->user);
    free(b->item);
    b->user = b->item = NULL;
}

/* The value of "index_base=" among the options' words, or -1. */
static int base_of(const char *options)
{
    for (const char *p = options; (p = strstr(p, "index_base=")); p++)
        if ((p == options || p[-1] == ' ') && (p[11] == '0' || p[11] == '1') &&
            (p[12] == '\0' || p[12] == ' '))
            return p[11] - '0';
    return -1;
}

int cli_load_model(const char *cmd, mf_ctx *ctx, const char *path, int given,
                   mf_saved_model **saved, mf_model *model, int *base)
{
    if (mf_model_load(ctx, path, saved) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(ctx));
        return -1;
    }
    mf_model_init(model);
    mf_saved_model_view(*saved, model); /* cannot fail: a loaded handle, an initialized view */
    *base = given >= 0 ? given : base_of(mf_saved_model_options(*saved));
    return 0;
}
