/* The kernels of the CUDA Boolean factorization engine (bmf.cu). One warp works on one line
 * (a row of A or a column of B) of one instance; the other side's lines are read from L2.
 * Layouts, per instance q: X (lines x kw words), Xt (k rows of lw words: factor l's bit of
 * every line), C by lines: dense (lines x nw words of the other side's bits) or sparse (a
 * line's nonzero words and their indices, bmf_c_lines). A sweep reads the other side only
 * transposed (Yt): which of its lines a line covers is the OR of the Yt rows of the line's
 * factors. Every kernel walks a line's words in chunks of 32, a word per lane, so that a
 * sparse line is read in step with the chunks (bmf_c_chunk). */
#ifndef MF_BMF_KERNELS_CUH
#define MF_BMF_KERNELS_CUH

#include <stdint.h>

#include "bool/bmf_rules.h"

#define BMF_WARPS 4  /* warps (lines) per block */
#define BMF_CHUNK 32 /* words of the other side's bits per mask chunk: 2048 lines */

/* C by lines, shared by the instances: dense words (lines x nw), or when dense is NULL
 * each line's nonzero words, word[ptr[i] .. ptr[i + 1]) at increasing indices idx. */
struct bmf_c_lines {
    const uint64_t *dense;
    const int64_t *ptr;
    const int32_t *idx;
    const uint64_t *word;
};

/* A warp's place in one line of C: for a sparse line, lane t holds the index (w) of entry
 * p + t, so a chunk without ones costs one compare and a ballot. */
struct bmf_c_cursor {
    const uint64_t *dense; /* the line's words, or NULL */
    const int32_t *idx;
    const uint64_t *word;
    int64_t p, end, w;
};

__device__ __forceinline__ int64_t bmf_c_index(const bmf_c_cursor &c, int lane)
{
    return c.p + lane < c.end ? (int64_t)c.idx[c.p + lane] : INT64_MAX;
}

__device__ __forceinline__ bmf_c_cursor bmf_c_line(const bmf_c_lines &c, int64_t i, int64_t nw,
                                                   int lane)
{
    bmf_c_cursor r;
    r.dense = c.dense ? c.dense + i * nw : NULL;
    r.idx = c.idx;
    r.word = c.word;
    r.p = c.dense ? 0 : c.ptr[i];
    r.end = c.dense ? 0 : c.ptr[i + 1];
    r.w = c.dense ? INT64_MAX : bmf_c_index(r, lane);
    return r;
}

/* Word w0 + lane of the line (0 for lanes past `words`), for the chunks w0 = 0, 32, 64, ...
 * in order; the whole warp calls it. A sparse line's words of the chunk (the lanes whose
 * index falls in it: a prefix, at most one entry a word) are scattered into the warp's 32
 * shared words `buf`, and the cursor moves past them. */
__device__ __forceinline__ uint64_t bmf_c_chunk(bmf_c_cursor &c, int64_t w0, int words, int lane,
                                                uint64_t *buf)
{
    if (c.dense)
        return lane < words ? c.dense[w0 + lane] : 0;
    const bool in = c.w < w0 + BMF_CHUNK;
    const uint32_t hit = __ballot_sync(0xffffffffu, in);
    if (!hit)
        return 0;
    buf[lane] = 0;
    __syncwarp();
    if (in)
        buf[c.w - w0] = c.word[c.p + lane];
    __syncwarp();
    const uint64_t v = buf[lane];
    __syncwarp(); /* the next call clears buf */
    c.p += __popc(hit);
    c.w = bmf_c_index(c, lane);
    return v;
}

/* One half-sweep's operands for every instance: strides step from instance to instance. */
struct bmf_side_args {
    int64_t L, N, nw; /* lines, other lines, words of N bits */
    int k, kw;
    uint64_t *X;        /* + q * x_stride */
    const uint64_t *Yt; /* + q * yt_stride: k rows of nw words */
    bmf_c_lines C;      /* by lines */
    int64_t x_stride, yt_stride;
    unsigned long long *counts; /* per instance: fp, fn (two's complement deltas add) */
    const long long *ycount;    /* + q * k: ones in each row of Yt */
    uint64_t seed;
    uint32_t purpose;
    int64_t wq;
    double temperature;
    uint32_t flip_p24;
};

__device__ __forceinline__ int bmf_cover(const uint64_t *x, const uint64_t *y, int kw)
{
    int c = 0;
    for (int t = 0; t < kw && c < 2; t++)
        c += __popcll(x[t] & y[t]);
    return c;
}

