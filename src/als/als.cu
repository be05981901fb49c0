/* The CUDA engine of ALS-WR. The ratings live on the device twice, as CSR (users) and CSC
 * (items), uploaded once and cached on the matrix. Each half-step walks the rows in
 * batches whose partial systems fit the memory budget: the Gram kernel writes one partial
 * system per segment of at most ALS_SEGMENT ratings (so a row with 200K ratings spreads
 * over many blocks), and the solver sums a row's partials in a fixed order (no atomics:
 * runs are reproducible) and solves it. See als_kernels.cuh for the system layout. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "als/als_cg.cuh"
#include "als/als_engine.cuh"
#include "als/als_gram_tc.cuh"
#include "als/als_internal.h"
#include "als/als_kernels.cuh"
#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm.h"

/* Ratings per Gram segment: long enough to amortize writing a partial system, short
 * enough that the longest rows of power-law data spread over many blocks. */
#define ALS_SEGMENT 2048
/* The partial systems of one batch take at most this much device memory. */
#define ALS_BATCH_BYTES ((size_t)2 << 30)

namespace mf_als_gpu
{

/* The padded order of a rank-k system (room for the augmented row) and its tile count. */
int padded_order(int k)
{
    return (k + 1 + 7) / 8 * 8;
}
int tile_count(int kp)
{
    return (kp / 8) * (kp / 8 + 1) / 2;
}

/* The solver's shared memory: the system, its diagonal, the pivot rows (als_solve_kernel). */
size_t solver_smem_bytes(int kp, int tiles)
{
    return (size_t)tiles * ALS_TILE_FLOATS * sizeof(float) + ((size_t)kp + 16) * sizeof(float);
}

/* The solver variant for kp: one warp per row while a lane's share of a panel (kp / 32 rows)
 * fits in registers, else a block per row (128 threads up to ALS_SOLVE_SMALL, else one per
 * padded row). */
typedef void (*solve_kernel)(als_solve_args);
typedef void (*gram_kernel)(als_gram_args);
solve_kernel warp_solver(int kp)
{
    switch ((kp + 31) / 32) {
    case 1: return als_solve_warp_kernel<1>;
    case 2: return als_solve_warp_kernel<2>;
    case 3: return als_solve_warp_kernel<3>;
    case 4: return als_solve_warp_kernel<4>;
    case 5: return als_solve_warp_kernel<5>;
    default: return NULL;
    }
}

cudaError_t solver_allow_smem(int kp, size_t smem)
{
    const cudaFuncAttribute attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    if (solve_kernel f = warp_solver(kp))
        return cudaFuncSetAttribute(f, attr, (int)smem);
    return kp <= ALS_SOLVE_SMALL
               ? cudaFuncSetAttribute(als_solve_kernel<ALS_SOLVE_SMALL, 4>, attr, (int)smem)
               : cudaFuncSetAttribute(als_solve_kernel<288, 1>, attr, (int)smem);
}

/* The CG solver for kp (<= ALS_CG_MAX_KP: als.c asks for it only there). */
solve_kernel cg_solver(int kp)
{
    static const solve_kernel by_t8[] = {
        als_cg_kernel<1>,  als_cg_kernel<2>,  als_cg_kernel<3>,  als_cg_kernel<4>,
        als_cg_kernel<5>,  als_cg_kernel<6>,  als_cg_kernel<7>,  als_cg_kernel<8>,
        als_cg_kernel<9>,  als_cg_kernel<10>, als_cg_kernel<11>, als_cg_kernel<12>,
        als_cg_kernel<13>, als_cg_kernel<14>, als_cg_kernel<15>, als_cg_kernel<16>};
    return kp >= 8 && kp <= ALS_CG_MAX_KP ? by_t8[kp / 8 - 1] : NULL;
}

cudaError_t cg_grid_cap(int kp, int tiles, int sms, int64_t *cap)
{
    int per_sm = 0;
    solve_kernel f = cg_solver(kp);
    if (!f)
        return cudaErrorInvalidValue; /* als.c keeps CG to kp <= ALS_CG_MAX_KP */
    cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, f, als_cg_threads(kp), (size_t)tiles * ALS_TILE_FLOATS * sizeof(float));
    *cap = (int64_t)(per_sm > 0 ? per_sm : 1) * sms;
    return err;
}

