/* mf_sparse: canonical order, duplicates, patterns, CSR input, read-back, and every
 * validation error with the position it names and the caller's handle left untouched. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/sparse.h"
#include "testutil.h"

static mf_ctx *ctx;
static mf_sparse *const SENTINEL = (mf_sparse *)(uintptr_t)0x1234;

static void setup(void)
{
    ctx = tu_cpu_ctx();
}

static void teardown(void)
{
    mf_ctx_destroy(ctx);
}

/* Read m back as COO and compare with expected arrays. */
static void expect_coo(const mf_sparse *m, int64_t nnz, const int32_t *row, const int32_t *col,
                       const float *val)
{
    int64_t got_nnz = -1;
    ck_assert_int_eq(mf_sparse_shape(m, NULL, NULL, &got_nnz), MF_OK);
    ck_assert_int_eq(got_nnz, nnz);
    int32_t r[64], c[64];
    float v[64];
    ck_assert_int_le(nnz, 64);
    ck_assert_int_eq(mf_sparse_get_coo(m, r, c, v, MF_MEMORY_HOST), MF_OK);
    for (int64_t i = 0; i < nnz; i++) {
        ck_assert_int_eq(r[i], row[i]);
        ck_assert_int_eq(c[i], col[i]);
        ck_assert_float_eq(v[i], val[i]);
    }
}

START_TEST(coo_comes_out_in_canonical_order)
{
    const int32_t row[] = {2, 0, 2, 1, 0};
    const int32_t col[] = {1, 3, 0, 2, 0};
    const float val[] = {5, 2, 4, 3, 1};
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 3, 4, 5, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    const int32_t er[] = {0, 0, 1, 2, 2}, ec[] = {0, 3, 2, 0, 1};
    const float ev[] = {1, 2, 3, 4, 5};
    expect_coo(m, 5, er, ec, ev);
    int32_t rows, cols;
    ck_assert_int_eq(mf_sparse_shape(m, &rows, &cols, NULL), MF_OK);
    ck_assert_int_eq(rows, 3);
    ck_assert_int_eq(cols, 4);
    ck_assert_int_eq(mf_sparse_has_values(m), 1);
    int64_t ptr[4];
    int32_t c[5];
    float v[5];
    ck_assert_int_eq(mf_sparse_get_csr(m, ptr, c, v, MF_MEMORY_HOST), MF_OK);
    const int64_t eptr[] = {0, 2, 3, 5};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ptr[i], eptr[i]);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(patterns_read_as_ones)
{
    const int32_t row[] = {1, 0}, col[] = {0, 1};
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 2, 2, 2, row, col, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    const int32_t er[] = {0, 1}, ec[] = {1, 0};
    const float ev[] = {1, 1};
    expect_coo(m, 2, er, ec, ev);
    mf_sparse_destroy(m);
    ck_assert_int_eq(mf_sparse_has_values(NULL), -1);
    /* MF_SPARSE_PATTERN: valued input, no values kept, none read (a NaN is no error); a
     * repeat is an error unless MF_SPARSE_SUM_DUPLICATES merges it; CSR as COO. */
    const int32_t rr[] = {1, 0, 1}, rc[] = {0, 1, 0};
    const float rv[] = {NAN, 2, 3};
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &m, 2, 2, 3, rr, rc, rv, MF_MEMORY_HOST, MF_SPARSE_PATTERN),
        MF_ERR_INVALID_DATA); /* a repeat without MF_SPARSE_SUM_DUPLICATES */
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 2, 2, 3, rr, rc, rv, MF_MEMORY_HOST,
                                        MF_SPARSE_PATTERN | MF_SPARSE_SUM_DUPLICATES),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    expect_coo(m, 2, er, ec, ev);
    mf_sparse_destroy(m);
    const int64_t ptr[] = {0, 1, 2};
    ck_assert_int_eq(
        mf_sparse_from_csr(ctx, &m, 2, 2, 2, ptr, ec, rv, MF_MEMORY_HOST, MF_SPARSE_PATTERN),
        MF_OK);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    expect_coo(m, 2, er, ec, ev);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(duplicates_rejected_by_default)
{
    const int32_t row[] = {0, 1, 0}, col[] = {2, 1, 2};
    const float val[] = {1, 2, 3};
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 2, 3, 3, row, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, "duplicate entry at row 0, column 2");
}
END_TEST

