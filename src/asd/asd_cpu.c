/* The CPU engine of ASD and Scaled ASD (OpenMP), the reference of the GPU one, laid out as
 * it is. The engine solves its lines of both sides, rows [lo[0], hi[0]) of X by Ω's rows and
 * rows [lo[1], hi[1]) of Y by Ω's columns (alone: all of them), and holds all of X and Y.
 * Each half step computes the side's residual R = P(X Y^T - M) afresh on its lines' entries
 * (rows in CSR order, columns by ascending row), then the gradient, direction and step line
 * by line; the Gram matrices come from the whole factor; and in a group the ranks gather the
 * side's rows after its step (mf_comm_ops.allgatherv). So no line's arithmetic depends on
 * the ranks: a group fits one context's factors bit for bit, but for the scalar sums (the
 * steps' <D, G> and denominators, |R|^2), which the ranks add in another order, in double
 * (a float step length almost never shows it). Norms and inner products accumulate in
 * double. (Summing float partial gradients over the ranks instead had left a group of 2 on
 * a 200,000^2, 40M-entry case 0.47% off one context after 30 iterations: ASD there
 * magnifies rounding.)
 *
 * In the reduced phase (mf_asd_setup.precision) the passes over the entries read the other
 * side's factor from a copy of it rounded as the CUDA engine's 16-bit copy is
 * (core/round16.h), made each time that factor moves; the Gram matrices read the float
 * factor, as on the GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "core/ctx.h"
#include "core/random.h"
#include "core/round16.h"
#include "sddmm/sddmm.h"

/* One side's lines as the engine solves them: lines + 1 offsets into idx (the other side's
 * index of each entry) and val (NULL: every value 1), and the residual per entry. */
typedef struct lines_of {
    int32_t lines;
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    float *R;
} lines_of;

typedef struct cpu_engine {
    mf_asd_engine base;
    mf_ctx *ctx;
    int r, scaled, threads;
    int32_t m, n;             /* all rows of X, all of Y                            */
    int32_t lo[2], hi[2];     /* this rank's lines of X (0) and Y (1)               */
    const int64_t *bounds[2]; /* every rank's (NULL alone), for the gathers      */
    lines_of by[2];           /* by rows, by columns                                */
    float *col_val;           /* the columns' values in their order (by[1].val)     */
    int64_t *col_ptr;         /* by[1]'s offsets: the transpose's from lo[1]        */
    float *X, *Y;             /* m x r, n x r                                       */
    float *G, *D;             /* the most lines of a side x r: gradient, direction  */
    double *A;                /* r x r: the Gram matrix, then its Cholesky factor   */
    double *part;             /* a deterministic sum's blocks (sum_blocks)          */
    mf_comm *comm;            /* the context's group, or NULL                       */
    mf_status failed;         /* a collective step that failed                      */
    double norm2;             /* |P(M)|^2, for the random start's scale             */
    /* The reduced phase: MF_PRECISION_BF16 or FP16 (0: over, or never), and X's and Y's
     * entries rounded to it (all lines, as X and Y), which the passes read. */
    int precision;
    float *X16, *Y16;
    /* In a group, this iteration: the ranks' reasons to stop (their sums), and whether
     * any is nonzero, when neither factor moves. */
    double why[MF_ASD_WHY_COUNT];
    int stopping;
} cpu_engine;

/* In a group: buf (count floats or doubles) becomes its sum over the ranks. The first
 * failure is kept for iterate() to return, and the rank goes on taking part in every
 * collective step of the iteration, so that the others never wait for it (the iteration's
 * last sum tells them). */
static void group_sum(cpu_engine *e, void *buf, size_t count, int is_double)
{
    if (!e->comm)
        return;
    mf_status st = e->comm->ops->sum_buffer(e->comm, e->ctx, buf, count, is_double);
    if (e->failed == MF_OK)
        e->failed = st;
}

