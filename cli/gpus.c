#include "gpus.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

bool cli_gpus_parse(const char *cmd, const char *val, long long *n)
{
    if (!cli_parse_ll(val, n) || *n < 1 || *n > CLI_MAX_GPUS) {
        cli_error(cmd, "--gpus takes an integer from 1 to %d", CLI_MAX_GPUS);
        return false;
    }
    return true;
}

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
                  mf_sparse *test, cli_gpus *g)
{
    memset(g, 0, sizeof *g);
    if (mf_ctx_backend(ctx) != MF_BACKEND_CUDA) {
        cli_error(cmd, "--gpus needs the CUDA backend");
        return -1;
    }
    g->n = 1;
    g->ctx[0] = ctx, g->train[0] = train, g->test[0] = test;
    for (; g->n < n; g->n++) {
        cli_common on = *c;
        on.device = c->device + g->n;
        mf_ctx *r = g->ctx[g->n] = cli_make_ctx(cmd, &on);
        if (!r) {
            cli_gpus_close(g);
            return -1;
        }
        if (copy_to(r, train, &g->train[g->n]) != MF_OK ||
            copy_to(r, test, &g->test[g->n]) != MF_OK) {
            cli_error(cmd, "copying the ratings to device %d: %s", on.device, mf_ctx_last_error(r));
            g->n++;
            cli_gpus_close(g);
            return -1;
        }
    }
    if (mf_ctx_join_local(g->ctx, n) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(ctx));
        cli_gpus_close(g);
        return -1;
    }
    return 0;
}

/* The threads wait at a gate until every one of them exists: a rank that started while
 * another could not would wait inside the collective call forever. */
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t open;
    int state; /* 0 waiting, 1 go, -1 give up */
    void *(*fn)(void *);
    void *job;
} gate;

static void *gated(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (g->state == 0)
        pthread_cond_wait(&g->open, &g->lock);
    int go = g->state > 0;
    pthread_mutex_unlock(&g->lock);
    return go ? g->fn(g->job) : NULL;
}

int cli_gpus_run(const cli_gpus *g, void *(*fn)(void *), void *jobs, size_t job_size)
{
    pthread_t threads[CLI_MAX_GPUS];
    gate gates[CLI_MAX_GPUS];
    int started = 1; /* rank 0 runs here */
    for (int i = 1; i < g->n; i++) {
        gates[i] = (gate){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, fn,
                          (char *)jobs + i * job_size};
        if (pthread_create(&threads[i], NULL, gated, &gates[i]) != 0)
            break;
        started++;
    }
    const int go = started == g->n ? 1 : -1;
    for (int i = 1; i < started; i++) {
        pthread_mutex_lock(&gates[i].lock);
        gates[i].state = go;
        pthread_cond_signal(&gates[i].open);
        pthread_mutex_unlock(&gates[i].lock);
    }
    if (go > 0)
        fn(jobs);
    for (int i = 1; i < started; i++)
        pthread_join(threads[i], NULL);
    return go > 0 ? 0 : -1;
}

void cli_gpus_close(cli_gpus *g)
{
    for (int i = 1; i < g->n; i++) {
        mf_sparse_destroy(g->train[i]);
        mf_sparse_destroy(g->test[i]);
    }
    /* The contexts after the copies; ctx[0] is the caller's, but it leaves the group. */
    for (int i = 1; i < g->n; i++)
        mf_ctx_destroy(g->ctx[i]);
    if (g->n > 1 && g->ctx[0])
        mf_ctx_set_nccl_comm(g->ctx[0], NULL);
    g->n = 0;
}
