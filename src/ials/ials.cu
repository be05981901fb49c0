/* The CUDA engine of implicit-feedback ALS. The interactions go to the device once, as the
 * matrix's cached CSR and CSC. A half-step is a fixed sequence of stream-ordered launches
 * (ials_kernels.cuh): G = F^T F of the other side (row-chunk partials, reduced in a fixed
 * order, so runs repeat exactly), then either
 *   CG (the default): X G by a dense kernel, a warp per row adds lambda x and the row's
 *   sparse correction and forms the residual; then per step P G, and a warp per row
 *   finishes A p and takes the step (implicit's iteration, the system never formed); or
 *   exact: a block per row forms its k x k system in shared memory and solves it by
 *   Cholesky (as far as the device's shared memory holds the system: rank 224 on Hopper).
 * The host reads back one word per half-step: the first row whose system broke down.
 *
 * When the two orientations do not fit in the device memory left beside the factors and
 * the working buffers (setup decides), they stay in host memory (the CSR and the host
 * transpose, pinned where cudaHostRegister allows) and each half-step walks the solved
 * side's rows in batches: a batch's row offsets, CG segments, indices and values go to one
 * of two device buffers on a second stream while the kernels of the previous batch run,
 * and each batch runs its whole solve (CG: X G, init, then P G and a step, cg_steps times)
 * with the resident path's kernels on its rows. Per row that is the resident arithmetic in
 * the resident order, so the factors are the same bit for bit (see stream_* below). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/ranks.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "ials/ials_internal.h"
#include "ials/ials_kernels.cuh"

#include <cuda_fp16.h>

namespace
{

/* ---- the streamed interactions: layout of a batch ---------------------------------------- */

const size_t STREAM_ALIGN = 256;

size_t aligned(size_t b)
{
    return (b + STREAM_ALIGN - 1) / STREAM_ALIGN * STREAM_ALIGN;
}

/* Where a batch's pieces lie: in its transfer buffer T (the head, up to `meta`, is a copy of
 * the side's host blob; then the indices and the values) and in the work buffer W (CG's
 * vectors and segment partials; the loss's row totals at offset 0). Offsets are multiples
 * of STREAM_ALIGN, so float4 and half2 loads stay aligned. */
struct layout {
    size_t ptr, row_seg, lo, hi, seg_row, meta, idx, val, T;
    size_t R, P, AP, rs, PA, PB, W;
};

layout layout_of(int64_t rows, int64_t nnz, int64_t segs, bool has_val, bool cg, int kp)
{
    layout l = {};
    size_t o = 0;
    l.ptr = o, o += aligned(((size_t)rows + 1) * sizeof(int64_t));
    if (cg) {
        l.row_seg = o, o += aligned(((size_t)rows + 1) * sizeof(int64_t));
        l.lo = o, o += aligned((size_t)segs * sizeof(int64_t));
        l.hi = o, o += aligned((size_t)segs * sizeof(int64_t));
        l.seg_row = o, o += aligned((size_t)segs * sizeof(int32_t));
    }
    l.meta = o;
    l.idx = o, o += aligned((size_t)nnz * sizeof(int32_t));
    l.val = o, o += has_val ? aligned((size_t)nnz * sizeof(float)) : 0;
    l.T = o;
    size_t w = 0;
    if (cg) {
        const size_t vec = aligned((size_t)rows * kp * sizeof(float)),
                     part = aligned((size_t)segs * kp * sizeof(float));
        l.R = w, w += vec;
        l.P = w, w += vec;
        l.AP = w, w += vec;
        l.rs = w, w += aligned((size_t)rows * sizeof(float));
        l.PA = w, w += part;
        l.PB = w, w += part;
    }
    const size_t totals = aligned((size_t)rows * sizeof(double));
    l.W = w > totals ? w : totals;
    return l;
}

/* CG's segments of a row of n interactions (ials_kernels.cuh, cg_args). */
int64_t segments_of(int64_t n)
{
    return n > IALS_SEGMENT ? (n + IALS_SEGMENT - 1) / IALS_SEGMENT : 0;
}

/* row_seg[0..rows]: the first segment of each of the rows of ptr (rows + 1 offsets). */
void segment_starts(const int64_t *ptr, int32_t rows, int64_t *row_seg)
{
    row_seg[0] = 0;
    for (int32_t r = 0; r < rows; r++)
        row_seg[r + 1] = row_seg[r] + segments_of(ptr[r + 1] - ptr[r]);
}

/* The segments of rows [r0, r1) (row_seg as segment_starts makes it): their interactions
 * [lo, hi) less p0, and their rows less r0, at their index less s0 (a streamed batch's
 * rebasing; all 0 for a whole side). */
void fill_segments(const int64_t *ptr, const int64_t *row_seg, int32_t r0, int32_t r1, int64_t p0,
                   int64_t s0, int64_t *lo, int64_t *hi, int32_t *srow)
{
    for (int32_t r = r0; r < r1; r++)
        for (int64_t g = row_seg[r]; g < row_seg[r + 1]; g++) {
            const int64_t first = ptr[r] + (g - row_seg[r]) * IALS_SEGMENT;
            lo[g - s0] = first - p0;
            hi[g - s0] =
                (first + IALS_SEGMENT < ptr[r + 1] ? first + IALS_SEGMENT : ptr[r + 1]) - p0;
            srow[g - s0] = r - r0;
        }
}

/* Rows [r0, r1) of one side: interactions [p0, p1) and CG segments [s0, s1) of the side. */
struct batch {
    int32_t r0, r1;
    int64_t p0, p1, s0, s1;
    size_t meta_off; /* its head in the side's host blob */
    layout l;
};

/* How a host array reaches the device: pinned by us (unregistered at the end), pinned
 * already by someone else, or pageable (through the staging buffers, or directly). */
enum host_pin { PIN_NONE = 0, PIN_OURS = 1, PIN_THEIRS = 2 };

struct stream_side {
    batch *b;
    int nb;
    unsigned char *meta; /* the batches' heads (rebased offsets, segments), as on the device */
    bool meta_pinned;    /* cudaHostAlloc'd, else malloc'd */
    const int32_t *idx;  /* host: the CSR's (users) or the host transpose's (items) */
    const float *val;    /* NULL: a pattern */
    host_pin idx_pin, val_pin;
};

struct streamer {
    bool on;
    stream_side side[2];
    int nbuf;           /* transfer buffers: 2, or 1 where two do not fit */
    mf_dbuf T[2], W;    /* transfer buffers, work buffer */
    size_t inter_bytes; /* the two orientations' device bytes (for the log) */
    cudaStream_t copy;  /* the copies' stream */
    bool copy_made;
    cudaEvent_t copied[2];   /* batch copied into T[i] */
    cudaEvent_t freed[2];    /* the kernels reading T[i] are done */
    unsigned char *stage[2]; /* pinned staging for pageable arrays (NULL: copy directly) */
};

