/* Block-local item biases for the user-chunk epoch kernels (sgd_kernels.cuh). CUDA C++ only.
 *
 * Why: at k = 128 an item row is 8 (fp16) or 16 (fp32) 32-byte sectors, and the item's bias
 * in global memory is one more sector read and one more written by every update: the
 * biases cost 19-22% (fp16) and 12-14% (fp32) of the updates per second, against at most
 * 5% wanted, and no layout of a global bias avoids that sector (bench/README.md).
 *
 * How: the item biases (items and the popular items' working rows, sgd_hot.cuh) get slots
 * in each block's shared memory. Where they all fit (LOCAL_ALL), slot = item. Otherwise
 * (LOCAL_SOME) there are M slots, a power of two, slot = item mod M, each owned by the item
 * with the most ratings among those that map to it, and the plan's entries of owned items
 * carry MF_SGD_LOCAL_FLAG in their item field, set once on the device. Each block of the persistent
 * grid copies the owners' biases when it starts and applies its updates' bias steps to that copy,
 * Hogwild among its own warps; other items' biases stay in global memory, updated in place. When
 * the block ends, each slot whose bias it moved adds that move to an accumulator and counts itself,
 * and a merge kernel after the epoch moves the global bias. Every copy is Koren's SGD on its share
 * of an item's ratings from the same start: local SGD over the blocks, as the working rows are for
 * factors.
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

namespace sgd
{

/* The item field's flag: the item owns its shared-memory slot. Item and working-row numbers
 * are below 2^31. */
#define MF_SGD_LOCAL_FLAG 0x80000000u

__device__ __forceinline__ int32_t entry_row(int32_t item)
{
    return (int32_t)((uint32_t)item & ~MF_SGD_LOCAL_FLAG);
}

/* The kernels' LOCAL parameter: item biases in global memory, some in shared memory (flagged
 * entries), or all of them there. */
enum { LOCAL_NONE = 0, LOCAL_SOME = 1, LOCAL_ALL = 2 };

/* The dynamic shared memory of the local epoch kernels: one float a slot. */
extern __shared__ __align__(16) float local_bias_smem[];

struct local_bias_args {
    int32_t slots;         /* M; 0: every bias in global memory */
    uint32_t mask;         /* LOCAL_SOME: M - 1 */
    const int32_t *owner;  /* M: the item of each slot, -1 for none */
    const unsigned *count; /* M: the owner's ratings in this epoch's part (N) */
    float *moved;          /* M: sum of the blocks' moves */
    unsigned *touched;     /* M: blocks that moved it (R) */
    float log_keep;        /* log(1 - c) */
};

/* The block's copies race by design (Hogwild among its warps), as the global rows do, with
 * plain (volatile) shared-memory loads and stores. compute-sanitizer's racecheck reports these
 * races (it checks shared memory only, so the global rows' races never showed); it reports them as
 * well when they are relaxed atomics at block scope, which ran 2% slower at k = 128 fp16 (one
 * run each, within the spread between runs). */
__device__ __forceinline__ float racy_load(const float *p)
{
    return *(const volatile float *)p; /* one load where the source has one */
}
__device__ __forceinline__ void racy_store(float *p, float x)
{
    *(volatile float *)p = x;
}

struct local_bias {
    float *b;

    /* The block's copy of the owners' biases (global stride `stride` floats). */
    __device__ __forceinline__ void begin(const local_bias_args &l, const float *global, int stride)
    {
        b = local_bias_smem;
        for (int32_t s = threadIdx.x; s < l.slots; s += blockDim.x) {
            const int32_t o = l.owner[s];
            b[s] = o >= 0 ? __ldcg(global + (int64_t)o * stride) : 0.0f;
        }
        __syncthreads();
    }

    /* An update's item bias: the block's copy where it has one, else global memory. */
    template <int MODE>
    __device__ __forceinline__ float get(const local_bias_args &l, const float *global, int stride,
                                         int32_t item) const
    {
        if (MODE == LOCAL_ALL)
            return racy_load(b + item);
        if ((uint32_t)item & MF_SGD_LOCAL_FLAG)
            return racy_load(b + ((uint32_t)item & l.mask));
        return __ldcg(global + (int64_t)item * stride);
    }

    /* Every thread of the block, once its updates are done: the moved slots into the
     * merge's accumulators. */
    __device__ __forceinline__ void end(const local_bias_args &l, const float *global, int stride)
    {
        __syncthreads();
        for (int32_t s = threadIdx.x; s < l.slots; s += blockDim.x) {
            const int32_t o = l.owner[s];
            if (o < 0)
                continue;
            const float d = b[s] - __ldcg(global + (int64_t)o * stride);
            if (d != 0.0f) {
                atomicAdd(l.moved + s, d);
                atomicAdd(l.touched + s, 1u);
            }
        }
    }
};

/* After the epoch (or part): each moved owner's global bias takes the merge, and the
 * accumulators return to zero. */
__global__ void merge_local_bias_kernel(local_bias_args l, float *global, int stride)
{
    for (int32_t s = blockIdx.x * blockDim.x + threadIdx.x; s < l.slots;
         s += gridDim.x * blockDim.x) {
        const unsigned r = l.touched[s];
        if (r == 0u)
            continue;
        const float n = (float)(l.count[s] > r ? l.count[s] : r);
        const float all = -expm1f(n * l.log_keep), each = -expm1f(n / (float)r * l.log_keep);
        /* each == 0 only where lr (1 + lambda_bias) underflows: the steps then add up */
        const float scale = each > 0.0f ? all / ((float)r * each) : 1.0f;
        global[(int64_t)l.owner[s] * stride] += scale * l.moved[s];
        l.moved[s] = 0.0f;
        l.touched[s] = 0u;
    }
}

/* LOCAL_SOME: flag the entries whose item owns its slot (owned[row] != 0). */
__global__ void flag_local_kernel(mf_sgd_entry *e, int64_t nnz, const unsigned char *owned)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nnz;
         i += (int64_t)gridDim.x * blockDim.x)
        if (owned[e[i].item])
            e[i].item = (int32_t)((uint32_t)e[i].item | MF_SGD_LOCAL_FLAG);
}

} // namespace sgd

#endif
