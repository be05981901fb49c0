/* The CUDA engine of ASD and Scaled ASD. Ω goes to the device once, as the matrix's cached
 * CSR and CSC (the CSC sorted on the device); every iteration is a fixed sequence of
 * stream-ordered launches (asd_kernels.cuh) whose step lengths are computed on the device
 * from device sums, and the host reads back a few scalars per iteration (its one
 * synchronization): |R|^2 for the stopping rules, the count of singular Gram matrices and,
 * in a group, the ranks' reasons to stop.
 *
 * One iteration (the engine holds G = the X gradient of the current factors, and its sums):
 *   X step: [scaled: Gram(Y), Cholesky and inverse, D = G (Y^T Y)^-1]; den = |P(D Y^T)|^2;
 *           X -= (num / den) D;
 *   Y step: G = R^T X with R recomputed from the new X; the same with the roles swapped;
 *   then G = R Y for the next iteration, whose |R|^2 is this iteration's residual.
 *
 * In a group (asd_internal.h) the engine holds its rank's rows of X and of Ω, and all of Y.
 * NCCL sums on the device, in the stream, what spans the rows' shares: X's step sums (with
 * the ranks' reasons to stop, so that stopping needs no round trip of its own), the Y
 * gradient, X's Gram matrix, Y's step sums and |R|^2: five collectives an iteration. Y's
 * Gram is every rank's own, from all of Y, as on one GPU. The sums over Y's lines
 * (|G_Y|^2 and <D, G_Y>) are split: each rank sums an even slice of the lines [ylo, yhi)
 * and NCCL adds the slices, the same bits on every rank. So Y stays the same bits on every
 * rank, and X's rows are each computed by their rank alone; every rank repeats Y's
 * elementwise step and direction and Y's Gram. The group's result is one GPU's up to the
 * order of the sums: the Y gradient's float partial sums (one per rank, added by NCCL)
 * and X's Gram's partial sums are where it differs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "asd/asd_kernels.cuh"
#include "core/ctx.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm.h"

namespace
{

/* Device sums, doubles: per side (X at 0, Y at S_Y) |R|^2, |G|^2, <D, G>, |P(D F^T)|^2;
 * after X's, the sums of the ranks' reasons to stop (asd_internal.h), so that one group
 * sum carries X's step sums and them; then two ints: the last Gram's singular flag and the
 * count of singular Grams. */
enum {
    S_RES = 0,
    S_GG = 1,
    S_NUM = 2,
    S_DEN = 3,
    S_STOP = 4,
    S_Y = S_STOP + MF_ASD_WHY_COUNT,
    S_FLAGS = S_Y + 4,
    S_COUNT = S_FLAGS + 1,
    S_SLOTS
};

/* Side s's slot k (S_RES .. S_DEN). */
int slot(int s, int k)
{
    return (s ? S_Y : 0) + k;
}

struct side {
    int32_t lines;
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
};

struct cuda_engine {
    mf_asd_engine base;
    mf_ctx *ctx;
    int r, ld, scaled;
    int32_t m, n;
    int32_t ylo, yhi; /* the slice of Y's lines whose sums are this rank's (all of Y alone) */
    int L, C;         /* the pass kernels' lanes per entry and float4s per lane */
    side by[2];       /* by rows (CSR), by columns (CSC) */
    mf_dbuf X, Y, G, D, sums, gram, chol, inv;
    /* pinned: |R|^2, the singular count and the reasons to stop read back per iteration
     * (0 .. 4), this rank's reasons sent (5 .. 7) */
    double *host;
    int singular_seen;  /* the device count already reported */
    mf_comm *comm;      /* the context's group, or NULL */
    cudaEvent_t copied; /* read_back's copies done */
};

/* In a group: count floats or doubles of device memory become their sum over the ranks. */
mf_status group_sum(cuda_engine *e, void *buf, size_t count, int is_double)
{
    return e->comm ? e->comm->ops->sum_buffer(e->comm, e->ctx, buf, count, is_double) : MF_OK;
}

