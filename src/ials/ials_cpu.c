/* The CPU engine of implicit-feedback ALS: OpenMP over the rows of one side, in double, so
 * that it is the reference the CUDA engine is tested against. A half-step forms G = F^T F of
 * the other side once (in chunks of rows, so that a group's ranks share it: ials.c); each
 * row then solves
 *     (G + lambda I + sum_i w_i f_i f_i^T) x = sum_i (1 + w_i) f_i
 * over its stored items i (w = c - 1), exactly by Cholesky or by CG steps that apply the
 * system as G x + lambda x + sum w (f . x) f without forming it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cholesky.h"
#include "core/ctx.h"
#include "cuda/cuda_backend.h"
#include "ials/ials_internal.h"

float mf_ials_round_half(float x)
{
    if (!isfinite(x))
        return x;
    const float a = fabsf(x);
    if (a >= 65520.0f) /* past the largest half, 65504, by more than half a step */
        return copysignf(INFINITY, x);
    float q; /* the spacing of halves near a */
    if (a < 6.103515625e-05f) {
        q = 5.9604644775390625e-08f; /* subnormal halves: multiples of 2^-24 */
    } else {
        int e;
        frexpf(a, &e); /* a = m 2^e, m in [0.5, 1): 11 significant bits */
        q = ldexpf(1.0f, e - 11);
    }
    return copysignf(nearbyintf(a / q) * q, x); /* the default rounding: to nearest even */
}

typedef struct cpu_engine {
    mf_ials_engine base;
    mf_ctx *ctx;
    const char *fn;
    mf_sparse *R;     /* its shape */
    mf_sparse *by[2]; /* what the users' and the items' half steps read (mf_ials_part) */
    int k;
    float lambda, alpha, epsilon;
    int log_confidence, cg_steps;
    int fp16;             /* stored values rounded to half (mf_ials_opts.fp16) */
    float *U, *V;         /* working copies, leading dimension k */
    double *G;            /* k x k: the other side's Gram matrix */
    double *part;         /* the chunks' partial Grams: lower triangles, k (k + 1) / 2 each */
    int64_t chunks[2];    /* the chunks of U's (0) and V's (1) Gram */
    int32_t lo[2], hi[2]; /* the rows half_step solves (mf_ials_setup) */
} cpu_engine;

/* A chunk's rows; and the most partial doubles (8 MiB), which bounds the chunks at large k. */
enum { GRAM_CHUNK_ROWS = 64, GRAM_PARTS_MAX = 1 << 20 };

static size_t tri(int k)
{
    return (size_t)k * ((size_t)k + 1) / 2;
}

/* The chunks of a Gram over `rows` rows: from the rows and k alone, never the threads or
 * the group, so that every run of one problem adds the same partials in the same order. */
static int64_t gram_chunks(int32_t rows, int k)
{
    const int64_t most = GRAM_PARTS_MAX / (int64_t)tri(k);
    const int64_t n = ((int64_t)rows + GRAM_CHUNK_ROWS - 1) / GRAM_CHUNK_ROWS;
    return n < 1 ? 1 : n < most ? n : most > 1 ? most : 1;
}

/* Side `side` is solved against the other side's factors. */
static const float *other_factors(const cpu_engine *e, mf_ials_side side)
{
    return side == MF_IALS_USERS ? e->V : e->U;
}

static void gram_parts(mf_ials_engine *base, mf_ials_side side, void **parts, size_t *row_bytes,
                       int64_t *chunks)
{
    cpu_engine *e = (cpu_engine *)base;
    *parts = e->part;
    *row_bytes = tri(e->k) * sizeof *e->part;
    *chunks = e->chunks[1 - side];
}

/* The partial Grams of chunks [first, last) of the other side's rows, in double: each
 * chunk's rows added in order by one thread. */
static mf_status gram(mf_ials_engine *base, mf_ials_side side, int64_t first, int64_t last)
{
    cpu_engine *e = (cpu_engine *)base;
    const int k = e->k;
    const size_t t = tri(k);
    const int32_t rows = side == MF_IALS_USERS ? e->R->cols : e->R->rows;
    const float *F = other_factors(e, side);
    const int64_t chunks = e->chunks[1 - side];
#pragma omp parallel for schedule(dynamic, 1) num_threads(mf_ctx_threads(e->ctx))
    for (int64_t ch = first; ch < last; ch++) {
        double *g = e->part + (size_t)ch * t;
        memset(g, 0, t * sizeof *g);
        const int64_t r0 = rows * ch / chunks, r1 = rows * (ch + 1) / chunks;
        for (int64_t r = r0; r < r1; r++) {
            const float *f = F + r * k;
            double *ga = g;
            for (int a = 0; a < k; a++) {
                const double fa = f[a];
                for (int c = 0; c <= a; c++)
                    ga[c] += fa * f[c];
                ga += a + 1;
            }
        }
    }
    return MF_OK;
}

