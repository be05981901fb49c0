/* The planted matrices of the ASD suites (asd_fixtures.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asd_fixtures.h"
#include "ranks_fixtures.h"
#include "testutil.h"

planted make_planted(mf_ctx *ctx, int32_t m, int32_t n, int r, double fraction, const double *scale,
                     uint64_t seed)
{
    return make_planted_dist(ctx, m, n, r, fraction, scale, seed, 0);
}

/* A standard normal draw (Box-Muller) from the fixture's generator. */
static double draw(uint64_t *st, int normal)
{
    if (!normal)
        return 2 * tu_unit(st) - 1;
    double a = tu_unit(st), b = tu_unit(st);
    return sqrt(-2.0 * log(a > 0 ? a : 1e-300)) * cos(6.283185307179586 * b);
}

planted make_planted_dist(mf_ctx *ctx, int32_t m, int32_t n, int r, double fraction,
                          const double *scale, uint64_t seed, int normal)
{
    planted p = {
        m,   n, r, malloc((size_t)m * r * sizeof(float)), malloc((size_t)n * r * sizeof(float)),
        NULL};
    ck_assert(p.A && p.B);
    uint64_t st = seed;
    for (int64_t i = 0; i < (int64_t)m * r; i++)
        p.A[i] = (float)(draw(&st, normal) * (scale ? scale[i % r] : 1.0));
    for (int64_t i = 0; i < (int64_t)n * r; i++)
        p.B[i] = (float)draw(&st, normal);
    int64_t cap = (int64_t)((double)m * n * fraction * 1.2) + 64, nnz = 0;
    int32_t *row = malloc((size_t)cap * sizeof *row), *col = malloc((size_t)cap * sizeof *col);
    float *val = malloc((size_t)cap * sizeof *val);
    ck_assert(row && col && val);
    for (int32_t i = 0; i < m; i++)
        for (int32_t j = 0; j < n && nnz < cap; j++)
            if (tu_unit(&st) < fraction) {
                double d = 0;
                for (int t = 0; t < r; t++)
                    d += (double)p.A[(int64_t)i * r + t] * p.B[(int64_t)j * r + t];
                row[nnz] = i, col[nnz] = j, val[nnz] = (float)d, nnz++;
            }
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &p.M, m, n, nnz, row, col, val, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(row), free(col), free(val);
    return p;
}

void free_planted(planted *p)
{
    free(p->A), free(p->B);
    mf_sparse_destroy(p->M);
}

/* |X Y^T - A B^T|_F / |A B^T|_F over every entry, in double. */
double full_error(const planted *p, const float *X, const float *Y, int r)
{
    double num = 0, den = 0;
    for (int32_t i = 0; i < p->m; i++)
        for (int32_t j = 0; j < p->n; j++) {
            double a = 0, b = 0;
            for (int t = 0; t < r; t++)
                a += (double)X[(int64_t)i * r + t] * Y[(int64_t)j * r + t];
            for (int t = 0; t < p->r; t++)
                b += (double)p->A[(int64_t)i * p->r + t] * p->B[(int64_t)j * p->r + t];
            num += (a - b) * (a - b), den += b * b;
        }
    return sqrt(num / den);
}

int asd_stop_at_3(void *user, const mf_progress *p)
{
    int *calls = user;
    ++*calls;
    ck_assert(isfinite(p->train_rmse) && p->seconds >= 0);
    return p->iteration == 3;
}

mf_ctx *asd_rank_ctx(mf_backend backend, int i)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = backend, o.device = backend == MF_BACKEND_CUDA ? i : 0, o.seed = 42;
    o.cpu_threads = 1; /* an OpenMP reduction's order would vary from run to run */
    mf_ctx *ctx = NULL;
    return mf_ctx_create(&ctx, &o) == MF_OK ? ctx : NULL;
}

int asd_group_fit(mf_backend backend, int n, const asd_case *c, const mf_asd_opts *o, int who,
                  rk_job *jobs, planted *p)
{
    mf_ctx *ctxs[8];
    for (int i = 0; i < n; i++) {
        ctxs[i] = asd_rank_ctx(backend, i);
        if (!ctxs[i] || (i == n - 1 && mf_ctx_join_local(ctxs, n) != MF_OK)) {
            for (int j = 0; j <= i; j++)
                mf_ctx_destroy(ctxs[j]);
            return 0;
        }
    }
    for (int i = 0; i < n; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        p[i] = make_planted(ctxs[i], c->m, c->n, c->r, c->fraction, NULL, c->seed);
        jobs[i].ctx = ctxs[i];
        jobs[i].R = p[i].M;
        jobs[i].asd = 1;
        jobs[i].ao = *o;
        if (i != who)
            jobs[i].ao.progress = NULL;
        jobs[i].U = malloc((size_t)c->m * o->rank * sizeof(float));
        jobs[i].V = malloc((size_t)c->n * o->rank * sizeof(float));
    }
    rk_run_als(jobs, n);
    return 1;
}

