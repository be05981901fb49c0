/* Kernels of ASD's CUDA engine (asd.cu). CUDA C++ only.
 *
 * Layout: factors are row-major with a leading dimension ld = r rounded up to 4 and zeros
 * past r, so that a row is whole float4s. Ω is read twice per half step, by lines (rows in
 * CSR order for X's step, columns in CSC order for Y's), one warp per line, the lines
 * dealt to the warps largest first to the least loaded (asd_deal.h) and each line of
 * long_entries or more one block (long_pass_kernel):
 *
 * - the gradient pass recomputes each residual R_ij = X_i . Y_j - M_ij from the factors it
 *   loads anyway and accumulates G = R F (its own line's gradient row) with |R|^2 and
 *   |G|^2: the SDDMM and the SpMM of a half step fused, and no residual vector stored, so
 *   rounding never accumulates in one;
 * - the norm pass computes |P(D F^T)|^2 for a direction D: the sampled product squared and
 *   summed as it is made, never stored.
 *
 * A warp splits into groups of L lanes; a group takes one entry at a time, each lane C
 * float4s of the row (L the power of two that holds ld/4 float4s, C > 1 only past r = 128).
 * The line's own row stays in the group's registers; the other factor's row is gathered
 * per entry (the factors of a large case live in L2). Sums go to double, one atomic per
 * block.
 *
 * In the reduced phase (HALF: MF_PRECISION_BF16 or FP16) the gathered row comes from the
 * other factor's 16-bit copy (half_copy_kernel, the same layout with ld 16-bit values a
 * row): a lane loads 4 values (8 bytes) where it loaded a float4, and widens them to
 * floats, exactly; the own row, the products, the gradient and every sum stay float (or
 * double), so the pass computes in float on the rounded factor. */
#ifndef MF_ASD_KERNELS_CUH
#define MF_ASD_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "mfact/mfact.h"

namespace asd
{

constexpr unsigned full_mask = 0xffffffffu;
constexpr int pass_threads = 256;

struct pass_args {
    int32_t lines;
    const int64_t *ptr; /* lines + 1 offsets          */
    const int32_t *idx; /* the other side's index     */
    const float *val;   /* observed values; NULL: 1   */
    const float *own;   /* lines x ld: the line's row (a factor or a direction) */
    const void *other;  /* the other factor: floats, or (HALF) its 16-bit copy */
    int ld;
    float *G;     /* gradient pass: lines x ld out */
    double *sums; /* [0] += |R|^2 or |P(D F^T)|^2; [1] += |G|^2 */
    /* pass_kernel: warp w takes lines order[first[w] .. first[w + 1]) (asd_deal.h);
     * long_pass_kernel: the long lines in order, one a block (first unused) */
    const int32_t *order, *first;
};

/* The cost of each line, into work[l], and its index into line[l]: its
 * entries, none for a long line (long_from entries or more: a block of its own takes it,
 * long_pass_kernel), plus line_cost. split_lines sorts the lines by it and deals them to
 * the warps (asd_deal.h). */
__global__ void line_cost_kernel(const int64_t *ptr, int32_t lines, int64_t line_cost,
                                 int64_t long_from, int64_t *work, int32_t *line)
{
    for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = ptr[l + 1] - ptr[l];
        work[l] = (n >= long_from ? 0 : n) + line_cost;
        line[l] = (int32_t)l;
    }
}

