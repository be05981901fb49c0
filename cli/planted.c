/* A planted low-rank matrix for completion, the random test of Tanner & Wei: A (rows x r) and
 * B (cols x r) with N(0, 1) entries (column t of A scaled by condition^(-t / (r - 1)), so
 * that the singular values spread over about [1/condition, 1]), each entry of A B^T observed
 * independently with probability `density`. Shared by `mfact complete --synthetic` and the
 * demo's completion step. Every random number comes from mf_random_uniform with the seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

#define STREAM_FACTORS 0x64656d6f08000000ull
#define STREAM_SAMPLE  0x64656d6f09000000ull
#define STREAM_ERROR   0x64656d6f0a000000ull

void demo_planted_free(demo_planted *p)
{
    free(p->A), free(p->B);
    mf_sparse_destroy(p->M);
    p->A = p->B = NULL;
    p->M = NULL;
}

static void draw_factors(demo_rng *rng, demo_planted *p)
{
    const int r = p->rank;
    for (int64_t e = 0; e < (int64_t)p->rows * r; e++)
        p->A[e] = (float)demo_rng_normal(rng);
    for (int64_t e = 0; e < (int64_t)p->cols * r; e++)
        p->B[e] = (float)demo_rng_normal(rng);
    if (p->condition <= 1.0 || r < 2)
        return;
    for (int t = 0; t < r; t++) {
        float s = (float)pow(p->condition, -(double)t / (r - 1));
        for (int32_t i = 0; i < p->rows; i++)
            p->A[(int64_t)i * r + t] *= s;
    }
}

/* The observed positions, row by row with increasing columns: the gaps between successive
 * entries of the row-major order are geometric, so a draw costs one uniform per observed
 * entry (not one per entry of the matrix) and no position repeats. ptr[i + 1] counts row
 * i's entries until the prefix sum. Returns the count, or -1 when out of memory. */
static int64_t draw_positions(demo_rng *rng, const demo_planted *p, int64_t *ptr, int32_t **col,
                              int64_t *cap)
{
    const double cells = (double)p->rows * p->cols, step = log1p(-p->density);
    int64_t q = 0;
    memset(ptr, 0, ((size_t)p->rows + 1) * sizeof *ptr);
    for (double at = -1.0;;) {
        /* density 1: step is -inf and every gap 0 */
        at += 1.0 + (p->density < 1.0 ? floor(log(1.0 - demo_rng_uniform(rng)) / step) : 0.0);
        if (at >= cells)
            break;
        if (q == *cap) {
            int64_t more = *cap + *cap / 4 + 1024;
            int32_t *grown = realloc(*col, (size_t)more * sizeof **col);
            if (!grown) {
                cli_error(demo_command(), "out of host memory for %lld observed entries",
                          (long long)more);
                return -1;
            }
            *col = grown, *cap = more;
        }
        int64_t cell = (int64_t)at;
        ptr[cell / p->cols + 1]++;
        (*col)[q++] = (int32_t)(cell % p->cols);
    }
    for (int32_t i = 0; i < p->rows; i++)
        ptr[i + 1] += ptr[i];
    return q;
}

static double dot(const float *x, const float *y, int r)
{
    double d = 0.0;
    for (int t = 0; t < r; t++)
        d += (double)x[t] * y[t];
    return d;
}