__device__ __forceinline__ void bmf_add_counts(unsigned long long *counts, int q, int64_t dfp,
                                               int64_t dfn)
{
    if (dfp)
        atomicAdd(&counts[2 * q], (unsigned long long)dfp);
    if (dfn)
        atomicAdd(&counts[2 * q + 1], (unsigned long long)dfn);
}

/* Which of the 64 other lines of word w the line x covers at least once (ones) and at
 * least twice (twos): bit-sliced counting over the rows of Yt of x's factors, so the cost
 * is the number of x's set bits, not k. Bits past the other side's end stay 0. */
__device__ __forceinline__ void bmf_cover_word(const uint64_t *x, int kw, const uint64_t *Yt,
                                               int64_t nw, int64_t w, uint64_t *ones,
                                               uint64_t *twos)
{
    uint64_t o = 0, t2 = 0;
    for (int t = 0; t < kw; t++)
        for (uint64_t b = x[t]; b; b &= b - 1) {
            int l = t * 64 + __ffsll((long long)b) - 1;
            uint64_t y = Yt[(int64_t)l * nw + w];
            t2 |= o & y;
            o |= y;
        }
    *ones = o;
    *twos = t2;
}

/* The single-bit move (MF_BMF_FLIP_SINGLE): the masks of the entries a flip would change
 * are built a chunk of 2048 other lines at a time, a word per lane (bmf_cover_word), and
 * each lane counts them against its factors' rows of Yt. S is the most factors a lane
 * owns: k <= 32 S. */
template <int S>
__global__ void __launch_bounds__(BMF_WARPS * 32) bmf_single_kernel(bmf_side_args a)
{
    __shared__ uint64_t xs[BMF_WARPS][16];
    __shared__ uint64_t mask[BMF_WARPS][4][BMF_CHUNK];
    __shared__ uint64_t cbuf[BMF_WARPS][BMF_CHUNK];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = blockIdx.y;
    const int64_t i = (int64_t)blockIdx.x * BMF_WARPS + warp;
    if (i >= a.L)
        return;
    const int k = a.k, kw = a.kw;
    uint64_t *x = a.X + q * a.x_stride + i * kw;
    const uint64_t *Yt = a.Yt + q * a.yt_stride;
    bmf_c_cursor c = bmf_c_line(a.C, i, a.nw, lane);
    const long long *ycount = a.ycount + (int64_t)q * a.k;
    if (lane < kw)
        xs[warp][lane] = x[lane];
    __syncwarp();
    int64_t acc_a[S], acc_b[S];
    int bits[S];
    for (int s = 0; s < S; s++) {
        int l = lane + 32 * s;
        acc_a[s] = acc_b[s] = 0;
        bits[s] = l < k ? (int)(xs[warp][l / 64] >> (l % 64) & 1) : 0;
    }
    for (int64_t w0 = 0; w0 < a.nw; w0 += BMF_CHUNK) {
        int words = a.nw - w0 < BMF_CHUNK ? (int)(a.nw - w0) : BMF_CHUNK;
        /* Every mask is zero on a word with no one and no covered entry: only the words
         * of the union u are visited, and a 0 bit's new false positives are its factor's
         * count less those in u (bits past N are zero in Yt). */
        uint64_t u = 0;
        const uint64_t cw = bmf_c_chunk(c, w0, words, lane, cbuf[warp]);
        if (lane < words) {
            uint64_t ones, twos;
            bmf_cover_word(xs[warp], kw, Yt, a.nw, w0 + lane, &ones, &twos);
            uint64_t once = ones & ~twos;
            u = ones | cw;
            mask[warp][0][lane] = u;
            mask[warp][1][lane] = ~ones & cw;
            mask[warp][2][lane] = once & cw;
            mask[warp][3][lane] = once & ~cw;
        }
        const uint32_t nz = __ballot_sync(0xffffffffu, u != 0);
        __syncwarp();
        for (int s = 0; s < S; s++) {
            int l = lane + 32 * s;
            if (l >= k || !nz)
                break;
            const uint64_t *yt = Yt + (int64_t)l * a.nw + w0;
            const uint64_t *ma = mask[warp][bits[s] ? 2 : 0], *mb = mask[warp][bits[s] ? 3 : 1];
            int64_t sa = 0, sb = 0;
            for (uint32_t b = nz; b; b &= b - 1) {
                int w = __ffs(b) - 1;
                uint64_t y = yt[w];
                sa += __popcll(y & ma[w]);
                sb += __popcll(y & mb[w]);
            }
            acc_a[s] += bits[s] ? sa : -sa;
            acc_b[s] += sb;
        }
        __syncwarp();
    }
    for (int s = 0; s < S; s++) {
        int l = lane + 32 * s;
        if (l < k && !bits[s])
            acc_a[s] += ycount[l];
    }
    /* The best bit of the line, ties to the first after a random start (bmf_better). */
    mf_philox_block r = bmf_draw(a.seed, q, a.purpose, i, 0);
    const int start = bmf_rank_start(r, k), metro = (int)(r.v[1] % (uint32_t)k);
    int64_t best_d = INT64_MAX, metro_d = 0;
    int best_l = -1, best_rot = INT32_MAX;
    for (int s = 0; s < S; s++) {
        int l = lane + 32 * s;
        if (l >= k)
            break;
        int64_t d = bmf_delta(bits[s], acc_a[s], acc_b[s], a.wq);
        int rot = (l - start + k) % k;
        if (bmf_better(d, rot, best_d, best_rot))
            best_d = d, best_rot = rot, best_l = l;
        if (l == metro)
            metro_d = d;
    }
    for (int off = 16; off > 0; off /= 2) {
        int64_t od = __shfl_xor_sync(0xffffffffu, best_d, off);
        int orot = __shfl_xor_sync(0xffffffffu, best_rot, off);
        int ol = __shfl_xor_sync(0xffffffffu, best_l, off);
        if (bmf_better(od, orot, best_d, best_rot))
            best_d = od, best_rot = orot, best_l = ol;
    }
    metro_d = __shfl_sync(0xffffffffu, metro_d, metro % 32);
    int l = -1;
    if (best_d < 0)
        l = best_l;
    else if (bmf_accept(metro_d, a.temperature, r.v[2]))
        l = metro;
    if (l < 0 || lane != l % 32)
        return;
    /* The owner lane of bit l holds its counts: apply the move. */
    int s = l / 32;
    int64_t ca = 0, cb = 0;
    int bit = 0;
    for (int t = 0; t < S; t++)
        if (t == s)
            ca = acc_a[t], cb = acc_b[t], bit = bits[t];
    x[l / 64] ^= (uint64_t)1 << (l % 64);
    bmf_add_counts(a.counts, q, bit ? -cb : ca, bit ? ca : -cb);
}

