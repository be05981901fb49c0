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
    mf_sparse *R;
    int k;
    float lambda;
    float *U, *V; /* working copies, leading dimension k */
} cpu_engine;

/* Solve the rows of one side: X[r] from F, the other side, through CSR (ptr, idx, val). */
static mf_status solve_rows(cpu_engine *e, int32_t rows, const int64_t *ptr, const int32_t *idx,
                            const float *val, const float *F, float *X, const char *side)
{
    const int k = e->k;
    int failed_row = -1, failed_pivot = -1;
    int out_of_memory = 0;
#pragma omp parallel num_threads(mf_ctx_threads(e->ctx))
    {
        float *G = malloc((size_t)k * k * sizeof *G);
        float *b = malloc((size_t)k * sizeof *b);
        if (!G || !b) {
#pragma omp atomic write
            out_of_memory = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (int32_t r = 0; r < rows; r++) {
            float *x = X + (int64_t)r * k;
            int64_t n = ptr[r + 1] - ptr[r];
            if (n == 0 || !G || !b) {
                memset(x, 0, (size_t)k * sizeof *x);
                continue;
            }
            memset(G, 0, (size_t)k * k * sizeof *G);
            memset(b, 0, (size_t)k * sizeof *b);
            for (int64_t p = ptr[r]; p < ptr[r + 1]; p++) {
                const float *f = F + (int64_t)idx[p] * k;
                float v = val ? val[p] : 1.0f;
                for (int a = 0; a < k; a++) {
                    float *g = G + (int64_t)a * k;
                    for (int c = 0; c <= a; c++)
                        g[c] += f[a] * f[c];
                    b[a] += v * f[a];
                }
            }
            for (int a = 0; a < k; a++)
                G[(int64_t)a * k + a] += e->lambda * (float)n;
            int pivot = mf_ldlt_solve(k, G, k, b);
            if (pivot >= 0) {
                memset(x, 0, (size_t)k * sizeof *x);
#pragma omp critical(mf_als_failed)
                if (failed_row < 0 || r < failed_row) {
                    failed_row = r;
                    failed_pivot = pivot;
                }
                continue;
            }
            memcpy(x, b, (size_t)k * sizeof *x);
        }
        free(G);
        free(b);
    }
    if (out_of_memory)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_als_run: out of host memory for a %d x %d "
                       "system per thread",
                       k, k);
    if (failed_row >= 0)
        return mf_fail(e->ctx, MF_ERR_NUMERIC,
                       "mf_als_run: the system of %s %d broke down at pivot %d (lambda * count "
                       "too small for rank %d: not positive definite in float)",
                       side, failed_row, failed_pivot, k);
    return MF_OK;
}

static mf_status cpu_half_step(mf_als_engine *base, mf_als_side side, double *gram, double *solve)
{
    cpu_engine *e = (cpu_engine *)base;
    mf_sparse *R = e->R;
    double t0 = mf_seconds();
    mf_status st;
    if (side == MF_ALS_USERS)
        st = solve_rows(e, R->rows, R->row_ptr, R->col, R->val, e->V, e->U, "user");
    else
        st = solve_rows(e, R->cols, R->transpose.ptr, R->transpose.idx, R->transpose.val, e->U,
                        e->V, "item");
    /* Building and solving are interleaved per row here: all of it counts as solving. */
    (void)gram;
    *solve += mf_seconds() - t0;
    return st;
}

static mf_status cpu_rmse(mf_als_engine *base, const mf_sparse *R, double *rmse)
{
    cpu_engine *e = (cpu_engine *)base;
    return mf_rmse_compute(e->ctx, (mf_sparse *)R, e->k, e->U, e->k, e->V, e->k, MF_MEMORY_HOST,
                           rmse);
}

static mf_status cpu_finish(mf_als_engine *base, float *U, float *V)
{
    cpu_engine *e = (cpu_engine *)base;
    memcpy(U, e->U, (size_t)e->R->rows * e->k * sizeof *U);
    memcpy(V, e->V, (size_t)e->R->cols * e->k * sizeof *V);
    return MF_OK;
}

static void cpu_destroy(mf_als_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    free(e->U);
    free(e->V);
    free(e);
}

mf_status mf_als_cpu_engine(const mf_als_setup *s, mf_als_engine **out)
{
    MF_TRY(mf_sparse_host_transpose(s->R));
    cpu_engine *e = calloc(1, sizeof *e);
    if (e) {
        e->U = malloc((size_t)s->R->rows * s->k * sizeof *e->U);
        e->V = malloc((size_t)s->R->cols * s->k * sizeof *e->V);
    }
    if (!e || !e->U || !e->V) {
        if (e)
            cpu_destroy(&e->base);
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_als_run: out of host memory for the "
                       "working factors (%d + %d rows of %d)",
                       s->R->rows, s->R->cols, s->k);
    }
    e->base = (mf_als_engine){cpu_half_step, cpu_rmse, cpu_finish, cpu_destroy};
    e->ctx = s->ctx;
    e->R = s->R;
    e->k = s->k;
    e->lambda = s->lambda;
    memcpy(e->V, s->V0, (size_t)s->R->cols * s->k * sizeof *e->V);
    memset(e->U, 0, (size_t)s->R->rows * s->k * sizeof *e->U);
    *out = &e->base;
    return MF_OK;
}
