/* mf_sddmm, mf_spmm and mf_rmse on the CPU backend: hand-computed answers, alpha/beta
 * semantics, float64 references over the k values and patterns the GPU suite uses too,
 * the plan layout and tuning rules (plain C), and every bad argument. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>

#include "core/sparse.h"
#include "sddmm/sddmm_layout.h"
#include "sddmm/sddmm_round.h"
#include "sddmm/sddmm_tc_layout.h"
#include "sddmm/sddmm_tc_order.h"
#include "sddmm/sddmm_tuning.h"
#include "sddmm_fixtures.h"
#include "testutil.h"

static const int test_k[] = {1, 7, 32, 33, 128, 515};

/* S = [[2, 0, -1], [0, 0, 0], [0, 3, 0]], A = [[1, 2], [3, 4], [5, 6]],
 * B = [[1, 0], [0, 1], [1, 1]] (rows of B are columns of S). */
static mf_sparse *small_s(mf_ctx *ctx)
{
    int32_t r[] = {2, 0, 0}, c[] = {1, 2, 0};
    float v[] = {3, -1, 2};
    mf_sparse *S = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &S, 3, 3, 3, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    return S;
}
static const float small_a[] = {1, 2, 3, 4, 5, 6};
static const float small_b[] = {1, 0, 0, 1, 1, 1};