/* In a group: every rank's lines of side s's factor to every rank. */
static void gather(cpu_engine *e, int s)
{
    if (!e->comm)
        return;
    mf_status st = e->comm->ops->allgatherv(e->comm, e->ctx, s == 0 ? e->X : e->Y, e->bounds[s],
                                            (size_t)e->r * sizeof(float), NULL);
    if (e->failed == MF_OK)
        e->failed = st;
}

static float dot(const float *a, const float *b, int r)
{
    float s = 0.0f;
    for (int t = 0; t < r; t++)
        s += a[t] * b[t];
    return s;
}

/* Side s's factor from its first line (this rank's: own), and the other side's, whole. */
static float *own(const cpu_engine *e, int s)
{
    return (s == 0 ? e->X : e->Y) + (size_t)e->lo[s] * e->r;
}
static const float *other(const cpu_engine *e, int s)
{
    return s == 0 ? e->Y : e->X;
}
/* The other side's factor as the passes over side s's entries read it: its rounded copy in
 * the reduced phase. */
static const float *gathered(const cpu_engine *e, int s)
{
    if (!e->precision)
        return other(e, s);
    return s == 0 ? e->Y16 : e->X16;
}

/* In the reduced phase, side s's rounded copy made anew from its factor (all lines). */
static void refresh(cpu_engine *e, int s)
{
    if (!e->precision)
        return;
    const float *F = s == 0 ? e->X : e->Y;
    float *out = s == 0 ? e->X16 : e->Y16;
    const int64_t n = (int64_t)(s == 0 ? e->m : e->n) * e->r;
    const int bf16 = e->precision == MF_PRECISION_BF16;
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int64_t p = 0; p < n; p++)
        out[p] = bf16 ? mf_round_bf16(F[p]) : mf_round_fp16(F[p]);
}

/* Lines per block of the engine's sums: each block is summed by one thread in line order and
 * the blocks are added in order, so a sum's bits depend neither on the count of threads nor
 * on their timing (OpenMP's reduction adds the threads' partials in the order they finish,
 * and a dynamic schedule hands them other lines each time: the step lengths and |R|^2
 * could differ in their last bits from run to run). */
#define ASD_SUM_LINES 256

static int32_t sum_blocks(int32_t lines)
{
    return (lines + ASD_SUM_LINES - 1) / ASD_SUM_LINES;
}

/* The end of block b of `lines` (in 64 bits: the last block may end near INT32_MAX). */
static int32_t block_end(int32_t b, int32_t lines)
{
    const int64_t end = ((int64_t)b + 1) * ASD_SUM_LINES;
    return end < lines ? (int32_t)end : lines;
}

/* The blocks' partial sums of `lines`, added in order. */
static double blocks_total(const double *part, int32_t lines)
{
    double t = 0.0;
    for (int32_t b = 0; b < sum_blocks(lines); b++)
        t += part[b];
    return t;
}

/* Over side s's entries, in the blocks of sum_blocks: the sum of d^2, d = x . y (the
 * product a row's x times a column's y, the same float on either side; O the other side's
 * factor) less the entry's value where `residual` (R = P(X Y^T - M), kept per entry), else
 * the product alone. */
static double entry_squares(cpu_engine *e, int s, const float *O, int residual)
{
    const lines_of *L = &e->by[s];
    const float *F = own(e, s);
    const int r = e->r;
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->threads)
    for (int32_t b = 0; b < sum_blocks(L->lines); b++) {
        double sum = 0.0;
        const int32_t end = block_end(b, L->lines);
        for (int32_t i = b * ASD_SUM_LINES; i < end; i++)
            for (int64_t p = L->ptr[i]; p < L->ptr[i + 1]; p++) {
                const float *f = F + (int64_t)i * r, *o = O + (int64_t)L->idx[p] * r;
                float d = s == 0 ? dot(f, o, r) : dot(o, f, r);
                if (residual) {
                    d -= L->val ? L->val[p] : 1.0f;
                    L->R[p] = d;
                }
                sum += (double)d * d;
            }
        e->part[b] = sum;
    }
    return blocks_total(e->part, L->lines);
}

