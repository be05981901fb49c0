#include "model_fit.h"

#include "test_set.h"

#include <stdio.h>
#include <stdlib.h>

/* The progress lines' unit, for the library's callback. */
typedef struct progress_unit {
    const char *unit;
} progress_unit;

static int on_progress(void *user, const mf_progress *p)
{
    const progress_unit *u = user;
    cli_print_progress(u->unit, p);
    return 0;
}

/* What every rank's call shares: rank 0 alone prints progress and returns the biases. */
typedef struct fit_job {
    const cli_model_fit *f;
    progress_unit unit;
    mf_biases *bias;
} fit_job;

static mf_status fit_rank(const cli_rank *r, void *user)
{
    fit_job *j = user;
    const int lead = r->rank == 0;
    const cli_fit_rank call = {r,
                               j->f->opts,
                               lead ? on_progress : NULL,
                               lead ? &j->unit : NULL,
                               lead ? j->bias : NULL,
                               lead ? j->f->report : NULL};
    return j->f->call(&call);
}

/* The fit and its files into *x (the caller frees it either way); CLI_OK or CLI_FAILED,
 * printed. */
static int fit(const cli_model_fit *f, const cli_common *common, const cli_model_args *m,
               long long k, cli_fitted *x)
{
    mf_sparse *train = x->train;
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    x->U = malloc(((size_t)users * k + 1) * sizeof *x->U); /* + 1: never malloc(0) */
    x->V = malloc(((size_t)items * k + 1) * sizeof *x->V);
    if (!x->U || !x->V) {
        cli_error(f->cmd, "out of host memory for the factors");
        return CLI_FAILED;
    }
    /* The biases come back where a model file or unseen test entries need them. */
    if ((m->save_model || cli_test_unseen() > 0) && m->biases &&
        cli_bias_room(f->cmd, train, &x->bias) != 0)
        return CLI_FAILED;
    cli_gpus g;
    if (cli_gpus_open(f->cmd, common, x->ctx, (int)m->gpus, train, x->test, (int)k, x->U, x->V,
                      &g) != 0)
        return CLI_FAILED; /* printed */
    fit_job job = {f, {f->unit}, &x->bias};
    const mf_status st = cli_gpus_call(f->cmd, &g, fit_rank, &job);
    cli_gpus_close(&g);
    if (st != MF_OK)
        return CLI_FAILED; /* printed */
    return cli_write_factors(f->cmd, m->out_u, m->out_v, x->U, x->V, train, k) != 0 ? CLI_FAILED
                                                                                    : CLI_OK;
}

int cli_model_run(const cli_model_fit *f, mf_ctx *ctx, const cli_common *common,
                  const cli_model_args *m, long long k, mf_sparse *train, mf_sparse *test)
{
    cli_fitted x = {ctx, train, test, NULL, NULL, {0.0f, NULL, NULL}};
    int rc = fit(f, common, m, k, &x);
    if (rc == CLI_OK)
        rc = f->results(f, &x);
    free(x.U);
    free(x.V);
    cli_free_biases(&x.bias);
    return rc;
}

int cli_fit_results(cli_out *out, const cli_fitted *x, const cli_common *common,
                    const cli_model_args *m, const cli_fit *fitted)
{
    if (cli_save_model(fitted->algorithm, x->ctx, m->save_model, fitted) != 0)
        return CLI_FAILED;
    cli_out_begin(out, common->json);
    cli_out_ratings(out, x->ctx, x->train, x->test, fitted->ld);
    return CLI_OK;
}