START_TEST(hand_computed)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *S = small_s(ctx);
    /* canonical order: (0,0), (0,2), (2,1); dots: A0.B0 = 1, A0.B2 = 3, A2.B1 = 6 */
    float out[3] = {NAN, NAN, NAN};
    ck_assert_int_eq(
        mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 1.0f, 0.0f, out, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_float_eq(out[0], 2.0f);  /* 2 * 1 */
    ck_assert_float_eq(out[1], -3.0f); /* -1 * 3 */
    ck_assert_float_eq(out[2], 18.0f); /* 3 * 6 */
    /* alpha and beta: out = 2 * s * dot + 0.5 * out */
    ck_assert_int_eq(
        mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 2.0f, 0.5f, out, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_float_eq(out[0], 5.0f);
    ck_assert_float_eq(out[1], -7.5f);
    ck_assert_float_eq(out[2], 45.0f);
    /* the pattern flag ignores the values; k = 1 uses only the first column */
    ck_assert_int_eq(mf_sddmm(ctx, S, 1, small_a, 2, small_b, 2, 1.0f, 0.0f, out, MF_MEMORY_HOST,
                              MF_SDDMM_PATTERN),
                     MF_OK);
    ck_assert_float_eq(out[0], 1.0f);
    ck_assert_float_eq(out[1], 1.0f);
    ck_assert_float_eq(out[2], 0.0f);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* TF32 as scaled fp16 (sddmm_round.h, what the CUDA copies do): for a row's largest in every
 * binade from 2^-64 to 2^63, each TF32 value within 28 binades below it fits, and times the
 * row's power is an fp16 normal value held exactly (fp16's own rounding leaves it), and
 * divided back gives the value; one binade further down a value with its last TF32 bit set
 * does not fit, and fp16 could not hold it. Largest outside [2^-64, 2^64), NaN and
 * infinities do not fit; an all-zero row has power 0. */
START_TEST(tf32_scaled_fp16_exact)
{
    uint64_t rng = 77;
    int e;
    ck_assert(mf_tf32_row_power(0, &e) && e == 0);
    ck_assert(!mf_tf32_row_power(mf_float_bits(0x1.ffcp-65f), &e)); /* below 2^-64 */
    ck_assert(!mf_tf32_row_power(mf_float_bits(0x1p64f), &e));
    ck_assert(!mf_tf32_row_power(mf_float_bits(INFINITY), &e));
    ck_assert(!mf_tf32_value_fits(mf_float_bits(INFINITY), mf_float_bits(1.f)));
    ck_assert(!mf_tf32_value_fits(mf_float_bits(NAN) & 0x7fffffffu, mf_float_bits(1.f)));
    ck_assert(mf_tf32_value_fits(0, mf_float_bits(0x1p60f)));
    for (int top_exp = -64; top_exp <= 63; top_exp++)
        for (int trial = 0; trial < 4; trial++) {
            /* a TF32 value: 10 stored mantissa bits */
            const uint32_t top_mant = (uint32_t)(tu_splitmix64(&rng) & 0x3ffu) << 13;
            const uint32_t top = (uint32_t)(top_exp + 127) << 23 | top_mant;
            ck_assert_msg(mf_tf32_row_power(top, &e), "largest 2^%d", top_exp);
            ck_assert(e >= -49 && e <= 78);
            const float scaled_top = ldexpf(mf_bits_float(top), e);
            ck_assert(scaled_top >= 0x1p14f && scaled_top < 0x1p15f);
            for (int below = 0; below <= 29; below++)
                for (int v = 0; v < 6; v++) {
                    uint32_t mant = (uint32_t)(tu_splitmix64(&rng) & 0x3ffu) << 13;
                    if (below == 29)
                        mant |= 1u << 13; /* the last TF32 bit: below fp16's normal range */
                    const uint32_t m = (uint32_t)(top_exp - below + 127) << 23 | mant;
                    const float x = (tu_splitmix64(&rng) & 1 ? -1.f : 1.f) * mf_bits_float(m);
                    ck_assert_float_eq(mf_round_tf32(x), x);
                    const float y = ldexpf(x, e);
                    if (below <= 28) {
                        ck_assert_msg(mf_tf32_value_fits(m, top), "2^%d, %d binades below", top_exp,
                                      below);
                        ck_assert(fabsf(y) >= 0x1p-14f && fabsf(y) <= 65504.f);
                        ck_assert_msg(mf_round_fp16(y) == y, "2^%d, %d below: %a not held", top_exp,
                                      below, (double)y);
                        ck_assert_float_eq(ldexpf(y, -e), x);
                    } else {
                        ck_assert(!mf_tf32_value_fits(m, top));
                        ck_assert(mf_round_fp16(y) != y);
                    }
                }
        }
}
END_TEST

/* The roundings on known values: TF32 ties away from zero, bf16 and fp16 to even; fp16's
 * subnormals and overflow. Then mf_sddmm_ex on a 1 x 1 product whose rounding shows. */
START_TEST(precisions_known_answers)
{
    ck_assert_float_eq(mf_round_tf32(1.0f + 0x1p-11f), 1.0f + 0x1p-10f); /* tie: away */
    ck_assert_float_eq(mf_round_tf32(-1.0f - 0x1p-11f), -1.0f - 0x1p-10f);
    ck_assert_float_eq(mf_round_tf32(1.0f + 0x1p-12f), 1.0f);
    ck_assert_float_eq(mf_round_bf16(1.0f + 0x1p-8f), 1.0f); /* tie: to even */
    ck_assert_float_eq(mf_round_bf16(1.0f + 0x1.8p-7f), 1.0f + 0x1p-6f);
    ck_assert_float_eq(mf_round_fp16(1.0f + 0x1p-11f), 1.0f); /* tie: to even */
    ck_assert_float_eq(mf_round_fp16(65504.0f), 65504.0f);
    ck_assert(isinf(mf_round_fp16(65520.0f)) && mf_round_fp16(-70000.0f) < 0);
    ck_assert_float_eq(mf_round_fp16(0x1.8p-24f), 0x1p-23f); /* subnormal spacing 2^-24 */
    ck_assert_float_eq(mf_round_fp16(0x1p-26f), 0.0f);
    ck_assert(isnan(mf_round_tf32(NAN)) && isnan(mf_round_bf16(NAN)) && isnan(mf_round_fp16(NAN)));

    mf_ctx *ctx = tu_cpu_ctx();
    int32_t r[] = {0}, c[] = {0};
    mf_sparse *S = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &S, 1, 1, 1, r, c, NULL, MF_MEMORY_HOST, 0), MF_OK);
    const float a[] = {1.0f + 0x1p-12f}, b[] = {1.0f};
    const struct {
        mf_precision p;
        float want;
    } cases[] = {{MF_PRECISION_FP32, 1.0f + 0x1p-12f},
                 {MF_PRECISION_3XTF32, 1.0f + 0x1p-12f}, /* small = 2^-12 carries it */
                 {MF_PRECISION_TF32, 1.0f},
                 {MF_PRECISION_BF16, 1.0f},
                 {MF_PRECISION_FP16, 1.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float out = NAN;
        ck_assert_int_eq(
            mf_sddmm_ex(ctx, S, 1, a, 1, b, 1, 1.0f, 0.0f, &out, MF_MEMORY_HOST, 0, cases[i].p),
            MF_OK);
        ck_assert_msg(out == cases[i].want, "precision %d: %a, want %a", (int)cases[i].p,
                      (double)out, (double)cases[i].want);
    }
    const float big[] = {70000.0f};
    float out = 0;
    ck_assert_int_eq(mf_sddmm_ex(ctx, S, 1, big, 1, b, 1, 1.0f, 0.0f, &out, MF_MEMORY_HOST, 0,
                                 MF_PRECISION_FP16),
                     MF_OK);
    ck_assert(isinf(out)); /* the header says so: beyond fp16's range */
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A reduced precision's result: within the header's bound of the float64 product of the
 * unrounded factors, within float accumulation (2 (k + 2) 2^-24) of the float64 product of
 * the rounded ones (the emulation is exact but for the sums), and visibly less accurate than
 * float (the rounding did happen). */
static void check_reduced(const char *what, const mf_sparse *S, int k, const float *A, int64_t lda,
                          const float *B, int64_t ldb, mf_precision prec, const float *out,
                          double beta, const float *before)
{
    int64_t nnz = S->nnz;
    double *ref = malloc((size_t)nnz * sizeof *ref), *bound = malloc((size_t)nnz * sizeof *bound),
           *slack = malloc((size_t)nnz * sizeof *slack);
    fx_sddmm_ref_rounded(S, k, A, lda, B, ldb, -1.5, 0, prec, ref, bound, slack);
    fx_check_relative(what, nnz, out, ref, bound, 2.0 * (k + 2) * ldexp(1.0, -24), NULL, beta,
                      before);
    fx_sddmm_ref(S, k, A, lda, B, ldb, -1.5, 0, ref, bound);
    double worst = fx_check_relative(what, nnz, out, ref, bound, fx_precision_bound(prec, k), slack,
                                     beta, before);
    if (prec != MF_PRECISION_3XTF32 && nnz > 100)
        ck_assert_msg(worst > ldexp(1.0, -16), "%s: error %.3g, as if unrounded", what, worst);
    free(ref), free(bound), free(slack);
}

/* Every precision on every pattern and k, with beta and with a NaN-poisoned out (beta = 0
 * must never read it): float against the float64 reference, the others as check_reduced. */
START_TEST(random_against_float64)
{
    mf_ctx *ctx = tu_cpu_ctx();
    for (int prec = MF_PRECISION_FP32; prec <= MF_PRECISION_FP16; prec++)
        for (int pi = 0; pi < FX_PATTERNS; pi++)
            for (size_t ki = 0; ki < sizeof test_k / sizeof *test_k; ki++) {
                int k = test_k[ki];
                int32_t rows = pi == FX_DENSE ? 40 : 300, cols = pi == FX_DENSE ? 50 : 200;
                mf_sparse *S = fx_matrix(ctx, (fx_pattern)pi, rows, cols, 0.05, 1, 11 + pi);
                int64_t nnz;
                mf_sparse_shape(S, NULL, NULL, &nnz);
                int64_t lda = k + 3, ldb = k; /* a padded A, a tight B */
                float *A = fx_floats(rows * lda, 100 + k), *B = fx_floats(cols * ldb, 200 + k);
                float *out = fx_floats(nnz, 7), *before = malloc((size_t)nnz * sizeof *before);
                double *ref = malloc((size_t)nnz * sizeof *ref),
                       *bound = malloc((size_t)nnz * sizeof *bound);
                memcpy(before, out, (size_t)nnz * sizeof *out);
                char what[96];
                snprintf(what, sizeof what, "cpu precision %d %s k=%d", prec,
                         fx_pattern_name((fx_pattern)pi), k);
                fx_sddmm_ref(S, k, A, lda, B, ldb, -1.5, 0, ref, bound);
                for (int pass = 0; pass < 2; pass++) {
                    float beta = pass ? 0.0f : 0.25f;
                    if (pass)
                        for (int64_t p = 0; p < nnz; p++)
                            out[p] = NAN;
                    mf_status st = prec == MF_PRECISION_FP32
                                       ? mf_sddmm(ctx, S, k, A, lda, B, ldb, -1.5f, beta, out,
                                                  MF_MEMORY_HOST, 0)
                                       : mf_sddmm_ex(ctx, S, k, A, lda, B, ldb, -1.5f, beta, out,
                                                     MF_MEMORY_HOST, 0, (mf_precision)prec);
                    ck_assert_int_eq(st, MF_OK);
                    if (prec == MF_PRECISION_FP32)
                        fx_check_sddmm(what, nnz, k, out, ref, bound, beta, pass ? NULL : before);
                    else
                        check_reduced(what, S, k, A, lda, B, ldb, (mf_precision)prec, out, beta,
                                      pass ? NULL : before);
                }
                free(A), free(B), free(out), free(before), free(ref), free(bound);
                mf_sparse_destroy(S);
            }
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments_leave_out_untouched)
{
    mf_ctx *ctx = tu_cpu_ctx(), *other = tu_cpu_ctx();
    mf_sparse *S = small_s(ctx), *T = small_s(other);
    float out[3] = {7, 8, 9};
    const float keep[3] = {7, 8, 9};
#define BAD(call, needle)                                                                          \
    do {                                                                                           \
        ck_assert_int_eq((call), MF_ERR_INVALID_ARGUMENT);                                         \
        tu_assert_error_has(ctx, needle);                                                          \
        ck_assert_mem_eq(out, keep, sizeof keep);                                                  \
    } while (0)
    BAD(mf_sddmm(ctx, S, 0, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0),
        "mf_sddmm: k = 0");
    BAD(mf_sddmm(ctx, S, -3, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "k = -3");
    BAD(mf_sddmm(ctx, S, 2, small_a, 1, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "lda = 1");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 1, 1, 0, out, MF_MEMORY_HOST, 0), "ldb = 1");
    /* a leading dimension whose span (rows - 1) * ld + k overflows the address space: */
    BAD(mf_sddmm(ctx, S, 2, small_a, INT64_MAX, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0),
        "lda = 9223372036854775807 over 3 rows spans more memory");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, INT64_MAX / 8, 1, 0, out, MF_MEMORY_HOST, 0),
        "ldb = 1152921504606846975 over 3 rows");
    BAD(mf_sddmm_ex(ctx, S, 2, small_a, 2, small_b, (int64_t)1 << 60, 1, 0, out, MF_MEMORY_HOST, 0,
                    MF_PRECISION_BF16),
        "mf_sddmm_ex: ldb = 1152921504606846976 over 3 rows");
    BAD(mf_sddmm(ctx, S, 2, NULL, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "A is NULL");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, NULL, 2, 1, 0, out, MF_MEMORY_HOST, 0), "B is NULL");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, NULL, MF_MEMORY_HOST, 0), "out is NULL");
    BAD(mf_sddmm(ctx, NULL, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "S is NULL");
    BAD(mf_sddmm(ctx, T, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0),
        "another context");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, NAN, 0, out, MF_MEMORY_HOST, 0), "finite");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 1, INFINITY, out, MF_MEMORY_HOST, 0), "finite");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 4), "unknown flags");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_DEVICE, 0), "CPU backend");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, out, (mf_memory)5, 0), "where = 5");
    BAD(mf_sddmm_ex(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0,
                    (mf_precision)5),
        "mf_sddmm_ex: precision = 5");
    BAD(mf_sddmm_ex(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0,
                    (mf_precision)-1),
        "precision = -1");
    BAD(mf_sddmm_ex(ctx, S, 0, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0,
                    MF_PRECISION_TF32),
        "mf_sddmm_ex: k = 0");
    ck_assert_int_eq(mf_sddmm(NULL, S, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "ctx is NULL"));
    ck_assert_mem_eq(out, keep, sizeof keep);

    double rmse = -1;