struct side {
    int32_t rows;
    int32_t first, count; /* the rows half_step solves: this rank's share (all by default) */
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    int64_t nseg;             /* CG's segments (ials_kernels.cuh, cg_args) */
    mf_dbuf lo, hi, row, seg; /* seg_lo, seg_hi, seg_row, row_seg */
};

struct cuda_engine {
    mf_ials_engine base;
    mf_ctx *ctx;
    const char *fn;
    int k, kp, vpl, cg_steps;
    int is_half; /* U and V stored as half (mf_ials_opts.fp16) */
    float lambda, alpha, epsilon;
    int log_confidence;
    side by[2];              /* users (CSR), items (CSC) */
    mf_dbuf F[2];            /* U, V: rows of kp floats */
    mf_dbuf G, part;         /* the Gram matrix and its chunk partials */
    mf_dbuf R, P, AP, rs;    /* CG's vectors (the larger side's rows) */
    mf_dbuf PA, PB;          /* CG's per-segment partial sums */
    mf_dbuf failed, partial; /* breakdown word; the loss's block sums */
    int chunks;
    streamer z; /* z.on: the interactions stay on the host */
};

float *fp(const mf_dbuf &b)
{
    return (float *)b.ptr;
}

/* Bytes of one factor element: float, or half with mf_ials_opts.fp16. */
size_t fac_bytes(const cuda_engine *e)
{
    return e->is_half ? sizeof(__half) : sizeof(float);
}

mf_status gram(cuda_engine *e, const void *F, int32_t rows)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const int T = e->kp / 32, tiles = T * (T + 1) / 2;
    int64_t chunks = ((int64_t)rows + 1023) / 1024;
    if (chunks > e->chunks)
        chunks = e->chunks;
    if (chunks < 1)
        chunks = 1;
    ials::gram_partial<<<dim3((unsigned)chunks, (unsigned)tiles), 256, 0, stream>>>(
        F, e->is_half, rows, e->kp, (int)chunks, fp(e->part));
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "ials gram_partial"));
    const int64_t n = (int64_t)e->kp * e->kp;
    ials::gram_reduce<<<mf_cuda_grid(mf_cuda_of(ctx), n, 256, 4), 256, 0, stream>>>(
        fp(e->part), e->kp, (int)chunks, fp(e->G));
    return MF_CUDA_LAUNCHED(ctx, "ials gram_reduce");
}

/* C = P G; P is a factor (half as the engine stores them) when `factor`, else a CG vector. */
mf_status gemm(cuda_engine *e, const void *P, bool factor, float *C, int32_t rows)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const int nc = e->kp >= 128 ? 4 : e->kp / 32, is_half = factor && e->is_half;
    const dim3 grid((unsigned)(((int64_t)rows + 63) / 64), (unsigned)(e->kp / (32 * nc)));
    if (rows == 0)
        return MF_OK;
    switch (nc) {
    case 1: ials::gemm_pg<1><<<grid, 256, 0, stream>>>(P, is_half, fp(e->G), C, rows, e->kp); break;
    case 2: ials::gemm_pg<2><<<grid, 256, 0, stream>>>(P, is_half, fp(e->G), C, rows, e->kp); break;
    default:
        ials::gemm_pg<4><<<grid, 256, 0, stream>>>(P, is_half, fp(e->G), C, rows, e->kp);
        break;
    }
    return MF_CUDA_LAUNCHED(ctx, "ials gemm_pg");
}

/* seg_apply then the per-row kernel (init: cg_init, else cg_step). */
template <int VPL> mf_status cg_launch(cuda_engine *e, ials::cg_args &a, bool init)
{
    cudaStream_t stream = mf_cuda_of(e->ctx)->stream;
    const unsigned segs = (unsigned)((a.nseg + 7) / 8),
                   grid = (unsigned)(((int64_t)a.rows + 7) / 8);
    if (a.nseg > 0) {
        if (init)
            ials::seg_apply<VPL, true><<<segs, 256, 0, stream>>>(a);
        else
            ials::seg_apply<VPL, false><<<segs, 256, 0, stream>>>(a);
        MF_TRY(MF_CUDA_LAUNCHED(e->ctx, "ials seg_apply"));
    }
    if (init)
        ials::cg_init<VPL><<<grid, 256, 0, stream>>>(a);
    else
        ials::cg_step<VPL><<<grid, 256, 0, stream>>>(a);
    return MF_CUDA_LAUNCHED(e->ctx, init ? "ials cg_init" : "ials cg_step");
}

mf_status cg_dispatch(cuda_engine *e, ials::cg_args &a, bool init)
{
    switch (e->vpl) {
    case 1: return cg_launch<1>(e, a, init);
    case 2: return cg_launch<2>(e, a, init);
    case 4: return cg_launch<4>(e, a, init);
    case 8: return cg_launch<8>(e, a, init);
    default: return cg_launch<16>(e, a, init);
    }
}

/* The first breakdown of the half-step, if any, as MF_ERR_NUMERIC. */
mf_status check_failed(cuda_engine *e, mf_ials_side s)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    unsigned long long w = 0;
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(&w, e->failed.ptr, sizeof w, cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    if (w == ~0ull)
        return MF_OK;
    return mf_fail(ctx, MF_ERR_NUMERIC,
                   "%s: the system of %s %llu is not positive definite (%s %u); "
                   "lambda > 0 keeps every system positive definite",
                   e->fn, s == MF_IALS_USERS ? "user" : "item", w >> 32,
                   e->cg_steps > 0 ? "CG step" : "pivot", (unsigned)(w & 0xffffffffu));
}

/* ---- the streamed half-step ------------------------------------------------------------- */

/* Batch bi of sd into transfer buffer bi % nbuf, on the copy stream, once the kernels that
 * last read that buffer are done. A pageable array goes through the buffer's pinned stage,
 * which the host refills only after the stage's previous copy is done. */
mf_status stream_copy(cuda_engine *e, const stream_side &sd, int bi)
{
    mf_ctx *ctx = e->ctx;
    streamer &z = e->z;
    const int i = bi % z.nbuf;
    const batch &b = sd.b[bi];
    unsigned char *dst = (unsigned char *)z.T[i].ptr;
    MF_CUDA_TRY(ctx, cudaStreamWaitEvent(z.copy, z.freed[i], 0));
    MF_CUDA_TRY(
        ctx, cudaMemcpyAsync(dst, sd.meta + b.meta_off, b.l.meta, cudaMemcpyHostToDevice, z.copy));
    const size_t n = (size_t)(b.p1 - b.p0);
    const struct {
        const void *src;
        size_t off;
        host_pin pin;
    } parts[2] = {{sd.idx + b.p0, b.l.idx, sd.idx_pin},
                  {sd.val ? sd.val + b.p0 : NULL, b.l.val, sd.val_pin}};
    bool stage_free = false;
    for (const auto &p : parts) {
        if (!p.src || n == 0)
            continue;
        const void *src = p.src;
        if (p.pin == PIN_NONE && z.stage[i]) {
            if (!stage_free)
                MF_CUDA_TRY(ctx, cudaEventSynchronize(z.copied[i]));
            stage_free = true;
            memcpy(z.stage[i] + p.off, p.src, n * 4);
            src = z.stage[i] + p.off;
        }
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(dst + p.off, src, n * 4, cudaMemcpyHostToDevice, z.copy));
    }
    MF_CUDA_TRY(ctx, cudaEventRecord(z.copied[i], z.copy));
    return MF_OK;
}

