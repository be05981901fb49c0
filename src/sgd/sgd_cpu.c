/* The CPU engine of Hogwild SGD: OpenMP threads take chunks of the plan and update the
 * factors without locks. Every factor element is read and written with relaxed atomic
 * loads and stores (plain moves on x86), so that the races Hogwild tolerates by design are
 * defined behaviour and ThreadSanitizer has nothing to report. With one thread the run is
 * the sequence of updates of mf_sgd_hogwild_run's documentation, in float. */
#include <math.h>
#include <stdlib.h>

#include "core/ctx.h"
#include "sddmm/sddmm.h"
#include "sgd/sgd_internal.h"
#include "sgd/sgd_rules.h"

typedef struct cpu_engine {
    mf_sgd_engine base;
    mf_ctx *ctx;
    const mf_sgd_plan *plan;
    uint64_t seed;
    int k, half, resident, threads;
    int32_t rows, cols;
    float lambda_u, lambda_v;
    void *U, *V; /* float, or uint16_t (half bits); leading dimension k */
    int biases;
    float lambda_bias, mean;
    float *bu, *bi; /* biases (biased model only) */
    int64_t *parts; /* nparts + 1 chunk boundaries (sgd_internal.h) */
    int nparts;
    double sq_err; /* the parts' squared errors since the last loss */
} cpu_engine;

static float load_bias(const float *b, int64_t i)
{
    float f;
    __atomic_load(b + i, &f, __ATOMIC_RELAXED);
    return f;
}

static void store_bias(float *b, int64_t i, float f)
{
    __atomic_store(b + i, &f, __ATOMIC_RELAXED);
}

static float load_element(const cpu_engine *e, const void *X, int64_t p)
{
    if (e->half)
        return mf_half_to_float(__atomic_load_n((const uint16_t *)X + p, __ATOMIC_RELAXED));
    float f;
    __atomic_load((const float *)X + p, &f, __ATOMIC_RELAXED);
    return f;
}

static void store_element(const cpu_engine *e, void *X, int64_t p, float f)
{
    if (e->half) {
        __atomic_store_n((uint16_t *)X + p, mf_half_from_float(f), __ATOMIC_RELAXED);
        return;
    }
    __atomic_store((float *)X + p, &f, __ATOMIC_RELAXED);
}

static void load_row(const cpu_engine *e, const void *X, int64_t row, float *x)
{
    for (int t = 0; t < e->k; t++)
        x[t] = load_element(e, X, row * e->k + t);
}

static void store_row(const cpu_engine *e, void *X, int64_t row, const float *x)
{
    for (int t = 0; t < e->k; t++)
        store_element(e, X, row * e->k + t, x[t]);
}

static float dot(int k, const float *u, const float *v)
{
    float sum = 0.0f;
    for (int t = 0; t < k; t++)
        sum += u[t] * v[t];
    return sum;
}

/* One update of u and v (both from the old values) and, with biases (bu non-NULL), of *bu
 * and *bi; returns the error before it. */
static float update(int k, float *u, float *v, float r, float lr, float lu, float lv, float *bu,
                    float *bi, float lb)
{
    /* the GPU kernels' order: r - (bu + bi) first, then the dot product */
    const float err = (bu ? r - (*bu + *bi) : r) - dot(k, u, v);
    if (bu) {
        const float b_u = *bu, b_i = *bi;
        *bu = b_u + lr * (err - lb * b_u);
        *bi = b_i + lr * (err - lb * b_i);
    }
    for (int t = 0; t < k; t++) {
        float ut = u[t], vt = v[t];
        u[t] = ut + lr * (err * vt - lu * ut);
        v[t] = vt + lr * (err * ut - lv * vt);
    }
    return err;
}

