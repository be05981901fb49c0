// MF_BMF_INIT_ASSO on the GPU (see bmf_asso.h). Dense and tensor-core: each instance's
// candidates come from one bit-matrix product (seeds' columns against every column, over
// the rows, thresholded at its tau), and its first greedy round counts all gains with two
// more (the rows' uncovered ones and uncovered cells against every candidate, over the
// columns), through b1 MMA. A later round changes the gains only through the rows that took
// the last factor: their terms are recounted from the lines they had (kept by asso_apply)
// and the lines they have now, so a round costs those rows alone (on basket-like data a
// fifteenth of them a round; 4x faster over 20 rounds, the same factors).
#include <stdlib.h>
#include <string.h>

#include "bool/bmf_asso.h"
#include "bool/bmf_b1mma.cuh"
#include "bool/bmf_internal.h"
#include "bool/bmf_launch.cuh"
#include "core/ctx.h"
#include "cuda/cuda_internal.h"

namespace
{

// 32-bit words of a line of `bits` bits, padded to 512 bits (bmf_b1mma.cuh).
int64_t line_words(int64_t bits)
{
    return (bits + 511) / 512 * 16;
}

// C by rows (rows x rw words) and by columns (cols x cw words): a warp per row.
__global__ void asso_pack(const int64_t *ptr, const int32_t *col, int64_t m, uint32_t *rows,
                          int64_t rw, uint32_t *cols, int64_t cw)
{
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (i >= m)
        return;
    for (int64_t p = ptr[i] + threadIdx.x % 32; p < ptr[i + 1]; p += 32) {
        int64_t j = col[p];
        atomicOr(&rows[i * rw + j / 32], 1u << (j % 32));
        atomicOr(&cols[j * cw + i / 32], 1u << (i % 32));
    }
}

// U: every cell of every row uncovered (the bits of the n columns).
__global__ void asso_all_uncovered(uint32_t *U, int64_t m, int64_t n, int64_t rw)
{
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < m * rw;
         x += (int64_t)gridDim.x * blockDim.x) {
        int64_t j0 = (x % rw) * 32;
        U[x] = j0 + 32 <= n ? 0xffffffffu : j0 >= n ? 0u : (1u << (n - j0)) - 1u;
    }
}

// The round's choice: the largest gain, ties to the lowest candidate; -1 when none is
// positive (run() then stops: that factor and every later one stay empty).
__global__ void asso_choose(const unsigned long long *gains, int P, int *choice, int l)
{
    __shared__ unsigned long long best_gain[1024];
    __shared__ int best_c[1024];
    unsigned long long bg = 0;
    int bc = -1;
    for (int c = threadIdx.x; c < P; c += blockDim.x)
        if (gains[c] > bg) {
            bg = gains[c];
            bc = c;
        }
    best_gain[threadIdx.x] = bg;
    best_c[threadIdx.x] = bc;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            unsigned long long og = best_gain[threadIdx.x + half];
            int oc = best_c[threadIdx.x + half];
            if (og > best_gain[threadIdx.x] ||
                (og == best_gain[threadIdx.x] && oc >= 0 && oc < best_c[threadIdx.x])) {
                best_gain[threadIdx.x] = og;
                best_c[threadIdx.x] = oc;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        choice[l] = best_gain[0] > 0 ? best_c[0] : -1;
}

// Rows where the chosen candidate has a positive g_ic take factor l; their cells in it
// become covered. A warp per row. Each such row is also listed (changed[slot], slot from
// *count) with its lines as they were (Xold, Uold), while the list has room (cap rows):
// the next round's gains change only by those rows' old and new terms.
__global__ void asso_apply(uint32_t *X, uint32_t *U, const uint32_t *S, int64_t m, int64_t rw,
                           const int *choice, int l, uint64_t *A, int kw, uint32_t *Xold,
                           uint32_t *Uold, int32_t *changed, int *count, int64_t cap)
{
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int c = choice[l];
    if (i >= m || c < 0)
        return;
    const uint32_t *s = S + (int64_t)c * rw;
    uint32_t *x = X + i * rw, *u = U + i * rw;
    long long gx = 0, gu = 0;
    for (int64_t w = lane; w < rw; w += 32) {
        gx += __popc(x[w] & s[w]);
        gu += __popc(u[w] & s[w]);
    }
    for (int off = 16; off > 0; off /= 2) {
        gx += __shfl_xor_sync(0xffffffffu, gx, off);
        gu += __shfl_xor_sync(0xffffffffu, gu, off);
    }
    if (2 * gx - gu <= 0)
        return;
    int slot = 0;
    if (lane == 0)
        slot = atomicAdd(count, 1);
    slot = __shfl_sync(0xffffffffu, slot, 0);
    if (slot < cap) {
        for (int64_t w = lane; w < rw; w += 32) {
            Xold[(int64_t)slot * rw + w] = x[w];
            Uold[(int64_t)slot * rw + w] = u[w];
        }
        if (lane == 0)
            changed[slot] = (int32_t)i;
    }
    for (int64_t w = lane; w < rw; w += 32) {
        x[w] &= ~s[w];
        u[w] &= ~s[w];
    }
    if (lane == 0)
        A[i * kw + l / 64] |= 1ull << (l % 64);
}

// Factor l of B: the chosen candidate's columns. A thread per column.
__global__ void asso_write_b(const uint32_t *S, int64_t n, int64_t rw, const int *choice, int l,
                             uint64_t *B, int kw)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int c = choice[l];
    if (j >= n || c < 0)
        return;
    if (S[(int64_t)c * rw + j / 32] >> (j % 32) & 1u)
        B[j * kw + l / 64] |= 1ull << (l % 64);
}