/* G from the partials of every chunk, added in chunk order. */
static void gram_reduce(cpu_engine *e, mf_ials_side side)
{
    const int k = e->k;
    const size_t t = tri(k);
    const int64_t chunks = e->chunks[1 - side];
    size_t i = 0;
    for (int a = 0; a < k; a++)
        for (int c = 0; c <= a; c++, i++) {
            double s = 0.0;
            for (int64_t ch = 0; ch < chunks; ch++)
                s += e->part[(size_t)ch * t + i];
            e->G[(size_t)a * k + c] = e->G[(size_t)c * k + a] = s;
        }
}

/* y = (G + lambda I) x + sum w (f . x) f over the row's items. */
static void apply(const cpu_engine *e, const int64_t *ptr, const int32_t *idx, const float *val,
                  const float *F, int32_t r, const double *x, double *y)
{
    const int k = e->k;
    for (int a = 0; a < k; a++) {
        double s = e->lambda * x[a];
        const double *g = e->G + (size_t)a * k;
        for (int c = 0; c < k; c++)
            s += g[c] * x[c];
        y[a] = s;
    }
    for (int64_t p = ptr[r]; p < ptr[r + 1]; p++) {
        const float *f = F + (int64_t)idx[p] * k;
        const double w =
            mf_ials_weight(val ? val[p] : 1.0f, e->alpha, e->epsilon, e->log_confidence);
        double d = 0.0;
        for (int a = 0; a < k; a++)
            d += f[a] * x[a];
        d *= w;
        for (int a = 0; a < k; a++)
            y[a] += d * f[a];
    }
}

/* b = sum (1 + w) f over the row's items. */
static void rhs(const cpu_engine *e, const int64_t *ptr, const int32_t *idx, const float *val,
                const float *F, int32_t r, double *b)
{
    const int k = e->k;
    memset(b, 0, (size_t)k * sizeof *b);
    for (int64_t p = ptr[r]; p < ptr[r + 1]; p++) {
        const float *f = F + (int64_t)idx[p] * k;
        const double c =
            1.0 + mf_ials_weight(val ? val[p] : 1.0f, e->alpha, e->epsilon, e->log_confidence);
        for (int a = 0; a < k; a++)
            b[a] += c * f[a];
    }
}

/* The exact row: A x = b by Cholesky (A in w, k x k). Returns the failed pivot or -1. */
static int solve_exact(const cpu_engine *e, const int64_t *ptr, const int32_t *idx,
                       const float *val, const float *F, int32_t r, double *A, double *b)
{
    const int k = e->k;
    for (int a = 0; a < k; a++)
        for (int c = 0; c <= a; c++)
            A[(size_t)a * k + c] = e->G[(size_t)a * k + c] + (a == c ? e->lambda : 0.0);
    for (int64_t p = ptr[r]; p < ptr[r + 1]; p++) {
        const float *f = F + (int64_t)idx[p] * k;
        const double w =
            mf_ials_weight(val ? val[p] : 1.0f, e->alpha, e->epsilon, e->log_confidence);
        for (int a = 0; a < k; a++) {
            const double wf = w * f[a];
            for (int c = 0; c <= a; c++)
                A[(size_t)a * k + c] += wf * f[c];
        }
    }
    rhs(e, ptr, idx, val, F, r, b);
    return mf_cholesky_solve(k, A, b);
}

/* cg_steps CG steps from x (the row's current factors), implicit's iteration. Returns the
 * step at which p^T A p was not positive, or -1. w holds 4 k doubles. */
static int solve_cg(const cpu_engine *e, const int64_t *ptr, const int32_t *idx, const float *val,
                    const float *F, int32_t r, double *x, double *w)
{
    const int k = e->k;
    double *res = w, *p = w + k, *Ap = w + 2 * k, *b = w + 3 * k;
    rhs(e, ptr, idx, val, F, r, b);
    apply(e, ptr, idx, val, F, r, x, Ap);
    double rs = 0.0;
    for (int a = 0; a < k; a++) {
        res[a] = b[a] - Ap[a];
        p[a] = res[a];
        rs += res[a] * res[a];
    }
    for (int step = 0; step < e->cg_steps; step++) {
        if (rs < 1e-20)
            break;
        apply(e, ptr, idx, val, F, r, p, Ap);
        double pAp = 0.0;
        for (int a = 0; a < k; a++)
            pAp += p[a] * Ap[a];
        if (!(pAp > 0.0) || !isfinite(pAp))
            return step;
        const double step_len = rs / pAp;
        double rs_new = 0.0;
        for (int a = 0; a < k; a++) {
            x[a] += step_len * p[a];
            res[a] -= step_len * Ap[a];
            rs_new += res[a] * res[a];
        }
        for (int a = 0; a < k; a++)
            p[a] = res[a] + rs_new / rs * p[a];
        rs = rs_new;
        if (e->fp16) /* the CUDA engine stores x in half after every step */
            for (int a = 0; a < k; a++)
                x[a] = mf_ials_round_half((float)x[a]);
    }
    return -1;
}

