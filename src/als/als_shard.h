/* ALS with sharded users (mf_als_layout in mfact.h; the design in docs/scaling.md §2): the
 * driver's group-side pieces, apart from the iteration loop (als.c). Each rank solves its
 * users as a problem of their own; the engines sum the item systems (mf_als_setup.sum_items);
 * these cut the local problems, decide the layout and hand U back whole. */
#ifndef MF_ALS_SHARD_H
#define MF_ALS_SHARD_H

#include <stdint.h>

#include "core/ranks.h"
#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a fit of rows x cols at rank k holds U sharded: in a group, asked for (layout) or
 * chosen by AUTO's rule, and only when every rank has users. The shares are the same on
 * every rank, so every rank decides alike. Gathering U moves about rows x k floats a rank
 * and iteration, the all-reduce of the item systems 2 x cols x (k + 1)^2 as the rule counts
 * them (about half of that travels: the systems' lower triangles). */
int mf_als_shard_users(mf_ctx *ctx, mf_als_layout layout, const mf_shares *sh, int32_t rows,
                       int32_t cols, int k);

/* The rank's local problems (collective when test is a part: every rank calls it, whatever
 * failed): its users' ratings from `ratings` (the whole matrix, or its users' shard of split
 * input), rows lo..hi re-indexed from 0, into *local; its users' test entries (the test set
 * cut the same way, gathered from every rank's part first when it is a part) into
 * *local_test, left NULL without a test set. */
mf_status mf_als_shard_local(mf_ctx *ctx, const mf_shares *sh, const mf_sparse *ratings,
                             const mf_sparse *test, mf_sparse **local, mf_sparse **local_test);

/* U (ld floats a row) and the user biases bu (NULL: none), every rank's rows to every rank
 * (collective; st: this rank's status, agreed first, so that every rank gathers or none).
 * Each rank's engine wrote its rows at [lo, hi) of the caller's U and bu. A CPU context's
 * buffers are host memory, which its comm gathers in place, as NCCL does device memory (and
 * the call then waits for it); host memory over NCCL goes through a device buffer of all
 * of U. */
mf_status mf_als_shard_gather_users(mf_ctx *ctx, const mf_shares *sh, float *U, int64_t ld,
                                    float *bu, mf_memory where, mf_status st);

#ifdef __cplusplus
}
#endif
#endif
