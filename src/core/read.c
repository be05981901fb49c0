/* mf_sparse_read: options, format detection, the reader for the format (the entry checks
 * the readers share are in read_entries.c), and the hand-over of what it collected to the
 * canonical builder. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/opts.h"
#include "core/readers.h"
#include "core/sparse.h"

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void read_opts_defaults(mf_read_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->format = MF_FORMAT_AUTO;
    opts->index_base = -1;
}

MF_OPTS_INITIALIZERS(mf_read_opts, mf_read_opts_init, read_opts_defaults, flags)

static bool has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    return n >= k && strcmp(path + n - k, suffix) == 0;
}

/* The format from the file's first bytes and its name. The bytes looked at stay in `in` for
 * the reader: a pipe cannot be opened again. */
static mf_format detect_format(mf_input *in)
{
    mf_input_peek(in, 17);
    const unsigned char *head = in->head;
    size_t got = in->head_len;
    size_t skip = got >= 3 && memcmp(head, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0; /* UTF-8 BOM */
    if (got >= skip + 14 && memcmp(head + skip, "%%MatrixMarket", 14) == 0)
        return MF_FORMAT_MATRIX_MARKET;
    if (has_suffix(in->path, ".mtx"))
        return MF_FORMAT_MATRIX_MARKET;
    if (has_suffix(in->path, ".in"))
        return MF_FORMAT_PAIRS;
    if (has_suffix(in->path, ".bin"))
        return MF_FORMAT_BINARY_TRIPLETS;
    return MF_FORMAT_TRIPLETS;
}

/* Why a shape the file gave is refused: per-row and per-column arrays (the CSR's row
 * offsets, the transpose's column offsets, every algorithm's factors) scale with it, so a
 * 25-byte file naming index 2^31 - 2 would cost gigabytes. A caller who means such a shape
 * gives it in mf_read_opts. The limit counts every entry of the file, kept or not, so that
 * each part of a split read decides as the whole read does. */
static mf_status check_extent(mf_read_job *job, const char *what, int64_t extent, bool from_opts,
                              int64_t at, int64_t index)
{
    int64_t limit = MF_READ_FREE_EXTENT + MF_READ_EXTENT_PER_ENTRY * job->entries;
    if (from_opts || extent <= limit)
        return MF_OK;
    if (index < 0)
        return mf_read_bad(job, at,
                           "the header's %lld %ss are more than %lld for %lld entries (16 per "
                           "entry + 2^20): give the shape in mf_read_opts to read a matrix "
                           "this sparse",
                           (long long)extent, what, (long long)limit, (long long)job->entries);
    return mf_read_bad(job, at,
                       "%s index %lld makes %lld %ss, more than %lld for %lld entries (16 per "
                       "entry + 2^20): give the shape in mf_read_opts to read a matrix this "
                       "sparse",
                       what, (long long)index, (long long)extent, what, (long long)limit,
                       (long long)job->entries);
}

/* Settle base and shape from the data where the file and options left them open. */
static mf_status finish(mf_read_job *job)
{
    if (job->base < 0) {
        int base = job->min_index == 0 || job->nnz == 0 ? 0 : 1;
        if (base == 1)
            for (int64_t i = 0; i < job->nnz; i++) {
                job->row[i]--;
                job->col[i]--;
            }
        job->base = base;
        job->max_row -= base;
        job->max_col -= base;
    }
    if (job->rows > 0 && job->max_row >= job->rows)
        return mf_read_bad(job, job->max_row_at, "row index %lld is outside the %d rows given",
                           (long long)job->max_row + job->base, job->rows);
    if (job->cols > 0 && job->max_col >= job->cols)
        return mf_read_bad(job, job->max_col_at,
                           "column index %lld is outside the %d columns given",
                           (long long)job->max_col + job->base, job->cols);
    if (job->rows > 0)
        MF_TRY(check_extent(job, "row", job->rows, job->rows_from_opts, job->shape_at, -1));
    else
        MF_TRY(check_extent(job, "row", job->max_row + 1, false, job->max_row_at,
                            job->max_row + job->base));
    if (job->cols > 0)
        MF_TRY(check_extent(job, "column", job->cols, job->cols_from_opts, job->shape_at, -1));
    else
        MF_TRY(check_extent(job, "column", job->max_col + 1, false, job->max_col_at,
                            job->max_col + job->base));
    if (job->rows == 0)
        job->rows = (int32_t)(job->max_row + 1);
    if (job->cols == 0)
        job->cols = (int32_t)(job->max_col + 1);
    if (job->rows <= 0 || job->cols <= 0)
        return mf_fail(job->ctx, MF_ERR_INVALID_DATA,
                       "%s: the file has no entries and gives no shape", job->path);
    return MF_OK;
}

/* A file of ids: its shape is the maps' counts (each at least the map it started from),
 * or the options' where they give more. The maps are what is held in memory already, so
 * the shape needs no extent check. */
static mf_status settle_ids(mf_read_job *job, const mf_read_opts *o)
{
    const int32_t n[2] = {job->row_ids->n, job->col_ids->n};
    const int32_t given[2] = {o->rows, o->cols};
    static const char *const what[2] = {"row", "column"};
    for (int s = 0; s < 2; s++)
        if (given[s] > 0 && n[s] > given[s])
            return mf_fail(job->ctx, MF_ERR_INVALID_DATA,
                           "%s: %d distinct %s ids, more than the %d %ss given in mf_read_opts",
                           job->path, n[s], what[s], given[s], what[s]);
    job->rows = given[0] > n[0] ? given[0] : n[0];
    job->cols = given[1] > n[1] ? given[1] : n[1];
    job->rows_from_opts = job->cols_from_opts = true;
    return MF_OK;
}

static mf_status parse_file(mf_read_job *job, mf_format format)
{
    switch (format) {
    case MF_FORMAT_MATRIX_MARKET: return mf_read_matrix_market(job);
    case MF_FORMAT_PAIRS: return mf_read_pairs(job);
    case MF_FORMAT_BINARY_TRIPLETS: return mf_read_binary_triplets(job);
    default: return job->row_ids ? mf_read_ids(job) : mf_read_triplets(job);
    }
}

/* The builder refused a repeated (row, col): read the file again, keeping nothing, to
 * name the two places that give it, in the file's own numbering. A file that cannot be
 * read twice (a pipe: nothing would come, or a FIFO's open would wait for a new writer)
 * keeps the builder's message and gains the file's indices. */
static mf_status explain_repeat(const mf_read_job *first, mf_format format, const int32_t dup[2],
                                unsigned flags)
{
    mf_read_job job = *first;
    job.row = job.col = NULL;
    job.val = NULL;
    job.nnz = job.cap = 0;
    job.locate = true;
    job.dup[0] = dup[0], job.dup[1] = dup[1];
    mf_ctx *ctx = job.ctx;
    char first_error[MF_ERROR_CAPACITY];
    snprintf(first_error, sizeof first_error, "%s", mf_ctx_last_error(ctx));
    long long r = (long long)dup[0] + job.base, c = (long long)dup[1] + job.base;
    /* Ids: the file's own ("row u17, column 193609"). */
    char where[160];
    if (job.row_ids)
        snprintf(where, sizeof where, "row %.64s, column %.64s", mf_id_map_id(job.row_ids, dup[0]),
                 mf_id_map_id(job.col_ids, dup[1]));
    else
        snprintf(where, sizeof where, "row %lld, column %lld", r, c);
    if (!mf_input_rewind(job.in) || parse_file(&job, format) != MF_OK || job.dup_seen < 2)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s (%s as the file numbers them)", first_error,
                       where);
    /* Readers add entries in file order, but for a first line held back (read_triplets.c). */
    bool in_order = job.dup_at[0] < job.dup_at[1];
    int64_t a = in_order ? job.dup_at[0] : job.dup_at[1],
            b = in_order ? job.dup_at[1] : job.dup_at[0];
    if (flags & MF_SPARSE_SUM_DUPLICATES)
        return mf_read_bad(&job, b,
                           "the entries for %s (also at %s %lld) sum to a value that is not "
                           "finite",
                           where, job.unit, (long long)a);
    return mf_read_bad(&job, b,
                       "duplicate entry: %s repeats %s %lld (pass MF_SPARSE_SUM_DUPLICATES, "
                       "mfact --sum-duplicates, to sum repeats)",
                       where, job.unit, (long long)a);
}

