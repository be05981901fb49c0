/* The CPU engine of ASD and Scaled ASD (OpenMP), the reference of the GPU one. The residual
 * R = P(X Y^T - M) lives on the observed entries in CSR order; gradients are sparse-dense
 * products (G_X = R Y by rows; G_Y = R^T X by columns through a CSC-to-CSR position map, so
 * no thread writes another's row); a step's sampled product P(D Y^T) gives both its length
 * and the residual's update, so each half step costs two passes over the entries. Norms and
 * inner products accumulate in double.
 *
 * In a group (asd_internal.h) the engine holds its rank's rows of X and of Ω, and all of Y;
 * the sums that span rows go over the ranks (group_sum), and what every rank computes
 * alike from Y and the summed Y gradient is taken from rank 0, so that Y stays the same
 * bits everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "core/ctx.h"
#include "core/random.h"
#include "sddmm/sddmm.h"

typedef struct cpu_engine {
    mf_asd_engine base;
    mf_ctx *ctx;
    mf_sparse *M;
    int r, scaled, threads;
    int32_t m, n;
    int64_t nnz;
    const int64_t *t_ptr; /* CSC column offsets (the matrix's host transpose) */
    const int32_t *t_row; /* row of each CSC entry                            */
    int64_t *t_pos;       /* CSR position of each CSC entry                    */
    float *X, *Y;         /* m x r, n x r                                      */
    float *G, *D;         /* max(m, n) x r: gradient and direction             */
    float *R, *q;         /* nnz: residual and the step's sampled product      */
    double *A;            /* r x r: the Gram matrix, then its Cholesky factor  */
    mf_comm *comm;        /* the context's group, or NULL                      */
    mf_status failed;     /* a sum over the ranks that failed                  */
    double norm2;         /* |P(M)|^2, for the random start's scale            */
    /* In a group, this iteration: the ranks' reasons to stop (their sums), and whether
     * any is nonzero, when neither factor moves. */
    double why[MF_ASD_WHY_COUNT];
    int stopping;
} cpu_engine;

/* In a group: buf (count floats or doubles) becomes its sum over the ranks. The first
 * failure is kept for iterate() to return, and the rank goes on taking part in every sum
 * of the iteration, so that the others never wait for it (the driver's agreement after the
 * iteration then fails them all). */
static void group_sum(cpu_engine *e, void *buf, size_t count, int is_double)
{
    if (!e->comm)
        return;
    mf_status st = e->comm->ops->sum_buffer(e->comm, e->ctx, buf, count, is_double);
    if (e->failed == MF_OK)
        e->failed = st;
}

/* In a group, a value every rank computed alike is zeroed on all but rank 0 before its sum:
 * rank 0's bits everywhere. */
static double from_rank0(const cpu_engine *e, double v)
{
    return e->comm && e->comm->rank != 0 ? 0.0 : v;
}

static float dot(const float *a, const float *b, int r)
{
    float s = 0.0f;
    for (int t = 0; t < r; t++)
        s += a[t] * b[t];
    return s;
}

static float value(const cpu_engine *e, int64_t p)
{
    return e->M->val ? e->M->val[p] : 1.0f;
}

/* R = P(X Y^T - M); returns |R|^2, over the ranks when sum (in a group; the sum carries
 * whether any rank's sums failed, into why[MF_ASD_WHY_FAILURE]), else this rank's share. */
static double residual(cpu_engine *e, int sum)
{
    double total = 0.0;
    const int r = e->r;
#pragma omp parallel for schedule(dynamic, 64) num_threads(e->threads) reduction(+ : total)
    for (int32_t i = 0; i < e->m; i++)
        for (int64_t p = e->M->row_ptr[i]; p < e->M->row_ptr[i + 1]; p++) {
            float d = dot(e->X + (int64_t)i * r, e->Y + (int64_t)e->M->col[p] * r, r) - value(e, p);
            e->R[p] = d;
            total += (double)d * d;
        }
    double v[2] = {total, e->failed != MF_OK};
    if (sum)
        group_sum(e, v, 2, 1);
    e->why[MF_ASD_WHY_FAILURE] += v[1];
    return v[0];
}

