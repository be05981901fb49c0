/* The set-up of the CUDA iALS engine (ials_engine.cuh): the Gram matrices' chunks, the
 * device memory the resident mode needs, and its buffers (the factors, G and its partials,
 * the breakdown words, the CG vectors and segments), or else the streamed mode
 * (ials_stream.cu) where the interactions do not fit. */
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/ranks.h"
#include "core/staging.h"
#include "ials/ials_engine.cuh"

#include <cuda_fp16.h>

namespace mf_ials_cuda
{

namespace
{

/* A chunk holds at least GRAM_CHUNK_ROWS rows (fewer rows: one chunk), and a Gram's chunks
 * make at most about GRAM_BLOCKS blocks of gram_partial (a chunk is a block per lower tile).
 * Nothing of the device or the group: every GPU and every group size cuts the chunks alike,
 * so a group's G is one context's bit for bit. 2048 blocks keep about 4 blocks an SM busy
 * on each of 4 H200s (132 SMs) that share them, and the partials under 9 MB at any rank. */
const int64_t GRAM_CHUNK_ROWS = 1024, GRAM_BLOCKS = 2048;

int64_t gram_chunks(int32_t rows, int tiles)
{
    const int64_t most = (GRAM_BLOCKS + tiles - 1) / tiles,
                  n = ((int64_t)rows + GRAM_CHUNK_ROWS - 1) / GRAM_CHUNK_ROWS;
    return n < 1 ? 1 : n < most ? n : most;
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
    /* The share's rows only, numbered from its first (engine_solve moves the row pointers). */
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

/* The Gram partials' bytes: the larger side's chunks. */
size_t part_bytes(const cuda_engine *e)
{
    const int64_t most = e->chunks[0] > e->chunks[1] ? e->chunks[0] : e->chunks[1];
    return (size_t)most * tiles_of(e) * 1024 * sizeof(float);
}

/* The device bytes of alloc_common, and with fp16 the float copy that finish makes. */
size_t common_bytes(const cuda_engine *e, const mf_sparse *R)
{
    const size_t eb = fac_bytes(e), kk = (size_t)e->kp * e->kp;
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    size_t b = ((size_t)R->rows * e->kp + 1) * eb + ((size_t)R->cols * e->kp + 1) * eb;
    b += kk * sizeof(float) + part_bytes(e) + 2 * sizeof(unsigned long long);
    b += (lines + 1) * sizeof(double);
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

/* The resident mode's peak: the users' CSR (of Ru, unless it holds it already) and the
 * items' CSC (of Ri), with the device sort's scratch while the CSC is built (gone before the
 * factors come), then common_bytes and CG's vectors, segments and partial sums. Ru and Ri
 * are R itself, or a group's rank's shards (mf_ials_setup.part). Without a host transpose
 * the items' segments are bounded: a column past IALS_SEGMENT has at most n / IALS_SEGMENT
 * + 1, and at most nnz / (IALS_SEGMENT + 1) columns are past it. *inter: the two
 * orientations. */
size_t resident_bytes(const cuda_engine *e, const mf_sparse *Ru, const mf_sparse *Ri, size_t common,
                      size_t *inter)
{
    const size_t per = Ru->val ? 8 : 4;
    const size_t csr = ((size_t)Ru->rows + 1) * 8 + (size_t)Ru->nnz * per,
                 csc = ((size_t)Ri->cols + 1) * 8 + (size_t)Ri->nnz * per;
    *inter = csr + csc;
    const size_t scratch = Ri->transpose.ptr ? 0 : mf_cuda_csr_transpose_scratch(Ri->nnz, Ri->cols);
    size_t work = common;
    if (e->cg_steps > 0) {
        const size_t lines = (size_t)(Ru->rows > Ru->cols ? Ru->rows : Ru->cols);
        work += 3 * (lines * e->kp + 1) * sizeof(float) + (lines + 1) * sizeof(float);
        const int64_t su = count_segments(Ru->row_ptr, Ru->rows);
        int64_t sv;
        if (Ri->transpose.ptr) {
            sv = count_segments(Ri->transpose.ptr, Ri->cols);
        } else {
            const int64_t long_cols = Ri->nnz / (IALS_SEGMENT + 1);
            sv = (Ri->nnz + IALS_SEGMENT - 1) / IALS_SEGMENT +
                 (long_cols < Ri->cols ? long_cols : Ri->cols);
        }
        work += ((size_t)su + 1 + (size_t)sv + 1) * (8 + 8 + 4) +
                ((size_t)Ru->rows + 1 + (size_t)Ri->cols + 1) * 8;
        work += 2 * (((size_t)(su > sv ? su : sv) * e->kp + 1) * sizeof(float));
    }
    return (Ru->device.row_ptr.ptr ? 0 : csr) + csc + (scratch > work ? scratch : work);
}

/* The resident mode: the interactions on the device in both orientations, as they were
 * before streaming existed: the users' CSR and the items' CSC, of R, or of a group's rank's
 * shards (its users' rows, its items' columns: what its solves and its users' loss read). */
mf_status setup_resident(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R, *Ru = mf_ials_part(s, MF_IALS_USERS), *Ri = mf_ials_part(s, MF_IALS_ITEMS);
    MF_TRY(mf_sparse_device_csr(Ru, &e->by[0].ptr, &e->by[0].idx, &e->by[0].val));
    MF_TRY(mf_sparse_device_csc(Ri, &e->by[1].ptr, &e->by[1].idx, &e->by[1].val));
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
            st = build_segments(e, &e->by[0], Ru->row_ptr);
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

} // namespace

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

mf_status alloc_common(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    const mf_sparse *R = s->R;
    MF_TRY(alloc_factor(e, &e->F[0], R->rows, s->U0, "iALS user factors"));
    MF_TRY(alloc_factor(e, &e->F[1], R->cols, s->V0, "iALS item factors"));
    const size_t kk = (size_t)e->kp * e->kp;
    MF_TRY(mf_dmem_alloc(ctx, &e->G, kk * sizeof(float), "iALS Gram matrix"));
    MF_TRY(mf_dmem_alloc(ctx, &e->part, part_bytes(e), "iALS Gram partials"));
    MF_TRY(mf_dmem_alloc(ctx, &e->failed, 2 * sizeof(unsigned long long), "iALS breakdown words"));
    MF_CUDA_TRY(ctx,
                cudaMemsetAsync(e->failed.ptr, 0xff, e->failed.bytes, mf_cuda_of(ctx)->stream));
    const size_t lines = (size_t)(R->rows > R->cols ? R->rows : R->cols);
    MF_TRY(mf_dmem_alloc(ctx, &e->partial, (lines + 1) * sizeof(double), "iALS loss partials"));
    return MF_OK;
}

mf_status engine_setup(cuda_engine *e, const mf_ials_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *R = s->R;
    if (e->cg_steps == 0)
        MF_TRY(exact_prepare(e));
    e->by[0].rows = R->rows;
    e->by[1].rows = R->cols;
    for (int w = 0; w < 2; w++) {
        e->by[w].first = s->lo[w];
        e->by[w].count = s->hi[w] - s->lo[w];
    }
    for (int w = 0; w < 2; w++)
        e->chunks[w] = gram_chunks(e->by[w].rows, tiles_of(e));
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
    /* A shard's CSC is uploaded from its host transpose (built on the device, it would
     * first upload the shard's CSR, which nothing reads): so a rank's peak is its shards'. */
    if (s->part[MF_IALS_ITEMS])
        MF_TRY(mf_sparse_host_transpose(s->part[MF_IALS_ITEMS]));
    size_t inter = 0;
    if (resident_bytes(e, mf_ials_part(s, MF_IALS_USERS), mf_ials_part(s, MF_IALS_ITEMS), common,
                       &inter) <= usable)
        return setup_resident(e, s);
    if (mf_ranks(ctx) > 1)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s: over a group of contexts the interactions must fit on each device "
                       "(%zu bytes needed beside the factors, %zu available); streaming them "
                       "from host memory runs on one context",
                       e->fn, inter, usable > common ? usable - common : (size_t)0);
    return stream_setup(e, s, common, inter, usable, limited);
}

} // namespace mf_ials_cuda