template <bool GRAD> const void *pass_fn(int L, int C)
{
    switch (L) {
    case 1: return (const void *)&asd::pass_kernel<1, 1, GRAD>;
    case 2: return (const void *)&asd::pass_kernel<2, 1, GRAD>;
    case 4: return (const void *)&asd::pass_kernel<4, 1, GRAD>;
    case 8: return (const void *)&asd::pass_kernel<8, 1, GRAD>;
    case 16: return (const void *)&asd::pass_kernel<16, 1, GRAD>;
    default: break;
    }
    switch (C) {
    case 1: return (const void *)&asd::pass_kernel<32, 1, GRAD>;
    case 2: return (const void *)&asd::pass_kernel<32, 2, GRAD>;
    case 3: return (const void *)&asd::pass_kernel<32, 3, GRAD>;
    default: return (const void *)&asd::pass_kernel<32, 4, GRAD>;
    }
}

float *fp(const mf_dbuf &b)
{
    return (float *)b.ptr;
}
double *sums(cuda_engine *e, int slot)
{
    return (double *)e->sums.ptr + slot;
}

/* A pass over side s's lines: own rows against the other factor. grad: G out, |R|^2 and
 * |G|^2 into slots 0, 1 of the side; else |P(own other^T)|^2 into `slot`. */
mf_status pass(cuda_engine *e, int s, const float *own, const float *other, bool grad, int slot)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    asd::pass_args a;
    a.lines = e->by[s].lines;
    a.ptr = e->by[s].ptr;
    a.idx = e->by[s].idx;
    a.val = e->by[s].val;
    a.own = own;
    a.other = other;
    a.ld = e->ld;
    a.G = fp(e->G);
    a.sums = sums(e, slot);
    if (a.lines == 0)
        return MF_OK;
    void *args[] = {&a};
    const unsigned grid = mf_cuda_grid(c, (int64_t)a.lines * 32, asd::pass_threads, 8);
    MF_CUDA_TRY(ctx, cudaLaunchKernel(grad ? pass_fn<true>(e->L, e->C) : pass_fn<false>(e->L, e->C),
                                      dim3(grid), dim3(asd::pass_threads), args, 0, c->stream));
    return MF_OK;
}

/* D = G (F^T F)^-1 for the side whose other factor is F (other_lines x ld), <D, G> into
 * the side's num; a singular Gram gives the plain direction. In a group, X's step takes
 * Y's Gram from all of Y (every rank holds it) as one GPU does, with no sum over the
 * ranks: the same bits as one GPU's up to the order of the slices' atomic adds, and one
 * collective fewer per iteration for about one GPU's Gram pass (Y's Gram had been summed
 * from slices, then all-reduced). X's Gram is summed over the rows' shares; Y's step sums
 * <D, G> over this rank's slice of Y's lines (the group sums add the slices). */
mf_status precondition(cuda_engine *e, int s, const float *F, int32_t other_lines)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    const int r = e->r, tiles = (r + 31) / 32;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->gram.ptr, 0, (size_t)r * r * sizeof(double), c->stream));
    if (other_lines > 0) {
        int64_t slices = (int64_t)c->prop.multiProcessorCount * 2 / (tiles * tiles) + 1;
        int64_t per = ((other_lines + slices - 1) / slices + 31) / 32 * 32;
        slices = (other_lines + per - 1) / per;
        asd::gram_kernel<<<dim3(tiles * tiles, (unsigned)slices), dim3(32, 32), 0, c->stream>>>(
            F, other_lines, e->ld, r, per, (double *)e->gram.ptr);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd gram_kernel"));
    }
    if (s == 1) /* X's Gram over the rows' shares */
        MF_TRY(group_sum(e, e->gram.ptr, (size_t)r * r, 1));
    int *flags = (int *)sums(e, S_FLAGS);
    double *L = (double *)e->chol.ptr;
    const size_t shared =
        r <= asd::cholesky_shared_rank ? 2 * (size_t)r * r * sizeof(double) : (size_t)0;
    asd::cholesky_inverse_kernel<<<1, 256, shared, c->stream>>>((const double *)e->gram.ptr, r, L,
                                                                L + (size_t)r * r, fp(e->inv),
                                                                flags, (int *)sums(e, S_COUNT));
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd cholesky_inverse_kernel"));
    const int64_t lines = e->by[s].lines;
    const unsigned gx = mf_cuda_grid(c, lines, 8, 16);
    asd::direction_kernel<<<dim3(gx, (unsigned)((e->ld + 31) / 32)), dim3(32, 8), 0, c->stream>>>(
        fp(e->G), fp(e->inv), flags, lines, e->ld, r, fp(e->D), sums(e, slot(s, S_NUM)),
        s == 0 ? (int64_t)0 : (int64_t)e->ylo, s == 0 ? lines : (int64_t)e->yhi);
    return MF_CUDA_LAUNCHED(ctx, "asd direction_kernel");
}

