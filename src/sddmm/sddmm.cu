// The CUDA backend of mf_sddmm: kernel variants and the auto-tune that picks a variant by
// timing the candidates on the first call for a given k, kept in the matrix's plan
// (sddmm_plan.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/staging.h"
#include "cuda/cuda_internal.h"
#include "sddmm/sddmm_engine.cuh"
#include "sddmm/sddmm_internal.h"
#include "sddmm/sddmm_kernels.cuh"
#include "sddmm/sddmm_plan.h"
#include "sddmm/sddmm_tuning.h"

typedef void (*mf_sddmm_launch_fn)(const mf_sddmm_params &, int half, int mode, unsigned grid,
                                   size_t smem, cudaStream_t);

template <int V, int KR, bool VEC, bool SMEM, int HALF>
static void launch_mode(const mf_sddmm_params &P, int mode, unsigned grid, size_t smem,
                        cudaStream_t stream)
{
    constexpr int T = SMEM ? MF_SDDMM_SM_THREADS : MF_SDDMM_L2_THREADS;
    if (mode == MF_SDDMM_TAIL)
        mf_sddmm_kernel<V, KR, VEC, SMEM, MF_SDDMM_TAIL, T, HALF><<<grid, T, smem, stream>>>(P);
    else if (mode == MF_SDDMM_PLAIN)
        mf_sddmm_kernel<V, KR, VEC, SMEM, MF_SDDMM_PLAIN, T, HALF><<<grid, T, smem, stream>>>(P);
    else
        mf_sddmm_kernel<V, KR, VEC, SMEM, MF_SDDMM_FULL, T, HALF><<<grid, T, smem, stream>>>(P);
}

// One chunk [P.kc, P.kc + KC) of k by the instance for mode (sddmm_kernels.cuh); with `half`
// a reduced precision's instance (SM-L2 vector variants only): bf16 and fp16 read P.A16 and
// P.B16, MF_SDDMM_TF32_16 reads B's scaled fp16 copy and A's (or A's floats, rounding them
// as they load: sddmm_tf32.cu), TF32,
// MF_SDDMM_BF16_REG and MF_SDDMM_FP16_REG round the floats as they load.
template <int V, int KR, bool VEC, bool SMEM>
static void launch(const mf_sddmm_params &P, int half, int mode, unsigned grid, size_t smem,
                   cudaStream_t stream)
{
    if constexpr (VEC && !SMEM) {
        if (half == MF_SDDMM_TF32_16)
            return launch_mode<V, KR, VEC, SMEM, MF_SDDMM_TF32_16>(P, mode, grid, smem, stream);
        if (half == MF_PRECISION_BF16)
            return launch_mode<V, KR, VEC, SMEM, MF_PRECISION_BF16>(P, mode, grid, smem, stream);
        if (half == MF_PRECISION_FP16)
            return launch_mode<V, KR, VEC, SMEM, MF_PRECISION_FP16>(P, mode, grid, smem, stream);
        if (half == MF_PRECISION_TF32)
            return launch_mode<V, KR, VEC, SMEM, MF_PRECISION_TF32>(P, mode, grid, smem, stream);
        if (half == MF_SDDMM_BF16_REG)
            return launch_mode<V, KR, VEC, SMEM, MF_SDDMM_BF16_REG>(P, mode, grid, smem, stream);
        if (half == MF_SDDMM_FP16_REG)
            return launch_mode<V, KR, VEC, SMEM, MF_SDDMM_FP16_REG>(P, mode, grid, smem, stream);
    }
    launch_mode<V, KR, VEC, SMEM, 0>(P, mode, grid, smem, stream);
}

