/* The in-process stand-in for a communicator (cuda/comm.h): the ranks are contexts of one
 * process, each driven by its own thread, and they exchange host buffers through shared
 * memory between two barriers. CPU contexts grouped by mf_ctx_join_local use it, and with
 * it CI tests every distributed code path without a GPU or NCCL. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include "core/comm_local.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct group {
    pthread_barrier_t barrier;
    pthread_mutex_t lock; /* guards refs */
    int size, refs;
    void **bufs;            /* each rank's buffer of the allgatherv under way */
    const int64_t **counts; /* each rank's send_bytes of the alltoallv under way */
    int64_t *i64;           /* size x MF_COMM_MAX_VALUES */
} group;

typedef struct local_rank {
    mf_comm base;
    group *g;
    void *scratch; /* local_sum_buffer's, kept between calls */
    size_t scratch_bytes;
} local_rank;

static mf_status local_allgatherv(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                                  size_t row_bytes, const int *owner)
{
    (void)ctx;
    group *g = ((local_rank *)c)->g;
    g->bufs[c->rank] = buf;
    pthread_barrier_wait(&g->barrier);
    /* Each rank reads the blocks the others own, which nobody writes until the second
     * barrier, and writes only into its own buffer. */
    for (int b = 0; b < c->size; b++) {
        const int from = owner ? owner[b] : b;
        if (from != c->rank && bounds[b + 1] > bounds[b])
            memcpy((char *)buf + (size_t)bounds[b] * row_bytes,
                   (const char *)g->bufs[from] + (size_t)bounds[b] * row_bytes,
                   (size_t)(bounds[b + 1] - bounds[b]) * row_bytes);
    }
    pthread_barrier_wait(&g->barrier);
    return MF_OK;
}

static mf_status local_max_i64(mf_comm *c, mf_ctx *ctx, int64_t *v, int n)
{
    if (n < 0 || n > MF_COMM_MAX_VALUES)
        return mf_fail(ctx, MF_ERR_INTERNAL, "a reduction of %d values", n);
    group *g = ((local_rank *)c)->g;
    memcpy(g->i64 + (size_t)c->rank * MF_COMM_MAX_VALUES, v, (size_t)n * sizeof *v);
    pthread_barrier_wait(&g->barrier);
    for (int r = 0; r < c->size; r++)
        for (int i = 0; i < n; i++) {
            int64_t x = g->i64[(size_t)r * MF_COMM_MAX_VALUES + i];
            if (r == 0 || x > v[i])
                v[i] = x;
        }
    pthread_barrier_wait(&g->barrier);
    return MF_OK;
}

/* Each rank sums every rank's buffer in rank order into its scratch (so the sum is the same
 * bits everywhere), and overwrites its own buffer only after the second barrier, when
 * nobody reads it any more. */
static mf_status local_sum_buffer(mf_comm *c, mf_ctx *ctx, void *buf, size_t count, int is_double)
{
    local_rank *me = (local_rank *)c;
    group *g = me->g;
    const size_t bytes = count * (is_double ? sizeof(double) : sizeof(float));
    if (me->scratch_bytes < bytes) {
        free(me->scratch);
        me->scratch = malloc(bytes);
        me->scratch_bytes = me->scratch ? bytes : 0;
    }
    void *sum = bytes <= me->scratch_bytes ? me->scratch : NULL; /* NULL when bytes is 0 */
    /* every rank goes through both barriers, failing or not, so that none waits forever */
    g->bufs[c->rank] = buf;
    pthread_barrier_wait(&g->barrier);
    for (size_t i = 0; sum && i < count; i++) {
        if (is_double) {
            double s = 0.0;
            for (int r = 0; r < c->size; r++)
                s += ((const double *)g->bufs[r])[i];
            ((double *)sum)[i] = s;
        } else {
            float s = 0.0f;
            for (int r = 0; r < c->size; r++)
                s += ((const float *)g->bufs[r])[i];
            ((float *)sum)[i] = s;
        }
    }
    pthread_barrier_wait(&g->barrier);
    if (bytes && !sum)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "a sum over the ranks: out of host memory");
    if (bytes)
        memcpy(buf, sum, bytes);
    return MF_OK;
}

/* The few values of a step: the same rank-order sum as a buffer's. */
static mf_status local_sum_f64(mf_comm *c, mf_ctx *ctx, double *v, int n)
{
    if (n < 0 || n > MF_COMM_MAX_VALUES)
        return mf_fail(ctx, MF_ERR_INTERNAL, "a reduction of %d values", n);
    return local_sum_buffer(c, ctx, v, (size_t)n, 1);
}