#define BAD_RMSE(call, needle)                                                                     \
    do {                                                                                           \
        ck_assert_int_eq((call), MF_ERR_INVALID_ARGUMENT);                                         \
        tu_assert_error_has(ctx, needle);                                                          \
        ck_assert(rmse == -1);                                                                     \
    } while (0)
    BAD_RMSE(mf_rmse(ctx, S, 0, small_a, 2, small_b, 2, MF_MEMORY_HOST, &rmse), "mf_rmse: k = 0");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 1, small_b, 2, MF_MEMORY_HOST, &rmse), "lda = 1");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, -2, small_b, 2, MF_MEMORY_HOST, &rmse), "lda = -2");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 2, small_b, 1, MF_MEMORY_HOST, &rmse), "ldb = 1");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, INT64_MAX / 2, small_b, 2, MF_MEMORY_HOST, &rmse),
             "lda = 4611686018427387903 over 3 rows spans more memory");
    BAD_RMSE(mf_rmse(ctx, S, 2, NULL, 2, small_b, 2, MF_MEMORY_HOST, &rmse), "A is NULL");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 2, NULL, 2, MF_MEMORY_HOST, &rmse), "B is NULL");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 2, small_b, 2, MF_MEMORY_HOST, NULL), "rmse is NULL");
    BAD_RMSE(mf_rmse(ctx, NULL, 2, small_a, 2, small_b, 2, MF_MEMORY_HOST, &rmse),
             "ratings is NULL");
    BAD_RMSE(mf_rmse(ctx, T, 2, small_a, 2, small_b, 2, MF_MEMORY_HOST, &rmse), "another context");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 2, small_b, 2, MF_MEMORY_DEVICE, &rmse), "CPU backend");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 2, small_b, 2, (mf_memory)5, &rmse), "where = 5");