template <int V, int KR, bool VEC, bool SMEM> static cudaError_t allow_smem(size_t bytes)
{
    constexpr int T = SMEM ? MF_SDDMM_SM_THREADS : MF_SDDMM_L2_THREADS;
    const void *fns[] = {(const void *)mf_sddmm_kernel<V, KR, VEC, SMEM, MF_SDDMM_PLAIN, T>,
                         (const void *)mf_sddmm_kernel<V, KR, VEC, SMEM, MF_SDDMM_FULL, T>,
                         (const void *)mf_sddmm_kernel<V, KR, VEC, SMEM, MF_SDDMM_TAIL, T>};
    for (const void *fn : fns) {
        cudaError_t err =
            cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

struct mf_sddmm_variant {
    mf_sddmm_config cfg;
    mf_sddmm_launch_fn launch;
    cudaError_t (*allow_smem)(size_t);
};

#define MF_VARIANT(V, KR, VEC, SMEM)                                                               \
    {                                                                                              \
        {V, KR, VEC, SMEM}, launch<V, KR, VEC, SMEM>, allow_smem<V, KR, VEC, SMEM>                 \
    }

// Every compiled variant. The tuning rules (sddmm_tuning.c) pick candidates among them.
static const mf_sddmm_variant variants[] = {
    // SM-L2, 16-byte vectors (float factors: k % 4 == 0, aligned rows; the 16-bit copies'
    // rows always are)
    MF_VARIANT(8, 1, true, false),
    MF_VARIANT(8, 2, true, false),
    MF_VARIANT(8, 4, true, false),
    MF_VARIANT(16, 1, true, false),
    MF_VARIANT(16, 2, true, false),
    MF_VARIANT(16, 4, true, false),
    MF_VARIANT(32, 1, true, false),
    MF_VARIANT(32, 2, true, false),
    MF_VARIANT(32, 4, true, false),
    // Listed after the others so the rules' untimed pick for small matrices stays V = 8.
    MF_VARIANT(4, 2, true, false),
    // k = 32 on the 16-bit copies in one 16-byte unit per lane (and float k <= 16).
    MF_VARIANT(4, 1, true, false),
    // SM-L2, scalar (any k, any leading dimension)
    MF_VARIANT(1, 1, false, false),
    MF_VARIANT(2, 1, false, false),
    MF_VARIANT(2, 2, false, false),
    MF_VARIANT(4, 1, false, false),
    MF_VARIANT(4, 2, false, false),
    MF_VARIANT(8, 1, false, false),
    MF_VARIANT(8, 2, false, false),
    MF_VARIANT(16, 1, false, false),
    MF_VARIANT(16, 2, false, false),
    MF_VARIANT(32, 1, false, false),
    MF_VARIANT(32, 2, false, false),
    MF_VARIANT(32, 4, false, false),
    // SM-SM: B panel staged in shared memory; the chunk width KC is the tile's Tk
    MF_VARIANT(8, 1, true, true),
    MF_VARIANT(16, 1, true, true),
    MF_VARIANT(8, 2, true, true),
    MF_VARIANT(32, 1, true, true),
    MF_VARIANT(8, 4, true, true),
    MF_VARIANT(16, 2, true, true),
    MF_VARIANT(32, 1, false, true),
};
static const int n_variants = (int)(sizeof variants / sizeof variants[0]);

extern "C" int mf_sddmm_variant_count(void)
{
    return n_variants;
}

extern "C" mf_sddmm_config mf_sddmm_variant_config(int i)
{
    return variants[i].cfg;
}

// ---- running one variant -------------------------------------------------------------

// out = t * val + beta * out (val NULL: 1; beta = 0: out not read), in index order. The
// roundings are the tensor-core kernel's own epilogue's (mf_sddmm_tc_store), so a call
// finished here gives the bits it would have given finished there.
__global__ void finish_kernel(float *out, const float *t, const float *val, float beta, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = t[i];
        if (val)
            v = __fmul_rn(v, val[i]);
        out[i] = beta == 0.f ? v : __fmaf_rn(beta, out[i], v);
    }
}

extern "C" mf_status mf_cuda_sddmm_finish(mf_ctx *ctx, float *out, const float *t, const float *val,
                                          float beta, int64_t n)
{
    finish_kernel<<<mf_cuda_grid(ctx->link.cuda, n, 256, 16), 256, 0, ctx->link.cuda->stream>>>(
        out, t, val, beta, n);
    return MF_CUDA_LAUNCHED(ctx, "the SDDMM finish");
}

// Let an SM-SM variant use all the shared memory a block may opt into. Done when a variant
// is picked (tuning, the test hook), not per launch: the limit only ever grows to the
// device's maximum, so a cached choice stays launchable.
static mf_status allow_shared_memory(mf_ctx *ctx, int v)
{
    if (!variants[v].cfg.smem)
        return MF_OK;
    MF_CUDA_TRY(ctx, variants[v].allow_smem(ctx->link.cuda->prop.sharedMemPerBlockOptin));
    return MF_OK;
}

// A reduced-precision call on the CUDA cores: bf16 and fp16 read B's 16-bit copy (B16: rows of
// ld values) and A's floats, rounded as they load, or without 16-byte float rows A's copy
// too (A16); TF32 B's scaled fp16 copy (B16 with pow_b, b_top, and pow_a and wide for the
// rows of A the kernel finds unfit) and A's floats rounded as they load, or from
// MF_SDDMM_TF32_COPY_A_MIN_PER_ROW entries a row of A (or with MFACT_SDDMM_COPIES=both) the
// scaled copies of both (A16 too: mf_sddmm_tf32_copy16); or,
// without copies (B16 NULL), all three round the floats as they load. `kernel` is the instance
// that reads them (the kernel's HALF: an mf_precision, MF_SDDMM_TF32_16, MF_SDDMM_BF16_REG or
// MF_SDDMM_FP16_REG).
struct mf_sddmm_half_in {
    const uint16_t *A16, *B16;
    int64_t ld;
    int8_t *pow_a; // (TF32 without A16: marked by the kernel)
    const int8_t *pow_b;
    int *wide;
    const uint32_t *b_top;
    int kernel;
};

// Whether a call reads the 16-bit copies (8 values a 16-byte unit, sddmm_tuning.h): B's at
// least (bf16 and fp16 with 16-byte float rows read A's floats, rounding them as they load).
static int unit16_of(const mf_sddmm_half_in *half)
{
    return half && half->B16;
}

// A variant's unit, for the log lines.
static const char *unit_name(mf_sddmm_config c, int unit16)
{
    return !c.vec ? "scalar" : unit16 ? "vec8" : "vec4";
}

static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

static int vector_ok(const mf_sddmm_call *call)
{
    return call->k % 4 == 0 && call->lda % 4 == 0 && call->ldb % 4 == 0 && aligned16(call->A) &&
           aligned16(call->B);
}

// MFACT_SDDMM_COPIES ("on" or "off") forces the reduced precisions' copies of B on or off, and
// "both" (*both) copies of A as well as B: measuring knobs, read where the CUDA cores take the
// call; another value fails it.
static mf_status copies_knob(mf_ctx *ctx, bool *on, bool *off, bool *both = NULL)
{
    const char *knob = getenv("MFACT_SDDMM_COPIES");
    const bool b = knob && !strcmp(knob, "both");
    *on = b || (knob && !strcmp(knob, "on")), *off = knob && !strcmp(knob, "off");
    if (both)
        *both = b;
    if (knob && *knob && !*on && !*off)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "mf_sddmm: MFACT_SDDMM_COPIES='%s' is not on, off or both", knob);
    return MF_OK;
}