/* G = R Y (side 0, rows x r) or R^T X (side 1, cols x r). */
static void gradient(cpu_engine *e, int side)
{
    const int r = e->r;
    const int32_t lines = side == 0 ? e->m : e->n;
    const float *F = side == 0 ? e->Y : e->X;
#pragma omp parallel for schedule(dynamic, 64) num_threads(e->threads)
    for (int32_t i = 0; i < lines; i++) {
        float *g = e->G + (int64_t)i * r;
        memset(g, 0, (size_t)r * sizeof *g);
        int64_t b = side == 0 ? e->M->row_ptr[i] : e->t_ptr[i];
        int64_t end = side == 0 ? e->M->row_ptr[i + 1] : e->t_ptr[i + 1];
        for (int64_t t = b; t < end; t++) {
            int64_t p = side == 0 ? t : e->t_pos[t];
            int32_t o = side == 0 ? e->M->col[t] : e->t_row[t];
            const float *f = F + (int64_t)o * r;
            for (int u = 0; u < r; u++)
                g[u] += e->R[p] * f[u];
        }
    }
}

/* The r x r Gram matrix F^T F of the other factor, in double. */
static void gram(const cpu_engine *e, const float *F, int32_t lines, double *A)
{
    const int r = e->r;
    memset(A, 0, (size_t)r * r * sizeof *A);
    for (int32_t i = 0; i < lines; i++) {
        const float *f = F + (int64_t)i * r;
        for (int a = 0; a < r; a++)
            for (int b = 0; b <= a; b++)
                A[a * r + b] += (double)f[a] * f[b];
    }
}

/* Cholesky in place (lower triangle); 0 when A is not numerically positive definite. */
static int cholesky(double *A, int r)
{
    double scale = 0.0;
    for (int a = 0; a < r; a++)
        scale = fmax(scale, A[a * r + a]);
    for (int j = 0; j < r; j++) {
        double d = A[j * r + j];
        for (int t = 0; t < j; t++)
            d -= A[j * r + t] * A[j * r + t];
        if (!(d > 1e-12 * scale) || !isfinite(d))
            return 0;
        d = sqrt(d);
        A[j * r + j] = d;
        for (int i = j + 1; i < r; i++) {
            double s = A[i * r + j];
            for (int t = 0; t < j; t++)
                s -= A[i * r + t] * A[j * r + t];
            A[i * r + j] = s / d;
        }
    }
    return 1;
}

/* D = G A^-1 row by row, A = L L^T. */
static void precondition(cpu_engine *e, int32_t lines, const double *L)
{
    const int r = e->r;
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int32_t i = 0; i < lines; i++) {
        double x[512];
        const float *g = e->G + (int64_t)i * r;
        for (int a = 0; a < r; a++) {
            double s = g[a];
            for (int t = 0; t < a; t++)
                s -= L[a * r + t] * x[t];
            x[a] = s / L[a * r + a];
        }
        for (int a = r - 1; a >= 0; a--) {
            double s = x[a];
            for (int t = a + 1; t < r; t++)
                s -= L[t * r + a] * x[t];
            x[a] = s / L[a * r + a];
        }
        float *d = e->D + (int64_t)i * r;
        for (int a = 0; a < r; a++)
            d[a] = (float)x[a];
    }
}