void asd_group_free(rk_job *jobs, planted *p, int n)
{
    for (int i = 0; i < n; i++) {
        free(jobs[i].U), free(jobs[i].V);
        free_planted(&p[i]);
        mf_ctx_destroy(jobs[i].ctx);
    }
}

/* One run of asd_check_group_cancel's group: iterations at most max_it, rank `who` (-1:
 * none) cancelling after iteration 3; 0 when the group could not be made. */
static int cancel_run(mf_backend backend, int n, int max_it, int who, rk_job *jobs, planted *p,
                      int *calls)
{
    static const asd_case small = {120, 90, 3, 0.4, 11};
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    o.rank = 3, o.max_iterations = max_it, o.tolerance = 1e-30, o.stagnation_window = 0;
    o.progress = asd_stop_at_3, o.progress_user = calls;
    *calls = 0;
    return asd_group_fit(backend, n, &small, &o, who, jobs, p);
}

/* The largest relative difference of rank 0's factors in a and b. */
static double factors_diff(const rk_job *a, const rk_job *b)
{
    const double dx = tu_rel_diff(120 * 3, a->U, b->U), dy = tu_rel_diff(90 * 3, a->V, b->V);
    return dx > dy ? dx : dy;
}

int asd_check_group_cancel(mf_backend backend, int n, double tol)
{
    ck_assert(n >= 1 && n <= 8);
    rk_job three[8], cancel[8], last[8], four[8];
    planted p3[8], pc[8], pl[8], p4[8];
    int calls = 0;
    if (!cancel_run(backend, n, 3, -1, three, p3, &calls))
        return 0;
    ck_assert(cancel_run(backend, n, 4, -1, four, p4, &calls));
    ck_assert(cancel_run(backend, n, 10, n - 1, cancel, pc, &calls));
    ck_assert_int_eq(calls, 3);
    ck_assert(cancel_run(backend, n, 3, 0, last, pl, &calls));
    ck_assert_int_eq(calls, 3);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(three[i].st == MF_OK && four[i].st == MF_OK, "rank %d: %s %s", i,
                      three[i].error, four[i].error);
        ck_assert_int_eq(three[i].arep.iterations, 3);
        const rk_job *stopped[2] = {&cancel[i], &last[i]};
        for (int k = 0; k < 2; k++) {
            const rk_job *j = stopped[k];
            ck_assert_msg(j->st == MF_ERR_CANCELLED, "rank %d of %d (%s): %d %s", i, n,
                          k ? "cancel at the last iteration" : "cancel", (int)j->st, j->error);
            ck_assert_int_eq(j->arep.iterations, 3);
            ck_assert_int_eq(j->arep.stopped, MF_ASD_STOP_CANCELLED);
            /* the rank that cancelled says so; the others name it */
            ck_assert_msg(strstr(j->error, "cancelled") || strstr(j->error, "rank"), "%s",
                          j->error);
            const rk_job *first = k ? &last[0] : &cancel[0];
            ck_assert(j->arep.relative_residual == first->arep.relative_residual);
            /* the iteration that carried the cancel moved nothing */
            if (tol == 0.0) {
                ck_assert(!memcmp(j->U, three[i].U, 120 * 3 * sizeof(float)));
                ck_assert(!memcmp(j->V, three[i].V, 90 * 3 * sizeof(float)));
                ck_assert(j->arep.relative_residual == three[i].arep.relative_residual);
            } else
                ck_assert_msg(factors_diff(j, &three[i]) <= tol, "rank %d: %g", i,
                              factors_diff(j, &three[i]));
        }
    }
    /* a fourth iteration does move them, by far more than tol */
    const double moved = factors_diff(&four[0], &three[0]);
    printf("asd group of %d: cancelled with 3 iterations' factors; a fourth moves them by %.2e\n",
           n, moved);
    ck_assert_msg(moved > 100 * tol && moved > 1e-6, "a fourth iteration moved %g", moved);
    asd_group_free(three, p3, n), asd_group_free(four, p4, n);
    asd_group_free(cancel, pc, n), asd_group_free(last, pl, n);
    return 1;
}

