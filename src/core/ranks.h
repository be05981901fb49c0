/* A context's group (mf_ctx_join_local, mf_ctx_set_nccl_comm), as the algorithms see it:
 * how many ranks, the agreement a collective call starts with, and the shares of rows. */
#ifndef MF_CORE_RANKS_H
#define MF_CORE_RANKS_H

#include <stdint.h>

#include "core/ctx.h"
#include "cuda/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks in ctx's group: 1 outside one. */
int mf_ranks(const mf_ctx *ctx);

/* ctx becomes a rank over `made` when st is MF_OK; returns st. Every way into a group goes
 * through here, so that every group's collectives are timed (mf_comm_timed, for
 * mf_ctx_group_stats). */
mf_status mf_ranks_attach(mf_ctx *ctx, mf_status st, mf_comm *made);

/* The group's costs so far on this rank (mf_group_stats' wait and exchange seconds; zeros
 * outside a group): a fit reads them around its iterations. */
void mf_ranks_costs(const mf_ctx *ctx, double *wait, double *exchange);

/* The most values mf_ranks_agree compares. */
#define MF_RANKS_MAX_SAME 30

/* Collective (every rank calls it at the same point): each rank's status so far and n
 * values that must be the same on every rank (names[i] names value i in the message).
 * MF_OK when every rank is fine and they agree. Else every rank fails: a failed rank with
 * its own status and message, the others with the failed one's status, "fn: rank r
 * failed"; a disagreement with MF_ERR_INVALID_ARGUMENT naming the value. Outside a group
 * it returns st. */
mf_status mf_ranks_agree(mf_ctx *ctx, const char *fn, mf_status st, const int64_t *same,
                         const char *const *names, int n);

/* As mf_ranks_agree without values, for ranks that went on after a failure, making the
 * same collective calls with what their buffers held, so that another rank may have failed
 * later from that garbage: point (0 to 255) says where this rank's failure came, in the
 * order of the work since the last agreement. The earliest point's failure wins: a rank
 * that failed there keeps its status and message, every other rank fails with that
 * status and "fn: rank r failed". */
mf_status mf_ranks_agree_first(mf_ctx *ctx, const char *fn, mf_status st, int point);

/* The agreement a collective fit starts with (mf_ranks_agree): st, then the input's rows and
 * columns, whether it is a part of a split matrix (mf_sparse_set_part: every rank's input a
 * part or none), its count of entries (not compared for parts), whether it has values, the
 * n (<= MF_RANKS_MAX_SAME - 7) option values opts named by names, and the context seed. R
 * is read only when st is MF_OK. */
struct mf_sparse;
mf_status mf_ranks_agree_fit_parts(mf_ctx *ctx, const char *fn, mf_status st,
                                   const struct mf_sparse *R, const int64_t *opts,
                                   const char *const *names, int n);
/* A float option as the integer of its bits, for mf_ranks_agree_fit_parts. */
int64_t mf_ranks_bits(float x);

/* Contiguous shares of rows [0, rows) for `parts` ranks: rank p takes [bounds[p],
 * bounds[p + 1]), bounds[0] = 0 and bounds[parts] = rows, balanced by the work a row
 * costs: its entries (ptr[r + 1] - ptr[r]) plus row_cost. */
void mf_partition_rows(const int64_t *ptr, int32_t rows, int parts, int64_t row_cost,
                       int64_t *bounds);

/* A collective fit's shares of a matrix's rows (side 0) and columns (side 1): contiguous,
 * balanced by mf_partition_rows over the entries plus row_cost a line, ranks + 1 bounds a
 * side; this rank's lines are [lo[side], hi[side]). Outside a group: the whole sides, and
 * no bounds. */
typedef struct mf_shares {
    int64_t *bounds[2];
    int32_t lo[2], hi[2];
} mf_shares;

mf_status mf_shares_make(mf_ctx *ctx, const char *fn, struct mf_sparse *R, int64_t row_cost,
                         mf_shares *out);
/* The same from the offsets of each side's lines (ptr[0]: lines[0] + 1 row offsets, ptr[1]:
 * lines[1] + 1 column offsets) of the whole matrix, where no rank holds it (split input). */
mf_status mf_shares_make_lines(mf_ctx *ctx, const char *fn, const int64_t *const ptr[2],
                               const int32_t lines[2], int64_t row_cost, mf_shares *out);
void mf_shares_free(mf_shares *s);

/* Collective: v[0..n), host int64s (is_double 0) or doubles, becomes the sum over the ranks,
 * each element added in rank order (the same bits on every rank), n the same on every rank;
 * memory about 2n values. Through the comm's alltoallv: each rank sums a slice, then every
 * rank gets every slice. */
mf_status mf_ranks_sum_host(mf_ctx *ctx, const char *fn, void *v, size_t n, int is_double);

/* A part read from a file in parts (mf_read_opts.part_index/part_count) must be this
 * rank's of as many as the group has ranks: else entries would be missing from the fit, or
 * in it twice. st when it is (or R is no such part), else MF_ERR_INVALID_ARGUMENT. */
