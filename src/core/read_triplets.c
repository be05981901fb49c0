/* Triplet text: "row col [value [ignored fields...]]" per line with any of the separators
 * of parse_num.h (MovieLens "u::i::r::t", CSV, TSV, spaces). Comment lines start with '#'
 * or '%'. A first line that is not numeric is a header. Two fields make a pattern. Under
 * auto-detection a first line of two or three integers may be a count line (readers.h). */
#include "core/ctx.h"
#include "core/parse_num.h"
#include "core/readers.h"
#include "core/text_reader.h"
#include <string.h>

/* The first numeric line while it may still be a count line "n nnz" / "rows cols nnz". */
typedef struct candidate {
    bool held;
    int n; /* its fields: 2 or 3 */
    int64_t v[3];
    int64_t at;       /* its line */
    int64_t short_at; /* the first later line with two fields where it has three */
} candidate;

static bool hold_candidate(const mf_read_job *job, candidate *c, const char *const *s,
                           const char *const *e, int n, int64_t at)
{
    if (!job->count_line || (n != 2 && n != 3))
        return false;
    for (int i = 0; i < n; i++)
        if (mf_parse_int64(s[i], e[i], &c->v[i]) != 0 || c->v[i] < 0)
            return false;
    c->n = n;
    c->at = at;
    c->held = true;
    return true;
}

/* A held first line is a count line when its count is the number of entries after it and
 * its shape holds all of them (in whichever base the data turns out to have). */
static bool is_count_line(const mf_read_job *job, const candidate *c, int64_t after)
{
    int64_t rows = c->v[0], cols = c->n == 3 ? c->v[1] : c->v[0];
    if (c->v[c->n - 1] != after || rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX)
        return false;
    int64_t shift = job->base >= 0 || job->min_index == 0 || after == 0 ? 0 : 1;
    return job->max_row - shift < rows && job->max_col - shift < cols;
}

/* At the end: the held line becomes the shape, or the first entry it was after all, and
 * then, as a first entry does, it fixes the fields every line must have: `fields` is what
 * the lines after it had (0: none). */
static mf_status settle_candidate(mf_read_job *job, const candidate *c, int64_t after, int fields,
                                  bool values_wanted)
{
    if (!c->held)
        return MF_OK;
    /* The second pass (job->locate) repeats the first one's decision: it tracks no maxima. */
    if (job->locate ? job->count_line_taken : is_count_line(job, c, after)) {
        job->count_line_taken = true;
        if (job->rows == 0)
            job->rows = (int32_t)c->v[0];
        if (job->cols == 0)
            job->cols = (int32_t)(c->n == 3 ? c->v[1] : c->v[0]);
        job->shape_at = c->at;
        return MF_OK;
    }
    if (c->short_at > 0)
        return mf_read_bad(job, c->short_at, "expected 3 fields (as on the first entry), found 2");
    /* "1 1" then "2 2 4": a pattern line among rated ones is an error, not a pattern file
     * (which would drop every value). */
    if (c->n == 2 && fields == 3 && values_wanted)
        return mf_read_bad(job, c->at, "expected 3 fields (as on the entries after it), found 2");
    job->pattern = job->pattern || c->n == 2;
    int64_t before = job->nnz;
    /* The file's first entry: number 0 of a part's numbering, kept free when it was held. */
    const int64_t next = job->entry_no;
    job->entry_no = 0;
    mf_status st = mf_read_add(job, c->at, c->v[0], c->v[1], c->n == 3 ? (float)c->v[2] : 1.0f);
    job->entry_no = next;
    MF_TRY(st);
    if (job->nnz == before + 1 && before > 0) {
        /* Back to the front, where the file has it: repeats keep the file's order
         * (MF_SPARSE_KEEP_LAST keeps the later line). */
        int32_t r = job->row[before], col = job->col[before];
        memmove(job->row + 1, job->row, (size_t)before * sizeof *job->row);
        memmove(job->col + 1, job->col, (size_t)before * sizeof *job->col);
        job->row[0] = r, job->col[0] = col;
        if (!job->pattern) {
            float v = job->val[before];
            memmove(job->val + 1, job->val, (size_t)before * sizeof *job->val);
            job->val[0] = v;
        }
    }
    return MF_OK;
}

