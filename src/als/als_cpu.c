/* The CPU engine of ALS-WR: OpenMP over the rows of one side; each thread builds its row's
 * Gram matrix and right-hand side in float and solves them with mf_ldlt_solve. It is the
 * reference that the CUDA engine is tested against, so it favours plain loops. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "als/als_internal.h"
#include "core/clock.h"
#include "core/ctx.h"
#include "sddmm/sddmm.h"

typedef struct cpu_engine {
    mf_als_engine base;
    mf_ctx *ctx;
    mf_sparse *R;       /* the shape (and the whole matrix outside a group) */
    mf_sparse *part[2]; /* the entries each side reads (mf_als_setup.part) */
    int k;
    float lambda, lambda_bias, mean;
    int biases, weighted;
    int cg_steps;         /* 0: LDL^T; else mf_cg_solve from the current row */
    float *U, *V;         /* working copies, leading dimension k */
    float *bu, *bi;       /* biases (biased model only) */
    int32_t lo[2], hi[2]; /* the rows of each side this rank solves */
    int sum_items;        /* mf_als_setup.sum_items */
    float *sums;          /* with sum_items: a chunk of sum_chunk items' systems */
    int64_t sum_chunk;
    const int64_t *item_ptr; /* with sum_items: the whole matrix's column offsets */
    double solve_seconds;    /* since the last settle */
} cpu_engine;

/* Adds the entries [p0, p1) of a row (columns idx, values val, NULL: ones) to its system:
 * the lower triangle of G (order n_sys, row-major) and b. Biased (Fb not NULL): the extra
 * feature 1, and the targets r - mean - Fb[idx]. */
static void accumulate(const cpu_engine *e, float *G, float *b, int n_sys, int64_t p0, int64_t p1,
                       const int32_t *idx, const float *val, const float *F, const float *Fb)
{
    const int k = e->k;
    for (int64_t p = p0; p < p1; p++) {
        const float *f = F + (int64_t)idx[p] * k;
        float v = val ? val[p] : 1.0f;
        if (Fb)
            v -= e->mean + Fb[idx[p]];
        for (int a = 0; a < k; a++) {
            float *g = G + (int64_t)a * n_sys;
            for (int c = 0; c <= a; c++)
                g[c] += f[a] * f[c];
            b[a] += v * f[a];
        }
        if (Fb) { /* the bias row: feature 1 */
            float *g = G + (int64_t)k * n_sys;
            for (int c = 0; c < k; c++)
                g[c] += f[c];
            g[k] += 1.0f;
            b[k] += v;
        }
    }
}

/* The row's penalties (times its count n when weighted) on G's diagonal, then the solve:
 * the row's factors into x and, biased, its bias into *xb (both zero on a breakdown). The
 * CG solver starts from the current x and *xb (x0 and work: the caller's scratch).
 * Returns mf_ldlt_solve's or mf_cg_solve's -1, or where it broke down. */
static int regularize_solve(const cpu_engine *e, float *G, float *b, int n_sys, int64_t n, float *x,
                            float *xb, float *x0, double *work)
{
    const int k = e->k;
    const float w = e->weighted ? (float)n : 1.0f;
    for (int a = 0; a < k; a++)
        G[(int64_t)a * n_sys + a] += e->lambda * w;
    if (xb)
        G[(int64_t)k * n_sys + k] += e->lambda_bias * w;
    int pivot;
    if (e->cg_steps > 0) {
        memcpy(x0, x, (size_t)k * sizeof *x0);
        if (xb)
            x0[k] = *xb;
        pivot = mf_cg_solve(n_sys, G, n_sys, b, x0, e->cg_steps, work);
        memcpy(b, x0, (size_t)n_sys * sizeof *b);
    } else {
        pivot = mf_ldlt_solve(n_sys, G, n_sys, b);
    }
    if (xb)
        *xb = pivot >= 0 ? 0.0f : b[k];
    if (pivot >= 0)
        memset(x, 0, (size_t)k * sizeof *x);
    else
        memcpy(x, b, (size_t)k * sizeof *x);
    return pivot;
}

/* Row r broke down at `pivot`: the side reports its lowest such row (any thread). */
static void note_breakdown(int32_t r, int pivot, int *failed_row, int *failed_pivot)
{
#pragma omp critical(mf_als_failed)
    if (*failed_row < 0 || r < *failed_row) {
        *failed_row = r;
        *failed_pivot = pivot;
    }
}

