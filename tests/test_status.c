/* Status strings and version queries. */
#include <stdio.h>

#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#define MFACT_HAVE_CUDA_TEXT "CUDA "
#else
#define MFACT_HAVE_CUDA_TEXT "cuda off"
#endif

START_TEST(every_status_has_its_own_string)
{
    const char *seen[MF_ERR_INTERNAL + 1];
    for (int s = MF_OK; s <= MF_ERR_INTERNAL; s++) {
        seen[s] = mf_status_string((mf_status)s);
        ck_assert_ptr_nonnull(seen[s]);
        ck_assert_str_ne(seen[s], "unknown status");
        for (int t = 0; t < s; t++)
            ck_assert_str_ne(seen[s], seen[t]);
    }
    ck_assert_str_eq(mf_status_string(MF_OK), "success");
    ck_assert_str_eq(mf_status_string(MF_ERR_OUT_OF_MEMORY), "out of memory");
    ck_assert_str_eq(mf_status_string((mf_status)999), "unknown status");
    ck_assert_str_eq(mf_status_string((mf_status)-1), "unknown status");
}
END_TEST

START_TEST(status_values_are_the_abi)
{
    /* Values are frozen: a renumbering would break every compiled caller. */
    ck_assert_int_eq(MF_ERR_INVALID_ARGUMENT, 1);
    ck_assert_int_eq(MF_ERR_INVALID_DATA, 2);
    ck_assert_int_eq(MF_ERR_OUT_OF_MEMORY, 3);
    ck_assert_int_eq(MF_ERR_NO_DEVICE, 4);
    ck_assert_int_eq(MF_ERR_UNSUPPORTED, 5);
    ck_assert_int_eq(MF_ERR_CUDA, 6);
    ck_assert_int_eq(MF_ERR_IO, 7);
    ck_assert_int_eq(MF_ERR_CANCELLED, 8);
    ck_assert_int_eq(MF_ERR_NUMERIC, 9);
    ck_assert_int_eq(MF_ERR_INTERNAL, 10);
}
END_TEST

START_TEST(version_matches_the_header)
{
    ck_assert_uint_eq(mf_version(), MF_VERSION_NUMBER);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", MF_VERSION_MAJOR, MF_VERSION_MINOR,
             MF_VERSION_PATCH);
    ck_assert_str_eq(mf_version_string(), expect);
    ck_assert_ptr_nonnull(strstr(mf_build_info(), expect));
    ck_assert_ptr_nonnull(strstr(mf_build_info(), MFACT_HAVE_CUDA_TEXT));
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "status"};
    const TTest *const tests[] = {every_status_has_its_own_string, status_values_are_the_abi,
                                  version_matches_the_header};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
