// The CUDA engine of ALS as its two translation units share it: als.cu (the engine) and
// als_hooks.cu (test and bench hooks, built into the internal archive only, so that
// libmfact.so carries none of them). CUDA C++, private to src/als.
#ifndef MF_ALS_ENGINE_CUH
#define MF_ALS_ENGINE_CUH

#include <cuda_runtime.h>

#include "als/als_internal.h"
#include "als/als_kernels.cuh"
#include "core/device_memory.h"

namespace mf_als_gpu
{

/* Batches whose timing events may be pending at once (a half step of Netflix's users on one
 * GPU has 6 batches; of Hugewiki's on 4 GPUs, about 140). */
#define ALS_TIMING_MARKS 64

/* A Gram kernel and how it is launched. */
struct gram_launch {
    void (*kernel)(als_gram_args);
    int tc; /* the tensor-core kernel */
    int threads;
    size_t smem;
    int64_t blocks; /* a persistent grid: as many as fit at once */
};

struct side_plan {
    int32_t rows;
    int32_t lo, hi;     /* the rows half_step solves (this rank's share) */
    const int64_t *ptr; /* device CSR/CSC offsets */
    const int32_t *idx;
    const float *val; /* NULL: a pattern's ones */
    mf_dbuf seg_begin, seg_len, row_seg;
    int64_t *host_row_seg;    /* rows + 1, for batching */
    const int64_t *whole_ptr; /* the whole matrix's line offsets (mf_als_setup.line_ptr) */
    int32_t longest;          /* most segments of one row */
    gram_launch gram;         /* the Gram kernel of this side's systems */
};

struct cuda_engine {
    mf_als_engine base;
    mf_ctx *ctx;
    mf_sparse *R;
    int k, kp, tiles;
    int ks; /* the systems' order: k, or k + 1 with biases */
    float lambda;
    int biases, weighted;
    int cg_steps;   /* 0: the exact solver; else als_cg.cuh's, this many steps */
    int64_t cg_cap; /* its persistent grid (cg_grid_cap), set up once */
    /* The device's free memory once the engine is set up (cudaMemGetInfo), for the batch
     * budget without a context limit: asked once, since the query is a driver call that
     * costs far more than a launch (and contends across the devices of one process). */
    size_t device_free;
    float lambda_bias, mean;
    mf_dbuf U, V;   /* rows of kp floats, zero past k (biased: 1 at column k) */
    mf_dbuf bu, bi; /* the biases, rows and cols floats (biased model only) */
    side_plan side[2];
    mf_dbuf slots; /* the batches' partial systems (own_slots; empty under a limit) */
    /* Per side, the first breakdown of its last half step (row << 32 | step), all bits set
     * for none: read back at settle. */
    mf_dbuf failed;
    cudaEvent_t ev[3]; /* the bench hooks' timing */
    /* The batches' events (before the Gram kernel, between it and the solver, after),
     * read once done: a ring of ALS_TIMING_MARKS batches, the oldest waited for only when
     * it is full. */
    cudaEvent_t marks[ALS_TIMING_MARKS][3];
    int mark_head, mark_count;
    double gram_seconds, solve_seconds; /* read since the last settle */
    /* Sharded users (mf_als_setup.sum_items, als_summed.cu): the whole matrix's item
     * offsets and one segment per item (the solver's plan for summed systems), and a chunk
     * of sum_chunk items' systems, the same count on every rank. */
    int sum_items;
    mf_dbuf sum_ptr, sum_seg, sums;
    int64_t sum_chunk;
};

/* The padded order of a rank-k system (room for the augmented row) and its tile count. */
int padded_order(int k);
int tile_count(int kp);
/* The solver's shared memory for one system, its attribute, and its launch. */
size_t solver_smem_bytes(int kp, int tiles);
cudaError_t solver_allow_smem(int kp, size_t smem);
/* cg_cap: the CG solver's persistent grid (cg_grid_cap; unused by the exact solvers). */
cudaError_t solver_launch(const als_solve_args &a, unsigned systems, size_t smem,
                          cudaStream_t stream, int64_t cg_cap);
/* Blocks of the CG solver for kp that run at once on sms multiprocessors. */
cudaError_t cg_grid_cap(int kp, int tiles, int sms, int64_t *cap);
/* The Gram kernel of side s: mode MF_ALS_GRAM_AUTO (als_internal.h) picks by the side's
 * segment lengths, the others force one (tensor cores only where they run). */
mf_status pick_gram(cuda_engine *e, side_plan *s, int mode);
/* Bytes of one partial system. */
size_t system_bytes(const cuda_engine *e);
/* The partial systems of segments [s0, s0 + nseg) into slots. */
cudaError_t launch_gram(cuda_engine *e, const side_plan *s, const float *F, int64_t s0,
                        int64_t nseg, float *slots);
/* Solve rows [r0, r1), whose partial systems start at segment s0 in slots, into X. */
cudaError_t launch_solve(cuda_engine *e, const side_plan *s, int32_t r0, int32_t r1, int64_t s0,
                         const float *slots, float *X);
/* The batch's room: how many partial systems fit (the context's limit, else the device's
 * free memory); own_slots: the engine's own batch where there is no limit. */
mf_status batch_budget(cuda_engine *e, size_t *slots);
mf_status own_slots(cuda_engine *e);
/* A half step's room (take_slots: *want segments of side s in *slots; put_slots gives back
 * what was taken for the half step alone), and the end of the longest run of rows from r0
 * (before end) whose segments fit in want. */
mf_status take_slots(cuda_engine *e, const side_plan *s, mf_dbuf *slots, size_t *want);
void put_slots(cuda_engine *e, mf_dbuf *slots);
int32_t batch_end(const side_plan *s, int32_t r0, int32_t end, size_t want);
/* Fold the finished batches' event times into the engine's seconds (wait: see als.cu). */
cudaError_t marks_fold(cuda_engine *e, int wait);
/* Sharded users (als_summed.cu): the setup's buffers, their release, and the items' half
 * step (collective: every rank makes the same sums whatever failed on it). */
mf_status summed_setup(cuda_engine *e, const mf_als_setup *s);
void summed_free(cuda_engine *e);
mf_status half_step_summed(cuda_engine *e);
/* rows x k of a padded factor (rows of kp floats) into dst (leading dimension k). */
mf_status copy_out(cuda_engine *e, float *dst, const mf_dbuf *src, int32_t rows, int64_t ld);

} // namespace mf_als_gpu

#endif
