/* The spectral start of mf_asd_run: the top-r singular subspace of P(M) / p (p the observed
 * fraction, so that the zero-filled matrix is an unbiased estimate of M) by a few rounds of
 * subspace iteration, X0 = (P(M) / p) V and Y0 = V, balanced to equal norms. On the host:
 * it costs a few sparse products, and either engine copies its start from the host. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "core/ctx.h"
#include "core/random.h"

/* Orthonormalize the r columns of F (lines x r, row-major) by modified Gram-Schmidt in
 * double; a column that vanishes is left zero. */
static void orthonormalize(float *F, int64_t lines, int r)
{
    for (int a = 0; a < r; a++) {
        for (int b = 0; b < a; b++) {
            double d = 0.0;
            for (int64_t i = 0; i < lines; i++)
                d += (double)F[i * r + a] * F[i * r + b];
            for (int64_t i = 0; i < lines; i++)
                F[i * r + a] -= (float)(d * F[i * r + b]);
        }
        double n = 0.0;
        for (int64_t i = 0; i < lines; i++)
            n += (double)F[i * r + a] * F[i * r + a];
        n = sqrt(n);
        for (int64_t i = 0; i < lines; i++)
            F[i * r + a] = n > 0.0 ? (float)(F[i * r + a] / n) : 0.0f;
    }
}

/* Z = (P(M) / p) Q (rows x r) or W = (P(M) / p)^T Z (cols x r). */
static void product(const mf_sparse *M, int r, double scale, const float *F, float *out,
                    int transpose)
{
    memset(out, 0, (size_t)(transpose ? M->cols : M->rows) * r * sizeof *out);
    for (int32_t i = 0; i < M->rows; i++)
        for (int64_t p = M->row_ptr[i]; p < M->row_ptr[i + 1]; p++) {
            float v = (float)(scale * (M->val ? M->val[p] : 1.0f));
            int32_t j = M->col[p];
            float *o = out + (int64_t)(transpose ? j : i) * r;
            const float *f = F + (int64_t)(transpose ? i : j) * r;
            for (int t = 0; t < r; t++)
                o[t] += v * f[t];
        }
}

mf_status mf_asd_spectral_start(mf_ctx *ctx, const mf_sparse *M, int r, int rounds, float *X0,
                                float *Y0)
{
    const double scale = (double)M->rows * (double)M->cols / (double)M->nnz;
    mf_random_uniform_host(Y0, (int64_t)M->cols * r, -1.0f, 1.0f, ctx->seed, 0x41534453u,
                           mf_ctx_threads(ctx));
    orthonormalize(Y0, M->cols, r);
    for (int k = 0; k < rounds; k++) {
        product(M, r, scale, Y0, X0, 0);
        orthonormalize(X0, M->rows, r);
        product(M, r, scale, X0, Y0, 1);
        orthonormalize(Y0, M->cols, r);
    }
    product(M, r, scale, Y0, X0, 0); /* X0 = A V: U Sigma, to the subspace's accuracy */
    double nx = 0.0;
    for (int64_t i = 0; i < (int64_t)M->rows * r; i++)
        nx += (double)X0[i] * X0[i];
    if (!(nx > 0.0) || !isfinite(nx))
        return mf_fail(ctx, MF_ERR_NUMERIC, "mf_asd_run: the spectral start vanished");
    /* Equal norms: |X0| = |Y0| = (|X0| sqrt(r))^(1/2), the product unchanged. */
    const double c = sqrt(sqrt((double)r) / sqrt(nx));
    for (int64_t i = 0; i < (int64_t)M->rows * r; i++)
        X0[i] = (float)(X0[i] * c);
    for (int64_t i = 0; i < (int64_t)M->cols * r; i++)
        Y0[i] = (float)(Y0[i] / c);
    return MF_OK;
}
