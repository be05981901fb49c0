// MF_BMF_INIT_ASSO on the GPU from the ones (see bmf_asso.h): the CPU's sparse, incremental
// cover (bmf_asso_cpu.c) with a block per row. A row's gains come from its uncovered ones
// through the inverted index (column -> candidates holding it), counted in 16-bit shared
// memory counters, one per candidate; then the block reads every counter back, evaluates the
// candidates the row touched and clears them for its next row. Candidates are numbered by
// size (their rank), so "candidates smaller than the row's bound" is a prefix of every
// inverted list, found by one binary search per column. After round 0, a round recounts
// only the rows that take the chosen factor: their old terms out, their new terms in. The
// instances run side by side (grid.y), so that the later rounds, a few thousand rows each,
// fill the GPU together (16 instances: 1.2-1.4x faster than one after another). Work
// is the rows' ones times the candidates they reach, as on the CPU, not rows x columns x
// seeds as in the dense tensor-core cover (bmf_asso.cu): on basket-like data with 1M ones
// the dense cover's round 0 multiplies 2.4e13 bits where this one counts 1.2e9 hits. Every
// count is an exact integer and ties go to the lowest seed, so the factors are the CPU's.
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_scan.cuh>

#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"
#include "bool/bmf_launch.cuh"
#include "bool/bmf_rules.h"
#include "core/ctx.h"
#include "cuda/cuda_internal.h"

namespace
{

constexpr int EVAL_THREADS = 256;
constexpr int MAX_KW = 16; // k <= 1024 (mf_bmf_run's limit)
// A row with more uncovered ones than this could overflow a 16-bit counter: its block counts
// in 32-bit counters in global memory instead (allocated only when such a row exists).
// Tests lower it (mf_bmf_asso_sparse_debug_narrow) to reach that path on small matrices.
constexpr int64_t NARROW_MAX = 65535;
int64_t narrow_max = NARROW_MAX;

// One instance's cover on the device. Candidates are numbered by rank: ascending size (ties
// in seed order); orig[r] is the seed index, for the tie-break of the choice.
struct cover {
    const int64_t *row_ptr; // C by rows
    const int32_t *col;
    const int64_t *col_ptr; // C by columns
    const int32_t *row;
    int32_t m, n;
    int P, kw;
    const int64_t *rptr; // candidate r's columns: rcol[rptr[r] .. rptr[r + 1]), ascending
    const int32_t *rcol;
    const int32_t *rsize; // rptr[r + 1] - rptr[r], ascending in r
    const int32_t *below; // below[s]: the ranks of size < s, for s in 0 .. below_max
    int32_t below_max;    // the largest size + 1 (every rank is below any larger s)
    const int32_t *orig;
    const int64_t *iptr; // column j's candidates: icand[iptr[j] .. iptr[j + 1]), ranks ascending
    const int32_t *icand;
    uint64_t *A, *B;          // m x kw, n x kw: the factors so far (what is covered)
    int32_t *covn;            // covered cells per row
    unsigned long long *gain; // per rank, two's complement sums (never negative between kernels)
    int *choice;              // the rank chosen in round l, -1: none positive
    int32_t *changed;         // the rows that take round l's factor
    int *count;
    int32_t *stamp;      // rows: the last round that listed them
    uint8_t *mark;       // columns of the chosen candidate
    uint32_t *wide;      // wide_blocks x P counters an instance for long rows; NULL when none needs
    int64_t wide_blocks; // asso_eval's blocks an instance
    int64_t narrow_max;
    // The instances side by side (grid.y): the arrays above hold each instance's in turn,
    // and instance q's candidates start at loff[q] in rcol and icand.
    const int64_t *loff;
    const int32_t *below_maxes;
    int64_t below_stride;
    int k;

