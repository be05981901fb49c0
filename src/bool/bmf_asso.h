/* MF_BMF_INIT_ASSO: Asso's greedy cover (Miettinen et al., "The Discrete Basis Problem")
 * as the starting point of the search, one association threshold tau per instance.
 *
 * 1. Seeds: every column with a 1, or the BMF_ASSO_CANDIDATES most frequent of them
 *    (ties: lower index). All of them, not a popular few: the most frequent columns are
 *    the ones shared by several factors, whose candidates mix those factors (a planted
 *    rank-32 matrix with 4,096 of its 20,000 columns as seeds recovered at F1 0.91). co[c][j] =
 * |rows(seed c) & rows(j)| for every seed c and column j.
 * 2. Candidate c of instance q: the columns j with co[c][j] >= tau_q * |rows(seed c)|.
 * 3. k greedy rounds: in row i, candidate c would cover g_ic = (uncovered ones it holds)
 *    - (uncovered zeros it holds); its gain is the sum over rows of max(0, g_ic). The
 *    candidate with the largest gain (ties: lowest c) becomes factor l of B, and the rows
 *    with g_ic > 0 take it in A. When no gain is positive the remaining factors stay empty.
 * Every count is an exact integer, so the CPU (sparse, incremental), the device's sparse cover
 * (the same algorithm, a block per row) and the dense tensor-core one (b1 MMA) pick the same
 * factors. */
#ifndef MF_BMF_ASSO_H
#define MF_BMF_ASSO_H
#include <stdint.h>

#include "core/sparse.h"
#include "cuda/philox.h" /* MF_HD */