/* kernels(batch, its transfer buffer) for every batch of side s, in order, on the context's
 * stream, each after its copy; the copy of batch b + nbuf is queued after the kernels of
 * batch b, so with two buffers the copy of b + 1 runs while b computes. */
template <class K> mf_status stream_pass(cuda_engine *e, int s, K &&kernels)
{
    mf_ctx *ctx = e->ctx;
    streamer &z = e->z;
    const stream_side &sd = z.side[s];
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    for (int b = 0; b < sd.nb && b < z.nbuf; b++)
        MF_TRY(stream_copy(e, sd, b));
    for (int b = 0; b < sd.nb; b++) {
        const int i = b % z.nbuf;
        MF_CUDA_TRY(ctx, cudaStreamWaitEvent(stream, z.copied[i], 0));
        MF_TRY(kernels(sd.b[b], (unsigned char *)z.T[i].ptr));
        MF_CUDA_TRY(ctx, cudaEventRecord(z.freed[i], stream));
        if (b + z.nbuf < sd.nb)
            MF_TRY(stream_copy(e, sd, b + z.nbuf));
    }
    return MF_OK;
}

/* The resident half-step's solve, batch by batch: the same kernels on the batch's rows (X
 * and the CG vectors offset to them, the batch's rebased offsets and segments). A row's
 * arithmetic does not depend on where its batch or tile starts, so the result is the
 * resident one bit for bit; row0 keeps the breakdown word's row numbers global. */
mf_status half_step_streamed(cuda_engine *e, mf_ials_side s, void *X, const void *F)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const size_t xrow = (size_t)e->kp * fac_bytes(e);
    const bool has_val = e->z.side[s].val != NULL;
    unsigned char *W = (unsigned char *)e->z.W.ptr;
    auto solve = [&](const batch &b, unsigned char *T) -> mf_status {
        const layout &l = b.l;
        const int32_t rows = b.r1 - b.r0;
        void *Xb = (unsigned char *)X + (size_t)b.r0 * xrow;
        const int64_t *ptr = (const int64_t *)(T + l.ptr);
        const int32_t *idx = (const int32_t *)(T + l.idx);
        const float *val = has_val ? (const float *)(T + l.val) : NULL;
        if (e->cg_steps == 0) {
            ials::exact_args a = {rows,     ptr,        idx,
                                  val,      F,          fp(e->G),
                                  Xb,       e->is_half, e->lambda,
                                  e->alpha, e->epsilon, e->log_confidence,
                                  e->k,     e->kp,      (unsigned long long *)e->failed.ptr,
                                  b.r0};
            ials::exact_solve<<<(unsigned)rows, 256, ials::exact_smem_bytes(e->k), stream>>>(a);
            return MF_CUDA_LAUNCHED(ctx, "ials exact_solve");
        }
        ials::cg_args a = {};
        a.rows = rows, a.ptr = ptr, a.idx = idx, a.val = val, a.F = F;
        a.X = Xb, a.R = (float *)(W + l.R), a.P = (float *)(W + l.P);
        a.AP = (float *)(W + l.AP), a.rs = (float *)(W + l.rs);
        a.is_half = e->is_half;
        a.lambda = e->lambda, a.alpha = e->alpha, a.epsilon = e->epsilon;
        a.log_confidence = e->log_confidence, a.kp = e->kp;
        a.failed = (unsigned long long *)e->failed.ptr;
        a.nseg = b.s1 - b.s0;
        a.seg_lo = (const int64_t *)(T + l.lo), a.seg_hi = (const int64_t *)(T + l.hi);
        a.seg_row = (const int32_t *)(T + l.seg_row);
        a.row_seg = (const int64_t *)(T + l.row_seg);
        a.PA = (float *)(W + l.PA), a.PB = (float *)(W + l.PB);
        a.row0 = b.r0;
        MF_TRY(gemm(e, Xb, true, (float *)(W + l.AP), rows));
        MF_TRY(cg_dispatch(e, a, true));
        for (int step = 0; step < e->cg_steps; step++) {
            a.step = step;
            MF_TRY(gemm(e, a.P, false, (float *)(W + l.AP), rows));
            MF_TRY(cg_dispatch(e, a, false));
        }
        return MF_OK;
    };
    MF_TRY(stream_pass(e, s, solve));
    return check_failed(e, s);
}

mf_status half_step(mf_ials_engine *base, mf_ials_side s)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const side &own = e->by[s], &other = e->by[1 - s];
    void *X = e->F[s].ptr;
    const void *F = e->F[1 - s].ptr;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->failed.ptr, 0xff, sizeof(unsigned long long), stream));
    MF_TRY(gram(e, F, other.rows));
    if (own.count == 0)
        return MF_OK;
    if (e->z.on)
        return half_step_streamed(e, s, X, F);
    /* This rank's share: rows [first, first + count); the offsets index the whole side's
     * interactions, so only the row pointers move. */
    const int64_t *own_ptr = own.ptr + own.first;
    X = (char *)X + (size_t)own.first * e->kp * fac_bytes(e);
    if (e->cg_steps == 0) {
        ials::exact_args a = {own.count, own_ptr,    own.idx,
                              own.val,   F,          fp(e->G),
                              X,         e->is_half, e->lambda,
                              e->alpha,  e->epsilon, e->log_confidence,
                              e->k,      e->kp,      (unsigned long long *)e->failed.ptr,
                              own.first};
        ials::exact_solve<<<(unsigned)own.count, 256, ials::exact_smem_bytes(e->k), stream>>>(a);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "ials exact_solve"));
        return check_failed(e, s);
    }
    ials::cg_args a = {};
    a.rows = own.count, a.ptr = own_ptr, a.idx = own.idx, a.val = own.val, a.F = F;
    a.row0 = own.first;
    a.X = X, a.R = fp(e->R), a.P = fp(e->P), a.AP = fp(e->AP), a.rs = (float *)e->rs.ptr;
    a.is_half = e->is_half;
    a.lambda = e->lambda, a.alpha = e->alpha, a.epsilon = e->epsilon;
    a.log_confidence = e->log_confidence, a.kp = e->kp;
    a.failed = (unsigned long long *)e->failed.ptr;
    a.nseg = own.nseg;
    a.seg_lo = (const int64_t *)own.lo.ptr, a.seg_hi = (const int64_t *)own.hi.ptr;
    a.seg_row = (const int32_t *)own.row.ptr, a.row_seg = (const int64_t *)own.seg.ptr;
    a.PA = fp(e->PA), a.PB = fp(e->PB);
    MF_TRY(gemm(e, X, true, fp(e->AP), own.count));
    MF_TRY(cg_dispatch(e, a, true));
    for (int step = 0; step < e->cg_steps; step++) {
        a.step = step;
        MF_TRY(gemm(e, fp(e->P), false, fp(e->AP), own.count));
        MF_TRY(cg_dispatch(e, a, false));
    }
    return check_failed(e, s);
}

