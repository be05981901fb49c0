/* Triplet text: "row col [value [ignored fields...]]" per line with any of the separators
 * of parse_num.h (MovieLens "u::i::r::t", CSV, TSV, spaces). Comment lines start with '#'
 * or '%'. A first line that is not numeric is a header. Two fields make a pattern. */
#include "core/ctx.h"
#include "core/parse_num.h"
#include "core/readers.h"
#include "core/text_reader.h"

mf_status mf_read_triplets(mf_read_job *job)
{
    mf_text_reader r;
    MF_TRY(mf_text_open(job->ctx, &r, job->path));
    mf_status st = MF_OK;
    int fields = 0; /* 2 or 3, fixed by the first entry */
    bool first = true;
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
        if (first && !numeric) {
            first = false; /* a header such as "userId,movieId,rating,timestamp" */
            continue;
        }
        first = false;
        if (fields == 0) {
            if (n < 2) {
                st = mf_read_bad(job, r.line, "expected \"row col [value]\", found 1 field");
                break;
            }
            fields = n >= 3 ? 3 : 2;
            if (fields == 2)
                job->pattern = true;
        }
        if (n < fields) {
            st = mf_read_bad(job, r.line, "expected %d fields (as on the first entry), found %d",
                             fields, n);
            break;
        }
        float v = 1.0f;
        if (!numeric)
            st = mf_read_bad(job, r.line, "row index \"%.*s\" is not an integer",
                             (int)(e[0] - s[0]), s[0]);
        else if (mf_parse_int64(s[1], e[1], &j) != 0)
            st = mf_read_bad(job, r.line, "column index \"%.*s\" is not an integer",
                             (int)(e[1] - s[1]), s[1]);
        else if (fields == 3 && !job->pattern && mf_parse_float(s[2], e[2], &v) != 0)
            st = mf_read_bad(job, r.line, "value \"%.*s\" is not a number", (int)(e[2] - s[2]),
                             s[2]);
        else
            st = mf_read_add(job, r.line, i, j, v);
    }
    if (st == MF_OK && got < 0)
        st = r.status;
    mf_text_close(&r);
    return st;
}