mf_status mf_ranks_check_part(mf_ctx *ctx, const char *fn, const struct mf_sparse *R, mf_status st);

/* Collective: the RMSE over the entries of every rank's M, from this rank's RMSE over its
 * own nnz entries (computed with status st: when one rank failed, all fail): the squared
 * errors and counts added over the ranks, the same bits on every rank. */
mf_status mf_ranks_rmse(mf_ctx *ctx, const char *fn, mf_status st, double rmse, int64_t nnz,
                        double *out);

/* The whole matrix of a split input's parts, summed over the ranks (collective; every rank
 * calls it with its status so far, and all fail when one did): ptr[0] its rows + 1 row
 * offsets and ptr[1] its cols + 1 column offsets (allocated here: free() them; NULL on
 * failure), its count of entries (*nnz) and its mean value (*mean: 1 for a pattern, 0
 * without entries), and where col_sum is not NULL (cols doubles, zeroed by the caller)
 * each column's sum of values. Host memory about the lines, never the entries. */
mf_status mf_ranks_whole_lines(mf_ctx *ctx, const char *fn, const struct mf_sparse *part,
                               mf_status st, int64_t *ptr[2], double *col_sum, double *mean,
                               int64_t *nnz);

/* What every fit that takes split input starts with (collective, every rank with its
 * status so far): the part checked (mf_ranks_check_part), the whole matrix's lines summed
 * over the ranks (mf_ranks_whole_lines: ptr, col_sum, mean and nnz as there), the shares
 * cut from them at row_cost (mf_shares_make_lines), and an agreement: MF_OK on every rank,
 * or a failure on every rank. The shards to gather (mf_ranks_gather_lines) are the
 * caller's choice. */
mf_status mf_ranks_split_shares(mf_ctx *ctx, const char *fn, const struct mf_sparse *part,
                                mf_status st, int64_t row_cost, int64_t *ptr[2], double *col_sum,
                                double *mean, int64_t *nnz, mf_shares *out);

/* Collective, for input split over the group (each rank's `part` holds its own entries of a
 * matrix of part's shape, mf_sparse_set_part): the entries of every rank whose row (side 0)
 * or column (side 1) falls in this rank's share [bounds[side][rank], bounds[side][rank + 1])
 * come to it, as a matrix of part's shape in canonical order (so each line's entries come
 * in the whole matrix's order). An entry given by two ranks is MF_ERR_INVALID_DATA on every
 * rank. */
mf_status mf_ranks_gather_lines(mf_ctx *ctx, const char *fn, const struct mf_sparse *part, int side,
                                const int64_t *bounds, struct mf_sparse **out);

/* The work of solving a line beside its entries' (an entry's share of a Gram matrix, k^2/2
 * multiply-adds): an exact solve is about k^3/3, 2k/3 entries' worth; n CG steps about
 * n k^2, 2n entries. For mf_shares_make's row_cost. */
int64_t mf_shares_solve_cost(int k, int cg_steps);

/* After the ranks updated their blocks of `side` of the factors (rows of row_bytes) and of
 * their biases (NULL: none; rows of bias_bytes): every block to every rank. Block b is
 * rank owner[b]'s (NULL: rank b's). Collective; no agreement first (mf_ranks_agree). */
mf_status mf_shares_gather(mf_ctx *ctx, const mf_shares *s, int side, const int *owner,
                           void *factors, size_t row_bytes, void *biases, size_t bias_bytes);

/* Every 4,096-byte page of buf[0, bytes) faulted in over the context's threads, where bytes
 * is 64 MiB or more: a byte a page set to 0, or with keep read and written back (two
 * faults a fresh page, but the contents stay). Fresh host pages are faulted in by whoever
 * first writes them: a copy from the device into them ran at 1 GB/s on an H200 host, into
 * touched pages at 10 GB/s, a one-thread memcpy at 1.3; touching on every thread ran at
 * 15-20 GB/s. For large host buffers that copies from the device or an exchange fill. */
void mf_ranks_touch_pages(mf_ctx *ctx, void *buf, size_t bytes, int keep);

/* Over a comm whose gathers take device memory (NCCL): each rank's block of rows [bounds[r],
 * bounds[r + 1]) of host `rows` (row_bytes each; and of `biases`, bias_bytes each, NULL for
 * none) to every rank's host arrays, through a device buffer of at most
 * 256 MiB (MFACT_GATHER_HOST_BYTES) in chunks of rows that every rank cuts alike. Collective: it
 * begins with an agreement on st and ends with one, so every rank returns MF_OK or all
 * fail. Device memory about the chunk, never the whole table. */
mf_status mf_ranks_gather_host(mf_ctx *ctx, const char *fn, mf_status st, const int64_t *bounds,
                               void *rows, size_t row_bytes, void *biases, size_t bias_bytes);

#ifdef __cplusplus
}
#endif
#endif