// bf16, fp16 and TF32 on the CUDA cores: where B's copy pays (MF_SDDMM_COPY_B_MIN_PER_COL, and
// for TF32 min_work: MF_SDDMM_TF32_COPY_MIN_WORK; MFACT_SDDMM_COPIES forces it on or off, as
// above), the kernel reads it and rounds A's floats as they load; else it rounds both factors'
// floats. Factors without 16-byte float rows have no such instance (bf16 and fp16: TF32 takes
// them to the tensor cores): they read copies of both (*both).
static mf_status copy_b_pays(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call,
                             int64_t min_work, bool *pay, bool *both)
{
    bool on = false, off = false, forced = false;
    MF_TRY(copies_knob(ctx, &on, &off, &forced));
    *both = forced || !vector_ok(call);
    *pay = *both || on ||
           (!off && S->nnz >= MF_SDDMM_COPY_B_MIN_PER_COL * (int64_t)S->cols &&
            S->nnz * call->k >= min_work);
    return MF_OK;
}

// The instance that rounds a reduced precision's floats as they load (p: TF32, BF16 or FP16,
// which the callers have checked).
static int rounding_kernel(mf_precision p)
{
    if (p == MF_PRECISION_BF16)
        return MF_SDDMM_BF16_REG;
    if (p == MF_PRECISION_FP16)
        return MF_SDDMM_FP16_REG;
    return MF_PRECISION_TF32;
}

// TF32's inputs for the float kernel (16-byte rows: vector_ok), stream-ordered, in *copy:
// B's rows rounded to TF32 and held exactly as fp16, scaled by one power of two, with A's
// floats rounded as the kernel loads them (sddmm_tf32.cu; the entries of rows that do not fit
// are computed apart, from the floats: mf_sddmm_tf32_unfit), where B's copy pays
// (copy_b_pays; `copies`, the test hook, asks for it whatever S's size); A's rows copied too,
// each scaled by its own power, from MF_SDDMM_TF32_COPY_A_MIN_PER_ROW entries a row of A on
// or with MFACT_SDDMM_COPIES=both; else no copy, and the kernel rounds the floats as they
// load.
static mf_status tf32_inputs(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call,
                             bool copies, mf_dbuf *copy, mf_sddmm_half_in *in)
{
    bool pay, both;
    MF_TRY(copy_b_pays(ctx, S, call, MF_SDDMM_TF32_COPY_MIN_WORK, &pay, &both));
    if (!pay && !copies) {
        *in = mf_sddmm_half_in{};
        in->kernel = MF_PRECISION_TF32;
        return MF_OK;
    }
    mf_sddmm_tf32_copies c;
    both = both || S->nnz >= MF_SDDMM_TF32_COPY_A_MIN_PER_ROW * (int64_t)S->rows;
    MF_TRY(mf_sddmm_tf32_copy16(ctx, S, call, both, copy, &c));
    *in = mf_sddmm_half_in{};
    in->A16 = c.A16;
    in->B16 = c.B16;
    in->ld = c.ld;
    in->pow_a = c.pow_a;
    in->pow_b = c.pow_b;
    in->wide = c.wide;
    in->b_top = c.b_top;
    in->kernel = MF_SDDMM_TF32_16;
    return MF_OK;
}

static mf_status run_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                             const mf_sddmm_dev_layout *L, float *out, float beta,
                             const mf_sddmm_half_in *half = NULL)
{
    const int64_t *row_ptr;
    const int32_t *col;
    const float *val;
    MF_TRY(mf_sparse_device_csr(S, &row_ptr, &col, &val));
    const mf_sddmm_variant &var = variants[v];
    mf_sddmm_params P;
    P.col = col;
    P.val = call->pattern ? NULL : val;
    P.out = out;
    P.A = call->A;
    P.lda = call->lda;
    P.B = call->B;
    P.ldb = call->ldb;
    P.k = call->k;
    P.alpha = call->alpha;
    P.beta = beta;
    P.tj = L->tj;
    P.cols = S->cols;
    P.items = (const mf_sddmm_item *)L->items.ptr;
    P.blocks = (const mf_sddmm_block *)L->blocks.ptr;
    P.A16 = P.B16 = NULL;
    P.ld16 = 0;
    P.pow_a = NULL;
    P.b_top = NULL;
    P.wide = NULL;
    if (half && (!var.cfg.vec || var.cfg.smem))
        return mf_fail(ctx, MF_ERR_INTERNAL,
                       "mf_sddmm: variant %d has no reduced-precision instance", v);
    if (unit16_of(half)) {
        P.A16 = half->A16;
        P.B16 = half->B16;
        P.ld16 = half->ld;
        P.pow_a = half->pow_a;
        P.b_top = half->b_top;
        P.wide = half->wide;
    }
    size_t smem = var.cfg.smem ? mf_sddmm_smem_bytes(var.cfg, L->tj) : 0;
    if (L->n_blocks == 0)
        return MF_OK;
    if (L->n_blocks > 0x7fffffff)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "mf_sddmm: %lld thread blocks exceed the grid limit",
                       (long long)L->n_blocks);
    // One launch per chunk, each by the instance that does no more than its chunk needs.
    const int kc_width = mf_sddmm_chunk_of(var.cfg, unit16_of(half));
    // TF32 on B's copy alone: a launch checks A's values of its own chunk only, so a row found
    // unfit in a later chunk has had earlier chunks write out, which the unfit pass then
    // overwrites whole. That needs beta = 0 here: run() takes calls in chunks with beta != 0
    // through a scratch array with beta = 0.
    if (half && half->kernel == MF_SDDMM_TF32_16 && !half->A16 && kc_width < call->k && beta != 0.f)
        return mf_fail(ctx, MF_ERR_INTERNAL,
                       "mf_sddmm: TF32 in chunks from B's copy alone with beta = %g", (double)beta);
    for (P.kc = 0; P.kc < call->k; P.kc += kc_width) {
        int mode = P.kc + kc_width > call->k            ? MF_SDDMM_TAIL
                   : P.kc == 0 && beta == 0.f && !P.val ? MF_SDDMM_PLAIN
                                                        : MF_SDDMM_FULL;
        var.launch(P, half ? half->kernel : 0, mode, (unsigned)L->n_blocks, smem,
                   ctx->link.cuda->stream);
        MF_TRY(MF_CUDA_LAUNCHED(ctx, "the SDDMM kernel"));
    }
    if (half && half->kernel == MF_SDDMM_TF32_16) // the entries of rows fp16 could not hold
        return mf_sddmm_tf32_unfit(ctx, (const mf_sddmm_item *)L->items.ptr,
                                   (int64_t)(L->items.bytes / sizeof(mf_sddmm_item)), row_ptr, col,
                                   P.val, S, call, out, beta, half->pow_a, half->pow_b, half->wide);
    return MF_OK;
}

