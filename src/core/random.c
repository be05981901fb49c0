#include "core/random.h"

#include <math.h>
#include <stdint.h>

#include "core/ctx.h"
#include "cuda/cuda_backend.h"
#include "cuda/philox.h"

void mf_random_uniform_host(float *out, int64_t n, float lo, float hi, uint64_t seed,
                            uint64_t stream, int threads)
{
    int64_t blocks = (n + 3) / 4;
    (void)threads; /* read by OpenMP alone */
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 65536)
    for (int64_t b = 0; b < blocks; b++) {
        mf_philox_block r = mf_philox_stream_block(seed, stream, (uint64_t)b);
        for (int j = 0; j < 4 && 4 * b + j < n; j++)
            out[4 * b + j] = mf_philox_scale(mf_philox_unit_float(r.v[j]), lo, hi);
    }
}

mf_status mf_random_uniform(mf_ctx *ctx, float *out, int64_t n, float lo, float hi, uint64_t seed,
                            uint64_t stream, mf_memory where)
{
    static const char fn[] = "mf_random_uniform";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, n >= 0, "%s: n = %lld is negative", fn, (long long)n);
    MF_REQUIRE(ctx, n == 0 || out, "%s: out is NULL", fn);
    MF_REQUIRE(ctx, isfinite(lo) && isfinite(hi) && lo < hi,
               "%s: the range [%g, %g) is empty or not finite", fn, (double)lo, (double)hi);
    /* a draw is lo + u * (hi - lo) in float: a width past FLT_MAX would make every value hi's
     * neighbour */
    MF_REQUIRE(ctx, isfinite(hi - lo), "%s: the range [%g, %g) is wider than a float holds", fn,
               (double)lo, (double)hi);
    MF_REQUIRE(ctx, n <= PTRDIFF_MAX / (int64_t)sizeof(float),
               "%s: n = %lld floats pass what an address space holds", fn, (long long)n);
    if (n == 0)
        return MF_OK;
    MF_TRY(mf_check_memory(ctx, out, where, fn, "out"));
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_random_uniform(ctx, out, n, lo, hi, seed, stream);
    mf_random_uniform_host(out, n, lo, hi, seed, stream, mf_ctx_threads(ctx));
    return MF_OK;
}
