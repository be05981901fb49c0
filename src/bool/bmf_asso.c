/* MF_BMF_INIT_ASSO: the seeds both backends share, and the dispatch (see bmf_asso.h). */
#include "bool/bmf_asso.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bool/bmf_internal.h"
#include "core/clock.h"
#include "core/ctx.h"

/* Keys sort ascending as (count descending, index ascending): a total order. */
static int by_key(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Seconds per unit of the CPU cover's work estimate (mf_bmf_asso_cpu_lists) for one instance
 * on one thread (1.7 ns on the 2-core build machine), and how many instances at most run
 * that fast side by side: the covers are bound by memory, and on the H100 host's 16 threads
 * 16 instances took as long as about 4 would at that rate (basket-like 88K x 16K: 30 s for
 * 4.4e9 units; check-in-like 30K x 41K: 60 s for 6.8e9). Then the lists' own work (the
 * squares of the rows' ones), and the dense tensor-core cover's rate in bit-operations per
 * second (instances x k rounds of rows x columns x seeds), measured on the H100 on the same
 * two matrices (28 and 45 s). The sparse cover wins on the Amazon sets and 20News by 10-40x
 * and loses on those two by about a fifth. Since the device cover recounts, after the first
 * round, only the rows the last factor changed (bmf_asso.cu), a round after the first costs
 * about ASSO_DEVICE_LATER_ROUND of a whole one: measured on the H100 (k = 20, 16 instances),
 * basket-like 88K x 16K with 1M ones 27.9 -> 7.0 s, check-in-like 30K x 41K 44.9 -> 11.6 s,
 * the same factors; with the product kernel's loads a step ahead, 4.8 and 7.7 s (the rate
 * below is the dense pass's, now 1.45x the 2.8e14 measured before). On dense data where a
 * factor changes more than a quarter of the rows, every round is a whole recount and this
 * is low by up to 4x: the backend picked may then be the slower one (the cover is the
 * same). */
#define ASSO_CPU_SECONDS_PER_WORK      1.7e-9
#define ASSO_CPU_PARALLEL              4
#define ASSO_CPU_SECONDS_PER_LIST_WORK 2e-9
#define ASSO_DEVICE_BIT_OPS_PER_SECOND 4.0e14
#define ASSO_DEVICE_LATER_ROUND        0.22
/* The device's sparse cover (bmf_asso_sparse.cu) runs the CPU's algorithm with a block per
 * row, every instance side by side: seconds per unit of the same work estimate for one
 * instance (H100, 16 instances at k = 20: basket-like 88K x 16K 0.61 s, check-in-like 30K x
 * 41K 1.50 s, measured with bench_bmf --covers), and per round (its eight launches). */
#define ASSO_SPARSE_SECONDS_PER_WORK  1.2e-11
#define ASSO_SPARSE_SECONDS_PER_ROUND 5e-5
/* The estimate builds the CPU's lists only below this many seconds of their own work. */
#define ASSO_ESTIMATE_LIMIT 1.0

/* The CPU covers of `instances` instances with `work` units each (see above). */
static double cpu_seconds(mf_ctx *ctx, int instances, double work)
{
    int side_by_side = mf_ctx_threads(ctx);
    side_by_side = side_by_side < instances ? side_by_side : instances;
    side_by_side = side_by_side < ASSO_CPU_PARALLEL ? side_by_side : ASSO_CPU_PARALLEL;
    return work * instances * ASSO_CPU_SECONDS_PER_WORK / (side_by_side > 0 ? side_by_side : 1);
}

static double device_seconds(const mf_bmf_asso_plan *p)
{
    const mf_sparse *C = p->C;
    const double rounds = 1.0 + ASSO_DEVICE_LATER_ROUND * (p->k - 1);
    return (double)p->instances * rounds * (double)C->rows * (double)C->cols * (double)p->P /
           ASSO_DEVICE_BIT_OPS_PER_SECOND;
}

static double sparse_device_seconds(const mf_bmf_asso_plan *p, double work)
{
    return (double)p->instances * work * ASSO_SPARSE_SECONDS_PER_WORK +
           p->k * ASSO_SPARSE_SECONDS_PER_ROUND;
}

/* What the choice between the backends rests on: the dense device cover's seconds (INFINITY
 * on a CPU context), and, when the CPU's lists cost less than that and than `limit` to
 * build, those lists with the seconds of building them and of the covers from them, on the
 * CPU and on the device (INFINITY on a CPU context). */
typedef struct asso_choice {
    double device, lists_seconds, cover_seconds, sparse_seconds;
    mf_bmf_asso_lists *lists; /* NULL: not built (all three seconds INFINITY) */
} asso_choice;

static mf_status choose(mf_bmf_asso_plan *p, double limit, asso_choice *c)
{
    c->device = p->ctx->backend == MF_BACKEND_CUDA ? device_seconds(p) : INFINITY;
    c->lists_seconds = c->cover_seconds = c->sparse_seconds = INFINITY;
    c->lists = NULL;
    const double lists = mf_bmf_asso_cpu_lists_cost(p) * ASSO_CPU_SECONDS_PER_LIST_WORK;
    if (lists < c->device && lists < limit) {
        double work = 0.0;
        MF_TRY(mf_bmf_asso_cpu_lists(p, &c->lists, &work));
        c->lists_seconds = lists;
        c->cover_seconds = cpu_seconds(p->ctx, p->instances, work);
        if (p->ctx->backend == MF_BACKEND_CUDA)
            c->sparse_seconds = sparse_device_seconds(p, work);
    }
    return MF_OK;
}

/* Every instance's factors empty: where a cover starts, and starts again after a backend
 * that did not fit. */
static void clear_covers(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B)
{
    memset(A, 0, (size_t)p->instances * p->C->rows * p->kw * 8);
    memset(B, 0, (size_t)p->instances * p->C->cols * p->kw * 8);
}

/* A cover from the lists on the device; when its buffers would pass the context's
 * device-memory limit, the next fastest that fits: the dense device cover (its own buffers)
 * or the CPU's (none). */
static mf_status cover_sparse_device(mf_bmf_asso_plan *p, const asso_choice *c, uint64_t *A,
                                     uint64_t *B)
{
    mf_status st = mf_cuda_bmf_asso_sparse(p, c->lists, A, B);
    if (st == MF_ERR_OUT_OF_MEMORY && c->device < c->cover_seconds) {
        clear_covers(p, A, B);
        st = mf_cuda_bmf_asso(p, A, B);
    }
    if (st == MF_ERR_OUT_OF_MEMORY) {
        clear_covers(p, A, B);
        st = mf_bmf_asso_cpu_cover(p, c->lists, A, B);
    }
    return st;
}

/* On a CUDA context: the cover from the lists (on the device, or on the CPU) when one of
 * those is estimated faster than the dense one on the tensor cores (sparse matrices), else
 * from the tensor cores, unless their buffers would pass the context's device-memory limit. */
static mf_status cover_auto(mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B)
{
    asso_choice c;
    MF_TRY(choose(p, INFINITY, &c));
    if (c.lists && (c.cover_seconds < c.device || c.sparse_seconds < c.device)) {
        mf_status st = c.sparse_seconds < c.cover_seconds ? cover_sparse_device(p, &c, A, B)
                                                          : mf_bmf_asso_cpu_cover(p, c.lists, A, B);
        mf_bmf_asso_lists_free(c.lists);
        return st;
    }
    mf_bmf_asso_lists_free(c.lists);
    mf_status st = mf_cuda_bmf_asso(p, A, B);
    if (st == MF_ERR_OUT_OF_MEMORY) {
        /* The dense cover does not fit the context's device-memory limit; the sparse one
         * needs none. */
        clear_covers(p, A, B);
        st = mf_bmf_asso_cpu(p, A, B);
    }
    return st;
}

int mf_bmf_asso_rounds_done(const mf_bmf_asso_plan *p, int n, int caller)
{
    mf_bmf_asso_watch *w = p->watch;
    if (!w)
        return 0;
    int64_t done;
    int stopped;
#pragma omp atomic capture
    done = w->done += n;
    if (w->deadline > 0.0 && mf_seconds() >= w->deadline) {
#pragma omp atomic write
        w->stopped = 2;
    }
#pragma omp atomic read
    stopped = w->stopped;
    if (!stopped && n > 0 && caller && w->round &&
        w->round(w->user, done, (int64_t)p->instances * p->k) != 0) {
#pragma omp atomic write
        w->stopped = 1;
        stopped = 1;
    }
    return stopped != 0;
}

static void plan_free(mf_bmf_asso_plan *p)
{
    free(p->col_count);
    free(p->seeds);
}

/* The seeds and column counts both backends and the estimate start from. */
static mf_status plan_make(mf_ctx *ctx, mf_sparse *C, int k, int instances, mf_bmf_asso_plan *p)
{
    MF_TRY(mf_sparse_host_transpose(C));
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->C = C;
    p->k = k;
    p->kw = mf_bmf_words(k);
    p->instances = instances;
    p->col_count = malloc((size_t)C->cols * sizeof *p->col_count);
    int32_t *order = malloc((size_t)C->cols * sizeof *order);
    uint64_t *keys = malloc((size_t)C->cols * sizeof *keys);
    if (!p->col_count || !order || !keys) {
        free(p->col_count);
        free(order);
        free(keys);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    }
    int32_t nonzero = 0;
    for (int32_t j = 0; j < C->cols; j++) {
        p->col_count[j] = C->transpose.ptr[j + 1] - C->transpose.ptr[j];
        nonzero += p->col_count[j] > 0;
        keys[j] = ((uint64_t)(INT32_MAX - p->col_count[j]) << 32) | (uint32_t)j;
    }
    qsort(keys, (size_t)C->cols, sizeof *keys, by_key);
    for (int32_t j = 0; j < C->cols; j++)
        order[j] = (int32_t)(keys[j] & 0xffffffffu);
    free(keys);
    p->P = nonzero < BMF_ASSO_CANDIDATES ? nonzero : BMF_ASSO_CANDIDATES;
    p->seeds = order;
    return MF_OK;
}

mf_status mf_bmf_asso_estimate(mf_ctx *ctx, mf_sparse *C, int k, int instances, double *seconds)
{
    mf_bmf_asso_plan p;
    MF_TRY(plan_make(ctx, C, k, instances, &p));
    asso_choice c = {INFINITY, INFINITY, INFINITY, INFINITY, NULL};
    mf_status st = p.P == 0 ? MF_OK : choose(&p, ASSO_ESTIMATE_LIMIT, &c);
    mf_bmf_asso_lists_free(c.lists);
    plan_free(&p);
    const double cpu = c.lists_seconds + c.cover_seconds,
                 sparse = c.lists_seconds + c.sparse_seconds, lists = cpu < sparse ? cpu : sparse;
    *seconds = p.P == 0 ? 0.0 : lists < c.device ? lists : c.device;
    return st;
}

mf_status mf_bmf_asso(mf_ctx *ctx, mf_sparse *C, int k, int instances, mf_bmf_asso_where where,
                      mf_bmf_asso_watch *watch, uint64_t *A, uint64_t *B)
{
    mf_bmf_asso_plan p;
    MF_TRY(plan_make(ctx, C, k, instances, &p));
    p.watch = watch;
    if (watch) {
        watch->stopped = 0;
        watch->done = 0;
    }
    clear_covers(&p, A, B);
    mf_status st = MF_OK;
    if (p.P > 0) {
        if (ctx->backend != MF_BACKEND_CUDA || where == MF_BMF_ASSO_CPU)
            st = mf_bmf_asso_cpu(&p, A, B);
        else if (where == MF_BMF_ASSO_DEVICE)
            st = mf_cuda_bmf_asso(&p, A, B);
        else if (where == MF_BMF_ASSO_DEVICE_SPARSE) {
            mf_bmf_asso_lists *l = NULL;
            double work;
            st = mf_bmf_asso_cpu_lists(&p, &l, &work);
            if (st == MF_OK)
                st = mf_cuda_bmf_asso_sparse(&p, l, A, B);
            mf_bmf_asso_lists_free(l);
        } else
            st = cover_auto(&p, A, B);
    }
    plan_free(&p);
    return st;
}
