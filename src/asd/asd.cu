/* The CUDA engine of ASD and Scaled ASD. Ω goes to the device once, as the matrix's cached
 * CSR and CSC (in a group, of this rank's rows and columns); every iteration is a fixed sequence of
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
 * In a group (asd_internal.h) each rank solves its rows of X (its rows of Ω by rows) and
 * its columns of Y (its columns of Ω by columns, every row's entries), and holds all of X
 * and Y: after each side's step the ranks gather that side's rows (NCCL, in the stream).
 * Every line's arithmetic (its gradient row, direction, norms) is then one GPU's to the
 * bit, and so are both Gram matrices, which every rank computes from the whole factor;
 * NCCL sums only the scalars of each step (|G|^2, <D, G>, the denominator, and the ranks'
 * reasons to stop with X's) and |R|^2, in double, whose order against one GPU's atomic
 * adds changes their last bits at most, which a float step length almost never shows: the
 * factors are meant to be one GPU's bit for bit (test_gpu_asd checks). Per iteration: two
 * gathers (X's and Y's rows, as many bytes as the all-reduce of the Y gradient that they
 * replace, whose float partial sums, one per rank, ran in another order than one GPU's)
 * and three small sums; no rank repeats another's step or direction.
 *
 * In the reduced phase (mf_asd_setup.precision: BF16 or FP16) every pass reads the other
 * side's factor from its 16-bit copy (ld values a row, as the float factor: a lane's 4
 * values are 8 bytes, aligned), made by half_copy_kernel each time that factor moves: after
 * each side's step (and its gather in a group: every rank rounds the whole factor, the same
 * bits) and at the start. The Gram matrices, the own rows and the steps read the floats.
 * to_float() ends the phase: the copies are no longer read, and the X gradient that the
 * last iteration made from Y's copy is made again in float. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "asd/asd_deal.h"
#include "asd/asd_internal.h"
#include "asd/asd_kernels.cuh"
#include "core/ctx.h"
#include "core/staging.h"
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
    int32_t m, n; /* all rows of X, all of Y */
    /* This rank's lines of side s (0: rows of X, 1: rows of Y = columns of Ω): [lo, hi),
     * and every rank's (size + 1; NULL alone), for the gathers. */
    int32_t lo[2], hi[2];
    const int64_t *bounds[2];
    double norm2; /* |P(M)|^2, for begin() */
    int L, C;     /* the pass kernels' lanes per entry and float4s per lane */
    side by[2];   /* this rank's lines: by rows (CSR), by columns (CSC) */
    mf_dbuf X, Y, G, D, sums, gram, chol, inv;
    /* The pass kernels' grid per side, its lines grouped by warp (order) and where each
     * warp's start (first: warps + 1), asd_deal.h. */
    unsigned grid[2];
    mf_dbuf order[2], first[2];
    /* Side s's long lines (asd::long_entries or more; C == 1 only): their count and list. */
    int long_count[2];
    mf_dbuf long_list[2];
    /* The reduced phase: its precision (MF_PRECISION_BF16 or FP16; 0 once over, or never),
     * and X's (0) and Y's (1) 16-bit copies, all lines (allocated when the run has one). */
    int half;
    mf_dbuf low[2];
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

template <bool GRAD, int HALF> const void *pass_fn(int L, int C)
{
    switch (L) {
    case 1: return (const void *)&asd::pass_kernel<1, 1, GRAD, HALF>;
    case 2: return (const void *)&asd::pass_kernel<2, 1, GRAD, HALF>;
    case 4: return (const void *)&asd::pass_kernel<4, 1, GRAD, HALF>;
    case 8: return (const void *)&asd::pass_kernel<8, 1, GRAD, HALF>;
    case 16: return (const void *)&asd::pass_kernel<16, 1, GRAD, HALF>;
    default: break;
    }
    switch (C) {
    case 1: return (const void *)&asd::pass_kernel<32, 1, GRAD, HALF>;
    case 2: return (const void *)&asd::pass_kernel<32, 2, GRAD, HALF>;
    case 3: return (const void *)&asd::pass_kernel<32, 3, GRAD, HALF>;
    default: return (const void *)&asd::pass_kernel<32, 4, GRAD, HALF>;
    }
}