struct asso_buffers {
    mf_dbuf rows, cols, seeds, seed_count, S, X, U, gains, choice, A, B, Xold, Uold, changed, count;
};

void release(mf_ctx *ctx, asso_buffers *b)
{
    mf_dbuf *all[] = {&b->rows, &b->cols, &b->seeds, &b->seed_count, &b->S,
                      &b->X,    &b->U,    &b->gains, &b->choice,     &b->A,
                      &b->B,    &b->Xold, &b->Uold,  &b->changed,    &b->count};
    for (mf_dbuf *d : all)
        mf_dmem_free(ctx, d);
}

mf_status run(const mf_bmf_asso_plan *p, asso_buffers *b, uint64_t *A, uint64_t *B)
{
    mf_ctx *ctx = p->ctx;
    mf_sparse *C = p->C;
    cudaStream_t st = ctx->link.cuda->stream;
    const int64_t m = C->rows, n = C->cols, rw = line_words(n), cw = line_words(m);
    const int P = p->P, k = p->k, kw = p->kw;
    const size_t abytes = (size_t)m * kw * 8, bbytes = (size_t)n * kw * 8;
    MF_TRY(mf_dmem_alloc(ctx, &b->rows, (size_t)m * rw * 4, "Asso: C by rows"));
    MF_TRY(mf_dmem_alloc(ctx, &b->cols, (size_t)n * cw * 4, "Asso: C by columns"));
    MF_TRY(mf_dmem_alloc(ctx, &b->seeds, (size_t)P * 4, "Asso: seeds"));
    MF_TRY(mf_dmem_alloc(ctx, &b->seed_count, (size_t)P * 8, "Asso: seed counts"));
    MF_TRY(mf_dmem_alloc(ctx, &b->S, (size_t)P * rw * 4, "Asso: candidates"));
    MF_TRY(mf_dmem_alloc(ctx, &b->X, (size_t)m * rw * 4, "Asso: uncovered ones"));
    MF_TRY(mf_dmem_alloc(ctx, &b->U, (size_t)m * rw * 4, "Asso: uncovered cells"));
    MF_TRY(mf_dmem_alloc(ctx, &b->gains, (size_t)P * 8, "Asso: gains"));
    MF_TRY(mf_dmem_alloc(ctx, &b->choice, (size_t)k * 4, "Asso: choices"));
    MF_TRY(mf_dmem_alloc(ctx, &b->A, abytes, "Asso: A"));
    MF_TRY(mf_dmem_alloc(ctx, &b->B, bbytes, "Asso: B"));
    /* The rows a round changes, up to a quarter of them (past that the next round's gains
     * are recomputed whole, which then costs at most twice as much). */
    const int64_t cap = (m + 3) / 4;
    MF_TRY(mf_dmem_alloc(ctx, &b->Xold, (size_t)(cap > 0 ? cap : 1) * rw * 4, "Asso: old rows"));
    MF_TRY(mf_dmem_alloc(ctx, &b->Uold, (size_t)(cap > 0 ? cap : 1) * rw * 4, "Asso: old rows"));
    MF_TRY(mf_dmem_alloc(ctx, &b->changed, (size_t)(cap > 0 ? cap : 1) * 4, "Asso: changed rows"));
    MF_TRY(mf_dmem_alloc(ctx, &b->count, sizeof(int), "Asso: changed rows"));

    int64_t *seed_count = (int64_t *)malloc((size_t)P * sizeof *seed_count);
    if (!seed_count)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    for (int c = 0; c < P; c++)
        seed_count[c] = p->col_count[p->seeds[c]];
    cudaError_t err =
        cudaMemcpyAsync(b->seed_count.ptr, seed_count, (size_t)P * 8, cudaMemcpyHostToDevice, st);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(b->seeds.ptr, p->seeds, (size_t)P * 4, cudaMemcpyHostToDevice, st);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(st); /* seed_count is freed next */
    free(seed_count);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "copying the Asso seeds", __FILE__, __LINE__);

    const int64_t *ptr;
    const int32_t *col;
    const float *val;
    MF_TRY(mf_sparse_device_csr(C, &ptr, &col, &val));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(b->rows.ptr, 0, b->rows.bytes, st));
    MF_CUDA_TRY(ctx, cudaMemsetAsync(b->cols.ptr, 0, b->cols.bytes, st));
    asso_pack<<<blocks_for(m * 32, 256), 256, 0, st>>>(ptr, col, m, (uint32_t *)b->rows.ptr, rw,
                                                       (uint32_t *)b->cols.ptr, cw);
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_pack"));

    /* Candidates: |rows(seed c) & rows(j)| for every seed c and column j, the seeds'
     * column lines against every column line, thresholded as they come out. Recomputed
     * for each tau rather than stored: P x n bits instead of P x n counts. */
    bmf_b1_args co = {};
    co.A = (const uint32_t *)b->cols.ptr;
    co.a_index = (const int32_t *)b->seeds.ptr;
    co.rows = P;
    co.lda = cw;
    co.B = (const uint32_t *)b->cols.ptr;
    co.cols = n;
    co.bits = (uint32_t *)b->S.ptr;
    co.ldo = rw;
    co.row_count = (const int64_t *)b->seed_count.ptr;
    const dim3 co_grid(blocks_for(P, BMF_B1_TILE), blocks_for(n, BMF_B1_TILE));

    const unsigned grid = mf_cuda_grid(ctx->link.cuda, m * rw, 256, 8);
    bmf_b1_args gain = {};
    gain.A = (const uint32_t *)b->X.ptr;
    gain.U = (const uint32_t *)b->U.ptr;
    gain.rows = m;
    gain.lda = rw;
    gain.B = (const uint32_t *)b->S.ptr;
    gain.cols = P;
    gain.gains = (unsigned long long *)b->gains.ptr;
    const dim3 gain_grid(blocks_for(m, BMF_B1_TILE), blocks_for(P, BMF_B1_TILE));
    int *choice = (int *)b->choice.ptr;
    bool stop = mf_bmf_asso_rounds_done(p, 0, 1) != 0; /* the watch, if any */
    for (int q = 0; q < p->instances && !stop; q++) {
        co.tau = bmf_asso_tau(q);
        MF_CUDA_TRY(ctx, cudaMemsetAsync(b->S.ptr, 0, b->S.bytes, st));
        bmf_b1_kernel<BMF_B1_MEMBER><<<co_grid, BMF_B1_WARPS * 32, 0, st>>>(co);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "bmf_b1_kernel (candidates)"));
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(b->X.ptr, b->rows.ptr, b->rows.bytes,
                                         cudaMemcpyDeviceToDevice, st));
        asso_all_uncovered<<<grid, 256, 0, st>>>((uint32_t *)b->U.ptr, m, n, rw);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_all_uncovered"));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(b->A.ptr, 0, abytes, st));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(b->B.ptr, 0, bbytes, st));
        for (int l = 0; l < k; l++) {
            /* After round 0 the gains change only by the rows the last factor changed: their
             * terms with the lines they had are taken out, those with their lines now are
             * put in (exact integers, so the same gains as a whole recount). */
            int changed = -1, last = 0;
            if (l > 0) {
                MF_CUDA_TRY(ctx, cudaMemcpyAsync(&changed, b->count.ptr, sizeof changed,
                                                 cudaMemcpyDeviceToHost, st));
                MF_CUDA_TRY(ctx, cudaMemcpyAsync(&last, choice + l - 1, sizeof last,
                                                 cudaMemcpyDeviceToHost, st));
                MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
                if (last < 0)
                    break; /* no factor last round: the rest stay empty */
            }
            if (changed < 0 || changed > cap) {
                MF_CUDA_TRY(ctx, cudaMemsetAsync(b->gains.ptr, 0, b->gains.bytes, st));
                bmf_b1_kernel<BMF_B1_GAIN><<<gain_grid, BMF_B1_WARPS * 32, 0, st>>>(gain);
                MF_TRY(MF_CUDA_LAUNCHED(ctx, "bmf_b1_kernel (gains)"));
            } else if (changed > 0) {
                const dim3 part_grid(blocks_for(changed, BMF_B1_TILE), gain_grid.y);
                bmf_b1_args old_rows = gain, new_rows = gain;
                old_rows.A = (const uint32_t *)b->Xold.ptr;
                old_rows.U = (const uint32_t *)b->Uold.ptr;
                old_rows.rows = changed;
                old_rows.negate = 1;
                new_rows.a_index = (const int32_t *)b->changed.ptr;
                new_rows.rows = changed;
                bmf_b1_kernel<BMF_B1_GAIN><<<part_grid, BMF_B1_WARPS * 32, 0, st>>>(old_rows);
                MF_TRY(MF_CUDA_LAUNCHED(ctx, "bmf_b1_kernel (gains out)"));
                bmf_b1_kernel<BMF_B1_GAIN><<<part_grid, BMF_B1_WARPS * 32, 0, st>>>(new_rows);
                MF_TRY(MF_CUDA_LAUNCHED(ctx, "bmf_b1_kernel (gains in)"));
            }
            asso_choose<<<1, 1024, 0, st>>>((const unsigned long long *)b->gains.ptr, P, choice, l);
            MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_choose"));
            MF_CUDA_TRY(ctx, cudaMemsetAsync(b->count.ptr, 0, sizeof(int), st));
            asso_apply<<<blocks_for(m * 32, 256), 256, 0, st>>>(
                (uint32_t *)b->X.ptr, (uint32_t *)b->U.ptr, (const uint32_t *)b->S.ptr, m, rw,
                choice, l, (uint64_t *)b->A.ptr, kw, (uint32_t *)b->Xold.ptr,
                (uint32_t *)b->Uold.ptr, (int32_t *)b->changed.ptr, (int *)b->count.ptr, cap);
            MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_apply"));
            asso_write_b<<<blocks_for(n, 256), 256, 0, st>>>((const uint32_t *)b->S.ptr, n, rw,
                                                             choice, l, (uint64_t *)b->B.ptr, kw);
            MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_write_b"));
            if (p->watch) {
                MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
                if (mf_bmf_asso_rounds_done(p, 1, 1)) {
                    stop = true; /* this instance keeps its rounds, later ones stay empty */
                    break;
                }
            }
        }
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(A + (size_t)q * m * kw, b->A.ptr, abytes,
                                         cudaMemcpyDeviceToHost, st));
        MF_CUDA_TRY(ctx, cudaMemcpyAsync(B + (size_t)q * n * kw, b->B.ptr, bbytes,
                                         cudaMemcpyDeviceToHost, st));
        MF_CUDA_TRY(ctx, cudaStreamSynchronize(st)); /* A and B are reused next instance */
    }
    return MF_OK;
}

} // namespace

extern "C" mf_status mf_cuda_bmf_asso(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B)
{
    mf_device_guard guard(p->ctx->link.cuda->device);
    asso_buffers b;
    memset(&b, 0, sizeof b);
    mf_status st = run(p, &b, A, B);
    if (st != MF_OK)
        cudaStreamSynchronize(p->ctx->link.cuda->stream); /* nothing in flight uses b after this */
    release(p->ctx, &b);
    return st;
}
