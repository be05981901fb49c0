/* Block-local item biases for the user-chunk epoch kernels (sgd_kernels.cuh). CUDA C++ only.
 *
 * Why: at k = 128 an item row is 8 (fp16) or 16 (fp32) 32-byte sectors, and the item's bias
 * in global memory is one more sector read and one more written by every update: the
 * biases cost 19-22% (fp16) and 12-14% (fp32) of the updates per second, against at most
 * 5% wanted, and no layout of a global bias avoids that sector (bench/README.md).
 *
 * How: the item biases (items and the popular items' working rows, sgd_hot.cuh) get slots
 * in each block's shared memory, slot = row, so that an update finds its bias where it finds
 * its row. Where they all fit, the rows keep their numbers. Otherwise the engine renumbers
 * its rows (the working factors, their biases and the entries' item fields, once at setup:
 * renumber_kernel): the rows with the most ratings become rows [0, M), M the slots the
 * shared memory holds, and the rest follow. A kernel (partition_local_kernel) then reorders
 * every chunk's entries on the device, those of rows below M first. The rest (their second
 * halves, the ratings of the least rated rows) is gathered and turned around on the host:
 * chunks of one row's ratings (at most MF_SGD_CHUNK), each entry naming its user. Each epoch
 * (or part) runs the first halves through the local kernel, then the rest through the kernel
 * whose biases are all global with the two sides swapped: the item row (and bias) stays in
 * registers through its chunk, the users' rows are loaded and stored at each update. A rest
 * row holds about ten ratings where a user's rest held one or two, and the per-chunk work
 * (the claim, the resident row's load and store) paced the pass in runs of a user (150 us
 * for 0.9% of zipf's ratings against 7.2 ms for the whole epoch, H200). Neither kernel tests
 * anything per update, nor loads anything that the biases alone need. Measured on zipf's
 * 100,000 items (fp16, k = 128, H100): a flag per entry, tested at every update, cost 13.8%
 * of the updates per second; slot = item mod 32,768 with a second pass over each chunk's own
 * second half (one or two entries) 15.5%; each entry's slot (2 bytes) beside it and the rest
 * in runs of a user 6.3% (bench/README.md has these and what renumbering measured).
 * Each block of the persistent grid copies the owners' biases when it starts and applies its
 * updates' bias steps to that copy, Hogwild among its own warps. When the block ends, it writes
 * its copy to its own row of a blocks x slots array (coalesced, no atomics), and a merge kernel
 * after the epoch sums each slot's moves over the blocks, in a fixed order, and moves the global
 * bias. Every copy is Koren's SGD on its share of an item's ratings from the same start: local
 * SGD over the blocks, as the working rows are for factors.
 *
 * The merge: with c = lr (1 + lambda_bias), n steps on one bias contract it towards their
 * target by f(n) = 1 - (1 - c)^n. The item's N ratings of the epoch (or part) taken in one
 * sequence would have moved it by f(N) times their mean target; R blocks that touched it
 * saw about N / R ratings each and moved by about f(N / R) times the same, so
 *     b += f(N) / (R f(N / R)) * sum of the R moves.
 * An item with a few ratings in as many blocks gets the sum of its steps, one that every
 * block saw many times the mean of its copies: what one sequence of steps would do in both
 * limits. */
#ifndef MF_SGD_LOCAL_BIAS_CUH
#define MF_SGD_LOCAL_BIAS_CUH

#include <stdint.h>

#include "sgd/sgd_internal.h"
#include "sgd/sgd_rules.h" /* MF_SGD_CHUNK */