cudaError_t solver_launch(const als_solve_args &a, unsigned systems, size_t smem,
                          cudaStream_t stream, int64_t cg_cap)
{
    if (a.cg_steps > 0) {
        /* A persistent grid of cg_cap blocks at most (als_cg.cuh says why). */
        solve_kernel f = cg_solver(a.kp);
        if (!f)
            return cudaErrorInvalidValue;
        als_solve_args b = a;
        b.systems = systems;
        f<<<(unsigned)(systems < cg_cap ? systems : cg_cap), als_cg_threads(a.kp),
            (size_t)a.tiles * ALS_TILE_FLOATS * sizeof(float), stream>>>(b);
        return cudaGetLastError();
    }
    if (solve_kernel f = warp_solver(a.kp))
        f<<<systems, 32, smem, stream>>>(a);
    else if (a.kp <= ALS_SOLVE_SMALL)
        als_solve_kernel<ALS_SOLVE_SMALL, 4><<<systems, ALS_SOLVE_SMALL, smem, stream>>>(a);
    else
        als_solve_kernel<288, 1><<<systems, (a.kp + 31) / 32 * 32, smem, stream>>>(a);
    return cudaGetLastError();
}

size_t system_bytes(const cuda_engine *e)
{
    return (size_t)e->tiles * ALS_TILE_FLOATS * sizeof(float);
}

size_t solver_smem(const cuda_engine *e)
{
    return solver_smem_bytes(e->kp, e->tiles);
}

mf_status plan_side(cuda_engine *e, side_plan *s, int32_t rows, const int64_t *host_ptr)
{
    mf_ctx *ctx = e->ctx;
    s->rows = rows;
    s->host_row_seg = (int64_t *)malloc(((size_t)rows + 1) * sizeof(int64_t));
    if (!s->host_row_seg)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory for the plan");
    int64_t segs = 0;
    s->longest = 0;
    for (int32_t r = 0; r < rows; r++) {
        s->host_row_seg[r] = segs;
        int64_t n = host_ptr[r + 1] - host_ptr[r];
        int64_t c = (n + ALS_SEGMENT - 1) / ALS_SEGMENT;
        segs += c;
        if (c > s->longest)
            s->longest = (int32_t)c;
    }
    s->host_row_seg[rows] = segs;
    int64_t *begin = (int64_t *)malloc((size_t)(segs > 0 ? segs : 1) * sizeof(int64_t));
    int32_t *len = (int32_t *)malloc((size_t)(segs > 0 ? segs : 1) * sizeof(int32_t));
    mf_status st = MF_OK;
    if (!begin || !len)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory for the plan");
    for (int32_t r = 0; st == MF_OK && r < rows; r++) {
        int64_t g = s->host_row_seg[r];
        for (int64_t p = host_ptr[r]; p < host_ptr[r + 1]; p += ALS_SEGMENT, g++) {
            begin[g] = p;
            len[g] =
                (int32_t)(host_ptr[r + 1] - p < ALS_SEGMENT ? host_ptr[r + 1] - p : ALS_SEGMENT);
        }
    }
    if (st == MF_OK)
        st = mf_upload(ctx, &s->seg_begin, begin, (size_t)segs * sizeof(int64_t), "ALS segments");
    if (st == MF_OK)
        st = mf_upload(ctx, &s->seg_len, len, (size_t)segs * sizeof(int32_t), "ALS segments");
    if (st == MF_OK)
        st = mf_upload(ctx, &s->row_seg, s->host_row_seg, ((size_t)rows + 1) * sizeof(int64_t),
                       "ALS row segments");
    free(begin);
    free(len);
    return st;
}

/* The tensor-core Gram kernel for kp when this device and this build run it, else NULL
 * (the FP32 kernel runs). Its architecture is checked on the kernel itself: a build for
 * an older GPU, JIT-compiled on a newer one, has an empty body there. */