/* One half step on X (side 0) or Y (side 1); returns 1 when a scaled step fell back. */
static int half_step(cpu_engine *e, int side)
{
    const int r = e->r;
    const int32_t lines = side == 0 ? e->m : e->n;
    float *F = side == 0 ? e->X : e->Y;
    const float *other = side == 0 ? e->Y : e->X;
    gradient(e, side);
    if (side == 1) /* the rows' shares of the Y gradient */
        group_sum(e, e->G, (size_t)e->n * r, 0);
    const float *dir = e->G;
    int fell_back = 0;
    if (e->scaled) {
        gram(e, other, side == 0 ? e->n : e->m, e->A);
        /* Y's Gram from rank 0, X's summed over the rows' shares */
        if (side == 0 && e->comm && e->comm->rank != 0)
            memset(e->A, 0, (size_t)r * r * sizeof *e->A);
        group_sum(e, e->A, (size_t)r * r, 1);
        if (cholesky(e->A, r)) {
            precondition(e, lines, e->A);
            dir = e->D;
        } else
            fell_back = 1; /* singular (a rank-deficient factor): the plain direction */
    }
    /* The step's length: <dir, G> / |P(dir other^T)|^2 (side 0) or |P(F dir^T)|^2. */
    double num = 0.0, den = 0.0;
#pragma omp parallel for schedule(static) num_threads(e->threads) reduction(+ : num)
    for (int64_t i = 0; i < (int64_t)lines * r; i++)
        num += (double)dir[i] * e->G[i];
#pragma omp parallel for schedule(dynamic, 64) num_threads(e->threads) reduction(+ : den)
    for (int32_t i = 0; i < e->m; i++)
        for (int64_t p = e->M->row_ptr[i]; p < e->M->row_ptr[i + 1]; p++) {
            int32_t j = e->M->col[p];
            float v = side == 0 ? dot(dir + (int64_t)i * r, other + (int64_t)j * r, r)
                                : dot(other + (int64_t)i * r, dir + (int64_t)j * r, r);
            e->q[p] = v;
            den += (double)v * v;
        }
    /* X's <dir, G> spans the rows' shares; Y's is the same on every rank. X's sums carry
     * the ranks' reasons to stop (asd_internal.h), summed before either factor moves. */
    double sums[2 + MF_ASD_WHY_COUNT] = {side == 0 ? num : from_rank0(e, num), den};
    int count = 2;
    if (side == 0) {
        memcpy(sums + 2, e->why, sizeof e->why);
        count += MF_ASD_WHY_COUNT;
    }
    group_sum(e, sums, (size_t)count, 1);
    num = sums[0], den = sums[1];
    if (side == 0) {
        memcpy(e->why, sums + 2, sizeof e->why);
        for (int k = 0; k < MF_ASD_WHY_COUNT; k++)
            e->stopping |= e->why[k] > 0.0;
    }
    if (e->stopping || !(num > 0.0) || !(den > 0.0) || !isfinite(num / den))
        return fell_back; /* a zero gradient (nothing to move), or the ranks stop */
    const float t = (float)(num / den);
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int64_t i = 0; i < (int64_t)lines * r; i++)
        F[i] -= t * dir[i];
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int64_t p = 0; p < e->nnz; p++)
        e->R[p] -= t * e->q[p];
    return fell_back;
}

/* The random start (asd_internal.h): uniform from the two streams (in a group all of X is
 * drawn, as alone, and this rank keeps its rows); returns |P(X Y^T)|^2 over this rank's
 * rows, or -1 when out of host memory. */
static double random_draw(cpu_engine *e, const mf_asd_setup *s)
{
    const int64_t nx = (int64_t)s->rows_all * e->r, ny = (int64_t)e->n * e->r;
    float *X = s->rows_all > e->m ? malloc(((size_t)nx + 1) * sizeof *X) : e->X;
    if (!X)
        return -1.0;
    mf_random_uniform_host(X, nx, -1.0f, 1.0f, e->ctx->seed, MF_ASD_X_STREAM, e->threads);
    if (X != e->X) {
        memcpy(e->X, X + (size_t)s->row_lo * e->r, (size_t)e->m * e->r * sizeof *X);
        free(X);
    }
    mf_random_uniform_host(e->Y, ny, -1.0f, 1.0f, e->ctx->seed, MF_ASD_Y_STREAM, e->threads);
    double p2 = 0.0;
    const int r = e->r;
#pragma omp parallel for schedule(dynamic, 64) num_threads(e->threads) reduction(+ : p2)
    for (int32_t i = 0; i < e->m; i++)
        for (int64_t p = e->M->row_ptr[i]; p < e->M->row_ptr[i + 1]; p++) {
            double d = dot(e->X + (int64_t)i * r, e->Y + (int64_t)e->M->col[p] * r, r);
            p2 += d * d;
        }
    return p2;
}

/* Both factors times the square root of |P(M)| / |P(X Y^T)| (p2 over all rows), which the
 * first steps would otherwise have to undo. */
static void scale_start(cpu_engine *e, double p2)
{
    if (!(p2 > 0.0))
        return;
    const float s = (float)sqrt(sqrt(e->norm2 / p2));
    for (int64_t p = 0; p < (int64_t)e->m * e->r; p++)
        e->X[p] *= s;
    for (int64_t p = 0; p < (int64_t)e->n * e->r; p++)
        e->Y[p] *= s;
}

/* A group's start, once the driver summed p2 (asd_internal.h): this rank's |R|^2 share. */
static mf_status cpu_begin(mf_asd_engine *base, double p2)
{
    cpu_engine *e = (cpu_engine *)base;
    scale_start(e, p2);
    e->base.res2 = residual(e, 0);
    return MF_OK;
}

static mf_status cpu_iterate(mf_asd_engine *base, const double *stop_in, double *res2,
                             int *singular, double *stop_out)
{
    cpu_engine *e = (cpu_engine *)base;
    memcpy(e->why, stop_in, sizeof e->why);
    e->stopping = 0;
    *singular += half_step(e, 0);
    *singular += half_step(e, 1);
    /* Recomputed rather than updated, so rounding in the updates never accumulates. */
    *res2 = residual(e, 1);
    memcpy(stop_out, e->why, sizeof e->why);
    return e->failed;
}