START_TEST(duplicates_summed_on_request)
{
    const int32_t row[] = {0, 1, 0, 0}, col[] = {2, 1, 2, 2};
    const float val[] = {1, 2, 3, 0.5f};
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 2, 3, 4, row, col, val, MF_MEMORY_HOST,
                                        MF_SPARSE_SUM_DUPLICATES),
                     MF_OK);
    const int32_t er[] = {0, 1}, ec[] = {2, 1};
    const float ev[] = {4.5f, 2};
    expect_coo(m, 2, er, ec, ev);
    mf_sparse_destroy(m);
    /* A pattern's duplicates merge into one entry. */
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 2, 3, 4, row, col, NULL, MF_MEMORY_HOST,
                                        MF_SPARSE_SUM_DUPLICATES),
                     MF_OK);
    const float ones[] = {1, 1};
    expect_coo(m, 2, er, ec, ones);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(summed_duplicates_must_stay_finite)
{
    const int32_t row[] = {0, 0}, col[] = {0, 0};
    const float val[] = {3e38f, 3e38f};
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 1, 1, 2, row, col, val, MF_MEMORY_HOST,
                                        MF_SPARSE_SUM_DUPLICATES),
                     MF_ERR_INVALID_DATA);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, "sum to inf");
}
END_TEST

START_TEST(empty_matrix_and_empty_rows)
{
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 4, 5, 0, NULL, NULL, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    int64_t ptr[5];
    ck_assert_int_eq(mf_sparse_get_csr(m, ptr, NULL, NULL, MF_MEMORY_HOST), MF_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ptr[i], 0);
    mf_sparse_destroy(m);
    const int32_t row[] = {3}, col[] = {4};
    const float val[] = {-2};
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 4, 5, 1, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(mf_sparse_get_csr(m, ptr, NULL, NULL, MF_MEMORY_HOST), MF_OK);
    const int64_t eptr[] = {0, 0, 0, 0, 1};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(ptr[i], eptr[i]);
    mf_sparse_destroy(m);
}
END_TEST

static void expect_coo_error(int32_t rows, int32_t cols, int64_t nnz, const int32_t *row,
                             const int32_t *col, const float *val, unsigned flags, mf_status want,
                             const char *needle)
{
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &m, rows, cols, nnz, row, col, val, MF_MEMORY_HOST, flags), want);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, needle);
}

START_TEST(coo_validation_names_the_position)
{
    const int32_t row[] = {0, 1, 5}, col[] = {0, 1, 1};
    const float val[] = {1, NAN, 2};
    const float fin[] = {1, 2, 3};
    const float inf[] = {1, 2, INFINITY};
    const int32_t okrow[] = {0, 1, 2}, negcol[] = {0, -1, 0};
    expect_coo_error(3, 3, 3, row, col, fin, 0, MF_ERR_INVALID_DATA,
                     "row[2] = 5 is outside [0, 3)");
    expect_coo_error(3, 3, 3, okrow, negcol, fin, 0, MF_ERR_INVALID_DATA,
                     "col[1] = -1 is outside [0, 3)");
    expect_coo_error(6, 3, 3, row, col, val, 0, MF_ERR_INVALID_DATA, "val[1] = nan is not finite");
    expect_coo_error(6, 3, 3, row, col, inf, 0, MF_ERR_INVALID_DATA, "val[2] = inf");
    expect_coo_error(0, 3, 3, row, col, fin, 0, MF_ERR_INVALID_ARGUMENT, "shape 0 x 3");
    expect_coo_error(3, -1, 3, row, col, fin, 0, MF_ERR_INVALID_ARGUMENT, "shape 3 x -1");
    expect_coo_error(3, 3, -1, row, col, fin, 0, MF_ERR_INVALID_ARGUMENT, "nnz = -1");
    expect_coo_error(3, 3, 3, NULL, col, fin, 0, MF_ERR_INVALID_ARGUMENT, "row or col is NULL");
    expect_coo_error(3, 3, 3, okrow, col, fin, 0x80, MF_ERR_INVALID_ARGUMENT, "unknown flags 0x80");
    ck_assert_int_eq(mf_sparse_from_coo(ctx, NULL, 3, 3, 3, okrow, col, fin, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    /* Device memory on a CPU context. */
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 3, 3, 3, okrow, col, fin, MF_MEMORY_DEVICE, 0),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, "CPU backend");
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 3, 3, 3, okrow, col, fin, (mf_memory)5, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "where = 5");
}
END_TEST