gram_kernel tc_gram(mf_ctx *ctx, int kp, bool split)
{
    if (ctx->link.cuda->prop.major < 8 || kp / 8 > 2 * ALS_TC_MAX_MB)
        return NULL;
#define ALS_TC_BY_T8(S)                                                                            \
    {                                                                                              \
        als_gram_tc_kernel<1, S>, als_gram_tc_kernel<2, S>, als_gram_tc_kernel<3, S>,              \
            als_gram_tc_kernel<4, S>, als_gram_tc_kernel<5, S>, als_gram_tc_kernel<6, S>,          \
            als_gram_tc_kernel<7, S>, als_gram_tc_kernel<8, S>, als_gram_tc_kernel<9, S>,          \
            als_gram_tc_kernel<10, S>, als_gram_tc_kernel<11, S>, als_gram_tc_kernel<12, S>,       \
            als_gram_tc_kernel<13, S>, als_gram_tc_kernel<14, S>, als_gram_tc_kernel<15, S>,       \
            als_gram_tc_kernel<16, S>                                                              \
    }
    static const gram_kernel split_by_t8[] = ALS_TC_BY_T8(true);
    static const gram_kernel tf32_by_t8[] = ALS_TC_BY_T8(false);
#undef ALS_TC_BY_T8
    const gram_kernel *by_t8 = split ? split_by_t8 : tf32_by_t8;
    const gram_kernel f = by_t8[kp / 8 - 1];
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, f) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: leave no error for the next check */
        return NULL;
    }
    return attr.ptxVersion >= 80 && attr.binaryVersion >= 80 ? f : NULL;
}

/* Ratings per Gram segment from which AUTO takes the tensor-core kernel. Measured on an
 * H100 at k = 100 (Netflix-shaped, bench_als): item systems (segments of ~1,500 ratings)
 * 41 ms FP32 against 34 ms on tensor cores; user systems (~200) 37 ms against 42: each of
 * the tensor-core kernel's stages and segments costs more fixed work, which short rows do
 * not amortize. */
#define ALS_TC_MIN_SEGMENT 512

/* The Gram kernel of side s: tensor cores (3xTF32) or FP32 with one thread per lower tile,
 * in whole warps; two or more stages of staged rows in shared memory either way. */
mf_status pick_gram(cuda_engine *e, side_plan *s, int mode)
{
    mf_ctx *ctx = e->ctx;
    int64_t segs = 0; /* over the whole matrix: a shard chooses as the whole does */
    for (int32_t r = 0; r < s->rows; r++)
        segs += (s->whole_ptr[r + 1] - s->whole_ptr[r] + ALS_SEGMENT - 1) / ALS_SEGMENT;
    const bool long_rows = segs > 0 && s->whole_ptr[s->rows] / segs >= ALS_TC_MIN_SEGMENT;
    const bool split = mode != MF_ALS_GRAM_TF32 && mode != MF_ALS_GRAM_TF32_LONG;
    const bool want_tc = mode == MF_ALS_GRAM_TC || mode == MF_ALS_GRAM_TF32 ||
                         ((mode == MF_ALS_GRAM_AUTO || mode == MF_ALS_GRAM_TF32_LONG) && long_rows);
    gram_kernel tc = want_tc ? tc_gram(ctx, e->kp, split) : NULL;
    /* heads (and tails) of DEPTH + 1 stages: up to 141 KB at kp = 128 split, past what
     * sm_86 and sm_89 allow a block (99 KB); there the FP32 kernel runs. */
    const size_t tc_smem = (size_t)(split ? 2 : 1) * (ALS_TC_DEPTH + 1) * ALS_TC_ROWS *
                           als_tc_stride(e->kp) * sizeof(float);
    cudaFuncAttributes attr;
    if (tc && (cudaFuncGetAttributes(&attr, tc) != cudaSuccess ||
               tc_smem + attr.sharedSizeBytes > ctx->link.cuda->prop.sharedMemPerBlockOptin)) {
        (void)cudaGetLastError();
        tc = NULL;
    }
    gram_launch *g = &s->gram;
    g->tc = tc != NULL;
    if (tc) {
        g->kernel = tc;
        g->threads = 32 * als_tc_warps(als_tc_row_blocks(e->kp));
        g->smem = tc_smem;
    } else {
        g->kernel = als_gram_kernel;
        g->threads = (e->tiles + 31) / 32 * 32;
        g->smem = (size_t)2 * ALS_GRAM_ROWS * e->kp * sizeof(float);
    }
    MF_CUDA_TRY(ctx, cudaFuncSetAttribute(g->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)g->smem));
    int per_sm = 0;
    MF_CUDA_TRY(ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, g->kernel, g->threads,
                                                                   g->smem));
    g->blocks = (int64_t)(per_sm > 0 ? per_sm : 1) * ctx->link.cuda->prop.multiProcessorCount;
    return MF_OK;
}