/* Side s's direction: D (scaled) or G. */
const float *direction(cuda_engine *e)
{
    return fp(e->scaled ? e->D : e->G);
}

/* The part of side s's half step (0: X by rows, 1: Y by columns; G holding its gradient)
 * that moves nothing: [scaled: the other factor's Gram, Cholesky, D, <D, G>], the
 * denominator |P(D F^T)|^2. X's sums over no ranks (Y's Gram is every rank's own). */
mf_status prepare(cuda_engine *e, int s)
{
    const float *other = fp(s == 0 ? e->Y : e->X);
    if (e->scaled)
        MF_TRY(precondition(e, s, other, s == 0 ? e->n : e->m));
    return pass(e, s, direction(e), other, false, slot(s, S_DEN));
}

/* The rest: the side's sums over the ranks, then F -= (num / den) D. */
mf_status take_step(cuda_engine *e, int s)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    /* the side's |G|^2, <D, G> and denominator over the ranks; X's with the reasons to
     * stop, summed before either factor moves (the step kernels read them) */
    MF_TRY(group_sum(e, sums(e, slot(s, S_GG)), s == 0 ? 3 + MF_ASD_WHY_COUNT : 3, 1));
    const int64_t n = (int64_t)e->by[s].lines * e->ld;
    asd::step_kernel<<<mf_cuda_grid(c, n, 256, 8), 256, 0, c->stream>>>(
        fp(s == 0 ? e->X : e->Y), direction(e), n, sums(e, slot(s, e->scaled ? S_NUM : S_GG)),
        sums(e, slot(s, S_DEN)), sums(e, S_STOP));
    return MF_CUDA_LAUNCHED(ctx, "asd step_kernel");
}

/* The next iteration's start, which neither moves a factor, sums over the ranks nor waits
 * for the host: the sums cleared (all but X's gradient sums, which the last pass left),
 * then X's prepare(). */
mf_status next_start(cuda_engine *e)
{
    MF_CUDA_TRY(e->ctx, cudaMemsetAsync(sums(e, S_NUM), 0, (S_FLAGS - S_NUM) * sizeof(double),
                                        mf_cuda_of(e->ctx)->stream));
    return prepare(e, 0);
}

/* G = R Y with |R|^2 and |G|^2 into side X's slots (cleared first). */
mf_status x_gradient(cuda_engine *e)
{
    MF_CUDA_TRY(e->ctx,
                cudaMemsetAsync(sums(e, S_RES), 0, 2 * sizeof(double), mf_cuda_of(e->ctx)->stream));
    return pass(e, 0, fp(e->X), fp(e->Y), true, S_RES);
}

/* |R|^2 (in a group, summed over the ranks when sum_ranks), the singular count and (stop:
 * not NULL) the sums of the ranks' reasons to stop to the host: the iteration's one
 * synchronization. The next iteration's start (next_start) is queued behind the copies
 * before the host waits for them, so that the device has work while the host reads the
 * scalars, calls the progress callback and applies the stopping rules; when the run stops
 * there, that work is dropped (it moved nothing and took no collective step). */
