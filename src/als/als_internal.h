/* ALS-WR inside the library: the driver (als.c) runs the iterations against an engine, the
 * CPU one (als_cpu.c) or the CUDA one (als.cu), which owns working copies of the factors. */
#ifndef MF_ALS_INTERNAL_H
#define MF_ALS_INTERNAL_H
#include <stdint.h>

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Solve A x = b in place for a symmetric positive definite k x k A (row-major, leading
 * dimension lda, only the lower triangle read and overwritten by L and D) by LDL^T without
 * pivoting; b becomes x. Returns -1, or the first pivot that broke down (not above
 * k * FLT_EPSILON times its original diagonal, or not finite), leaving b unspecified. */
int mf_ldlt_solve(int k, float *A, int64_t lda, float *b);

/* The users or the items: which half of an iteration. */
typedef enum mf_als_side { MF_ALS_USERS = 0, MF_ALS_ITEMS = 1 } mf_als_side;

typedef struct mf_als_engine mf_als_engine;
struct mf_als_engine {
    /* Solve every row of `side` against the other side's current factors. The CUDA
     * engine only queues the work (a breakdown shows at settle); a failure returned here
     * is one of the host (memory, a launch). */
    mf_status (*half_step)(mf_als_engine *e, mf_als_side side);
    /* Wait for the queued half steps: MF_ERR_NUMERIC where a system broke down (users
     * first; *side says which), and the seconds spent building the systems and solving
     * them since the last settle added to *gram and *solve. One host wait an iteration,
     * not one a batch: a group's ranks then queue a whole iteration, exchanges included,
     * without draining. */
    mf_status (*settle)(mf_als_engine *e, double *gram, double *solve, mf_als_side *side);
    /* RMSE of the current factors over the stored entries of R (users x items), the
     * sampled products in `precision` (an mf_precision: opts.rmse_precision). */
    mf_status (*rmse)(mf_als_engine *e, const mf_sparse *R, int precision, double *rmse);
    /* Copy the working factors into the caller's U and V (leading dimension ld >= k, the
     * columns past k zero) and, where not NULL, the biases into bu and bi (host or device
     * memory as the setup's `where`). */
    mf_status (*finish)(mf_als_engine *e, float *U, float *V, int64_t ld, float *bu, float *bi);
    /* The working factors of `side` (rows of row_bytes, device memory on the CUDA engine)
     * and its biases (NULL without), which a group's ranks exchange after a half step. */
    void (*shared)(mf_als_engine *e, mf_als_side side, void **factors, size_t *row_bytes,
                   float **biases);
    void (*destroy)(mf_als_engine *e);
};

/* What both engines start from: the checked options and the initial V (items x k,
 * leading dimension k, on the host). */
typedef struct mf_als_setup {
    mf_ctx *ctx;
    mf_sparse *R; /* users x items; caches (transpose, device copies) may be added */
    int k;
    float lambda;
    mf_memory where;
    const float *V0;
    /* Biased model: r_ui ~ mean + bu_u + bi_i + U_u . V_i. A half-step solves each row's
     * factors and its bias together, as a system of order k + 1 whose extra feature is 1
     * and whose targets are r - mean - (the other side's bias); the bias's penalty is
     * lambda_bias times the row's count. Biases start at zero. */
    int biases;
    float lambda_bias;
    float mean;
    /* lambda and lambda_bias times the row's count (ALS-WR), or as they are */
    int weighted;
    /* CUDA: which Gram kernel builds the systems (tests and benches compare them; AUTO
     * everywhere else). */
    int gram_kernel;
    /* 0: each row's system solved exactly (LDL^T); n > 0: n conjugate-gradient steps from
     * the row's current factors and bias (the previous iteration's; zeros at first). CG
     * takes systems of order k + biases <= MF_ALS_CG_MAX_ORDER. */
    int cg_steps;
    /* The rows of each side (MF_ALS_USERS, MF_ALS_ITEMS) that half_step solves: [lo, hi),
     * this rank's share in a group (core/ranks.h), else the whole side. */
    int32_t lo[2], hi[2];
    /* The entries each side's half step reads: part[MF_ALS_USERS] those of rows [lo, hi)
     * (its CSR), part[MF_ALS_ITEMS] those of columns [lo, hi) (its transpose), each of R's
     * shape: a rank of a group holds its shard only. NULL: R itself. */
    mf_sparse *part[2];
    /* The whole matrix's offsets of each side's lines (R's row_ptr and its transpose's
     * ptr; NULL: part's), from which the engines choose kernels, so that every rank of a
     * group chooses as one context over the whole matrix does. */
    const int64_t *line_ptr[2];
    /* 1: sharded users (mf_als_layout, als.c). R is this rank's users alone and the items'
     * half step forms every item's system from them, sums the systems over the group
     * (mf_comm sum_buffer, the same bits on every rank) and solves every item; a row's
     * count for the weighted lambda, and whether it has ratings at all, come from
     * line_ptr[MF_ALS_ITEMS], the whole matrix's column offsets. */
    int sum_items;
} mf_als_setup;