template <int VPL> mf_status loss_launch(cuda_engine *e, ials::loss_args &a, unsigned grid)
{
    ials::loss_rows<VPL><<<grid, 256, 0, mf_cuda_of(e->ctx)->stream>>>(a);
    return MF_CUDA_LAUNCHED(e->ctx, "ials loss_rows");
}

/* The block sums of one loss launch over `rows`, added on the host in block order. */
mf_status loss_part(cuda_engine *e, ials::loss_args &a, double *out)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const unsigned grid = (unsigned)(((int64_t)a.rows + 7) / 8);
    *out = 0.0;
    if (a.rows == 0)
        return MF_OK;
    mf_status st;
    switch (e->vpl) {
    case 1: st = loss_launch<1>(e, a, grid); break;
    case 2: st = loss_launch<2>(e, a, grid); break;
    case 4: st = loss_launch<4>(e, a, grid); break;
    case 8: st = loss_launch<8>(e, a, grid); break;
    default: st = loss_launch<16>(e, a, grid); break;
    }
    MF_TRY(st);
    double *h = (double *)malloc((size_t)grid * sizeof *h);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    cudaError_t err =
        cudaMemcpyAsync(h, a.partial, (size_t)grid * sizeof *h, cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) {
        free(h);
        return mf_cuda_fail(ctx, err, "ials loss read-back", __FILE__, __LINE__);
    }
    for (unsigned b = 0; b < grid; b++)
        *out += h[b];
    free(h);
    return MF_OK;
}

/* The users' part of the loss from streamed batches: each row's total comes back and the
 * host adds them in blocks of 8 rows of the whole side, then the blocks in order, as
 * loss_rows and loss_part do for the resident CSR: the same sum bit for bit. */
mf_status loss_users_streamed(cuda_engine *e, const ials::loss_args &all, double *out)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const stream_side &sd = e->z.side[MF_IALS_USERS];
    int32_t most = 0;
    for (int b = 0; b < sd.nb; b++)
        most = sd.b[b].r1 - sd.b[b].r0 > most ? sd.b[b].r1 - sd.b[b].r0 : most;
    double *h = (double *)malloc(((size_t)most + 1) * sizeof *h);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    const size_t xrow = (size_t)e->kp * fac_bytes(e);
    double sum = 0.0, block = 0.0;
    int64_t row = 0;
    auto part = [&](const batch &b, unsigned char *T) -> mf_status {
        ials::loss_args a = all;
        a.rows = b.r1 - b.r0;
        a.ptr = (const int64_t *)(T + b.l.ptr);
        a.idx = (const int32_t *)(T + b.l.idx);
        a.val = sd.val ? (const float *)(T + b.l.val) : NULL;
        a.X = (const unsigned char *)all.X + (size_t)b.r0 * xrow;
        a.partial = NULL;
        a.row_total = (double *)e->z.W.ptr;
        const unsigned grid = (unsigned)(((int64_t)a.rows + 7) / 8);
        switch (e->vpl) {
        case 1: MF_TRY(loss_launch<1>(e, a, grid)); break;
        case 2: MF_TRY(loss_launch<2>(e, a, grid)); break;
        case 4: MF_TRY(loss_launch<4>(e, a, grid)); break;
        case 8: MF_TRY(loss_launch<8>(e, a, grid)); break;
        default: MF_TRY(loss_launch<16>(e, a, grid)); break;
        }
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(h, a.row_total, (size_t)a.rows * sizeof *h,
                                         cudaMemcpyDeviceToHost, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
        for (int32_t r = 0; r < a.rows; r++, row++) {
            if (row % 8 == 0)
                block = 0.0;
            block += h[r];
            if (row % 8 == 7)
                sum += block;
        }
        return MF_OK;
    };
    mf_status st = stream_pass(e, MF_IALS_USERS, part);
    free(h);
    MF_TRY(st);
    if (row % 8 != 0) { /* the last block's missing rows count 0.0, as in loss_rows */
        for (int64_t w = row % 8; w < 8; w++)
            block += 0.0;
        sum += block;
    }
    *out = sum;
    return MF_OK;
}

mf_status engine_loss(mf_ials_engine *base, double *loss)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    const side &u = e->by[0], &v = e->by[1];
    MF_TRY(gram(e, e->F[1].ptr, v.rows));
    ials::loss_args a = {u.rows,      u.ptr,
                         u.idx,       u.val,
                         e->F[0].ptr, e->F[1].ptr,
                         fp(e->G),    e->is_half,
                         e->lambda,   e->alpha,
                         e->epsilon,  e->log_confidence,
                         e->kp,       (double *)e->partial.ptr,
                         NULL};
    double users = 0.0, items = 0.0;
    if (e->z.on)
        MF_TRY(loss_users_streamed(e, a, &users));
    else
        MF_TRY(loss_part(e, a, &users));
    a.rows = v.rows, a.ptr = NULL, a.X = e->F[1].ptr;
    MF_TRY(loss_part(e, a, &items));
    *loss = (users + items) / ((double)u.rows * (double)v.rows);
    return MF_OK;
}

/* Working factor (rows x kp) to the caller's rows x k floats, host or device (halves
 * through a float copy on the device). */
