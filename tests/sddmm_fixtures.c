#include "sddmm_fixtures.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sddmm/sddmm_round.h"
#include "testutil.h"

const char *fx_pattern_name(fx_pattern p)
{
    static const char *names[] = {"random", "long-row", "single", "dense", "power-law"};
    return p < FX_PATTERNS ? names[p] : "?";
}

mf_sparse *fx_interleaved_groups(mf_ctx *ctx, int32_t rows, int32_t cols, int groups, uint64_t seed)
{
    uint64_t s = seed;
    const int32_t width = cols / groups;
    int64_t cap = (int64_t)rows * (width + 1) + 1;
    int32_t *r = malloc((size_t)cap * sizeof *r), *c = malloc((size_t)cap * sizeof *c);
    ck_assert(r && c && width > 0);
    int64_t n = 0;
    for (int32_t i = 0; i < rows; i++) {
        const int32_t first = (i % groups) * width;
        for (int32_t j = first; j < first + width; j++)
            if (tu_unit(&s) < 0.5) {
                r[n] = i;
                c[n++] = j;
            }
        int32_t extra = (int32_t)(tu_splitmix64(&s) % (uint64_t)cols);
        if (tu_splitmix64(&s) % 4 == 0 && (extra < first || extra >= first + width)) {
            r[n] = i;
            c[n++] = extra;
        }
    }
    mf_sparse *m = NULL;
    mf_status st =
        mf_sparse_from_coo(ctx, &m, rows, cols, n, r, c, NULL, MF_MEMORY_HOST, MF_SPARSE_DEFAULT);
    ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(ctx));
    free(r);
    free(c);
    return m;
}

float *fx_floats(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(2.0 * tu_unit(&s) - 1.0);
    return x;
}

mf_sparse *fx_matrix(mf_ctx *ctx, fx_pattern kind, int32_t rows, int32_t cols, double density,
                     int values, uint64_t seed)
{
    uint64_t s = seed;
    int64_t cap = kind == FX_DENSE ? (int64_t)rows * cols
                                   : (int64_t)(density * rows * cols * 1.5) + cols + 16;
    int32_t *r = malloc((size_t)cap * sizeof *r), *c = malloc((size_t)cap * sizeof *c);
    float *v = malloc((size_t)cap * sizeof *v);
    ck_assert(r && c && v);
    int64_t n = 0;
    if (kind == FX_SINGLE) {
        r[0] = rows / 2;
        c[0] = cols / 3;
        n = 1;
    } else if (kind == FX_DENSE) {
        for (int32_t i = 0; i < rows; i++)
            for (int32_t j = 0; j < cols; j++, n++) {
                r[n] = i;
                c[n] = j;
            }
    } else {
        for (int32_t i = 0; i < rows; i++) {
            if (kind == FX_RANDOM && tu_splitmix64(&s) % 3 == 0)
                continue; /* empty row */
            double row_density = density;
            if (kind == FX_POWER_LAW) /* a few long rows, many short ones */
                row_density = fmin(1.0, density * 0.25 / pow(tu_unit(&s) + 1e-3, 0.75));
            for (int32_t j = 0; j < cols && n < cap; j++) {
                double pj =
                    kind == FX_POWER_LAW ? row_density * 3.0 / (1.0 + 0.05 * j) : row_density;
                if ((kind == FX_LONG_ROW && i == rows / 2) || tu_unit(&s) < pj) {
                    r[n] = i;
                    c[n] = j;
                    n++;
                }
            }
        }
    }
    for (int64_t p = 0; p < n; p++)
        v[p] = (float)(2.0 * tu_unit(&s) - 1.0);
    /* Shuffle the COO order: the matrix must canonicalize it. */
    for (int64_t p = n - 1; p > 0; p--) {
        int64_t q = (int64_t)(tu_splitmix64(&s) % (uint64_t)(p + 1));
        int32_t tr = r[p], tc = c[p];
        float tv = v[p];
        r[p] = r[q], c[p] = c[q], v[p] = v[q];
        r[q] = tr, c[q] = tc, v[q] = tv;
    }
    mf_sparse *m = NULL;
    mf_status st = mf_sparse_from_coo(ctx, &m, rows, cols, n, r, c, values ? v : NULL,
                                      MF_MEMORY_HOST, MF_SPARSE_DEFAULT);
    ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(ctx));
    free(r);
    free(c);
    free(v);
    return m;
}

