/* What a group exchanges when no rank holds the whole input (ranks.h): sums of host arrays
 * over the ranks, and the entries of a split matrix moved to the ranks whose lines they
 * are in. Both ride on the comm's alltoallv (host memory on every backend). Every buffer is
 * allocated before the first exchange and the ranks agree that all of them could, so that
 * no rank fails while the others wait in a collective. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/error.h"
#include "core/ranks.h"
#include "core/sparse.h"

/* Where slice r of n elements over `size` ranks starts: the first n % size slices hold one
 * element more. */
static size_t slice_at(size_t n, int r, int size)
{
    const size_t base = n / (size_t)size, more = n % (size_t)size;
    return base * (size_t)r + ((size_t)r < more ? (size_t)r : more);
}

mf_status mf_ranks_sum_host(mf_ctx *ctx, const char *fn, void *v, size_t n, int is_double)
{
    const int size = mf_ranks(ctx);
    if (size == 1 || n == 0)
        return MF_OK;
    mf_comm *c = ctx->comm;
    const int me = c->rank;
    const size_t lo = slice_at(n, me, size), len = slice_at(n, me + 1, size) - lo;
    int64_t *send_bytes = malloc(2 * (size_t)size * sizeof *send_bytes);
    char *from_all = malloc((size_t)size * len * 8 + 1); /* my slice as every rank has it */
    char *copies = malloc((size_t)size * len * 8 + 1);   /* my summed slice, once a rank */
    mf_status st = send_bytes && from_all && copies ? MF_OK
                                                    : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                                              "%s: out of host memory to sum %zu "
                                                              "values over the ranks",
                                                              fn, n);
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st == MF_OK) {
        int64_t *recv_bytes = send_bytes + size;
        for (int r = 0; r < size; r++) {
            send_bytes[r] = (int64_t)(slice_at(n, r + 1, size) - slice_at(n, r, size)) * 8;
            recv_bytes[r] = (int64_t)len * 8;
        }
        st = c->ops->alltoallv(c, ctx, v, send_bytes, from_all, recv_bytes);
        for (size_t i = 0; st == MF_OK && i < len; i++) {
            if (is_double) {
                double s = 0.0;
                for (int q = 0; q < size; q++)
                    s += ((const double *)from_all)[(size_t)q * len + i];
                for (int q = 0; q < size; q++)
                    ((double *)copies)[(size_t)q * len + i] = s;
            } else {
                int64_t s = 0;
                for (int q = 0; q < size; q++)
                    s += ((const int64_t *)from_all)[(size_t)q * len + i];
                for (int q = 0; q < size; q++)
                    ((int64_t *)copies)[(size_t)q * len + i] = s;
            }
        }
        /* now each rank sends its summed slice to every rank, and receives every slice */
        for (int r = 0; st == MF_OK && r < size; r++) {
            recv_bytes[r] = send_bytes[r];
            send_bytes[r] = (int64_t)len * 8;
        }
        if (st == MF_OK)
            st = c->ops->alltoallv(c, ctx, copies, send_bytes, v, recv_bytes);
    }
    free(send_bytes), free(from_all), free(copies);
    return st;
}

/* The most ranks whose runs merge_runs merges (more: mf_sparse_build_coo sorts). */
#define MF_RANKS_MERGE_MAX 64

/* An entry on its way to its owner. */
typedef struct entry {
    int32_t row, col;
    float val;
} entry;