mf_status copy_out(cuda_engine *e, const mf_dbuf &F, int32_t rows, float *dst)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    if (!dst || rows == 0)
        return MF_OK;
    if (!e->is_half) {
        MF_CUDA_TRY(ctx,
                    cudaMemcpy2DAsync(dst, (size_t)e->k * sizeof(float), F.ptr,
                                      (size_t)e->kp * sizeof(float), (size_t)e->k * sizeof(float),
                                      (size_t)rows, cudaMemcpyDefault, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
        return MF_OK;
    }
    mf_dbuf tmp = {NULL, 0};
    const int64_t n = (int64_t)rows * e->k;
    MF_TRY(mf_dmem_alloc(ctx, &tmp, (size_t)n * sizeof(float), "iALS factors as floats"));
    ials::half_rows_to_float<<<mf_cuda_grid(mf_cuda_of(ctx), n, 256, 8), 256, 0, stream>>>(
        (const __half *)F.ptr, e->kp, e->k, rows, fp(tmp));
    mf_status st = MF_CUDA_LAUNCHED(ctx, "ials half_rows_to_float");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK)
        err = cudaMemcpyAsync(dst, tmp.ptr, (size_t)n * sizeof(float), cudaMemcpyDefault, stream);
    if (st == MF_OK && err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    if (st == MF_OK && err != cudaSuccess)
        st = mf_cuda_fail(ctx, err, "iALS factor read-back", __FILE__, __LINE__);
    mf_dmem_free(ctx, &tmp);
    return st;
}

mf_status engine_finish(mf_ials_engine *base, float *U, float *V, mf_memory where)
{
    cuda_engine *e = (cuda_engine *)base;
    (void)where; /* cudaMemcpyDefault tells host from device */
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    MF_TRY(copy_out(e, e->F[0], e->by[0].rows, U));
    return copy_out(e, e->F[1], e->by[1].rows, V);
}

void stream_release(cuda_engine *e);

void engine_shared(mf_ials_engine *base, mf_ials_side side, void **factors, size_t *row_bytes)
{
    cuda_engine *e = (cuda_engine *)base;
    *factors = e->F[side].ptr;
    *row_bytes = (size_t)e->kp * fac_bytes(e);
}

void engine_destroy(mf_ials_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    mf_dbuf *bufs[] = {&e->F[0], &e->F[1], &e->G,  &e->part,   &e->R,
                       &e->P,    &e->AP,   &e->rs, &e->failed, &e->partial};
    for (mf_dbuf *b : bufs)
        mf_dmem_free(ctx, b);
    for (side &sd : e->by) {
        mf_dbuf *sb[] = {&sd.lo, &sd.hi, &sd.row, &sd.seg};
        for (mf_dbuf *b : sb)
            mf_dmem_free(ctx, b);
    }
    mf_dmem_free(ctx, &e->PA);
    mf_dmem_free(ctx, &e->PB);
    if (e->z.on)
        stream_release(e);
    free(e);
}

/* A working factor from host X0 (rows x k floats; halves converted on the host), or
 * zeros. */
mf_status alloc_factor(cuda_engine *e, mf_dbuf *F, int32_t rows, const float *X0, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const size_t eb = fac_bytes(e);
    MF_TRY(mf_dmem_alloc(ctx, F, ((size_t)rows * e->kp + 1) * eb, what));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(F->ptr, 0, F->bytes, stream));
    if (!X0 || rows == 0)
        return MF_OK;
    if (!e->is_half) {
        MF_CUDA_TRY(ctx,
                    cudaMemcpy2DAsync(F->ptr, (size_t)e->kp * sizeof(float), X0,
                                      (size_t)e->k * sizeof(float), (size_t)e->k * sizeof(float),
                                      (size_t)rows, cudaMemcpyHostToDevice, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream)); /* X0 is the driver's to free */
        return MF_OK;
    }
    __half *h = (__half *)malloc((size_t)rows * e->k * sizeof *h + 1);
    if (!h)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    for (int64_t i = 0; i < (int64_t)rows * e->k; i++)
        h[i] = __float2half_rn(X0[i]);
    cudaError_t err =
        cudaMemcpy2DAsync(F->ptr, (size_t)e->kp * sizeof *h, h, (size_t)e->k * sizeof *h,
                          (size_t)e->k * sizeof *h, (size_t)rows, cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream);
    free(h);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "iALS factor upload", __FILE__, __LINE__);
    return MF_OK;
}

/* Side sd's segments from its row offsets (host): one per IALS_SEGMENT interactions of each
 * row longer than that (ials_kernels.cuh, cg_args). */
mf_status build_segments(cuda_engine *e, side *sd, const int64_t *ptr)
{
    mf_ctx *ctx = e->ctx;
    /* The share's rows only, numbered from its first (half_step moves the row pointers). */
    const int32_t rows = sd->count;
    ptr += sd->first;
    int64_t *row_seg = (int64_t *)malloc(((size_t)rows + 1) * sizeof *row_seg);
    if (!row_seg)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    segment_starts(ptr, rows, row_seg);
    const int64_t nseg = row_seg[rows];
    int64_t *lo = (int64_t *)malloc(((size_t)nseg * 2 + 1) * sizeof *lo), *hi = lo + nseg;
    int32_t *srow = (int32_t *)malloc(((size_t)nseg + 1) * sizeof *srow);
    mf_status st = MF_OK;
    if (!lo || !srow)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    if (st == MF_OK)
        fill_segments(ptr, row_seg, 0, rows, 0, 0, lo, hi, srow);
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->lo, lo, ((size_t)nseg + 1) * sizeof *lo, "iALS segment starts");
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->hi, hi, ((size_t)nseg + 1) * sizeof *hi, "iALS segment ends");
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->row, srow, ((size_t)nseg + 1) * sizeof *srow, "iALS segment rows");
    if (st == MF_OK)
        st = mf_upload(ctx, &sd->seg, row_seg, ((size_t)rows + 1) * sizeof *row_seg,
                       "iALS row segments");
    if (st == MF_OK)
        st = mf_cuda_sync(ctx); /* the host arrays go now */
    sd->nseg = nseg;
    free(row_seg);
    free(lo);
    free(srow);
    return st;
}

/* The factors, G and its chunk partials, the breakdown word and the loss's block sums: what
 * both modes hold. */
mf_status alloc_common(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    const mf_sparse *R = s->R;
    MF_TRY(alloc_factor(e, &e->F[0], R->rows, s->U0, "iALS user factors"));
    MF_TRY(alloc_factor(e, &e->F[1], R->cols, s->V0, "iALS item factors"));
    const size_t kk = (size_t)e->kp * e->kp;
    MF_TRY(mf_dmem_alloc(ctx, &e->G, kk * sizeof(float), "iALS Gram matrix"));
    MF_TRY(
        mf_dmem_alloc(ctx, &e->part, (size_t)e->chunks * kk * sizeof(float), "iALS Gram partials"));
    MF_TRY(mf_dmem_alloc(ctx, &e->failed, sizeof(unsigned long long), "iALS breakdown word"));
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    MF_TRY(mf_dmem_alloc(ctx, &e->partial, ((lines + 7) / 8 + 1) * sizeof(double),
                         "iALS loss partials"));
    return MF_OK;
}

/* The device bytes of alloc_common, and with fp16 the float copy that finish makes. */
size_t common_bytes(const cuda_engine *e, const mf_sparse *R)
{
    const size_t eb = fac_bytes(e), kk = (size_t)e->kp * e->kp;
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    size_t b = ((size_t)R->rows * e->kp + 1) * eb + ((size_t)R->cols * e->kp + 1) * eb;
    b += kk * sizeof(float) * (1 + (size_t)e->chunks) + sizeof(unsigned long long);
    b += ((lines + 7) / 8 + 1) * sizeof(double);
    if (e->is_half)
        b += lines * (size_t)e->k * sizeof(float);
    return b;
}

