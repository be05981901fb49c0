/* Matrix completion inside the library: the driver (asd.c) runs iterations against an
 * engine, the CPU one (asd_cpu.c) or the CUDA one, which owns the working factors and the
 * residual on the observed entries. */
#ifndef MF_ASD_INTERNAL_H
#define MF_ASD_INTERNAL_H

#include <stdint.h>

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A rank's reasons to stop a group's iterations (mf_asd_engine.iterate). */
enum { MF_ASD_WHY_CANCEL, MF_ASD_WHY_FAILURE, MF_ASD_WHY_TIME, MF_ASD_WHY_COUNT };

typedef struct mf_asd_engine mf_asd_engine;
struct mf_asd_engine {
    /* One iteration: a step on X, then one on Y. *res2 gets |R|^2 after it; *singular
     * counts the scaled steps that fell back to the plain direction.
     * In a group, stop_in[MF_ASD_WHY_*] holds this rank's reasons to stop, found after the
     * last iteration (1 or 0 each), and stop_out gets their sums over the ranks: the engine
     * adds them into the first sum of the iteration, before either factor moves, and when
     * any is nonzero neither factor moves, so that every rank keeps the last iteration's
     * factors. A failure of the engine's own (a sum that failed) is added into
     * stop_out[MF_ASD_WHY_FAILURE] in the iteration's last sum, so that every rank learns
     * of it in the same iteration. The ranks thus agree on stopping inside the sums they
     * take anyway, with no round trip of their own. Outside a group both are zero. */
    mf_status (*iterate)(mf_asd_engine *e, const double *stop_in, double *res2, int *singular,
                         double *stop_out);
    /* RMSE of X Y^T over the stored entries of T (rows x cols). */
    mf_status (*rmse)(mf_asd_engine *e, const mf_sparse *T, double *rmse);
    /* Copy the working factors into the caller's X and Y (`where` memory). */
    mf_status (*finish)(mf_asd_engine *e, float *X, float *Y, mf_memory where);
    void (*destroy)(mf_asd_engine *e);
    /* |R|^2 of the starting factors; in a group, over this rank's rows (making an engine
     * takes no collective step: the driver sums it). */
    double res2;
    /* In a group, an engine that drew the random start itself (setup's X0 NULL; the CUDA
     * one, so that its start is one GPU's) leaves it unscaled, with |P(X Y^T)|^2 over this
     * rank's rows in p2 and res2 unset; the driver sums p2 over the ranks and calls begin
     * with the sum, which scales the start as on one GPU and sets res2. NULL otherwise. */
    double p2;
    mf_status (*begin)(mf_asd_engine *e, double p2);
    /* The end of the reduced phase (mf_asd_setup.precision): from here on every pass reads
     * the float factors. The engine recomputes the residual and X's gradient (the next
     * iteration's start, made in the last iteration from the 16-bit copy) in float, and
     * puts |R|^2 over this rank's rows in *res2 (takes no collective step: in a group the
     * driver sums it). An engine of float makes the same recomputation. */
    mf_status (*to_float)(mf_asd_engine *e, double *res2);
};

/* The Philox streams of the random start: fixed, so that a seed means one start, the same
 * on either engine (the device generator is the host one's twin). */
#define MF_ASD_X_STREAM 0x41534458u
#define MF_ASD_Y_STREAM 0x41534459u

/* What the engines start from: the checked options and the starting factors (host,
 * leading dimension r), which the engine copies; X0 = Y0 = NULL asks the engine for the
 * random start, uniform in [-1, 1] from the two streams above and scaled by one factor so
 * that |P(X Y^T)|^2 = norm2. */
typedef struct mf_asd_setup {
    mf_ctx *ctx;
    mf_sparse *M; /* rows x cols, the observed entries; caches may be added */
    int r;
    int scaled;
    const float *X0, *Y0; /* all rows of X (rows_all), all of Y */
    double norm2;         /* |P(M)|^2 */
    /* In a group, M holds this rank's rows [row_lo, row_hi) of the whole matrix's rows_all
     * (renumbered from 0), and cols the entries of its columns [col_lo, col_hi) in a matrix
     * of the whole shape; the bounds are every rank's (size + 1 each). Alone: all rows and
     * columns, no bounds, cols NULL (M's columns). */
    int32_t rows_all, row_lo, row_hi, col_lo, col_hi;
    const int64_t *row_bounds, *col_bounds;
    mf_sparse *cols;
    /* The reduced phase: MF_PRECISION_BF16 or MF_PRECISION_FP16 has every pass (the
     * residual with the gradient, the step's denominator) read the other side's factor
     * from a copy rounded to it, made each time that factor moves (once a half step), until
     * to_float(); the own row, the Gram matrices, every sum and the steps stay float (or
     * double). The gradient G = R F is then a product with the rounded F as well.
     * MF_PRECISION_FP32 (0): float throughout. */
    int precision;
} mf_asd_setup;

/* The spectral start (asd_start.c): `rounds` of subspace iteration on P(M) / p, into host
 * X0 (rows x r) and Y0 (cols x r). */
mf_status mf_asd_spectral_start(mf_ctx *ctx, const mf_sparse *M, int r, int rounds, float *X0,
                                float *Y0);

mf_status mf_asd_cpu_engine(const mf_asd_setup *s, mf_asd_engine **out);
/* asd.cu; without CUDA, asd_absent.c. */
mf_status mf_cuda_asd_engine(const mf_asd_setup *s, mf_asd_engine **out);

#ifdef __cplusplus
}
#endif
#endif