/* Rows per batch: as many as keep their partial systems within the budget. */
mf_status batch_budget(cuda_engine *e, size_t *slots)
{
    size_t budget = ALS_BATCH_BYTES;
    mf_dmem *m = &e->ctx->dmem;
    if (m->limit) {
        size_t left = m->limit > m->current ? m->limit - m->current : 0;
        if (left / 10 * 9 < budget)
            budget = left / 10 * 9;
    } else if (e->device_free / 2 < budget) {
        budget = e->device_free / 2;
    }
    *slots = budget / system_bytes(e);
    return MF_OK;
}

/* The partial systems of segments [s0, s0 + nseg) into slots. */
cudaError_t launch_gram(cuda_engine *e, const side_plan *s, const float *F, int64_t s0,
                        int64_t nseg, float *slots)
{
    if (nseg == 0)
        return cudaSuccess;
    als_gram_args g = {
        (const int64_t *)s->seg_begin.ptr,
        (const int32_t *)s->seg_len.ptr,
        s0,
        nseg,
        s->idx,
        s->val,
        F,
        e->ks,
        e->kp,
        e->tiles,
        slots,
        e->biases ? (const float *)(s == &e->side[MF_ALS_USERS] ? e->bi.ptr : e->bu.ptr) : NULL,
        e->mean};
    const gram_launch &k = s->gram;
    const int64_t blocks = nseg < k.blocks ? nseg : k.blocks;
    k.kernel<<<(unsigned)blocks, k.threads, k.smem, e->ctx->link.cuda->stream>>>(g);
    return cudaGetLastError();
}

/* Solve rows [r0, r1), whose partial systems start at segment s0 in slots, into X. */
cudaError_t launch_solve(cuda_engine *e, const side_plan *s, int32_t r0, int32_t r1, int64_t s0,
                         const float *slots, float *X)
{
    if (r1 == r0)
        return cudaSuccess;
    float *bias_out =
        e->biases ? (float *)(s == &e->side[MF_ALS_USERS] ? e->bu.ptr : e->bi.ptr) : NULL;
    als_solve_args a = {s->ptr,
                        (const int64_t *)s->row_seg.ptr,
                        r0,
                        s0,
                        slots,
                        e->ks,
                        e->kp,
                        e->tiles,
                        e->lambda,
                        X,
                        (unsigned long long *)e->failed.ptr + (s == &e->side[MF_ALS_USERS] ? 0 : 1),
                        e->biases ? e->k : -1,
                        e->lambda_bias,
                        bias_out,
                        e->weighted,
                        e->cg_steps,
                        0};
    return solver_launch(a, (unsigned)(r1 - r0), solver_smem(e), e->ctx->link.cuda->stream,
                         e->cg_cap);
}

/* Fold the finished batches' times, oldest first, into the engine's seconds; `wait`: wait
 * for the oldest (the ring is full) or, with wait > 1, for every one (settle). */
cudaError_t marks_fold(cuda_engine *e, int wait)
{
    while (e->mark_count > 0) {
        cudaEvent_t *m = e->marks[e->mark_head];
        cudaError_t err = wait ? cudaEventSynchronize(m[2]) : cudaEventQuery(m[2]);
        if (err == cudaErrorNotReady)
            return cudaSuccess;
        float gram_ms = 0.0f, solve_ms = 0.0f;
        if (err == cudaSuccess)
            err = cudaEventElapsedTime(&gram_ms, m[0], m[1]);
        if (err == cudaSuccess)
            err = cudaEventElapsedTime(&solve_ms, m[1], m[2]);
        if (err != cudaSuccess)
            return err;
        e->gram_seconds += 1e-3 * gram_ms;
        e->solve_seconds += 1e-3 * solve_ms;
        e->mark_head = (e->mark_head + 1) % ALS_TIMING_MARKS;
        e->mark_count--;
        if (wait == 1)
            wait = 0;
    }
    return cudaSuccess;
}

