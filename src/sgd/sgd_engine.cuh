/* The CUDA engine of Hogwild SGD as its translation units share it: sgd.cu (the engine's
 * table: its making, the epochs, its end), sgd_launch.cu (the epoch kernel for the engine's
 * shape, its grid, one pass of it), sgd_hot.cu (the popular items' replicas),
 * sgd_local_bias.cu (block-local item biases and renumbered rows) and sgd_copy.cu (the
 * factors in and out, the RMSE). CUDA C++, private to src/sgd. */
#ifndef MF_SGD_ENGINE_CUH
#define MF_SGD_ENGINE_CUH

#include <stdint.h>

#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "sgd/sgd_internal.h"
#include "sgd/sgd_kernels.cuh"

namespace mf_sgd_gpu
{

/* The byte offsets in cuda_engine's scratch. */
enum { SCRATCH_SQ_ERR = 8, SCRATCH_RMSE = 16, SCRATCH_BYTES = 24 };

struct cuda_engine {
    mf_sgd_engine base;
    mf_ctx *ctx;
    int k, kp, kpl;
    bool half, resident;
    int lanes;      /* per update: 32 (epoch_kernel) or a group of epoch_group_kernel */
    int64_t groups; /* concurrent updates (epoch_group_kernel's groups) */
    int32_t rows, cols;
    float lambda_u, lambda_v;
    uint64_t seed;
    int64_t nchunks;
    unsigned blocks, threads; /* of the epoch launch */
    /* The grid of the kernel with global biases (launch_shape): the same as blocks, threads
     * and groups but where the item biases are local (the second pass of renumbered rows). */
    unsigned plain_blocks, plain_threads;
    int64_t plain_groups;
    mf_dbuf chunk_begin, entries, user, U, V, scratch;
    /* scratch (SCRATCH_BYTES): the chunk counter; the squared errors of the parts run since
     * the last loss (a double); the fp16 RMSE's sum (a double) */
    int biases;
    float lambda_bias, mean;
    mf_dbuf bu, bi; /* biased model only */
    int64_t *parts; /* nparts + 1 chunk boundaries (sgd_internal.h) */
    int nparts;
    /* Popular items' replicas (sgd_hot.cuh): hot items, hot_items[h] the item of replica
     * rows cols + h * replicas + r; none when hot is 0. Part p's are h in [hot_first[p],
     * hot_first[p + 1]) (nparts + 1 entries), or all of them where hot_first is NULL (an
     * item hot in more than one part). */
    int32_t hot;
    int replicas;
    mf_dbuf hot_items;
    int32_t *hot_first;
    /* Block-local item biases (sgd_local_bias.cuh), when local: `slots` in shared memory,
     * their owners, the owners' ratings per part (nparts x slots) and the blocks' copies
     * (blocks x slots floats) that the merge sums. */
    int local; /* sgd::LOCAL_NONE or _ALL */
    int32_t slots;
    mf_dbuf local_owner, local_count, local_copies;
    /* Renumbered rows (more rows than slots, one part, sgd_local_bias.cuh): row_of[x] is the
     * working row of item (or working row) x, the most rated first; empty when the rows keep
     * their numbers. Every chunk is split in two (the entries of rows below `slots`, then the
     * rest), the rest turned around into chunks of one row (`rest`: each entry's user and
     * rating; `rest_row`: its row), and the chunks of each pass listed: `split` holds the
     * first pass's begins and ends (n1 each, into `entries`), then the second's (n2 each, into
     * `rest`). */
    mf_dbuf row_of;
    mf_dbuf split;
    mf_dbuf rest, rest_row;
    int64_t n1, n2;
    /* The second pass in launches of one piece of each row (turn_rest): launch j runs its
     * chunks [rest_sub[j], rest_sub[j + 1]). */
    int64_t *rest_sub;
    int rest_passes;
};

/* sgd_launch.cu */
/* The smallest lane width that holds k: rows of 32 * kpl elements. */
int lane_width(int k);
/* Lanes per update under the user-chunk order (sgd_launch.cu says how they were chosen). */
int group_lanes(int kp, bool half);
/* The kernel for the engine's lane width, storage, order and biases (local: held in each
 * block's shared memory). */
const void *epoch_kernel_for(const cuda_engine *e, int local);
/* The dynamic shared memory of the epoch kernel: the sink and the bias slots of a local one
 * (sgd_local_bias.cuh), none otherwise. */
size_t epoch_smem_bytes(const cuda_engine *e, int local);
/* The persistent grid of the epoch kernel (blocks, threads, groups; plain_* too where not
 * local). */
mf_status launch_shape(cuda_engine *e, const mf_sgd_setup *s, int local);
/* One pass of the epoch kernel (local: sgd::LOCAL_*) over n chunks, chunk c being entries
 * [begin[c], end[c]), in the order of the permutation (seed, order). */
mf_status run_pass(cuda_engine *e, sgd::epoch_args &a, const int64_t *begin, const int64_t *end,
                   int64_t n, int local, uint64_t seed, uint32_t order);

/* sgd_hot.cu */
/* Replicas for the items that too many concurrent updates would hold at once (after
 * launch_shape: e->groups). */
mf_status hot_setup(cuda_engine *e, const mf_sgd_setup *s);
/* Part `part`'s hot items' replicas from their rows (gather 0), or their rows from the
 * replicas' mean (gather 1). */
mf_status hot_rows(cuda_engine *e, int gather, int part);

/* sgd_local_bias.cu */
/* Block-local item biases where they pay (`spare`: the working rows past the items). */
mf_status local_bias_setup(cuda_engine *e, const mf_sgd_setup *s, int64_t spare);
/* The bias slots one block's shared memory holds where local_bias_setup would want them for
 * a plan of nnz ratings; 0 where it would keep the item biases in global memory. */
int64_t local_bias_room(const cuda_engine *e, int64_t nnz);

/* sgd_copy.cu */
/* The working factor X (rows x kp storage) from the host floats X0 (rows x k), row r at
 * row map[r] (NULL: r), with `spare` rows more. */
mf_status copy_in(cuda_engine *e, mf_dbuf *X, int32_t rows, int64_t spare, const int32_t *map,
                  const float *X0, const char *what);
/* bytes of host memory at src into a new device buffer, queued. */
mf_status upload(cuda_engine *e, mf_dbuf *dst, const void *src, size_t bytes, const char *what);
mf_status engine_rmse(mf_sgd_engine *base, const mf_sparse *R, double *rmse);
mf_status engine_finish(mf_sgd_engine *base, float *U, float *V, int64_t ld, float *bu, float *bi);

} // namespace mf_sgd_gpu

#endif
