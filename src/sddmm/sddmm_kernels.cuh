// The CUDA SDDMM kernel, one template for both schemes.
//
// A virtual warp of V lanes computes one stored entry at a time: lane l holds its share of
// the k-chunk of A's row (KR units of W values: 16-byte vector loads of 4 floats or 8 16-bit
// values: bf16, fp16, or TF32 values held as scaled fp16) in registers, reads the same share of B's
// row, and the V partial sums meet through a butterfly of warp shuffles. No atomics: every entry is
// written by one lane of one virtual warp. A block works through a run of items (see
// sddmm_layout.h) of one column panel; virtual warps take the items round-robin.
//
// SMEM = false (the SM-L2 scheme): B is read from global memory through L1 and L2; A rows
//   are the registers' reuse, and panels (when the plan uses several) keep the B panel
//   that concurrent blocks read resident in L2.
// SMEM = true (the SM-SM scheme, for dense-ish panels): the block first stages the panel's
//   B slice (tj rows x KC columns) in shared memory, then every entry reads B from there.
//   Blocks are large (many rows of one panel) so that staging is paid rarely.
//
// k larger than one chunk (KC = V * KR * W) runs chunk by chunk, one launch each (P.kc):
// the first chunk writes alpha * s * partial + beta * out, later chunks add to it; launches
// are stream-ordered, so the read-modify-write needs no synchronization.
//
// MODE picks the instance per launch: MF_SDDMM_PLAIN for the common call (a chunk wholly
// inside k, the first, beta = 0, S as a pattern: out = alpha * dot), MF_SDDMM_FULL for
// other chunks wholly inside k, MF_SDDMM_TAIL for the chunk that passes k (A and B loads
// checked by each unit's first value: a 16-bit unit that passes k reads the copies' zero
// padding, and a unit of 8 of A's floats reads its first 4 alone where k ends after them).
// On the H100 (Netflix shape, k = 32) the bounds checks and a loop over chunks
// inside the kernel cost 15-20%, and the general epilogue another 5%: the work per entry
// is small there.
#ifndef MF_SDDMM_KERNELS_CUH
#define MF_SDDMM_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "mfact/mfact.h"
#include "sddmm/sddmm_layout.h"
#include "sddmm/sddmm_round.h"  // mf_round_tf32, mf_pow2, mf_tf32_row_power
#include "sddmm/sddmm_tuning.h" // MF_SDDMM_L2_THREADS, MF_SDDMM_SM_THREADS

struct mf_sddmm_params {
    const int32_t *col;
    const float *val; // NULL: pattern
    float *out;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    int k, kc; // kc: the first column of this launch's chunk
    float alpha, beta;
    int32_t tj, cols;
    const mf_sddmm_item *items;
    const mf_sddmm_block *blocks;
    // HALF kernels (bf16 or fp16 inputs): the factors' 16-bit copies (sddmm_tc_kernels.cuh's
    // mf_tc_convert), rows of ld16 values; B is not read then, nor A where A16 is given (bf16
    // and fp16 without A16 round A's floats as they load)
    const uint16_t *A16, *B16;
    int64_t ld16;
    // MF_SDDMM_TF32_16 (sddmm_tf32.cu): A16 and B16 hold the TF32-rounded factors, A's rows
    // each times its own power of two, B times one, as fp16, exactly; pow_a the A rows' powers'
    // exponents, *b_top the bits of B's largest value, which give B's power. A row fp16 cannot
    // hold so has a NaN copy, and the kernel leaves its entries to mf_sddmm_tf32_unfit.
    // Without A16 (B's copy alone) the kernel reads A's floats, rounding them to TF32 as they
    // load, unscaled: pow_a is then zero where a row fits, and the kernel marks there (and in
    // *wide) each A row whose values in this launch's chunk include one mf_tf32_float_fits
    // refuses, and leaves its entries to the same pass (beta = 0 in a call in chunks,
    // sddmm.cu's run(): the pass overwrites what earlier chunks wrote).
    int8_t *pow_a;
    const uint32_t *b_top;
    int *wide;
};