/* The updates of one chunk; returns the sum of their squared errors. */
static double run_chunk(cpu_engine *e, int64_t c, float lr, float *u, float *v)
{
    const mf_sgd_plan *p = e->plan;
    const int64_t b = p->chunk_begin[c], end = p->chunk_begin[c + 1];
    double sq = 0.0;
    float bu = 0.0f, bi = 0.0f;
    float *pbu = e->biases ? &bu : NULL, *pbi = e->biases ? &bi : NULL;
    if (e->resident) {
        load_row(e, e->U, p->user[b], u);
        if (e->biases && end > b)
            bu = load_bias(e->bu, p->user[b]);
    }
    for (int64_t q = b; q < end; q++) {
        const int32_t user = p->user[q], item = p->entry[q].item;
        if (!e->resident) {
            load_row(e, e->U, user, u);
            if (e->biases)
                bu = load_bias(e->bu, user);
        }
        load_row(e, e->V, item, v);
        if (e->biases)
            bi = load_bias(e->bi, item);
        float err = update(e->k, u, v, p->entry[q].rating, lr, e->lambda_u, e->lambda_v, pbu, pbi,
                           e->lambda_bias);
        store_row(e, e->V, item, v);
        if (e->biases)
            store_bias(e->bi, item, bi);
        if (!e->resident) {
            store_row(e, e->U, user, u);
            if (e->biases)
                store_bias(e->bu, user, bu);
        }
        sq += (double)err * err;
    }
    if (e->resident && end > b) {
        store_row(e, e->U, p->user[b], u);
        if (e->biases)
            store_bias(e->bu, p->user[b], bu);
    }
    return sq;
}

static mf_status cpu_part_epoch(mf_sgd_engine *base, int t, int part, float lr)
{
    cpu_engine *e = (cpu_engine *)base;
    const int64_t first = e->parts[part], n = e->parts[part + 1] - first;
    const mf_sgd_perm perm =
        mf_sgd_perm_make((uint64_t)(n ? n : 1), e->seed, (uint32_t)((int64_t)t * e->nparts + part));
    double sq = 0.0;
#pragma omp parallel num_threads(e->threads) reduction(+ : sq)
    {
        float u[512], v[512];
#pragma omp for schedule(dynamic, 4)
        for (int64_t s = 0; s < n; s++)
            sq += run_chunk(e, first + (int64_t)mf_sgd_perm_apply(&perm, (uint64_t)s), lr, u, v);
    }
    e->sq_err += sq;
    return MF_OK;
}

static mf_status cpu_loss(mf_sgd_engine *base, double *sq_err)
{
    cpu_engine *e = (cpu_engine *)base;
    *sq_err = e->sq_err;
    e->sq_err = 0.0;
    return MF_OK;
}

static mf_status cpu_epoch(mf_sgd_engine *base, int t, float lr, double *sq_err)
{
    MF_TRY(cpu_part_epoch(base, t, 0, lr));
    return cpu_loss(base, sq_err);
}

static void cpu_shared(mf_sgd_engine *base, int side, void **factors, size_t *row_bytes,
                       void **biases, size_t *bias_bytes)
{
    cpu_engine *e = (cpu_engine *)base;
    *factors = side == 0 ? e->U : e->V;
    *row_bytes = (size_t)e->k * (e->half ? sizeof(uint16_t) : sizeof(float));
    *biases = e->biases ? (side == 0 ? e->bu : e->bi) : NULL;
    *bias_bytes = sizeof(float);
}

/* RMSE of the current factors. fp32 factors are plain float arrays: mf_rmse_compute (SDDMM)
 * reads them in place, as every RMSE is computed. fp16 factors keep this loop, which widens
 * each element as it reads it: SDDMM takes float factors, and a float copy of both would
 * cost twice the memory the half storage was chosen to save. Runs between epochs, when no
 * worker writes. */
static mf_status cpu_rmse(mf_sgd_engine *base, const mf_sparse *R, double *rmse)
{
    cpu_engine *e = (cpu_engine *)base;
    mf_bias_terms terms = {e->mean, e->bu, e->bi};
    if (!e->half)
        return mf_rmse_compute(e->ctx, (mf_sparse *)R, e->k, e->U, e->k, e->V, e->k,
                               e->biases ? &terms : NULL, MF_MEMORY_HOST, rmse);
    double sum = 0.0;
#pragma omp parallel num_threads(e->threads) reduction(+ : sum)
    {
        float u[512], v[512];
#pragma omp for schedule(dynamic, 64)
        for (int32_t r = 0; r < R->rows; r++) {
            if (R->row_ptr[r] == R->row_ptr[r + 1])
                continue;
            load_row(e, e->U, r, u);
            const float base_r = e->biases ? e->mean + e->bu[r] : 0.0f;
            for (int64_t q = R->row_ptr[r]; q < R->row_ptr[r + 1]; q++) {
                load_row(e, e->V, R->col[q], v);
                float pred = dot(e->k, u, v);
                if (e->biases)
                    pred += base_r + e->bi[R->col[q]];
                double d = (double)(R->val ? R->val[q] : 1.0f) - pred;
                sum += d * d;
            }
        }
    }
    *rmse = R->nnz ? sqrt(sum / (double)R->nnz) : 0.0;
    return MF_OK;
}