namespace sgd
{

/* The kernels' LOCAL parameter: item biases in global memory, or those of every row the pass
 * meets in shared memory at slot = row. */
enum { LOCAL_NONE = 0, LOCAL_ALL = 1 };

/* The dynamic shared memory of the local epoch kernels: MF_SGD_LOCAL_SINK words that take
 * the exchanges of the lanes that write no bias (word = the lane's number in its warp, so that
 * the update groups of a warp never exchange into one word: indexed by the lane in its group,
 * they replayed 2-way at G = 16 and up to 8-way at G = 4), then one float a slot. */
extern __shared__ __align__(16) float local_bias_smem[];
#define MF_SGD_LOCAL_SINK 32

struct local_bias_args {
    int32_t slots;         /* M; 0: every bias in global memory */
    const int32_t *owner;  /* M: the item of each slot, -1 for none */
    const unsigned *count; /* M: the owner's ratings in this epoch's part (N) */
    float *copies;         /* blocks x M: each block's copy when it ended */
    int32_t blocks;        /* the epoch kernel's grid */
    float log_keep;        /* log(1 - c) */
};

/* Slots a thread copies in at once (begin): the loads of a batch are in flight together (one
 * at a time, a block's 768 threads took 43 round trips through L2 for 32,768 slots). */
constexpr int local_batch = 8;

/* The block's copies race by design (Hogwild among its warps), as the global rows do: a
 * plain (volatile) load, the step, and an atomic exchange. With plain stores compute-sanitizer's
 * racecheck reported the races (it checks shared memory only, so the global rows' races never
 * showed), and as well with relaxed atomic loads and stores at block scope (which compile to
 * plain ones); it does not report a plain load racing with an atomic exchange. The exchange
 * keeps Hogwild's semantics (the last writer wins): an atomic add of the step instead applies
 * every concurrent step from the same start, which diverged for the global biases.
 *
 * The copy's address in the shared window is taken once, through an opaque move: from the array
 * or a pointer to it, the compiler rebuilt the window's address (a special register read and
 * three more instructions) at each load and store of every update rather than hold it. */
struct local_bias {
    uint32_t base; /* the shared-window address of the first slot */
    uint32_t sink; /* ... and of the lane's sink word */

    /* Slot `slot`. */
    __device__ __forceinline__ float load(uint32_t slot) const
    {
        float x;
        asm volatile("ld.volatile.shared.f32 %0, [%1];" : "=f"(x) : "r"(base + 4u * slot));
        return x;
    }
    /* The update's exchange, by every lane: slot `slot` from the lane where `on`, the lane's
     * sink word from the others. An exchange is a plain store where racecheck looks (it reports
     * races between plain stores and loads, not between an atomic and a plain load: measured on
     * the H100); ptxas branches around an atomic that only some lanes make (it predicates no
     * atomic), and that branch diverged at every update. */
    __device__ __forceinline__ void store_if(bool on, uint32_t slot, float x) const
    {
        asm volatile("{ .reg .b32 old; atom.shared.exch.b32 old, [%0], %1; }" ::"r"(
                         on ? base + 4u * slot : sink),
                     "r"(__float_as_uint(x))
                     : "memory");
    }

    /* The block's copy of the owners' biases (global stride `stride` floats). */
    __device__ __forceinline__ void begin(const local_bias_args &l, const float *global, int stride)
    {
        const uint32_t window = (uint32_t)__cvta_generic_to_shared(local_bias_smem);
        asm volatile("mov.b32 %0, %1;" : "=r"(base) : "r"(window));
        sink = base + 4u * (threadIdx.x & 31u);
        base += 4u * MF_SGD_LOCAL_SINK;
        float *b = local_bias_smem + MF_SGD_LOCAL_SINK;
        const int32_t step = (int32_t)blockDim.x;
        for (int32_t s0 = threadIdx.x; s0 < l.slots; s0 += local_batch * step) {
            int32_t o[local_batch];
            float x[local_batch];
#pragma unroll
            for (int j = 0; j < local_batch; j++)
                o[j] = s0 + j * step < l.slots ? __ldg(l.owner + s0 + j * step) : -1;
#pragma unroll
            for (int j = 0; j < local_batch; j++)
                x[j] = o[j] >= 0 ? __ldcg(global + (int64_t)o[j] * stride) : 0.0f;
#pragma unroll
            for (int j = 0; j < local_batch; j++)
                if (s0 + j * step < l.slots)
                    b[s0 + j * step] = x[j];
        }
        __syncthreads();
    }

