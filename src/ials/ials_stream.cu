/* The streamed mode of the CUDA iALS engine (ials_engine.cuh). When the two orientations
 * of the interactions do not fit in the device memory left beside the factors and the
 * working buffers (ials.cu's setup decides), they stay in host memory (the CSR and the host
 * transpose, pinned where cudaHostRegister allows) and each half-step walks the solved
 * side's rows in batches: a batch's row offsets, CG segments, indices and values go to one
 * of two device buffers on a second stream while the kernels of the previous batch run,
 * and each batch runs its whole solve (CG: X G, init, then P G and a step, cg_steps times)
 * with the resident path's kernels on its rows (solve_rows). Per row that is the resident
 * arithmetic in the resident order, so the factors are the same bit for bit. The Gram
 * matrices are the resident path's: the factors always live on the device. */
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "ials/ials_engine.cuh"

namespace mf_ials_cuda
{

/* ---- a batch's layout, the batches, the streamer ------------------------------------------ */

/* Where a batch's pieces lie: in its transfer buffer T (the head, up to `meta`, is a copy of
 * the side's host blob; then the indices and the values) and in the work buffer W (CG's
 * vectors and segment partials; the loss's row totals at offset 0). Offsets are multiples
 * of STREAM_ALIGN, so float4 and half2 loads stay aligned. */
struct layout {
    size_t ptr, row_seg, lo, hi, seg_row, meta, idx, val, T;
    size_t R, P, AP, rs, PA, PB, W;
};

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

namespace
{

const size_t STREAM_ALIGN = 256;

size_t aligned(size_t b)
{
    return (b + STREAM_ALIGN - 1) / STREAM_ALIGN * STREAM_ALIGN;
}

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

/* Batch bi of sd into transfer buffer bi % nbuf, on the copy stream, once the kernels that
 * last read that buffer are done. A pageable array goes through the buffer's pinned stage,
 * which the host refills only after the stage's previous copy is done. */
mf_status stream_copy(cuda_engine *e, const stream_side &sd, int bi)
{
    mf_ctx *ctx = e->ctx;
    streamer &z = *e->z;
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
    streamer &z = *e->z;
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

} // namespace

/* The resident solve, batch by batch: the same kernels on the batch's rows (X and the CG
 * vectors offset to them, the batch's rebased offsets and segments). A row's arithmetic
 * does not depend on where its batch or tile starts, so the result is the resident one bit
 * for bit; row0 keeps the breakdown word's row numbers global. */
mf_status stream_solve(cuda_engine *e, mf_ials_side s, const void *F)
{
    const size_t xrow = (size_t)e->kp * fac_bytes(e);
    const bool has_val = e->z->side[s].val != NULL;
    unsigned char *W = (unsigned char *)e->z->W.ptr;
    auto solve = [&](const batch &b, unsigned char *T) -> mf_status {
        const layout &l = b.l;
        rows_view v = {};
        v.rows = b.r1 - b.r0, v.row0 = b.r0;
        v.ptr = (const int64_t *)(T + l.ptr), v.idx = (const int32_t *)(T + l.idx);
        v.val = has_val ? (const float *)(T + l.val) : NULL;
        v.X = (unsigned char *)e->F[s].ptr + (size_t)b.r0 * xrow;
        v.R = (float *)(W + l.R), v.P = (float *)(W + l.P);
        v.AP = (float *)(W + l.AP), v.rs = (float *)(W + l.rs);
        v.PA = (float *)(W + l.PA), v.PB = (float *)(W + l.PB);
        v.nseg = b.s1 - b.s0;
        v.seg_lo = (const int64_t *)(T + l.lo), v.seg_hi = (const int64_t *)(T + l.hi);
        v.seg_row = (const int32_t *)(T + l.seg_row);
        v.row_seg = (const int64_t *)(T + l.row_seg);
        return solve_rows(e, s, F, v);
    };
    return stream_pass(e, s, solve);
}

/* Every user's term of the loss from streamed batches: each batch's row totals come back
 * into row[r0 .. r1), for the driver to add as it adds the resident launch's (loss_total). */
mf_status stream_loss_users(cuda_engine *e, double *row)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    const stream_side &sd = e->z->side[MF_IALS_USERS];
    const size_t xrow = (size_t)e->kp * fac_bytes(e);
    auto part = [&](const batch &b, unsigned char *T) -> mf_status {
        const int32_t rows = b.r1 - b.r0;
        double *row_total = (double *)e->z->W.ptr;
        MF_TRY(launch_loss(e, rows, (const int64_t *)(T + b.l.ptr), (const int32_t *)(T + b.l.idx),
                           sd.val ? (const float *)(T + b.l.val) : NULL,
                           (const unsigned char *)e->F[0].ptr + (size_t)b.r0 * xrow, row_total));
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(row + b.r0, row_total, (size_t)rows * sizeof *row,
                                         cudaMemcpyDeviceToHost, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
        return MF_OK;
    };
    return stream_pass(e, MF_IALS_USERS, part);
}

mf_status stream_setup(cuda_engine *e, const mf_ials_setup *s, size_t common, size_t inter,
                       size_t usable, bool limited)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    e->z = (streamer *)calloc(1, sizeof *e->z);
    if (!e->z)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", e->fn);
    streamer &z = *e->z;
    const bool cg = e->cg_steps > 0, has_val = R->val != NULL;
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
    if (!e->z)
        return;
    streamer &z = *e->z;
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
    free(e->z);
    e->z = NULL;
}

} // namespace mf_ials_cuda