/* x rounded as `precision` hands it to the tensor cores, split in big + small for 3xTF32
 * (small is 0 otherwise). */
static void fx_split(mf_precision precision, float x, double *big, double *small)
{
    float b = x, s = 0.0f;
    switch (precision) {
    case MF_PRECISION_3XTF32:
        b = mf_round_tf32(x);
        s = mf_round_tf32(x - b);
        break;
    case MF_PRECISION_TF32: b = mf_round_tf32(x); break;
    case MF_PRECISION_BF16: b = mf_round_bf16(x); break;
    case MF_PRECISION_FP16: b = mf_round_fp16(x); break;
    default: break;
    }
    *big = b;
    *small = s;
}

double fx_precision_bound(mf_precision precision, int k)
{
    const double u = ldexp(1.0, -24);
    switch (precision) {
    case MF_PRECISION_3XTF32: return (4.0 * k + 16.0) * u;
    case MF_PRECISION_TF32:
    case MF_PRECISION_FP16: return ldexp(1.0, -10) + ldexp(1.0, -22) + 2.0 * k * u;
    case MF_PRECISION_BF16: return ldexp(1.0, -7) + ldexp(1.0, -16) + 2.0 * k * u;
    default: return 2.0 * k * u;
    }
}

void fx_sddmm_ref_rounded(const mf_sparse *S, int k, const float *A, int64_t lda, const float *B,
                          int64_t ldb, double alpha, int pattern, mf_precision precision,
                          double *ref, double *bound, double *slack)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(S, &rows, &cols, &nnz);
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *col);
    float *val = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *val);
    ck_assert(ptr && col && val);
    ck_assert_int_eq(mf_sparse_get_csr(S, ptr, col, val, MF_MEMORY_HOST), MF_OK);
    for (int32_t i = 0; i < rows; i++)
        for (int64_t p = ptr[i]; p < ptr[i + 1]; p++) {
            double d = 0.0, m = 0.0, sl = 0.0;
            for (int t = 0; t < k; t++) {
                double ab, as, bb, bs;
                float a = A[(int64_t)i * lda + t], b = B[(int64_t)col[p] * ldb + t];
                fx_split(precision, a, &ab, &as);
                fx_split(precision, b, &bb, &bs);
                double x = ab * bb + ab * bs + as * bb;
                d += x;
                m += fabs(ab * bb) + fabs(ab * bs) + fabs(as * bb);
                sl += ldexp(fabs(a) + fabs(b), -24) + ldexp(1.0, -48);
            }
            double sv = pattern ? 1.0 : val[p];
            ref[p] = alpha * sv * d;
            bound[p] = fabs(alpha * sv) * m;
            if (slack)
                slack[p] = precision == MF_PRECISION_FP16 ? fabs(alpha * sv) * sl : 0.0;
        }
    free(ptr);
    free(col);
    free(val);
}

double fx_check_relative(const char *what, int64_t nnz, const float *got, const double *ref,
                         const double *bound, double rel, const double *slack, double beta,
                         const float *before)
{
    const double u = ldexp(1.0, -24);
    double worst = 0.0;
    for (int64_t p = 0; p < nnz; p++) {
        double want = ref[p] + (before ? beta * before[p] : 0.0);
        double tol = rel * bound[p] + (slack ? slack[p] : 0.0) + 4.0 * u * fabs(want) +
                     (before ? 2.0 * u * fabs(beta * before[p]) : 0.0) + 1e-30;
        ck_assert_msg(isfinite(got[p]), "%s: entry %lld is %g", what, (long long)p, (double)got[p]);
        double err = fabs(got[p] - want);
        ck_assert_msg(err <= tol,
                      "%s: entry %lld is %.9g, reference %.9g (error %.3g > bound %.3g)", what,
                      (long long)p, (double)got[p], want, err, tol);
        if (bound[p] > 0)
            worst = fmax(worst, err / bound[p]);
    }
    return worst;
}