mf_status read_back(cuda_engine *e, double *res2, int *new_singular, bool sum_ranks, double *stop)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    if (sum_ranks)
        MF_TRY(group_sum(e, sums(e, S_RES), 1, 1));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(e->host, sums(e, S_RES), sizeof(double),
                                     cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(e->host + 1, sums(e, S_COUNT), sizeof(int),
                                     cudaMemcpyDeviceToHost, stream));
    if (stop)
        MF_CUDA_TRY(ctx,
                    cudaMemcpyAsync(e->host + 2, sums(e, S_STOP), MF_ASD_WHY_COUNT * sizeof(double),
                                    cudaMemcpyDeviceToHost, stream));
    MF_CUDA_TRY(ctx, cudaEventRecord(e->copied, stream));
    const mf_status queued = next_start(e);
    MF_CUDA_TRY(ctx, cudaEventSynchronize(e->copied));
    MF_TRY(queued);
    *res2 = e->host[0];
    int count;
    memcpy(&count, e->host + 1, sizeof count);
    if (new_singular)
        *new_singular = count - e->singular_seen;
    e->singular_seen = count;
    if (stop)
        memcpy(stop, e->host + 2, MF_ASD_WHY_COUNT * sizeof(double));
    return MF_OK;
}

mf_status engine_iterate(mf_asd_engine *base, const double *stop_in, double *res2, int *singular,
                         double *stop_out)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    /* X's prepare() is queued (read_back): the sums were cleared there */
    if (e->comm) { /* this rank's reasons to stop, for X's group sum (host[5 .. 7] is free:
                    * its last copy ran before the last iteration's synchronization) */
        memcpy(e->host + 5, stop_in, MF_ASD_WHY_COUNT * sizeof(double));
        MF_CUDA_TRY(ctx,
                    cudaMemcpyAsync(sums(e, S_STOP), e->host + 5, MF_ASD_WHY_COUNT * sizeof(double),
                                    cudaMemcpyHostToDevice, stream));
    }
    MF_TRY(take_step(e, 0));
    MF_TRY(pass(e, 1, fp(e->Y), fp(e->X), true, slot(1, S_RES)));
    if (e->comm) /* the Y gradient summed over the rows' shares */
        MF_TRY(group_sum(e, e->G.ptr, (size_t)e->n * e->ld, 0));
    if (e->comm && !e->scaled) {
        /* Plain steps move along G: its |G|^2 over this rank's slice of the lines
         * (take_step's group sum adds the slices). */
        MF_CUDA_TRY(ctx, cudaMemsetAsync(sums(e, slot(1, S_GG)), 0, sizeof(double), stream));
        if (e->yhi > e->ylo) {
            mf_cuda *c = mf_cuda_of(ctx);
            const int64_t n = (int64_t)(e->yhi - e->ylo) * e->ld;
            asd::sumsq_kernel<<<mf_cuda_grid(c, n, 256, 8), 256, 0, stream>>>(
                fp(e->G) + (size_t)e->ylo * e->ld, n, sums(e, slot(1, S_GG)));
            MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd sumsq_kernel"));
        }
    }
    MF_TRY(prepare(e, 1));
    MF_TRY(take_step(e, 1));
    MF_TRY(x_gradient(e));
    int fresh = 0;
    MF_TRY(read_back(e, res2, &fresh, true, stop_out));
    *singular += fresh;
    return MF_OK;
}

mf_status engine_rmse(mf_asd_engine *base, const mf_sparse *T, double *rmse)
{
    cuda_engine *e = (cuda_engine *)base;
    return mf_rmse_compute(e->ctx, (mf_sparse *)T, e->r, fp(e->X), e->ld, fp(e->Y), e->ld, NULL,
                           MF_MEMORY_DEVICE, rmse);
}

/* Working factor (lines x ld) to the caller's lines x r, host or device. */
mf_status copy_out(cuda_engine *e, const mf_dbuf &F, int32_t lines, float *dst)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    if (lines == 0)
        return MF_OK;
    MF_CUDA_TRY(ctx, cudaMemcpy2DAsync(dst, (size_t)e->r * sizeof(float), F.ptr,
                                       (size_t)e->ld * sizeof(float), (size_t)e->r * sizeof(float),
                                       (size_t)lines, cudaMemcpyDefault, stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream));
    return MF_OK;
}

