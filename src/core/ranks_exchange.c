/* What a group exchanges when no rank holds the whole input (ranks.h): sums of host arrays
 * over the ranks, and the entries of a split matrix moved to the ranks whose lines they
 * are in. Both ride on the comm's alltoallv (host memory on every backend). Every buffer is
 * allocated before the first exchange and the ranks agree that all of them could, so that
 * no rank fails while the others wait in a collective. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
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

/* The most ranks whose runs merge_into_csr merges (more: mf_sparse_build_coo sorts). */
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

/* Rows [0, rows) cut into `chunks` ranges of about equal entries (ptr: the row offsets):
 * range j is [cut[j], cut[j + 1]). */
static void cut_by_entries(const int64_t *ptr, int32_t rows, int chunks, int32_t *cut)
{
    cut[0] = 0;
    cut[chunks] = rows;
    for (int j = 1; j < chunks; j++) {
        const int64_t want = (int64_t)((double)ptr[rows] * j / chunks);
        int32_t lo = cut[j - 1], hi = rows; /* the first row r >= lo with ptr[r] >= want */
        while (lo < hi) {
            const int32_t mid = lo + (hi - lo) / 2;
            if (ptr[mid] < want)
                lo = mid + 1;
            else
                hi = mid;
        }
        cut[j] = lo;
    }
}

