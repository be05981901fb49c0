// The CUDA engine of implicit-feedback ALS as its files share it: ials.cu (the engine's
// arithmetic: the Gram matrices, the solves, the loss, the factors out), ials_setup.cu (its
// device memory and buffers) and ials_stream.cu (the interactions streamed from host memory
// in batches, where both orientations do not fit on the device).
// CUDA C++, private to src/ials; ials_internal.h is the engine's C face. This header names
// no kernel, so that the kernels (ials_kernels.cuh) are compiled in ials.cu alone.
#ifndef MF_IALS_ENGINE_CUH
#define MF_IALS_ENGINE_CUH
#include <stdint.h>

#include "cuda/cuda_internal.h"
#include "ials/ials_internal.h"

namespace mf_ials_cuda
{

struct streamer; // ials_stream.cu

struct side {
    int32_t rows;
    int32_t first, count; /* the rows a solve takes: this rank's share (all by default) */
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    int64_t nseg;             /* CG's segments (ials_kernels.cuh, cg_args) */
    mf_dbuf lo, hi, row, seg; /* seg_lo, seg_hi, seg_row, row_seg */
};

struct cuda_engine {
    mf_ials_engine base;
    mf_ctx *ctx;
    const char *fn;
    int k, kp, vpl, cg_steps;
    int is_half; /* U and V stored as half (mf_ials_opts.fp16) */
    float lambda, alpha, epsilon;
    int log_confidence;
    side by[2];   /* users (CSR), items (CSC) */
    mf_dbuf F[2]; /* U, V: rows of kp floats */
    /* The Gram matrix (kp x kp) and its chunks' partials: chunk c of F[w]'s Gram (of
     * chunks[w]) holds its lower 32 x 32 tiles, tiles x 1024 floats, at c x tiles x 1024. */
    mf_dbuf G, part;
    int64_t chunks[2];
    mf_dbuf R, P, AP, rs; /* CG's vectors (the larger side's rows) */
    mf_dbuf PA, PB;       /* CG's per-segment partial sums */
    /* The breakdown words (one per side); the loss's block sums or its users' terms (a
     * double for each row of the larger side). */
    mf_dbuf failed, partial;
    streamer *z; /* non-NULL: the interactions stay on the host */
};

inline float *fp(const mf_dbuf &b)
{
    return (float *)b.ptr;
}

/* The lower 32 x 32 tiles of a kp x kp matrix: a Gram chunk's partial is as many. */
inline int tiles_of(const cuda_engine *e)
{
    const int T = e->kp / 32;
    return T * (T + 1) / 2;
}

/* Bytes of one factor element: float, or half with mf_ials_opts.fp16. */
inline size_t fac_bytes(const cuda_engine *e)
{
    return e->is_half ? 2 : sizeof(float);
}

/* The rows one solve launches over (a rank's share, or a streamed batch): their offsets,
 * indices and values, their factors X, CG's vectors and segments (ials_kernels.cuh,
 * cg_args), and row0, the side's number of their first row (the breakdown word's rows). */
struct rows_view {
    int32_t rows;
    int64_t row0;
    const int64_t *ptr;
    const int32_t *idx;
    const float *val;
    void *X;
    float *R, *P, *AP, *rs, *PA, *PB;
    int64_t nseg;
    const int64_t *seg_lo, *seg_hi, *row_seg;
    const int32_t *seg_row;
};

/* ials.cu. Solve v's rows of side s against F (the other side's factors) and the current
 * G: CG (X G, init, then P G and a step, cg_steps times) or exact. Queued on the stream;
 * a breakdown goes to side s's word. */
mf_status solve_rows(cuda_engine *e, mf_ials_side s, const void *F, const rows_view &v);
/* The loss over `rows` users (offsets ptr; NULL: the penalty alone, X then V) of X against
 * V and the current G (V's): a sum per block of 8 rows into e->partial, or with row_total
 * (the users' terms: ials.cu's share, a streamed batch) each row's total there. Queued on
 * the stream. */
mf_status launch_loss(cuda_engine *e, int32_t rows, const int64_t *ptr, const int32_t *idx,
                      const float *val, const void *X, double *row_total);
/* The exact solver's shared memory for rank k on this device, or MF_ERR_UNSUPPORTED. */
mf_status exact_prepare(cuda_engine *e);

/* ials_setup.cu. Everything the engine holds, from s: the resident mode, or the streamed
 * one where the interactions do not fit (one context only). */
mf_status engine_setup(cuda_engine *e, const mf_ials_setup *s);
/* CG's segments of a row of n interactions; row_seg[0..rows]: the first segment of each
 * row of ptr; the segments of rows [r0, r1), their interactions less p0 and their rows less
 * r0 at their index less s0 (a streamed batch's rebasing; all 0 for a whole side). */
int64_t segments_of(int64_t n);
void segment_starts(const int64_t *ptr, int32_t rows, int64_t *row_seg);
void fill_segments(const int64_t *ptr, const int64_t *row_seg, int32_t r0, int32_t r1, int64_t p0,
                   int64_t s0, int64_t *lo, int64_t *hi, int32_t *srow);
/* The factors, G and its partials, the breakdown words and the loss's block sums: what both
 * modes hold. */
mf_status alloc_common(cuda_engine *e, const mf_ials_setup *s);

/* ials_stream.cu. The streamed mode, where `common` bytes (the factors and working
 * buffers) and the two orientations' `inter` bytes do not fit in `usable` (under the
 * context's limit when `limited`): batches of rows cut to fit, their buffers, the copy
 * stream. */
mf_status stream_setup(cuda_engine *e, const mf_ials_setup *s, size_t common, size_t inter,
                       size_t usable, bool limited);
/* Every row of side s solved batch by batch with solve_rows: the resident arithmetic in
 * the resident order, so the same factors bit for bit. */
mf_status stream_solve(cuda_engine *e, mf_ials_side s, const void *F);
/* Every user's term of the loss (row[0 .. users)), batch by batch (one context: every
 * user is this engine's). */
mf_status stream_loss_users(cuda_engine *e, double *row);
/* Everything the streamed mode holds (e->z too); nothing when e->z is NULL. */
void stream_release(cuda_engine *e);

} // namespace mf_ials_cuda

#endif