static mf_status cpu_finish(mf_sgd_engine *base, float *U, float *V, int64_t ld, float *bu,
                            float *bi)
{
    cpu_engine *e = (cpu_engine *)base;
    for (int64_t p = 0; p < (int64_t)e->rows * e->k; p++)
        U[p / e->k * ld + p % e->k] = load_element(e, e->U, p);
    for (int64_t p = 0; p < (int64_t)e->cols * e->k; p++)
        V[p / e->k * ld + p % e->k] = load_element(e, e->V, p);
    for (int32_t i = 0; bu && e->biases && i < e->rows; i++)
        bu[i] = e->bu[i];
    for (int32_t i = 0; bi && e->biases && i < e->cols; i++)
        bi[i] = e->bi[i];
    return MF_OK;
}

static void cpu_destroy(mf_sgd_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    free(e->U);
    free(e->V);
    free(e->bu);
    free(e->bi);
    free(e->parts);
    free(e);
}

/* Copy a float start into the storage: rows x k elements. */
static void store_start(const cpu_engine *e, void *X, const float *X0, int64_t n)
{
    for (int64_t p = 0; p < n; p++)
        store_element(e, X, p, X0[p]);
}

mf_status mf_sgd_cpu_engine(const mf_sgd_setup *s, mf_sgd_engine **out)
{
    cpu_engine *e = calloc(1, sizeof *e);
    if (!e)
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    e->base.epoch = cpu_epoch;
    e->base.part_epoch = cpu_part_epoch;
    e->base.loss = cpu_loss;
    e->base.shared = cpu_shared;
    e->base.rmse = cpu_rmse;
    e->base.finish = cpu_finish;
    e->base.destroy = cpu_destroy;
    e->ctx = s->ctx;
    e->plan = s->plan;
    e->seed = s->seed;
    e->k = s->k;
    e->rows = s->R->rows;
    e->cols = s->R->cols;
    e->half = s->storage == MF_SGD_STORAGE_FP16;
    e->resident = s->order == MF_SGD_ORDER_USER_CHUNKS;
    e->threads = s->workers > 0 ? s->workers : mf_ctx_threads(s->ctx);
    e->threads = e->threads < s->max_workers ? e->threads : (int)s->max_workers;
    e->base.workers = e->threads;
    e->lambda_u = s->lambda_u;
    e->lambda_v = s->lambda_v;
    const size_t elem = e->half ? sizeof(uint16_t) : sizeof(float);
    const int64_t nu = (int64_t)e->rows * e->k, nv = (int64_t)e->cols * e->k;
    e->U = malloc((size_t)(nu + 1) * elem);
    e->V = malloc((size_t)(nv + 1) * elem);
    e->biases = s->biases;
    e->lambda_bias = s->lambda_bias;
    e->mean = s->biases ? s->mean : 0.0f;
    e->bu = calloc((size_t)e->rows + 1, sizeof *e->bu);
    e->bi = calloc((size_t)e->cols + 1, sizeof *e->bi);
    e->nparts = s->parts ? s->nparts : 1;
    e->parts = malloc(((size_t)e->nparts + 1) * sizeof *e->parts);
    for (int i = 0; e->parts && i <= e->nparts; i++)
        e->parts[i] = s->parts ? s->parts[i] : i == 0 ? 0 : s->plan->nchunks;
    if (!e->U || !e->V || !e->bu || !e->bi || !e->parts) {
        cpu_destroy(&e->base);
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_sgd_hogwild_run: out of host memory for the working factors");
    }
    store_start(e, e->U, s->U0, nu);
    store_start(e, e->V, s->V0, nv);
    *out = &e->base;
    return MF_OK;
}