template <bool GRAD, int HALF> const void *long_fn(int L)
{
    switch (L) {
    case 1: return (const void *)&asd::long_pass_kernel<1, GRAD, HALF>;
    case 2: return (const void *)&asd::long_pass_kernel<2, GRAD, HALF>;
    case 4: return (const void *)&asd::long_pass_kernel<4, GRAD, HALF>;
    case 8: return (const void *)&asd::long_pass_kernel<8, GRAD, HALF>;
    case 16: return (const void *)&asd::long_pass_kernel<16, GRAD, HALF>;
    default: return (const void *)&asd::long_pass_kernel<32, GRAD, HALF>;
    }
}

template <bool GRAD> const void *long_fn_in(int half, int L)
{
    switch (half) {
    case MF_PRECISION_BF16: return long_fn<GRAD, MF_PRECISION_BF16>(L);
    case MF_PRECISION_FP16: return long_fn<GRAD, MF_PRECISION_FP16>(L);
    default: return long_fn<GRAD, 0>(L);
    }
}

/* The pass kernel for the other factor in `half` (0: float; MF_PRECISION_BF16, FP16). */
template <bool GRAD> const void *pass_fn_in(int half, int L, int C)
{
    switch (half) {
    case MF_PRECISION_BF16: return pass_fn<GRAD, MF_PRECISION_BF16>(L, C);
    case MF_PRECISION_FP16: return pass_fn<GRAD, MF_PRECISION_FP16>(L, C);
    default: return pass_fn<GRAD, 0>(L, C);
    }
}

float *fp(const mf_dbuf &b)
{
    return (float *)b.ptr;
}

/* Side s's factor (0: X, 1: Y), and this rank's first line of it. */
float *factor(cuda_engine *e, int s)
{
    return fp(s == 0 ? e->X : e->Y);
}
float *own(cuda_engine *e, int s)
{
    return factor(e, s) + (size_t)e->lo[s] * e->ld;
}
double *sums(cuda_engine *e, int slot)
{
    return (double *)e->sums.ptr + slot;
}

/* A pass over side s's lines: own rows against the other factor, read in `half` (0: the
 * floats; else its 16-bit copy). grad: G out, |R|^2 and |G|^2 into slots 0, 1 of the side;
 * else |P(own other^T)|^2 into `slot`. */
mf_status pass(cuda_engine *e, int s, const float *own, int half, bool grad, int slot)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    asd::pass_args a;
    a.lines = e->by[s].lines;
    a.ptr = e->by[s].ptr;
    a.idx = e->by[s].idx;
    a.val = e->by[s].val;
    a.own = own;
    a.other = half ? (const void *)e->low[1 - s].ptr : (const void *)factor(e, 1 - s);
    a.ld = e->ld;
    a.G = fp(e->G);
    a.sums = sums(e, slot);
    a.order = (const int32_t *)e->order[s].ptr;
    a.first = (const int32_t *)e->first[s].ptr;
    if (a.lines == 0)
        return MF_OK;
    void *args[] = {&a};
    const void *fn =
        grad ? pass_fn_in<true>(half, e->L, e->C) : pass_fn_in<false>(half, e->L, e->C);
    MF_CUDA_TRY(
        ctx, cudaLaunchKernel(fn, dim3(e->grid[s]), dim3(asd::pass_threads), args, 0, c->stream));
    if (e->long_count[s] > 0) { /* the lines that the warps left */
        a.order = (const int32_t *)e->long_list[s].ptr;
        const void *lf = grad ? long_fn_in<true>(half, e->L) : long_fn_in<false>(half, e->L);
        MF_CUDA_TRY(ctx, cudaLaunchKernel(lf, dim3((unsigned)e->long_count[s]),
                                          dim3(asd::long_threads), args, 0, c->stream));
    }
    return MF_OK;
}

/* In the reduced phase, side s's 16-bit copy made anew from its factor (all lines). */
mf_status half_copy(cuda_engine *e, int s)
{
    if (!e->half)
        return MF_OK;
    mf_cuda *c = mf_cuda_of(e->ctx);
    const int64_t n = (int64_t)(s == 0 ? e->m : e->n) * e->ld; /* a multiple of 4 */
    if (n == 0)
        return MF_OK;
    const unsigned grid = mf_cuda_grid(c, n / 4, 256, 8);
    uint16_t *out = (uint16_t *)e->low[s].ptr;
    if (e->half == MF_PRECISION_BF16)
        asd::half_copy_kernel<MF_PRECISION_BF16><<<grid, 256, 0, c->stream>>>(factor(e, s), n, out);
    else
        asd::half_copy_kernel<MF_PRECISION_FP16><<<grid, 256, 0, c->stream>>>(factor(e, s), n, out);
    return MF_CUDA_LAUNCHED(e->ctx, "asd half_copy_kernel");
}

