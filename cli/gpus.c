#include "gpus.h"

#include "launched.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A copy of m on ctx (NULL for NULL). */
static mf_status copy_to(mf_ctx *ctx, const mf_sparse *m, mf_sparse **out)
{
    *out = NULL;
    if (!m)
        return MF_OK;
    int32_t rows, cols;
    int64_t nnz;
    mf_status st = mf_sparse_shape(m, &rows, &cols, &nnz);
    if (st != MF_OK)
        return st;
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)nnz * sizeof *col + 1);
    float *val = malloc((size_t)nnz * sizeof *val + 1);
    st = ptr && col && val ? mf_sparse_get_csr(m, ptr, col, val, MF_MEMORY_HOST)
                           : MF_ERR_OUT_OF_MEMORY;
    if (st == MF_OK)
        st = mf_sparse_from_csr(ctx, out, rows, cols, nnz, ptr, col,
                                mf_sparse_has_values(m) ? val : NULL, MF_MEMORY_HOST, 0);
    free(ptr);
    free(col);
    free(val);
    return st;
}

int cli_gpus_open(const char *cmd, const cli_common *c, mf_ctx *ctx, int n, mf_sparse *train,
                  mf_sparse *test, int k, float *U, float *V, cli_gpus *g)
{
    memset(g, 0, sizeof *g);
    g->n = 1;
    g->ranks[0] = (cli_rank){0, ctx, train, test, U, V};
    if (n == 1)
        return 0;
    if (cli_launched_size() > 1) {
        cli_error(cmd,
                  "--gpus N takes the GPUs of one process; a launcher already started %d "
                  "processes (one GPU each)",
                  cli_launched_size());
        return -1;
    }
    if (mf_ctx_backend(ctx) != MF_BACKEND_CUDA) {
        cli_error(cmd, "--gpus needs the CUDA backend");
        return -1;
    }
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    mf_ctx *ctxs[CLI_MAX_GPUS] = {ctx};
    for (; g->n < n; g->n++) {
        cli_common on = *c;
        on.device = c->device + g->n;
        cli_rank *r = &g->ranks[g->n];
        r->rank = g->n;
        if (!(r->ctx = ctxs[g->n] = cli_make_ctx(cmd, &on))) {
            cli_gpus_close(g);
            return -1;
        }
        /* A rank short of host memory for U or V (NULL) still takes part: its call fails,
         * and with it every rank's. */
        r->U = malloc((size_t)users * k * sizeof(float) + 1);
        r->V = malloc((size_t)items * k * sizeof(float) + 1);
        if (copy_to(r->ctx, train, &r->train) != MF_OK ||
            copy_to(r->ctx, test, &r->test) != MF_OK) {
            cli_error(cmd, "copying the ratings to device %lld: %s", on.device,
                      mf_ctx_last_error(r->ctx));
            g->n++;
            cli_gpus_close(g);
            return -1;
        }
    }
    if (mf_ctx_join_local(ctxs, n) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(ctx));
        cli_gpus_close(g);
        return -1;
    }
    return 0;
}

/* One rank's call. The threads wait at a gate until every one of them exists: a rank that
 * started while another could not would wait inside the collective call forever. */
typedef struct job {
    pthread_mutex_t lock;
    pthread_cond_t open;
    int state; /* 0 waiting, 1 go, -1 give up */
    const cli_rank *rank;
    mf_status (*fn)(const cli_rank *, void *);
    void *user;
    mf_status st;
} job;

static void *gated(void *arg)
{
    job *j = arg;
    pthread_mutex_lock(&j->lock);
    while (j->state == 0)
        pthread_cond_wait(&j->open, &j->lock);
    const int go = j->state > 0;
    pthread_mutex_unlock(&j->lock);
    if (go)
        j->st = j->fn(j->rank, j->user);
    return NULL;
}

mf_status cli_gpus_call(const char *cmd, const cli_gpus *g,
                        mf_status (*fn)(const cli_rank *r, void *user), void *user)
{
    pthread_t threads[CLI_MAX_GPUS];
    job jobs[CLI_MAX_GPUS];
    int started = 1; /* rank 0 runs here */
    for (int i = 1; i < g->n; i++) {
        jobs[i] = (job){
            PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, &g->ranks[i], fn, user, MF_OK};
        if (pthread_create(&threads[i], NULL, gated, &jobs[i]) != 0)
            break;
        started++;
    }
    const int go = started == g->n ? 1 : -1;
    for (int i = 1; i < started; i++) {
        pthread_mutex_lock(&jobs[i].lock);
        jobs[i].state = go;
        pthread_cond_signal(&jobs[i].open);
        pthread_mutex_unlock(&jobs[i].lock);
    }
    mf_status st = go > 0 ? fn(&g->ranks[0], user) : MF_ERR_INTERNAL;
    for (int i = 1; i < started; i++)
        pthread_join(threads[i], NULL);
    if (go < 0)
        cli_error(cmd, "could not start a thread per GPU");
    else if (st != MF_OK)
        cli_error(cmd, "%s", mf_ctx_last_error(g->ranks[0].ctx));
    return st;
}

void cli_gpus_close(cli_gpus *g)
{
    for (int i = 1; i < g->n; i++) {
        mf_sparse_destroy(g->ranks[i].train);
        mf_sparse_destroy(g->ranks[i].test);
        free(g->ranks[i].U);
        free(g->ranks[i].V);
    }
    /* The contexts after the copies; rank 0's is the tool's, but it leaves the group. */
    for (int i = 1; i < g->n; i++)
        mf_ctx_destroy(g->ranks[i].ctx);
    if (g->n > 1)
        mf_ctx_set_nccl_comm(g->ranks[0].ctx, NULL);
    g->n = 0;
}