#undef BAD_RMSE

    float y[6] = {1, 2, 3, 4, 5, 6};
    const float ykeep[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, S, 0, 1, small_a, 2, 0, y, 2, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "n = 0");
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, S, 2, 1, small_a, 1, 0, y, 2, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ldx = 1");
    ck_assert_int_eq(
        mf_spmm(ctx, MF_OP_N, S, 2, 1, small_a, INT64_MAX / 2, 0, y, 2, MF_MEMORY_HOST),
        MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ldx = 4611686018427387903 over 3 rows spans more memory");
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_T, S, 2, 1, small_a, 2, 0, y, INT64_MAX, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ldy = 9223372036854775807 over 3 rows");
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, S, 2, 1, small_a, 2, 0, y, 1, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_spmm(ctx, (mf_op)2, S, 2, 1, small_a, 2, 0, y, 2, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "op = 2");
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, S, 2, 1, NULL, 2, 0, y, 2, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_spmm(ctx, MF_OP_N, T, 2, 1, small_a, 2, 0, y, 2, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_mem_eq(y, ykeep, sizeof ykeep);
#undef BAD
    mf_sparse_destroy(S);
    mf_sparse_destroy(T);
    mf_ctx_destroy(ctx);
    mf_ctx_destroy(other);
}
END_TEST

START_TEST(rmse_known_answer)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *S = small_s(ctx);
    /* predictions 1, 3, 6 against ratings 2, -1, 3: residuals 1, -4, -3 */
    double rmse = 0;
    ck_assert_int_eq(mf_rmse(ctx, S, 2, small_a, 2, small_b, 2, MF_MEMORY_HOST, &rmse), MF_OK);
    ck_assert_double_eq_tol(rmse, sqrt(26.0 / 3.0), 1e-6);
    /* the same factors in wider rows (padding that must not be read: NaN) */
    const float pad_a[] = {1, 2, NAN, 3, 4, NAN, 5, 6, NAN};
    const float pad_b[] = {1, 0, NAN, NAN, 0, 1, NAN, NAN, 1, 1};
    rmse = 0;
    ck_assert_int_eq(mf_rmse(ctx, S, 2, pad_a, 3, pad_b, 4, MF_MEMORY_HOST, &rmse), MF_OK);
    ck_assert_double_eq_tol(rmse, sqrt(26.0 / 3.0), 1e-6);
    /* k = 1 reads only the first column of each row: predictions 1, 1, 0 */
    ck_assert_int_eq(mf_rmse(ctx, S, 1, pad_a, 3, pad_b, 4, MF_MEMORY_HOST, &rmse), MF_OK);
    ck_assert_double_eq_tol(rmse, sqrt((1.0 + 4.0 + 9.0) / 3.0), 1e-6);
    /* an empty matrix has RMSE 0 */
    mf_sparse *E = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &E, 3, 3, 0, NULL, NULL, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_rmse(ctx, E, 2, small_a, 2, small_b, 2, MF_MEMORY_HOST, &rmse), MF_OK);
    ck_assert(rmse == 0.0);
    float out[1] = {42};
    ck_assert_int_eq(mf_sddmm(ctx, E, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_float_eq(out[0], 42.0f);
    mf_sparse_destroy(E);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* mf_rmse_ex: the RMSE of the residuals that mf_sddmm_ex makes in that precision (the
 * squares summed in double), mf_rmse itself at FP32, and a bad precision refused with the
 * result untouched. */
START_TEST(rmse_precisions)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int k = 33;
    mf_sparse *S = fx_matrix(ctx, FX_RANDOM, 300, 200, 0.05, 1, 17);
    int64_t nnz;
    mf_sparse_shape(S, NULL, NULL, &nnz);
    const int64_t lda = k + 3, ldb = k;
    float *A = fx_floats(300 * lda, 31), *B = fx_floats(200 * ldb, 32);
    float *resid = malloc((size_t)nnz * sizeof *resid);
    double plain = -1.0;
    ck_assert_int_eq(mf_rmse(ctx, S, k, A, lda, B, ldb, MF_MEMORY_HOST, &plain), MF_OK);
    for (int prec = MF_PRECISION_FP32; prec <= MF_PRECISION_FP16; prec++) {
        ck_assert_int_eq(mf_sparse_get_coo(S, NULL, NULL, resid, MF_MEMORY_HOST), MF_OK);
        ck_assert_int_eq(mf_sddmm_ex(ctx, S, k, A, lda, B, ldb, -1.0f, 1.0f, resid, MF_MEMORY_HOST,
                                     MF_SDDMM_PATTERN, (mf_precision)prec),
                         MF_OK);
        double sq = 0.0;
        for (int64_t p = 0; p < nnz; p++)
            sq += (double)resid[p] * resid[p];
        double rmse = -1.0;
        ck_assert_int_eq(
            mf_rmse_ex(ctx, S, k, A, lda, B, ldb, MF_MEMORY_HOST, (mf_precision)prec, &rmse),
            MF_OK);
        ck_assert_msg(fabs(rmse - sqrt(sq / (double)nnz)) <= 1e-12 * rmse,
                      "precision %d: %.17g vs %.17g", prec, rmse, sqrt(sq / (double)nnz));
        if (prec == MF_PRECISION_FP32)
            ck_assert(rmse == plain);
        else if (prec != MF_PRECISION_3XTF32)
            ck_assert_msg(rmse != plain, "precision %d: the float RMSE, as if unrounded", prec);
    }
    const int bad[] = {-1, 5, 99};
    for (int b = 0; b < 3; b++) {
        double rmse = -1.0;
        ck_assert_int_eq(
            mf_rmse_ex(ctx, S, k, A, lda, B, ldb, MF_MEMORY_HOST, (mf_precision)bad[b], &rmse),
            MF_ERR_INVALID_ARGUMENT);
        tu_assert_error_has(ctx, "mf_rmse_ex: precision");
        tu_assert_error_has(ctx, "not an mf_precision");
        ck_assert(rmse == -1.0);
    }
    free(A), free(B), free(resid);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(spmm_both_ops)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *S = fx_matrix(ctx, FX_LONG_ROW, 70, 50, 0.1, 1, 3);
    for (int64_t n = 1; n <= 33; n += 16) {
        fx_check_spmm(ctx, S, MF_OP_N, n);
        fx_check_spmm(ctx, S, MF_OP_T, n);
    }
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The layout covers every entry once, in item order within panels, and items never cross
 * a panel boundary or exceed the cap; grouped too, where a block's items also come by first
 * column and then by row (blocks of up to 300 items: the sort's partitioning runs), and the
 * same on 1 thread as on 4 (the matrix is large enough, 65,536 entries or
 * more, for the builder to use threads). */
START_TEST(layout_covers_every_entry_once)
{
    mf_ctx *ctx = tu_cpu_ctx_threads(4);
    mf_sparse *S = fx_matrix(ctx, FX_LONG_ROW, 2000, 3000, 0.015, 1, 9);
    ck_assert_int_ge(S->nnz, 65536);
    int32_t tjs[] = {1, 7, 64, 1000, 5000};
    for (size_t t = 0; t < 2 * sizeof tjs / sizeof *tjs; t++) {
        const int grouped = t >= sizeof tjs / sizeof *tjs;
        const int32_t tj = tjs[t % (sizeof tjs / sizeof *tjs)];
        mf_sddmm_layout L;
        ck_assert_int_eq(mf_sddmm_layout_build(ctx, S, tj, 64, 300, grouped, &L), MF_OK);
        ck_assert_int_eq(L.grouped, grouped);
        char *seen = calloc((size_t)S->nnz, 1);
        int64_t covered = 0;
        for (int64_t b = 0; b < L.n_blocks; b++) {
            const mf_sddmm_block *blk = &L.blocks[b];
            ck_assert_int_eq(blk->item_begin, covered);
            for (int64_t it = blk->item_begin; it < blk->item_begin + blk->item_count; it++) {
                const mf_sddmm_item *item = &L.items[it];
                ck_assert_int_gt(item->count, 0);
                ck_assert_int_le(item->count, 64);
                ck_assert_int_ge(item->begin, S->row_ptr[item->row]);
                ck_assert_int_le(item->begin + item->count, S->row_ptr[item->row + 1]);
                if (grouped && it > blk->item_begin) { /* by first column, then by row */
                    ck_assert_int_le(S->col[item[-1].begin], S->col[item->begin]);
                    if (S->col[item[-1].begin] == S->col[item->begin])
                        ck_assert_int_lt(item[-1].row, item->row);
                }
                for (int64_t p = item->begin; p < item->begin + item->count; p++) {
                    ck_assert_int_eq(S->col[p] / L.tj, blk->panel);
                    ck_assert_int_eq(seen[p], 0);
                    seen[p] = 1;
                }
            }
            covered += blk->item_count;
        }
        ck_assert_int_eq(covered, L.n_items);
        for (int64_t p = 0; p < S->nnz; p++)
            ck_assert_msg(seen[p], "tj %d%s: entry %lld not covered", tj, grouped ? " grouped" : "",
                          (long long)p);
        free(seen);
        if (grouped) { /* the order depends on S alone, not on the thread count: a copy of S
                        * (its own cached order) on one thread */
            mf_ctx *one = tu_cpu_ctx_threads(1);
            mf_sparse *S1 = NULL;
            ck_assert_int_eq(mf_sparse_from_csr(one, &S1, S->rows, S->cols, S->nnz, S->row_ptr,
                                                S->col, S->val, MF_MEMORY_HOST, 0),
                             MF_OK);
            mf_sddmm_layout L1;
            ck_assert_int_eq(mf_sddmm_layout_build(one, S1, tj, 64, 300, 1, &L1), MF_OK);
            ck_assert_int_eq(L1.n_items, L.n_items);
            ck_assert_int_eq(L1.n_blocks, L.n_blocks);
            ck_assert(!memcmp(L1.items, L.items, (size_t)L.n_items * sizeof *L.items));
            mf_sddmm_layout_free(&L1);
            mf_sparse_destroy(S1);
            mf_ctx_destroy(one);
        }
        mf_sddmm_layout_free(&L);
    }
    /* The grouped layouts' row order is kept on S: the same array for every later call, and
     * the order mf_tc_order_rows makes. */
    const int32_t *kept = NULL, *again = NULL;
    int64_t n = -1, n2 = -1;
    ck_assert_int_eq(mf_tc_order_rows_cached(ctx, S, MF_TC_ORDER_LENGTH_MINHASH, &kept, &n), MF_OK);
    ck_assert_int_eq(mf_tc_order_rows_cached(ctx, S, MF_TC_ORDER_LENGTH_MINHASH, &again, &n2),
                     MF_OK);
    ck_assert_ptr_eq(kept, again);
    ck_assert_int_eq(n, mf_tc_rows_with_entries(S));
    ck_assert_int_eq(n2, n);
    int32_t *fresh = malloc((size_t)n * sizeof *fresh);
    ck_assert_int_eq(mf_tc_order_rows(ctx, S, MF_TC_ORDER_LENGTH_MINHASH, fresh, n), MF_OK);
    ck_assert(!memcmp(fresh, kept, (size_t)n * sizeof *fresh));
    free(fresh);
    ck_assert_int_eq(mf_tc_order_rows_cached(ctx, S, MF_TC_ORDER_AUTO, &again, &n2),
                     MF_ERR_INTERNAL);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* k entries of a and b multiplied and added in order: the one dot product the emulation
 * below and its reference share, so that they agree bit for bit when each entry meets its
 * own row and column. */
/* Check records every passing ck_assert (a write to its pipe); the loops below run over
 * every entry of matrices of a million, so they test first and fail by hand. */
#define TC_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

static float ordered_dot(const float *a, const float *b, int k)
{
    float acc = 0.0f;
    for (int t = 0; t < k; t++)
        acc += a[t] * b[t];
    return acc;
}

/* Check a tensor-core layout of S and emulate the kernel on it (sddmm_tc_kernels.cuh: tile
 * column c and window row r give the entry at pos[r] plus the set mask bits before c):
 * every stored entry comes out once, at its canonical position, from the tile column and
 * window row that hold it; every row with entries is in exactly one window, 8 to a window
 * but the last, and empty rows in none; condensed columns ascend; units hold 1 to
 * MF_TC_UNIT_TILES tiles of one window; padding (columns, and rows repeating a short
 * window's first) has no mask bits. out[p] gets ordered_dot of A's row and B's row. */
static void check_tc_layout(const mf_sparse *S, const mf_tc_layout *L, int k, const float *A,
                            const float *B, float *out, const char *what)
{
    char *seen = calloc((size_t)S->nnz + 1, 1);
    int32_t *windows_of = calloc((size_t)S->rows + 1, sizeof *windows_of);
    ck_assert_ptr_nonnull(seen);
    ck_assert_ptr_nonnull(windows_of);
    int64_t nonempty = 0, tiles = 0;
    for (int32_t i = 0; i < S->rows; i++)
        nonempty += S->row_ptr[i + 1] > S->row_ptr[i];
    ck_assert_int_eq(L->n_windows, (nonempty + 7) / 8);
    ck_assert_int_ne(L->order, MF_TC_ORDER_AUTO);
    int64_t window = -1;
    for (int64_t u = 0; u < L->n_units; u++) {
        const mf_tc_unit *U = &L->units[u];
        TC_CHECK(U->tile_begin == tiles, "%s: U->tile_begin == tiles fails", what);
        TC_CHECK(U->n_tiles >= 1 && U->n_tiles <= MF_TC_UNIT_TILES, "%s: %d tiles", what,
                 U->n_tiles);
        TC_CHECK(U->window == window || U->window == window + 1, "%s: unit %lld of window %d", what,
                 (long long)u, U->window);
        int real = 0; /* the window's rows: distinct, then repeats of the first */
        while (real < MF_TC_WINDOW && (real == 0 || U->row[real] != U->row[0]))
            real++;
        for (int r = real; r < MF_TC_WINDOW; r++)
            TC_CHECK(U->row[r] == U->row[0], "%s: U->row[r] == U->row[0] fails", what);
        TC_CHECK(real == MF_TC_WINDOW || U->window == L->n_windows - 1,
                 "%s: window %d of %lld has %d rows", what, U->window, (long long)L->n_windows,
                 real);
        if (U->window != window) { /* a new window: its rows counted once */
            window = U->window;
            for (int r = 0; r < real; r++) {
                TC_CHECK(S->row_ptr[U->row[r] + 1] > S->row_ptr[U->row[r]],
                         "%s: S->row_ptr[U->row[r] + 1] > S->row_ptr[U->row[r]] fails", what);
                windows_of[U->row[r]]++;
            }
        }
        tiles += U->n_tiles;
        int64_t pos[MF_TC_WINDOW];
        memcpy(pos, U->pos, sizeof pos);
        for (int t = 0; t < U->n_tiles; t++) {
            const mf_tc_tile *T = &L->tiles[U->tile_begin + t];
            for (int r = real; r < MF_TC_WINDOW; r++)
                TC_CHECK(T->rowmask[r] == 0, "%s: T->rowmask[r] == 0 fails", what);
            for (int c = 0; c < MF_TC_TILE; c++) {
                if (c > 0 && T->col[c] <= T->col[c - 1]) /* padding: no row holds it */
                    for (int r = 0; r < MF_TC_WINDOW; r++)
                        TC_CHECK(((T->rowmask[r] >> c) & 1) == 0,
                                 "%s: (T->rowmask[r] >> c) & 1 == 0 fails", what);
                for (int r = 0; r < MF_TC_WINDOW; r++)
                    if ((T->rowmask[r] >> c) & 1) {
                        int64_t p = pos[r]++;
                        TC_CHECK(p >= S->row_ptr[U->row[r]], "%s: p >= S->row_ptr[U->row[r]] fails",
                                 what);
                        TC_CHECK(p < S->row_ptr[U->row[r] + 1],
                                 "%s: p < S->row_ptr[U->row[r] + 1] fails", what);
                        TC_CHECK(S->col[p] == T->col[c], "%s: S->col[p] == T->col[c] fails", what);
                        TC_CHECK(seen[p] == 0, "%s: seen[p] == 0 fails", what);
                        seen[p] = 1;
                        out[p] =
                            ordered_dot(A + (int64_t)U->row[r] * k, B + (int64_t)T->col[c] * k, k);
                    }
            }
        }
    }
    ck_assert_int_eq(window, L->n_windows - 1);
    ck_assert_int_eq(tiles, L->n_tiles);
    for (int64_t p = 0; p < S->nnz; p++)
        TC_CHECK(seen[p], "%s: entry %lld not covered", what, (long long)p);
    for (int32_t i = 0; i < S->rows; i++)
        TC_CHECK(windows_of[i] == (S->row_ptr[i + 1] > S->row_ptr[i]),
                 "%s: row %d is in %d windows", what, i, windows_of[i]);
    free(seen);
    free(windows_of);
}

/* Build S's layout in every row order, check it, and check that the emulated results are
 * the reference's bit for bit (so equal across orders); returns the tiles per order. */
static void check_every_order(mf_ctx *ctx, const mf_sparse *S, int k, const char *name,
                              int64_t tiles[MF_TC_ORDERS])
{
    float *A = fx_floats((int64_t)S->rows * k, 1), *B = fx_floats((int64_t)S->cols * k, 2);
    float *out = malloc(((size_t)S->nnz + 1) * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int o = 0; o < MF_TC_ORDERS; o++) {
        char what[128];
        snprintf(what, sizeof what, "%s, %s order", name, mf_tc_order_name((mf_tc_order)o));
        mf_tc_layout L;
        ck_assert_int_eq(mf_tc_layout_build(ctx, S, (mf_tc_order)o, &L), MF_OK);
        if (o != MF_TC_ORDER_AUTO)
            ck_assert_int_eq(L.order, o);
        for (int64_t p = 0; p < S->nnz; p++)
            out[p] = NAN;
        check_tc_layout(S, &L, k, A, B, out, what);
        for (int32_t i = 0; i < S->rows; i++)
            for (int64_t p = S->row_ptr[i]; p < S->row_ptr[i + 1]; p++) {
                float want = ordered_dot(A + (int64_t)i * k, B + (int64_t)S->col[p] * k, k);
                TC_CHECK(memcmp(&out[p], &want, sizeof want) == 0,
                         "%s: entry %lld (%d, %d) = %.9g, its own dot %.9g", what, (long long)p, i,
                         S->col[p], (double)out[p], (double)want);
            }
        tiles[o] = L.n_tiles;
        /* AUTO counts index order's tiles and keeps an order with no more */
        if (o == MF_TC_ORDER_AUTO) {
            ck_assert_int_eq(L.natural_tiles, tiles[MF_TC_ORDER_NATURAL]);
            ck_assert_int_le(L.n_tiles, tiles[MF_TC_ORDER_NATURAL]);
            ck_assert_int_eq(L.n_tiles, tiles[L.order]);
        }
        mf_tc_layout_free(&L);
    }
    free(A), free(B), free(out);
}

START_TEST(tensor_core_layout_covers_every_entry_once)
{
    mf_ctx *ctx = tu_cpu_ctx();
    for (int pi = 0; pi < FX_PATTERNS; pi++) {
        mf_sparse *S = fx_matrix(ctx, (fx_pattern)pi, 301, 500, 0.03, 1, 70 + pi);
        int64_t tiles[MF_TC_ORDERS];
        check_every_order(ctx, S, 7, fx_pattern_name((fx_pattern)pi), tiles);
        mf_sparse_destroy(S);
    }
    mf_ctx_destroy(ctx);
}
END_TEST

/* Rows of 8 interleaved groups: in index order each window holds one row of every group (a
 * tile column is one row's: density near 1/8), grouped each window one group's rows (about
 * half of them hold each column: near 1/2). AUTO must find that. */
START_TEST(tensor_core_grouping_fills_tiles)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *S = fx_interleaved_groups(ctx, 1000, 1600, 8, 3);
    int64_t tiles[MF_TC_ORDERS];
    check_every_order(ctx, S, 5, "interleaved groups", tiles);
    double natural = (double)S->nnz / (128.0 * tiles[MF_TC_ORDER_NATURAL]);
    double best = (double)S->nnz / (128.0 * tiles[MF_TC_ORDER_AUTO]);
    ck_assert_msg(natural < 0.14 && best > 0.3, "density %.3f in index order, %.3f under AUTO",
                  natural, best);
    ck_assert_int_le(tiles[MF_TC_ORDER_MINHASH], tiles[MF_TC_ORDER_NATURAL] / 3);
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The grouped orders do not depend on the thread count: 20,000 rows sort in parallel parts
 * merged pairwise with 4 threads, in one qsort with 1; the layouts must be equal byte for
 * byte. */
START_TEST(tensor_core_orders_thread_independent)
{
    mf_ctx *ctx[2];
    for (int c = 0; c < 2; c++) {
        mf_ctx_opts o;
        mf_ctx_opts_init(&o);
        o.backend = MF_BACKEND_CPU;
        o.cpu_threads = c ? 4 : 1;
        ck_assert_int_eq(mf_ctx_create(&ctx[c], &o), MF_OK);
    }
    mf_sparse *S = fx_matrix(ctx[0], FX_POWER_LAW, 20000, 300, 0.02, 0, 12);
    for (int o = MF_TC_ORDER_LENGTH_MINHASH; o <= MF_TC_ORDER_MINHASH; o++) {
        mf_tc_layout L[2];
        for (int c = 0; c < 2; c++)
            ck_assert_int_eq(mf_tc_layout_build(ctx[c], S, (mf_tc_order)o, &L[c]), MF_OK);
        ck_assert_int_eq(L[0].n_units, L[1].n_units);
        ck_assert_int_eq(L[0].n_tiles, L[1].n_tiles);
        ck_assert(memcmp(L[0].units, L[1].units, (size_t)L[0].n_units * sizeof *L[0].units) == 0);
        ck_assert(memcmp(L[0].tiles, L[1].tiles, (size_t)L[0].n_tiles * sizeof *L[0].tiles) == 0);
        mf_tc_layout_free(&L[0]);
        mf_tc_layout_free(&L[1]);
    }
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx[0]);
    mf_ctx_destroy(ctx[1]);
}
END_TEST

/* A matrix from CSR arrays with the given row lengths, row i's columns spread over cols
 * (step cols / len, from i), so that long rows reach the last columns. */
static mf_sparse *spread_rows(mf_ctx *ctx, int32_t rows, int32_t cols, const int64_t *len)
{
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr), nnz = 0;
    ck_assert_ptr_nonnull(ptr);
    ptr[0] = 0;
    for (int32_t i = 0; i < rows; i++)
        ptr[i + 1] = nnz += len[i];
    int32_t *col = malloc(((size_t)nnz + 1) * sizeof *col);
    ck_assert_ptr_nonnull(col);
    for (int32_t i = 0; i < rows; i++) {
        int64_t step = len[i] > 0 ? cols / len[i] : 1;
        for (int64_t t = 0; t < len[i]; t++)
            col[ptr[i] + t] = (int32_t)((i % step) + t * step);
    }
    mf_sparse *S = NULL;
    ck_assert_int_eq(
        mf_sparse_from_csr(ctx, &S, rows, cols, nnz, ptr, col, NULL, MF_MEMORY_HOST, 0), MF_OK);
    free(ptr), free(col);
    return S;
}

/* Shapes the orders must survive: no entries; every row empty but one; one row far longer
 * than the rest; 2^25 columns, the long row's reaching past 2^24 (column ids past float's
 * exact integers and past 24-bit keys). */
START_TEST(tensor_core_orders_hostile_shapes)
{
    mf_ctx *ctx = tu_cpu_ctx();
    int64_t tiles[MF_TC_ORDERS];
    int64_t none[5] = {0, 0, 0, 0, 0}, one[5] = {0, 0, 0, 3, 0};
    mf_sparse *S = spread_rows(ctx, 5, 40, none);
    check_every_order(ctx, S, 3, "no entries", tiles);
    ck_assert_int_eq(tiles[MF_TC_ORDER_AUTO], 0);
    mf_sparse_destroy(S);
    S = spread_rows(ctx, 5, 40, one);
    check_every_order(ctx, S, 3, "one entry row", tiles);
    mf_sparse_destroy(S);
    int64_t *len = malloc(200 * sizeof *len);
    for (int i = 0; i < 200; i++)
        len[i] = i == 77 ? 150000 : i % 5 == 0 ? 0 : 1 + i % 13;
    S = spread_rows(ctx, 200, 300000, len);
    check_every_order(ctx, S, 2, "one huge row", tiles);
    mf_sparse_destroy(S);
    for (int i = 0; i < 20; i++)
        len[i] = i == 9 ? (1 << 20) + 5 : 3 + i;
    S = spread_rows(ctx, 20, (1 << 25) + 3, len);
    ck_assert_int_gt(S->col[S->row_ptr[10] - 1], 1 << 24);
    check_every_order(ctx, S, 1, "2^25 columns", tiles);
    mf_sparse_destroy(S);
    free(len);
    mf_ctx_destroy(ctx);
}
END_TEST

/* MFACT_SDDMM_TC_ORDER: unset or empty is AUTO, each name its order, anything else an error
 * that names the value. */
START_TEST(tensor_core_order_from_env)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_tc_order o = MF_TC_ORDER_NATURAL;
    unsetenv("MFACT_SDDMM_TC_ORDER");
    ck_assert_int_eq(mf_tc_order_from_env(ctx, &o), MF_OK);
    ck_assert_int_eq(o, MF_TC_ORDER_AUTO);
    for (int i = 0; i < MF_TC_ORDERS; i++) {
        setenv("MFACT_SDDMM_TC_ORDER", mf_tc_order_name((mf_tc_order)i), 1);
        ck_assert_int_eq(mf_tc_order_from_env(ctx, &o), MF_OK);
        ck_assert_int_eq(o, i);
    }
    setenv("MFACT_SDDMM_TC_ORDER", "sorted", 1);
    ck_assert_int_eq(mf_tc_order_from_env(ctx, &o), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(ctx), "'sorted'"));
    unsetenv("MFACT_SDDMM_TC_ORDER");
    mf_ctx_destroy(ctx);
}
END_TEST