/* D = G (F^T F)^-1 for this rank's lines of side s, F the other factor (other_lines x ld,
 * all of it on every rank: its Gram is one GPU's, with no sum over the ranks), <D, G> into
 * the side's num; a singular Gram gives the plain direction. */
mf_status precondition(cuda_engine *e, int s, const float *F, int32_t other_lines)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    const int r = e->r, tiles = (r + 31) / 32;
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->gram.ptr, 0, (size_t)r * r * sizeof(double), c->stream));
    if (other_lines > 0 && e->ld <= 32) {
        const int per = asd::gram_small_floats / e->ld;
        asd::gram_small_kernel<<<(unsigned)(((int64_t)other_lines + per - 1) / per), 256, 0,
                                 c->stream>>>(F, other_lines, e->ld, r, (double *)e->gram.ptr);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd gram_small_kernel"));
    } else if (other_lines > 0) {
        int64_t slices = (int64_t)c->prop.multiProcessorCount * 2 / (tiles * tiles) + 1;
        int64_t per = ((other_lines + slices - 1) / slices + 31) / 32 * 32;
        slices = (other_lines + per - 1) / per;
        asd::gram_kernel<<<dim3(tiles * tiles, (unsigned)slices), dim3(32, 32), 0, c->stream>>>(
            F, other_lines, e->ld, r, per, (double *)e->gram.ptr);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd gram_kernel"));
    }
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
        fp(e->G), fp(e->inv), flags, lines, e->ld, r, fp(e->D), sums(e, slot(s, S_NUM)), (int64_t)0,
        lines);
    return MF_CUDA_LAUNCHED(ctx, "asd direction_kernel");
}

/* Side s's direction: D (scaled) or G. */
const float *direction(cuda_engine *e)
{
    return fp(e->scaled ? e->D : e->G);
}

/* The part of side s's half step (0: X by rows, 1: Y by columns; G holding the gradient
 * of this rank's lines) that moves nothing and sums over no ranks: [scaled: the other
 * factor's Gram, Cholesky, D, <D, G>], the denominator |P(D F^T)|^2. */
mf_status prepare(cuda_engine *e, int s)
{
    if (e->scaled)
        MF_TRY(precondition(e, s, factor(e, 1 - s), s == 0 ? e->n : e->m));
    return pass(e, s, direction(e), e->half, false, slot(s, S_DEN));
}

/* The rest: the side's sums over the ranks, F -= (num / den) D on this rank's lines, in a
 * group every rank's lines of F to every rank, and in the reduced phase F's 16-bit copy. */
mf_status take_step(cuda_engine *e, int s)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    /* the side's |G|^2, <D, G> and denominator over the ranks; X's with the reasons to
     * stop, summed before either factor moves (the step kernels read them) */
    MF_TRY(group_sum(e, sums(e, slot(s, S_GG)), s == 0 ? 3 + MF_ASD_WHY_COUNT : 3, 1));
    const int64_t n = (int64_t)e->by[s].lines * e->ld;
    if (n > 0) {
        asd::step_kernel<<<mf_cuda_grid(c, n, 256, 8), 256, 0, c->stream>>>(
            own(e, s), direction(e), n, sums(e, slot(s, e->scaled ? S_NUM : S_GG)),
            sums(e, slot(s, S_DEN)), sums(e, S_STOP));
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd step_kernel"));
    }
    if (e->comm)
        MF_TRY(e->comm->ops->allgatherv(e->comm, ctx, factor(e, s), e->bounds[s],
                                        (size_t)e->ld * sizeof(float), NULL));
    return half_copy(e, s);
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
    return pass(e, 0, own(e, 0), e->half, true, S_RES);
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
    /* the gradient of this rank's columns, from all of X: every row's entries */
    MF_TRY(pass(e, 1, own(e, 1), e->half, true, slot(1, S_RES)));
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
    /* T holds this rank's rows (asd.c), numbered from 0 */
    return mf_rmse_compute(e->ctx, (mf_sparse *)T, e->r, own(e, 0), e->ld, fp(e->Y), e->ld, NULL,
                           MF_MEMORY_DEVICE, rmse);
}