/* The per-bit move (MF_BMF_FLIP_PER_BIT): the drawn bits flip together when the exact
 * change of the whole line lowers the error (or Metropolis takes it). */
__global__ void __launch_bounds__(BMF_WARPS * 32) bmf_per_bit_kernel(bmf_side_args a)
{
    __shared__ uint64_t xs[BMF_WARPS][16], ns[BMF_WARPS][16];
    __shared__ uint64_t cbuf[BMF_WARPS][BMF_CHUNK];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = blockIdx.y;
    const int64_t i = (int64_t)blockIdx.x * BMF_WARPS + warp;
    if (i >= a.L)
        return;
    const int kw = a.kw;
    uint64_t *x = a.X + q * a.x_stride + i * kw;
    const uint64_t *Yt = a.Yt + q * a.yt_stride;
    bmf_c_cursor c = bmf_c_line(a.C, i, a.nw, lane);
    int changed = 0;
    if (lane < kw) {
        uint64_t flips = bmf_random_word(a.seed, q, a.purpose, i, lane, a.k, a.flip_p24);
        xs[warp][lane] = x[lane];
        ns[warp][lane] = x[lane] ^ flips;
        changed = flips != 0;
    }
    if (!__any_sync(0xffffffffu, changed))
        return;
    __syncwarp();
    int64_t fp = 0, fn = 0;
    for (int64_t w0 = 0; w0 < a.nw; w0 += BMF_CHUNK) {
        const int words = a.nw - w0 < BMF_CHUNK ? (int)(a.nw - w0) : BMF_CHUNK;
        const uint64_t cw = bmf_c_chunk(c, w0, words, lane, cbuf[warp]);
        if (lane >= words)
            continue;
        uint64_t before, after, twos;
        bmf_cover_word(xs[warp], kw, Yt, a.nw, w0 + lane, &before, &twos);
        bmf_cover_word(ns[warp], kw, Yt, a.nw, w0 + lane, &after, &twos);
        uint64_t lost = before & ~after, gained = after & ~before;
        fn += __popcll(lost & cw) - __popcll(gained & cw);
        fp += __popcll(gained & ~cw) - __popcll(lost & ~cw);
    }
    for (int off = 16; off > 0; off /= 2) {
        fp += __shfl_xor_sync(0xffffffffu, fp, off);
        fn += __shfl_xor_sync(0xffffffffu, fn, off);
    }
    mf_philox_block r = bmf_draw(a.seed, q, a.purpose, i, 0);
    int64_t d = (int64_t)BMF_WSCALE * fp + a.wq * fn;
    if (!bmf_accept(d, a.temperature, r.v[2]))
        return;
    if (lane < kw)
        x[lane] = ns[warp][lane];
    if (lane == 0)
        bmf_add_counts(a.counts, q, fp, fn);
}