__device__ inline float dot4(float4 a, float4 b)
{
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

__device__ inline void axpy4(float4 &acc, float s, float4 b)
{
    acc.x += s * b.x;
    acc.y += s * b.y;
    acc.z += s * b.z;
    acc.w += s * b.w;
}

/* Block sum of two doubles, then one atomic each into out[0], out[1]. */
__device__ inline void block_add2(double a, double b, double *out)
{
    __shared__ double sa[32], sb[32];
    for (int off = 16; off > 0; off >>= 1) {
        a += __shfl_xor_sync(full_mask, a, off);
        b += __shfl_xor_sync(full_mask, b, off);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        sa[warp] = a, sb[warp] = b;
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x / 32;
        a = lane < warps ? sa[lane] : 0.0;
        b = lane < warps ? sb[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) {
            a += __shfl_xor_sync(full_mask, a, off);
            b += __shfl_xor_sync(full_mask, b, off);
        }
        if (lane == 0) {
            if (a != 0.0)
                atomicAdd(out, a);
            if (b != 0.0)
                atomicAdd(out + 1, b);
        }
    }
}

/* Entries a group takes per step of its loop: two, for loads in flight. */
constexpr int unroll = 2;

/* One 16-bit value of HALF's kind (the low half of x when hi is false) as a float, exactly. */
template <int HALF> __device__ inline float widen(uint32_t x, bool hi)
{
    const uint32_t h = hi ? x >> 16 : x & 0xffffu;
    return HALF == MF_PRECISION_BF16 ? __uint_as_float(h << 16)
                                     : __half2float(__ushort_as_half((unsigned short)h));
}

/* The q-th 4 values of row j of the other factor (ld values a row) as floats: a float4, or
 * (HALF) 4 16-bit values, 8 bytes, widened. */
template <int HALF> __device__ inline float4 gather4(const void *other, int64_t j, int ld, int q)
{
    if constexpr (HALF == 0)
        return __ldg((const float4 *)((const float *)other + j * ld) + q);
    const uint2 v = __ldg((const uint2 *)((const uint16_t *)other + j * ld) + q);
    return make_float4(widen<HALF>(v.x, false), widen<HALF>(v.x, true), widen<HALF>(v.y, false),
                       widen<HALF>(v.y, true));
}

/* x as HALF's 16-bit kind, rounded to nearest even (__float2bfloat16_rn, __float2half_rn). */
template <int HALF> __device__ inline uint32_t round16(float x)
{
    return HALF == MF_PRECISION_BF16 ? (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(x))
                                     : (uint32_t)__half_as_ushort(__float2half_rn(x));
}

/* F (n floats, n a multiple of 4) rounded to HALF's kind into out (n 16-bit values, the
 * same layout): 4 values a thread a step, a float4 in, 8 bytes out. */
template <int HALF> __global__ void half_copy_kernel(const float *F, int64_t n, uint16_t *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / 4;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float4 v = __ldg((const float4 *)F + i);
        ((uint2 *)out)[i] = make_uint2(round16<HALF>(v.x) | (round16<HALF>(v.y) << 16),
                                       round16<HALF>(v.z) | (round16<HALF>(v.w) << 16));
    }
}

/* The entries [first, end) of a line, every stride-th group of unroll * 32 / L from first,
 * against the line's own row: the gradient row's part into acc (GRAD), and the lane group's
 * sum of squared residuals (or sampled products) returned. */
template <int L, int C, bool GRAD, int HALF>
__device__ inline float line_entries(const pass_args &a, const float4 (&own)[C], float4 (&acc)[C],
                                     int64_t first, int64_t end, int64_t stride, int g, int k)
{
    constexpr int E = 32 / L; /* entries per warp at a time */
    const int q4 = a.ld / 4;
    float line_sum = 0.0f;
    for (int64_t base = first; base < end; base += stride) {
        int32_t j[unroll];
        float v[unroll];
        bool ok[unroll];
#pragma unroll
        for (int u = 0; u < unroll; u++) {
            const int64_t t = base + u * E + g;
            ok[u] = t < end;
            j[u] = ok[u] ? __ldg(a.idx + t) : 0;
            v[u] = GRAD && ok[u] ? (a.val ? __ldg(a.val + t) : 1.0f) : 0.0f;
        }
        float4 f[unroll][C];
        float d[unroll];
#pragma unroll
        for (int u = 0; u < unroll; u++) {
            d[u] = 0.0f;
#pragma unroll
            for (int c = 0; c < C; c++) {
                const int q = k + c * L;
                f[u][c] = ok[u] && q < q4 ? gather4<HALF>(a.other, j[u], a.ld, q)
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
                d[u] += dot4(own[c], f[u][c]);
            }
        }
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1)
#pragma unroll
            for (int u = 0; u < unroll; u++)
                d[u] += __shfl_xor_sync(full_mask, d[u], off);
#pragma unroll
        for (int u = 0; u < unroll; u++) {
            const float x = ok[u] ? d[u] - v[u] : 0.0f; /* R_ij, or the sampled product */
            line_sum += x * x;
            if (GRAD)
#pragma unroll
                for (int c = 0; c < C; c++)
                    axpy4(acc[c], x, f[u][c]);
        }
    }
    return line_sum;
}