// Time one run on the context's stream, in milliseconds: variant v on layout L (on half's
// copies where half is given).
static mf_status time_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                              const mf_sddmm_dev_layout *L, float *out, float *ms,
                              const mf_sddmm_half_in *half = NULL)
{
    cudaStream_t stream = ctx->link.cuda->stream;
    cudaEvent_t e0, e1;
    MF_CUDA_TRY(ctx, cudaEventCreate(&e0));
    cudaError_t err = cudaEventCreate(&e1);
    if (err != cudaSuccess) {
        cudaEventDestroy(e0);
        return mf_cuda_fail(ctx, err, "cudaEventCreate", __FILE__, __LINE__);
    }
    mf_status st = MF_OK;
    err = cudaEventRecord(e0, stream);
    if (err == cudaSuccess) {
        st = run_variant(ctx, S, call, v, L, out, 0.f, half);
        if (st == MF_OK)
            err = cudaEventRecord(e1, stream);
    }
    if (st == MF_OK && err == cudaSuccess)
        err = cudaEventSynchronize(e1);
    if (st == MF_OK && err == cudaSuccess)
        err = cudaEventElapsedTime(ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (st == MF_OK && err != cudaSuccess)
        st = mf_cuda_fail(ctx, err, "timing an SDDMM candidate", __FILE__, __LINE__);
    return st;
}

static mf_sddmm_shape shape_of(mf_ctx *ctx, const mf_sparse *S, const mf_sddmm_call *call)
{
    mf_sddmm_shape sh;
    sh.rows = S->rows;
    sh.cols = S->cols;
    sh.nnz = S->nnz;
    sh.k = call->k;
    sh.vec = vector_ok(call);
    sh.l2_bytes = (int64_t)ctx->link.cuda->prop.l2CacheSize;
    sh.smem_bytes = (int64_t)ctx->link.cuda->prop.sharedMemPerBlockOptin;
    sh.sms = ctx->link.cuda->prop.multiProcessorCount;
    sh.unit16 = 0;
    return sh;
}

// Pick the variant and layout for this call shape: the cached choice, or the fastest of
// the candidates, each timed once (the first twice: its first run warms the caches and, on
// the matrix's first call, uploads it), then the retries: the fastest SM-L2 candidates on
// the grouped layout, the fastest SM-SM one with smaller blocks; last, the two fastest of all
// timed again where close (MF_SDDMM_RECHECK_MARGIN).
//
// With half (bf16 or fp16 copies, TF32's scaled fp16 copies, or the floats rounded as they load)
// the candidates are the SM-L2 vector variants run on the reduced inputs. The tensor-core kernel is
// not timed against them: it won in one of the eleven cases measured (Netflix shape, k = 512: 6.8
// ms against 8.4), and only where the output is write-only (beta = 0; with beta = 1, as RMSE and
// predictions call it, it took 5.6 ms where the CUDA cores took 2.7), while its plan costs about
// 0.9 s to build on a Netflix-sized matrix: ~600 calls before it pays (bench/README.md).
// *tensor_cores is set only when no variant reads the copies.
static mf_status choose(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call,
                        const mf_sddmm_half_in *half, int *variant, int *layout,
                        bool *tensor_cores = NULL)
{
    mf_sddmm_plan *plan = NULL;
    MF_TRY(mf_sddmm_plan_get(ctx, S, &plan));
    const int vec = half ? 100 + half->kernel : vector_ok(call); // the plan's key
    for (int c = 0; c < plan->n_choices; c++)
        if (plan->choices[c].k == call->k && plan->choices[c].vec == vec) {
            *variant = plan->choices[c].variant;
            *layout = plan->choices[c].layout;
            if (tensor_cores)
                *tensor_cores = false;
            return MF_OK;
        }
    const double t0 = mf_seconds(); // the choice's cost, for the INFO line below
    int timed = 0;                  // candidates timed
    mf_sddmm_shape sh = shape_of(ctx, S, call);
    if (half)
        sh.vec = 1; // the copies' rows are aligned, whatever the float factors' are (the
                    // instances that round the floats as they load: the callers checked them)
    sh.unit16 = unit16_of(half);
    mf_sddmm_candidate cand[MF_SDDMM_MAX_CANDIDATES];
    int n = mf_sddmm_candidates(&sh, cand);
    if (half) { // no SM-SM instance reads 16-bit copies
        int kept = 0;
        for (int c = 0; c < n; c++)
            if (variants[cand[c].variant].cfg.vec && !variants[cand[c].variant].cfg.smem)
                cand[kept++] = cand[c];
        n = kept;
    }
    if (n == 0 && half && tensor_cores) { // no variant for the copies: the tensor cores
        *variant = *layout = -1;
        *tensor_cores = true;
        return MF_OK;
    }
    if (n == 0)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: no kernel variant for k = %d", call->k);

    if (mf_sddmm_plan_free_slots(plan) < n + MF_SDDMM_GROUPED_TRIES + 1) // the retries below
        mf_sddmm_plan_reset(ctx, plan);
    int best = -1, best_layout = -1;
    float best_ms = INFINITY;
    if (n == 1 || S->nnz < MF_SDDMM_TUNE_MIN_NNZ || S->nnz > MF_SDDMM_TUNE_MAX_NNZ) {
        // Too small for timing to mean anything, or too large for it to pay: the first
        // candidate is the rule's pick.
        MF_TRY(mf_sddmm_plan_layout(ctx, S, cand[0].tj, cand[0].block_nnz, cand[0].item_nnz, 0,
                                    &best_layout));
        MF_TRY(allow_shared_memory(ctx, cand[0].variant));
        best = cand[0].variant;
        best_ms = 0.f;
    } else {
        // MFACT_SDDMM_GROUPED=off leaves the grouped layout's try out (below; bench_sddmm
        // measures with and without); read before any candidate writes into out.
        const char *knob = getenv("MFACT_SDDMM_GROUPED");
        const bool grouped = !knob || !*knob;
        if (!grouped && strcmp(knob, "off"))
            return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                           "mf_sddmm: MFACT_SDDMM_GROUPED='%s' is not off", knob);
        // Candidates write into a scratch array unless out is write-only (beta == 0).
        mf_dbuf scratch = {0, 0};
        float *target = call->out;
        if (call->beta != 0.f) {
            MF_TRY(mf_dmem_alloc(ctx, &scratch, (size_t)S->nnz * sizeof(float),
                                 "SDDMM tuning scratch"));
            target = (float *)scratch.ptr;
        }
        mf_status st = MF_OK;
        // Every timing, for the recheck below: its milliseconds, its variant and layout.
        float tried_ms[MF_SDDMM_MAX_TRIES];
        struct {
            int v, li;
        } tried[MF_SDDMM_MAX_TRIES];
        // Time variant v on layout li into *got, and keep it when it is the fastest.
        auto try_candidate = [&](int v, int li, float *got) -> mf_status {
            MF_TRY(allow_shared_memory(ctx, v));
            // The call's first candidate runs twice, the first run warming what every
            // candidate reads (the matrix's first call also uploads it); later ones once: on
            // the H200 a later candidate's two runs differed by under 2% (bench/README.md).
            float first = 0.f, second = INFINITY;
            MF_TRY(time_variant(ctx, S, call, v, &plan->layouts[li], target, &first, half));
            if (isinf(best_ms))
                MF_TRY(time_variant(ctx, S, call, v, &plan->layouts[li], target, &second, half));
            const float ms = second < first ? second : first;
            mf_sddmm_config cf = variants[v].cfg;
            char runs[48]; // both runs, for the DEBUG log: how much the first pays for warming
            snprintf(runs, sizeof runs, isinf(second) ? "%.3f" : "%.3f, %.3f", (double)first,
                     (double)second);
            mf_log(ctx, MF_LOG_DEBUG,
                   "mf_sddmm: k = %d candidate %s V=%d KR=%d %s tj=%d%s: %.3f ms (runs %s)",
                   call->k, cf.smem ? "SM-SM" : "SM-L2", cf.v, cf.kr, unit_name(cf, sh.unit16),
                   plan->layouts[li].tj, plan->layouts[li].grouped ? " grouped" : "", (double)ms,
                   runs);
            *got = ms;
            if (timed < MF_SDDMM_MAX_TRIES) {
                tried_ms[timed] = ms;
                tried[timed].v = v, tried[timed].li = li;
            }
            timed++;
            if (ms < best_ms) {
                best_ms = ms;
                best = v;
                best_layout = li;
            }
            return MF_OK;
        };
        // A candidate whose layout the memory manager refuses (out of device memory, the
        // context's limit, a misaligned block from the caller's allocator) is left out: with
        // beta = 0 the candidates write into out, and failing after one ran would leave the
        // caller's out changed. The call succeeds with the fastest that fit (the context's
        // last error tells of the one left out; the choice is kept, as any other), or fails
        // with the refusal when none fit, before anything was written.
        mf_status refused = MF_OK;
        float plain_ms[MF_SDDMM_MAX_CANDIDATES]; // INFINITY: refused (or retried, below)
        int plain_layout[MF_SDDMM_MAX_CANDIDATES];
        for (int c = 0; c < n && st == MF_OK; c++) {
            plain_ms[c] = INFINITY;
            st = mf_sddmm_plan_layout(ctx, S, cand[c].tj, cand[c].block_nnz, cand[c].item_nnz, 0,
                                      &plain_layout[c]);
            if (st == MF_OK)
                st = try_candidate(cand[c].variant, plain_layout[c], &plain_ms[c]);
            else if (st == MF_ERR_OUT_OF_MEMORY || st == MF_ERR_INVALID_ARGUMENT)
                refused = st, st = MF_OK;
        }
        if (st == MF_OK && best < 0)
            st = refused;
        // The fastest candidate not yet retried among the SM-SM ones (smem) or the SM-L2 ones,
        // within limit ms, or -1.
        auto fastest = [&](bool smem, float limit) -> int {
            int c = -1;
            for (int d = 0; d < n; d++)
                if (variants[cand[d].variant].cfg.smem == smem && plain_ms[d] <= limit &&
                    (c < 0 || plain_ms[d] < plain_ms[c]))
                    c = d;
            return c;
        };
        // A retry: variant v on another layout, timed where the layout fits (a refused one
        // keeps what was timed).
        auto retry = [&](int v, int32_t tj, int64_t block_nnz, int32_t item_nnz,
                         int grouped_rows) -> mf_status {
            int li;
            float ms;
            mf_status got =
                mf_sddmm_plan_layout(ctx, S, tj, block_nnz, item_nnz, grouped_rows, &li);
            if (got == MF_OK)
                return try_candidate(v, li, &ms);
            return got == MF_ERR_OUT_OF_MEMORY || got == MF_ERR_INVALID_ARGUMENT ? MF_OK : got;
        };
        // The fastest SM-L2 candidates once more on the grouped layout (sddmm_layout.h),
        // from MF_SDDMM_GROUPED_MIN_K on: it helps where rows share columns and k is large,
        // by how much depends on the variant (MF_SDDMM_GROUPED_TRIES).
        const float plain_best = best_ms;
        const int tries = !grouped || call->k < MF_SDDMM_GROUPED_MIN_K ? 0
                          : call->k < MF_SDDMM_GROUPED_WIDE_K ? MF_SDDMM_GROUPED_TRIES_NARROW
                                                              : MF_SDDMM_GROUPED_TRIES;
        for (int t = 0; t < tries && st == MF_OK; t++) {
            const int c = fastest(false, MF_SDDMM_GROUPED_MARGIN * plain_best);
            if (c < 0)
                break;
            plain_ms[c] = INFINITY;
            const mf_sddmm_dev_layout won = plan->layouts[plain_layout[c]];
            st = retry(cand[c].variant, won.tj, won.block_nnz, won.item_nnz, 1);
        }
        // The fastest SM-SM candidate once more with smaller blocks, where it is a contender
        // (MF_SDDMM_SM_FINE_BLOCKS_PER_SM).
        const int fine = st == MF_OK ? fastest(true, MF_SDDMM_FINE_MARGIN * best_ms) : -1;
        if (fine >= 0) {
            const mf_sddmm_candidate fc = mf_sddmm_fine_candidate(&sh, cand[fine]);
            if (fc.block_nnz < cand[fine].block_nnz)
                st = retry(fc.variant, fc.tj, fc.block_nnz, fc.item_nnz, 0);
        }
        // The two fastest, when close (MF_SDDMM_RECHECK_MARGIN), timed again in turn, each
        // keeping its fastest run.
        const int n_tried = timed < MF_SDDMM_MAX_TRIES ? timed : MF_SDDMM_MAX_TRIES;
        int first, second;
        if (st == MF_OK && mf_sddmm_recheck_pair(tried_ms, n_tried, &first, &second)) {
            const int pair[2] = {first, second};
            for (int r = 0; r < MF_SDDMM_RECHECK_RUNS && st == MF_OK; r++)
                for (int c = 0; c < 2 && st == MF_OK; c++) {
                    const int i = pair[c];
                    float ms;
                    st = time_variant(ctx, S, call, tried[i].v, &plan->layouts[tried[i].li], target,
                                      &ms, half);
                    if (st == MF_OK && ms < tried_ms[i])
                        tried_ms[i] = ms;
                }
            const int w = tried_ms[second] < tried_ms[first] ? second : first;
            mf_log(ctx, MF_LOG_DEBUG,
                   "mf_sddmm: k = %d recheck: %.3f ms against %.3f ms, variant %d layout %d kept",
                   call->k, (double)tried_ms[first], (double)tried_ms[second], tried[w].v,
                   tried[w].li);
            best = tried[w].v, best_layout = tried[w].li, best_ms = tried_ms[w];
        }
        mf_dmem_free(ctx, &scratch);
        MF_TRY(st);
    }
    mf_sddmm_choice ch = {call->k, vec, best, best_layout, best_ms};
    if (tensor_cores)
        *tensor_cores = false;
    plan->choices[plan->next_choice] = ch;
    plan->next_choice = (plan->next_choice + 1) % MF_SDDMM_MAX_CHOICES;
    if (plan->n_choices < MF_SDDMM_MAX_CHOICES)
        plan->n_choices++;
    mf_sddmm_plan_drop_unused(ctx, plan);
    mf_sddmm_config cf = variants[best].cfg;
    char how[64]; // what the choice cost: layouts built and uploaded, candidates timed
    if (timed)
        snprintf(how, sizeof how, "; %d candidates timed in %.0f ms", timed,
                 1e3 * (mf_seconds() - t0));
    else
        snprintf(how, sizeof how, "; the rule's pick (untimed), %.1f ms",
                 1e3 * (mf_seconds() - t0));
    mf_log(ctx, MF_LOG_INFO,
           "mf_sddmm: plan for k = %d: %s, V=%d KR=%d %s, Tk=%d, Tj=%d (%d panels)%s%s", call->k,
           cf.smem ? "SM-SM" : "SM-L2", cf.v, cf.kr, unit_name(cf, sh.unit16),
           mf_sddmm_chunk_of(cf, sh.unit16), plan->layouts[best_layout].tj,
           plan->layouts[best_layout].panels,
           plan->layouts[best_layout].grouped ? ", rows grouped" : "", how);
    *variant = best;
    *layout = best_layout;
    return MF_OK;
}

