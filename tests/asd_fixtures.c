/* The planted matrices of the ASD suites (asd_fixtures.h). */
#include <math.h>
#include <stdlib.h>

#include "asd_fixtures.h"
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