int asd_check_group_matches_alone(mf_backend backend, const int *sizes, int count, double tol,
                                  mf_precision precision)
{
    const asd_case c = {900, 700, 8, 0.06, 21};
    return asd_check_group_matches_alone_on(backend, sizes, count, tol, precision, &c, 30);
}

int asd_check_group_matches_alone_on(mf_backend backend, const int *sizes, int count, double tol,
                                     mf_precision precision, const asd_case *cp, int iterations)
{
    static const char *const names[] = {"scaled", "plain", "scaled, spectral start"};
    const asd_case c = *cp;
    const size_t bx = (size_t)c.m * c.r * sizeof(float), by = (size_t)c.n * c.r * sizeof(float);
    for (int v = 0; v < 3; v++) {
        mf_asd_opts o;
        mf_asd_opts_init(&o);
        o.rank = c.r, o.max_iterations = iterations, o.tolerance = 1e-30, o.stagnation_window = 0;
        o.variant = v == 1 ? MF_ASD_PLAIN : MF_ASD_SCALED;
        o.init = v == 2 ? MF_ASD_INIT_SPECTRAL : MF_ASD_INIT_RANDOM;
        o.precision = precision;
        o.stagnation_rate = 0.2; /* the reduced phase's own window (15) ends it early */
        mf_ctx *one = asd_rank_ctx(backend, 0);
        ck_assert(one != NULL);
        planted p1 = make_planted(one, c.m, c.n, c.r, c.fraction, NULL, c.seed);
        float *X1 = malloc(bx), *Y1 = malloc(by);
        mf_asd_report r1 = {.struct_size = sizeof r1};
        ck_assert_msg(mf_asd_run(one, p1.M, &o, X1, Y1, MF_MEMORY_HOST, &r1) == MF_OK, "%s",
                      mf_ctx_last_error(one));
        /* a reduced run switches to float within the 30 iterations, so the groups are
         * checked across the switch */
        ck_assert(precision == MF_PRECISION_FP32
                      ? r1.reduced_iterations == 0
                      : r1.reduced_iterations > 0 && r1.reduced_iterations < iterations);
        int made = 1;
        for (int k = 0; k < count && made; k++) {
            const int n = sizes[k];
            rk_job jobs[8];
            planted p[8];
            ck_assert(n >= 1 && n <= 8);
            made = asd_group_fit(backend, n, &c, &o, -1, jobs, p);
            for (int i = 0; made && i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                ck_assert(!memcmp(jobs[i].U, jobs[0].U, bx) && !memcmp(jobs[i].V, jobs[0].V, by));
                ck_assert_int_eq(jobs[i].arep.iterations, iterations);
                ck_assert_int_eq(jobs[i].arep.reduced_iterations, jobs[0].arep.reduced_iterations);
            }
            if (!made)
                break;
            const double dx = tu_rel_diff((int64_t)c.m * c.r, jobs[0].U, X1),
                         dy = tu_rel_diff((int64_t)c.n * c.r, jobs[0].V, Y1),
                         dres = fabs(jobs[0].arep.relative_residual / r1.relative_residual - 1);
            const int bits = !memcmp(jobs[0].U, X1, bx) && !memcmp(jobs[0].V, Y1, by);
            const int dred = abs(jobs[0].arep.reduced_iterations - r1.reduced_iterations);
            printf("ASD %s, precision %d, over %d rank(s): residual %.9f (alone %.9f), %d reduced "
                   "iterations (alone %d), factors within %.1e, %.1e: %s\n",
                   names[v], (int)precision, n, jobs[0].arep.relative_residual,
                   r1.relative_residual, jobs[0].arep.reduced_iterations, r1.reduced_iterations, dx,
                   dy, bits ? "bit for bit" : "NOT bit for bit");
            ck_assert_msg(dred <= (tol == 0.0 ? 0 : 1), "reduced iterations %d, alone %d",
                          jobs[0].arep.reduced_iterations, r1.reduced_iterations);
            if (tol == 0.0)
                ck_assert_msg(bits, "%s over %d ranks: X %g Y %g", names[v], n, dx, dy);
            /* the residual is a double sum, in another order over the ranks */
            ck_assert_msg(dx <= tol && dy <= tol && dres <= fmax(tol, 1e-12),
                          "X %g Y %g residual %g", dx, dy, dres);
            asd_group_free(jobs, p, n);
        }
        free(X1), free(Y1);
        free_planted(&p1);
        mf_ctx_destroy(one);
        if (!made)
            return 0;
    }
    return 1;
}