int64_t count_segments(const int64_t *ptr, int32_t rows)
{
    int64_t n = 0;
    for (int32_t r = 0; r < rows; r++)
        n += segments_of(ptr[r + 1] - ptr[r]);
    return n;
}

/* The resident mode's peak: the CSR (unless the matrix holds it already) and the CSC, with
 * the device sort's scratch while the CSC is built (gone before the factors come), then
 * common_bytes and CG's vectors, segments and partial sums. Without a host transpose the
 * items' segments are bounded: a column past IALS_SEGMENT has at most n / IALS_SEGMENT + 1,
 * and at most nnz / (IALS_SEGMENT + 1) columns are past it. *inter: the two orientations. */
size_t resident_bytes(const cuda_engine *e, const mf_sparse *R, size_t common, size_t *inter)
{
    const size_t n = (size_t)R->nnz, per = R->val ? 8 : 4;
    const size_t csr = ((size_t)R->rows + 1) * 8 + n * per,
                 csc = ((size_t)R->cols + 1) * 8 + n * per;
    *inter = csr + csc;
    const size_t scratch = R->transpose.ptr ? 0 : mf_cuda_csr_transpose_scratch(R->nnz, R->cols);
    size_t work = common;
    if (e->cg_steps > 0) {
        const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
        work += 3 * (lines * e->kp + 1) * sizeof(float) + (lines + 1) * sizeof(float);
        const int64_t su = count_segments(R->row_ptr, R->rows);
        int64_t sv;
        if (R->transpose.ptr) {
            sv = count_segments(R->transpose.ptr, R->cols);
        } else {
            const int64_t long_cols = R->nnz / (IALS_SEGMENT + 1);
            sv = (R->nnz + IALS_SEGMENT - 1) / IALS_SEGMENT +
                 (long_cols < R->cols ? long_cols : R->cols);
        }
        work += ((size_t)su + 1 + (size_t)sv + 1) * (8 + 8 + 4) +
                ((size_t)R->rows + 1 + (size_t)R->cols + 1) * 8;
        work += 2 * (((size_t)(su > sv ? su : sv) * e->kp + 1) * sizeof(float));
    }
    return (R->device.row_ptr.ptr ? 0 : csr) + csc + (scratch > work ? scratch : work);
}

/* Side s's batches under the caps (T: one transfer buffer, W: the work buffer; a row alone
 * fits, setup_streamed made sure), and its host blob of batch heads: offsets rebased to the
 * batch's first interaction, and CG's segments (as build_segments makes them) rebased to the
 * batch's first segment and row. */
mf_status plan_side(cuda_engine *e, stream_side *sd, int32_t rows, const int64_t *ptr,
                    const int64_t *rseg, size_t Tcap, size_t Wcap)
{
    mf_ctx *ctx = e->ctx;
    const bool cg = rseg != NULL, has_val = sd->val != NULL;
    int cap = 0;
    size_t meta = 0;
    for (int32_t r0 = 0; r0 < rows;) {
        int32_t r1 = r0 + 1;
        while (r1 < rows) {
            const layout l = layout_of((int64_t)r1 + 1 - r0, ptr[r1 + 1] - ptr[r0],
                                       cg ? rseg[r1 + 1] - rseg[r0] : 0, has_val, cg, e->kp);
            if (l.T > Tcap || l.W > Wcap)
                break;
            r1++;
        }
        if (sd->nb == cap) {
            cap = cap ? 2 * cap : 16;
            batch *nb = (batch *)realloc(sd->b, (size_t)cap * sizeof *nb);
            if (!nb)
                return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
            sd->b = nb;
        }
        batch &b = sd->b[sd->nb++];
        b.r0 = r0, b.r1 = r1, b.p0 = ptr[r0], b.p1 = ptr[r1];
        b.s0 = cg ? rseg[r0] : 0, b.s1 = cg ? rseg[r1] : 0;
        b.l = layout_of(r1 - r0, b.p1 - b.p0, b.s1 - b.s0, has_val, cg, e->kp);
        if (b.l.T > Tcap || b.l.W > Wcap)
            return mf_fail(ctx, MF_ERR_INTERNAL, "%s: row %d does not fit a streamed batch", e->fn,
                           r0);
        b.meta_off = meta;
        meta += b.l.meta;
        r0 = r1;
    }
    if (meta == 0)
        return MF_OK;
    if (cudaHostAlloc((void **)&sd->meta, meta, cudaHostAllocDefault) == cudaSuccess) {
        sd->meta_pinned = true;
    } else {
        (void)cudaGetLastError(); /* pageable then: copies still right, just not overlapped */
        sd->meta = (unsigned char *)malloc(meta);
        if (!sd->meta)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    }
    memset(sd->meta, 0, meta);
    for (int i = 0; i < sd->nb; i++) {
        const batch &b = sd->b[i];
        unsigned char *h = sd->meta + b.meta_off;
        int64_t *bp = (int64_t *)(h + b.l.ptr);
        for (int32_t r = b.r0; r <= b.r1; r++)
            bp[r - b.r0] = ptr[r] - b.p0;
        if (!cg)
            continue;
        int64_t *rs = (int64_t *)(h + b.l.row_seg), *lo = (int64_t *)(h + b.l.lo),
                *hi = (int64_t *)(h + b.l.hi);
        int32_t *srow = (int32_t *)(h + b.l.seg_row);
        for (int32_t r = b.r0; r <= b.r1; r++)
            rs[r - b.r0] = rseg[r] - b.s0;
        fill_segments(ptr, rseg, b.r0, b.r1, b.p0, b.s0, lo, hi, srow);
    }
    return MF_OK;
}

/* Pin a host array for asynchronous copies; where that fails (already registered in part,
 * read-only, no room) the copies go through the staging buffers. */
host_pin pin_host(const void *p, size_t bytes)
{
    if (!p || bytes == 0)
        return PIN_NONE;
    if (cudaHostRegister((void *)p, bytes, cudaHostRegisterDefault) == cudaSuccess)
        return PIN_OURS;
    (void)cudaGetLastError();
    return PIN_NONE;
}

/* The streamed mode. The room left after common_bytes is split between the transfer
 * buffers (two, or one where two would not hold the longest row) and the work buffer in
 * proportion to what the whole sides would need, each at least what the longest row needs;
 * both sides are cut into batches under those caps. */