#ifdef __cplusplus
extern "C" {
#endif

#define BMF_ASSO_CANDIDATES 32768
/* tau in 1/1024 steps, never below BMF_ASSO_TAU_MIN. */
#define BMF_ASSO_TAU_ONE 1024
#define BMF_ASSO_TAU_MIN 51

/* tau of instance q: 0.5, 0.55, 0.45, 0.6, 0.4, ... out to 0.05 and 1 (21 values); later
 * instances repeat the grid shifted by 1/64, so no two of the first 84 share a tau. */
MF_HD int bmf_asso_tau(int q)
{
    int r = q % 21, round = q / 21;
    int step = (r + 1) / 2, sign = r % 2 ? 1 : -1;
    int t = 512 + sign * step * 51 + (round % 4) * 16;
    return t < BMF_ASSO_TAU_MIN ? BMF_ASSO_TAU_MIN : t > BMF_ASSO_TAU_ONE ? BMF_ASSO_TAU_ONE : t;
}

/* Whether column j joins candidate c: co[c][j] >= tau * count(seed c), exactly. */
MF_HD int bmf_asso_member(int64_t co, int64_t seed_count, int tau)
{
    return co * BMF_ASSO_TAU_ONE >= (int64_t)tau * seed_count;
}

/* Watching a cover (NULL: none). After greedy rounds, on the calling thread, `round` is told
 * the rounds done over all instances and their total (instances x k), and returns nonzero
 * to stop; every backend also stops at `deadline` (mf_seconds(); 0 = none), checked after
 * each round. A stopped cover is a valid one: each instance keeps the factors of the rounds
 * it finished, the later ones empty. `stopped` says why: 0 not stopped, 1 by `round`, 2 by
 * the deadline. */
typedef struct mf_bmf_asso_watch {
    double deadline;
    int (*round)(void *user, int64_t done, int64_t total);
    void *user;
    int stopped;
    int64_t done; /* rounds so far, kept by mf_bmf_asso_rounds_done */
} mf_bmf_asso_watch;

/* What both backends start from: the seeds and the factor layout. */
typedef struct mf_bmf_asso_plan {
    mf_ctx *ctx;
    mf_sparse *C; /* host CSR and CSC (transpose) ready */
    int k, kw, instances;
    int P;                    /* seeds */
    int32_t *seeds;           /* P column indices, most frequent first */
    int64_t *col_count;       /* ones per column, n */
    mf_bmf_asso_watch *watch; /* NULL: none */
} mf_bmf_asso_plan;

/* After `n` more greedy rounds: counts them and, with a watch, checks its deadline and (when
 * n > 0 and `caller`, the thread that called mf_bmf_asso) tells it. Nonzero: the cover must
 * stop (n = 0 asks only that).
 * Thread-safe (OpenMP atomics); `round` is only called from the caller's thread. */
int mf_bmf_asso_rounds_done(const mf_bmf_asso_plan *p, int n, int caller);

/* Where the cover is computed: AUTO takes, on a CUDA context, whichever of the CPU's sparse
 * backend, the device's sparse one and the tensor cores' dense one is estimated fastest (the
 * same cover either way); a CPU context always computes on the CPU. */
typedef enum {
    MF_BMF_ASSO_AUTO,
    MF_BMF_ASSO_CPU,
    MF_BMF_ASSO_DEVICE,       /* dense, tensor cores (bmf_asso.cu) */
    MF_BMF_ASSO_DEVICE_SPARSE /* from the ones, the CPU's algorithm (bmf_asso_sparse.cu) */
} mf_bmf_asso_where;

/* Fill A (instances x rows x kw words) and B (instances x cols x kw words) on the host,
 * instance q's factors at offset q * rows * kw and q * cols * kw. */
mf_status mf_bmf_asso(mf_ctx *ctx, mf_sparse *C, int k, int instances, mf_bmf_asso_where where,
                      mf_bmf_asso_watch *watch, uint64_t *A, uint64_t *B);

/* Estimated seconds of mf_bmf_asso's AUTO cover here (builds and drops the CPU's lists when
 * they are cheap enough to tell): what MF_BMF_INIT_AUTO decides by. */
mf_status mf_bmf_asso_estimate(mf_ctx *ctx, mf_sparse *C, int k, int instances, double *seconds);

/* The CPU backend, whole, or in two steps: the association lists (shared by the instances)
 * with the estimated work of a cover from them, then the covers. lists_cost estimates the
 * lists' own work (the squares of the rows' ones) before building them. */
mf_status mf_bmf_asso_cpu(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B);
typedef struct mf_bmf_asso_lists mf_bmf_asso_lists;
double mf_bmf_asso_cpu_lists_cost(const mf_bmf_asso_plan *p);
mf_status mf_bmf_asso_cpu_lists(const mf_bmf_asso_plan *p, mf_bmf_asso_lists **out, double *work);
mf_status mf_bmf_asso_cpu_cover(const mf_bmf_asso_plan *p, mf_bmf_asso_lists *lists, uint64_t *A,
                                uint64_t *B);
void mf_bmf_asso_lists_free(mf_bmf_asso_lists *l);
/* The lists' arrays: seed c's columns col[ptr[c] .. ptr[c + 1]) ascending, co their counts. */
void mf_bmf_asso_lists_arrays(const mf_bmf_asso_lists *l, const int64_t **ptr, const int32_t **col,
                              const int32_t **co);
/* CUDA builds: bmf_asso.cu; without CUDA the stub in bmf_absent.c. */
mf_status mf_cuda_bmf_asso(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B);
/* The device's sparse cover from the CPU's lists (bmf_asso_sparse.cu). */
mf_status mf_cuda_bmf_asso_sparse(const mf_bmf_asso_plan *p, const mf_bmf_asso_lists *lists,
                                  uint64_t *A, uint64_t *B);
/* Tests: rows with more than `max` uncovered ones take the sparse cover's 32-bit counters
 * (a negative or too large value restores the default, 65535). Not thread-safe. */
void mf_bmf_asso_sparse_debug_narrow(int64_t max);

#ifdef __cplusplus
}
#endif
#endif