mf_status engine_finish(mf_asd_engine *base, float *X, float *Y, mf_memory where)
{
    cuda_engine *e = (cuda_engine *)base;
    (void)where; /* cudaMemcpyDefault tells host from device */
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    MF_TRY(copy_out(e, e->X, e->m, X));
    return copy_out(e, e->Y, e->n, Y);
}

void engine_destroy(mf_asd_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    /* the queued start of an iteration that never came (read_back) still reads and writes
     * these buffers: done before they go back to the pool */
    cudaStreamSynchronize(mf_cuda_of(ctx)->stream);
    mf_dbuf *bufs[] = {&e->X, &e->Y, &e->G, &e->D, &e->sums, &e->gram, &e->chol, &e->inv};
    for (mf_dbuf *b : bufs)
        mf_dmem_free(ctx, b);
    if (e->host)
        cudaFreeHost(e->host);
    if (e->copied)
        cudaEventDestroy(e->copied);
    free(e);
}

/* A working factor from host X0 (lines x r), or zeros to be filled. */
mf_status alloc_factor(cuda_engine *e, mf_dbuf *F, int32_t lines, const float *X0, const char *what)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    MF_TRY(mf_dmem_alloc(ctx, F, (size_t)lines * e->ld * sizeof(float), what));
    if (lines == 0)
        return MF_OK;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(F->ptr, 0, F->bytes, stream));
    if (X0) {
        MF_CUDA_TRY(ctx,
                    cudaMemcpy2DAsync(F->ptr, (size_t)e->ld * sizeof(float), X0,
                                      (size_t)e->r * sizeof(float), (size_t)e->r * sizeof(float),
                                      (size_t)lines, cudaMemcpyHostToDevice, stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(stream)); /* X0 is the driver's to free */
    }
    return MF_OK;
}

/* The random start, drawn by the device twin of the CPU engine's generator (the same
 * numbers for a seed) and scaled so that |P(X Y^T)| = |P(M)|. */