// Run variant v on layout L. When k takes several chunks and beta != 0, the chunks would
// add small partial sums to beta * out, losing them to rounding when |beta * out| is large;
// instead they accumulate in a scratch array and beta * out is added once at the end.
static mf_status run(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                     const mf_sddmm_dev_layout *L, const mf_sddmm_half_in *half = NULL)
{
    const int width = mf_sddmm_chunk_of(variants[v].cfg, unit16_of(half));
    int chunks = (call->k + width - 1) / width;
    if (chunks == 1 || call->beta == 0.f)
        return run_variant(ctx, S, call, v, L, call->out, call->beta, half);
    mf_dbuf t = {0, 0};
    MF_TRY(mf_dmem_alloc(ctx, &t, (size_t)S->nnz * sizeof(float), "SDDMM partial sums"));
    mf_status st = run_variant(ctx, S, call, v, L, (float *)t.ptr, 0.f, half);
    if (st == MF_OK) // the partial sums hold S's values already
        st = mf_cuda_sddmm_finish(ctx, call->out, (const float *)t.ptr, NULL, call->beta, S->nnz);
    mf_dmem_free(ctx, &t); /* stream-ordered: freed after the kernels that use it */
    return st;
}

// The float kernel's tuned variant for this call (choose()), run; in: as choose() takes it.
// *tensor_cores (when given) comes back set when no variant reads `in`, and nothing ran.
static mf_status run_tuned(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call,
                           const mf_sddmm_half_in *in, bool *tensor_cores = NULL)
{
    int v = -1, li = -1;
    MF_TRY(choose(ctx, S, call, in, &v, &li, tensor_cores));
    if (tensor_cores && *tensor_cores)
        return MF_OK;
    mf_sddmm_plan *plan = NULL;
    MF_TRY(mf_sddmm_plan_get(ctx, S, &plan));
    return run(ctx, S, call, v, &plan->layouts[li], in);
}