START_TEST(csr_input_sorted_and_validated)
{
    /* Row 0 unsorted with a duplicate of column 1; row 1 empty; row 2 long and reversed. */
    int64_t ptr[4] = {0, 3, 3, 43};
    int32_t col[43];
    float val[43];
    col[0] = 4, col[1] = 1, col[2] = 1;
    val[0] = 1, val[1] = 2, val[2] = 3;
    for (int i = 0; i < 40; i++) {
        col[3 + i] = 39 - i;
        val[3 + i] = (float)(39 - i);
    }
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, ptr, col, val, MF_MEMORY_HOST,
                                        MF_SPARSE_SUM_DUPLICATES),
                     MF_OK);
    int64_t gp[4];
    int32_t gc[43];
    float gv[43];
    ck_assert_int_eq(mf_sparse_get_csr(m, gp, gc, gv, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(gp[1], 2);
    ck_assert_int_eq(gp[2], 2);
    ck_assert_int_eq(gp[3], 42);
    ck_assert_int_eq(gc[0], 1);
    ck_assert_float_eq(gv[0], 5);
    ck_assert_int_eq(gc[1], 4);
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(gc[2 + i], i);
        ck_assert_float_eq(gv[2 + i], (float)i);
    }
    mf_sparse_destroy(m);

    /* Without the flag the duplicate is an error. */
    m = SENTINEL;
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, ptr, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, "row 0, column 1");

    int64_t bad0[4] = {1, 3, 3, 43}, dec[4] = {0, 3, 2, 43}, end[4] = {0, 3, 3, 42};
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, bad0, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "row_ptr[0] = 1");
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, dec, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "row_ptr[2] = 2 is less than row_ptr[1] = 3");
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, end, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "row_ptr[3] = 42, expected nnz = 43");
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 39, 43, ptr, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "col[3] = 39 is outside [0, 39)");
    val[7] = NAN;
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, ptr, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "val[7] = nan");
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m, 3, 40, 43, NULL, col, val, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "row_ptr is NULL");
    ck_assert_ptr_eq(m, SENTINEL);
}
END_TEST

typedef struct triplet {
    int32_t r, c;
    float v;
} triplet;

