/* MatrixMarket coordinate files: "%%MatrixMarket matrix coordinate <field> <symmetry>",
 * comment lines, a size line "rows cols entries", then one entry per line, 1-based. */
#include "core/ctx.h"
#include "core/parse_num.h"
#include "core/readers.h"
#include "core/text_reader.h"

typedef enum { MM_GENERAL, MM_SYMMETRIC, MM_SKEW } mm_symmetry;

static mf_status parse_banner(mf_read_job *job, const char *line, bool *pattern, mm_symmetry *sym)
{
    const char *s[6], *e[6];
    int n = mf_split_fields(line, s, e, 6);
    if (n < 5 || !mf_word_is(s[0], e[0], "%%matrixmarket"))
        return mf_read_bad(job, 1,
                           "expected \"%%%%MatrixMarket matrix coordinate <field> <symmetry>\"");
    if (!mf_word_is(s[1], e[1], "matrix"))
        return mf_read_bad(job, 1, "only MatrixMarket \"matrix\" objects are read");
    if (mf_word_is(s[2], e[2], "array"))
        return mf_fail(job->ctx, MF_ERR_UNSUPPORTED,
                       "%s:1: dense \"array\" MatrixMarket files are not read; mfact reads "
                       "\"coordinate\" files",
                       job->path);
    if (!mf_word_is(s[2], e[2], "coordinate"))
        return mf_read_bad(job, 1, "format must be \"coordinate\"");
    if (mf_word_is(s[3], e[3], "complex"))
        return mf_fail(job->ctx, MF_ERR_UNSUPPORTED,
                       "%s:1: complex MatrixMarket files are not read", job->path);
    *pattern = mf_word_is(s[3], e[3], "pattern");
    if (!*pattern && !mf_word_is(s[3], e[3], "real") && !mf_word_is(s[3], e[3], "integer") &&
        !mf_word_is(s[3], e[3], "double"))
        return mf_read_bad(job, 1, "field must be real, integer or pattern");
    if (mf_word_is(s[4], e[4], "general"))
        *sym = MM_GENERAL;
    else if (mf_word_is(s[4], e[4], "symmetric"))
        *sym = MM_SYMMETRIC;
    else if (mf_word_is(s[4], e[4], "skew-symmetric"))
        *sym = MM_SKEW;
    else if (mf_word_is(s[4], e[4], "hermitian"))
        return mf_fail(job->ctx, MF_ERR_UNSUPPORTED,
                       "%s:1: hermitian MatrixMarket files are not read", job->path);
    else
        return mf_read_bad(job, 1, "symmetry must be general, symmetric or skew-symmetric");
    return MF_OK;
}

static mf_status parse_size(mf_read_job *job, int64_t at, const char *line, int64_t *entries)
{
    const char *s[4], *e[4];
    int64_t v[3];
    int n = mf_split_fields(line, s, e, 4);
    if (n != 3)
        return mf_read_bad(job, at,
                           "expected the size line \"rows cols entries\", found %d "
                           "field%s",
                           n, n == 1 ? "" : "s");
    for (int i = 0; i < 3; i++)
        if (mf_parse_int64(s[i], e[i], &v[i]) != 0 || v[i] < 0)
            return mf_read_bad(job, at, "size field %d is not a non-negative integer", i + 1);
    if (v[0] < 1 || v[1] < 1 || v[0] > INT32_MAX || v[1] > INT32_MAX)
        return mf_read_bad(job, at, "shape %lld x %lld is not within 1..%d", (long long)v[0],
                           (long long)v[1], INT32_MAX);
    if (job->rows == 0)
        job->rows = (int32_t)v[0];
    if (job->cols == 0)
        job->cols = (int32_t)v[1];
    job->shape_at = at;
    *entries = v[2];
    return MF_OK;
}

static mf_status read_entries(mf_read_job *job, mf_text_reader *r, bool pattern, mm_symmetry sym,
                              int64_t entries)
{
    int want = pattern ? 2 : 3;
    int64_t seen = 0;
    char *line;
    int got;
    while ((got = mf_text_next(job->ctx, r, &line)) == 1) {
        const char *s[4], *e[4];
        int n = mf_split_fields(line, s, e, 4);
        if (n == 0 || line[0] == '%')
            continue;
        if (seen == entries)
            return mf_read_bad(job, r->line, "more entries than the %lld the size line gives",
                               (long long)entries);
        if (n != want)
            return mf_read_bad(job, r->line, "expected %d fields, found %d", want, n);
        int64_t i, j;
        float v = 1.0f;
        char q[MF_EXCERPT_CAP];
        if (mf_parse_int64(s[0], e[0], &i) != 0)
            return mf_read_bad(job, r->line, "row index %s is not an integer",
                               mf_read_excerpt(q, s[0], e[0]));
        if (mf_parse_int64(s[1], e[1], &j) != 0)
            return mf_read_bad(job, r->line, "column index %s is not an integer",
                               mf_read_excerpt(q, s[1], e[1]));
        if (!pattern && mf_parse_float(s[2], e[2], &v) != 0)
            return mf_read_bad(job, r->line, "value %s is not a number",
                               mf_read_excerpt(q, s[2], e[2]));
        MF_TRY(mf_read_add(job, r->line, i, j, v));
        if (sym != MM_GENERAL && i != j)
            MF_TRY(mf_read_add(job, r->line, j, i, sym == MM_SKEW ? -v : v));
        seen++;
    }
    if (got < 0)
        return r->status;
    if (seen < entries)
        return mf_read_bad(job, r->line,
                           "the size line gives %lld entries, the file ends "
                           "after %lld",
                           (long long)entries, (long long)seen);
    return MF_OK;
}

mf_status mf_read_matrix_market(mf_read_job *job)
{
    mf_text_reader r;
    MF_TRY(mf_text_open(job->ctx, &r, job->in));
    if (job->base < 0)
        job->base = 1;
    bool pattern = false;
    mm_symmetry sym = MM_GENERAL;
    int64_t entries = -1;
    char *line;
    int got = mf_text_next(job->ctx, &r, &line);
    mf_status st = got == 1 ? parse_banner(job, line, &pattern, &sym)
                            : mf_read_bad(job, 1, "empty file: expected a MatrixMarket banner");
    if (got < 0)
        st = r.status;
    while (st == MF_OK && entries < 0) {
        got = mf_text_next(job->ctx, &r, &line);
        if (got != 1) {
            st =
                got < 0 ? r.status : mf_read_bad(job, r.line, "the file ends before the size line");
            break;
        }
        const char *p = mf_skip_separators(line);
        if (*p == '\0' || *p == '%')
            continue;
        st = parse_size(job, r.line, line, &entries);
    }
    if (pattern)
        job->pattern = true;
    /* An entry line holds at least "i j" and its newline, "i j v" with a value. Symmetric
     * files grow past the claim as their mirrors are added. */
    if (st == MF_OK)
        st = mf_read_expect(job, r.line, entries, pattern ? 4 : 6, "size line");
    if (st == MF_OK)
        st = read_entries(job, &r, pattern, sym, entries);
    mf_text_close(&r);
    return st;
}