static mf_status cpu_rmse(mf_asd_engine *base, const mf_sparse *T, double *rmse)
{
    cpu_engine *e = (cpu_engine *)base;
    return mf_rmse_compute(e->ctx, (mf_sparse *)T, e->r, e->X, e->r, e->Y, e->r, NULL,
                           MF_MEMORY_HOST, rmse);
}

static mf_status cpu_finish(mf_asd_engine *base, float *X, float *Y, mf_memory where)
{
    cpu_engine *e = (cpu_engine *)base;
    (void)where; /* a CPU context has host memory only */
    memcpy(X, e->X, (size_t)e->m * e->r * sizeof *X);
    memcpy(Y, e->Y, (size_t)e->n * e->r * sizeof *Y);
    return MF_OK;
}

static void cpu_destroy(mf_asd_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    free(e->t_pos);
    free(e->X);
    free(e->Y);
    free(e->G);
    free(e->D);
    free(e->R);
    free(e->q);
    free(e->A);
    free(e);
}

mf_status mf_asd_cpu_engine(const mf_asd_setup *s, mf_asd_engine **out)
{
    mf_sparse *M = s->M;
    MF_TRY(mf_sparse_host_transpose(M));
    cpu_engine *e = calloc(1, sizeof *e);
    if (!e)
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    e->base.iterate = cpu_iterate;
    e->base.rmse = cpu_rmse;
    e->base.finish = cpu_finish;
    e->base.destroy = cpu_destroy;
    e->ctx = s->ctx;
    e->M = M;
    e->r = s->r;
    e->scaled = s->scaled;
    e->threads = mf_ctx_threads(s->ctx);
    e->m = M->rows;
    e->n = M->cols;
    e->nnz = M->nnz;
    e->t_ptr = M->transpose.ptr;
    e->t_row = M->transpose.idx;
    const int64_t lines = e->m > e->n ? e->m : e->n;
    e->t_pos = malloc((size_t)(e->nnz + 1) * sizeof *e->t_pos);
    e->X = malloc((size_t)e->m * e->r * sizeof *e->X);
    e->Y = malloc((size_t)e->n * e->r * sizeof *e->Y);
    e->G = malloc((size_t)lines * e->r * sizeof *e->G);
    e->D = malloc((size_t)lines * e->r * sizeof *e->D);
    e->R = malloc((size_t)(e->nnz + 1) * sizeof *e->R);
    e->q = malloc((size_t)(e->nnz + 1) * sizeof *e->q);
    e->A = malloc((size_t)e->r * e->r * sizeof *e->A);
    int64_t *next = malloc(((size_t)e->n + 1) * sizeof *next);
    if (!e->t_pos || !e->X || !e->Y || !e->G || !e->D || !e->R || !e->q || !e->A || !next) {
        free(next);
        cpu_destroy(&e->base);
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    }
    /* The CSC holds each column's entries by ascending row, as a pass over the CSR meets
     * them: the k-th entry of column j met is the k-th of its CSC run. */
    memcpy(next, e->t_ptr, ((size_t)e->n + 1) * sizeof *next);
    for (int32_t i = 0; i < e->m; i++)
        for (int64_t p = M->row_ptr[i]; p < M->row_ptr[i + 1]; p++)
            e->t_pos[next[M->col[p]]++] = p;
    free(next);
    e->comm = s->ctx->comm;
    e->norm2 = s->norm2;
    *out = &e->base;
    if (s->X0) { /* X0 holds every rank's rows */
        memcpy(e->X, s->X0 + (size_t)s->row_lo * e->r, (size_t)e->m * e->r * sizeof *e->X);
        memcpy(e->Y, s->Y0, (size_t)e->n * e->r * sizeof *e->Y);
    } else {
        const double p2 = random_draw(e, s);
        if (p2 < 0.0) {
            *out = NULL;
            cpu_destroy(&e->base);
            return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
        }
        if (e->comm) { /* scaled by begin(), once the driver summed p2 */
            e->base.p2 = p2;
            e->base.begin = cpu_begin;
            return MF_OK;
        }
        scale_start(e, p2);
    }
    /* This rank's share of |R|^2: in a group the driver sums it once every rank has an
     * engine, so that a rank failing to make one never leaves the others in a sum. */
    e->base.res2 = residual(e, 0);
    return MF_OK;
}