/* Items are cut so that each virtual warp of a block gets about 8, within [16, 256]. */
START_TEST(item_length_rule)
{
    ck_assert_int_eq(mf_sddmm_item_nnz(4096, 8, MF_SDDMM_L2_THREADS), 16);
    ck_assert_int_eq(mf_sddmm_item_nnz(4096, 16, MF_SDDMM_L2_THREADS), 32);
    ck_assert_int_eq(mf_sddmm_item_nnz(4096, 32, MF_SDDMM_L2_THREADS), 64);
    ck_assert_int_eq(mf_sddmm_item_nnz(256, 32, MF_SDDMM_L2_THREADS), MF_SDDMM_ITEM_NNZ_MIN);
    ck_assert_int_eq(mf_sddmm_item_nnz(1 << 20, 8, MF_SDDMM_SM_THREADS), MF_SDDMM_ITEM_NNZ_MAX);
}
END_TEST

START_TEST(tuning_rules_offer_fitting_candidates)
{
    if (mf_sddmm_variant_count() == 0)
        return; /* built without CUDA: no variants */
    /* 256 and 512: the two-chunk candidates join the others. vec 2: the 16-bit copies
     * (unit16), whose rows are padded, so any k. */
    static const int ks[] = {1, 7, 32, 33, 128, 256, 512, 515};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int form = 0; form <= 2; form++) {
            int k = ks[ki], vec = form > 0, unit16 = form == 2;
            if (form == 1 && k % 4)
                continue;
            mf_sddmm_shape sh = {480189, 17770, 99000000, k, vec, 50 << 20, 227 << 10, 132, unit16};
            mf_sddmm_candidate c[MF_SDDMM_MAX_CANDIDATES];
            int n = mf_sddmm_candidates(&sh, c);
            ck_assert_int_ge(n, 1);
            /* room to spare: a full list would mean add() dropped candidates silently */
            ck_assert_msg(n < MF_SDDMM_MAX_CANDIDATES, "k = %d vec %d: %d candidates", k, vec, n);
            for (int i = 0; i < n; i++) {
                mf_sddmm_config cf = mf_sddmm_variant_config(c[i].variant);
                ck_assert_int_eq(cf.vec, vec);
                ck_assert_int_ge(c[i].tj, 1);
                ck_assert_int_le(c[i].tj, sh.cols);
                ck_assert_int_eq(c[i].item_nnz,
                                 mf_sddmm_item_nnz(c[i].block_nnz, cf.v, mf_sddmm_threads(cf)));
                if (cf.smem)
                    ck_assert_uint_le(mf_sddmm_smem_bytes(cf, c[i].tj), (size_t)sh.smem_bytes);
                ck_assert(!(unit16 && cf.smem)); /* no SM-SM instance reads the copies */
            }
            /* the first (untimed) candidate holds all of k in registers when some variant
             * can, in the narrowest chunk that does (no idle lanes: k = 32 on the copies is
             * one 16-byte unit for each of 4 lanes) */
            mf_sddmm_config first = mf_sddmm_variant_config(c[0].variant);
            const int most = unit16 ? 1024 : vec ? 512 : 128;
            if (k <= most) {
                ck_assert_int_ge(mf_sddmm_chunk_of(first, unit16), k);
                ck_assert_int_le(mf_sddmm_chunk_of(first, unit16), 2 * k < 32 ? 32 : 2 * k);
            }
        }
}
END_TEST