/* One batch, queued: its Gram kernel and its solver between three events of the ring. */
cudaError_t queue_batch(cuda_engine *e, const side_plan *s, const float *F, int32_t r0, int32_t r1,
                        int64_t s0, float *slots, float *X)
{
    cudaStream_t stream = e->ctx->link.cuda->stream;
    cudaError_t err = e->mark_count == ALS_TIMING_MARKS ? marks_fold(e, 1) : cudaSuccess;
    cudaEvent_t *m = e->marks[(e->mark_head + e->mark_count) % ALS_TIMING_MARKS];
    const int64_t nseg = s->host_row_seg[r1] - s0;
    if (err == cudaSuccess)
        err = cudaEventRecord(m[0], stream);
    if (err == cudaSuccess)
        err = launch_gram(e, s, F, s0, nseg, slots);
    if (err == cudaSuccess)
        err = cudaEventRecord(m[1], stream);
    if (err == cudaSuccess)
        err = launch_solve(e, s, r0, r1, s0, slots, X);
    if (err == cudaSuccess)
        err = cudaEventRecord(m[2], stream);
    if (err == cudaSuccess)
        e->mark_count++;
    return err;
}

/* The half step's room for partial systems: *want of side s's segments (all of them when
 * they fit), in the engine's own batch (own_slots) or, under a context limit, in *slots taken
 * for this half step (put_slots gives it back). MF_ERR_OUT_OF_MEMORY when not even the
 * longest row's segments fit. */
mf_status take_slots(cuda_engine *e, const side_plan *s, mf_dbuf *slots, size_t *want)
{
    *slots = mf_dbuf{NULL, 0};
    size_t max_slots = 0;
    MF_TRY(batch_budget(e, &max_slots));
    if (max_slots < (size_t)s->longest || max_slots == 0)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_als_run: the device-memory limit leaves room for %zu partial systems "
                       "of %zu bytes, but one row needs %d",
                       max_slots, system_bytes(e), s->longest);
    const size_t segments = (size_t)(s->host_row_seg[s->hi] - s->host_row_seg[s->lo]);
    *want = segments < max_slots ? segments : max_slots;
    if (!e->slots.ptr)
        MF_TRY(own_slots(e));
    *slots = e->slots;
    if (!slots->ptr)
        return mf_dmem_alloc(e->ctx, slots, (*want > 0 ? *want : 1) * system_bytes(e),
                             "ALS partial systems");
    if (*want > e->slots.bytes / system_bytes(e))
        *want = e->slots.bytes / system_bytes(e);
    return MF_OK;
}

void put_slots(cuda_engine *e, mf_dbuf *slots)
{
    if (slots->ptr && slots->ptr != e->slots.ptr)
        mf_dmem_free(e->ctx, slots);
}

int32_t batch_end(const side_plan *s, int32_t r0, int32_t end, size_t want)
{
    const int64_t s0 = s->host_row_seg[r0];
    int32_t r1 = r0;
    while (r1 < end && (size_t)(s->host_row_seg[r1 + 1] - s0) <= want)
        r1++;
    return r1;
}

/* Queues the half step's batches; nothing here waits for the device (settle does). */
mf_status half_step(mf_als_engine *base, mf_als_side which)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    if (which == MF_ALS_ITEMS && e->sum_items)
        return half_step_summed(e);
    side_plan *s = &e->side[which];
    const float *F = (const float *)(which == MF_ALS_USERS ? e->V.ptr : e->U.ptr);
    float *X = (float *)(which == MF_ALS_USERS ? e->U.ptr : e->V.ptr);
    unsigned long long *failed = (unsigned long long *)e->failed.ptr + which;
    /* All bits set: no breakdown yet (the solver keeps the minimum). */
    MF_CUDA_TRY(ctx, cudaMemsetAsync(failed, 0xff, sizeof *failed, stream));
    if (s->hi == s->lo)
        return MF_OK;

    mf_dbuf slots = {NULL, 0};
    size_t want = 0;
    MF_TRY(take_slots(e, s, &slots, &want));
    mf_status st = MF_OK;
    for (int32_t r0 = s->lo; st == MF_OK && r0 < s->hi;) {
        const int32_t r1 = batch_end(s, r0, s->hi, want);
        const int64_t s0 = s->host_row_seg[r0];
        const cudaError_t err = queue_batch(e, s, F, r0, r1, s0, (float *)slots.ptr, X);
        if (err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "ALS half-step kernels", __FILE__, __LINE__);
        r0 = r1;
    }
    put_slots(e, &slots);
    return st;
}