/* The rank whose share [bounds[r], bounds[r + 1]) holds line x. */
static int owner_of(const int64_t *bounds, int size, int32_t x)
{
    int lo = 0, hi = size - 1;
    while (lo < hi) { /* the last r with bounds[r] <= x */
        const int mid = (lo + hi + 1) / 2;
        if (bounds[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The runs of recv (n[q] entries from rank q, each run sorted by row, then column) merged
 * into row, col, val in that order; equal entries stay adjacent for the overlap check. */
static void merge_runs(const entry *recv, const int64_t *n, int size, int32_t *row, int32_t *col,
                       float *val)
{
    int64_t head[MF_RANKS_MERGE_MAX], end[MF_RANKS_MERGE_MAX], total = 0;
    for (int q = 0; q < size; q++) {
        head[q] = total;
        total += n[q];
        end[q] = total;
    }
    for (int64_t i = 0; i < total; i++) {
        int best = -1;
        for (int q = 0; q < size; q++) {
            if (head[q] == end[q])
                continue;
            const entry *e = &recv[head[q]], *b = best < 0 ? NULL : &recv[head[best]];
            if (!b || e->row < b->row || (e->row == b->row && e->col < b->col))
                best = q;
        }
        const entry *e = &recv[head[best]++];
        row[i] = e->row, col[i] = e->col, val[i] = e->val;
    }
}

mf_status mf_ranks_check_part(mf_ctx *ctx, const char *fn, const mf_sparse *R, mf_status st)
{
    if (st != MF_OK || !R->is_part || R->part_count <= 0 || mf_ranks(ctx) <= 1)
        return st;
    if (R->part_count == mf_ranks(ctx) && R->part_index == ctx->comm->rank)
        return MF_OK;
    return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                   "%s: the ratings are part %d of %d of their file "
                   "(mf_read_opts.part_index/part_count), but this is rank %d of %d",
                   fn, R->part_index, R->part_count, ctx->comm->rank, mf_ranks(ctx));
}

mf_status mf_ranks_rmse(mf_ctx *ctx, const char *fn, mf_status st, double rmse, int64_t nnz,
                        double *out)
{
    MF_TRY(mf_ranks_agree(ctx, fn, st, NULL, NULL, 0)); /* or every rank fails */
    double v[2] = {rmse * rmse * (double)nnz, (double)nnz};
    MF_TRY(ctx->comm->ops->sum_f64(ctx->comm, ctx, v, 2));
    *out = v[1] > 0.0 ? sqrt(v[0] / v[1]) : 0.0;
    return MF_OK;
}

mf_status mf_ranks_whole_lines(mf_ctx *ctx, const char *fn, const mf_sparse *part, mf_status st,
                               int64_t *ptr[2], double *col_sum, double *mean, int64_t *nnz)
{
    const size_t rows = (size_t)part->rows, cols = (size_t)part->cols;
    double total[2] = {0.0, (double)part->nnz}; /* the sum of values and the count */
    ptr[0] = ptr[1] = NULL;
    if (st == MF_OK) {
        ptr[0] = calloc(rows + 1, sizeof(int64_t));
        ptr[1] = calloc(cols + 1, sizeof(int64_t));
        if (!ptr[0] || !ptr[1])
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for the lines", fn);
    }
    if (st == MF_OK) { /* this part's counts and sums, at line + 1 */
        for (int32_t r = 0; r < part->rows; r++) {
            ptr[0][r + 1] = part->row_ptr[r + 1] - part->row_ptr[r];
            for (int64_t p = part->row_ptr[r]; p < part->row_ptr[r + 1]; p++) {
                const float v = part->val ? part->val[p] : 1.0f;
                ptr[1][part->col[p] + 1]++;
                total[0] += v;
                if (col_sum)
                    col_sum[part->col[p]] += v;
            }
        }
    }
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    for (int w = 0; w < 2 && st == MF_OK; w++)
        st = mf_ranks_sum_host(ctx, fn, ptr[w] + 1, w == 0 ? rows : cols, 0);
    if (st == MF_OK && col_sum)
        st = mf_ranks_sum_host(ctx, fn, col_sum, cols, 1);
    if (st == MF_OK)
        st = mf_ranks_sum_host(ctx, fn, total, 2, 1);
    if (st != MF_OK) {
        free(ptr[0]);
        free(ptr[1]);
        ptr[0] = ptr[1] = NULL;
        return st;
    }
    for (int w = 0; w < 2; w++) /* counts to offsets */
        for (size_t i = 0; i < (w == 0 ? rows : cols); i++)
            ptr[w][i + 1] += ptr[w][i];
    *nnz = (int64_t)total[1];
    *mean = total[1] > 0.0 ? (part->val ? total[0] / total[1] : 1.0) : 0.0;
    return MF_OK;
}

mf_status mf_ranks_gather_lines(mf_ctx *ctx, const char *fn, const mf_sparse *part, int side,
                                const int64_t *bounds, mf_sparse **out)
{
    *out = NULL;
    const int size = mf_ranks(ctx);
    mf_comm *c = ctx->comm;
    /* counts[0..size): entries to each rank; [size..2 size): bytes from each; then bytes */
    int64_t *counts = calloc(4 * (size_t)size, sizeof *counts);
    int64_t *at = calloc((size_t)size + 1, sizeof *at);
    entry *send = malloc((size_t)(part->nnz ? part->nnz : 1) * sizeof *send);
    mf_status st = counts && at && send ? MF_OK
                                        : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                                  "%s: out of host memory to send %lld entries", fn,
                                                  (long long)part->nnz);
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st != MF_OK) {
        free(counts), free(at), free(send);
        return st;
    }
    int64_t *to = counts, *from = counts + size, *send_bytes = counts + 2 * size,
            *recv_bytes = counts + 3 * size;
    for (int32_t r = 0; r < part->rows; r++)
        for (int64_t p = part->row_ptr[r]; p < part->row_ptr[r + 1]; p++)
            to[owner_of(bounds, size, side == 0 ? r : part->col[p])]++;
    for (int q = 0; q < size; q++)
        at[q + 1] = at[q] + to[q];
    for (int32_t r = 0; r < part->rows; r++) /* packed by owner, in the part's order */
        for (int64_t p = part->row_ptr[r]; p < part->row_ptr[r + 1]; p++) {
            const int q = owner_of(bounds, size, side == 0 ? r : part->col[p]);
            send[at[q]++] = (entry){r, part->col[p], part->val ? part->val[p] : 1.0f};
        }
    /* how many entries each rank sends this one: 8 bytes from each to each */
    for (int q = 0; q < size; q++)
        send_bytes[q] = recv_bytes[q] = 8;
    st = c->ops->alltoallv(c, ctx, to, send_bytes, from, recv_bytes);
    int64_t total = 0;
    for (int q = 0; st == MF_OK && q < size; q++) {
        send_bytes[q] = to[q] * (int64_t)sizeof(entry);
        recv_bytes[q] = from[q] * (int64_t)sizeof(entry);
        total += from[q];
    }
    entry *recv = st == MF_OK ? malloc((size_t)(total ? total : 1) * sizeof *recv) : NULL;
    int32_t *row = st == MF_OK ? malloc((size_t)(total ? total : 1) * sizeof *row) : NULL;
    int32_t *col = st == MF_OK ? malloc((size_t)(total ? total : 1) * sizeof *col) : NULL;
    float *val = st == MF_OK ? malloc((size_t)(total ? total : 1) * sizeof *val) : NULL;
    if (st == MF_OK && (!recv || !row || !col || !val))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory to receive %lld entries",
                     fn, (long long)total);
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st == MF_OK)
        st = c->ops->alltoallv(c, ctx, send, send_bytes, recv, recv_bytes);
    /* Each rank sent its entries in its part's order (by row, then column): merging the
     * runs gives the canonical order, which mf_sparse_build_coo then copies as it is
     * instead of sorting on one thread (4 s of a Netflix-sized split fit on 2 GPUs). */
    if (st == MF_OK && size <= MF_RANKS_MERGE_MAX)
        merge_runs(recv, from, size, row, col, val);
    for (int64_t i = 0; st == MF_OK && size > MF_RANKS_MERGE_MAX && i < total; i++)
        row[i] = recv[i].row, col[i] = recv[i].col, val[i] = recv[i].val;
    free(send), free(counts), free(at);
    free(recv);
    int32_t dup[2] = {-1, -1};
    if (st == MF_OK) {
        const mf_coo_view coo = {part->rows, part->cols, total, row, col, part->val ? val : NULL};
        st = mf_sparse_build_coo(ctx, out, &coo, 0, fn, dup);
        if (st != MF_OK && dup[0] >= 0)
            st = mf_fail(ctx, MF_ERR_INVALID_DATA,
                         "%s: the entry (%d, %d) is in the parts of two ranks (a split matrix's "
                         "parts must not overlap)",
                         fn, dup[0], dup[1]);
    }
    free(row), free(col), free(val);
    /* one rank's overlap (or memory) fails them all, each with its own reason */
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st != MF_OK) {
        mf_sparse_destroy(*out);
        *out = NULL;
    }
    return st;
}

mf_status mf_ranks_split_shares(mf_ctx *ctx, const char *fn, const mf_sparse *part, mf_status st,
                                int64_t row_cost, int64_t *ptr[2], double *col_sum, double *mean,
                                int64_t *nnz, mf_shares *out)
{
    st = mf_ranks_check_part(ctx, fn, part, st);
    MF_TRY(mf_ranks_whole_lines(ctx, fn, part, st, ptr, col_sum, mean, nnz));
    const int64_t *const lines_ptr[2] = {ptr[0], ptr[1]};
    const int32_t lines[2] = {part->rows, part->cols};
    st = mf_shares_make_lines(ctx, fn, lines_ptr, lines, row_cost, out);
    return mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
}
