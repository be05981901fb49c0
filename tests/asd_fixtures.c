/* The planted matrices of the ASD suites (asd_fixtures.h). */
#include <math.h>
#include <stdlib.h>

#include "asd_fixtures.h"
#include "testutil.h"

planted make_planted(mf_ctx *ctx, int32_t m, int32_t n, int r, double fraction, const double *scale,
                     uint64_t seed)
{
    planted p = {
        m,   n, r, malloc((size_t)m * r * sizeof(float)), malloc((size_t)n * r * sizeof(float)),
        NULL};
    ck_assert(p.A && p.B);
    uint64_t st = seed;
    for (int64_t i = 0; i < (int64_t)m * r; i++)
        p.A[i] = (float)((2 * tu_unit(&st) - 1) * (scale ? scale[i % r] : 1.0));
    for (int64_t i = 0; i < (int64_t)n * r; i++)
        p.B[i] = (float)(2 * tu_unit(&st) - 1);
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