static int triplet_cmp(const void *a, const void *b)
{
    const triplet *x = a, *y = b;
    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

START_TEST(random_coo_matches_a_sorted_reference)
{
    /* Distinct random coordinates in random order: the result must be the qsort order. */
    enum { ROWS = 300, COLS = 200, NNZ = 20000 };
    static unsigned char used[ROWS][COLS];
    memset(used, 0, sizeof used);
    static int32_t row[NNZ], col[NNZ];
    static float val[NNZ];
    static triplet ref[NNZ];
    uint64_t state = 88172645463325252ull;
    for (int i = 0; i < NNZ;) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        int32_t r = (int32_t)(state % ROWS), c = (int32_t)((state >> 20) % COLS);
        if (used[r][c])
            continue;
        used[r][c] = 1;
        row[i] = r, col[i] = c, val[i] = (float)(state >> 40) / 1e6f;
        ref[i] = (triplet){r, c, val[i]};
        i++;
    }
    qsort(ref, NNZ, sizeof *ref, triplet_cmp);
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, ROWS, COLS, NNZ, row, col, val, MF_MEMORY_HOST, 0),
                     MF_OK);
    static int32_t gr[NNZ], gc[NNZ];
    static float gv[NNZ];
    ck_assert_int_eq(mf_sparse_get_coo(m, gr, gc, gv, MF_MEMORY_HOST), MF_OK);
    for (int i = 0; i < NNZ; i++) {
        ck_assert_int_eq(gr[i], ref[i].r);
        ck_assert_int_eq(gc[i], ref[i].c);
        ck_assert_float_eq(gv[i], ref[i].v);
    }
    /* The CSR route gives the same matrix. */
    int64_t ptr[ROWS + 1];
    ck_assert_int_eq(mf_sparse_get_csr(m, ptr, NULL, NULL, MF_MEMORY_HOST), MF_OK);
    mf_sparse *m2 = NULL;
    ck_assert_int_eq(mf_sparse_from_csr(ctx, &m2, ROWS, COLS, NNZ, ptr, gc, gv, MF_MEMORY_HOST, 0),
                     MF_OK);
    static int32_t hr[NNZ];
    ck_assert_int_eq(mf_sparse_get_coo(m2, hr, NULL, NULL, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(memcmp(hr, gr, sizeof hr), 0);
    /* Large enough for the threaded paths: the columns' offsets (counted without the
     * transpose) are the transpose's, and a column shard holds R's entries in R's order. */
    const int64_t *col_ptr = NULL;
    ck_assert_int_eq(mf_sparse_col_ptr(m, &col_ptr), MF_OK);
    int64_t counted[COLS + 1] = {0};
    for (int i = 0; i < NNZ; i++)
        counted[gc[i] + 1]++;
    for (int j = 0; j < COLS; j++) {
        counted[j + 1] += counted[j];
        ck_assert_int_eq(col_ptr[j + 1], counted[j + 1]);
    }
    ck_assert_int_eq(mf_sparse_host_transpose(m), MF_OK);
    ck_assert_int_eq(memcmp(m->transpose.ptr, counted, sizeof counted), 0);
    mf_sparse *shard = NULL;
    ck_assert_int_eq(mf_sparse_block(ctx, m, 1, 50, 120, "test", &shard), MF_OK);
    static int32_t sr[NNZ], sc[NNZ];
    static float sv[NNZ];
    int n = 0;
    for (int i = 0; i < NNZ; i++)
        if (gc[i] >= 50 && gc[i] < 120)
            sr[n] = gr[i], sc[n] = gc[i], sv[n] = gv[i], n++;
    int64_t shard_nnz = -1;
    ck_assert_int_eq(mf_sparse_shape(shard, NULL, NULL, &shard_nnz), MF_OK);
    ck_assert_int_eq(shard_nnz, n);
    static int32_t br[NNZ], bc[NNZ];
    static float bv[NNZ];
    ck_assert_int_eq(mf_sparse_get_coo(shard, br, bc, bv, MF_MEMORY_HOST), MF_OK);
    ck_assert(!memcmp(br, sr, (size_t)n * sizeof *br) && !memcmp(bc, sc, (size_t)n * sizeof *bc) &&
              !memcmp(bv, sv, (size_t)n * sizeof *bv));
    mf_sparse_destroy(shard);
    mf_sparse_destroy(m);
    mf_sparse_destroy(m2);
}
END_TEST

/* A rank's shard (mf_sparse_block): the rows, or the columns, of its share in R's shape and
 * order, values kept; an empty share is an empty matrix of R's shape. */
START_TEST(shards_keep_their_lines_in_order)
{
    const int32_t row[] = {0, 0, 1, 2, 2, 3};
    const int32_t col[] = {0, 3, 2, 0, 1, 3};
    const float val[] = {1, 2, 3, 4, 5, 6};
    mf_sparse *m = NULL, *b = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 4, 4, 6, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(mf_sparse_block(ctx, m, 0, 1, 3, "test", &b), MF_OK);
    const int32_t r0[] = {1, 2, 2}, c0[] = {2, 0, 1};
    const float v0[] = {3, 4, 5};
    expect_coo(b, 3, r0, c0, v0);
    int32_t rows, cols;
    ck_assert_int_eq(mf_sparse_shape(b, &rows, &cols, NULL), MF_OK);
    ck_assert(rows == 4 && cols == 4);
    mf_sparse_destroy(b);
    ck_assert_int_eq(mf_sparse_block(ctx, m, 1, 0, 2, "test", &b), MF_OK);
    const int32_t r1[] = {0, 2, 2}, c1[] = {0, 0, 1};
    const float v1[] = {1, 4, 5};
    expect_coo(b, 3, r1, c1, v1);
    mf_sparse_destroy(b);
    ck_assert_int_eq(mf_sparse_block(ctx, m, 1, 2, 2, "test", &b), MF_OK);
    expect_coo(b, 0, NULL, NULL, NULL);
    mf_sparse_destroy(b);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(null_handles_are_rejected)
{
    int64_t nnz;
    ck_assert_int_eq(mf_sparse_shape(NULL, NULL, NULL, &nnz), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sparse_get_coo(NULL, NULL, NULL, NULL, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sparse_get_csr(NULL, NULL, NULL, NULL, MF_MEMORY_HOST),
                     MF_ERR_INVALID_ARGUMENT);
    mf_sparse_destroy(NULL);
    /* `where` is checked with nothing to copy too (an empty matrix), on every entry point */
    mf_ctx *cx = tu_cpu_ctx();
    mf_sparse *e = NULL;
    const int64_t zero = 0;
    ck_assert_int_eq(mf_sparse_from_coo(cx, &e, 2, 2, 0, NULL, NULL, NULL, (mf_memory)5, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(cx, "where = 5");
    ck_assert_ptr_null(e);
    const int64_t ptr[3] = {0, 0, 0};
    ck_assert_int_eq(mf_sparse_from_csr(cx, &e, 2, 2, zero, ptr, NULL, NULL, (mf_memory)7, 0),
                     MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(cx, "where = 7");
    ck_assert_int_eq(mf_sparse_from_coo(cx, &e, 2, 2, 0, NULL, NULL, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    ck_assert_int_eq(mf_sparse_get_coo(e, NULL, NULL, NULL, (mf_memory)9), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(cx, "where = 9");
    mf_sparse_destroy(e);
    mf_ctx_destroy(cx);
}
END_TEST

/* The keyed cache: two owners' keys never meet, every entry goes back to its own free
 * function once when the matrix goes, newest first. */
static int freed_order[4], n_freed;

static void record_free(mf_sparse *m, void *value)
{
    (void)m;
    freed_order[n_freed++] = *(int *)value;
    free(value);
}

static int *boxed(int v)
{
    int *p = malloc(sizeof *p);
    ck_assert_ptr_nonnull(p);
    *p = v;
    return p;
}

START_TEST(cache_keeps_entries_by_owner_and_frees_them_once)
{
    static const char key_a = 0, key_b = 0;
    int32_t r[1] = {0}, c[1] = {0};
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 1, 1, 1, r, c, NULL, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_ptr_null(mf_sparse_cache_get(m, &key_a));
    ck_assert_int_eq(mf_sparse_cache_put(m, &key_a, boxed(1), record_free), MF_OK);
    ck_assert_int_eq(mf_sparse_cache_put(m, &key_b, boxed(2), record_free), MF_OK);
    ck_assert_int_eq(*(int *)mf_sparse_cache_get(m, &key_a), 1);
    ck_assert_int_eq(*(int *)mf_sparse_cache_get(m, &key_b), 2);
    n_freed = 0;
    mf_sparse_destroy(m);
    ck_assert_int_eq(n_freed, 2);
    ck_assert_int_eq(freed_order[0], 2);
    ck_assert_int_eq(freed_order[1], 1);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "sparse", .setup = setup, .teardown = teardown};
    const TTest *const tests[] = {coo_comes_out_in_canonical_order,
                                  patterns_read_as_ones,
                                  duplicates_rejected_by_default,
                                  duplicates_summed_on_request,
                                  summed_duplicates_must_stay_finite,
                                  empty_matrix_and_empty_rows,
                                  coo_validation_names_the_position,
                                  csr_input_sorted_and_validated,
                                  random_coo_matches_a_sorted_reference,
                                  shards_keep_their_lines_in_order,
                                  null_handles_are_rejected,
                                  cache_keeps_entries_by_owner_and_frees_them_once};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