/* Working factor rows (lines x ld) to the caller's lines x r, host or device. */
mf_status copy_out(cuda_engine *e, const float *F, int32_t lines, float *dst)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = mf_cuda_of(ctx)->stream;
    if (lines == 0)
        return MF_OK;
    MF_CUDA_TRY(ctx, cudaMemcpy2DAsync(dst, (size_t)e->r * sizeof(float), F,
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
    /* this rank's rows of X (the driver gathers them), all of Y */
    MF_TRY(copy_out(e, own(e, 0), e->hi[0] - e->lo[0], X));
    return copy_out(e, fp(e->Y), e->n, Y);
}

void engine_destroy(mf_asd_engine *base)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_ctx *ctx = e->ctx;
    mf_device_guard guard(mf_cuda_of(ctx)->device);
    /* the queued start of an iteration that never came (read_back) still reads and writes
     * these buffers: done before they go back to the pool */
    cudaStreamSynchronize(mf_cuda_of(ctx)->stream);
    mf_dbuf *bufs[] = {&e->X,           &e->Y,        &e->G,        &e->D,        &e->sums,
                       &e->gram,        &e->chol,     &e->inv,      &e->low[0],   &e->low[1],
                       &e->order[0],    &e->order[1], &e->first[0], &e->first[1], &e->long_list[0],
                       &e->long_list[1]};
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

/* Both factors times scale. */
mf_status scale_start(cuda_engine *e, float scale)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    const mf_dbuf *F[2] = {&e->X, &e->Y};
    const int64_t n[2] = {(int64_t)e->m * e->ld, (int64_t)e->n * e->ld};
    for (int k = 0; k < 2; k++)
        if (n[k] > 0) {
            asd::scale_kernel<<<mf_cuda_grid(c, n[k], 256, 8), 256, 0, c->stream>>>(fp(*F[k]), n[k],
                                                                                    scale);
            MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd scale_kernel"));
        }
    return MF_OK;
}

/* The start's |R|^2 over this rank's rows into *res2 (the driver sums it: no collective
 * step while engines are made), and the gradient the first iteration starts from (in the
 * reduced phase from Y's 16-bit copy, made here). */
mf_status first_gradient(cuda_engine *e, double *res2)
{
    MF_TRY(half_copy(e, 1));
    MF_TRY(x_gradient(e));
    return read_back(e, res2, NULL, false, NULL);
}

/* The reduced phase's end (asd_internal.h): the X gradient and its start (read_back queues
 * it) again from the float Y; the queued start made from the copy, never used, is dropped
 * (its singular Gram, if any, counted by this read_back, not reported twice). */
mf_status engine_to_float(mf_asd_engine *base, double *res2)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    e->half = 0;
    return first_gradient(e, res2);
}

/* A group's start (asd_internal.h): scaled by the p2 summed over the ranks, as one GPU
 * scales its own (random_start). */
mf_status engine_begin(mf_asd_engine *base, double p2)
{
    cuda_engine *e = (cuda_engine *)base;
    mf_device_guard guard(mf_cuda_of(e->ctx)->device);
    if (p2 > 0.0)
        MF_TRY(scale_start(e, (float)sqrt(sqrt(e->norm2 / p2))));
    return first_gradient(e, &e->base.res2);
}

/* The random start, drawn by the device twin of the CPU engine's generator (the same
 * numbers for a seed: all of X and Y, in a group too) and scaled so that |P(X Y^T)| =
 * |P(M)|; in a group p2 holds this rank's rows' share, and begin() scales. */
mf_status random_start(cuda_engine *e)
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
    MF_TRY(pass(e, 0, own(e, 0), 0, false, S_DEN)); /* the start's scale: in float */
    double p2 = 0.0;
    MF_CUDA_TRY(ctx,
                cudaMemcpyAsync(&p2, sums(e, S_DEN), sizeof p2, cudaMemcpyDeviceToHost, c->stream));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
    e->base.p2 = p2;
    return MF_OK;
}

/* Side s's pass grid and its warps' lines (asd_deal.h: sorted by cost on the device, dealt
 * largest first to the least-loaded warp on the host). A line's fixed work (its own row, the
 * reductions, its gradient row) weighs about two steps of the entry loop, each step 32 / L
 * entries per unrolled load. The pattern does not change during a run, so this runs once
 * per side. */
