/* Number fields of text files: integers, decimals, exponents, special values, junk. */
#include <locale.h>
#include <math.h>
#include <stdlib.h>

#include "core/parse_num.h"
#include "testutil.h"

static int int_of(const char *s, int64_t *v)
{
    return mf_parse_int64(s, s + strlen(s), v);
}

static int float_of(const char *s, float *v)
{
    return mf_parse_float(s, s + strlen(s), v);
}

START_TEST(integers)
{
    int64_t v;
    ck_assert_int_eq(int_of("0", &v), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(int_of("-17", &v), 0);
    ck_assert_int_eq(v, -17);
    ck_assert_int_eq(int_of("+42", &v), 0);
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(int_of("9223372036854775807", &v), 0);
    ck_assert_int_eq(v, INT64_MAX);
    ck_assert_int_eq(int_of("9223372036854775808", &v), -2);
    ck_assert_int_eq(int_of("", &v), -1);
    ck_assert_int_eq(int_of("-", &v), -1);
    ck_assert_int_eq(int_of("12a", &v), -1);
    ck_assert_int_eq(int_of("1.0", &v), -1);
}
END_TEST

START_TEST(decimals_round_like_strtof)
{
    const char *cases[] = {
        "3",        "4.5",    "-0.25", "0.1", "2.5e-3", "1E+10",    "123.456",
        "0.000001", "3.4e38", "1e-45", ".5",  "7.",     "16777217", "0.30000000000000004"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float v;
        ck_assert_int_eq(float_of(cases[i], &v), 0);
        ck_assert_msg(v == strtof(cases[i], NULL), "%s read as %.9g, strtof gives %.9g", cases[i],
                      (double)v, (double)strtof(cases[i], NULL));
    }
}
END_TEST

START_TEST(special_and_bad_values)
{
    float v;
    ck_assert_int_eq(float_of("nan", &v), 0);
    ck_assert(isnan(v));
    ck_assert_int_eq(float_of("-Inf", &v), 0);
    ck_assert(isinf(v) && v < 0);
    ck_assert_int_eq(float_of("1e400", &v), 0);
    ck_assert(isinf(v));
    ck_assert_int_eq(float_of("0e400", &v), 0);
    ck_assert_float_eq(v, 0.0f);
    ck_assert_int_eq(float_of("", &v), -1);
    ck_assert_int_eq(float_of(".", &v), -1);
    ck_assert_int_eq(float_of("1e", &v), -1);
    ck_assert_int_eq(float_of("4,5", &v), -1);
    ck_assert_int_eq(float_of("abc", &v), -1);
    ck_assert_int_eq(float_of("--1", &v), -1);
}
END_TEST

START_TEST(locale_does_not_change_decimals)
{
    /* A host program with a comma-decimal locale must still read "3.5" as 3.5. */
    if (!setlocale(LC_NUMERIC, "de_DE.UTF-8") && !setlocale(LC_NUMERIC, "fr_FR.UTF-8"))
        return; /* no such locale installed: nothing to show */
    float v;
    ck_assert_int_eq(float_of("3.5", &v), 0);
    ck_assert_float_eq(v, 3.5f);
    setlocale(LC_NUMERIC, "C");
}
END_TEST

START_TEST(splitting_fields)
{
    const char *s[4], *e[4];
    ck_assert_int_eq(mf_split_fields("1::2::5::881250949", s, e, 4), 4);
    ck_assert_int_eq((int)(e[2] - s[2]), 1);
    ck_assert_int_eq(*s[2], '5');
    ck_assert_int_eq(mf_split_fields("  7,\t8 ,9\r", s, e, 4), 3);
    ck_assert_int_eq(*s[1], '8');
    ck_assert_int_eq(mf_split_fields("   ", s, e, 4), 0);
    ck_assert_int_eq(mf_split_fields("a b c d e f", s, e, 2), 6);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "parse"};
    const TTest *const tests[] = {integers, decimals_round_like_strtof, special_and_bad_values,
                                  locale_does_not_change_decimals, splitting_fields};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
