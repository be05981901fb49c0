/* The readers on the real data sets of ../shared/data: shapes and counts as their README
 * gives them. Exits 77 (skipped) when the folder is absent, as in a user's fresh clone. */
#include <stdlib.h>

#include "testutil.h"

static mf_ctx *ctx;

static void setup(void)
{
    ctx = tu_cpu_ctx();
}

static void teardown(void)
{
    mf_ctx_destroy(ctx);
}

static mf_sparse *load(const char *relative, mf_format format)
{
    const char *path = tu_data_path(relative);
    ck_assert_msg(path != NULL, "%s missing", relative);
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.format = format;
    mf_sparse *m = NULL;
    mf_status st = mf_sparse_read(ctx, &m, path, &o);
    ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(ctx));
    return m;
}

START_TEST(movielens_100k)
{
    mf_sparse *m = load("ratings/ml-100k.tsv", MF_FORMAT_AUTO);
    tu_expect_shape(m, 943, 1682, 100000);
    float *v = malloc(100000 * sizeof *v);
    ck_assert_int_eq(mf_sparse_get_coo(m, NULL, NULL, v, MF_MEMORY_HOST), MF_OK);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        ck_assert(v[i] >= 1 && v[i] <= 5 && v[i] == (float)(int)v[i]);
        sum += v[i];
    }
    /* The mean rating of MovieLens 100K is 3.52986. */
    ck_assert_double_eq_tol(sum / 100000, 3.52986, 1e-5);
    free(v);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(filmtrust)
{
    /* FilmTrust repeats three (user, item) pairs: by default that is an error naming one,
     * and with MF_SPARSE_SUM_DUPLICATES the 35,497 lines make 35,494 entries. */
    const char *path = tu_data_path("ratings/filmtrust.txt");
    ck_assert_ptr_nonnull(path);
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_read(ctx, &m, path, NULL), MF_ERR_INVALID_DATA);
    ck_assert_ptr_null(m);
    tu_assert_error_has(ctx, ":17924: duplicate entry: row 308, column 12 repeats line 17849");
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.flags = MF_SPARSE_SUM_DUPLICATES;
    ck_assert_int_eq(mf_sparse_read(ctx, &m, path, &o), MF_OK);
    tu_expect_shape(m, 1508, 2071, 35494);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(boolean_sets)
{
    const struct {
        const char *file;
        int32_t rows, cols;
        int64_t ones;
    } sets[] = {{"bool/APatio.in", 1686, 962, 12080},
                {"bool/AOffice.in", 4905, 2420, 50402},
                {"bool/AMusic.in", 5541, 3568, 58905},
                {"bool/ATools.in", 16638, 10217, 124371},
                /* 10,817 pairs, of which 145 repeat an earlier one: they merge. */
                {"bool/20News.in", 11269, 61188, 10672},
                {"bool/c_salt_MovieRec.in", 4442, 1995, 326048}};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        mf_sparse *m = load(sets[i].file, MF_FORMAT_AUTO);
        tu_expect_shape(m, sets[i].rows, sets[i].cols, sets[i].ones);
        ck_assert_int_eq(mf_sparse_has_values(m), 0);
        mf_sparse_destroy(m);
    }
}
END_TEST

START_TEST(graphs)
{
    mf_sparse *m = load("graphs/facebook_combined.txt", MF_FORMAT_PAIRS);
    tu_expect_shape(m, 4039, 4039, 88234);
    mf_sparse_destroy(m);
    /* Symmetric MatrixMarket: stored triangle plus its mirror, diagonal once. */
    m = load("graphs/bcsstk13.mtx", MF_FORMAT_AUTO);
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(m, &rows, &cols, &nnz);
    ck_assert_int_eq(rows, 2003);
    ck_assert_int_eq(cols, 2003);
    ck_assert_int_eq(nnz, 2 * 42943 - 2003);
    mf_sparse_destroy(m);
    m = load("graphs/pushpull.mtx", MF_FORMAT_AUTO);
    mf_sparse_shape(m, &rows, &cols, &nnz);
    ck_assert_int_eq(rows, 4000);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    ck_assert_int_eq(nnz, 2 * 99208 - 2111); /* 2,111 entries on the diagonal */
    mf_sparse_destroy(m);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {
        .name = "real_data", .data = true, .setup = setup, .teardown = teardown};
    const TTest *const tests[] = {movielens_100k, filmtrust, boolean_sets, graphs};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