// The kernel instances beyond mf_precision's values (the HALF parameter below): TF32 read
// from scaled fp16 copies; bf16 and fp16 rounded from the floats in registers.
enum { MF_SDDMM_TF32_16 = 16, MF_SDDMM_BF16_REG = 17, MF_SDDMM_FP16_REG = 18 };

// A lane's unit of a row: 4 floats (VEC), 1 float, or (HALF: MF_PRECISION_BF16, FP16 or
// MF_SDDMM_TF32_16, with VEC) 8 16-bit values widened to floats as they load, whose products
// and sums are then exact float arithmetic on the rounded factors.
template <bool VEC, int HALF = 0> struct mf_unit;
template <> struct mf_unit<true> {
    typedef float4 type;
    typedef float elem;
    static constexpr int width = 4;
    static constexpr bool scaled = false;   // results times the rows' scales (MF_SDDMM_TF32_16)
    static constexpr bool a_floats = false; // A's floats rounded as they load, without A16
    __device__ static const float *A(const mf_sddmm_params &P)
    {
        return P.A;
    }
    __device__ static const float *B(const mf_sddmm_params &P)
    {
        return P.B;
    }
    __device__ static int64_t lda(const mf_sddmm_params &P)
    {
        return P.lda;
    }
    __device__ static int64_t ldb(const mf_sddmm_params &P)
    {
        return P.ldb;
    }
    __device__ static float4 zero()
    {
        return make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __device__ static float4 load(const float *p)
    {
        return __ldg(reinterpret_cast<const float4 *>(p));
    }
    // A's loads (once per item); B's go through load (once per entry).
    __device__ static float4 loadA(const float *p)
    {
        return load(p);
    }
    __device__ static float4 lds(const float *p)
    {
        return *reinterpret_cast<const float4 *>(p);
    }
    __device__ static void sts(float *p, float4 v)
    {
        *reinterpret_cast<float4 *>(p) = v;
    }
    __device__ static float dot(float4 a, float4 b, float acc)
    {
        acc = fmaf(a.x, b.x, acc);
        acc = fmaf(a.y, b.y, acc);
        acc = fmaf(a.z, b.z, acc);
        return fmaf(a.w, b.w, acc);
    }
};
template <> struct mf_unit<false> {
    typedef float type;
    typedef float elem;
    static constexpr int width = 1;
    static constexpr bool scaled = false;
    static constexpr bool a_floats = false;
    __device__ static const float *A(const mf_sddmm_params &P)
    {
        return P.A;
    }
    __device__ static const float *B(const mf_sddmm_params &P)
    {
        return P.B;
    }
    __device__ static int64_t lda(const mf_sddmm_params &P)
    {
        return P.lda;
    }
    __device__ static int64_t ldb(const mf_sddmm_params &P)
    {
        return P.ldb;
    }
    __device__ static float zero()
    {
        return 0.f;
    }
    __device__ static float load(const float *p)
    {
        return __ldg(p);
    }
    __device__ static float loadA(const float *p)
    {
        return load(p);
    }
    __device__ static float lds(const float *p)
    {
        return *p;
    }
    __device__ static void sts(float *p, float v)
    {
        *p = v;
    }
    __device__ static float dot(float a, float b, float acc)
    {
        return fmaf(a, b, acc);
    }
};

// Four floats rounded to TF32, bf16 or fp16 and back, exactly (the units that round as they
// load, below).
struct mf_round4_tf32 {
    __device__ static float4 round4(float4 v)
    {
        return make_float4(mf_round_tf32(v.x), mf_round_tf32(v.y), mf_round_tf32(v.z),
                           mf_round_tf32(v.w));
    }
};
// bf16 and fp16: two values a conversion to a 16-bit pair (ties to even, as __float2bfloat16_rn
// and __float2half_rn), widened back exactly.
struct mf_round4_bf16 {
    __device__ static float2 round2(float a, float b)
    {
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        const uint32_t u = *reinterpret_cast<const uint32_t *>(&h);
        return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
    }
    __device__ static float4 round4(float4 v)
    {
        const float2 lo = round2(v.x, v.y), hi = round2(v.z, v.w);
        return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
};
struct mf_round4_fp16 {
    __device__ static float4 round4(float4 v)
    {
        const float2 lo = __half22float2(__floats2half2_rn(v.x, v.y)),
                     hi = __half22float2(__floats2half2_rn(v.z, v.w));
        return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
};
// Eight values of a 16-bit unit, widened.
struct mf_float8 {
    float4 lo, hi;
};
// 16-bit copies: a unit is 8 values, one 16-byte load. Units of 4 values (8-byte loads) took
// as many load instructions and L1 wavefronts per entry as float's 16-byte units, and bf16
// ran little faster than fp32 where those bound the kernel (k <= 128, bench/README.md).
//
// bf16 and fp16 read B's 16-bit copy, and A's (A16) where the call made one (factors without
// 16-byte float rows); else A's floats, rounded as they load (loadA_floats): A's row is read
// once an item, so a copy of A (rows x k x 6 bytes a call) pays for little, while B's is
// gathered for every entry (bench/README.md, 2026-12-01).
template <int HALF> struct mf_unit<true, HALF> {
    typedef mf_float8 type;
    typedef uint16_t elem;
    static constexpr int width = 8;
    static constexpr bool scaled = false;
    static constexpr bool a_floats = true;
    __device__ static const uint16_t *A(const mf_sddmm_params &P)
    {
        return P.A16;
    }
    __device__ static const uint16_t *B(const mf_sddmm_params &P)
    {
        return P.B16;
    }
    __device__ static int64_t lda(const mf_sddmm_params &P)
    {
        return P.ld16;
    }
    __device__ static int64_t ldb(const mf_sddmm_params &P)
    {
        return P.ld16;
    }
    __device__ static mf_float8 zero()
    {
        return {make_float4(0.f, 0.f, 0.f, 0.f), make_float4(0.f, 0.f, 0.f, 0.f)};
    }
    // One 16-bit value (the low half of x when hi is false) as a float, exactly.
    __device__ static float widen(uint32_t x, bool hi)
    {
        if (HALF == MF_PRECISION_BF16)
            return __uint_as_float(hi ? x & 0xffff0000u : x << 16);
        return __half2float(__ushort_as_half((unsigned short)(hi ? x >> 16 : x & 0xffffu)));
    }
    __device__ static float4 widen4(uint32_t x, uint32_t y)
    {
        return make_float4(widen(x, false), widen(x, true), widen(y, false), widen(y, true));
    }
    __device__ static mf_float8 load(const uint16_t *p)
    {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
        return {widen4(v.x, v.y), widen4(v.z, v.w)};
    }
    __device__ static mf_float8 loadA(const uint16_t *p)
    {
        return load(p);
    }
    // 8 floats of A rounded to HALF, the last 4 zero where k ends within the unit (left: the
    // values of the row from p on, at least 1; k % 4 == 0).
    __device__ static mf_float8 loadA_floats(const float *p, int left)
    {
        typedef typename std::conditional<HALF == MF_PRECISION_BF16, mf_round4_bf16,
                                          mf_round4_fp16>::type R;
        const float4 lo = R::round4(mf_unit<true>::load(p));
        const float4 hi = left > 4 ? R::round4(mf_unit<true>::load(p + 4)) : zero().hi;
        return {lo, hi};
    }
    __device__ static float dot(const mf_float8 &a, const mf_float8 &b, float acc)
    {
        return mf_unit<true>::dot(a.hi, b.hi, mf_unit<true>::dot(a.lo, b.lo, acc));
    }
};

// The float factors rounded as they load (HALF = MF_PRECISION_TF32, MF_SDDMM_BF16_REG or
// MF_SDDMM_FP16_REG, with VEC), to the values the CPU backend rounds them to (sddmm_round.h,
// core/round16.h): exact products of the rounded factors and float sums, the precision's bound
// and CPU parity, with no copy of either factor. For a matrix with few entries per column a
// copy is a pass over B that the product does not repay (a 948K-entry graph at
// k = 512, 82K x 82K: bf16's copies 12%, TF32's copy of B 46% slower than fp32 itself, H200,
// 2026-12-01); where the gathers bind (k >= 128) the roundings cost little, at k = 32 a few
// instructions per FMA (bench/README.md).
// TF32: mf_round_tf32 itself, four integer instructions a value, as many as cvt.rna.tf32.f32
// and its mask compile to (sm_80, sm_90); the conversion's mask would turn a NaN whose payload
// lies in the low 13 bits into an infinity, where the CPU backend keeps it NaN (H200,
// soc-Slashdot0902, k = 32 / 128 / 512: 0.042 / 0.099 / 0.313 ms against the conversion's
// 0.037 / 0.096 / 0.315, bench/README.md).
// One form for the three: R::round4 rounds a unit of 4 floats, for A's loads and B's alike.
template <class R> struct mf_unit_rounding : mf_unit<true> {
    __device__ static float4 load(const float *p)
    {
        return R::round4(mf_unit<true>::load(p));
    }
    __device__ static float4 loadA(const float *p)
    {
        return load(p);
    }
};
template <> struct mf_unit<true, MF_PRECISION_TF32> : mf_unit_rounding<mf_round4_tf32> {
};
template <> struct mf_unit<true, MF_SDDMM_BF16_REG> : mf_unit_rounding<mf_round4_bf16> {
};
template <> struct mf_unit<true, MF_SDDMM_FP16_REG> : mf_unit_rounding<mf_round4_fp16> {
};

// TF32 from the scaled fp16 copies (MF_SDDMM_TF32_16, sddmm_tf32.cu): each row is its TF32
// values times a power of two (an A row's own, B's one), and fp16's 11 significant bits hold a
// TF32 value (11 bits) exactly once it is scaled into fp16's normal range; so the products,
// and the float sums, are the TF32 ones times the two powers, which the kernel divides out
// (mf_sddmm_unpow). Exact products of the TF32 values and float sums, as the TF32 unit above
// makes them (in another order: units of 8, not 4), from half the bytes: what bf16 gathers,
// at TF32's accuracy.
//
// Without A's copy (A16 NULL: B's copy alone, the calls' route where it pays) A's floats are
// rounded to TF32 as they load and multiplied unscaled: B's scaled values are 0 or in [2^-14,
// 2^15), and an A value 0 or in [2^-64, 2^64) keeps every product exact and normal and a
// chunk's sums finite (mf_tf32_float_fits), so only B's power is divided out. A row of A with
// a value outside that range is not computed here: the kernel marks it (P.pow_a, P.wide) and
// mf_sddmm_tf32_unfit computes its entries from the floats.
template <> struct mf_unit<true, MF_SDDMM_TF32_16> : mf_unit<true, MF_PRECISION_FP16> {
    static constexpr bool scaled = true;
    static constexpr bool a_floats = true;
    __device__ static mf_float8 loadA_floats(const float *p, int left)
    {
        const float4 lo = mf_round4_tf32::round4(mf_unit<true>::load(p));
        const float4 hi = left > 4 ? mf_round4_tf32::round4(mf_unit<true>::load(p + 4)) : zero().hi;
        return {lo, hi};
    }
    __device__ static bool fits4(float4 v)
    {
        return mf_tf32_float_fits(__float_as_uint(v.x) & 0x7fffffffu) &&
               mf_tf32_float_fits(__float_as_uint(v.y) & 0x7fffffffu) &&
               mf_tf32_float_fits(__float_as_uint(v.z) & 0x7fffffffu) &&
               mf_tf32_float_fits(__float_as_uint(v.w) & 0x7fffffffu);
    }
    // A unit of A's rounded floats (zeros past k fit)
    __device__ static bool a_fits(const mf_float8 &a)
    {
        return fits4(a.lo) && fits4(a.hi);
    }
};

// 2^-e as a float, for a power e (in [-49, 78], sddmm_tf32.cu: a normal float). An entry's sum
// of scaled products is taken times 2^-e of B's power, exactly, then of A's row's, which
// rounds only where the unscaled result leaves float's normal range: scaled fp16 values are
// multiples of 2^-24 and below 2^15, so a nonzero sum of at most one launch's chunk of
// products (KC <= 1,024) is a multiple of 2^-48 and below 2^40, at least 2^-126 times 2^-e
// (e <= 78) and below 2^89 times 2^-e (e >= -49). Nor can a sum of fitting rows be NaN or
// infinite (finite fp16 values, sums below 2^40): a NaN sum marks an entry of an unfit row of
// A or B (its copy is NaN), which the kernel does not write. Without A's copy (A's TF32 values
// unscaled, 0 or in [2^-64, 2^64)) a nonzero product is at least 2^-78 and a multiple of 2^-98,
// a chunk's sum below 2^89: again exact products and float sums in float's normal range, and
// only B's 2^-e (A's is 1) can round, where the unscaled result leaves that range; such a sum is
// NaN only for an unfit row of B, and an unfit row of A runs no entries.
__device__ __forceinline__ float mf_sddmm_unpow(int e)
{
    return mf_pow2(-e);
}
// B's power's 2^-e (TF32_16 kernels), from its largest value's bits; an unfit B (a largest
// out of range) makes every B row's copy NaN, so the value then matters nowhere.
__device__ __forceinline__ float mf_sddmm_b_unpow(const uint32_t *b_top)
{
    int e;
    return mf_tf32_row_power(__ldg(b_top), &e) ? mf_sddmm_unpow(e) : 1.f;
}

// Stage B[j0 .. j0 + jn) x [kc .. kc + KC) into shared memory, zero beyond k (so the
// entry loop needs no bounds checks). With VEC, k is a multiple of 4: a unit is either
// wholly inside k or wholly outside.
template <int KC, bool VEC, int T>
__device__ void mf_sddmm_stage_b(float *bs, const mf_sddmm_params &P, int j0, int jn, int kc)
{
    typedef mf_unit<VEC> U; // float factors: SM-SM has no 16-bit instances
    constexpr int per_row = KC / U::width;
    for (int u = threadIdx.x; u < jn * per_row; u += T) {
        int r = u / per_row, c = (u % per_row) * U::width;
        typename U::type v = U::zero();
        if (kc + c < P.k)
            v = U::load(P.B + (int64_t)(j0 + r) * P.ldb + kc + c);
        U::sts(bs + r * KC + c, v);
    }
}

enum { MF_SDDMM_PLAIN, MF_SDDMM_FULL, MF_SDDMM_TAIL };

template <int V, int KR, bool VEC, bool SMEM, int MODE, int T, int HALF>
__device__ __forceinline__ void mf_sddmm_body(const mf_sddmm_params &P)
{
    static_assert(HALF == 0 || (VEC && !SMEM),
                  "rounded inputs (16-bit, TF32): SM-L2 vector variants only");
    typedef mf_unit<VEC, HALF> U;
    typedef typename U::type unit;
    typedef typename U::elem elem;
    constexpr int W = U::width, KC = V * KR * W, NVW = T / V;
    // Entries in flight per virtual warp: 8 when the loads they need fit in registers (and
    // the reduce-scatter has lanes enough to spread them).
    constexpr int NU = (V >= 8 || (VEC && V >= 4)) && KR <= 2 ? 8 : 4;
    extern __shared__ float4 mf_sddmm_smem[];
    float *bs = reinterpret_cast<float *>(mf_sddmm_smem);

    const mf_sddmm_block blk = P.blocks[blockIdx.x];
    const int lane = threadIdx.x % V, vw = threadIdx.x / V;
    // The virtual warp's lanes within the hardware warp, for the shuffles.
    const unsigned mask = V == 32 ? 0xffffffffu : ((1u << V) - 1u) << ((threadIdx.x % 32) / V * V);
    const int j0 = blk.panel * P.tj;
    const int jn = min(P.tj, P.cols - j0);
    const int kc = P.kc;
    float b_unpow = 1.f;
    if constexpr (U::scaled)
        b_unpow = mf_sddmm_b_unpow(P.b_top);

    // How virtual warps share the block's items. Wide chunks (KC >= 64) claim the next item
    // from a shared counter: their items are long in time, and a static round-robin leaves
    // warps idle while the busiest finishes (H200: 2-5% at k = 128 and 512). Narrow chunks
    // take items round-robin, where the atomic and the shuffle per item cost more than the
    // imbalance (3% at k = 32). SM-SM blocks leave their shared memory to the tile. (KC
    // counts values: a 16-bit chunk of 64 is half the loads of a float one, measured as is.)
    constexpr bool DYN = !SMEM && KC >= 64;
    __shared__ int next_item;
    if (DYN && threadIdx.x == 0)
        next_item = NVW;
    if constexpr (SMEM)
        mf_sddmm_stage_b<KC, VEC, T>(bs, P, j0, jn, kc);
    if (SMEM || DYN)
        __syncthreads();
    for (int rel = vw; rel < blk.item_count;) {
        const int64_t it = blk.item_begin + rel;
        const mf_sddmm_item item = P.items[it];
        unit a[KR];
        const elem *arow = U::a_floats && !P.A16 ? nullptr // (A's floats, below)
                                                 : U::A(P) + (int64_t)item.row * U::lda(P) + kc;
        const float *arow_floats = U::a_floats ? P.A + (int64_t)item.row * P.lda + kc : nullptr;
        // (scaled copies of both: A's row's power; B's alone: 0, or MF_TF32_ROW_UNFIT where an
        // earlier chunk's launch marked the row, read plainly: this launch's warps may write it)
        int ea = 0;
        if constexpr (U::scaled)
            ea = P.A16 ? __ldg(P.pow_a + item.row) : P.pow_a[item.row];
        const float a_unpow = mf_sddmm_unpow(P.A16 ? ea : 0);
#pragma unroll
        for (int r = 0; r < KR; r++) {
            int kk = (r * V + lane) * W;
            if constexpr (U::a_floats) { // bf16, fp16, TF32_16: A16 NULL, A's floats rounded
                const int left = MODE == MF_SDDMM_TAIL ? P.k - kc - kk : W;
                if (left <= 0)
                    a[r] = U::zero();
                else if (P.A16)
                    a[r] = U::loadA(arow + kk);
                else
                    a[r] = U::loadA_floats(arow_floats + kk, left);
            } else {
                a[r] = MODE != MF_SDDMM_TAIL || kc + kk < P.k ? U::loadA(arow + kk) : U::zero();
            }
        }
        // (an unfit A row's copy is NaN: its sums are, and none is written; without A's copy
        // an unfit row's items run no entries, and the row is marked for mf_sddmm_tf32_unfit)
        bool skip = false;
        if constexpr (U::scaled) {
            if (!P.A16) {
                bool bad = ea == MF_TF32_ROW_UNFIT;
#pragma unroll
                for (int r = 0; r < KR; r++)
                    bad |= !U::a_fits(a[r]);
                skip = __any_sync(mask, bad);
                if (skip && lane == 0 && ea != MF_TF32_ROW_UNFIT) {
                    P.pow_a[item.row] = MF_TF32_ROW_UNFIT; // every writer writes the same
                    *P.wide = 1;
                }
            }
        }
        const int64_t end = skip ? item.begin : item.begin + (int64_t)item.count;
        for (int64_t p = item.begin; p < end; p += NU) {
            float s[NU];
#pragma unroll
            for (int u = 0; u < NU; u++) {
                // Past the item's end, repeat its first entry: loads stay in bounds and
                // the result is dropped.
                const int64_t q = p + u < end ? p + u : p;
                const int j = __ldg(P.col + q);
                float acc = 0.f;
                if constexpr (SMEM) {
                    const float *brow = bs + (j - j0) * KC;
#pragma unroll
                    for (int r = 0; r < KR; r++)
                        acc = U::dot(a[r], U::lds(brow + (r * V + lane) * W), acc);
                } else {
                    // Column indices are never negative (mf_sparse checks them): unsigned
                    // arithmetic spares the sign extension.
                    const elem *brow = U::B(P) + (size_t)(uint32_t)j * (size_t)U::ldb(P) + kc;
#pragma unroll
                    for (int r = 0; r < KR; r++) {
                        int kk = (r * V + lane) * W;
                        if (MODE != MF_SDDMM_TAIL || kc + kk < P.k)
                            acc = U::dot(a[r], U::load(brow + kk), acc);
                    }
                }
                s[u] = acc;
            }
            // Reduce-scatter across the V lanes: each round halves the values a lane
            // holds, sending the half its partner keeps (NU - 1 shuffles in all rather
            // than NU log2 V for NU separate butterflies). Once one value is left, the
            // remaining rounds are a plain butterfly.
            int held = NU;
#pragma unroll
            for (int off = V / 2; off >= 1; off /= 2) {
                if (held > 1) {
                    const bool upper = (lane & off) != 0;
                    held /= 2;
#pragma unroll
                    for (int j = 0; j < NU / 2; j++)
                        if (j < held) {
                            float send = upper ? s[j] : s[j + held];
                            float keep = upper ? s[j + held] : s[j];
                            s[j] = keep + __shfl_xor_sync(mask, send, off);
                        }
                } else {
                    s[0] += __shfl_xor_sync(mask, s[0], off);
                }
            }
            // Lane l now holds entries [l * NU / V, ...) when NU >= V (held of them), or
            // entry l / (V / NU) when NU < V (every V / NU lanes share one).
            constexpr int group = V > NU ? V / NU : 1;
            if (lane % group == 0) {
#pragma unroll
                for (int c = 0; c < (NU >= V ? NU / V : 1); c++) {
                    const int64_t q = p + (NU >= V ? lane * (NU / V) + c : lane / group);
                    // NaN (scaled copies): an unfit row's entry, left to mf_sddmm_tf32_unfit
                    if (q < end && !(U::scaled && isnan(s[c]))) {
                        float v = s[c];
                        if constexpr (U::scaled) // B's power out, then A's row's
                            v = v * b_unpow * a_unpow;
                        v = P.alpha * v;
                        if (MODE == MF_SDDMM_PLAIN) {
                            P.out[q] = v;
                        } else {
                            if (P.val)
                                v *= __ldg(P.val + q);
                            if (kc > 0)
                                P.out[q] += v;
                            else
                                P.out[q] = P.beta == 0.f ? v : v + P.beta * P.out[q];
                        }
                    }
                }
            }
        }
        if (DYN) {
            int claimed = 0;
            if (lane == 0)
                claimed = atomicAdd(&next_item, 1);
            rel = __shfl_sync(mask, claimed, 0, V);
        } else {
            rel += NVW;
        }
    }
}

// HALF: 0 (float), an mf_precision (TF32, BF16, FP16), MF_SDDMM_TF32_16, MF_SDDMM_BF16_REG or
// MF_SDDMM_FP16_REG.
template <int V, int KR, bool VEC, bool SMEM, int MODE, int T, int HALF = 0>
__global__ void __launch_bounds__(T) mf_sddmm_kernel(const mf_sddmm_params P)
{
    mf_sddmm_body<V, KR, VEC, SMEM, MODE, T, HALF>(P);
}

#endif
