/* What every format reader calls (readers.h): the entry checks and the store, the header
 * counts against the file's size, the excerpt and the message of a malformed line. Apart
 * from read.c, which picks the reader and finishes the matrix, so that the readers and
 * their dispatcher do not call each other. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/readers.h"

mf_status mf_read_bad(mf_read_job *job, int64_t at, const char *fmt, ...)
{
    char detail[MF_ERROR_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (strcmp(job->unit, "line") == 0)
        return mf_fail(job->ctx, MF_ERR_INVALID_DATA, "%s:%lld: %s", job->path, (long long)at,
                       detail);
    return mf_fail(job->ctx, MF_ERR_INVALID_DATA, "%s: %s %lld: %s", job->path, job->unit,
                   (long long)at, detail);
}

const char *mf_read_excerpt(char buf[MF_EXCERPT_CAP], const char *s, const char *e)
{
    /* Room for the quotes, the escapes of MF_EXCERPT_BYTES bytes, "..." and the NUL. */
    _Static_assert(MF_EXCERPT_CAP >= 4 * MF_EXCERPT_BYTES + 6, "excerpt buffer too small");
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    buf[n++] = '"';
    for (const char *p = s; p < e && p < s + MF_EXCERPT_BYTES; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            buf[n++] = (char)c;
            continue;
        }
        buf[n++] = '\\';
        buf[n++] = 'x';
        buf[n++] = hex[c >> 4];
        buf[n++] = hex[c & 15];
    }
    buf[n++] = '"';
    if (e - s > MF_EXCERPT_BYTES)
        buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
    buf[n] = '\0';
    return buf;
}

/* Room for n more entries, growing by half again (overflow-checked; never from a header's
 * word alone: mf_read_expect caps hints by the file's size first). */
static mf_status grow(mf_read_job *job, int64_t n)
{
    if (n <= job->cap - job->nnz)
        return MF_OK;
    if (n > MF_READ_MAX_ENTRIES - job->nnz)
        return mf_fail(job->ctx, MF_ERR_INVALID_DATA, "%s: more than %lld entries", job->path,
                       (long long)MF_READ_MAX_ENTRIES);
    int64_t want = job->nnz + n, cap = job->cap + job->cap / 2; /* cap <= 2^40: no overflow */
    if (cap < want)
        cap = want;
    if (cap > MF_READ_MAX_ENTRIES)
        cap = MF_READ_MAX_ENTRIES;
    int32_t *row = realloc(job->row, (size_t)cap * sizeof *row);
    if (row)
        job->row = row;
    int32_t *col = row ? realloc(job->col, (size_t)cap * sizeof *col) : NULL;
    if (col)
        job->col = col;
    float *val = col && !job->pattern ? realloc(job->val, (size_t)cap * sizeof *val) : NULL;
    if (val)
        job->val = val;
    if (!row || !col || (!job->pattern && !val))
        return mf_fail(job->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory at %lld entries",
                       job->path, (long long)cap);
    job->cap = cap;
    return MF_OK;
}

mf_status mf_read_expect(mf_read_job *job, int64_t at, int64_t entries, int min_bytes,
                         const char *what)
{
    if (job->size >= 0 && entries > (job->size + 1) / min_bytes)
        return mf_read_bad(job, at,
                           "the %s claims %lld entries, but the file's %lld bytes hold at most "
                           "%lld",
                           what, (long long)entries, (long long)job->size,
                           (long long)((job->size + 1) / min_bytes));
    if (job->size < 0 || job->locate)
        return MF_OK; /* nothing bounds the claim: grow from what is read */
    return grow(job, entries);
}

/* Check one index against the base and any known extent; return it 0-based. */
static mf_status check_index(mf_read_job *job, int64_t at, const char *what, int64_t raw,
                             int32_t extent, bool from_opts, int32_t *out)
{
    if (raw < (job->base < 0 ? 0 : job->base))
        return mf_read_bad(job, at, "%s index %lld is below the index base %d", what,
                           (long long)raw, job->base < 0 ? 0 : job->base);
    int64_t v = job->base > 0 ? raw - job->base : raw;
    if (extent > 0 && job->base >= 0 && v >= extent)
        return mf_read_bad(job, at, "%s index %lld is outside the %d %ss %s", what, (long long)raw,
                           extent, what, from_opts ? "given in mf_read_opts" : "of the header");
    if (v > INT32_MAX - 1)
        return mf_read_bad(job, at, "%s index %lld does not fit in int32", what, (long long)raw);
    *out = (int32_t)v;
    return MF_OK;
}

mf_status mf_read_add(mf_read_job *job, int64_t at, int64_t row, int64_t col, float val)
{
    int32_t r = 0, c = 0; /* set by check_index; gcc -O3 cannot see that */
    MF_TRY(check_index(job, at, "row", row, job->rows, job->rows_from_opts, &r));
    MF_TRY(check_index(job, at, "column", col, job->cols, job->cols_from_opts, &c));
    if (!job->pattern && !isfinite(val))
        return mf_read_bad(job, at, "value %g is not finite", (double)val);
    if (job->locate) {
        /* The second pass after a rejected repeat: find its lines, keep nothing. */
        if (r == job->dup[0] && c == job->dup[1] && job->dup_seen < 2)
            job->dup_at[job->dup_seen++] = at;
        return MF_OK;
    }
    /* A part keeps every part_count-th entry, but sees them all (shape, base, ids). */
    job->entries++;
    const bool keep = job->part_count <= 1 || job->entry_no++ % job->part_count == job->part_index;
    if (keep && job->nnz == job->cap)
        MF_TRY(grow(job, job->cap < 4096 ? 4096 - job->cap : 1));
    if (keep) {
        job->row[job->nnz] = r;
        job->col[job->nnz] = c;
        if (!job->pattern)
            job->val[job->nnz] = val;
        job->nnz++;
    }
    if (r > job->max_row) {
        job->max_row = r;
        job->max_row_at = at;
    }
    if (c > job->max_col) {
        job->max_col = c;
        job->max_col_at = at;
    }
    int64_t lo = row < col ? row : col;
    if (lo < job->min_index)
        job->min_index = lo;
    return MF_OK;
}