/* R = P(X Y^T - M) on side s's entries; returns |R|^2 over them. */
static double residual(cpu_engine *e, int s)
{
    return entry_squares(e, s, gathered(e, s), 1);
}

/* G = R F_other on side s's lines (line by line, its entries in order). */
static void gradient(cpu_engine *e, int s)
{
    const lines_of *L = &e->by[s];
    const float *O = gathered(e, s);
    const int r = e->r;
#pragma omp parallel for schedule(dynamic, 64) num_threads(e->threads)
    for (int32_t i = 0; i < L->lines; i++) {
        float *g = e->G + (int64_t)i * r;
        memset(g, 0, (size_t)r * sizeof *g);
        for (int64_t p = L->ptr[i]; p < L->ptr[i + 1]; p++) {
            const float *o = O + (int64_t)L->idx[p] * r;
            for (int u = 0; u < r; u++)
                g[u] += L->R[p] * o[u];
        }
    }
}

/* The r x r Gram matrix F^T F of a whole factor, in double. */
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

/* One half step on X (side 0) or Y (side 1), its residual fresh; returns 1 when a scaled
 * step fell back to the plain direction. */
static int half_step(cpu_engine *e, int s)
{
    const int r = e->r;
    const lines_of *L = &e->by[s];
    const float *O = gathered(e, s);
    if (s == 1) /* X moved: the columns' residual anew (the rows' is the last iteration's) */
        residual(e, 1);
    gradient(e, s);
    const float *dir = e->G;
    int fell_back = 0;
    if (e->scaled) {
        gram(e, other(e, s), s == 0 ? e->n : e->m, e->A);
        if (cholesky(e->A, r)) {
            precondition(e, L->lines, e->A);
            dir = e->D;
        } else
            fell_back = 1; /* singular (a rank-deficient factor): the plain direction */
    }
    /* The step's length: <dir, G> / |P(dir other^T)|^2 over the side's lines. */
    const int32_t blocks = sum_blocks(L->lines);
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int32_t b = 0; b < blocks; b++) {
        double sum = 0.0;
        const int64_t end = (int64_t)block_end(b, L->lines) * r;
        for (int64_t i = (int64_t)b * ASD_SUM_LINES * r; i < end; i++)
            sum += (double)dir[i] * e->G[i];
        e->part[b] = sum;
    }
    double num = blocks_total(e->part, L->lines);
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->threads)
    for (int32_t b = 0; b < blocks; b++) {
        double sum = 0.0;
        const int32_t end = block_end(b, L->lines);
        for (int32_t i = b * ASD_SUM_LINES; i < end; i++)
            for (int64_t p = L->ptr[i]; p < L->ptr[i + 1]; p++) {
                const float *d = dir + (int64_t)i * r, *o = O + (int64_t)L->idx[p] * r;
                const float v = s == 0 ? dot(d, o, r) : dot(o, d, r);
                sum += (double)v * v;
            }
        e->part[b] = sum;
    }
    double den = blocks_total(e->part, L->lines);
    /* Over the ranks; X's sums carry the ranks' reasons to stop (asd_internal.h), summed
     * before either factor moves. */
    double sums[2 + MF_ASD_WHY_COUNT] = {num, den};
    int count = 2;
    if (s == 0) {
        memcpy(sums + 2, e->why, sizeof e->why);
        count += MF_ASD_WHY_COUNT;
    }
    group_sum(e, sums, (size_t)count, 1);
    num = sums[0], den = sums[1];
    if (s == 0) {
        memcpy(e->why, sums + 2, sizeof e->why);
        for (int k = 0; k < MF_ASD_WHY_COUNT; k++)
            e->stopping |= e->why[k] > 0.0;
    }
    /* a zero gradient (nothing to move) or the ranks stopping: no step */
    if (!e->stopping && num > 0.0 && den > 0.0 && isfinite(num / den)) {
        const float t = (float)(num / den);
        float *F = own(e, s);
#pragma omp parallel for schedule(static) num_threads(e->threads)
        for (int64_t i = 0; i < (int64_t)L->lines * r; i++)
            F[i] -= t * dir[i];
    }
    gather(e, s);
    refresh(e, s);
    return fell_back;
}