    __device__ cover instance(int q) const
    {
        cover a = *this;
        const int64_t o = loff[q];
        a.rptr += (int64_t)q * (P + 1);
        a.rcol += o;
        a.rsize += (int64_t)q * P;
        a.below += q * below_stride;
        a.below_max = below_maxes[q];
        a.orig += (int64_t)q * P;
        a.iptr += (int64_t)q * (n + 1LL);
        a.icand += o;
        a.A += (int64_t)q * m * kw;
        a.B += (int64_t)q * n * kw;
        a.covn += (int64_t)q * m;
        a.gain += (int64_t)q * P;
        a.choice += (int64_t)q * k;
        a.changed += (int64_t)q * m;
        a.count += q;
        a.stamp += (int64_t)q * m;
        a.mark += (int64_t)q * n;
        if (a.wide)
            a.wide += (int64_t)q * wide_blocks * P;
        return a;
    }
};

// The ranks of candidates smaller than s: a prefix [0, ranks_below(s)).
__device__ __forceinline__ int ranks_below(const cover &a, int64_t s)
{
    return s <= 0 ? 0 : s > a.below_max ? a.P : __ldg(a.below + s);
}

__device__ __forceinline__ bool covered(const uint64_t *Ai, const uint64_t *__restrict__ B,
                                        int32_t j, int kw)
{
    return bmf_share(Ai, B + (int64_t)j * kw, kw) != 0;
}

// How many of candidate r's columns row i (factors Ai) already has covered.
__device__ int64_t covered_in(const cover &a, const uint64_t *Ai, int r)
{
    int64_t in = 0;
    for (int64_t t = a.rptr[r]; t < a.rptr[r + 1]; t++)
        in += covered(Ai, a.B, a.rcol[t], a.kw);
    return in;
}

// Adds sign * max(0, g_ir) to every candidate's gain, for the rows listed in a.changed (the
// rows round l changes; nothing when round l chose none) or, with listed false, for all.
// g_ir = (uncovered ones of row i in r) - (uncovered cells of row i in r); a candidate of
// size 2 u + covn or more cannot gain (u: the row's uncovered ones), which is the prefix
// bound, and one with 2 x1 - size + covn <= 0 is skipped before its covered cells are
// counted (bmf_asso_cpu.c's row_eval, the same rules).
__global__ void __launch_bounds__(EVAL_THREADS) asso_eval(cover all, bool listed, int l, int sign)
{
    const cover a = all.instance(blockIdx.y);
    extern __shared__ uint32_t cnt[]; // (P + 1) / 2 words of two 16-bit counters
    using scan = cub::BlockScan<int, EVAL_THREADS>;
    __shared__ typename scan::TempStorage scan_tmp;
    __shared__ uint64_t Ai[MAX_KW];
    __shared__ int first[EVAL_THREADS], before[EVAL_THREADS]; /* the lists are < 2^31 long */
    __shared__ unsigned long long u_sum;
    if (listed && a.choice[l] < 0)
        return;
    const int words = (a.P + 1) / 2;
    for (int w = threadIdx.x; w < words; w += blockDim.x)
        cnt[w] = 0;
    uint32_t *wcnt = a.wide ? a.wide + (int64_t)blockIdx.x * a.P : nullptr;
    const int64_t rows = listed ? *a.count : a.m;
    for (int64_t rr = blockIdx.x; rr < rows; rr += gridDim.x) {
        const int32_t i = listed ? a.changed[rr] : (int32_t)rr;
        const int64_t b = a.row_ptr[i], e = a.row_ptr[i + 1];
        const int covn = a.covn[i];
        if (threadIdx.x < a.kw)
            Ai[threadIdx.x] = a.A[(int64_t)i * a.kw + threadIdx.x];
        if (threadIdx.x == 0)
            u_sum = 0;
        __syncthreads();
        unsigned long long mine = 0;
        for (int64_t p = b + threadIdx.x; p < e; p += blockDim.x)
            mine += covn == 0 || !covered(Ai, a.B, a.col[p], a.kw);
        if (mine)
            atomicAdd(&u_sum, mine);
        __syncthreads();
        const int64_t u = (int64_t)u_sum;
        if (u == 0) {
            __syncthreads(); /* u_sum is reset by the next row */
            continue;
        }
        const int rcut = ranks_below(a, 2 * u + covn); /* the others cannot gain */
        const bool wide = u > a.narrow_max;
        // The hits, a block of the row's ones at a time: each thread's column gives a range
        // of its inverted list; the ranges are flattened over the block by a prefix sum.
        for (int64_t base = b; base < e; base += blockDim.x) {
            const int64_t p = base + threadIdx.x;
            int s = 0, len = 0;
            if (p < e) {
                const int32_t j = a.col[p];
                if (covn == 0 || !covered(Ai, a.B, j, a.kw)) {
                    int x = (int)a.iptr[j], y = (int)a.iptr[j + 1];
                    s = x;
                    while (x < y) {
                        const int mid = (int)(((int64_t)x + y) / 2);
                        if (__ldg(a.icand + mid) < rcut)
                            x = mid + 1;
                        else
                            y = mid;
                    }
                    len = x - s;
                }
            }
            int excl, total;
            scan(scan_tmp).ExclusiveSum(len, excl, total);
            first[threadIdx.x] = s;
            before[threadIdx.x] = excl;
            __syncthreads();
            // Thread t takes hits t, t + 256, ...: neighbouring threads read neighbouring list
            // entries, and the slot holding a hit (the last one starting at or before it:
            // empty slots start where the next one does) only moves forward. HITS loads are
            // issued before their counts, so that they are in flight together.
            constexpr int HITS = 4;
            int x = 0;
            for (int h0 = threadIdx.x; h0 < total; h0 += HITS * EVAL_THREADS) {
                int r[HITS];
#pragma unroll
                for (int z = 0; z < HITS; z++) {
                    const int h = h0 + z * EVAL_THREADS;
                    r[z] = -1;
                    if (h < total) {
                        while (x + 1 < EVAL_THREADS && before[x + 1] <= h)
                            x++;
                        r[z] = __ldg(a.icand + first[x] + (h - before[x]));
                    }
                }
#pragma unroll
                for (int z = 0; z < HITS; z++) {
                    if (r[z] < 0)
                        continue;
                    if (wide)
                        atomicAdd(wcnt + r[z], 1u);
                    else
                        atomicAdd(cnt + r[z] / 2, 1u << (r[z] % 2 * 16));
                }
            }
            __syncthreads(); /* first, before and scan_tmp are reused */
        }
        // Every touched candidate once: read its count, clear it, evaluate.
        const int n_counters = wide ? a.P : words;
        for (int w = threadIdx.x; w < n_counters; w += blockDim.x) {
            uint32_t x = wide ? wcnt[w] : cnt[w];
            if (!x)
                continue;
            if (wide)
                wcnt[w] = 0;
            else
                cnt[w] = 0;
            for (int half = 0; half < (wide ? 1 : 2); half++) {
                const int r = wide ? w : 2 * w + half;
                const int64_t x1 = wide ? x : half ? x >> 16 : x & 0xffffu;
                /* 2 x1 - size + covn <= 0, that is size >= 2 x1 + covn: cannot gain */
                if (x1 == 0 || r >= ranks_below(a, 2 * x1 + covn))
                    continue;
                const int64_t size = a.rsize[r];
                const int64_t g = 2 * x1 - size + (covn ? covered_in(a, Ai, r) : 0);
                if (g > 0)
                    atomicAdd(a.gain + r, (unsigned long long)(sign * g));
            }
        }
        __syncthreads();
    }
}

// Round l's choice: the largest gain, ties to the lowest seed index; -1 when none is
// positive. One block.
__global__ void asso_choose_rank(cover all, int l)
{
    const cover a = all.instance(blockIdx.y);
    __shared__ long long best_gain[1024];
    __shared__ int best_r[1024];
    long long bg = 0;
    int br = -1;
    for (int r = threadIdx.x; r < a.P; r += blockDim.x) {
        const long long g = (long long)a.gain[r];
        if (g > bg || (g == bg && g > 0 && a.orig[r] < a.orig[br])) {
            bg = g;
            br = r;
        }
    }
    best_gain[threadIdx.x] = bg;
    best_r[threadIdx.x] = br;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            const long long og = best_gain[threadIdx.x + half];
            const int orr = best_r[threadIdx.x + half];
            const long long mg = best_gain[threadIdx.x];
            const int mr = best_r[threadIdx.x];
            if (og > mg || (og == mg && og > 0 && a.orig[orr] < a.orig[mr])) {
                best_gain[threadIdx.x] = og;
                best_r[threadIdx.x] = orr;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        a.choice[l] = best_gain[0] > 0 ? best_r[0] : -1;
}

// Factor l of B is the chosen candidate (before any row takes it, so covered() is what was
// covered before this round); mark its columns, or clear the marks (set false).
__global__ void asso_mark(cover all, int l, bool set)
{
    const cover a = all.instance(blockIdx.y);
    const int r = a.choice[l];
    if (r < 0)
        return;
    for (int64_t t = a.rptr[r] + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.rptr[r + 1];
         t += (int64_t)gridDim.x * blockDim.x) {
        const int32_t j = a.rcol[t];
        if (set)
            a.B[(int64_t)j * a.kw + l / 64] |= 1ull << (l % 64);
        a.mark[j] = set;
    }
}

// The rows that take factor l: those holding an uncovered one in the chosen candidate with a
// positive g_ir, listed once each (stamp). A block per column of the candidate.
__global__ void asso_find(cover all, int l, int32_t stamp)
{
    const cover a = all.instance(blockIdx.y);
    const int r = a.choice[l];
    if (r < 0)
        return;
    const int64_t b0 = a.rptr[r], b1 = a.rptr[r + 1];
    for (int64_t v = b0 + blockIdx.x; v < b1; v += gridDim.x) {
        const int32_t j = a.rcol[v];
        for (int64_t t = a.col_ptr[j] + threadIdx.x; t < a.col_ptr[j + 1]; t += blockDim.x) {
            const int32_t i = a.row[t];
            const uint64_t *Ai = a.A + (int64_t)i * a.kw;
            if (covered(Ai, a.B, j, a.kw) || atomicExch(a.stamp + i, stamp) == stamp)
                continue;
            int64_t x1 = 0;
            for (int64_t q = a.row_ptr[i]; q < a.row_ptr[i + 1]; q++)
                x1 += a.mark[a.col[q]] && !covered(Ai, a.B, a.col[q], a.kw);
            const int64_t cin = a.covn[i] ? covered_in(a, Ai, r) : 0;
            if (2 * x1 - ((b1 - b0) - cin) > 0)
                a.changed[atomicAdd(a.count, 1)] = i;
        }
    }
}

// The listed rows take factor l: their covered count grows by the candidate's cells they
// had not covered, then their row of A gets the bit. A thread per row.
__global__ void asso_take(cover all, int l)
{
    const cover a = all.instance(blockIdx.y);
    const int r = a.choice[l];
    if (r < 0)
        return;
    const int rows = *a.count;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < rows; t += gridDim.x * blockDim.x) {
        const int32_t i = a.changed[t];
        uint64_t *Ai = a.A + (int64_t)i * a.kw;
        int64_t add = 0;
        for (int64_t v = a.rptr[r]; v < a.rptr[r + 1]; v++)
            add += !covered(Ai, a.B, a.rcol[v], a.kw);
        a.covn[i] += (int32_t)add;
        Ai[l / 64] |= 1ull << (l % 64);
    }
}

// The candidates of threshold tau: seed c's list entries that pass it. sizes: a warp per
// seed counts them; fill: a warp per rank writes rank r's (seed order[r]'s) in column
// order, compacting with ballots.
__global__ void asso_sizes(const int64_t *ptr, const int32_t *co, const int64_t *seed_count, int P,
                           int32_t *sizes)
{
    const int tau = bmf_asso_tau((int)blockIdx.y);
    int32_t *size = sizes + (int64_t)blockIdx.y * P;
    const int c = (int)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    const int lane = threadIdx.x % 32;
    if (c >= P)
        return;
    int n = 0;
    for (int64_t t = ptr[c] + lane; t < ptr[c + 1]; t += 32)
        n += bmf_asso_member(co[t], seed_count[c], tau);
    for (int off = 16; off > 0; off /= 2)
        n += __shfl_xor_sync(0xffffffffu, n, off);
    if (lane == 0)
        size[c] = n;
}

__global__ void asso_fill(const int64_t *ptr, const int32_t *col, const int32_t *co,
                          const int64_t *seed_count, int P, int tau, const int32_t *order,
                          const int64_t *rptr, int32_t *rcol)
{
    const int r = (int)(((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32);
    const int lane = threadIdx.x % 32;
    if (r >= P)
        return;
    const int c = order[r];
    int64_t at = rptr[r];
    for (int64_t base = ptr[c]; base < ptr[c + 1]; base += 32) {
        const int64_t t = base + lane;
        const bool in = t < ptr[c + 1] && bmf_asso_member(co[t], seed_count[c], tau);
        const unsigned ballot = __ballot_sync(0xffffffffu, in);
        if (in)
            rcol[at + __popc(ballot & ((1u << lane) - 1u))] = col[t];
        at += __popc(ballot);
    }
}

struct buffers {
    mf_dbuf lptr, lcol, lco, seed_count, size, order, rptr, rcol, rsize, below, below_max, loff,
        iptr, icand, scratch, A, B, covn, gain, choice, changed, count, stamp, mark, wide;
};

void release(mf_ctx *ctx, buffers *b)
{
    mf_dbuf *all[] = {&b->lptr,      &b->lcol,  &b->lco,   &b->seed_count, &b->size,
                      &b->order,     &b->rptr,  &b->rcol,  &b->rsize,      &b->below,
                      &b->below_max, &b->loff,  &b->iptr,  &b->icand,      &b->scratch,
                      &b->A,         &b->B,     &b->covn,  &b->gain,       &b->choice,
                      &b->changed,   &b->count, &b->stamp, &b->mark,       &b->wide};
    for (mf_dbuf *d : all)
        mf_dmem_free(ctx, d);
}

// Host side of the instances' rankings, each instance's slice in turn.
struct host_rank {
    int32_t *size, *order, *rsize, *below, *below_max, *bucket; /* bucket: one instance's */
    int64_t *rptr, *loff;
};

// Instance q's order (the seeds by ascending candidate size, ties in seed order: a counting
// sort), rptr and rsize in that order, and below[s] for s in 0 .. its largest size + 1.
void rank_by_size(const host_rank &h, int q, int P, int64_t below_stride)
{
    const int32_t *size = h.size + (int64_t)q * P;
    int32_t *order = h.order + (int64_t)q * P, *rsize = h.rsize + (int64_t)q * P;
    int32_t *below = h.below + q * below_stride;
    int64_t *rptr = h.rptr + (int64_t)q * (P + 1);
    int64_t max_size = 0;
    for (int c = 0; c < P; c++)
        max_size = size[c] > max_size ? size[c] : max_size;
    memset(h.bucket, 0, (size_t)(max_size + 2) * sizeof *h.bucket);
    for (int c = 0; c < P; c++)
        h.bucket[size[c] + 1]++;
    for (int64_t s = 0; s <= max_size; s++)
        h.bucket[s + 1] += h.bucket[s];
    memcpy(below, h.bucket, (size_t)(max_size + 2) * sizeof *below);
    for (int c = 0; c < P; c++)
        order[h.bucket[size[c]]++] = c;
    rptr[0] = 0;
    for (int r = 0; r < P; r++) {
        rsize[r] = size[order[r]];
        rptr[r + 1] = rptr[r] + rsize[r];
    }
    h.below_max[q] = (int32_t)(max_size + 1);
    h.loff[q + 1] = h.loff[q] + rptr[P];
}

#define ALLOC(buf, bytes, what) MF_TRY(mf_dmem_alloc(ctx, &b->buf, (size_t)(bytes), what))
#define UPLOAD(buf, src, bytes)                                                                    \
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(b->buf.ptr, src, (size_t)(bytes), cudaMemcpyHostToDevice, st))

mf_status run(const mf_bmf_asso_plan *p, const mf_bmf_asso_lists *lists, buffers *b, host_rank *h,
              int64_t list_max, uint64_t *A, uint64_t *B)
{
    mf_ctx *ctx = p->ctx;
    mf_sparse *C = p->C;
    cudaStream_t st = ctx->link.cuda->stream;
    const int64_t m = C->rows, n = C->cols, I = p->instances;
    const int P = p->P, k = p->k, kw = p->kw;
    const int64_t below_stride = list_max + 2;
    const int64_t *lptr;
    const int32_t *lcol, *lco;
    mf_bmf_asso_lists_arrays(lists, &lptr, &lcol, &lco);
    const int64_t total = lptr[P];
    int64_t longest = 0;
    for (int64_t i = 0; i < m; i++)
        if (C->row_ptr[i + 1] - C->row_ptr[i] > longest)
            longest = C->row_ptr[i + 1] - C->row_ptr[i];

    if (mf_bmf_asso_rounds_done(p, 0, 1))
        return MF_OK; /* stopped before it began: the covers stay empty */
    /* Every instance's candidate sizes, then their ranks on the host. */
    ALLOC(lptr, (P + 1) * 8, "Asso: lists");
    ALLOC(lcol, total * 4, "Asso: lists");
    ALLOC(lco, total * 4, "Asso: lists");
    ALLOC(seed_count, P * 8, "Asso: seed counts");
    ALLOC(size, I * P * 4, "Asso: candidate sizes");
    for (int c = 0; c < P; c++)
        h->rptr[c] = p->col_count[p->seeds[c]]; /* staged seed counts */
    UPLOAD(seed_count, h->rptr, P * 8);
    UPLOAD(lptr, lptr, (P + 1) * 8);
    UPLOAD(lcol, lcol, total * 4);
    UPLOAD(lco, lco, total * 4);
    const dim3 warps_grid(blocks_for((int64_t)P * 32, 256), (unsigned)I);
    asso_sizes<<<warps_grid, 256, 0, st>>>(
        (const int64_t *)b->lptr.ptr, (const int32_t *)b->lco.ptr,
        (const int64_t *)b->seed_count.ptr, P, (int32_t *)b->size.ptr);
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_sizes"));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(h->size, b->size.ptr, (size_t)(I * P * 4),
                                     cudaMemcpyDeviceToHost, st));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(st)); /* also: h->rptr is rewritten next */
    h->loff[0] = 0;
    int64_t most = 0; /* the largest instance's candidate entries */
    for (int q = 0; q < I; q++) {
        rank_by_size(*h, q, P, below_stride);
        most = h->loff[q + 1] - h->loff[q] > most ? h->loff[q + 1] - h->loff[q] : most;
    }
    /* (each instance's candidates are a subset of the lists, below 2^31: checked by the caller) */

    /* The attribute is the function's, shared by every thread: set to the largest P any call
     * can have, so that no call lowers it under another's launch. */
    const size_t smem = (size_t)(P + 1) / 2 * 4;
    MF_CUDA_TRY(ctx, cudaFuncSetAttribute(asso_eval, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (BMF_ASSO_CANDIDATES + 1) / 2 * 4));
    int per_sm = 0;
    MF_CUDA_TRY(
        ctx, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, asso_eval, EVAL_THREADS, smem));
    /* Blocks per instance: together, a full wave. */
    const int64_t wave =
        (int64_t)ctx->link.cuda->prop.multiProcessorCount * (per_sm > 0 ? per_sm : 1);
    const unsigned per_instance = (unsigned)(wave / I > 0 ? wave / I : 1);
    const dim3 eval_grid(per_instance, (unsigned)I), one(1, (unsigned)I), few(8, (unsigned)I);

    ALLOC(order, I * P * 4, "Asso: candidate ranks");
    ALLOC(rptr, I * (P + 1) * 8, "Asso: candidates");
    ALLOC(rsize, I * P * 4, "Asso: candidate sizes");
    ALLOC(below, I * below_stride * 4, "Asso: candidate sizes");
    ALLOC(below_max, I * 4, "Asso: candidate sizes");
    ALLOC(loff, (I + 1) * 8, "Asso: candidates");
    ALLOC(rcol, h->loff[I] * 4, "Asso: candidates");
    ALLOC(iptr, I * (n + 1) * 8, "Asso: inverted lists");
    ALLOC(icand, h->loff[I] * 4, "Asso: inverted lists");
    ALLOC(scratch, mf_cuda_csr_transpose_scratch(most > 0 ? most : 1, (int32_t)n),
          "Asso: inverted lists");
    ALLOC(A, I * m * kw * 8, "Asso: A");
    ALLOC(B, I * n * kw * 8, "Asso: B");
    ALLOC(covn, I * m * 4, "Asso: covered cells");
    ALLOC(gain, I * P * 8, "Asso: gains");
    ALLOC(choice, I * k * 4, "Asso: choices");
    ALLOC(changed, I * m * 4, "Asso: changed rows");
    ALLOC(count, I * sizeof(int), "Asso: changed rows");
    ALLOC(stamp, I * m * 4, "Asso: row stamps");
    ALLOC(mark, I * n, "Asso: column marks");
    if (longest > narrow_max)
        ALLOC(wide, (int64_t)per_instance * I * P * 4, "Asso: long rows");
    UPLOAD(order, h->order, I * P * 4);
    UPLOAD(rptr, h->rptr, I * (P + 1) * 8);
    UPLOAD(rsize, h->rsize, I * P * 4);
    UPLOAD(below, h->below, I * below_stride * 4);
    UPLOAD(below_max, h->below_max, I * 4);
    UPLOAD(loff, h->loff, (I + 1) * 8);
    mf_dbuf *zeroed[] = {&b->A, &b->B, &b->covn, &b->gain, &b->stamp, &b->mark, &b->wide};
    for (mf_dbuf *z : zeroed)
        if (z->ptr)
            MF_CUDA_TRY(ctx, cudaMemsetAsync(z->ptr, 0, z->bytes, st));

    /* Each instance's candidates by rank, and their inverted lists. */
    for (int64_t q = 0; q < I; q++) {
        const int64_t *rptr = (const int64_t *)b->rptr.ptr + q * (P + 1);
        int32_t *rcol = (int32_t *)b->rcol.ptr + h->loff[q];
        asso_fill<<<warps_grid.x, 256, 0, st>>>(
            (const int64_t *)b->lptr.ptr, (const int32_t *)b->lcol.ptr, (const int32_t *)b->lco.ptr,
            (const int64_t *)b->seed_count.ptr, P, bmf_asso_tau((int)q),
            (const int32_t *)b->order.ptr + q * P, rptr, rcol);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_fill"));
        const mf_cuda_csr cand = {P, (int32_t)n, h->loff[q + 1] - h->loff[q], rptr, rcol, NULL};
        MF_TRY(mf_cuda_csr_transpose(ctx, &cand, b->scratch.ptr,
                                     (int64_t *)b->iptr.ptr + q * (n + 1),
                                     (int32_t *)b->icand.ptr + h->loff[q], NULL));
    }

    cover a = {};
    const float *val; /* a pattern's: unused */
    MF_TRY(mf_sparse_device_csr(C, &a.row_ptr, &a.col, &val));
    MF_TRY(mf_sparse_device_csc(C, &a.col_ptr, &a.row, &val));
    a.m = (int32_t)m, a.n = (int32_t)n, a.P = P, a.kw = kw, a.k = k;
    a.rptr = (const int64_t *)b->rptr.ptr;
    a.rcol = (const int32_t *)b->rcol.ptr;
    a.rsize = (const int32_t *)b->rsize.ptr;
    a.below = (const int32_t *)b->below.ptr;
    a.below_maxes = (const int32_t *)b->below_max.ptr;
    a.below_stride = below_stride;
    a.loff = (const int64_t *)b->loff.ptr;
    a.orig = (const int32_t *)b->order.ptr;
    a.iptr = (const int64_t *)b->iptr.ptr;
    a.icand = (const int32_t *)b->icand.ptr;
    a.A = (uint64_t *)b->A.ptr;
    a.B = (uint64_t *)b->B.ptr;
    a.covn = (int32_t *)b->covn.ptr;
    a.gain = (unsigned long long *)b->gain.ptr;
    a.choice = (int *)b->choice.ptr;
    a.changed = (int32_t *)b->changed.ptr;
    a.count = (int *)b->count.ptr;
    a.stamp = (int32_t *)b->stamp.ptr;
    a.mark = (uint8_t *)b->mark.ptr;
    a.wide = (uint32_t *)b->wide.ptr;
    a.narrow_max = narrow_max;
    a.wide_blocks = per_instance;

    /* The rounds, every instance side by side, without the host: a round whose choice is -1
     * (no positive gain) and every later one (the same gains) leave the factors alone. */
    asso_eval<<<eval_grid, EVAL_THREADS, smem, st>>>(a, false, 0, 1);
    MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_eval"));
    for (int l = 0; l < k; l++) {
        asso_choose_rank<<<one, 1024, 0, st>>>(a, l);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_choose_rank"));
        asso_mark<<<few, 256, 0, st>>>(a, l, true);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_mark"));
        MF_CUDA_TRY(ctx, cudaMemsetAsync(b->count.ptr, 0, b->count.bytes, st));
        asso_find<<<eval_grid, 256, 0, st>>>(a, l, l + 1);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_find"));
        asso_eval<<<eval_grid, EVAL_THREADS, smem, st>>>(a, true, l, -1);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_eval (out)"));
        asso_take<<<eval_grid, 256, 0, st>>>(a, l);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_take"));
        asso_eval<<<eval_grid, EVAL_THREADS, smem, st>>>(a, true, l, 1);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_eval (in)"));
        asso_mark<<<few, 256, 0, st>>>(a, l, false);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "asso_mark"));
        if (p->watch) { /* watched: the host waits for each round */
            MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
            if (mf_bmf_asso_rounds_done(p, (int)I, 1))
                break; /* the rounds done are a valid cover */
        }
    }
    /* The instances' factors are laid out as mf_bmf_asso returns them. */
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(A, b->A.ptr, b->A.bytes, cudaMemcpyDeviceToHost, st));
    MF_CUDA_TRY(ctx, cudaMemcpyAsync(B, b->B.ptr, b->B.bytes, cudaMemcpyDeviceToHost, st));
    MF_CUDA_TRY(ctx, cudaStreamSynchronize(st));
    return MF_OK;
}