/* The first position in run[0, n) whose row is at least r (the run is sorted by row). */
static int64_t first_row_at(const entry *run, int64_t n, int64_t r)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (run[mid].row < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Chunks of the work per thread: more than one, so that uneven rows still balance; but
 * none under MIN_CHUNK entries. The chunks never change a result, only who computes it. */
#define CHUNKS_PER_THREAD 4
#define MIN_CHUNK         4096

static int chunks_for(const mf_ctx *ctx, int64_t entries)
{
    const int64_t most = entries / MIN_CHUNK,
                  want = (int64_t)mf_ctx_threads(ctx) * CHUNKS_PER_THREAD;
    return most < 1 ? 1 : most < want ? (int)most : (int)want;
}

/* Below this, touching first saves less than it costs (mf_ranks_touch_pages). */
#define TOUCH_MIN_BYTES ((size_t)64 << 20)

void mf_ranks_touch_pages(mf_ctx *ctx, void *buf, size_t bytes, int keep)
{
    if (bytes < TOUCH_MIN_BYTES)
        return;
    volatile char *const p = buf;
    const int64_t pages = (int64_t)((bytes + 4095) / 4096);
#pragma omp parallel for schedule(static) num_threads(mf_ctx_threads(ctx))
    for (int64_t i = 0; i < pages; i++)
        p[(size_t)i * 4096] = keep ? p[(size_t)i * 4096] : 0;
}

/* The part's entries packed by owner into send (each owner's in the part's order), to[q]
 * the count for rank q. The rows go in chunks over the context's threads: each chunk
 * counts its entries per owner, then writes them at its offsets, so the page faults of the
 * fresh buffer and the owners' lookups are every thread's. cnt: chunks x size scratch. */
static void pack_by_owner(mf_ctx *ctx, const mf_sparse *part, int side, const int64_t *bounds,
                          int size, int chunks, const int32_t *cut, int64_t *cnt, int64_t *to,
                          entry *send)
{
#pragma omp parallel for schedule(dynamic, 1) num_threads(mf_ctx_threads(ctx)) if (chunks > 1)
    for (int j = 0; j < chunks; j++) {
        int64_t *c = cnt + (size_t)j * size;
        for (int32_t r = cut[j]; r < cut[j + 1]; r++) {
            const int64_t b = part->row_ptr[r], e = part->row_ptr[r + 1];
            if (side == 0) { /* a row has one owner */
                if (e > b)
                    c[owner_of(bounds, size, r)] += e - b;
                continue;
            }
            for (int64_t p = b; p < e; p++)
                c[owner_of(bounds, size, part->col[p])]++;
        }
    }
    /* offsets: owner by owner, and within an owner chunk by chunk (the part's order) */
    int64_t at = 0;
    for (int q = 0; q < size; q++) {
        to[q] = 0;
        for (int j = 0; j < chunks; j++) {
            const int64_t c = cnt[(size_t)j * size + q];
            cnt[(size_t)j * size + q] = at;
            at += c;
            to[q] += c;
        }
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(mf_ctx_threads(ctx)) if (chunks > 1)
    for (int j = 0; j < chunks; j++) {
        int64_t *next = cnt + (size_t)j * size;
        for (int32_t r = cut[j]; r < cut[j + 1]; r++) {
            const int row_owner = side == 0 ? owner_of(bounds, size, r) : -1;
            for (int64_t p = part->row_ptr[r]; p < part->row_ptr[r + 1]; p++) {
                const int q = side == 0 ? row_owner : owner_of(bounds, size, part->col[p]);
                send[next[q]++] = (entry){r, part->col[p], part->val ? part->val[p] : 1.0f};
            }
        }
    }
}

/* The runs of recv (n[q] entries from rank q, each sorted by row, then column) merged into
 * CSR arrays of `rows` rows: ptr (rows + 1, zeroed by the caller), col and val (NULL: a
 * pattern). The rows go in chunks over the context's threads, cut where the longest run
 * cuts into equal parts; a chunk finds its slice of every run by bisection, and its
 * output starts after every entry of an earlier row. Returns the first position in the
 * merged order of an entry equal to the one before it (two ranks' parts overlap), or -1;
 * *dup gets that entry's row and column. */
static int64_t merge_into_csr(mf_ctx *ctx, const entry *recv, const int64_t *n, int size,
                              int32_t rows, int chunks, int64_t *ptr, int32_t *col, float *val,
                              int32_t dup[2])
{
    int64_t head[MF_RANKS_MERGE_MAX], longest = 0, total = 0;
    for (int q = 0; q < size; q++) {
        head[q] = total;
        total += n[q];
        if (n[q] > n[longest])
            longest = q;
    }
    int64_t first_dup = -1;
    int32_t dup_at[2] = {-1, -1};
#pragma omp parallel for schedule(dynamic, 1) num_threads(mf_ctx_threads(ctx)) if (chunks > 1)
    for (int j = 0; j < chunks; j++) {
        const entry *L = recv + head[longest];
        const int64_t r0 = j == 0 ? 0 : L[(int64_t)((double)n[longest] * j / chunks)].row;
        const int64_t r1 =
            j == chunks - 1 ? rows : L[(int64_t)((double)n[longest] * (j + 1) / chunks)].row;
        int64_t at[MF_RANKS_MERGE_MAX], end[MF_RANKS_MERGE_MAX], out = 0;
        for (int q = 0; q < size; q++) {
            at[q] = head[q] + first_row_at(recv + head[q], n[q], r0);
            end[q] = head[q] + first_row_at(recv + head[q], n[q], r1);
            out += at[q] - head[q];
        }
        int64_t mine = -1;
        int32_t mine_at[2] = {-1, -1};
        const entry *last = NULL;
        for (;; out++) {
            int best = -1;
            for (int q = 0; q < size; q++) {
                if (at[q] == end[q])
                    continue;
                const entry *e = &recv[at[q]], *b = best < 0 ? NULL : &recv[at[best]];
                if (!b || e->row < b->row || (e->row == b->row && e->col < b->col))
                    best = q;
            }
            if (best < 0)
                break;
            const entry *e = &recv[at[best]++];
            if (mine < 0 && last && last->row == e->row && last->col == e->col)
                mine = out, mine_at[0] = e->row, mine_at[1] = e->col;
            ptr[e->row + 1]++;
            col[out] = e->col;
            if (val)
                val[out] = e->val;
            last = e;
        }
        if (mine >= 0) {
#pragma omp critical(mf_merge_dup)
            if (first_dup < 0 || mine < first_dup)
                first_dup = mine, dup_at[0] = mine_at[0], dup_at[1] = mine_at[1];
        }
    }
    for (int32_t r = 0; r < rows; r++)
        ptr[r + 1] += ptr[r];
    dup[0] = dup_at[0], dup[1] = dup_at[1];
    return first_dup;
}

/* One thread's merge of the runs into row, col, val (canonical order, equal entries
 * adjacent) for mf_sparse_build_coo: groups of more than MF_RANKS_MERGE_MAX ranks copy
 * the runs as they come and let it sort. */
static void copy_runs(const entry *recv, int64_t total, int32_t *row, int32_t *col, float *val)
{
    for (int64_t i = 0; i < total; i++)
        row[i] = recv[i].row, col[i] = recv[i].col, val[i] = recv[i].val;
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

/* Entries a block of the sum of values: fixed, so that the sum's order (and its bits) do
 * not depend on the thread count. */
#define SUM_BLOCK ((int64_t)1 << 14)
/* Per-thread column counts up to this many bytes in all; beyond, atomic increments. */
#define COUNT_COPIES_BYTES ((size_t)64 << 20)

/* mf_ranks_whole_lines's pass without column sums, over the context's threads: the part's
 * counts at line + 1 in ptr[0] (rows) and ptr[1] (columns), and total[0] the sum of its
 * values in blocks of SUM_BLOCK entries added in order. False: out of host memory. */
static bool count_lines(mf_ctx *ctx, const mf_sparse *part, int64_t *ptr[2], double total[2])
{
    const int32_t rows = part->rows, cols = part->cols;
    const int64_t nnz = part->nnz, blocks = (nnz + SUM_BLOCK - 1) / SUM_BLOCK;
    const int threads = nnz > SUM_BLOCK ? mf_ctx_threads(ctx) : 1;
    for (int32_t r = 0; r < rows; r++)
        ptr[0][r + 1] = part->row_ptr[r + 1] - part->row_ptr[r];
    const size_t copy_bytes = (size_t)cols * sizeof(int64_t);
    int64_t *copies = threads > 1 && copy_bytes * (size_t)threads <= COUNT_COPIES_BYTES
                          ? calloc((size_t)threads, copy_bytes + 1)
                          : NULL;
    double *sums = malloc((size_t)(blocks ? blocks : 1) * sizeof *sums);
    if (!sums) {
        free(copies);
        return false;
    }
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        /* one thread counts into ptr itself; several into their copies, or atomically */
        int64_t *mine = threads == 1 ? ptr[1] + 1
                        : copies     ? copies + (size_t)mf_thread_index() * cols
                                     : NULL;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t p1 = (b + 1) * SUM_BLOCK < nnz ? (b + 1) * SUM_BLOCK : nnz;
            double s = 0.0;
            for (int64_t p = b * SUM_BLOCK; p < p1; p++) {
                const int32_t c = part->col[p];
                if (mine)
                    mine[c]++;
                else {
#pragma omp atomic
                    ptr[1][c + 1]++;
                }
                s += part->val ? part->val[p] : 1.0;
            }
            sums[b] = s;
        }
    }
    for (int t = 0; copies && t < threads; t++)
        for (int32_t c = 0; c < cols; c++)
            ptr[1][c + 1] += copies[(size_t)t * cols + c];
    for (int64_t b = 0; b < blocks; b++)
        total[0] += sums[b];
    free(copies);
    free(sums);
    return true;
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
    if (st == MF_OK && !col_sum) { /* the common case, on every thread */
        if (!count_lines(ctx, part, ptr, total))
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for the lines", fn);
    } else if (st == MF_OK) { /* this part's counts and sums, at line + 1 */
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
    const int chunks = chunks_for(ctx, part->nnz);
    /* counts[0..size): entries to each rank; [size..2 size): from each; then bytes */
    int64_t *counts = calloc(4 * (size_t)size, sizeof *counts);
    int64_t *cnt = calloc((size_t)chunks * size, sizeof *cnt);
    int32_t *cut = malloc(((size_t)chunks + 1) * sizeof *cut);
    entry *send = malloc((size_t)(part->nnz ? part->nnz : 1) * sizeof *send);
    mf_status st =
        counts && cnt && cut && send
            ? MF_OK
            : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory to send %lld entries", fn,
                      (long long)part->nnz);
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st != MF_OK) {
        free(counts), free(cnt), free(cut), free(send);
        return st;
    }
    int64_t *to = counts, *from = counts + size, *send_bytes = counts + 2 * size,
            *recv_bytes = counts + 3 * size;
    /* the steps' wall seconds, logged at MF_LOG_INFO: pack, exchange, merge, build */
    double t[5] = {mf_seconds(), 0.0, 0.0, 0.0, 0.0};
    cut_by_entries(part->row_ptr, part->rows, chunks, cut);
    pack_by_owner(ctx, part, side, bounds, size, chunks, cut, cnt, to, send);
    t[1] = mf_seconds();
    free(cnt), free(cut);
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
    /* merged straight into CSR arrays (up to MF_RANKS_MERGE_MAX ranks), else as COO */
    const int merge = size <= MF_RANKS_MERGE_MAX;
    const size_t n1 = (size_t)(total ? total : 1);
    entry *recv = st == MF_OK ? malloc(n1 * sizeof *recv) : NULL;
    int64_t *ptr = st == MF_OK && merge ? calloc((size_t)part->rows + 1, sizeof *ptr) : NULL;
    int32_t *row = st == MF_OK && !merge ? malloc(n1 * sizeof *row) : NULL;
    int32_t *col = st == MF_OK ? malloc(n1 * sizeof *col) : NULL;
    float *val = st == MF_OK ? malloc(n1 * sizeof *val) : NULL;
    if (st == MF_OK && (!recv || !(merge ? (void *)ptr : (void *)row) || !col || !val))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory to receive %lld entries",
                     fn, (long long)total);
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st == MF_OK)
        mf_ranks_touch_pages(ctx, recv, (size_t)total * sizeof *recv, 0);
    if (st == MF_OK)
        st = c->ops->alltoallv(c, ctx, send, send_bytes, recv, recv_bytes);
    free(send);
    t[2] = mf_seconds();
    /* Each rank sent its entries in its part's order (by row, then column): merging the
     * runs gives the canonical order, which the CSR keeps as it is instead of sorting on
     * one thread (4 s of a Netflix-sized split fit on 2 GPUs). */
    int32_t dup[2] = {-1, -1};
    if (st == MF_OK && merge) {
        const int merge_chunks = chunks_for(ctx, total);
        if (merge_into_csr(ctx, recv, from, size, part->rows, merge_chunks, ptr, col,
                           part->val ? val : NULL, dup) >= 0)
            st = MF_ERR_INVALID_DATA;
        free(recv);
        recv = NULL;
        t[3] = mf_seconds();
        if (st == MF_OK)
            st = mf_sparse_build_csr(ctx, out, part->rows, part->cols, total, ptr, col,
                                     part->val ? val : NULL, 0, fn);
    } else if (st == MF_OK) {
        copy_runs(recv, total, row, col, val);
        free(recv);
        recv = NULL;
        const mf_coo_view coo = {part->rows, part->cols, total, row, col, part->val ? val : NULL};
        st = mf_sparse_build_coo(ctx, out, &coo, 0, fn, dup);
    }
    if (st != MF_OK && dup[0] >= 0)
        st = mf_fail(ctx, MF_ERR_INVALID_DATA,
                     "%s: the entry (%d, %d) is in the parts of two ranks (a split matrix's "
                     "parts must not overlap)",
                     fn, dup[0], dup[1]);
    free(recv), free(ptr), free(row), free(col), free(val), free(counts);
    t[4] = mf_seconds();
    if (t[3] == 0.0)
        t[3] = t[2];
    mf_log(ctx, MF_LOG_INFO,
           "%s: rank %d: %lld entries to their %s' ranks in %d chunks: packed %.3f s, "
           "exchanged %.3f s, merged %.3f s, built %.3f s",
           fn, c->rank, (long long)total, side ? "items" : "users", chunks, t[1] - t[0],
           t[2] - t[1], t[3] - t[2], t[4] - t[3]);
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
