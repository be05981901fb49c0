/* Which SDDMM kernel variants and tile sizes are worth timing for a call shape: the rules
 * the auto-tune starts from. Plain C, so CPU test suites check the rules. */
#ifndef MF_SDDMM_TUNING_H
#define MF_SDDMM_TUNING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block: 256 for SM-L2 (many blocks per SM hide latency), 1024 for SM-SM (one
 * block per SM owns the shared-memory tile, and 32 warps hide the A-row and index loads). */
#define MF_SDDMM_L2_THREADS 256
#define MF_SDDMM_SM_THREADS 1024

/* Entries per item at most, for a block of block_nnz entries run by virtual warps of v lanes.
 * Longer rows are split so that no row serializes a virtual warp. Beyond that, a block's
 * virtual warps take its items round-robin and the block holds its SM slot until the
 * busiest one finishes, so items are cut short enough that each virtual warp gets about 8:
 * on the H200 (Netflix shape, k = 32, V = 8) items of at most 256 entries took 1.17 ms and
 * items of at most 16 took 0.82 ms. Each item reloads its A row (k floats), which is why
 * wide virtual warps (large k) keep longer items: at k = 512 (V = 32) 64 entries beat 16 by
 * 4%. */
#define MF_SDDMM_ITEM_NNZ_MIN    16
#define MF_SDDMM_ITEMS_PER_VWARP 8
#define MF_SDDMM_ITEM_NNZ_MAX    256
static inline int32_t mf_sddmm_item_nnz(int64_t block_nnz, int v, int threads)
{
    int64_t vwarps = threads / (v > 0 ? v : 1);
    int64_t cap = block_nnz / (MF_SDDMM_ITEMS_PER_VWARP * (vwarps > 0 ? vwarps : 1));
    return (int32_t)(cap < MF_SDDMM_ITEM_NNZ_MIN   ? MF_SDDMM_ITEM_NNZ_MIN
                     : cap > MF_SDDMM_ITEM_NNZ_MAX ? MF_SDDMM_ITEM_NNZ_MAX
                                                   : cap);
}
/* Entries per thread block in the SM-L2 scheme: at most this many, and fewer on small
 * matrices so that every SM gets several blocks. */
#define MF_SDDMM_L2_BLOCK_NNZ 4096
/* From this k on, where the tuning times candidates, the fastest SM-L2 candidates are timed
 * again on the grouped layout (sddmm_layout.h), which is kept where faster: on the H200 it
 * gained 7-12% at k = 128 and 512 on the Netflix shape and lost 2-6% at k = 32. */
#define MF_SDDMM_GROUPED_MIN_K 64
/* Which candidates get that second timing: the fastest few (at most MF_SDDMM_GROUPED_TRIES)
 * within MF_SDDMM_GROUPED_MARGIN of the fastest on the plain layout. Grouping gains more for
 * some variants than for others (H200, bench/README.md):
 * - at k = 128 on the Netflix shape, V = 8 KR = 4 and V = 32 KR = 1 took 3.05 ms each plain,
 *   2.73 against 2.87 ms grouped, so retrying the winner alone left 5% to a coin toss;
 * - at k = 512 the variant that wins grouped ranked third or fourth plain, 10-19% behind the
 *   fastest (NYTimes shape: V = 16 KR = 2, 12.27 ms plain, 10.19 grouped, against the plain
 *   winner's 10.60 and 10.45 grouped).
 * Each try builds one more layout for the matrix's first call at that k. */
#define MF_SDDMM_GROUPED_TRIES  4
#define MF_SDDMM_GROUPED_MARGIN 1.20f
/* Below this k, two tries: there the tunings that were logged (k = 64 and 100, four shapes,
 * fp32 and bf16) kept the first or second retry, and each further one cost the matrix's first
 * call a layout for nothing (Netflix shape, k = 100: 0.60-0.66 s with one retry, 0.75-0.79 s
 * with four). Early stopping on a retry that gains little would not do: at k = 128 (bf16,
 * Netflix shape) the fastest candidate gained nothing grouped and the second gained 4.8%. */
#define MF_SDDMM_GROUPED_WIDE_K       128
#define MF_SDDMM_GROUPED_TRIES_NARROW 2
/* Below this many entries the rules' first candidate is used without timing. */
#define MF_SDDMM_TUNE_MIN_NNZ 200000
/* Nor above this many: the tune builds a layout per candidate and times each, a dozen or
 * more passes over the matrix, which a fit's one RMSE never earns back. Hugewiki-shaped ALS on 2
 * H200 (1.5 billion entries a rank) spent about 10 s tuning its final train RMSE, against 4.2
 * s for its three iterations (docs/scaling.md). */
#define MF_SDDMM_TUNE_MAX_NNZ ((int64_t)1 << 29)
/* SM-SM blocks: about MF_SDDMM_SM_BLOCKS_PER_SM per SM over the whole matrix, so that the
 * tile is staged rarely. That leaves a partial last wave where the panels' blocks number a
 * little over a multiple of the SMs (dense5 shape, Tj = 384: 313 blocks on 132 SMs), so the
 * fastest SM-SM candidate, when within MF_SDDMM_FINE_MARGIN of the fastest of all, is timed
 * once more with MF_SDDMM_SM_FINE_BLOCKS_PER_SM (mf_sddmm_fine_candidate). Neither wins
 * everywhere (H200, k = 128 / 512, bench/README.md): 25% dense (8,000 x 8,000) 0.500 ->
 * 0.405 ms and 2.17 -> 1.69 ms with eight, 5% dense (20,000 x 20,000) 0.575 -> 0.76 ms and
 * 2.49 -> 3.20 ms. */
