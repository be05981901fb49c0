// The items' half step of ALS with sharded users (mf_als_setup.sum_items; mf_als_layout in
// mfact.h, the plan in docs/scaling.md). This rank's engine holds its users alone, so it
// forms every item's system from its own users' ratings, the group sums the systems (one
// all-reduce a chunk of items, the same bits on every rank), and every rank solves every
// item: V stays whole and the same everywhere, and U never travels.
//
// The systems are formed per segment as in any half step (als.cu), then a row's segments
// are added into one system (sum_segments, in segment order), so that what travels is one
// system an item whatever the ranks' segments. The solver then runs on a plan with one
// segment per item and the whole matrix's item offsets: the weighted lambda counts every
// rank's ratings, and an item no rank has a rating of gets a zero row.
#include <stdlib.h>

#include "als/als_engine.cuh"
#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"

namespace mf_als_gpu
{

/* Bytes of summed systems a chunk holds: a fixed figure (with system_bytes, the same on
 * every rank), so that every rank cuts the items into the same chunks and makes the same
 * all-reduces. */
#define ALS_SUM_BYTES ((size_t)512 << 20)

namespace
{

/* out[r] (r < rows) = the sum of row r0 + r's partial systems, in segment order (zeros for a
 * row without entries on this rank). */
__global__ void sum_segments(const int64_t *row_seg, int64_t r0, int64_t rows, int64_t s0,
                             const float4 *slots, int64_t sys4, float4 *out)
{
    const int64_t total = rows * sys4;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / sys4, x = t - r * sys4;
        const int64_t sb = row_seg[r0 + r] - s0, se = row_seg[r0 + r + 1] - s0;
        float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int64_t g = sb; g < se; g++) {
            const float4 v = slots[g * sys4 + x];
            s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
        }
        out[r * sys4 + x] = s;
    }
}

/* Rows [r0, r1) of the items' side: their partial systems into slots, then summed into
 * out (the chunk's rows from its first, c0). */
cudaError_t form_rows(cuda_engine *e, const side_plan *s, int32_t r0, int32_t r1, float *slots,
                      float *out)
{
    const int64_t s0 = s->host_row_seg[r0], nseg = s->host_row_seg[r1] - s0;
    cudaError_t err = launch_gram(e, s, (const float *)e->U.ptr, s0, nseg, slots);
    const int64_t sys4 = (int64_t)(system_bytes(e) / sizeof(float4)), rows = r1 - r0;
    if (err == cudaSuccess && rows > 0) {
        const mf_cuda *c = e->ctx->link.cuda;
        sum_segments<<<mf_cuda_grid(c, rows * sys4, 256, 8), 256, 0, c->stream>>>(
            (const int64_t *)s->row_seg.ptr, r0, rows, s0, (const float4 *)slots, sys4,
            (float4 *)out);
        err = cudaGetLastError();
    }
    return err;
}

} // namespace

mf_status summed_setup(cuda_engine *e, const mf_als_setup *s)
{
    mf_ctx *ctx = e->ctx;
    const int32_t items = s->R->cols;
    e->sum_items = 1;
    MF_TRY(mf_upload(ctx, &e->sum_ptr, s->line_ptr[MF_ALS_ITEMS],
                     ((size_t)items + 1) * sizeof(int64_t), "ALS whole item offsets"));
    int64_t *seg = (int64_t *)malloc(((size_t)items + 1) * sizeof *seg);
    if (!seg)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory for the plan");
    for (int64_t i = 0; i <= items; i++)
        seg[i] = i;
    const mf_status st = mf_upload(ctx, &e->sum_seg, seg, ((size_t)items + 1) * sizeof *seg,
                                   "ALS summed systems' plan");
    free(seg);
    MF_TRY(st);
    e->sum_chunk = mf_als_sum_chunk(items, system_bytes(e), ALS_SUM_BYTES);
    /* made here, so that a rank without room fails before any exchange (als.c agrees on the
     * engines), never inside a half step while the others wait in a sum */
    return mf_dmem_alloc(ctx, &e->sums, (size_t)e->sum_chunk * system_bytes(e),
                         "ALS summed item systems");
}

