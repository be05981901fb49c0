/* Philox4x32-10 against Random123's known answers, and mf_random_uniform's guarantees:
 * element i depends on (seed, stream, i) alone, whatever n and the thread count. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "cuda/philox.h"
#include "testutil.h"

START_TEST(known_answers)
{
    /* Random123 kat_vectors: counter (4 words), key (2 words) -> output (4 words). */
    const uint32_t cases[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1}};
    for (int k = 0; k < 3; k++) {
        mf_philox_block c = {{cases[k][0], cases[k][1], cases[k][2], cases[k][3]}};
        mf_philox_block r = mf_philox4x32_10(c, cases[k][4], cases[k][5]);
        for (int j = 0; j < 4; j++)
            ck_assert_uint_eq(r.v[j], cases[k][6 + j]);
    }
}
END_TEST

static float *draw(mf_ctx *ctx, int64_t n, float lo, float hi, uint64_t seed, uint64_t stream)
{
    float *x = malloc((size_t)n * sizeof *x);
    ck_assert_int_eq(mf_random_uniform(ctx, x, n, lo, hi, seed, stream, MF_MEMORY_HOST), MF_OK);
    return x;
}

START_TEST(elements_are_independent_of_n_and_threads)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CPU;
    o.cpu_threads = 1;
    mf_ctx *one = NULL, *two = NULL;
    ck_assert_int_eq(mf_ctx_create(&one, &o), MF_OK);
    o.cpu_threads = 2;
    ck_assert_int_eq(mf_ctx_create(&two, &o), MF_OK);
    const int64_t n = 300001; /* large enough for the parallel path, not a multiple of 4 */
    float *a = draw(one, n, -1, 2, 42, 7);
    float *b = draw(two, n, -1, 2, 42, 7);
    float *c = draw(two, 10, -1, 2, 42, 7);
    ck_assert_int_eq(memcmp(a, b, (size_t)n * sizeof *a), 0);
    ck_assert_int_eq(memcmp(a, c, 10 * sizeof *a), 0);
    /* The same element straight from the block function. */
    mf_philox_block blk = mf_philox_stream_block(42, 7, 12345 / 4);
    float want = mf_philox_scale(mf_philox_unit_float(blk.v[12345 % 4]), -1, 2);
    ck_assert_float_eq(a[12345], want);
    free(a), free(b), free(c);
    mf_ctx_destroy(one);
    mf_ctx_destroy(two);
}
END_TEST

START_TEST(seeds_and_streams_differ)
{
    mf_ctx *ctx = tu_cpu_ctx();
    float *a = draw(ctx, 64, 0, 1, 1, 0);
    float *b = draw(ctx, 64, 0, 1, 2, 0);
    float *c = draw(ctx, 64, 0, 1, 1, 1);
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < 64; i++) {
        same_ab += a[i] == b[i];
        same_ac += a[i] == c[i];
    }
    ck_assert_int_lt(same_ab, 2);
    ck_assert_int_lt(same_ac, 2);
    free(a), free(b), free(c);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(uniform_range_and_moments)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int64_t n = 1000000;
    float *x = draw(ctx, n, 3, 5, 2024, 0);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert(x[i] >= 3 && x[i] < 5);
        sum += x[i];
        sq += (double)x[i] * x[i];
    }
    double mean = sum / n, var = sq / n - mean * mean;
    /* Uniform on [3, 5): mean 4, variance 1/3; the mean's standard error is 5.8e-4. */
    ck_assert_double_eq_tol(mean, 4.0, 4 * 5.8e-4);
    ck_assert_double_eq_tol(var, 1.0 / 3, 3e-3);
    free(x);
    /* A range so narrow that rounding would reach hi must still stay below it. */
    x = draw(ctx, 4096, 1.0f, nextafterf(1.0f, 2.0f), 9, 9);
    for (int i = 0; i < 4096; i++)
        ck_assert(x[i] == 1.0f);
    free(x);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments)
{
    mf_ctx *ctx = tu_cpu_ctx();
    float x[4] = {7, 7, 7, 7};
    ck_assert_int_eq(mf_random_uniform(ctx, x, -1, 0, 1, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_random_uniform(ctx, NULL, 4, 0, 1, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_random_uniform(ctx, x, 4, 1, 1, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "empty");
    ck_assert_int_eq(mf_random_uniform(ctx, x, 4, 0, INFINITY, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_random_uniform(ctx, x, 4, -FLT_MAX, FLT_MAX, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "wider than a float holds");
    ck_assert_int_eq(mf_random_uniform(ctx, x, INT64_MAX, 0, 1, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "n = 9223372036854775807 floats");
    ck_assert_int_eq(mf_random_uniform(ctx, x, INT64_MAX - 2, 0, 1, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_random_uniform(ctx, x, 4, 0, 1, 0, 0, MF_MEMORY_DEVICE),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_random_uniform(NULL, x, 4, 0, 1, 0, 0, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(x[i], 7); /* untouched */
    ck_assert_int_eq(mf_random_uniform(ctx, NULL, 0, 0, 1, 0, 0, MF_MEMORY_HOST), MF_OK);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "rng"};
    const TTest *const tests[] = {known_answers, elements_are_independent_of_n_and_threads,
                                  seeds_and_streams_differ, uniform_range_and_moments,
                                  bad_arguments};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