/* Each rank copies its block out of every rank's send buffer, which nobody changes until
 * the second barrier. */
static mf_status local_alltoallv(mf_comm *c, mf_ctx *ctx, const void *send,
                                 const int64_t *send_bytes, void *recv, const int64_t *recv_bytes)
{
    (void)ctx;
    group *g = ((local_rank *)c)->g;
    g->bufs[c->rank] = (void *)send;
    g->counts[c->rank] = send_bytes;
    pthread_barrier_wait(&g->barrier);
    size_t at = 0;
    for (int q = 0; q < c->size; q++) {
        size_t from = 0;
        for (int r = 0; r < c->rank; r++)
            from += (size_t)g->counts[q][r];
        if (recv_bytes[q] > 0)
            memcpy((char *)recv + at, (const char *)g->bufs[q] + from, (size_t)recv_bytes[q]);
        at += (size_t)recv_bytes[q];
    }
    pthread_barrier_wait(&g->barrier);
    return MF_OK;
}

/* Each rank copies block `recv` out of rank + 1's buffer, where that rank sends it and
 * writes only its own `recv`, another block; nobody writes it until the second barrier. */
static mf_status local_shift(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                             size_t row_bytes, int send, int recv)
{
    (void)ctx;
    (void)send;
    group *g = ((local_rank *)c)->g;
    g->bufs[c->rank] = buf;
    pthread_barrier_wait(&g->barrier);
    const size_t at = (size_t)bounds[recv] * row_bytes;
    if (bounds[recv + 1] > bounds[recv])
        memcpy((char *)buf + at, (const char *)g->bufs[(c->rank + 1) % c->size] + at,
               (size_t)(bounds[recv + 1] - bounds[recv]) * row_bytes);
    pthread_barrier_wait(&g->barrier);
    return MF_OK;
}

static void group_free(group *g)
{
    pthread_barrier_destroy(&g->barrier);
    pthread_mutex_destroy(&g->lock);
    free(g->bufs);
    free(g->counts);
    free(g->i64);
    free(g);
}

static void local_release(mf_comm *c)
{
    group *g = ((local_rank *)c)->g;
    pthread_mutex_lock(&g->lock);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->lock);
    if (last)
        group_free(g);
    free(((local_rank *)c)->scratch);
    free(c);
}

static const mf_comm_ops local_ops = {
    local_allgatherv, local_max_i64, local_sum_f64, local_sum_buffer,
    local_alltoallv,  local_shift,   local_release, NULL};

mf_status mf_comm_local_create(mf_ctx *ctx, int n, mf_comm **out)
{
    group *g = calloc(1, sizeof *g);
    local_rank **ranks = calloc((size_t)n, sizeof *ranks);
    int ok = g && ranks;
    if (ok) {
        g->size = g->refs = n;
        g->bufs = calloc((size_t)n, sizeof *g->bufs);
        g->counts = calloc((size_t)n, sizeof *g->counts);
        g->i64 = calloc((size_t)n * MF_COMM_MAX_VALUES, sizeof *g->i64);
        ok = g->bufs && g->counts && g->i64;
    }
    /* each rank's scratch starts with room for MF_COMM_MAX_VALUES doubles, so that
     * local_sum_f64 never allocates (it cannot fail) */
    for (int r = 0; ok && r < n; r++) {
        ok = (ranks[r] = calloc(1, sizeof *ranks[r])) != NULL;
        if (ok) {
            ranks[r]->scratch_bytes = MF_COMM_MAX_VALUES * sizeof(double);
            ok = (ranks[r]->scratch = malloc(ranks[r]->scratch_bytes)) != NULL;
        }
    }
    int sync = 0; /* 1: the mutex made, 2: the barrier too */
    if (ok && pthread_mutex_init(&g->lock, NULL) == 0)
        sync = 1;
    if (sync == 1 && pthread_barrier_init(&g->barrier, NULL, (unsigned)n) == 0)
        sync = 2;
    if (!ok || sync < 2) {
        for (int r = 0; ranks && r < n; r++)
            if (ranks[r]) {
                free(ranks[r]->scratch);
                free(ranks[r]);
            }
        free(ranks);
        if (g) {
            if (sync == 1)
                pthread_mutex_destroy(&g->lock);
            free(g->bufs);
            free(g->counts);
            free(g->i64);
            free(g);
        }
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_ctx_join_local: out of memory for a group of %d ranks", n);
    }
    for (int r = 0; r < n; r++) {
        ranks[r]->base = (mf_comm){.ops = &local_ops, .rank = r, .size = n, .device_buffers = 0};
        ranks[r]->g = g;
        out[r] = &ranks[r]->base;
    }
    free(ranks);
    return MF_OK;
}
