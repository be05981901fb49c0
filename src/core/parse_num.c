#include "core/parse_num.h"

#include <math.h>
#include <string.h>

int mf_parse_int64(const char *p, const char *end, int64_t *out)
{
    bool negative = false;
    if (p < end && (*p == '-' || *p == '+'))
        negative = *p++ == '-';
    if (p == end)
        return -1;
    uint64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_C(9223372036854775807) - d) / 10)
            return -2;
        v = v * 10 + d;
    }
    *out = negative ? -(int64_t)v : (int64_t)v;
    return 0;
}

bool mf_word_is(const char *p, const char *end, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(end - p) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != word[i])
            return false;
    return true;
}

/* Exact powers of ten as doubles: 10^0 .. 10^22 are all representable. */
static const double exact_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

int mf_parse_float(const char *p, const char *end, float *out)
{
    bool negative = false;
    if (p < end && (*p == '-' || *p == '+'))
        negative = *p++ == '-';
    if (mf_word_is(p, end, "inf") || mf_word_is(p, end, "infinity")) {
        *out = negative ? -INFINITY : INFINITY;
        return 0;
    }
    if (mf_word_is(p, end, "nan")) {
        *out = NAN;
        return 0;
    }
    uint64_t mantissa = 0;
    int digits = 0, exponent = 0;
    bool any = false;
    for (; p < end && *p >= '0' && *p <= '9'; p++, any = true) {
        if (digits < 19) {
            mantissa = mantissa * 10 + (uint64_t)(*p - '0');
            digits += mantissa != 0;
        } else
            exponent++; /* digits past 19 only scale */
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++, any = true) {
            if (digits < 19) {
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
                digits += mantissa != 0;
                exponent--;
            }
        }
    }
    if (!any)
        return -1;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int64_t e;
        const char *q = p + 1;
        if (mf_parse_int64(q, end, &e) != 0)
            return -1;
        if (e > 100000)
            e = 100000;
        if (e < -100000)
            e = -100000;
        exponent += (int)e;
        p = end;
    }
    if (p != end)
        return -1;
    double v;
    if (mantissa == 0)
        v = 0.0;
    else if (mantissa < (UINT64_C(1) << 53) && exponent >= -22 && exponent <= 22)
        v = exponent >= 0 ? (double)mantissa * exact_pow10[exponent]
                          : (double)mantissa / exact_pow10[-exponent];
    else
        v = (double)mantissa * pow(10.0, exponent);
    *out = (float)(negative ? -v : v);
    return 0;
}

int mf_split_fields(const char *line, const char **start, const char **end, int max_fields)
{
    int n = 0;
    const char *p = mf_skip_separators(line);
    while (*p) {
        const char *e = mf_field_end(p);
        if (n < max_fields) {
            start[n] = p;
            end[n] = e;
        }
        n++;
        p = mf_skip_separators(e);
    }
    return n;
}