/* Xt from X for every instance: a warp takes 32 lines and, per factor, one ballot makes
 * the 32-bit half word of Xt's row. Xt must start zeroed past the last line. */
__global__ void bmf_transpose_kernel(const uint64_t *X, uint32_t *Xt, int64_t L, int k, int kw,
                                     int64_t lw, int64_t x_stride, int64_t xt_stride)
{
    const int lane = threadIdx.x % 32, q = blockIdx.y;
    const int64_t group = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int64_t line = group * 32 + lane;
    if (group * 32 >= L)
        return;
    const uint64_t *x = X + q * x_stride + line * kw;
    uint32_t *xt = Xt + 2 * q * xt_stride;
    uint32_t mine = 0;
    for (int l = 0; l < k; l++) {
        int bit = line < L ? (int)(x[l / 64] >> (l % 64) & 1) : 0;
        uint32_t word = __ballot_sync(0xffffffffu, bit);
        if (lane == l % 32)
            mine = word;
        if (l % 32 == 31 || l == k - 1) {
            int l0 = l / 32 * 32;
            if (l0 + lane <= l)
                xt[(int64_t)(l0 + lane) * 2 * lw + group] = mine;
        }
    }
}

/* The ones of each row of Xt (k rows of lw words per instance): a block per row. */
__global__ void bmf_row_count_kernel(const uint64_t *Xt, int64_t lw, long long *count)
{
    __shared__ long long part[8];
    const int64_t row = blockIdx.x; /* q * k + l */
    long long c = 0;
    for (int64_t w = threadIdx.x; w < lw; w += blockDim.x)
        c += __popcll(Xt[row * lw + w]);
    for (int off = 16; off > 0; off /= 2)
        c += __shfl_xor_sync(0xffffffffu, c, off);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long t = 0;
        for (int i = 0; i < (int)blockDim.x / 32; i++)
            t += part[i];
        count[row] = t;
    }
}

/* fp and fn of every instance's factors from scratch: a warp per row of A, a word of 64
 * columns per lane, the row's cover from Bt (bmf_cover_word), so the cost follows the
 * factors' ones and C's words rather than rows x columns x k. 8 warps a block. */
__global__ void __launch_bounds__(256)
    bmf_count_kernel(const uint64_t *A, const uint64_t *Bt, bmf_c_lines C, int64_t m, int64_t nw,
                     int kw, int64_t a_stride, int64_t bt_stride, unsigned long long *counts)
{
    __shared__ uint64_t cbuf[8][BMF_CHUNK];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = blockIdx.y;
    const int64_t i = (int64_t)blockIdx.x * (blockDim.x / 32) + warp;
    if (i >= m)
        return;
    const uint64_t *a = A + q * a_stride + i * kw, *bt = Bt + q * bt_stride;
    bmf_c_cursor c = bmf_c_line(C, i, nw, lane);
    int64_t fp = 0, fn = 0;
    for (int64_t w0 = 0; w0 < nw; w0 += BMF_CHUNK) {
        const int words = nw - w0 < BMF_CHUNK ? (int)(nw - w0) : BMF_CHUNK;
        const uint64_t cw = bmf_c_chunk(c, w0, words, lane, cbuf[warp]);
        if (lane >= words)
            continue;
        uint64_t covered, twos;
        bmf_cover_word(a, kw, bt, nw, w0 + lane, &covered, &twos);
        fp += __popcll(covered & ~cw);
        fn += __popcll(cw & ~covered);
    }
    for (int off = 16; off > 0; off /= 2) {
        fp += __shfl_xor_sync(0xffffffffu, fp, off);
        fn += __shfl_xor_sync(0xffffffffu, fn, off);
    }
    if (lane == 0)
        bmf_add_counts(counts, q, fp, fn);
}

