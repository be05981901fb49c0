/* Hogwild SGD inside the library: the driver (sgd.c) checks the options, draws the initial
 * factors, builds the visiting plan (sgd_plan.c) and runs the epochs against an engine,
 * the CPU one (sgd_cpu.c) or the CUDA one (sgd.cu), which owns working copies of the
 * factors in the requested storage. */
#ifndef MF_SGD_INTERNAL_H
#define MF_SGD_INTERNAL_H
#include <stdint.h>

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The order in which an epoch visits the ratings. The ratings are laid out once, in the
 * order of opts->order, as parallel arrays; chunk c is [chunk_begin[c], chunk_begin[c+1])
 * (one user's ratings under MF_SGD_ORDER_USER_CHUNKS). Epoch t visits chunk
 * mf_sgd_perm_apply(perm(nchunks, seed, t), s) as its s-th, and a chunk's ratings in
 * order. */
typedef struct mf_sgd_entry {
    int32_t item;
    float rating; /* a pattern's are 1 */
} mf_sgd_entry;

typedef struct mf_sgd_plan {
    int64_t nnz, nchunks;
    int64_t *chunk_begin; /* nchunks + 1 */
    mf_sgd_entry *entry;  /* nnz: the item and rating of each visit, one 8-byte load */
    int32_t *user;        /* nnz: the user of each visit */
} mf_sgd_plan;

mf_status mf_sgd_plan_build(mf_ctx *ctx, const mf_sparse *R, mf_sgd_order order, uint64_t seed,
                            mf_sgd_plan *plan);
void mf_sgd_plan_free(mf_sgd_plan *plan);
/* A rank's plan in a group: its users [u0, u1) against each block of items
 * [item_bounds[b], item_bounds[b + 1]), b < blocks, one part each, in block order: part b is
 * chunks [parts[b], parts[b + 1]) (parts has blocks + 1 entries). Each part is the plan of
 * its block alone (mf_sgd_plan_build's, on the block's entries). */
mf_status mf_sgd_plan_build_blocks(mf_ctx *ctx, const mf_sparse *R, mf_sgd_order order,
                                   uint64_t seed, int32_t u0, int32_t u1,
                                   const int64_t *item_bounds, int blocks, mf_sgd_plan *plan,
                                   int64_t *parts);

/* What both engines start from. U0 (users x k) and V0 (items x k) are float on the host,
 * leading dimension k, finite; the engines copy them. */
typedef struct mf_sgd_setup {
    mf_ctx *ctx;
    const mf_sparse *R;
    const mf_sgd_plan *plan; /* lives until the engine is destroyed */
    int k;
    mf_sgd_storage storage;
    mf_sgd_order order;
    float lambda_u, lambda_v;
    int workers;         /* 0: as many as the backend runs at once */
    int64_t max_workers; /* at most this many, whatever the request (>= 1) */
    uint64_t seed;
    const float *U0, *V0;
    /* Biased model (Koren): the plan's ratings hold r - mean, and each update is
     *     e = (r - mean) - bu_u - bi_i - U_u . V_i;
     *     bu_u += lr (e - lambda_bias bu_u);  bi_i += lr (e - lambda_bias bi_i);
     * then the factors' update with the same e. Biases are float whatever the storage,
     * start at zero, and race like the factors. */
    int biases;
    float lambda_bias, mean;
    /* The plan's parts (mf_sgd_plan_build_blocks): nparts + 1 chunk boundaries; NULL and 1
     * for one part, the whole plan. */
    const int64_t *parts;
    int nparts;
} mf_sgd_setup;

typedef struct mf_sgd_engine mf_sgd_engine;
struct mf_sgd_engine {
    /* One pass over the plan at learning rate lr, chunks in the order of epoch t. *sq_err
     * receives the sum of the squared errors e^2 met by the updates (each before its
     * update): the epoch's training loss, and the divergence check. */
    mf_status (*epoch)(mf_sgd_engine *e, int t, float lr, double *sq_err);
    /* The same over part `part` of the plan alone (setup's parts), its chunks in an order of
     * their own for epoch t, queued: its squared errors add to a running sum that `loss`
     * reads, so that a group's sub-steps follow each other with no wait for the device
     * between them. epoch is part_epoch of the one part of an unparted plan, then loss. */
    mf_status (*part_epoch)(mf_sgd_engine *e, int t, int part, float lr);
    /* The squared errors of the parts run since the last call (waits for them); the sum
     * starts again from zero. */
    mf_status (*loss)(mf_sgd_engine *e, double *sq_err);
    /* The working factors of the users (side 0) or the items (1), rows of row_bytes, and
     * their biases (NULL without), rows of bias_bytes: what a group's ranks exchange. */
    void (*shared)(mf_sgd_engine *e, int side, void **factors, size_t *row_bytes, void **biases,
                   size_t *bias_bytes);
    /* RMSE of the current factors over the stored entries of R (users x items). */
    mf_status (*rmse)(mf_sgd_engine *e, const mf_sparse *R, double *rmse);
    /* Copy the working factors into the caller's U and V (float, leading dimension ld >= k,
     * columns past k left as they are) and, where not NULL, the biases into bu and bi. */
    mf_status (*finish)(mf_sgd_engine *e, float *U, float *V, int64_t ld, float *bu, float *bi);
    void (*destroy)(mf_sgd_engine *e);
    int workers; /* concurrent updates, as run */
};

/* Benchmarks only (bench_sgd --lanes): 32 makes the CUDA engine run every user-chunk update
 * on a whole warp, as before update groups; 0 (the default) follows the engine's rule. */
extern int mf_sgd_debug_lanes;
/* The CUDA engine's replicas of popular items' rows (sgd_hot.cuh): an item that more than
 * MF_SGD_HOT_CONCURRENCY concurrent updates would hold at once (workers x its share of the
 * ratings) gets MF_SGD_HOT_REPLICAS working rows. */
#define MF_SGD_HOT_CONCURRENCY 2.0
#define MF_SGD_HOT_REPLICAS    16

/* Benchmarks and tests only (bench_sgd --replicas): the working rows of each popular item in the
 * CUDA engine (sgd_hot.cuh); 0 or 1: none; -1 (the default): the engine's rule. */
extern int mf_sgd_debug_replicas;
/* Tests only: the popular items that the last CUDA engine set up gave working rows. */
extern int64_t mf_sgd_debug_hot_items;
/* Benchmarks and tests only (bench_sgd --local-bias): 0 keeps the CUDA engine's item biases in
 * global memory, updated in place by every update; 1 holds them in each block's shared memory
 * (sgd_local_bias.cuh) whatever the size of the ratings; -1 (the default) where each block
 * would see MF_SGD_LOCAL_BIAS_RATINGS ratings an epoch or more. */
#define MF_SGD_LOCAL_BIAS_RATINGS 150000.0
extern int mf_sgd_debug_local_bias;
/* Tests and benchmarks: the item bias slots the last CUDA engine set up in each block's
 * shared memory, 0 when it kept them all in global memory. */
extern int64_t mf_sgd_debug_local_items;
/* Tests and benchmarks: of those, the ratings whose item had no slot (when there were fewer
 * slots than items and working rows, and the engine renumbered its rows), which the CUDA
 * engine runs in a second pass, a row's ratings together, with the biases in global memory. */
extern int64_t mf_sgd_debug_local_rest;

/* Tests only (test_ranks, test_gpu_ranks): rank mf_sgd_debug_fail_rank of a group fails its
 * part of sub-step mf_sgd_debug_fail_step (counted over the fit: epoch t's sub-step q is
 * t x ranks + q) with MF_ERR_INTERNAL, as though its engine had; -1: none. */
extern int mf_sgd_debug_fail_rank;
extern int64_t mf_sgd_debug_fail_step;

mf_status mf_sgd_cpu_engine(const mf_sgd_setup *s, mf_sgd_engine **out);
/* CUDA builds: sgd.cu; without CUDA the stub in sgd_absent.c. */
mf_status mf_cuda_sgd_engine(const mf_sgd_setup *s, mf_sgd_engine **out);

#ifdef __cplusplus
}
#endif
#endif