mf_status settle(mf_als_engine *base, double *gram, double *solve, mf_als_side *side)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cudaStream_t stream = ctx->link.cuda->stream;
    unsigned long long failed[2] = {ULLONG_MAX, ULLONG_MAX};
    MF_CUDA_TRY(
        ctx, cudaMemcpyAsync(failed, e->failed.ptr, sizeof failed, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    MF_CUDA_TRY(ctx, marks_fold(e, 2));
    *gram += e->gram_seconds;
    *solve += e->solve_seconds;
    e->gram_seconds = e->solve_seconds = 0.0;
    for (int w = 0; w < 2; w++) {
        if (failed[w] == ULLONG_MAX)
            continue;
        *side = (mf_als_side)w;
        return mf_fail(ctx, MF_ERR_NUMERIC,
                       "mf_als_run: the system of %s %llu broke down at %s %llu (lambda * "
                       "count too small for rank %d: not positive definite in float)",
                       w == MF_ALS_USERS ? "user" : "item", failed[w] >> 32,
                       e->cg_steps > 0 ? "CG step" : "pivot", failed[w] & 0xffffffffull, e->k);
    }
    return MF_OK;
}

mf_status engine_rmse(mf_als_engine *base, const mf_sparse *R, int precision, double *rmse)
{
    cuda_engine *e = (cuda_engine *)base;
    /* The measurement's buffers take the batch's room (the peak stays a half step's); the
     * next half step takes it back. */
    mf_dmem_free(e->ctx, &e->slots);
    mf_bias_terms b = {e->mean, (const float *)e->bu.ptr, (const float *)e->bi.ptr};
    return mf_rmse_compute_ex(e->ctx, (mf_sparse *)R, e->k, (const float *)e->U.ptr, e->kp,
                              (const float *)e->V.ptr, e->kp, e->biases ? &b : NULL,
                              MF_MEMORY_DEVICE, precision, rmse);
}

/* rows x k of a padded factor into dst with leading dimension ld (>= k): the padding (and
 * the bias feature 1 at column k) is not copied, columns past k of dst are left as they
 * are (als.c zeroes them first when a tuned rank is below the caller's). */
mf_status copy_out(cuda_engine *e, float *dst, const mf_dbuf *src, int32_t rows, int64_t ld)
{
    if (rows == 0)
        return MF_OK;
    cudaStream_t stream = e->ctx->link.cuda->stream;
    const size_t row_bytes = (size_t)e->k * sizeof(float), pitch = (size_t)ld * sizeof(float);
    MF_CUDA_TRY(e->ctx, cudaMemcpy2DAsync(dst, pitch, src->ptr, (size_t)e->kp * sizeof(float),
                                          row_bytes, (size_t)rows, cudaMemcpyDefault, stream));
    return MF_OK;
}

mf_status finish(mf_als_engine *base, float *U, float *V, int64_t ld, float *bu, float *bi)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(e->ctx->link.cuda->device);
    cudaStream_t stream = e->ctx->link.cuda->stream;
    MF_TRY(copy_out(e, U, &e->U, e->R->rows, ld));
    MF_TRY(copy_out(e, V, &e->V, e->R->cols, ld));
    if (bu && e->biases && e->R->rows > 0)
        MF_CUDA_TRY(e->ctx, cudaMemcpyAsync(bu, e->bu.ptr, (size_t)e->R->rows * sizeof(float),
                                            cudaMemcpyDefault, stream));
    if (bi && e->biases && e->R->cols > 0)
        MF_CUDA_TRY(e->ctx, cudaMemcpyAsync(bi, e->bi.ptr, (size_t)e->R->cols * sizeof(float),
                                            cudaMemcpyDefault, stream));
    MF_CUDA_TRY(e->ctx, cudaStreamSynchronize(stream));
    return MF_OK;
}