mf_status split_lines(cuda_engine *e, int s)
{
    mf_ctx *ctx = e->ctx;
    mf_cuda *c = mf_cuda_of(ctx);
    const int32_t lines = e->by[s].lines;
    if (lines == 0)
        return MF_OK;
    e->grid[s] = mf_cuda_grid(c, (int64_t)lines * 32, asd::pass_threads, 8);
    const int64_t warps = (int64_t)e->grid[s] * (asd::pass_threads / 32);
    /* the sort's keys: the lines' costs (lines int64) and their sorted copy,
     * then the sorted lines (lines int32) */
    const int64_t line_cost = 2 * asd::unroll * (32 / e->L);
    mf_dbuf keys = {NULL, 0};
    MF_TRY(mf_dmem_alloc(ctx, &keys,
                         (size_t)(2 * (int64_t)lines) * sizeof(int64_t) +
                             (size_t)lines * sizeof(int32_t),
                         "ASD line costs"));
    int64_t *cost = (int64_t *)keys.ptr;
    const uint64_t *key_in = (const uint64_t *)cost; /* costs are not negative */
    uint64_t *key_out = (uint64_t *)(cost + lines);
    int32_t *sorted = (int32_t *)(cost + 2 * (int64_t)lines);
    /* the indices in the gradient buffer (not yet used; lines x ld floats hold lines int32) */
    int32_t *index = (int32_t *)e->G.ptr;
    asd::line_cost_kernel<<<mf_cuda_grid(c, lines, 256, 8), 256, 0, c->stream>>>(
        e->by[s].ptr, lines, line_cost, e->C == 1 ? asd::long_entries : INT64_MAX, cost, index);
    mf_status st = MF_CUDA_LAUNCHED(ctx, "asd line_cost_kernel");
    /* costs stay under 2^33 (a line's entries are under 2^31): 34 key bits */
    size_t temp_bytes = 0;
    cudaError_t err = cudaSuccess;
    if (st == MF_OK)
        err = cub::DeviceRadixSort::SortPairsDescending(nullptr, temp_bytes, key_in, key_out, index,
                                                        sorted, lines, 0, 34, c->stream);
    mf_dbuf temp = {NULL, 0};
    if (st == MF_OK && err == cudaSuccess)
        st = mf_dmem_alloc(ctx, &temp, temp_bytes, "ASD line sort scratch");
    if (st == MF_OK && err == cudaSuccess)
        err = cub::DeviceRadixSort::SortPairsDescending(temp.ptr, temp_bytes, key_in, key_out,
                                                        index, sorted, lines, 0, 34, c->stream);
    /* to the host, dealt there, and back: the warps' line lists */
    uint64_t *h_cost = NULL;
    int32_t *h_sorted = NULL, *h_first = NULL, *h_order = NULL;
    if (st == MF_OK && err == cudaSuccess) {
        h_cost = (uint64_t *)malloc((size_t)lines * sizeof *h_cost);
        h_sorted = (int32_t *)malloc((size_t)lines * sizeof *h_sorted);
        h_order = (int32_t *)malloc((size_t)lines * sizeof *h_order);
        h_first = (int32_t *)malloc((size_t)(warps + 1) * sizeof *h_first);
        if (!h_cost || !h_sorted || !h_order || !h_first)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "ASD: out of host memory dealing %d lines",
                         (int)lines);
    }
    if (st == MF_OK && err == cudaSuccess)
        err = cudaMemcpyAsync(h_cost, key_out, (size_t)lines * sizeof *h_cost,
                              cudaMemcpyDeviceToHost, c->stream);
    if (st == MF_OK && err == cudaSuccess)
        err = cudaMemcpyAsync(h_sorted, sorted, (size_t)lines * sizeof *h_sorted,
                              cudaMemcpyDeviceToHost, c->stream);
    if (st == MF_OK && err == cudaSuccess)
        err = cudaStreamSynchronize(c->stream);
    if (st == MF_OK && err == cudaSuccess)
        st = mf_asd_deal_lines(ctx, h_sorted, h_cost, lines, warps, h_first, h_order);
    if (st == MF_OK && err == cudaSuccess)
        st = mf_upload(ctx, &e->order[s], h_order, (size_t)lines * sizeof *h_order,
                       "ASD pass line order");
    if (st == MF_OK && err == cudaSuccess)
        st = mf_upload(ctx, &e->first[s], h_first, (size_t)(warps + 1) * sizeof *h_first,
                       "ASD pass lines per warp");
    free(h_cost);
    free(h_sorted);
    free(h_order);
    free(h_first);
    mf_dmem_free(ctx, &temp); /* stream-ordered: after the sort */
    mf_dmem_free(ctx, &keys);
    MF_TRY(st);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "ASD line deal", __FILE__, __LINE__);
    if (e->C != 1) /* rows past 128 values: no long lines (the block's scratch) */
        return MF_OK;
    /* the long lines: counted (in the pinned host word, e->host), then listed */
    int *count = (int *)sums(e, S_COUNT);
    const unsigned grid = mf_cuda_grid(c, lines, 256, 8);
    for (int listing = 0; listing < 2; listing++) {
        MF_CUDA_TRY(ctx, cudaMemsetAsync(count, 0, sizeof(int), c->stream));
        asd::long_lines_kernel<<<grid, 256, 0, c->stream>>>(
            e->by[s].ptr, lines, listing ? (int32_t *)e->long_list[s].ptr : NULL, count);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asd long_lines_kernel"));
        if (listing)
            break;
        MF_CUDA_TRY(
            ctx, cudaMemcpyAsync(e->host, count, sizeof(int), cudaMemcpyDeviceToHost, c->stream));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(c->stream));
        memcpy(&e->long_count[s], e->host, sizeof(int));
        if (e->long_count[s] == 0)
            break;
        MF_TRY(mf_dmem_alloc(ctx, &e->long_list[s], (size_t)e->long_count[s] * sizeof(int32_t),
                             "ASD long lines"));
    }
    return MF_OK;
}

