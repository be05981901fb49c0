/* mfact demo's completion step: a planted low-rank matrix (planted.c) observed on a random
 * twentieth (CPU) or hundredth (GPU) of its entries, completed by Scaled ASD (mf_asd_run) at the
 * planted rank; the result X Y^T is scored against the whole planted matrix A B^T. */
#include <math.h>
#include <stdlib.h>

#include "demo.h"

/* About a million observed entries on the CPU (15 iterations, 1 s on 2 cores), 7.5 million
 * on a GPU (the host's generation, single-threaded, then takes about as long as the run). */
enum { CPU_ROWS = 5000, CPU_COLS = 4000, CPU_RANK = 5 };
enum { CUDA_ROWS = 30000, CUDA_COLS = 25000, CUDA_RANK = 10 };
#define CPU_DENSITY   0.05
#define CUDA_DENSITY  0.01
#define ERROR_SAMPLES 1000000

int demo_complete(mf_ctx *ctx, uint64_t seed, double scale, cli_out *out)
{
    bool cuda = mf_ctx_backend(ctx) == MF_BACKEND_CUDA;
    int32_t m = (int32_t)fmax(1.0, round((cuda ? CUDA_ROWS : CPU_ROWS) * sqrt(scale)));
    int32_t n = (int32_t)fmax(1.0, round((cuda ? CUDA_COLS : CPU_COLS) * sqrt(scale)));
    int rank = cuda ? CUDA_RANK : CPU_RANK;
    rank = rank < m && rank < n ? rank : (m < n ? m : n);
    demo_planted p;
    float *X = NULL, *Y = NULL;
    int rc = -1;
    if (demo_planted_make(ctx, seed, m, n, rank, cuda ? CUDA_DENSITY : CPU_DENSITY, 1.0, &p) != 0)
        goto done;
    X = demo_alloc("the factor X", (int64_t)m * rank, sizeof *X);
    Y = demo_alloc("the factor Y", (int64_t)n * rank, sizeof *Y);
    if (!X || !Y)
        goto done;
    int64_t nnz;
    mf_sparse_shape(p.M, NULL, NULL, &nnz);
    mf_asd_opts o;
    mf_asd_opts_init(&o); /* Scaled ASD from a random start, to a relative residual of 1e-5 */
    o.rank = rank;
    demo_say("matrix completion (mf_asd_run): Scaled ASD at rank %d from %lld observed entries, "
             "to a relative residual of %g",
             rank, (long long)nnz, o.tolerance);
    mf_asd_report rep = {.struct_size = sizeof rep};
    if (mf_asd_run(ctx, p.M, &o, X, Y, MF_MEMORY_HOST, &rep) != MF_OK) {
        cli_error("demo", "completion: %s", mf_ctx_last_error(ctx));
        goto done;
    }
    int64_t used = 0;
    double err = demo_planted_error(ctx, &p, X, Y, rank, ERROR_SAMPLES, &used);
    if (isnan(err))
        goto done;
    cli_out_int(out, "ASD rows", m);
    cli_out_int(out, "ASD cols", n);
    cli_out_int(out, "ASD observed", nnz);
    cli_out_int(out, "ASD rank", rank);
    cli_out_int(out, "ASD iterations", rep.iterations);
    cli_out_str(out, "ASD stopped", demo_asd_stop_name(rep.stopped));
    cli_out_num(out, "ASD relative residual", rep.relative_residual);
    cli_out_num(out, "ASD relative error vs planted", err);
    cli_out_num(out, "ASD seconds per iteration",
                rep.iterations ? rep.seconds / rep.iterations : 0.0);
    cli_out_num(out, "ASD seconds", rep.seconds);
    rc = 0;
done:
    free(X), free(Y);
    demo_planted_free(&p);
    return rc;
}