void shared(mf_als_engine *base, mf_als_side side, void **factors, size_t *row_bytes,
            float **biases)
{
    cuda_engine *e = (cuda_engine *)base;
    *factors = side == MF_ALS_USERS ? e->U.ptr : e->V.ptr;
    *row_bytes = (size_t)e->kp * sizeof(float);
    *biases = e->biases ? (float *)(side == MF_ALS_USERS ? e->bu.ptr : e->bi.ptr) : NULL;
}

void destroy(mf_als_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    for (int w = 0; w < 2; w++) {
        side_plan *s = &e->side[w];
        mf_dmem_free(ctx, &s->seg_begin);
        mf_dmem_free(ctx, &s->seg_len);
        mf_dmem_free(ctx, &s->row_seg);
        free(s->host_row_seg);
    }
    mf_dmem_free(ctx, &e->U);
    mf_dmem_free(ctx, &e->V);
    mf_dmem_free(ctx, &e->bu);
    mf_dmem_free(ctx, &e->bi);
    mf_dmem_free(ctx, &e->failed);
    mf_dmem_free(ctx, &e->slots);
    summed_free(e);
    for (int i = 0; i < 3; i++)
        if (e->ev[i])
            cudaEventDestroy(e->ev[i]);
    for (int b = 0; b < ALS_TIMING_MARKS; b++)
        for (int i = 0; i < 3; i++)
            if (e->marks[b][i])
                cudaEventDestroy(e->marks[b][i]);
    free(e);
}

/* Without a context limit the engine holds the larger side's batch of partial systems for
 * its life: taking 2 GB from the pool every half step cost 1.1 ms of host time on an H200
 * (the device idle meanwhile), and 2-4 ms with four devices' threads in one process (the
 * driver serializes it), which made every rank of a group late by turns. Under a limit the
 * half steps take and give back their batch, leaving the room to the measurements. */
mf_status own_slots(cuda_engine *e)
{
    if (e->ctx->dmem.limit)
        return MF_OK;
    size_t max_slots = 0, want = 0;
    MF_TRY(batch_budget(e, &max_slots));
    for (int w = 0; w < 2; w++) {
        const side_plan *s = &e->side[w];
        const size_t segments = (size_t)(s->host_row_seg[s->hi] - s->host_row_seg[s->lo]);
        const size_t side = segments < max_slots ? segments : max_slots;
        want = side > want ? side : want;
    }
    return want > 0
               ? mf_dmem_alloc(e->ctx, &e->slots, want * system_bytes(e), "ALS partial systems")
               : MF_OK;
}

