/* Conjugate gradients on one small SPD system: the CPU engine's MF_ALS_SOLVER_CG and the
 * reference for the CUDA one (als_cg.cuh), which takes the same steps in float. The
 * vectors and dot products are in double here: this is the reference. */
#include <math.h>

#include "als/als_internal.h"

/* y = A v for the symmetric A whose lower triangle is stored. */
static void sym_product(int k, const float *A, int64_t lda, const double *v, double *y)
{
    for (int i = 0; i < k; i++)
        y[i] = 0.0;
    for (int i = 0; i < k; i++) {
        const float *ai = A + (int64_t)i * lda;
        double s = 0.0;
        for (int m = 0; m < i; m++) {
            s += (double)ai[m] * v[m];
            y[m] += (double)ai[m] * v[i];
        }
        y[i] += s + (double)ai[i] * v[i];
    }
}

static double dot(int k, const double *u, const double *v)
{
    double s = 0.0;
    for (int i = 0; i < k; i++)
        s += u[i] * v[i];
    return s;
}

int mf_cg_solve(int k, const float *A, int64_t lda, const float *b, float *x, int n, double *work)
{
    double *r = work, *p = work + k, *q = work + 2 * k, *xd = work + 3 * k;
    for (int i = 0; i < k; i++)
        xd[i] = isfinite(x[i]) ? (double)x[i] : 0.0;
    sym_product(k, A, lda, xd, q);
    double bb = 0.0;
    for (int i = 0; i < k; i++) {
        r[i] = (double)b[i] - q[i];
        p[i] = r[i];
        bb += (double)b[i] * b[i];
    }
    double rr = dot(k, r, r);
    /* The GPU's stopping rule (residual at float rounding level), so both take the same
     * steps on well-conditioned systems. */
    const double tol = 1e-12 * bb;
    for (int step = 0; step < n && rr > tol; step++) {
        sym_product(k, A, lda, p, q);
        const double pq = dot(k, p, q);
        if (!(pq > 0.0) || !isfinite(pq))
            return step;
        const double alpha = rr / pq;
        for (int i = 0; i < k; i++) {
            xd[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        const double rr_next = dot(k, r, r);
        for (int i = 0; i < k; i++)
            p[i] = r[i] + rr_next / rr * p[i];
        rr = rr_next;
    }
    for (int i = 0; i < k; i++)
        x[i] = (float)xd[i];
    return -1;
}