/* What the solves of a side found: MF_ERR_OUT_OF_MEMORY, the first row that broke down, or
 * MF_OK. */
static mf_status solve_status(const cpu_engine *e, int out_of_memory, int failed_row,
                              int failed_pivot, const char *side)
{
    if (out_of_memory)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_als_run: out of host memory for a %d x %d "
                       "system per thread",
                       e->k, e->k);
    if (failed_row >= 0)
        return mf_fail(e->ctx, MF_ERR_NUMERIC,
                       "mf_als_run: the system of %s %d broke down at %s %d (lambda * count "
                       "too small for rank %d: not positive definite in float)",
                       side, failed_row, e->cg_steps > 0 ? "CG step" : "pivot", failed_pivot, e->k);
    return MF_OK;
}

/* Solve rows [lo, hi) of one side (this rank's share): X[r] from F, the other side, through CSR
 * (ptr, idx, val). Biased: the system has order k + 1, the extra feature 1 and the targets r - mean
 * - Fb[idx]; its last unknown is the row's bias, Xb[r]. */
static mf_status solve_rows(cpu_engine *e, int32_t lo, int32_t hi, const int64_t *ptr,
                            const int32_t *idx, const float *val, const float *F, const float *Fb,
                            float *X, float *Xb, const char *side)
{
    const int k = e->k, n_sys = e->biases ? k + 1 : k;
    int failed_row = -1, failed_pivot = -1;
    int out_of_memory = 0;
#pragma omp parallel num_threads(mf_ctx_threads(e->ctx))
    {
        float *G = malloc((size_t)n_sys * n_sys * sizeof *G);
        float *b = malloc((size_t)n_sys * sizeof *b);
        /* CG: the start (the row's current factors and bias) and the solver's vectors. */
        float *x0 = malloc((size_t)n_sys * sizeof *x0);
        double *work = malloc((size_t)4 * n_sys * sizeof *work);
        if (!G || !b || !x0 || !work) {
#pragma omp atomic write
            out_of_memory = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (int32_t r = lo; r < hi; r++) {
            float *x = X + (int64_t)r * k;
            int64_t n = ptr[r + 1] - ptr[r];
            if (n == 0 || !G || !b || !x0 || !work) {
                memset(x, 0, (size_t)k * sizeof *x);
                if (Xb)
                    Xb[r] = 0.0f;
                continue;
            }
            memset(G, 0, (size_t)n_sys * n_sys * sizeof *G);
            memset(b, 0, (size_t)n_sys * sizeof *b);
            accumulate(e, G, b, n_sys, ptr[r], ptr[r + 1], idx, val, F, Xb ? Fb : NULL);
            const int pivot = regularize_solve(e, G, b, n_sys, n, x, Xb ? Xb + r : NULL, x0, work);
            if (pivot >= 0)
                note_breakdown(r, pivot, &failed_row, &failed_pivot);
        }
        free(G);
        free(b);
        free(x0);
        free(work);
    }
    return solve_status(e, out_of_memory, failed_row, failed_pivot, side);
}

/* Bytes of item systems (G and b, floats) a chunk of the summed half step holds: a fixed
 * figure (mf_als_sum_chunk), so that every rank of a group cuts the items into the same
 * chunks. */
#define ALS_CPU_SUM_BYTES ((size_t)64 << 20)

/* The items' half step with sharded users (mf_als_setup.sum_items): each chunk of items'
 * systems formed from this rank's users, summed over the group (the same bits on every
 * rank), and every item of the chunk solved, so that V stays the same on every rank. An
 * item's count (the weighted lambda, and whether it has ratings at all) is the whole
 * matrix's. Every rank makes every chunk's sum whatever failed on it before (the chunk's
 * buffer, e->sums, is the engine's since it was made), and the first breakdown is the same
 * on every rank. */
static mf_status solve_items_summed(cpu_engine *e)
{
    mf_ctx *ctx = e->ctx;
    const mf_sparse *Ri = e->part[MF_ALS_ITEMS];
    const int64_t *ptr = Ri->transpose.ptr, *count = e->item_ptr;
    const int32_t *idx = Ri->transpose.idx;
    const float *val = Ri->transpose.val;
    const int k = e->k, n_sys = e->biases ? k + 1 : k;
    const size_t sys = (size_t)n_sys * n_sys + (size_t)n_sys; /* G, then b */
    const int32_t items = Ri->cols;
    const int64_t chunk = e->sum_chunk;
    float *const buf = e->sums;
    int out_of_memory = 0, failed_row = -1, failed_pivot = -1;
    mf_status st = MF_OK;
    for (int32_t c0 = 0; c0 < items; c0 += (int32_t)chunk) {
        const int32_t c1 = items - c0 < chunk ? items : c0 + (int32_t)chunk;
        memset(buf, 0, (size_t)(c1 - c0) * sys * sizeof *buf);
#pragma omp parallel for schedule(dynamic, 16) num_threads(mf_ctx_threads(ctx))
        for (int32_t i = c0; i < c1; i++) {
            float *G = buf + (size_t)(i - c0) * sys;
            accumulate(e, G, G + (size_t)n_sys * n_sys, n_sys, ptr[i], ptr[i + 1], idx, val, e->U,
                       e->biases ? e->bu : NULL);
        }
        /* every rank sums every chunk, whatever its state, so that none waits alone */
        const mf_status summed =
            ctx->comm->ops->sum_buffer(ctx->comm, ctx, buf, (size_t)(c1 - c0) * sys, 0);
        st = st != MF_OK ? st : summed;
        if (st != MF_OK)
            continue;
#pragma omp parallel num_threads(mf_ctx_threads(ctx))
        {
            float *x0 = malloc((size_t)n_sys * sizeof *x0);
            double *work = malloc((size_t)4 * n_sys * sizeof *work);
            if (!x0 || !work) {
#pragma omp atomic write
                out_of_memory = 1;
            }
#pragma omp for schedule(dynamic, 16)
            for (int32_t i = c0; i < c1; i++) {
                float *x = e->V + (int64_t)i * k, *xb = e->biases ? e->bi + i : NULL;
                const int64_t n = count[i + 1] - count[i];
                if (n == 0 || !x0 || !work) {
                    memset(x, 0, (size_t)k * sizeof *x);
                    if (xb)
                        *xb = 0.0f;
                    continue;
                }
                float *G = buf + (size_t)(i - c0) * sys;
                const int pivot =
                    regularize_solve(e, G, G + (size_t)n_sys * n_sys, n_sys, n, x, xb, x0, work);
                if (pivot >= 0)
                    note_breakdown(i, pivot, &failed_row, &failed_pivot);
            }
            free(x0);
            free(work);
        }
    }
    return st != MF_OK ? st : solve_status(e, out_of_memory, failed_row, failed_pivot, "item");
}

static mf_status cpu_half_step(mf_als_engine *base, mf_als_side side)
{
    cpu_engine *e = (cpu_engine *)base;
    const mf_sparse *Ru = e->part[MF_ALS_USERS], *Ri = e->part[MF_ALS_ITEMS];
    float *bu = e->biases ? e->bu : NULL, *bi = e->biases ? e->bi : NULL; /* NULL: no bias */
    double t0 = mf_seconds();
    mf_status st;
    if (side == MF_ALS_ITEMS && e->sum_items)
        st = solve_items_summed(e);
    else if (side == MF_ALS_USERS)
        st = solve_rows(e, e->lo[side], e->hi[side], Ru->row_ptr, Ru->col, Ru->val, e->V, e->bi,
                        e->U, bu, "user");
    else
        st = solve_rows(e, e->lo[side], e->hi[side], Ri->transpose.ptr, Ri->transpose.idx,
                        Ri->transpose.val, e->U, e->bu, e->V, bi, "item");
    e->solve_seconds += mf_seconds() - t0;
    return st;
}

/* Nothing is queued here (a breakdown was returned by the half step). Building and solving
 * are interleaved per row: all of it counts as solving. */
static mf_status cpu_settle(mf_als_engine *base, double *gram, double *solve, mf_als_side *side)
{
    cpu_engine *e = (cpu_engine *)base;
    (void)gram, (void)side;
    *solve += e->solve_seconds;
    e->solve_seconds = 0.0;
    return MF_OK;
}

static mf_status cpu_rmse(mf_als_engine *base, const mf_sparse *R, int precision, double *rmse)
{
    cpu_engine *e = (cpu_engine *)base;
    mf_bias_terms b = {e->mean, e->bu, e->bi};
    return mf_rmse_compute_ex(e->ctx, (mf_sparse *)R, e->k, e->U, e->k, e->V, e->k,
                              e->biases ? &b : NULL, MF_MEMORY_HOST, precision, rmse);
}

/* rows x k (leading dimension k) into dst with leading dimension ld, zero past k. */
static void copy_rows(float *dst, int64_t ld, const float *src, int32_t rows, int k)
{
    for (int32_t r = 0; r < rows; r++) {
        memcpy(dst + r * ld, src + (int64_t)r * k, (size_t)k * sizeof *dst);
        memset(dst + r * ld + k, 0, (size_t)(ld - k) * sizeof *dst);
    }
}

static mf_status cpu_finish(mf_als_engine *base, float *U, float *V, int64_t ld, float *bu,
                            float *bi)
{
    cpu_engine *e = (cpu_engine *)base;
    copy_rows(U, ld, e->U, e->R->rows, e->k);
    copy_rows(V, ld, e->V, e->R->cols, e->k);
    if (bu && e->biases)
        memcpy(bu, e->bu, (size_t)e->R->rows * sizeof *bu);
    if (bi && e->biases)
        memcpy(bi, e->bi, (size_t)e->R->cols * sizeof *bi);
    return MF_OK;
}

static void cpu_shared(mf_als_engine *base, mf_als_side side, void **factors, size_t *row_bytes,
                       float **biases)
{
    cpu_engine *e = (cpu_engine *)base;
    *factors = side == MF_ALS_USERS ? e->U : e->V;
    *row_bytes = (size_t)e->k * sizeof(float);
    *biases = e->biases ? (side == MF_ALS_USERS ? e->bu : e->bi) : NULL;
}

static void cpu_destroy(mf_als_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    free(e->U);
    free(e->V);
    free(e->bu);
    free(e->bi);
    free(e->sums);
    free(e);
}

mf_status mf_als_cpu_engine(const mf_als_setup *s, mf_als_engine **out)
{
    MF_TRY(mf_sparse_host_transpose(mf_als_part(s, MF_ALS_ITEMS)));
    cpu_engine *e = calloc(1, sizeof *e);
    if (e) {
        e->U = malloc((size_t)s->R->rows * s->k * sizeof *e->U);
        e->V = malloc((size_t)s->R->cols * s->k * sizeof *e->V);
        /* zeros: a row without ratings keeps bias 0 */
        e->bu = calloc((size_t)s->R->rows + 1, sizeof *e->bu);
        e->bi = calloc((size_t)s->R->cols + 1, sizeof *e->bi);
        if (s->sum_items) { /* made here: a rank without room fails before any sum */
            const int n_sys = s->biases ? s->k + 1 : s->k;
            const size_t sys = (size_t)n_sys * n_sys + (size_t)n_sys;
            e->sum_chunk = mf_als_sum_chunk(s->R->cols, sys * sizeof(float), ALS_CPU_SUM_BYTES);
            e->sums = malloc((size_t)e->sum_chunk * sys * sizeof *e->sums);
        }
    }
    if (!e || !e->U || !e->V || !e->bu || !e->bi || (s->sum_items && !e->sums)) {
        if (e)
            cpu_destroy(&e->base);
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_als_run: out of host memory for the "
                       "working factors (%d + %d rows of %d)",
                       s->R->rows, s->R->cols, s->k);
    }
    e->base =
        (mf_als_engine){cpu_half_step, cpu_settle, cpu_rmse, cpu_finish, cpu_shared, cpu_destroy};
    for (int w = 0; w < 2; w++)
        e->lo[w] = s->lo[w], e->hi[w] = s->hi[w];
    e->ctx = s->ctx;
    e->R = s->R;
    for (int w = 0; w < 2; w++)
        e->part[w] = mf_als_part(s, w);
    e->k = s->k;
    e->lambda = s->lambda;
    e->biases = s->biases;
    e->weighted = s->weighted;
    e->cg_steps = s->cg_steps;
    e->sum_items = s->sum_items;
    e->item_ptr = s->line_ptr[MF_ALS_ITEMS];
    e->lambda_bias = s->lambda_bias;
    e->mean = s->biases ? s->mean : 0.0f;
    memcpy(e->V, s->V0, (size_t)s->R->cols * s->k * sizeof *e->V);
    memset(e->U, 0, (size_t)s->R->rows * s->k * sizeof *e->U);
    *out = &e->base;
    return MF_OK;
}
