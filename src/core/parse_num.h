/* Number fields of text matrix files. Locale-independent (a host program's setlocale()
 * cannot change how "3.5" reads) and faster than strtod for the short decimals that
 * ratings files hold. */
#ifndef MF_CORE_PARSE_NUM_H
#define MF_CORE_PARSE_NUM_H

#include <stdbool.h>
#include <stdint.h>

/* Field separators: space, tab, comma, colon (so MovieLens "::"), semicolon, CR. */
static inline bool mf_is_separator(char c)
{
    return c == ' ' || c == '\t' || c == ',' || c == ':' || c == ';' || c == '\r';
}

static inline const char *mf_skip_separators(const char *p)
{
    while (mf_is_separator(*p))
        p++;
    return p;
}

/* The end of the field that starts at p. */
static inline const char *mf_field_end(const char *p)
{
    while (*p && !mf_is_separator(*p))
        p++;
    return p;
}

/* Parse the whole field [p, end) as a decimal integer: 0, or -1 when it is not one, or -2
 * when it does not fit in int64. */
int mf_parse_int64(const char *p, const char *end, int64_t *out);

/* Parse the whole field [p, end) as a decimal number ("4", "-3.5", "2.5e-3", "inf", "nan"):
 * 0, or -1 when it is not one. Out-of-range values become +-inf. Values with up to 15
 * significant digits and exponents within +-22 are correctly rounded to double before the
 * conversion to float. */
int mf_parse_float(const char *p, const char *end, float *out);

/* Whether the field [p, end) is `word` (lower case) in any case: "NaN", "MatrixMarket". */
bool mf_word_is(const char *p, const char *end, const char *word);

/* Split a line into up to max_fields fields (pointers to starts and ends); returns the
 * number of fields on the line, which may exceed max_fields. */
int mf_split_fields(const char *line, const char **start, const char **end, int max_fields);

#endif