/* The random start (asd_internal.h): uniform from the two streams, all of X and Y as
 * alone; returns |P(X Y^T)|^2 over this rank's rows. */
static double random_draw(cpu_engine *e)
{
    mf_random_uniform_host(e->X, (int64_t)e->m * e->r, -1.0f, 1.0f, e->ctx->seed, MF_ASD_X_STREAM,
                           e->threads);
    mf_random_uniform_host(e->Y, (int64_t)e->n * e->r, -1.0f, 1.0f, e->ctx->seed, MF_ASD_Y_STREAM,
                           e->threads);
    return entry_squares(e, 0, e->Y, 0);
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
    refresh(e, 1);
    e->base.res2 = residual(e, 0);
    return MF_OK;
}

/* The reduced phase's end (asd_internal.h): the rows' residual anew from the float Y. */
static mf_status cpu_to_float(mf_asd_engine *base, double *res2)
{
    cpu_engine *e = (cpu_engine *)base;
    e->precision = 0;
    *res2 = residual(e, 0);
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
    /* the rows' residual for the next X step, and |R|^2 over the ranks with whether any
     * rank's collective steps failed */
    double v[2] = {residual(e, 0), e->failed != MF_OK};
    group_sum(e, v, 2, 1);
    e->why[MF_ASD_WHY_FAILURE] += v[1];
    *res2 = v[0];
    memcpy(stop_out, e->why, sizeof e->why);
    return e->failed;
}

static mf_status cpu_rmse(mf_asd_engine *base, const mf_sparse *T, double *rmse)
{
    cpu_engine *e = (cpu_engine *)base;
    /* T holds this rank's rows (asd.c), numbered from 0 */
    return mf_rmse_compute(e->ctx, (mf_sparse *)T, e->r, own(e, 0), e->r, e->Y, e->r, NULL,
                           MF_MEMORY_HOST, rmse);
}

static mf_status cpu_finish(mf_asd_engine *base, float *X, float *Y, mf_memory where)
{
    cpu_engine *e = (cpu_engine *)base;
    (void)where; /* a CPU context has host memory only */
    /* this rank's rows of X (the driver gathers them), all of Y */
    memcpy(X, own(e, 0), (size_t)(e->hi[0] - e->lo[0]) * e->r * sizeof *X);
    memcpy(Y, e->Y, (size_t)e->n * e->r * sizeof *Y);
    return MF_OK;
}

static void cpu_destroy(mf_asd_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    free(e->by[0].R);
    free(e->by[1].R);
    free(e->col_val);
    free(e->col_ptr);
    free(e->X);
    free(e->Y);
    free(e->X16);
    free(e->Y16);
    free(e->G);
    free(e->D);
    free(e->A);
    free(e->part);
    free(e);
}

/* By columns: this rank's columns of C (the rank's column block, or the whole matrix
 * alone), each with its entries by ascending row (the host transpose), their values in
 * that order. */
static int columns(cpu_engine *e, const mf_sparse *C)
{
    const int64_t *t_ptr = C->transpose.ptr;
    const int32_t lines = e->hi[1] - e->lo[1];
    e->col_ptr = malloc(((size_t)lines + 1) * sizeof *e->col_ptr);
    e->col_val = C->val ? malloc(((size_t)C->nnz + 1) * sizeof *e->col_val) : NULL;
    int64_t *next = C->val ? malloc(((size_t)C->cols + 1) * sizeof *next) : NULL;
    if (!e->col_ptr || (C->val && (!e->col_val || !next))) {
        free(next);
        return 0;
    }
    memcpy(e->col_ptr, t_ptr + e->lo[1], ((size_t)lines + 1) * sizeof *e->col_ptr);
    if (C->val) { /* the k-th entry of column j a pass over the CSR meets is its k-th */
        memcpy(next, t_ptr, ((size_t)C->cols + 1) * sizeof *next);
        for (int32_t i = 0; i < C->rows; i++)
            for (int64_t p = C->row_ptr[i]; p < C->row_ptr[i + 1]; p++)
                e->col_val[next[C->col[p]]++] = C->val[p];
        free(next);
    }
    e->by[1] = (lines_of){lines, e->col_ptr, C->transpose.idx, e->col_val, NULL};
    return 1;
}