mf_status setup_streamed(cuda_engine *e, const mf_ials_setup *s, size_t common, size_t inter,
                         size_t usable, bool limited)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    streamer &z = e->z;
    const bool cg = e->cg_steps > 0, has_val = R->val != NULL;
    z.on = true;
    z.inter_bytes = inter;
    MF_TRY(mf_sparse_host_transpose(R));
    const int64_t *ptr[2] = {R->row_ptr, R->transpose.ptr};
    const int32_t rows[2] = {R->rows, R->cols};
    z.side[0].idx = R->col, z.side[0].val = R->val;
    z.side[1].idx = R->transpose.idx, z.side[1].val = R->transpose.val;
    int64_t *rseg[2] = {NULL, NULL};
    mf_status st = MF_OK;
    for (int sd = 0; cg && sd < 2 && st == MF_OK; sd++) {
        rseg[sd] = (int64_t *)malloc(((size_t)rows[sd] + 1) * sizeof(int64_t));
        if (!rseg[sd]) {
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
            break;
        }
        segment_starts(ptr[sd], rows[sd], rseg[sd]);
    }
    size_t Tmin = 0, Wmin = 0, Ttot = 0, Wtot = 0;
    int64_t longest = 0;
    for (int sd = 0; sd < 2 && st == MF_OK; sd++) {
        int64_t most = 0;
        for (int32_t r = 0; r < rows[sd]; r++)
            most = ptr[sd][r + 1] - ptr[sd][r] > most ? ptr[sd][r + 1] - ptr[sd][r] : most;
        longest = most > longest ? most : longest;
        const layout one = layout_of(1, most, cg ? segments_of(most) : 0, has_val, cg, e->kp);
        const layout all =
            layout_of(rows[sd], R->nnz, cg ? rseg[sd][rows[sd]] : 0, has_val, cg, e->kp);
        Tmin = one.T > Tmin ? one.T : Tmin, Wmin = one.W > Wmin ? one.W : Wmin;
        Ttot = all.T > Ttot ? all.T : Ttot, Wtot = all.W > Wtot ? all.W : Wtot;
    }
    const size_t budget = usable > common ? usable - common : 0;
    if (st == MF_OK && Tmin + Wmin > budget)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                     "%s: out of device memory: the interactions (%zu bytes on the device in both "
                     "orientations) do not fit, and streaming them from host memory needs %zu "
                     "bytes (the factors and working buffers: %zu; the longest row, %lld "
                     "interactions: %zu) where %zu are available (%s, less a margin)",
                     e->fn, inter, common + Tmin + Wmin, common, (long long)longest, Tmin + Wmin,
                     usable,
                     limited ? "under the context's device-memory limit" : "free on the device");
    size_t Tcap = Ttot, Wcap = Wtot;
    if (st == MF_OK) {
        z.nbuf = 2 * Tmin + Wmin <= budget ? 2 : 1;
        const size_t nb = (size_t)z.nbuf;
        if (nb * Ttot + Wtot > budget) {
            const size_t slack = budget - (nb * Tmin + Wmin);
            const double f = (double)(nb * Ttot) / (double)(nb * Ttot + Wtot);
            Tcap = Tmin + (size_t)((double)slack * f) / nb;
            if (nb * Tcap + Wmin > budget)
                Tcap = (budget - Wmin) / nb;
            Wcap = budget - nb * Tcap;
            Tcap = Tcap < Ttot ? Tcap : Ttot;
            Wcap = Wcap < Wtot ? Wcap : Wtot;
        }
    }
    for (int sd = 0; sd < 2 && st == MF_OK; sd++)
        st = plan_side(e, &z.side[sd], rows[sd], ptr[sd], rseg[sd], Tcap, Wcap);
    free(rseg[0]);
    free(rseg[1]);
    MF_TRY(st);
    size_t Tbytes = 0, Wbytes = 0;
    for (const stream_side &sd : z.side)
        for (int i = 0; i < sd.nb; i++) {
            Tbytes = sd.b[i].l.T > Tbytes ? sd.b[i].l.T : Tbytes;
            Wbytes = sd.b[i].l.W > Wbytes ? sd.b[i].l.W : Wbytes;
        }
    MF_TRY(alloc_common(e, s));
    for (int i = 0; i < z.nbuf; i++)
        MF_TRY(mf_dmem_alloc(ctx, &z.T[i], Tbytes, "iALS streamed interactions"));
    MF_TRY(mf_dmem_alloc(ctx, &z.W, Wbytes, "iALS streamed batch's work"));
    /* The host arrays: pinned where possible, else staged through pinned buffers, else (no
     * pinned memory to be had) copied from pageable memory, which is right but serial. */
    bool stage = false;
    for (stream_side &sd : z.side) {
        const size_t bytes = (size_t)R->nnz * 4;
        sd.idx_pin = pin_host(sd.idx, bytes);
        sd.val_pin = pin_host(sd.val, bytes);
        stage =
            stage || (bytes > 0 && (sd.idx_pin == PIN_NONE || (sd.val && sd.val_pin == PIN_NONE)));
    }
    for (int i = 0; stage && i < z.nbuf; i++)
        if (cudaHostAlloc((void **)&z.stage[i], Tbytes, cudaHostAllocDefault) != cudaSuccess) {
            (void)cudaGetLastError();
            z.stage[i] = NULL;
            if (i == 1) {
                cudaFreeHost(z.stage[0]);
                z.stage[0] = NULL;
            }
            stage = false;
        }
    MF_CUDA_TRY(ctx, cudaStreamCreateWithFlags(&z.copy, cudaStreamNonBlocking));
    z.copy_made = true;
    for (int i = 0; i < z.nbuf; i++) {
        MF_CUDA_TRY(ctx, cudaEventCreateWithFlags(&z.copied[i], cudaEventDisableTiming));
        MF_CUDA_TRY(ctx, cudaEventCreateWithFlags(&z.freed[i], cudaEventDisableTiming));
    }
    MF_TRY(mf_cuda_sync(ctx)); /* the buffers exist before the copy stream writes them */
    const bool pinned =
        z.side[0].idx_pin == PIN_OURS && z.side[1].idx_pin == PIN_OURS &&
        (!has_val || (z.side[0].val_pin == PIN_OURS && z.side[1].val_pin == PIN_OURS));
    mf_log(ctx, MF_LOG_INFO,
           "%s: the interactions (%zu bytes on the device in both orientations) do not fit in "
           "the %zu bytes of device memory available (%s, less a margin); streaming them from "
           "host memory: %d user batches, %d item batches, %d transfer buffers of %zu bytes and "
           "a work buffer of %zu bytes, %s",
           e->fn, inter, usable, limited ? "under the context's limit" : "free", z.side[0].nb,
           z.side[1].nb, z.nbuf, Tbytes, Wbytes,
           pinned       ? "pinned in place"
           : z.stage[0] ? "through pinned staging"
                        : "from pageable memory");
    return MF_OK;
}

/* Everything the streamed mode holds. The copies finish first: they read host memory that
 * is unregistered or freed here and write buffers freed here. */