void summed_free(cuda_engine *e)
{
    mf_dmem_free(e->ctx, &e->sum_ptr);
    mf_dmem_free(e->ctx, &e->sum_seg);
    mf_dmem_free(e->ctx, &e->sums);
}

/* Every rank runs every chunk's all-reduce whatever failed on it (a failed rank sends what
 * its buffer holds): the iteration's agreement then stops them all (als.c). The timing
 * events put the all-reduce in the Gram's seconds (the comm's exchange time has it too). */
mf_status half_step_summed(cuda_engine *e)
{
    mf_ctx *ctx = e->ctx;
    mf_comm *comm = ctx->comm;
    cudaStream_t stream = ctx->link.cuda->stream;
    side_plan *s = &e->side[MF_ALS_ITEMS];
    unsigned long long *failed = (unsigned long long *)e->failed.ptr + MF_ALS_ITEMS;
    /* no early return from here on: a failure is kept, and every chunk's sum still made */
    mf_status st = MF_OK;
    const cudaError_t cleared = cudaMemsetAsync(failed, 0xff, sizeof *failed, stream);
    if (cleared != cudaSuccess)
        st = mf_cuda_fail(ctx, cleared, "ALS breakdown word", __FILE__, __LINE__);
    mf_dbuf slots = {NULL, 0};
    size_t want = 0;
    if (st == MF_OK)
        st = take_slots(e, s, &slots, &want);
    /* One segment per item, the whole matrix's counts: the solver's view of the sums. */
    side_plan summed = *s;
    summed.ptr = (const int64_t *)e->sum_ptr.ptr;
    summed.row_seg.ptr = e->sum_seg.ptr;
    const size_t sys_floats = system_bytes(e) / sizeof(float);
    for (int32_t c0 = 0; c0 < s->rows; c0 += (int32_t)e->sum_chunk) {
        const int32_t c1 = s->rows - c0 < e->sum_chunk ? s->rows : c0 + (int32_t)e->sum_chunk;
        cudaError_t err = e->mark_count == ALS_TIMING_MARKS ? marks_fold(e, 1) : cudaSuccess;
        cudaEvent_t *m = e->marks[(e->mark_head + e->mark_count) % ALS_TIMING_MARKS];
        if (err == cudaSuccess)
            err = cudaEventRecord(m[0], stream);
        for (int32_t r0 = c0; st == MF_OK && err == cudaSuccess && r0 < c1;) {
            const int32_t r1 = batch_end(s, r0, c1, want);
            if (r1 == r0) { /* cannot happen: want >= the longest item's segments */
                st = mf_fail(ctx, MF_ERR_INTERNAL, "mf_als_run: item %d does not fit a batch", r0);
                break;
            }
            err = form_rows(e, s, r0, r1, (float *)slots.ptr,
                            (float *)e->sums.ptr + (size_t)(r0 - c0) * sys_floats);
            r0 = r1;
        }
        if (st == MF_OK && err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "ALS summed half-step kernels", __FILE__, __LINE__);
        const mf_status sum =
            comm->ops->sum_buffer(comm, ctx, e->sums.ptr, (size_t)(c1 - c0) * sys_floats, 0);
        st = st != MF_OK ? st : sum;
        if (st != MF_OK)
            continue;
        err = cudaEventRecord(m[1], stream);
        if (err == cudaSuccess)
            err =
                launch_solve(e, &summed, c0, c1, c0, (const float *)e->sums.ptr, (float *)e->V.ptr);
        if (err == cudaSuccess)
            err = cudaEventRecord(m[2], stream);
        if (err == cudaSuccess)
            e->mark_count++;
        else
            st = mf_cuda_fail(ctx, err, "ALS summed solver", __FILE__, __LINE__);
    }
    put_slots(e, &slots);
    return st;
}

} // namespace mf_als_gpu
