/* The CUDA engine of Hogwild SGD (sgd_engine.cuh): which epoch kernel runs for the engine's
 * shape (lanes, storage, order, biases), the persistent grid it runs on, and one pass of it. */
#include <string.h>

#include "sgd/sgd_engine.cuh"

namespace mf_sgd_gpu
{

namespace
{

template <int KPL, bool HALF, bool RESIDENT> const void *epoch_fn()
{
    return reinterpret_cast<const void *>(&sgd::epoch_kernel<KPL, HALF, RESIDENT>);
}
template <int KPL, bool HALF> const void *local_epoch_fn()
{
    return reinterpret_cast<const void *>(&sgd::epoch_kernel<KPL, HALF, true, sgd::LOCAL_ALL>);
}

template <int KPL> const void *pick_epoch(bool half, bool resident, int local)
{
    if (local)
        return half ? local_epoch_fn<KPL, true>() : local_epoch_fn<KPL, false>();
    if (half)
        return resident ? epoch_fn<KPL, true, true>() : epoch_fn<KPL, true, false>();
    return resident ? epoch_fn<KPL, false, true>() : epoch_fn<KPL, false, false>();
}

template <int G, int KPL, bool HALF> const void *group_fn(bool biased, int local)
{
    if (local)
        return reinterpret_cast<const void *>(
            &sgd::epoch_group_kernel<G, KPL, HALF, true, sgd::LOCAL_ALL>);
    return biased ? reinterpret_cast<const void *>(&sgd::epoch_group_kernel<G, KPL, HALF, true>)
                  : reinterpret_cast<const void *>(&sgd::epoch_group_kernel<G, KPL, HALF, false>);
}

} // namespace

/* The smallest lane width that holds k: rows of 32 * kpl elements. */
int lane_width(int k)
{
    int kpl = 1;
    while (32 * kpl < k)
        kpl *= 2;
    return kpl;
}

/* Lanes per update under the user-chunk order: 16 bytes of a row a lane (one vector
 * access) where that leaves fewer than 32, at least 4. Rows of 512 bytes and more (fp32 from
 * k = 65, since rows are 32 times a power of two; fp16 from k = 129) take a whole warp. Against
 * whole warps in one run (bench_sgd
 * --lanes 32,0, H100): k = 128 fp16 with biases 3-9% more updates per second on the three
 * shapes; k = 32 and 64, fp16 and fp32, -2% to +4%. 8 lanes of 32 bytes at k = 128 fp16
 * were 0-20% slower than 16 (98 registers). */
int group_lanes(int kp, bool half)
{
    if (mf_sgd_debug_lanes == 32)
        return 32;
    const int g = kp * (half ? 2 : 4) / 16;
    return g >= 32 ? 32 : g < 4 ? 4 : g;
}

/* The kernel for the engine's lane width, storage, order and biases (local: held in each
 * block's shared memory). */
const void *epoch_kernel_for(const cuda_engine *e, int local)
{
    if (e->lanes < 32) {
        const bool bias = e->biases != 0;
        if (e->half)
            return e->lanes == 4   ? group_fn<4, 8, true>(bias, local)
                   : e->lanes == 8 ? group_fn<8, 8, true>(bias, local)
                                   : group_fn<16, 8, true>(bias, local);
        return e->lanes == 8 ? group_fn<8, 4, false>(bias, local)
                             : group_fn<16, 4, false>(bias, local);
    }
    switch (e->kpl) {
    case 1: return pick_epoch<1>(e->half, e->resident, local);
    case 2: return pick_epoch<2>(e->half, e->resident, local);
    case 4: return pick_epoch<4>(e->half, e->resident, local);
    case 8: return pick_epoch<8>(e->half, e->resident, local);
    default: return pick_epoch<16>(e->half, e->resident, local);
    }
}

/* The dynamic shared memory of the epoch kernel: the sink and the bias slots of a local one
 * (sgd_local_bias.cuh), none otherwise. */
size_t epoch_smem_bytes(const cuda_engine *e, int local)
{
    return local ? (size_t)(MF_SGD_LOCAL_SINK + e->slots) * sizeof(float) : 0;
}

/* The persistent grid of the epoch kernel: as many workers (update groups) as fit at once,
 * or the caller's number. Plain kernels run blocks of 256 threads (32 when the workers
 * are not a multiple of 8 warps); local-bias kernels one block per multiprocessor, whose
 * shared memory holds the item biases (sgd::local_block_threads). */
mf_status launch_shape(cuda_engine *e, const mf_sgd_setup *s, int local)
{
    mf_ctx *ctx = e->ctx;
    const int block = local ? sgd::local_block_threads(e->lanes, e->kpl) : 256;
    const size_t smem = epoch_smem_bytes(e, local);
    int per_sm = 0;
    MF_CUDA_TRY(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                         &per_sm, epoch_kernel_for(e, local), block, smem));
    const int per_warp = 32 / e->lanes, block_warps = block / 32;
    int64_t most = (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->link.cuda->prop.multiProcessorCount *
                   block_warps * per_warp;
    int64_t groups = s->workers > 0 && s->workers < most ? s->workers : most;
    groups = groups < s->max_workers ? groups : s->max_workers;
    const int64_t warps = (groups + per_warp - 1) / per_warp;
    if (local) {
        /* Every multiprocessor a block (each holds its own copy of the biases), the warps
         * spread over them: fewer workers than the device holds (the rule of one per 128
         * chunks, or the caller's number) still reach every multiprocessor. The last block's
         * surplus warps take no chunk (a.groups). */
        const int64_t sms =
            (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->link.cuda->prop.multiProcessorCount;
        const int64_t blocks = warps < sms ? warps : sms;
        const int64_t per_block = (warps + blocks - 1) / blocks;
        e->threads = (unsigned)(32 * per_block);
        e->blocks = (unsigned)((warps + per_block - 1) / per_block);
    } else if (warps % 8 == 0)
        e->threads = 256, e->blocks = (unsigned)(warps / 8);
    else
        e->threads = 32, e->blocks = (unsigned)warps;
    e->groups = groups;
    e->base.workers = (int)groups;
    if (!local)
        e->plain_blocks = e->blocks, e->plain_threads = e->threads, e->plain_groups = groups;
    return MF_OK;
}

/* One pass of the epoch kernel (local: sgd::LOCAL_*) over n chunks, chunk c being entries
 * [begin[c], end[c]), in the order of the permutation (seed, order); a local pass's block
 * copies are merged into the global biases after it. */
mf_status run_pass(cuda_engine *e, sgd::epoch_args &a, const int64_t *begin, const int64_t *end,
                   int64_t n, int local, uint64_t seed, uint32_t order)
{
    if (n == 0)
        return MF_OK;
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(a.next, 0, sizeof *a.next, stream));
    a.chunk_begin = begin;
    a.chunk_end = end;
    a.nchunks = n;
    a.perm = mf_sgd_perm_make((uint64_t)n, seed, order);
    a.groups = local ? e->groups : e->plain_groups;
    void *args[] = {&a};
    MF_CUDA_TRY(ctx, cudaLaunchKernel(epoch_kernel_for(e, local),
                                      dim3(local ? e->blocks : e->plain_blocks),
                                      dim3(local ? e->threads : e->plain_threads), args,
                                      epoch_smem_bytes(e, local), stream));
    if (local) {
        sgd::merge_local_bias_kernel<<<mf_cuda_grid(ctx->link.cuda, e->slots, 256, 4), 256, 0,
                                       stream>>>(a.local, (float *)e->bi.ptr, MF_SGD_BIAS_STRIDE);
        MF_CUDA_TRY(ctx, cudaGetLastError());
    }
    return MF_OK;
}

} // namespace mf_sgd_gpu