    /* Every thread of the block, once its updates are done: the copy into the block's row
     * of the merge's array. */
    __device__ __forceinline__ void end(const local_bias_args &l)
    {
        const float *b = local_bias_smem + MF_SGD_LOCAL_SINK;
        float *row = l.copies + (int64_t)blockIdx.x * l.slots;
        __syncthreads();
        for (int32_t s = threadIdx.x; s < l.slots; s += blockDim.x)
            __stcg(row + s, b[s]);
    }
};

/* After the epoch (or part), a thread a slot: the blocks' moves of the owner's bias (their
 * copies against the global bias, which the epoch left alone), summed in block order, and
 * the global bias moved by the merge. */
static __global__ void merge_local_bias_kernel(local_bias_args l, float *global, int stride)
{
    for (int32_t s = blockIdx.x * blockDim.x + threadIdx.x; s < l.slots;
         s += gridDim.x * blockDim.x) {
        const int32_t o = l.owner[s];
        if (o < 0)
            continue;
        const float g = global[(int64_t)o * stride];
        float moved = 0.0f;
        unsigned r = 0u; /* the blocks that moved it */
#pragma unroll local_batch
        for (int32_t blk = 0; blk < l.blocks; blk++) {
            const float d = __ldcg(l.copies + (int64_t)blk * l.slots + s) - g;
            moved += d;
            r += d != 0.0f;
        }
        if (r == 0u)
            continue;
        const float n = (float)(l.count[s] > r ? l.count[s] : r);
        const float all = -expm1f(n * l.log_keep), each = -expm1f(n / (float)r * l.log_keep);
        /* each == 0 only where lr (1 + lambda_bias) underflows: the steps then add up */
        const float scale = each > 0.0f ? all / ((float)r * each) : 1.0f;
        global[(int64_t)o * stride] = g + scale * moved;
    }
}

/* Renumbered rows: every entry's item field through map (old row -> new row). */
static __global__ void renumber_kernel(mf_sgd_entry *e, int64_t nnz, const int32_t *map)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nnz;
         i += (int64_t)gridDim.x * blockDim.x)
        e[i].item = map[e[i].item];
}

/* Renumbered rows: a warp a chunk (at most 64 entries, MF_SGD_CHUNK), its entries reordered in
 * place, those of rows below `slots` first, each side in its order; owned_count[c] = how
 * many. */
static_assert(MF_SGD_CHUNK <= 64, "partition_local_kernel holds a chunk in two entries a lane");
static __global__ void partition_local_kernel(mf_sgd_entry *e, const int64_t *chunk_begin,
                                              int64_t nchunks, int32_t slots, int32_t *owned_count)
{
    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    for (int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < nchunks;
         c += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t b = chunk_begin[c];
        const int n = (int)(chunk_begin[c + 1] - b);
        mf_sgd_entry x[2];
        bool owned[2];
        unsigned vote[2];
        for (int h = 0; h < 2; h++) {
            const bool in = h * 32 + lane < n;
            owned[h] = false;
            if (in) {
                x[h] = e[b + h * 32 + lane];
                owned[h] = x[h].item < slots;
            }
            vote[h] = __ballot_sync(0xffffffffu, owned[h]);
        }
        const int owners = __popc(vote[0]) + __popc(vote[1]);
        __syncwarp();
        for (int h = 0; h < 2; h++) {
            const int at = h * 32 + lane;
            if (at >= n)
                continue;
            /* owners before this entry, and the others before it */
            const int ob = (h ? __popc(vote[0]) : 0) + __popc(vote[h] & below);
            e[b + (owned[h] ? ob : owners + at - ob)] = x[h];
        }
        if (lane == 0)
            owned_count[c] = owners;
    }
}

/* Renumbered rows: a warp a chunk, its second half (after owned_count[c] entries) and their
 * users into rest and rest_user at rest_at[c]. */
static __global__ void gather_rest_kernel(const mf_sgd_entry *e, const int32_t *user,
                                          const int64_t *chunk_begin, int64_t nchunks,
                                          const int32_t *owned_count, const int64_t *rest_at,
                                          mf_sgd_entry *rest, int32_t *rest_user)
{
    const int lane = threadIdx.x & 31;
    for (int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < nchunks;
         c += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int64_t from = chunk_begin[c] + owned_count[c], n = chunk_begin[c + 1] - from;
        for (int64_t i = lane; i < n; i += 32) {
            rest[rest_at[c] + i] = e[from + i];
            rest_user[rest_at[c] + i] = user[from + i];
        }
    }
}

} // namespace sgd

#endif