#undef ALLOC
#undef UPLOAD

} // namespace

extern "C" void mf_bmf_asso_sparse_debug_narrow(int64_t max)
{
    narrow_max = max >= 0 && max < NARROW_MAX ? max : NARROW_MAX;
}

extern "C" mf_status mf_cuda_bmf_asso_sparse(const mf_bmf_asso_plan *p,
                                             const mf_bmf_asso_lists *lists, uint64_t *A,
                                             uint64_t *B)
{
    mf_device_guard guard(p->ctx->link.cuda->device);
    const int64_t P = p->P, I = p->instances;
    if (P == 0)
        return MF_OK; /* no column has a one: the covers stay empty */
    if (p->kw > MAX_KW)
        return mf_fail(p->ctx, MF_ERR_UNSUPPORTED,
                       "mf_bmf_run: the device's Asso cover takes k <= %d", MAX_KW * 64);
    const int64_t *lptr;
    const int32_t *lcol, *lco;
    mf_bmf_asso_lists_arrays(lists, &lptr, &lcol, &lco);
    int64_t list_max = 0; /* a candidate is at most its seed's list */
    for (int64_t c = 0; c < P; c++)
        list_max = lptr[c + 1] - lptr[c] > list_max ? lptr[c + 1] - lptr[c] : list_max;
    host_rank h;
    h.size = (int32_t *)malloc((size_t)(I * P) * 4);
    h.order = (int32_t *)malloc((size_t)(I * P) * 4);
    h.rsize = (int32_t *)malloc((size_t)(I * P) * 4);
    h.below = (int32_t *)malloc((size_t)(I * (list_max + 2)) * 4);
    h.below_max = (int32_t *)malloc((size_t)I * 4);
    h.bucket = (int32_t *)malloc((size_t)(list_max + 2) * 4);
    h.rptr = (int64_t *)malloc((size_t)(I * (P + 1)) * 8);
    h.loff = (int64_t *)malloc((size_t)(I + 1) * 8);
    mf_status st = MF_OK;
    buffers b;
    memset(&b, 0, sizeof b);
    if (!h.size || !h.order || !h.rsize || !h.below || !h.below_max || !h.bucket || !h.rptr ||
        !h.loff)
        st = mf_fail(p->ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    else if (lptr[P] > INT32_MAX)
        st = mf_fail(p->ctx, MF_ERR_OUT_OF_MEMORY,
                     "mf_bmf_run: Asso's lists are too long for the device's sparse cover");
    else
        st = run(p, lists, &b, &h, list_max, A, B);
    if (st != MF_OK)
        cudaStreamSynchronize(p->ctx->link.cuda->stream); /* nothing in flight uses b after this */
    release(p->ctx, &b);
    free(h.size);
    free(h.order);
    free(h.rsize);
    free(h.below);
    free(h.below_max);
    free(h.bucket);
    free(h.rptr);
    free(h.loff);
    return st;
}