mf_status mf_sparse_read(mf_ctx *ctx, mf_sparse **out, const char *path,
                         const mf_read_opts *user_opts)
{
    static const char fn[] = "mf_sparse_read";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, out, "%s: out is NULL", fn);
    MF_REQUIRE(ctx, path, "%s: path is NULL", fn);
    mf_read_opts o;
    mf_read_opts_init(&o);
    if (user_opts)
        MF_TRY(MF_OPTS_LOAD(ctx, mf_read_opts, &o, user_opts));
    MF_REQUIRE(ctx, o.format >= MF_FORMAT_AUTO && o.format <= MF_FORMAT_BINARY_TRIPLETS,
               "%s: format = %d is not an mf_format value", fn, (int)o.format);
    MF_REQUIRE(ctx, o.index_base >= -1 && o.index_base <= 1,
               "%s: index_base = %d; expected 0, 1 or -1", fn, o.index_base);
    MF_REQUIRE(ctx,
               o.part_count >= 0 &&
                   (o.part_count == 0 ? o.part_index == 0
                                      : o.part_index >= 0 && o.part_index < o.part_count),
               "%s: part_index = %d of part_count = %d; expected 0 <= part_index < part_count "
               "(or both 0)",
               fn, o.part_index, o.part_count);
    MF_REQUIRE(ctx, o.rows >= 0 && o.cols >= 0, "%s: rows = %d, cols = %d: negative shape", fn,
               o.rows, o.cols);
    MF_REQUIRE(ctx,
               (o.flags & ~(unsigned)(MF_SPARSE_SUM_DUPLICATES | MF_SPARSE_PATTERN |
                                      MF_SPARSE_KEEP_LAST)) == 0,
               "%s: unknown flags 0x%x", fn, o.flags);
    MF_REQUIRE(ctx, !(o.flags & MF_SPARSE_SUM_DUPLICATES) || !(o.flags & MF_SPARSE_KEEP_LAST),
               "%s: MF_SPARSE_SUM_DUPLICATES and MF_SPARSE_KEEP_LAST exclude each other", fn);

    const bool ids = o.map_ids || o.row_column || o.col_column || o.value_column || o.row_field ||
                     o.col_field || o.value_field || o.row_ids || o.col_ids;
    MF_REQUIRE(ctx, !ids || o.format == MF_FORMAT_AUTO || o.format == MF_FORMAT_TRIPLETS,
               "%s: ids are read from delimited text: format must be MF_FORMAT_AUTO or "
               "MF_FORMAT_TRIPLETS with map_ids",
               fn);
    MF_REQUIRE(ctx,
               !(o.row_column && o.row_field) && !(o.col_column && o.col_field) &&
                   !(o.value_column && o.value_field),
               "%s: a column is chosen by its name or by its position, not both", fn);
    MF_REQUIRE(ctx, o.row_field >= 0 && o.col_field >= 0 && o.value_field >= 0,
               "%s: row_field = %d, col_field = %d, value_field = %d: positions are 1-based, 0 "
               "unset",
               fn, o.row_field, o.col_field, o.value_field);
    MF_REQUIRE(ctx, !(o.value_column || o.value_field) || !(o.flags & MF_SPARSE_PATTERN),
               "%s: a value column with MF_SPARSE_PATTERN, which reads no values", fn);
    /* One open for detection and reader alike (input_file.h). */
    mf_input in;
    MF_TRY(mf_input_open(ctx, path, &in));
    mf_format format = ids                          ? MF_FORMAT_TRIPLETS
                       : o.format == MF_FORMAT_AUTO ? detect_format(&in)
                                                    : o.format;
    mf_read_job job;
    memset(&job, 0, sizeof job);
    job.ctx = ctx;
    job.path = path;
    job.in = &in;
    job.unit = format == MF_FORMAT_BINARY_TRIPLETS ? "record" : "line";
    job.size = in.size;
    job.base = o.index_base;
    job.rows = o.rows;
    job.cols = o.cols;
    job.rows_from_opts = o.rows > 0;
    job.cols_from_opts = o.cols > 0;
    job.pattern = (o.flags & MF_SPARSE_PATTERN) || format == MF_FORMAT_PAIRS;
    job.count_line = o.format == MF_FORMAT_AUTO && format == MF_FORMAT_TRIPLETS;
    job.max_row = job.max_col = -1;
    job.min_index = INT64_MAX;
    job.opts = &o;
    job.part_index = o.part_index;
    job.part_count = o.part_count;
    mf_status st = MF_OK;
    if (ids) {
        /* Dense indices from 0, checked against the maps' counts at the end. */
        job.base = 0;
        job.rows = job.cols = 0;
        job.count_line = false;
        job.row_ids = mf_id_map_clone(o.row_ids);
        job.col_ids = mf_id_map_clone(o.col_ids);
        if (!job.row_ids || !job.col_ids)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    }
    if (st == MF_OK)
        st = parse_file(&job, format);
    if (st == MF_OK && ids)
        st = settle_ids(&job, &o);
    if (st == MF_OK)
        st = finish(&job);
    if (st == MF_OK) {
        mf_coo_view coo = {job.rows, job.cols, job.nnz,
                           job.row,  job.col,  job.pattern ? NULL : job.val};
        /* A pairs file lists the ones of a Boolean matrix: a repeat is the same 1. */
        unsigned flags = format == MF_FORMAT_PAIRS ? o.flags | MF_SPARSE_SUM_DUPLICATES : o.flags;
        int32_t dup[2] = {-1, -1};
        st = mf_sparse_build_coo(ctx, out, &coo, flags, path, dup);
        if (st == MF_ERR_INVALID_DATA && dup[0] >= 0)
            st = explain_repeat(&job, format, dup, flags);
        if (st == MF_OK) {
            (*out)->index_base = job.base;
            (*out)->is_part = o.part_count > 1;
            (*out)->part_index = o.part_index, (*out)->part_count = o.part_count;
            (*out)->row_ids = job.row_ids, (*out)->col_ids = job.col_ids;
            job.row_ids = job.col_ids = NULL; /* the matrix's now */
        }
    }
    mf_id_map_destroy(job.row_ids);
    mf_id_map_destroy(job.col_ids);
    mf_input_close(&in);
    free(job.row);
    free(job.col);
    free(job.val);
    return st;
}

int mf_sparse_index_base(const mf_sparse *m)
{
    return m ? m->index_base : -1;
}

const mf_id_map *mf_sparse_row_ids(const mf_sparse *m)
{
    return m ? m->row_ids : NULL;
}

const mf_id_map *mf_sparse_col_ids(const mf_sparse *m)
{
    return m ? m->col_ids : NULL;
}