void stream_release(cuda_engine *e)
{
    mf_ctx *ctx = e->ctx;
    streamer &z = e->z;
    if (z.copy_made)
        (void)cudaStreamSynchronize(z.copy);
    for (stream_side &sd : z.side) {
        if (sd.idx_pin == PIN_OURS)
            (void)cudaHostUnregister((void *)sd.idx);
        if (sd.val_pin == PIN_OURS)
            (void)cudaHostUnregister((void *)sd.val);
        if (sd.meta_pinned)
            (void)cudaFreeHost(sd.meta);
        else
            free(sd.meta);
        free(sd.b);
    }
    for (int i = 0; i < 2; i++) {
        if (z.stage[i])
            (void)cudaFreeHost(z.stage[i]);
        if (z.copied[i])
            (void)cudaEventDestroy(z.copied[i]);
        if (z.freed[i])
            (void)cudaEventDestroy(z.freed[i]);
        mf_dmem_free(ctx, &z.T[i]);
    }
    mf_dmem_free(ctx, &z.W);
    if (z.copy_made)
        (void)cudaStreamDestroy(z.copy);
    (void)cudaGetLastError(); /* nothing of a teardown leaks into the caller's next check */
}

/* The resident mode: the interactions on the device in both orientations, as they were
 * before streaming existed. */
mf_status setup_resident(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    MF_TRY(mf_sparse_device_csr(R, &e->by[0].ptr, &e->by[0].idx, &e->by[0].val));
    MF_TRY(mf_sparse_device_csc(R, &e->by[1].ptr, &e->by[1].idx, &e->by[1].val));
    MF_TRY(alloc_common(e, s));
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    if (e->cg_steps > 0) {
        const size_t bytes = (lines * e->kp + 1) * sizeof(float);
        MF_TRY(mf_dmem_alloc(ctx, &e->R, bytes, "iALS CG residuals"));
        MF_TRY(mf_dmem_alloc(ctx, &e->P, bytes, "iALS CG directions"));
        MF_TRY(mf_dmem_alloc(ctx, &e->AP, bytes, "iALS CG products"));
        MF_TRY(mf_dmem_alloc(ctx, &e->rs, (lines + 1) * sizeof(float), "iALS CG norms"));
        /* The item side's offsets come from the device CSC (the host may hold no transpose). */
        int64_t *cptr = (int64_t *)malloc(((size_t)R->cols + 1) * sizeof *cptr);
        if (!cptr)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
        mf_status st = mf_cuda_copy(ctx, cptr, e->by[1].ptr, ((size_t)R->cols + 1) * sizeof *cptr);
        if (st == MF_OK)
            st = build_segments(e, &e->by[0], R->row_ptr);
        if (st == MF_OK)
            st = build_segments(e, &e->by[1], cptr);
        free(cptr);
        MF_TRY(st);
        const int64_t nseg = e->by[0].nseg > e->by[1].nseg ? e->by[0].nseg : e->by[1].nseg;
        const size_t pbytes = ((size_t)nseg * e->kp + 1) * sizeof(float);
        MF_TRY(mf_dmem_alloc(ctx, &e->PA, pbytes, "iALS CG partial sums"));
        MF_TRY(mf_dmem_alloc(ctx, &e->PB, pbytes, "iALS CG partial right-hand sides"));
    }
    return MF_OK;
}

mf_status setup(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    if (e->cg_steps == 0) {
        const size_t optin = mf_cuda_of(ctx)->prop.sharedMemPerBlockOptin;
        if (ials::exact_smem_bytes(e->k) > optin) {
            int most = e->k;
            while (most > 1 && ials::exact_smem_bytes(most) > optin)
                most--;
            return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                           "%s: the exact solver on this device takes rank <= %d (rank = %d); "
                           "MF_ALS_SOLVER_CG takes any rank",
                           e->fn, most, e->k);
        }
        MF_CUDA_TRY(ctx, cudaFuncSetAttribute(ials::exact_solve,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)ials::exact_smem_bytes(e->k)));
    }
    e->by[0].rows = R->rows;
    e->by[1].rows = R->cols;
    for (int w = 0; w < 2; w++) {
        e->by[w].first = s->lo[w];
        e->by[w].count = s->hi[w] - s->lo[w];
    }
    const int T = e->kp / 32, tiles = T * (T + 1) / 2;
    /* Enough chunks for about 4 blocks per SM, each with at least 1024 rows. */
    e->chunks = (4 * mf_cuda_of(ctx)->prop.multiProcessorCount + tiles - 1) / tiles;
    /* Resident or streamed: the room is what the limit leaves (its accounting is exact, so a
     * small margin), or else what the device has free (a larger one: other users, the pool's
     * rounding). */
    const mf_dmem *m = &ctx->dmem;
    const bool limited = m->limit != 0;
    size_t avail = 0;
    if (limited) {
        avail = m->limit > m->current ? m->limit - m->current : 0;
    } else {
        size_t total = 0;
        MF_CUDA_TRY(ctx, cudaMemGetInfo(&avail, &total));
        /* What the context's pool keeps from earlier frees serves this run too. */
        const cudaMemPool_t pool = mf_cuda_of(ctx)->pool;
        if (pool) {
            uint64_t reserved = 0, used = 0; /* the attributes are cuuint64_t */
            MF_CUDA_TRY(
                ctx, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
            MF_CUDA_TRY(ctx, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
            avail += reserved > used ? (size_t)(reserved - used) : 0;
        }
    }
    const size_t usable = avail - avail / (limited ? 32 : 8);
    const size_t common = common_bytes(e, R);
    size_t inter = 0;
    if (resident_bytes(e, R, common, &inter) <= usable)
        return setup_resident(e, s);
    if (mf_ranks(ctx) > 1)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s: over a group of contexts the interactions must fit on each device "
                       "(%zu bytes needed beside the factors, %zu available); streaming them "
                       "from host memory runs on one context",
                       e->fn, inter, usable > common ? usable - common : (size_t)0);
    return setup_streamed(e, s, common, inter, usable, limited);
}

} // namespace

extern "C" mf_status mf_cuda_ials_engine(const mf_ials_setup *s, mf_ials_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", s->fn);
    e->base.half_step = half_step;
    e->base.loss = engine_loss;
    e->base.finish = engine_finish;
    e->base.shared = engine_shared;
    e->base.destroy = engine_destroy;
    e->ctx = ctx;
    e->fn = s->fn;
    e->k = s->k;
    e->vpl = 1;
    while (32 * e->vpl < s->k)
        e->vpl *= 2;
    e->kp = 32 * e->vpl;
    e->cg_steps = s->cg_steps;
    e->is_half = s->fp16;
    e->lambda = s->lambda, e->alpha = s->alpha, e->epsilon = s->epsilon;
    e->log_confidence = s->log_confidence;
    mf_status st = setup(e, s);
    if (st != MF_OK) {
        engine_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