/* After a sweep: record each instance's counts and whether they beat its best. */
__global__ void bmf_track_kernel(const unsigned long long *counts, long long *best, int *improved,
                                 long long *hist, int instances)
{
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= instances)
        return;
    long long fp = (long long)counts[2 * q], fn = (long long)counts[2 * q + 1];
    hist[2 * q] = fp;
    hist[2 * q + 1] = fn;
    improved[q] = fp + fn < best[q];
    if (improved[q])
        best[q] = fp + fn;
}

/* Copy the factors of the instances that improved to their best copies. */
__global__ void bmf_keep_kernel(const uint64_t *X, uint64_t *Xbest, int64_t words,
                                const int *improved)
{
    const int q = blockIdx.y;
    if (!improved[q])
        return;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < words;
         p += (int64_t)gridDim.x * blockDim.x)
        Xbest[q * words + p] = X[q * words + p];
}

/* Dense C from a sorted CSR (or CSC) of its ones: line i's bits into X (L x lw words),
 * zeroed before. A warp per line. */
__global__ void bmf_pack_kernel(const int64_t *ptr, const int32_t *idx, int64_t L, uint64_t *X,
                                int64_t lw)
{
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= L)
        return;
    for (int64_t p = ptr[i] + lane; p < ptr[i + 1]; p += 32) {
        const int64_t j = idx[p];
        atomicOr((unsigned long long *)&X[i * lw + j / 64], 1ull << (j % 64));
    }
}

/* Whether entry p of a sorted line starting at p0 opens a word of 64 (the first entry of
 * its word). */
__device__ __forceinline__ bool bmf_opens_word(const int32_t *idx, int64_t p0, int64_t p)
{
    return p == p0 || idx[p] / 64 != idx[p - 1] / 64;
}

/* Sparse C, first pass: the nonzero words of each line. A warp per line. */
__global__ void bmf_word_count_kernel(const int64_t *ptr, const int32_t *idx, int64_t L,
                                      int64_t *count)
{
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= L)
        return;
    int64_t n = 0;
    for (int64_t p = ptr[i] + lane; p < ptr[i + 1]; p += 32)
        n += bmf_opens_word(idx, ptr[i], p);
    for (int off = 16; off > 0; off /= 2)
        n += __shfl_xor_sync(0xffffffffu, n, off);
    if (lane == 0)
        count[i] = n;
}

/* Sparse C, second pass: line i's words at wptr[i] .. (word zeroed before). Entries go 32
 * at a time; an entry's slot is its line's start plus the words opened before it. */
__global__ void bmf_word_fill_kernel(const int64_t *ptr, const int32_t *idx, int64_t L,
                                     const int64_t *wptr, int32_t *widx, uint64_t *word)
{
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= L)
        return;
    int64_t opened = wptr[i]; /* slot of the next word to open */
    for (int64_t p0 = ptr[i]; p0 < ptr[i + 1]; p0 += 32) {
        const int64_t p = p0 + lane;
        const bool in = p < ptr[i + 1], opens = in && bmf_opens_word(idx, ptr[i], p);
        const uint32_t ballot = __ballot_sync(0xffffffffu, opens);
        if (in) {
            /* the words opened at or before this entry, less one */
            const int64_t slot = opened + __popc(ballot & (0xffffffffu >> (31 - lane))) - 1;
            if (opens)
                widx[slot] = idx[p] / 64;
            atomicOr((unsigned long long *)&word[slot], 1ull << (idx[p] % 64));
        }
        opened += __popc(ballot);
    }
}

/* INIT_RANDOM: every word of every instance's lines. */
__global__ void bmf_random_init_kernel(uint64_t *X, int64_t L, int k, int kw, int64_t stride,
                                       uint64_t seed, uint32_t purpose, uint32_t p24)
{
    const int q = blockIdx.y;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < L * kw;
         p += (int64_t)gridDim.x * blockDim.x)
        X[q * stride + p] = bmf_random_word(seed, q, purpose, p / kw, (int)(p % kw), k, p24);
}

/* INIT_SAMPLE: factor f = q k + l holds columns cols[ptr[f] .. ptr[f + 1]). */
__global__ void bmf_sample_init_kernel(uint64_t *B, const int64_t *ptr, const int32_t *cols, int k,
                                       int kw, int64_t stride)
{
    const int64_t f = blockIdx.x;
    const int q = (int)(f / k), l = (int)(f % k);
    for (int64_t p = ptr[f] + threadIdx.x; p < ptr[f + 1]; p += blockDim.x)
        atomicOr((unsigned long long *)&B[q * stride + (int64_t)cols[p] * kw + l / 64],
                 1ull << (l % 64));
}

#endif