mf_status setup(cuda_engine *e, const mf_als_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    cudaStream_t stream = ctx->link.cuda->stream;
    for (int i = 0; i < 3; i++)
        MF_CUDA_TRY(ctx, cudaEventCreate(&e->ev[i]));
    for (int b = 0; b < ALS_TIMING_MARKS; b++)
        for (int i = 0; i < 3; i++)
            MF_CUDA_TRY(ctx, cudaEventCreate(&e->marks[b][i]));
    MF_CUDA_TRY(ctx, solver_allow_smem(e->kp, solver_smem(e)));
    if (e->cg_steps > 0)
        MF_CUDA_TRY(ctx, cg_grid_cap(e->kp, e->tiles, ctx->link.cuda->prop.multiProcessorCount,
                                     &e->cg_cap));
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    /* Each side reads its part (the whole R, or this rank's shard). A pattern has no values
     * on either side: the Gram kernel reads NULL as all ones. */
    mf_sparse *Ru = mf_als_part(s, MF_ALS_USERS), *Ri = mf_als_part(s, MF_ALS_ITEMS);
    /* A shard's CSC is uploaded from its host transpose: built on the device, it would first
     * upload the shard's CSR, which nothing here reads (the whole R's CSR serves both). */
    if (s->part[MF_ALS_ITEMS])
        MF_TRY(mf_sparse_host_transpose(Ri));
    MF_TRY(mf_sparse_device_csr(Ru, &ptr, &idx, &val));
    e->side[MF_ALS_USERS].ptr = ptr, e->side[MF_ALS_USERS].idx = idx;
    e->side[MF_ALS_USERS].val = val;
    MF_TRY(mf_sparse_device_csc(Ri, &ptr, &idx, &val));
    e->side[MF_ALS_ITEMS].ptr = ptr, e->side[MF_ALS_ITEMS].idx = idx;
    e->side[MF_ALS_ITEMS].val = val;
    MF_TRY(mf_sparse_host_transpose(Ri)); /* the item side's plan (built on first use) */
    MF_TRY(plan_side(e, &e->side[MF_ALS_USERS], R->rows, Ru->row_ptr));
    MF_TRY(plan_side(e, &e->side[MF_ALS_ITEMS], R->cols, Ri->transpose.ptr));
    e->side[MF_ALS_USERS].whole_ptr = s->line_ptr[0] ? s->line_ptr[0] : Ru->row_ptr;
    e->side[MF_ALS_ITEMS].whole_ptr = s->line_ptr[1] ? s->line_ptr[1] : Ri->transpose.ptr;
    for (int w = 0; w < 2; w++)
        e->side[w].lo = s->lo[w], e->side[w].hi = s->hi[w];
    for (int w = 0; w < 2; w++)
        MF_TRY(pick_gram(e, &e->side[w], s->gram_kernel));

    size_t ub = (size_t)R->rows * e->kp * sizeof(float),
           vb = (size_t)R->cols * e->kp * sizeof(float);
    MF_TRY(mf_dmem_alloc(ctx, &e->U, ub, "ALS user factors"));
    MF_TRY(mf_dmem_alloc(ctx, &e->V, vb, "ALS item factors"));
    MF_TRY(mf_dmem_alloc(ctx, &e->failed, 2 * sizeof(unsigned long long), "ALS breakdown flags"));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->failed.ptr, 0xff, e->failed.bytes, stream));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->U.ptr, 0, ub, stream));
    if (e->biases) {
        MF_TRY(mf_dmem_alloc(ctx, &e->bu, (size_t)R->rows * sizeof(float) + 4, "ALS user biases"));
        MF_TRY(mf_dmem_alloc(ctx, &e->bi, (size_t)R->cols * sizeof(float) + 4, "ALS item biases"));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(e->bu.ptr, 0, e->bu.bytes, stream));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(e->bi.ptr, 0, e->bi.bytes, stream));
    }
    /* V padded on the host (zeros past k; the bias feature 1 at column k), then one copy. */
    float *V0 = (float *)calloc((size_t)R->cols * e->kp + 1, sizeof(float));
    if (!V0)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory for V");
    for (int64_t i = 0; i < R->cols; i++) {
        memcpy(V0 + i * e->kp, s->V0 + i * e->k, (size_t)e->k * sizeof(float));
        if (e->biases)
            V0[i * e->kp + e->k] = 1.0f;
    }
    cudaError_t err = cudaMemcpyAsync(e->V.ptr, V0, vb, cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream); /* V0 is freed next */
    free(V0);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "uploading the initial V", __FILE__, __LINE__);
    if (s->sum_items)
        MF_TRY(summed_setup(e, s));
    size_t total = 0;
    MF_CUDA_TRY(ctx, cudaMemGetInfo(&e->device_free, &total));
    return own_slots(e);
}

} // namespace mf_als_gpu

using namespace mf_als_gpu;

mf_status mf_cuda_als_engine(const mf_als_setup *s, mf_als_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(ctx->link.cuda->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_als_run: out of host memory");
    e->base.half_step = half_step;
    e->base.settle = settle;
    e->base.rmse = engine_rmse;
    e->base.finish = finish;
    e->base.shared = shared;
    e->base.destroy = destroy;
    e->ctx = ctx;
    e->R = s->R;
    e->k = s->k;
    e->biases = s->biases;
    e->ks = s->k + (s->biases ? 1 : 0);
    e->kp = padded_order(e->ks);
    e->tiles = tile_count(e->kp);
    e->lambda = s->lambda;
    e->lambda_bias = s->lambda_bias;
    e->weighted = s->weighted;
    e->cg_steps = s->cg_steps;
    e->mean = s->biases ? s->mean : 0.0f;
    mf_status st = setup(e, s);
    if (st != MF_OK) {
        destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