/* Whether a first field could be meant as a number (a digit, a sign or a point first): such
 * a first line is data, and an error if it is not an index ("1.5", "0x10"), never a header
 * to skip. */
static bool looks_numeric(const char *s, const char *e)
{
    return s < e && ((*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == '.');
}

mf_status mf_read_triplets(mf_read_job *job)
{
    mf_text_reader r;
    MF_TRY(mf_text_open(job->ctx, &r, job->in));
    /* Values the caller reads (not MF_SPARSE_PATTERN): only then can a line lose one. */
    const bool values_wanted = !job->pattern;
    mf_status st = MF_OK;
    int fields = 0; /* 2 or 3, fixed by the first entry */
    bool first = true;
    candidate cand = {0};
    int64_t after = 0; /* entries after the candidate */
    char *line;
    int got = 0;
    while (st == MF_OK && (got = mf_text_next(job->ctx, &r, &line)) == 1) {
        const char *s[3], *e[3];
        const char *p = mf_skip_separators(line);
        if (*p == '\0' || *p == '#' || *p == '%')
            continue;
        int n = mf_split_fields(line, s, e, 3);
        int64_t i, j;
        bool numeric = mf_parse_int64(s[0], e[0], &i) == 0;
        if (first && !looks_numeric(s[0], e[0])) {
            first = false; /* a header such as "userId,movieId,rating,timestamp" */
            continue;
        }
        if (first) {
            first = false;
            if (hold_candidate(job, &cand, s, e, n, r.line)) {
                /* Number 0 stays the held line's, whatever it turns out to be, so that the
                 * entries after it take their numbers in file order as they are read (a
                 * part keeps or drops each at once). */
                job->entry_no = 1;
                continue;
            }
        }
        if (fields == 0) {
            if (n < 2) {
                st = mf_read_bad(job, r.line, "expected \"row col [value]\", found 1 field");
                break;
            }
            fields = n >= 3 && values_wanted ? 3 : 2; /* a pattern asked for reads two */
            if (fields == 2)
                job->pattern = true;
        }
        if (cand.held && n < cand.n && cand.short_at == 0 && values_wanted)
            cand.short_at = r.line;
        if (n < fields) {
            st = mf_read_bad(job, r.line, "expected %d fields (as on the first entry), found %d",
                             fields, n);
            break;
        }
        if (fields == 2 && n > 2 &&
            values_wanted) { /* a rated line in a pattern: its value would be dropped */
            st = mf_read_bad(job, r.line,
                             "expected 2 fields (as on the first entry), found 3 or "
                             "more (a value in a pattern file)");
            break;
        }
        float v = 1.0f;
        char q[MF_EXCERPT_CAP];
        if (!numeric)
            st = mf_read_bad(job, r.line, "row index %s is not an integer",
                             mf_read_excerpt(q, s[0], e[0]));
        else if (mf_parse_int64(s[1], e[1], &j) != 0)
            st = mf_read_bad(job, r.line, "column index %s is not an integer",
                             mf_read_excerpt(q, s[1], e[1]));
        else if (fields == 3 && !job->pattern && mf_parse_float(s[2], e[2], &v) != 0)
            st = mf_read_bad(job, r.line, "value %s is not a number",
                             mf_read_excerpt(q, s[2], e[2]));
        else {
            st = mf_read_add(job, r.line, i, j, v);
            after++;
        }
    }
    if (st == MF_OK && got < 0)
        st = r.status;
    if (st == MF_OK)
        st = settle_candidate(job, &cand, after, fields, values_wanted);
    mf_text_close(&r);
    return st;
}