mf_status random_start(cuda_engine *e, const mf_asd_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    const int64_t nx = (int64_t)e->m * e->r, ny = (int64_t)e->n * e->r;
    mf_dbuf tmp = {NULL, 0};
    MF_TRY(
        mf_dmem_alloc(ctx, &tmp, (size_t)(nx > ny ? nx : ny) * sizeof(float), "ASD random start"));
    mf_status st = MF_OK;
    const mf_dbuf *F[2] = {&e->X, &e->Y};
    const int64_t cnt[2] = {nx, ny};
    const int32_t lines[2] = {e->m, e->n};
    const uint64_t streams[2] = {MF_ASD_X_STREAM, MF_ASD_Y_STREAM};
    for (int k = 0; k < 2 && st == MF_OK; k++) {
        st = mf_cuda_random_uniform(ctx, fp(tmp), cnt[k], -1.0f, 1.0f, ctx->seed, streams[k]);
        cudaError_t err = cudaSuccess;
        if (st == MF_OK && lines[k] > 0)
            err = cudaMemcpy2DAsync(F[k]->ptr, (size_t)e->ld * sizeof(float), tmp.ptr,
                                    (size_t)e->r * sizeof(float), (size_t)e->r * sizeof(float),
                                    (size_t)lines[k], cudaMemcpyDeviceToDevice, c->stream);
        if (err != cudaSuccess)
            st = mf_cuda_fail(ctx, err, "ASD random start copy", __FILE__, __LINE__);
    }
    mf_dmem_free(ctx, &tmp);
    MF_TRY(st);
    MF_CUDA_TRY(ctx, cudaMemsetAsync(sums(e, S_DEN), 0, sizeof(double), c->stream));
    MF_TRY(pass(e, 0, fp(e->X), fp(e->Y), false, S_DEN));
    double p2 = 0.0;
    MF_CUDA_TRY(ctx,
                cudaMemcpyAsync(&p2, sums(e, S_DEN), sizeof p2, cudaMemcpyDeviceToHost, c->stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    if (!(p2 > 0.0))
        return MF_OK;
    const float scale = (float)sqrt(sqrt(s->norm2 / p2));
    asd::scale_kernel<<<mf_cuda_grid(c, (int64_t)e->m * e->ld, 256, 8), 256, 0, c->stream>>>(
        fp(e->X), (int64_t)e->m * e->ld, scale);
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd scale_kernel"));
    asd::scale_kernel<<<mf_cuda_grid(c, (int64_t)e->n * e->ld, 256, 8), 256, 0, c->stream>>>(
        fp(e->Y), (int64_t)e->n * e->ld, scale);
    return MF_CUDA_LAUNCHED(ctx, "asd scale_kernel");
}

mf_status setup(cuda_engine *e, const mf_asd_setup *s)
{
    mf_ctx *ctx = e->ctx;
    mf_sparse *M = s->M;
    MF_TRY(mf_sparse_device_csr(M, &e->by[0].ptr, &e->by[0].idx, &e->by[0].val));
    MF_TRY(mf_sparse_device_csc(M, &e->by[1].ptr, &e->by[1].idx, &e->by[1].val));
    e->by[0].lines = e->m;
    e->by[1].lines = e->n;
    const size_t lines = (size_t)(e->m > e->n ? e->m : e->n);
    MF_TRY(alloc_factor(e, &e->X, e->m, s->X0, "ASD factor X"));
    MF_TRY(alloc_factor(e, &e->Y, e->n, s->Y0, "ASD factor Y"));
    MF_TRY(mf_dmem_alloc(ctx, &e->G, lines * e->ld * sizeof(float), "ASD gradient"));
    MF_TRY(mf_dmem_alloc(ctx, &e->sums, S_SLOTS * sizeof(double), "ASD sums"));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->sums.ptr, 0, e->sums.bytes, mf_cuda_of(ctx)->stream));
    if (e->scaled) {
        const size_t rr = (size_t)e->r * e->r;
        MF_TRY(mf_dmem_alloc(ctx, &e->D, lines * e->ld * sizeof(float), "ASD direction"));
        MF_TRY(mf_dmem_alloc(ctx, &e->gram, rr * sizeof(double), "ASD Gram matrix"));
        MF_TRY(mf_dmem_alloc(ctx, &e->chol, 2 * rr * sizeof(double), "ASD Cholesky scratch"));
        MF_TRY(mf_dmem_alloc(ctx, &e->inv, rr * sizeof(float), "ASD Gram inverse"));
    }
    MF_CUDA_TRY(ctx, cudaMallocHost((void **)&e->host, 8 * sizeof(double)));
    MF_CUDA_TRY(ctx, cudaEventCreateWithFlags(&e->copied, cudaEventDisableTiming));
    if (!s->X0) /* not in a group: the driver draws the start there */
        MF_TRY(random_start(e, s));
    MF_TRY(x_gradient(e));
    /* this rank's |R|^2: the driver sums it (no collective step while engines are made) */
    return read_back(e, &e->base.res2, NULL, false, NULL);
}

} // namespace

extern "C" mf_status mf_cuda_asd_engine(const mf_asd_setup *s, mf_asd_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    cuda_engine *e = (cuda_engine *)calloc(1, sizeof *e);
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    e->base.iterate = engine_iterate;
    e->base.rmse = engine_rmse;
    e->base.finish = engine_finish;
    e->base.destroy = engine_destroy;
    e->ctx = ctx;
    e->comm = ctx->comm;
    e->r = s->r;
    e->ld = (s->r + 3) / 4 * 4;
    e->scaled = s->scaled;
    e->m = s->M->rows;
    e->n = s->M->cols;
    e->ylo = 0, e->yhi = e->n;
    if (e->comm) { /* an even slice of Y's lines per rank */
        const int64_t n = e->n, rank = e->comm->rank, size = e->comm->size;
        e->ylo = (int32_t)(n * rank / size);
        e->yhi = (int32_t)(n * (rank + 1) / size);
    }
    const int q4 = e->ld / 4;
    e->L = 1;
    while (e->L < q4 && e->L < 32)
        e->L *= 2;
    e->C = (q4 + e->L - 1) / e->L;
    mf_status st = setup(e, s);
    if (st != MF_OK) {
        engine_destroy(&e->base);
        return st;
    }
    *out = &e->base;
    return MF_OK;
}