/* The SM-SM retry with smaller blocks: the same variant and tile, MF_SDDMM_SM_FINE_BLOCKS_PER_SM
 * blocks per SM where the matrix allows, items cut to match; a dense-ish shape (5% of 20,000
 * x 20,000) offers SM-SM candidates at every k. */
START_TEST(fine_block_rule)
{
    if (mf_sddmm_variant_count() == 0)
        return; /* built without CUDA: no variants */
    static const int ks[] = {32, 128, 512};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        mf_sddmm_shape sh = {20000, 20000, 19500000, ks[ki], 1, 50 << 20, 227 << 10, 132, 0};
        mf_sddmm_candidate c[MF_SDDMM_MAX_CANDIDATES];
        int n = mf_sddmm_candidates(&sh, c), smem = 0, fewer = 0;
        for (int i = 0; i < n; i++) {
            mf_sddmm_config cf = mf_sddmm_variant_config(c[i].variant);
            if (!cf.smem)
                continue;
            smem++;
            const int64_t wide = sh.nnz / (MF_SDDMM_SM_BLOCKS_PER_SM * sh.sms);
            ck_assert_int_eq(c[i].block_nnz, wide > 16 * c[i].tj ? wide : 16 * c[i].tj);
            mf_sddmm_candidate f = mf_sddmm_fine_candidate(&sh, c[i]);
            ck_assert_int_eq(f.variant, c[i].variant);
            ck_assert_int_eq(f.tj, c[i].tj);
            const int64_t want = sh.nnz / (MF_SDDMM_SM_FINE_BLOCKS_PER_SM * sh.sms);
            ck_assert_int_eq(f.block_nnz, want > 16 * c[i].tj ? want : 16 * c[i].tj);
            ck_assert_int_le(f.block_nnz, c[i].block_nnz);
            fewer += f.block_nnz < c[i].block_nnz;
            ck_assert_int_eq(f.item_nnz,
                             mf_sddmm_item_nnz(f.block_nnz, cf.v, mf_sddmm_threads(cf)));
            /* a small matrix keeps 16 entries per tile row: no smaller blocks to try */
            mf_sddmm_shape tiny = sh;
            tiny.nnz = 16 * (int64_t)c[i].tj * MF_SDDMM_SM_BLOCKS_PER_SM * sh.sms;
            mf_sddmm_candidate t = c[i];
            t.block_nnz = 16 * (int64_t)c[i].tj;
            ck_assert_int_eq(mf_sddmm_fine_candidate(&tiny, t).block_nnz, t.block_nnz);
        }
        ck_assert_int_gt(smem, 0);
        ck_assert_int_gt(fewer, 0); /* the narrow tiles (large Tk) do get smaller blocks */
    }
}
END_TEST