#define MF_SDDMM_SM_BLOCKS_PER_SM      2
#define MF_SDDMM_SM_FINE_BLOCKS_PER_SM 8
#define MF_SDDMM_FINE_MARGIN           1.5f
/* Shared memory for one SM-SM block's B tile: one 1024-thread block per SM holds a tile
 * this large (sm_80 and sm_90 offer 227 KB per block). */
#define MF_SDDMM_SMEM_TILE_BYTES (192 * 1024)
#define MF_SDDMM_MAX_CANDIDATES  16
/* Timings a tuning keeps for its recheck: the candidates and the retries. */
#define MF_SDDMM_MAX_TRIES (MF_SDDMM_MAX_CANDIDATES + MF_SDDMM_GROUPED_TRIES + 1)
/* The two fastest timings of a tuning, when the second is within MF_SDDMM_RECHECK_MARGIN of
 * the first, are timed MF_SDDMM_RECHECK_RUNS times more, in turn, and each keeps its fastest
 * run. One run a candidate misled by up to 11% (H200, Netflix shape, TF32 at k = 128: grouped
 * timed 1.93 ms against 2.05 plain, and ran 2.15 ms in the bench's median, against 2.02 plain). */
#define MF_SDDMM_RECHECK_MARGIN 1.10f
#define MF_SDDMM_RECHECK_RUNS   2

/* A compiled kernel variant: V lanes per virtual warp, KR units per lane, units of one
 * 16-byte vector (vec: 4 floats, or 8 values of the 16-bit copies) or 1 float, B staged in
 * shared memory (smem) or read through L2. */
typedef struct mf_sddmm_config {
    int v, kr, vec, smem;
} mf_sddmm_config;

typedef struct mf_sddmm_shape {
    int32_t rows, cols;
    int64_t nnz;
    int k;
    int vec;                      /* 16-byte vector loads possible for this call */
    int64_t l2_bytes, smem_bytes; /* device L2 size, shared memory per block (opt-in) */
    int sms;
    int unit16; /* the factors' 16-bit copies (bf16, fp16, TF32's scaled fp16): 8 values per
                 * 16-byte unit */
} mf_sddmm_shape;

typedef struct mf_sddmm_candidate {
    int variant;
    int32_t tj;
    int32_t item_nnz; /* mf_sddmm_item_nnz for the variant */
    int64_t block_nnz;
} mf_sddmm_candidate;

/* The compiled variants (sddmm.cu; none without CUDA). */
int mf_sddmm_variant_count(void);
mf_sddmm_config mf_sddmm_variant_config(int i);

/* Values per lane unit: a 16-byte vector holds 4 floats or 8 16-bit values (bf16 and fp16
 * copies, unit16); a scalar unit holds 1 float. */
static inline int mf_sddmm_unit_width(int vec, int unit16)
{
    return vec ? (unit16 ? 8 : 4) : 1;
}
/* k per chunk of a float call (the SM-SM tile's Tk), and of a call on 16-bit copies. */
static inline int mf_sddmm_chunk(mf_sddmm_config c)
{
    return c.v * c.kr * mf_sddmm_unit_width(c.vec, 0);
}
static inline int mf_sddmm_chunk_of(mf_sddmm_config c, int unit16)
{
    return c.v * c.kr * mf_sddmm_unit_width(c.vec, unit16);
}
static inline int mf_sddmm_threads(mf_sddmm_config c)
{
    return c.smem ? MF_SDDMM_SM_THREADS : MF_SDDMM_L2_THREADS;
}
static inline size_t mf_sddmm_smem_bytes(mf_sddmm_config c, int32_t tj)
{
    return (size_t)tj * (size_t)mf_sddmm_chunk(c) * sizeof(float);
}

/* Fill cand[0 .. MF_SDDMM_MAX_CANDIDATES) and return how many: the first is the rules'
 * favourite, used untimed for small matrices. */
int mf_sddmm_candidates(const mf_sddmm_shape *shape, mf_sddmm_candidate *cand);

/* Of n timings ms[0 .. n), the fastest in *first and the next fastest in *second (the earlier
 * of equal ones first); 1 when there are two and the second lies within
 * MF_SDDMM_RECHECK_MARGIN of the first, so that both are timed again, else 0. */
int mf_sddmm_recheck_pair(const float *ms, int n, int *first, int *second);

/* SM-SM candidate c with blocks of MF_SDDMM_SM_FINE_BLOCKS_PER_SM per SM (items cut to
 * match): the same variant and tile. Its block_nnz equals c's where the matrix is too small
 * for smaller blocks (at least 16 entries per tile row). */
mf_sddmm_candidate mf_sddmm_fine_candidate(const mf_sddmm_shape *shape, mf_sddmm_candidate c);

#ifdef __cplusplus
}
#endif
#endif
