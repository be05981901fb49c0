/* Pairs: a count line "rows cols nnz" (or "n nnz" for an n x n graph, as SNAP edge lists
 * write it), then exactly nnz lines "row col", 0-based by default. Every pair is a 1: the
 * format of the Boolean data sets of the BMF literature (.in files). */
#include "core/ctx.h"
#include "core/parse_num.h"
#include "core/readers.h"
#include "core/text_reader.h"

static mf_status parse_count_line(mf_read_job *job, int64_t at, const char *line, int64_t *entries)
{
    const char *s[4], *e[4];
    int64_t v[3];
    int n = mf_split_fields(line, s, e, 4);
    if (n != 2 && n != 3)
        return mf_read_bad(job, at,
                           "expected a count line \"rows cols nnz\" or \"n nnz\", "
                           "found %d fields",
                           n);
    for (int i = 0; i < n; i++)
        if (mf_parse_int64(s[i], e[i], &v[i]) != 0 || v[i] < 0)
            return mf_read_bad(job, at, "count field %d is not a non-negative integer", i + 1);
    int64_t rows = v[0], cols = n == 3 ? v[1] : v[0];
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX)
        return mf_read_bad(job, at, "shape %lld x %lld is not within 1..%d", (long long)rows,
                           (long long)cols, INT32_MAX);
    if (job->rows == 0)
        job->rows = (int32_t)rows;
    if (job->cols == 0)
        job->cols = (int32_t)cols;
    job->shape_at = at;
    *entries = v[n - 1];
    return MF_OK;
}

mf_status mf_read_pairs(mf_read_job *job)
{
    mf_text_reader r;
    MF_TRY(mf_text_open(job->ctx, &r, job->in));
    if (job->base < 0)
        job->base = 0;
    int64_t entries = -1, seen = 0;
    mf_status st = MF_OK;
    char *line;
    int got = 0;
    while (st == MF_OK && (got = mf_text_next(job->ctx, &r, &line)) == 1) {
        const char *p = mf_skip_separators(line);
        if (*p == '\0' || *p == '#' || *p == '%')
            continue;
        if (entries < 0) {
            st = parse_count_line(job, r.line, line, &entries);
            if (st == MF_OK) /* a pair line: "i j" and its newline */
                st = mf_read_expect(job, r.line, entries, 4, "count line");
            continue;
        }
        const char *s[3], *e[3];
        int n = mf_split_fields(line, s, e, 3);
        int64_t i, j;
        char q[MF_EXCERPT_CAP];
        if (seen == entries)
            st = mf_read_bad(job, r.line, "more pairs than the %lld of the count line",
                             (long long)entries);
        else if (n != 2)
            st = mf_read_bad(job, r.line, "expected 2 fields \"row col\", found %d", n);
        else if (mf_parse_int64(s[0], e[0], &i) != 0)
            st = mf_read_bad(job, r.line, "row index %s is not an integer",
                             mf_read_excerpt(q, s[0], e[0]));
        else if (mf_parse_int64(s[1], e[1], &j) != 0)
            st = mf_read_bad(job, r.line, "column index %s is not an integer",
                             mf_read_excerpt(q, s[1], e[1]));
        else {
            st = mf_read_add(job, r.line, i, j, 1.0f);
            seen++;
        }
    }
    if (st == MF_OK && got < 0)
        st = r.status;
    if (st == MF_OK && entries < 0)
        st = mf_read_bad(job, r.line + 1, "the file ends before its count line");
    if (st == MF_OK && seen < entries)
        st = mf_read_bad(job, r.line, "the count line gives %lld pairs, the file ends after %lld",
                         (long long)entries, (long long)seen);
    mf_text_close(&r);
    return st;
}