/* The line's own row (C float4s of lane k, zeros past ld) and zeroed accumulators. */
template <int L, int C>
__device__ inline void line_start(const pass_args &a, int64_t line, int k, float4 (&own)[C],
                                  float4 (&acc)[C])
{
    const int q4 = a.ld / 4;
#pragma unroll
    for (int c = 0; c < C; c++) {
        const int q = k + c * L;
        own[c] = q < q4 ? __ldg((const float4 *)(a.own + line * a.ld) + q)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
        acc[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

/* acc summed over the warp's lane groups (lanes with the same k). */
template <int L, int C> __device__ inline void groups_sum(float4 (&acc)[C])
{
#pragma unroll
    for (int c = 0; c < C; c++)
        for (int off = L; off < 32; off <<= 1) {
            acc[c].x += __shfl_xor_sync(full_mask, acc[c].x, off);
            acc[c].y += __shfl_xor_sync(full_mask, acc[c].y, off);
            acc[c].z += __shfl_xor_sync(full_mask, acc[c].z, off);
            acc[c].w += __shfl_xor_sync(full_mask, acc[c].w, off);
        }
}

/* A line is long from this many entries: one block of long_threads takes it
 * (long_pass_kernel), and the warps' pass leaves it. A fixed count, so that one GPU and
 * every group split the same lines the same way (their factors are one GPU's bit for bit).
 * One warp gathers unroll * 32 / L entries at a time: a Netflix-like column of 84,000
 * ratings took it over 5,000 steps, the kernel's whole time, on one GPU and on any group. */
constexpr int64_t long_entries = 4096;
constexpr int long_threads = 1024;

/* HALF: 0 (the other factor in float), MF_PRECISION_BF16 or MF_PRECISION_FP16.
 *
 * Warp w takes the lines order[first[w] .. first[w + 1]): dealt largest first to the
 * least-loaded warp (asd_deal.h). Each line is one warp's, so its gradient row is the same
 * bits whichever warp takes it. Contiguous ranges of equal work (until 774a696) can only end
 * at a line boundary. Snake order over the sorted lines (774a696 to 64f2e81) left the
 * warps holding the first rounds' largest lines ahead. */
template <int L, int C, bool GRAD, int HALF>
__global__ void __launch_bounds__(pass_threads) pass_kernel(pass_args a)
{
    constexpr int E = 32 / L;
    const int lane = threadIdx.x % 32, g = lane / L, k = lane % L;
    const int q4 = a.ld / 4;
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    double s0 = 0.0, s1 = 0.0;
    for (int64_t i = a.first[warp], end_i = a.first[warp + 1]; i < end_i; i++) {
        const int64_t line = a.order[i];
        const int64_t begin = a.ptr[line], end = a.ptr[line + 1];
        if (C == 1 && end - begin >= long_entries)
            continue;
        float4 own[C], acc[C];
        line_start<L, C>(a, line, k, own, acc);
        const float line_sum =
            line_entries<L, C, GRAD, HALF>(a, own, acc, begin, end, unroll * E, g, k);
        if (k == 0)
            s0 += line_sum;
        if (GRAD) {
            groups_sum<L, C>(acc);
            if (g == 0)
#pragma unroll
                for (int c = 0; c < C; c++) {
                    const int q = k + c * L;
                    if (q < q4) {
                        ((float4 *)(a.G + line * a.ld))[q] = acc[c];
                        s1 += dot4(acc[c], acc[c]);
                    }
                }
        }
    }
    block_add2(s0, s1, a.sums);
}

/* The long lines (at least long_entries entries; C == 1, ld <= 128): a block of
 * long_threads a line (a.order lists them, blockIdx.x the index), each warp every
 * (long_threads / 32)-th group of entries; the warps' gradient rows are added in warp order
 * in shared memory, so the result does not depend on timing. */
template <int L, bool GRAD, int HALF>
__global__ void __launch_bounds__(long_threads) long_pass_kernel(pass_args a)
{
    constexpr int E = 32 / L, warps = long_threads / 32;
    __shared__ float4 part[warps][32];
    __shared__ float sums[warps];
    const int lane = threadIdx.x % 32, g = lane / L, k = lane % L, w = threadIdx.x / 32;
    const int q4 = a.ld / 4;
    const int64_t line = a.order[blockIdx.x];
    const int64_t begin = a.ptr[line], end = a.ptr[line + 1];
    float4 own[1], acc[1];
    line_start<L, 1>(a, line, k, own, acc);
    float line_sum = line_entries<L, 1, GRAD, HALF>(a, own, acc, begin + (int64_t)w * unroll * E,
                                                    end, (int64_t)warps * unroll * E, g, k);
    for (int off = L; off < 32; off <<= 1)
        line_sum += __shfl_xor_sync(full_mask, line_sum, off);
    if (GRAD)
        groups_sum<L, 1>(acc);
    if (lane < L) {
        part[w][lane] = acc[0];
        if (lane == 0)
            sums[w] = line_sum;
    }
    __syncthreads();
    if (w == 0) {
        double s0 = 0.0, s1 = 0.0;
        if (lane == 0)
            for (int i = 0; i < warps; i++)
                s0 += sums[i];
        if (GRAD && lane < L && lane < q4) {
            float4 t = part[0][lane];
            for (int i = 1; i < warps; i++) {
                const float4 p = part[i][lane];
                t.x += p.x, t.y += p.y, t.z += p.z, t.w += p.w;
            }
            ((float4 *)(a.G + line * a.ld))[lane] = t;
            s1 = dot4(t, t);
        }
        for (int off = 16; off > 0; off >>= 1) {
            s0 += __shfl_xor_sync(full_mask, s0, off);
            s1 += __shfl_xor_sync(full_mask, s1, off);
        }
        if (lane == 0) {
            if (s0 != 0.0)
                atomicAdd(a.sums, s0);
            if (s1 != 0.0)
                atomicAdd(a.sums + 1, s1);
        }
    }
}

/* The long lines of a side (long_entries or more): their numbers appended to list at
 * *count (in no particular order: each line's result does not depend on it). */
__global__ void long_lines_kernel(const int64_t *ptr, int32_t lines, int32_t *list, int *count)
{
    for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x)
        if (ptr[l + 1] - ptr[l] >= long_entries) {
            const int at = atomicAdd(count, 1);
            if (list)
                list[at] = (int32_t)l;
        }
}

/* gram += F^T F (r x r, double) for F lines x ld: 32 x 32 tiles of the product (grid.x),
 * each over a slice of the lines (grid.y), staged 32 rows at a time. */
__global__ void __launch_bounds__(1024)
    gram_kernel(const float *F, int64_t lines, int ld, int r, int64_t rows_per_slice, double *gram)
{
    __shared__ float sa[32][33], sb[32][33];
    const int tiles = (r + 31) / 32;
    const int ta = blockIdx.x / tiles, tb = blockIdx.x % tiles;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t first = blockIdx.y * rows_per_slice;
    const int64_t last = first + rows_per_slice < lines ? first + rows_per_slice : lines;
    const int ca = ta * 32 + tx, cb = tb * 32 + tx;
    float acc = 0.0f;
    for (int64_t row0 = first; row0 < last; row0 += 32) {
        const int64_t row = row0 + ty;
        const bool in = row < last;
        sa[ty][tx] = in && ca < r ? F[row * ld + ca] : 0.0f;
        sb[ty][tx] = in && cb < r ? F[row * ld + cb] : 0.0f;
        __syncthreads();
#pragma unroll 8
        for (int t = 0; t < 32; t++)
            acc += sa[t][ty] * sb[t][tx];
        __syncthreads();
    }
    const int a = ta * 32 + ty, b = tb * 32 + tx;
    if (a < r && b < r && acc != 0.0f)
        atomicAdd(gram + (int64_t)a * r + b, (double)acc);
}

/* gram += F^T F for r <= 32 (ld <= 32): a block stages up to gram_small_floats / ld rows of
 * F in shared memory (float4 loads, all in flight at once) and each thread sums pairs
 * (a <= b) over them in row order, one atomic a pair and block (the mirror pair gets the
 * same value). The tiled kernel below stages 32 rows at a time behind two barriers, with
 * 32 x 32 threads for r^2 sums (400 at r = 20): 73 us on a 200,000-row factor on an H200,
 * replicated on every rank of a group; this one is latency once. */
constexpr int gram_small_floats = 8192;
__global__ void __launch_bounds__(256)
    gram_small_kernel(const float *F, int64_t lines, int ld, int r, double *gram)
{
    __shared__ float4 rows4[gram_small_floats / 4];
    const int per = gram_small_floats / ld;
    const int64_t first = blockIdx.x * (int64_t)per;
    const int n = lines - first < per ? (int)(lines - first) : per;
    const int q4 = ld / 4;
    const float4 *src = (const float4 *)(F + first * ld);
    for (int i = threadIdx.x; i < n * q4; i += blockDim.x)
        rows4[i] = __ldg(src + i);
    __syncthreads();
    const float *rows = (const float *)rows4;
    const int pairs = r * (r + 1) / 2;
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
        int a = 0, b = p;
        while (b >= r - a)
            b -= r - a, a++;
        b += a;
        float acc = 0.0f;
        for (int t = 0; t < n; t++)
            acc += rows[t * ld + a] * rows[t * ld + b];
        if (acc != 0.0f) {
            atomicAdd(gram + (int64_t)a * r + b, (double)acc);
            if (a != b)
                atomicAdd(gram + (int64_t)b * r + a, (double)acc);
        }
    }
}

/* The Cholesky kernel's scratch (2 r^2 doubles) lives in shared memory up to this rank
 * (2 * 55^2 * 8 bytes fit the 48 KiB a block gets without opting in), else in global
 * memory. In shared memory each of the r pivots' dependent loads and the substitutions take
 * tens of cycles where global memory took hundreds, and the kernel runs twice an
 * iteration on every rank: it was part of the fixed cost that a group does not divide. */
constexpr int cholesky_shared_rank = 55;

/* One block: the Cholesky factor of the Gram matrix A (double, r x r) and from it the
 * inverse, into inv (float, r x r). A matrix that is not numerically positive definite
 * (pivot below 1e-12 of the largest diagonal: a rank-deficient factor) sets *singular = 1
 * and adds one to *count; the direction kernel then takes the plain gradient. Lg and Wg
 * are r x r double scratch in global memory, used where r > cholesky_shared_rank (else the
 * launch gives 2 r^2 doubles of dynamic shared memory). */
__global__ void cholesky_inverse_kernel(const double *A, int r, double *Lg, double *Wg, float *inv,
                                        int *singular, int *count)
{
    extern __shared__ double scratch[];
    __shared__ double scale;
    __shared__ int bad;
    const bool in_shared = r <= cholesky_shared_rank;
    double *L = in_shared ? scratch : Lg;
    double *W = in_shared ? scratch + (int64_t)r * r : Wg;
    const int tid = threadIdx.x, nt = blockDim.x;
    if (tid == 0) {
        double s = 0.0;
        for (int i = 0; i < r; i++)
            s = fmax(s, A[(int64_t)i * r + i]);
        scale = s;
        bad = !(s > 0.0) || !isfinite(s);
    }
    for (int64_t p = tid; p < (int64_t)r * r; p += nt)
        L[p] = A[p];
    __syncthreads();
    /* `bad` is written by thread 0 only before the barrier that precedes every read of it,
     * so every thread leaves the loop at the same j. (A bad scale fails the first pivot.) */
    for (int j = 0; j < r; j++) {
        if (tid == 0) {
            double d = L[(int64_t)j * r + j];
            for (int t = 0; t < j; t++)
                d -= L[(int64_t)j * r + t] * L[(int64_t)j * r + t];
            if (!(d > 1e-12 * scale) || !isfinite(d))
                bad = 1;
            else
                L[(int64_t)j * r + j] = sqrt(d);
        }
        __syncthreads();
        if (bad)
            break;
        const double djj = L[(int64_t)j * r + j];
        for (int i = j + 1 + tid; i < r; i += nt) {
            double s = L[(int64_t)i * r + j];
            for (int t = 0; t < j; t++)
                s -= L[(int64_t)i * r + t] * L[(int64_t)j * r + t];
            L[(int64_t)i * r + j] = s / djj;
        }
        __syncthreads();
    }
    if (bad) {
        if (tid == 0) {
            *singular = 1;
            atomicAdd(count, 1);
        }
        return;
    }
    if (tid == 0)
        *singular = 0;
    /* W = L^-1 (lower), a column per thread by forward substitution. */
    for (int c = tid; c < r; c += nt)
        for (int k = c; k < r; k++) {
            double x = k == c ? 1.0 : 0.0;
            for (int t = c; t < k; t++)
                x -= L[(int64_t)k * r + t] * W[(int64_t)t * r + c];
            W[(int64_t)k * r + c] = x / L[(int64_t)k * r + k];
        }
    __syncthreads();
    /* A^-1 = W^T W. */
    for (int64_t p = tid; p < (int64_t)r * r; p += nt) {
        const int a = (int)(p / r), b = (int)(p % r);
        double s = 0.0;
        for (int k = a > b ? a : b; k < r; k++)
            s += W[(int64_t)k * r + a] * W[(int64_t)k * r + b];
        inv[p] = (float)s;
    }
}

/* D = G A^-1 (lines x ld, zeros past r) and *num += <D, G> over the lines [sum_lo, sum_hi)
 * (a group's rank sums its own slice of a replicated side); when the Gram matrix was
 * singular, D = G and *num += |G|^2 (the plain step). Threads: x over D's columns in
 * tiles of 32 (grid.y), y over lines. */
__global__ void direction_kernel(const float *G, const float *inv, const int *singular,
                                 int64_t lines, int ld, int r, float *D, double *num,
                                 int64_t sum_lo, int64_t sum_hi)
{
    const int b = blockIdx.y * 32 + threadIdx.x;
    const bool plain = *singular != 0;
    double s = 0.0;
    if (b < ld)
        for (int64_t i = blockIdx.x * (int64_t)blockDim.y + threadIdx.y; i < lines;
             i += (int64_t)gridDim.x * blockDim.y) {
            const float *g = G + i * ld;
            float d = 0.0f;
            if (b < r) {
                if (plain)
                    d = g[b];
                else
                    for (int a = 0; a < r; a++)
                        d += g[a] * __ldg(inv + (int64_t)a * r + b);
            }
            D[i * ld + b] = d;
            if (i >= sum_lo && i < sum_hi)
                s += (double)d * g[b];
        }
    const int t = threadIdx.y * blockDim.x + threadIdx.x;
    __shared__ double part[256];
    part[t] = s;
    __syncthreads();
    for (int half = blockDim.x * blockDim.y / 2; half > 0; half /= 2) {
        if (t < half)
            part[t] += part[t + half];
        __syncthreads();
    }
    if (t == 0 && part[0] != 0.0)
        atomicAdd(num, part[0]);
}

/* The exact line search's length num / den, or 0 when there is nothing to move along or
 * some rank of a group asked to stop (stop[0..2], the sums of the ranks' reasons: then
 * every rank keeps its factors). */
__device__ inline float step_length(const double *num, const double *den, const double *stop)
{
    if (stop[0] > 0.0 || stop[1] > 0.0 || stop[2] > 0.0)
        return 0.0f;
    const double t = *num / *den;
    return *num > 0.0 && *den > 0.0 && isfinite(t) ? (float)t : 0.0f;
}

/* F -= t D over n floats, t = num / den. */
__global__ void step_kernel(float *F, const float *D, int64_t n, const double *num,
                            const double *den, const double *stop)
{
    const float t = step_length(num, den, stop);
    if (t == 0.0f)
        return;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        F[i] -= t * D[i];
}

/* F *= s over n floats. */
__global__ void scale_kernel(float *F, int64_t n, float s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        F[i] *= s;
}

} // namespace asd

#endif
