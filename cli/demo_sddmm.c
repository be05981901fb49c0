/* mfact demo's SDDMM step: the speed of mf_sddmm on the ratings' pattern. On a CUDA context
 * the factors and the output live in device memory, so the timed calls are the kernels; the
 * first call (which builds and caches the plan) is a warm-up, then the median of REPEAT
 * calls, each timed on the host clock up to a synchronization of the context's stream. */
#include <stdio.h>
#include <stdlib.h>

#include "cli_device.h"
#include "demo.h"

enum { REPEAT = 10 };
#define STREAM_FACTORS 0x64656d6f05000000ull

static int compare_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median seconds of mf_sddmm at rank k, or a negative number on failure (printed). */
static double time_at(mf_ctx *ctx, const mf_sparse *S, int k, uint64_t seed)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(S, &rows, &cols, &nnz);
    mf_memory where = mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? MF_MEMORY_DEVICE : MF_MEMORY_HOST;
    const char *mem = where == MF_MEMORY_DEVICE ? "device" : "host";
    size_t a_bytes = (size_t)rows * k * sizeof(float), b_bytes = (size_t)cols * k * sizeof(float);
    float *A = cli_alloc(where, a_bytes), *B = cli_alloc(where, b_bytes);
    float *out = cli_alloc(where, (size_t)(nnz ? nnz : 1) * sizeof(float));
    double t[REPEAT], med = -1;
    if (!A || !B || !out) {
        cli_error("demo", "SDDMM: out of %s memory for %.1f MB of factors and output", mem,
                  (double)(a_bytes + b_bytes + (size_t)nnz * sizeof(float)) / 1e6);
        goto done;
    }
    if (mf_random_uniform(ctx, A, (int64_t)rows * k, -1, 1, seed, STREAM_FACTORS, where) != MF_OK ||
        mf_random_uniform(ctx, B, (int64_t)cols * k, -1, 1, seed, STREAM_FACTORS + 1, where) !=
            MF_OK)
        goto fail;
    for (int r = -1; r < REPEAT; r++) {
        double t0 = cli_seconds();
        if (mf_sddmm(ctx, S, k, A, k, B, k, 1.0f, 0.0f, out, where, MF_SDDMM_PATTERN) != MF_OK ||
            cli_sync(ctx) != 0)
            goto fail;
        if (r >= 0)
            t[r] = cli_seconds() - t0;
    }
    qsort(t, REPEAT, sizeof *t, compare_double);
    med = t[REPEAT / 2];
    goto done;
fail:
    cli_error("demo", "SDDMM: %s", mf_ctx_last_error(ctx));
done:
    cli_free(where, A);
    cli_free(where, B);
    cli_free(where, out);
    return med;
}

int demo_sddmm(mf_ctx *ctx, const demo_ratings *r, cli_out *out)
{
    static const int ks[] = {32, 128};
    int nk = mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? 2 : 1;
    int64_t nnz;
    mf_sparse_shape(r->train, NULL, NULL, &nnz);
    for (int i = 0; i < nk; i++) {
        int k = ks[i];
        demo_say("SDDMM (mf_sddmm): A B^T at the %lld train ratings' positions, k = %d, median "
                 "of %d calls after a warm-up",
                 (long long)nnz, k, REPEAT);
        double s = time_at(ctx, r->train, k, r->seed);
        if (s < 0)
            return -1;
        char label[64];
        snprintf(label, sizeof label, "SDDMM k%d ms", k);
        cli_out_num(out, label, 1e3 * s);
        snprintf(label, sizeof label, "SDDMM k%d GFLOP/s", k);
        cli_out_num(out, label, s > 0 ? 2.0 * k * (double)nnz / s / 1e9 : 0.0);
    }
    return 0;
}