// MFACT_SDDMM_HALF: tensor-cores or cuda-cores forces the route of every reduced precision;
// unset or empty leaves the library's pick; another value fails the call.
static mf_status route_knob(mf_ctx *ctx, bool *force_tc, bool *force_cores)
{
    const char *knob = getenv("MFACT_SDDMM_HALF");
    *force_tc = knob && !strcmp(knob, "tensor-cores");
    *force_cores = knob && !strcmp(knob, "cuda-cores");
    if (knob && *knob && !*force_tc && !*force_cores)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "mf_sddmm: MFACT_SDDMM_HALF='%s' is not tensor-cores or cuda-cores", knob);
    return MF_OK;
}

// bf16 and fp16: B's 16-bit copy (or both factors' copies, or none: copy_b_pays), then the
// float kernel's SM-L2 vector variant that choose() timed fastest for this matrix and k,
// widening the copies' values to floats as they load and rounding the floats it reads (exact
// products of the rounded factors, float sums: the CUDA cores); the
// tensor-core kernel (sddmm_tc_kernels.cuh) below MF_SDDMM_TUNE_MIN_NNZ entries (without
// the copies up to MF_SDDMM_TC_COPY_K) and where no variant applies. MFACT_SDDMM_HALF
// (tensor-cores or cuda-cores) forces one: a measuring knob, bench_sddmm compares the two.
static mf_status sddmm_half(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call)
{
    bool force_tc, force_cores;
    MF_TRY(route_knob(ctx, &force_tc, &force_cores));
    // Below the size worth timing the tensor cores: their plan takes milliseconds there,
    // and they beat the variants' rule pick on the three small graphs measured (83K-196K
    // entries, bench/README.md). Up to MF_SDDMM_TC_COPY_K they round the floats in registers
    // there instead of reading 16-bit copies.
    const bool small = S->nnz < MF_SDDMM_TUNE_MIN_NNZ;
    bool tc = force_tc || (!force_cores && small);
    if (tc && small && call->k <= MF_SDDMM_TC_COPY_K)
        return mf_cuda_sddmm_tc(ctx, S, call, NULL, NULL, 0);
    mf_sddmm_half_in half = {};
    half.kernel = call->precision;
    mf_dbuf copies = {0, 0};
    bool pay = true, both = true; // the tensor cores read copies of both factors
    if (!tc)
        MF_TRY(copy_b_pays(ctx, S, call, 0, &pay, &both));
    if (!pay) // the floats, rounded as they load
        half.kernel = rounding_kernel((mf_precision)call->precision);
    else
        MF_TRY(mf_tc_copy16(ctx, S, call, &copies, both ? &half.A16 : NULL, &half.B16, &half.ld));
    mf_status st = MF_OK;
    if (!tc) // the CUDA cores, unless no variant reads the copies
        st = run_tuned(ctx, S, call, &half, &tc);
    if (st == MF_OK && tc) // (B's copy alone: the tensor cores round in registers)
        st = mf_cuda_sddmm_tc(ctx, S, call, half.A16, half.A16 ? half.B16 : NULL, half.ld);
    mf_dmem_free(ctx, &copies); // stream-ordered: after the kernels that read them
    return st;
}