mf_status mf_asd_cpu_engine(const mf_asd_setup *s, mf_asd_engine **out)
{
    mf_sparse *C = s->cols ? s->cols : s->M;
    MF_TRY(mf_sparse_host_transpose(C));
    cpu_engine *e = calloc(1, sizeof *e);
    if (!e)
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    e->base.iterate = cpu_iterate;
    e->base.rmse = cpu_rmse;
    e->base.finish = cpu_finish;
    e->base.destroy = cpu_destroy;
    e->base.to_float = cpu_to_float;
    e->ctx = s->ctx;
    e->r = s->r;
    e->scaled = s->scaled;
    e->threads = mf_ctx_threads(s->ctx);
    e->m = s->rows_all;
    e->n = s->M->cols;
    e->lo[0] = s->row_lo, e->hi[0] = s->row_hi, e->bounds[0] = s->row_bounds;
    e->lo[1] = s->col_lo, e->hi[1] = s->col_hi, e->bounds[1] = s->col_bounds;
    e->comm = s->ctx->comm;
    e->norm2 = s->norm2;
    const mf_sparse *M = s->M; /* this rank's rows */
    e->by[0] = (lines_of){M->rows, M->row_ptr, M->col, M->val, NULL};
    int ok = columns(e, C);
    const int32_t lines = e->by[0].lines > e->by[1].lines ? e->by[0].lines : e->by[1].lines;
    e->by[0].R = malloc(((size_t)M->nnz + 1) * sizeof *e->by[0].R);
    e->by[1].R = malloc(((size_t)C->nnz + 1) * sizeof *e->by[1].R);
    e->X = malloc(((size_t)e->m * e->r + 1) * sizeof *e->X);
    e->Y = malloc(((size_t)e->n * e->r + 1) * sizeof *e->Y);
    e->G = malloc(((size_t)lines * e->r + 1) * sizeof *e->G);
    e->D = malloc(((size_t)lines * e->r + 1) * sizeof *e->D);
    e->A = malloc((size_t)e->r * e->r * sizeof *e->A);
    e->part = malloc(((size_t)sum_blocks(lines) + 1) * sizeof *e->part);
    e->precision = s->precision;
    if (e->precision) {
        e->X16 = malloc(((size_t)e->m * e->r + 1) * sizeof *e->X16);
        e->Y16 = malloc(((size_t)e->n * e->r + 1) * sizeof *e->Y16);
        ok = ok && e->X16 && e->Y16;
    }
    if (!ok || !e->by[0].R || !e->by[1].R || !e->X || !e->Y || !e->G || !e->D || !e->A ||
        !e->part) {
        cpu_destroy(&e->base);
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    }
    *out = &e->base;
    if (s->X0) { /* all rows of X */
        memcpy(e->X, s->X0, (size_t)e->m * e->r * sizeof *e->X);
        memcpy(e->Y, s->Y0, (size_t)e->n * e->r * sizeof *e->Y);
    } else {
        const double p2 = random_draw(e);
        if (e->comm) { /* scaled by begin(), once the driver summed p2 */
            e->base.p2 = p2;
            e->base.begin = cpu_begin;
            return MF_OK;
        }
        scale_start(e, p2);
    }
    /* This rank's share of |R|^2: in a group the driver sums it once every rank has an
     * engine, so that a rank failing to make one never leaves the others in a sum. */
    refresh(e, 1);
    e->base.res2 = residual(e, 0);
    return MF_OK;
}