void fx_sddmm_ref(const mf_sparse *S, int k, const float *A, int64_t lda, const float *B,
                  int64_t ldb, double alpha, int pattern, double *ref, double *bound)
{
    fx_sddmm_ref_rounded(S, k, A, lda, B, ldb, alpha, pattern, MF_PRECISION_FP32, ref, bound, NULL);
}

void fx_check_sddmm(const char *what, int64_t nnz, int k, const float *got, const double *ref,
                    const double *bound, double beta, const float *before)
{
    const double u = ldexp(1.0, -24);
    double err2 = 0.0, ref2 = 0.0;
    for (int64_t p = 0; p < nnz; p++) {
        double want = ref[p] + (before ? beta * before[p] : 0.0);
        double tol = 2.0 * (k + 2) * u * bound[p] + 4.0 * u * fabs(want) +
                     (before ? 2.0 * u * fabs(beta * before[p]) : 0.0) + 1e-30;
        ck_assert_msg(isfinite(got[p]), "%s: entry %lld is %g", what, (long long)p, (double)got[p]);
        ck_assert_msg(fabs(got[p] - want) <= tol,
                      "%s: entry %lld is %.9g, reference %.9g (error %.3g > bound %.3g)", what,
                      (long long)p, (double)got[p], want, fabs(got[p] - want), tol);
        err2 += (got[p] - want) * (got[p] - want);
        ref2 += want * want;
    }
    if (ref2 > 0)
        ck_assert_msg(sqrt(err2 / ref2) < 1e-5, "%s: relative error %.3g", what, sqrt(err2 / ref2));
}

/* Y = alpha op(S) X + beta Y against a float64 loop over the dense form. */
void fx_check_spmm(mf_ctx *ctx, mf_sparse *S, mf_op op, int64_t n)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(S, &rows, &cols, &nnz);
    int64_t p = op == MF_OP_N ? rows : cols, q = op == MF_OP_N ? cols : rows, ldx = n + 1,
            ldy = n + 2;
    float *X = fx_floats(q * ldx, 5), *Y = fx_floats(p * ldy, 6),
          *Y0 = malloc((size_t)(p * ldy) * 4);
    memcpy(Y0, Y, (size_t)(p * ldy) * sizeof *Y);
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    int32_t *col = malloc((size_t)nnz * sizeof *col + 4);
    float *val = malloc((size_t)nnz * sizeof *val + 4);
    mf_sparse_get_csr(S, ptr, col, val, MF_MEMORY_HOST);
    double *want = calloc((size_t)(p * n), sizeof *want),
           *mag = calloc((size_t)(p * n), sizeof *mag);
    for (int32_t i = 0; i < rows; i++)
        for (int64_t e = ptr[i]; e < ptr[i + 1]; e++) {
            int64_t yr = op == MF_OP_N ? i : col[e], xr = op == MF_OP_N ? col[e] : i;
            for (int64_t t = 0; t < n; t++) {
                want[yr * n + t] += 0.75 * val[e] * X[xr * ldx + t];
                mag[yr * n + t] += fabs(0.75 * val[e] * X[xr * ldx + t]);
            }
        }
    ck_assert_msg(mf_spmm(ctx, op, S, n, 0.75f, X, ldx, -2.0f, Y, ldy, MF_MEMORY_HOST) == MF_OK,
                  "%s", mf_ctx_last_error(ctx));
    for (int64_t r = 0; r < p; r++)
        for (int64_t t = 0; t < ldy; t++) {
            if (t >= n) {
                ck_assert_float_eq(Y[r * ldy + t], Y0[r * ldy + t]); /* padding untouched */
                continue;
            }
            double w = want[r * n + t] - 2.0 * Y0[r * ldy + t];
            double tol = 1e-5 * (mag[r * n + t] + 2.0 * fabs(Y0[r * ldy + t])) + 1e-6;
            ck_assert_msg(fabs(Y[r * ldy + t] - w) <= tol,
                          "spmm op %d: Y[%lld][%lld] = %g, want %g", (int)op, (long long)r,
                          (long long)t, (double)Y[r * ldy + t], w);
        }
    free(X), free(Y), free(Y0), free(ptr), free(col), free(val), free(want), free(mag);
}