// TF32 and 3xTF32. Both are gathers of factor rows before they are arithmetic, and on the
// tensor cores, whose tiles are 16-18% stored entries on the shapes measured, they lost to
// the float kernel in 22 of the 24 cases of one command (bench/README.md, 2026-11-29: TF32
// won at k = 32 on two small graphs, by 3% and 14%; 3xTF32 never). So 3xTF32, a request for
// float's accuracy, gets float's own product (its bound holds with room; the CPU backend
// sums the split's three products), and TF32 the float kernel's variants on TF32-rounded
// factors (exact products of the rounded factors, float sums: TF32's bound and CPU parity,
// as on the tensor cores), tuned per matrix and k: B's rows as fp16 scaled by a power of two,
// which holds TF32 values exactly (half the bytes gathered), with A's floats rounded as they
// load or A's rows scaled likewise, or both factors' floats rounded as they load (tf32_inputs
// says which); factors
// without 16-byte rows (no such variant) stay on the tensor cores, whatever MFACT_SDDMM_HALF says,
// and so do small matrices at small k unless MFACT_SDDMM_HALF=cuda-cores.
// MFACT_SDDMM_HALF=tensor-cores forces the tensor cores.
static mf_status sddmm_tf32(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call)
{
    bool force_tc, force_cores;
    MF_TRY(route_knob(ctx, &force_tc, &force_cores));
    // TF32 below MF_SDDMM_TUNE_MIN_NNZ and up to MF_SDDMM_TC_COPY_K: the tensor cores,
    // rounding in registers (measured against the CUDA cores' route of the time, B's rounded
    // copy: bcsstk13 and pushpull at k = 32, 12-14 us against 15-17; at k = 512 the copy
    // paid on bcsstk13, 31 us against 47; H200, 2026-11-29; the in-register route that
    // replaced the copy has not been timed there).
    const bool small = S->nnz < MF_SDDMM_TUNE_MIN_NNZ && call->k <= MF_SDDMM_TC_COPY_K;
    if (force_tc ||
        (call->precision == MF_PRECISION_TF32 && (!vector_ok(call) || (small && !force_cores))))
        return mf_cuda_sddmm_tc(ctx, S, call, NULL, NULL, 0);
    if (call->precision == MF_PRECISION_3XTF32)
        return run_tuned(ctx, S, call, NULL);
    mf_sddmm_half_in tf32;
    mf_dbuf copy = {0, 0};
    MF_TRY(tf32_inputs(ctx, S, call, false, &copy, &tf32));
    bool tc = false;
    mf_status st = run_tuned(ctx, S, call, &tf32, &tc);
    mf_dmem_free(ctx, &copy); // stream-ordered: after the kernels that read it
    MF_TRY(st);
    return tc ? mf_cuda_sddmm_tc(ctx, S, call, NULL, NULL, 0) : MF_OK; // tc: no variant for k
}