static mf_status solve(mf_ials_engine *base, mf_ials_side side)
{
    cpu_engine *e = (cpu_engine *)base;
    mf_sparse *R = e->by[side];
    const int k = e->k;
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    float *X;
    const float *F = other_factors(e, side);
    if (side == MF_IALS_USERS) {
        ptr = R->row_ptr, idx = R->col, val = R->val, X = e->U;
    } else {
        MF_TRY(mf_sparse_host_transpose(R));
        ptr = R->transpose.ptr, idx = R->transpose.idx, val = R->transpose.val, X = e->V;
    }
    gram_reduce(e, side);
    const int32_t lo = e->lo[side], hi = e->hi[side];
    int32_t failed_row = -1;
    int failed_at = -1, out_of_memory = 0;
#pragma omp parallel num_threads(mf_ctx_threads(e->ctx))
    {
        double *A = malloc(((size_t)k * k + 5 * (size_t)k) * sizeof *A);
        if (!A) {
#pragma omp atomic write
            out_of_memory = 1;
        }
#pragma omp for schedule(dynamic, 32)
        for (int32_t r = lo; r < hi; r++) {
            float *xf = X + (int64_t)r * k;
            if (!A || ptr[r] == ptr[r + 1]) {
                memset(xf, 0, (size_t)k * sizeof *xf);
                continue;
            }
            double *x = A + (size_t)k * k, *work = x + k;
            int bad;
            if (e->cg_steps > 0) {
                for (int a = 0; a < k; a++)
                    x[a] = xf[a];
                bad = solve_cg(e, ptr, idx, val, F, r, x, work);
            } else {
                bad = solve_exact(e, ptr, idx, val, F, r, A, x);
            }
            if (bad >= 0) {
#pragma omp critical(mf_ials_failed)
                if (failed_row < 0 || r < failed_row)
                    failed_row = r, failed_at = bad;
                continue;
            }
            for (int a = 0; a < k; a++)
                xf[a] = e->fp16 ? mf_ials_round_half((float)x[a]) : (float)x[a];
        }
        free(A);
    }
    if (out_of_memory)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    if (failed_row >= 0)
        return mf_fail(e->ctx, MF_ERR_NUMERIC,
                       "%s: the system of %s %d is not positive definite (%s %d); "
                       "lambda > 0 keeps every system positive definite",
                       e->fn, side == MF_IALS_USERS ? "user" : "item", failed_row,
                       e->cg_steps > 0 ? "CG step" : "pivot", failed_at);
    return MF_OK;
}

/* A breakdown came out at once, from solve. */
static mf_status check(mf_ials_engine *base, mf_ials_side *broke)
{
    (void)base;
    *broke = MF_IALS_USERS;
    return MF_OK;
}

/* sum_u x_u^T G_V x_u + sum over stored (c (1 - s)^2 - s^2) + lambda (|U|^2 + |V|^2),
 * s = x_u . v_i: the objective over all pairs, with the unstored pairs' sum of s^2 taken
 * from G_V. Here each user's term of this engine's users and the items' penalty. */
static mf_status loss_terms(mf_ials_engine *base, double *row, double *items)
{
    cpu_engine *e = (cpu_engine *)base;
    const mf_sparse *R = e->by[MF_IALS_USERS];
    const int k = e->k;
    const int32_t lo = e->lo[MF_IALS_USERS], hi = e->hi[MF_IALS_USERS];
    MF_TRY(gram(base, MF_IALS_USERS, 0, e->chunks[1]));
    gram_reduce(e, MF_IALS_USERS);
#pragma omp parallel for schedule(dynamic, 64) num_threads(mf_ctx_threads(e->ctx))
    for (int32_t u = lo; u < hi; u++) {
        const float *x = e->U + (int64_t)u * k;
        double s = 0.0, reg = 0.0;
        for (int a = 0; a < k; a++) {
            double ga = 0.0;
            for (int c = 0; c < k; c++)
                ga += e->G[(size_t)a * k + c] * x[c];
            s += x[a] * ga;
            reg += (double)x[a] * x[a];
        }
        for (int64_t p = R->row_ptr[u]; p < R->row_ptr[u + 1]; p++) {
            const float *v = e->V + (int64_t)R->col[p] * k;
            double d = 0.0;
            for (int a = 0; a < k; a++)
                d += (double)x[a] * v[a];
            const double c = 1.0 + mf_ials_weight(R->val ? R->val[p] : 1.0f, e->alpha, e->epsilon,
                                                  e->log_confidence);
            s += c * (1.0 - d) * (1.0 - d) - d * d;
        }
        row[u - lo] = s + e->lambda * reg;
    }
    double vreg = 0.0;
    for (int64_t p = 0; p < (int64_t)e->R->cols * k; p++)
        vreg += (double)e->V[p] * e->V[p];
    *items = e->lambda * vreg;
    return MF_OK;
}