int demo_planted_make(mf_ctx *ctx, uint64_t seed, int32_t rows, int32_t cols, int rank,
                      double density, double condition, demo_planted *p)
{
    memset(p, 0, sizeof *p);
    p->rows = rows, p->cols = cols, p->rank = rank;
    p->density = density, p->condition = condition, p->seed = seed;
    double t0 = cli_seconds(), expect = (double)rows * cols * density;
    demo_say("planting a %d x %d matrix of rank %d (N(0, 1) factors%s), observing each entry "
             "with probability %g: about %.3g entries",
             (int)rows, (int)cols, rank, condition > 1 ? ", condition number spread" : "", density,
             expect);
    if (condition > 1)
        demo_say("column t of A scaled by %g^(-t/%d): singular values from 1 to about 1/%g",
                 condition, rank > 1 ? rank - 1 : 1, condition);
    /* 8 bytes an entry here, 8 in the library's matrix and about 24 in a completion run's
     * working set (residual, transposed positions); the factors six times over. */
    char what[160];
    snprintf(what, sizeof what, "a %d x %d matrix with %.3g observed entries", (int)rows, (int)cols,
             expect);
    if (!demo_fits(what, 40.0 * expect + 24.0 * ((double)rows + cols) * rank))
        return -1;
    int64_t cap = (int64_t)(expect + 8.0 * sqrt(expect)) + 1024;
    p->A = demo_alloc("the planted factor A", (int64_t)rows * rank, sizeof *p->A);
    p->B = demo_alloc("the planted factor B", (int64_t)cols * rank, sizeof *p->B);
    int64_t *ptr = demo_alloc("the row offsets", (int64_t)rows + 1, sizeof *ptr);
    int32_t *col = demo_alloc("the observed positions", cap, sizeof *col);
    float *val = NULL;
    int rc = -1;
    demo_rng rng;
    bool have_rng = false;
    if (!p->A || !p->B || !ptr || !col || !(have_rng = demo_rng_init(&rng, ctx, seed, 0)))
        goto done;
    rng.stream = STREAM_FACTORS;
    draw_factors(&rng, p);
    rng.stream = STREAM_SAMPLE, rng.pos = rng.len = 0;
    int64_t nnz = draw_positions(&rng, p, ptr, &col, &cap);
    if (nnz < 0 || !(val = demo_alloc("the observed values", nnz, sizeof *val)))
        goto done;
    if (rng.failed) {
        cli_error(demo_command(), "%s", mf_ctx_last_error(ctx));
        goto done;
    }
    for (int32_t i = 0; i < rows; i++)
        for (int64_t q = ptr[i]; q < ptr[i + 1]; q++)
            val[q] = (float)dot(p->A + (int64_t)i * rank, p->B + (int64_t)col[q] * rank, rank);
    if (mf_sparse_from_csr(ctx, &p->M, rows, cols, nnz, ptr, col, val, MF_MEMORY_HOST, 0) !=
        MF_OK) {
        cli_error(demo_command(), "%s", mf_ctx_last_error(ctx));
        goto done;
    }
    rc = 0;
done:
    if (have_rng)
        demo_rng_free(&rng);
    free(ptr), free(col), free(val);
    p->seconds = cli_seconds() - t0;
    return rc;
}

double demo_planted_error(mf_ctx *ctx, const demo_planted *p, const float *X, const float *Y, int k,
                          int64_t samples, int64_t *used)
{
    const int r = p->rank;
    double num = 0.0, den = 0.0;
    if ((double)p->rows * p->cols <= (double)samples) { /* small: every entry */
        for (int32_t i = 0; i < p->rows; i++)
            for (int32_t j = 0; j < p->cols; j++) {
                double want = dot(p->A + (int64_t)i * r, p->B + (int64_t)j * r, r);
                double got = dot(X + (int64_t)i * k, Y + (int64_t)j * k, k);
                num += (got - want) * (got - want), den += want * want;
            }
        *used = (int64_t)p->rows * p->cols;
        return sqrt(num / den);
    }
    demo_rng rng;
    if (!demo_rng_init(&rng, ctx, p->seed, STREAM_ERROR))
        return NAN;
    for (int64_t s = 0; s < samples; s++) {
        int32_t i = (int32_t)(demo_rng_uniform(&rng) * p->rows);
        int32_t j = (int32_t)(demo_rng_uniform(&rng) * p->cols);
        i = i < p->rows ? i : p->rows - 1, j = j < p->cols ? j : p->cols - 1;
        double want = dot(p->A + (int64_t)i * r, p->B + (int64_t)j * r, r);
        double got = dot(X + (int64_t)i * k, Y + (int64_t)j * k, k);
        num += (got - want) * (got - want), den += want * want;
    }
    bool failed = rng.failed;
    demo_rng_free(&rng);
    if (failed) {
        cli_error(demo_command(), "%s", mf_ctx_last_error(ctx));
        return NAN;
    }
    *used = samples;
    return sqrt(num / den);
}

const char *demo_asd_stop_name(mf_asd_stop stop)
{
    switch (stop) {
    case MF_ASD_STOP_TOLERANCE: return "tolerance";
    case MF_ASD_STOP_STAGNATION: return "stagnation";
    case MF_ASD_STOP_MAX_ITERATIONS: return "max iterations";
    case MF_ASD_STOP_TIME_LIMIT: return "time limit";
    case MF_ASD_STOP_CANCELLED: return "cancelled";
    }
    return "unknown";
}