// Stream-ordered: returns once the work is queued on the context's stream (callers with
// host arrays synchronize when they copy the result back).
extern "C" mf_status mf_cuda_sddmm(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call)
{
    mf_device_guard guard(ctx->link.cuda->device);
    if (call->precision == MF_PRECISION_BF16 || call->precision == MF_PRECISION_FP16)
        return sddmm_half(ctx, S, call);
    if (call->precision == MF_PRECISION_TF32 || call->precision == MF_PRECISION_3XTF32)
        return sddmm_tf32(ctx, S, call);
    if (call->precision != MF_PRECISION_FP32)
        return mf_fail(ctx, MF_ERR_INTERNAL, "mf_sddmm: no CUDA route for precision %d",
                       call->precision);
    return run_tuned(ctx, S, call, NULL);
}

// Run variant v on the layout of panel width tj and block_nnz (grouped or not), bypassing the
// tuning rules (stream-ordered). Serves the test hook (sddmm_hooks.cu) that checks every compiled
// variant against the reference, whatever the rules would pick.
mf_status mf_sddmm_gpu::run_variant(mf_ctx *ctx, mf_sparse *S, const mf_sddmm_call *call, int v,
                                    int32_t tj, int64_t block_nnz, int grouped, bool registers)
{
    if (v < 0 || v >= n_variants)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "no SDDMM variant %d", v);
    const mf_precision prec = (mf_precision)call->precision;
    const bool copies16 = prec == MF_PRECISION_BF16 || prec == MF_PRECISION_FP16;
    const bool rounded = copies16 || prec == MF_PRECISION_TF32;
    if (!rounded && prec != MF_PRECISION_FP32)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "no variant instance for precision %d", prec);
    if (rounded && (!variants[v].cfg.vec || variants[v].cfg.smem))
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "variant %d has no reduced-precision instance",
                       v);
    if (variants[v].cfg.vec && (!copies16 || registers) && !vector_ok(call))
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "variant %d needs 16-byte vectors", v);
    if (variants[v].cfg.smem && mf_sddmm_smem_bytes(variants[v].cfg, tj) >
                                    (size_t)ctx->link.cuda->prop.sharedMemPerBlockOptin)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "tj = %d does not fit in shared memory", tj);
    mf_sddmm_plan *plan = NULL;
    MF_TRY(mf_sddmm_plan_get(ctx, S, &plan));
    if (mf_sddmm_plan_free_slots(plan) == 0)
        mf_sddmm_plan_reset(ctx, plan);
    mf_sddmm_config cf = variants[v].cfg;
    int li;
    MF_TRY(mf_sddmm_plan_layout(ctx, S, tj, block_nnz,
                                mf_sddmm_item_nnz(block_nnz, cf.v, mf_sddmm_threads(cf)), grouped,
                                &li));
    MF_TRY(allow_shared_memory(ctx, v));
    // A reduced precision's instance reads what the library's own calls give it, whatever S's
    // size: bf16 and fp16 B's 16-bit copy (both copies without 16-byte float rows), TF32 B's
    // scaled fp16 copy (tf32_inputs; A's too from MF_SDDMM_TF32_COPY_A_MIN_PER_ROW entries a
    // row, or with MFACT_SDDMM_COPIES=both); with `registers`, the floats, rounded as they load
    // (the calls' route below MF_SDDMM_COPY_B_MIN_PER_COL).
    mf_sddmm_half_in in = {};
    in.kernel = registers ? rounding_kernel(prec) : call->precision;
    mf_dbuf copies = {0, 0};
    if (copies16 && !registers) // as the calls: B's copy alone where A's rows are 16-byte vectors
        MF_TRY(
            mf_tc_copy16(ctx, S, call, &copies, vector_ok(call) ? NULL : &in.A16, &in.B16, &in.ld));
    else if (rounded && !registers)
        MF_TRY(tf32_inputs(ctx, S, call, true, &copies, &in));
    mf_status st = run(ctx, S, call, v, &plan->layouts[li], rounded ? &in : NULL);
    mf_dmem_free(ctx, &copies); // stream-ordered: after the kernels that read them
    return st;
}