mf_status setup(cuda_engine *e, const mf_asd_setup *s)
{
    mf_ctx *ctx = e->ctx;
    /* By rows: M, this rank's rows. By columns: this rank's columns of the whole matrix
     * (s->cols, of its shape; alone, M's own CSC), each with every row's entries in the
     * order of one GPU's CSC (the device transpose is a stable sort: ascending rows). */
    MF_TRY(mf_sparse_device_csr(s->M, &e->by[0].ptr, &e->by[0].idx, &e->by[0].val));
    MF_TRY(mf_sparse_device_csc(s->cols ? s->cols : s->M, &e->by[1].ptr, &e->by[1].idx,
                                &e->by[1].val));
    e->by[1].ptr += e->lo[1]; /* offsets into the whole idx and val arrays */
    for (int k = 0; k < 2; k++)
        e->by[k].lines = e->hi[k] - e->lo[k];
    const size_t lines =
        (size_t)(e->by[0].lines > e->by[1].lines ? e->by[0].lines : e->by[1].lines);
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
    if (e->half) {
        MF_TRY(mf_dmem_alloc(ctx, &e->low[0], (size_t)e->m * e->ld * sizeof(uint16_t),
                             "ASD factor X, 16-bit copy"));
        MF_TRY(mf_dmem_alloc(ctx, &e->low[1], (size_t)e->n * e->ld * sizeof(uint16_t),
                             "ASD factor Y, 16-bit copy"));
    }
    MF_CUDA_TRY(ctx, cudaMallocHost((void **)&e->host, 8 * sizeof(double)));
    MF_CUDA_TRY(ctx, cudaEventCreateWithFlags(&e->copied, cudaEventDisableTiming));
    MF_TRY(split_lines(e, 0));
    MF_TRY(split_lines(e, 1));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(e->sums.ptr, 0, e->sums.bytes, mf_cuda_of(ctx)->stream));
    if (!s->X0) {
        MF_TRY(random_start(e));
        if (e->comm) { /* scaled by begin(), once the driver summed p2 */
            e->base.begin = engine_begin;
            return MF_OK;
        }
        if (e->base.p2 > 0.0)
            MF_TRY(scale_start(e, (float)sqrt(sqrt(e->norm2 / e->base.p2))));
    }
    return first_gradient(e, &e->base.res2);
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
    e->base.to_float = engine_to_float;
    e->ctx = ctx;
    e->comm = ctx->comm;
    e->r = s->r;
    e->ld = (s->r + 3) / 4 * 4;
    e->scaled = s->scaled;
    e->m = s->rows_all;
    e->n = s->M->cols;
    e->lo[0] = s->row_lo, e->hi[0] = s->row_hi, e->bounds[0] = s->row_bounds;
    e->lo[1] = s->col_lo, e->hi[1] = s->col_hi, e->bounds[1] = s->col_bounds;
    e->norm2 = s->norm2;
    e->half =
        s->precision == MF_PRECISION_BF16 || s->precision == MF_PRECISION_FP16 ? s->precision : 0;
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