/* With sum_items: how many items' systems of sys_bytes one chunk of the sums holds, the
 * same on every rank: default_bytes' worth, or MFACT_ALS_SUM_BYTES's (tests: many chunks;
 * it must be the same on every rank), at least 1 and at most items (als_shard.c). */
int64_t mf_als_sum_chunk(int32_t items, size_t sys_bytes, size_t default_bytes);

/* The matrix whose entries side w reads (mf_als_setup.part, else R). */
static inline mf_sparse *mf_als_part(const mf_als_setup *s, int w)
{
    return s->part[w] ? s->part[w] : s->R;
}

#define MF_ALS_CG_MAX_ORDER 127

/* n CG steps on the k x k SPD system A x = b (row-major, leading dimension lda, only the
 * lower triangle read), x the start on entry and the result on return; work holds 4 k
 * doubles. Returns -1, or the step at which p^T A p was not positive (A not positive
 * definite), leaving x unspecified. Stops early once the residual is at rounding level. */
int mf_cg_solve(int k, const float *A, int64_t lda, const float *b, float *x, int n, double *work);

/* mf_als_setup.gram_kernel: AUTO takes the tensor cores (3xTF32) for a side whose Gram
 * segments are long, FP32 otherwise; TC falls back to FP32 where tensor cores cannot run.
 * TF32: one TF32 product a tile on both sides; TF32_LONG: that where AUTO takes the tensor
 * cores, FP32 elsewhere. */
enum {
    MF_ALS_GRAM_AUTO = 0,
    MF_ALS_GRAM_FP32 = 1,
    MF_ALS_GRAM_TC = 2,
    MF_ALS_GRAM_TF32 = 3,
    MF_ALS_GRAM_TF32_LONG = 4
};
/* Debug knob (bench_als --gram): the gram_kernel of every mf_als_run; 0 leaves it to AUTO. */
extern int mf_als_debug_gram;

mf_status mf_als_cpu_engine(const mf_als_setup *s, mf_als_engine **out);
/* CUDA builds: als.cu; without CUDA the stub in als_absent.c. */
mf_status mf_cuda_als_engine(const mf_als_setup *s, mf_als_engine **out);

/* Hooks (als_hooks.cu: CUDA builds, the internal archive only, never libmfact.so).
 * Test hook: solve `count` dense SPD systems A_s x_s = b_s (host arrays: k x k row-major,
 * and k) with the batched CUDA solver of the engine (cg_steps > 0: the CG one, x on entry its
 * start); x on the host. MF_ERR_NUMERIC when one broke down. */
mf_status mf_cuda_als_solve_dense(mf_ctx *ctx, int k, int count, const float *A, const float *b,
                                  int cg_steps, float *x);

/* Bench hooks (bench/als.cu puts the batched solver next to cuSOLVER on the same
 * systems): the user systems of R for item factors V (host, items x k) and lambda, for
 * users [0, count), built once on the device (all partial systems at once: they must fit)
 * by the Gram kernel gram_kernel names (MF_ALS_GRAM_*).
 * solve: one run of the batched solver, timed with events; x (device, count x k).
 * dense: the same systems written out whole for a peer, A (device, count x k x k, both
 * triangles, lambda n on the diagonal) and b (device, count x k). */
typedef struct mf_als_bench mf_als_bench;
mf_status mf_cuda_als_bench_begin(mf_ctx *ctx, mf_sparse *R, int k, float lambda, const float *V,
                                  int32_t count, int gram_kernel, mf_als_bench **out);
mf_status mf_cuda_als_bench_solve(mf_als_bench *b, float *x, double *ms);
/* gram: the same systems built again, timed with events (ms), by the kernel `gram_kernel`
 * names (*tensor_cores: whether that was the tensor-core one). */
mf_status mf_cuda_als_bench_gram(mf_als_bench *b, int gram_kernel, double *ms, int *tensor_cores);
mf_status mf_cuda_als_bench_dense(mf_als_bench *b, float *A, float *rhs);
void mf_cuda_als_bench_end(mf_als_bench *b);

#ifdef __cplusplus
}
#endif
#endif
