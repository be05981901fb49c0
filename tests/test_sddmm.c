/* mf_sddmm, mf_spmm and mf_rmse on the CPU backend: hand-computed answers, alpha/beta
 * semantics, float64 references over the k values and patterns the GPU suite uses too,
 * the plan layout and tuning rules (plain C), and every bad argument. */
#include <math.h>

#include "core/sparse.h"
#include "sddmm/sddmm_layout.h"
#include "sddmm/sddmm_round.h"
#include "sddmm/sddmm_tc_layout.h"
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
    BAD(mf_sddmm(ctx, S, 0, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "k = 0");
    BAD(mf_sddmm(ctx, S, -3, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "k = -3");
    BAD(mf_sddmm(ctx, S, 2, small_a, 1, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0), "lda = 1");
    BAD(mf_sddmm(ctx, S, 2, small_a, 2, small_b, 1, 1, 0, out, MF_MEMORY_HOST, 0), "ldb = 1");
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
        "precision = 5");
    BAD(mf_sddmm_ex(ctx, S, 2, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0,
                    (mf_precision)-1),
        "precision = -1");
    BAD(mf_sddmm_ex(ctx, S, 0, small_a, 2, small_b, 2, 1, 0, out, MF_MEMORY_HOST, 0,
                    MF_PRECISION_TF32),
        "k = 0");
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
    BAD_RMSE(mf_rmse(ctx, S, 0, small_a, 2, small_b, 2, MF_MEMORY_HOST, &rmse), "k = 0");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 1, small_b, 2, MF_MEMORY_HOST, &rmse), "lda = 1");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, -2, small_b, 2, MF_MEMORY_HOST, &rmse), "lda = -2");
    BAD_RMSE(mf_rmse(ctx, S, 2, small_a, 2, small_b, 1, MF_MEMORY_HOST, &rmse), "ldb = 1");
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
 * a panel boundary or exceed the cap. */
START_TEST(layout_covers_every_entry_once)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *S = fx_matrix(ctx, FX_LONG_ROW, 500, 1000, 0.02, 1, 9);
    int32_t tjs[] = {1, 7, 64, 1000, 5000};
    for (size_t t = 0; t < sizeof tjs / sizeof *tjs; t++) {
        mf_sddmm_layout L;
        ck_assert_int_eq(mf_sddmm_layout_build(ctx, S, tjs[t], 64, 300, &L), MF_OK);
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
            ck_assert_msg(seen[p], "tj %d: entry %lld not covered", tjs[t], (long long)p);
        free(seen);
        mf_sddmm_layout_free(&L);
    }
    mf_sparse_destroy(S);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The tensor-core layout: every stored entry comes out once, at its canonical position, from
 * the tile column and window row that hold it; windows take 8 non-empty rows in order,
 * condensed columns ascend, units hold 1 to MF_TC_UNIT_TILES tiles of one window, and
 * padding (columns, rows) has no mask bits. */
START_TEST(tensor_core_layout_covers_every_entry_once)
{
    mf_ctx *ctx = tu_cpu_ctx();
    for (int pi = 0; pi < FX_PATTERNS; pi++) {
        mf_sparse *S = fx_matrix(ctx, (fx_pattern)pi, 301, 500, 0.03, 1, 70 + pi);
        mf_tc_layout L;
        ck_assert_int_eq(mf_tc_layout_build(ctx, S, &L), MF_OK);
        char *seen = calloc((size_t)S->nnz + 1, 1);
        int64_t nonempty = 0, tiles = 0;
        for (int32_t i = 0; i < S->rows; i++)
            nonempty += S->row_ptr[i + 1] > S->row_ptr[i];
        ck_assert_int_eq(L.n_windows, (nonempty + 7) / 8);
        for (int64_t u = 0; u < L.n_units; u++) {
            const mf_tc_unit *U = &L.units[u];
            ck_assert_int_eq(U->tile_begin, tiles);
            ck_assert(U->n_tiles >= 1 && U->n_tiles <= MF_TC_UNIT_TILES);
            tiles += U->n_tiles;
            int64_t pos[MF_TC_WINDOW];
            memcpy(pos, U->pos, sizeof pos);
            for (int t = 0; t < U->n_tiles; t++) {
                const mf_tc_tile *T = &L.tiles[U->tile_begin + t];
                for (int c = 0; c < MF_TC_TILE; c++) {
                    if (c > 0 && T->col[c] <= T->col[c - 1]) /* padding: no row holds it */
                        for (int r = 0; r < MF_TC_WINDOW; r++)
                            ck_assert_int_eq((T->rowmask[r] >> c) & 1, 0);
                    for (int r = 0; r < MF_TC_WINDOW; r++)
                        if ((T->rowmask[r] >> c) & 1) {
                            int64_t p = pos[r]++;
                            ck_assert_int_ge(p, S->row_ptr[U->row[r]]);
                            ck_assert_int_lt(p, S->row_ptr[U->row[r] + 1]);
                            ck_assert_int_eq(S->col[p], T->col[c]);
                            ck_assert_int_eq(seen[p], 0);
                            seen[p] = 1;
                        }
                }
            }
        }
        ck_assert_int_eq(tiles, L.n_tiles);
        for (int64_t p = 0; p < S->nnz; p++)
            ck_assert_msg(seen[p], "%s: entry %lld not covered", fx_pattern_name((fx_pattern)pi),
                          (long long)p);
        free(seen);
        mf_tc_layout_free(&L);
        mf_sparse_destroy(S);
    }
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
    for (size_t ki = 0; ki < sizeof test_k / sizeof *test_k; ki++)
        for (int vec = 0; vec <= 1; vec++) {
            int k = test_k[ki];
            if (vec && k % 4)
                continue;
            mf_sddmm_shape sh = {480189, 17770, 99000000, k, vec, 50 << 20, 227 << 10, 132};
            mf_sddmm_candidate c[MF_SDDMM_MAX_CANDIDATES];
            int n = mf_sddmm_candidates(&sh, c);
            ck_assert_int_ge(n, 1);
            for (int i = 0; i < n; i++) {
                mf_sddmm_config cf = mf_sddmm_variant_config(c[i].variant);
                ck_assert_int_eq(cf.vec, vec);
                ck_assert_int_ge(c[i].tj, 1);
                ck_assert_int_le(c[i].tj, sh.cols);
                ck_assert_int_eq(c[i].item_nnz,
                                 mf_sddmm_item_nnz(c[i].block_nnz, cf.v, mf_sddmm_threads(cf)));
                if (cf.smem)
                    ck_assert_uint_le(mf_sddmm_smem_bytes(cf, c[i].tj), (size_t)sh.smem_bytes);
            }
            /* the first (untimed) candidate holds all of k in registers when some variant can */
            mf_sddmm_config first = mf_sddmm_variant_config(c[0].variant);
            if (k <= (vec ? 512 : 128))
                ck_assert_int_ge(mf_sddmm_chunk(first), k);
        }
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "sddmm", .timeout = 120};
    const TTest *const tests[] = {hand_computed,
                                  random_against_float64,
                                  precisions_known_answers,
                                  bad_arguments_leave_out_untouched,
                                  rmse_known_answer,
                                  spmm_both_ops,
                                  layout_covers_every_entry_once,
                                  tensor_core_layout_covers_every_entry_once,
                                  item_length_rule,
                                  tuning_rules_offer_fitting_candidates};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