/* The tuning's recheck: the two fastest timings, timed again only when within the margin. */
START_TEST(recheck_pair_rule)
{
    int a, b;
    const float close[] = {2.0f, 1.0f, 3.0f, 1.05f};
    ck_assert_int_eq(mf_sddmm_recheck_pair(close, 4, &a, &b), 1);
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 3);
    const float apart[] = {1.0f, 1.2f, 5.0f};
    ck_assert_int_eq(mf_sddmm_recheck_pair(apart, 3, &a, &b), 0);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 1);
    const float tied[] = {1.5f, 1.5f};
    ck_assert_int_eq(mf_sddmm_recheck_pair(tied, 2, &a, &b), 1);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 1);
    const float at_margin[] = {MF_SDDMM_RECHECK_MARGIN * 2.0f, 2.0f};
    ck_assert_int_eq(mf_sddmm_recheck_pair(at_margin, 2, &a, &b), 1);
    ck_assert_int_eq(a, 1);
    ck_assert_int_eq(b, 0);
    const float one[] = {1.0f};
    ck_assert_int_eq(mf_sddmm_recheck_pair(one, 1, &a, &b), 0);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, -1);
    ck_assert_int_eq(mf_sddmm_recheck_pair(NULL, 0, &a, &b), 0);
    ck_assert_int_eq(a, -1);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "sddmm", .timeout = 120};
    const TTest *const tests[] = {hand_computed,
                                  random_against_float64,
                                  precisions_known_answers,
                                  tf32_scaled_fp16_exact,
                                  bad_arguments_leave_out_untouched,
                                  rmse_known_answer,
                                  rmse_precisions,
                                  spmm_both_ops,
                                  layout_covers_every_entry_once,
                                  tensor_core_layout_covers_every_entry_once,
                                  tensor_core_grouping_fills_tiles,
                                  tensor_core_orders_thread_independent,
                                  tensor_core_orders_hostile_shapes,
                                  tensor_core_order_from_env,
                                  item_length_rule,
                                  tuning_rules_offer_fitting_candidates,
                                  fine_block_rule,
                                  recheck_pair_rule};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