/* Each block of LOSS_BLOCK users summed alone, the blocks added in order: the same bits for
 * any count of threads or ranks (a reduction would add the threads' sums in the order they
 * finish, and a converged fit's loss could then seem to go up). */
static double loss_total(const mf_ials_engine *base, const double *row, double items)
{
    const cpu_engine *e = (const cpu_engine *)base;
    enum { LOSS_BLOCK = 64 };
    const int32_t rows = e->R->rows;
    double total = 0.0;
    for (int32_t b = 0; b < rows; b += LOSS_BLOCK) {
        double block = 0.0;
        for (int32_t u = b; u < rows && u < b + LOSS_BLOCK; u++)
            block += row[u];
        total += block;
    }
    return (total + items) / ((double)rows * (double)e->R->cols);
}

/* Host or device memory: the engine also serves a CUDA context's fold-in past the device's
 * exact solver. */
static mf_status deliver(mf_ctx *ctx, float *dst, const float *src, size_t n, mf_memory where)
{
    if (!dst || n == 0)
        return MF_OK;
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_copy(ctx, dst, src, n * sizeof *dst);
    memcpy(dst, src, n * sizeof *dst);
    return MF_OK;
}

static mf_status finish(mf_ials_engine *base, float *U, float *V, mf_memory where)
{
    cpu_engine *e = (cpu_engine *)base;
    MF_TRY(deliver(e->ctx, U, e->U, (size_t)e->R->rows * e->k, where));
    return deliver(e->ctx, V, e->V, (size_t)e->R->cols * e->k, where);
}

static void shared(mf_ials_engine *base, mf_ials_side side, void **factors, size_t *row_bytes)
{
    cpu_engine *e = (cpu_engine *)base;
    *factors = side == MF_IALS_USERS ? e->U : e->V;
    *row_bytes = (size_t)e->k * sizeof(float);
}

static void destroy(mf_ials_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    free(e->U);
    free(e->V);
    free(e->G);
    free(e->part);
    free(e);
}

mf_status mf_ials_cpu_engine(const mf_ials_setup *s, mf_ials_engine **out)
{
    cpu_engine *e = calloc(1, sizeof *e);
    if (!e)
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", s->fn);
    e->base = (mf_ials_engine){gram_parts, gram,   solve,  check,  loss_terms,
                               loss_total, finish, shared, destroy};
    for (int w = 0; w < 2; w++)
        e->lo[w] = s->lo[w], e->hi[w] = s->hi[w];
    e->ctx = s->ctx, e->fn = s->fn, e->R = s->R, e->k = s->k;
    for (int w = 0; w < 2; w++)
        e->by[w] = mf_ials_part(s, w);
    e->lambda = s->lambda, e->alpha = s->alpha, e->epsilon = s->epsilon;
    e->log_confidence = s->log_confidence, e->cg_steps = s->cg_steps;
    const size_t nu = (size_t)s->R->rows * s->k, nv = (size_t)s->R->cols * s->k;
    e->U = calloc(nu + 1, sizeof *e->U);
    e->V = malloc((nv + 1) * sizeof *e->V);
    e->G = malloc((size_t)s->k * s->k * sizeof *e->G);
    for (int w = 0; w < 2; w++)
        e->chunks[w] = gram_chunks(w == 0 ? s->R->rows : s->R->cols, s->k);
    const int64_t most = e->chunks[0] > e->chunks[1] ? e->chunks[0] : e->chunks[1];
    e->part = malloc((size_t)most * tri(s->k) * sizeof *e->part);
    if (!e->U || !e->V || !e->G || !e->part) {
        destroy(&e->base);
        return mf_fail(s->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", s->fn);
    }
    if (s->U0)
        memcpy(e->U, s->U0, nu * sizeof *e->U);
    memcpy(e->V, s->V0, nv * sizeof *e->V);
    e->fp16 = s->fp16;
    for (size_t i = 0; e->fp16 && i < nu; i++)
        e->U[i] = mf_ials_round_half(e->U[i]);
    for (size_t i = 0; e->fp16 && i < nv; i++)
        e->V[i] = mf_ials_round_half(e->V[i]);
    *out = &e->base;
    return MF_OK;
}
