/* Every reader on good and malformed files written by the test itself. Malformed input must
 * give the documented status with the file name and line (or record) in the message. Ids
 * as users have them (string and sparse integer ids read into dense indices with their
 * maps, a test set read with its training set's maps, mf_id_map_*) with known answers. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkfifo, fork */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static mf_ctx *ctx;
static mf_sparse *const SENTINEL = (mf_sparse *)(uintptr_t)0x4321;

static void setup(void)
{
    ctx = tu_cpu_ctx();
}

static void teardown(void)
{
    mf_ctx_destroy(ctx);
}

static mf_sparse *read_ok(const char *path, const mf_read_opts *opts)
{
    mf_sparse *m = NULL;
    mf_status st = mf_sparse_read(ctx, &m, path, opts);
    ck_assert_msg(st == MF_OK, "%s: %s", mf_status_string(st), mf_ctx_last_error(ctx));
    return m;
}

static void read_fails(const char *path, const mf_read_opts *opts, mf_status want,
                       const char *needle)
{
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(mf_sparse_read(ctx, &m, path, opts), want);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, needle);
    tu_assert_error_has(ctx, path);
}

/* Text of "path:line" for the error checks. */
static const char *at(const char *path, int line)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s:%d:", path, line);
    return buf;
}

static void expect_entry(const mf_sparse *m, int64_t i, int32_t row, int32_t col, float val)
{
    int64_t nnz;
    mf_sparse_shape(m, NULL, NULL, &nnz);
    int32_t *r = malloc((size_t)nnz * sizeof *r), *c = malloc((size_t)nnz * sizeof *c);
    float *v = malloc((size_t)nnz * sizeof *v);
    ck_assert_int_eq(mf_sparse_get_coo(m, r, c, v, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(r[i], row);
    ck_assert_int_eq(c[i], col);
    ck_assert_float_eq(v[i], val);
    free(r), free(c), free(v);
}

/* A rank's part (mf_read_opts.part_index/part_count): every third entry in file order, the
 * whole file's shape and index base on every rank (the largest index and the 1-based
 * numbering are in entries other parts keep), marked a part; bad part arguments refused. */
START_TEST(parts_of_a_file)
{
    const char *p = tu_write_text(".txt", "1 1 5\n2 3 4\n3 2 3\n4 4 2\n1 4 1\n");
    int64_t total = 0;
    for (int i = 0; i < 3; i++) {
        mf_read_opts o;
        mf_read_opts_init(&o);
        o.part_index = i, o.part_count = 3;
        o.format = MF_FORMAT_TRIPLETS; /* no first line taken for a header */
        mf_sparse *m = read_ok(p, &o);
        int32_t rows, cols;
        int64_t nnz;
        ck_assert_int_eq(mf_sparse_shape(m, &rows, &cols, &nnz), MF_OK);
        ck_assert(rows == 4 && cols == 4);
        ck_assert_int_eq(nnz, i < 2 ? 2 : 1); /* entries 0 and 3, 1 and 4, 2 */
        ck_assert_int_eq(mf_sparse_index_base(m), 1);
        ck_assert_int_eq(mf_sparse_is_part(m), 1);
        if (i == 0) {
            expect_entry(m, 0, 0, 0, 5);
            expect_entry(m, 1, 3, 3, 2);
        }
        total += nnz;
        mf_sparse_destroy(m);
    }
    ck_assert_int_eq(total, 5);
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.format = MF_FORMAT_TRIPLETS;
    mf_sparse *whole = read_ok(p, &o);
    ck_assert_int_eq(mf_sparse_is_part(whole), 0);
    mf_sparse_destroy(whole);
    const int bad[][2] = {{3, 3}, {-1, 2}, {1, 0}, {0, -1}};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        o.part_index = bad[b][0], o.part_count = bad[b][1];
        mf_sparse *m = SENTINEL;
        ck_assert_int_eq(mf_sparse_read(ctx, &m, p, &o), MF_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_eq(m, SENTINEL);
        tu_assert_error_has(ctx, "part_index");
    }
}
END_TEST

/* Parts of an auto-detected triplet file follow file order: the first line, held back as a
 * possible count line, is entry 0 when it is data, and a count line keeps number 0 too. The
 * limit on a shape the file gives counts the whole file's entries in every part (a part of
 * half the entries decided alone, and refused an index the whole read takes). */
START_TEST(parts_follow_file_order)
{
    const char *data = tu_write_text(".txt", "1 1 5\n2 2 3\n3 3 4\n");
    const char *counted = tu_write_text(".txt", "3 3 3\n1 1 5\n2 2 3\n3 3 4\n");
    /* part 0 and 1 of each: {nnz, first entry row, col, value} */
    const float want[2][2][4] = {{{2, 0, 0, 5}, {1, 1, 1, 3}}, {{1, 1, 1, 3}, {2, 0, 0, 5}}};
    const char *files[2] = {data, counted};
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 2; i++) {
            mf_read_opts o;
            mf_read_opts_init(&o);
            o.part_index = i, o.part_count = 2;
            mf_sparse *m = read_ok(files[f], &o);
            tu_expect_shape(m, 3, 3, (int64_t)want[f][i][0]);
            expect_entry(m, 0, (int32_t)want[f][i][1], (int32_t)want[f][i][2], want[f][i][3]);
            if (want[f][i][0] == 2)
                expect_entry(m, 1, 2, 2, 4);
            mf_sparse_destroy(m);
        }
    /* 2,000 entries allow 2^20 + 16 x 2,000 = 1,080,576 rows; a part keeps 1,000. */
    size_t cap = 2000 * 24 + 64, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    for (int e = 0; e < 1999; e++)
        len += (size_t)snprintf(text + len, cap - len, "%d %d 1\n", e + 1, e % 7 + 1);
    snprintf(text + len, cap - len, "1070000 1 2\n");
    const char *wide = tu_write_text(".txt", text);
    free(text);
    for (int parts = 1; parts <= 3; parts++) {
        int64_t total = 0;
        for (int i = 0; i < parts; i++) {
            mf_read_opts o;
            mf_read_opts_init(&o);
            o.part_index = i, o.part_count = parts;
            mf_sparse *m = read_ok(wide, &o);
            int32_t rows;
            int64_t nnz;
            ck_assert_int_eq(mf_sparse_shape(m, &rows, NULL, &nnz), MF_OK);
            ck_assert_int_eq(rows, 1070000);
            total += nnz;
            mf_sparse_destroy(m);
        }
        ck_assert_int_eq(total, 2000);
    }
}
END_TEST

/* ---- MatrixMarket ------------------------------------------------------------------------ */

START_TEST(mm_general_real)
{
    const char *p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                                          "% a comment\n"
                                          "\n"
                                          "3 4 3\n"
                                          "3 1 -2.5\n"
                                          "1 4 1e2\n"
                                          "2 2 7\n");
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 3, 4, 3);
    expect_entry(m, 0, 0, 3, 100);
    expect_entry(m, 1, 1, 1, 7);
    expect_entry(m, 2, 2, 0, -2.5f);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(mm_symmetric_is_expanded)
{
    /* The banner decides the format whatever the file is called. */
    const char *p = tu_write_text(".txt", "%%MatrixMarket matrix coordinate pattern symmetric\n"
                                          "3 3 3\n"
                                          "1 1\n"
                                          "3 1\n"
                                          "3 2\n");
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 3, 3, 5);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    expect_entry(m, 1, 0, 2, 1);
    expect_entry(m, 4, 2, 1, 1);
    mf_sparse_destroy(m);

    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate integer skew-symmetric\n"
                              "2 2 1\n"
                              "2 1 3\n");
    m = read_ok(p, NULL);
    tu_expect_shape(m, 2, 2, 2);
    expect_entry(m, 0, 0, 1, -3);
    expect_entry(m, 1, 1, 0, 3);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(mm_malformed)
{
    const char *p = tu_write_text(".mtx", "3 3 1\n1 1 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "MatrixMarket matrix coordinate");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n");
    read_fails(p, NULL, MF_ERR_UNSUPPORTED, "array");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n");
    read_fails(p, NULL, MF_ERR_UNSUPPORTED, "complex");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n%c\n3 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 3));
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 2\n1 1 1\n4 1 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 4));
    tu_assert_error_has(ctx, "row index 4 is outside the 3 rows");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 2\n1 1 1\n2 0 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "column index 0 is below the index base 1");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 3\n1 1 1\n2 2 x\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 4));
    tu_assert_error_has(ctx, "value \"x\" is not a number");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 3\n1 1 1\n2 2 2\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "gives 3 entries, the file ends after 2");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 1\n1 1 1\n2 2 2\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 4));
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 2\n1 1 1\n2 2 nan\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "value nan is not finite");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 1\n1 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "expected 3 fields, found 2");
}
END_TEST

/* ---- triplets ---------------------------------------------------------------------------- */

START_TEST(triplets_movielens_styles)
{
    /* "::" separators, a fourth field, 1-based ids discovered from the data. */
    const char *p = tu_write_text(".dat", "1::2::5::881250949\r\n3::1::3.5::881250950\r\n");
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 3, 2, 2);
    expect_entry(m, 0, 0, 1, 5);
    expect_entry(m, 1, 2, 0, 3.5f);
    mf_sparse_destroy(m);
    /* CSV with a header, 0-based because a 0 appears, and a last line with no newline. */
    p = tu_write_text(".csv", "userId,movieId,rating,timestamp\n0,4,1.5,1\n2,0,4,2");
    m = read_ok(p, NULL);
    tu_expect_shape(m, 3, 5, 2);
    expect_entry(m, 0, 0, 4, 1.5f);
    mf_sparse_destroy(m);
    /* Tabs, comments, two fields: a pattern. */
    p = tu_write_text(".tsv", "# edges\n1\t2\n\n2\t3\n");
    m = read_ok(p, NULL);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    tu_expect_shape(m, 2, 3, 2);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(triplets_options)
{
    const char *p = tu_write_text(".txt", "1 1 2\n2 3 4\n");
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.index_base = 0;
    o.rows = 10;
    mf_sparse *m = read_ok(p, &o);
    tu_expect_shape(m, 10, 4, 2);
    expect_entry(m, 1, 2, 3, 4);
    mf_sparse_destroy(m);
    o.rows = 2;
    read_fails(p, &o, MF_ERR_INVALID_DATA, at(p, 2));
    tu_assert_error_has(ctx, "row index 2 is outside the 2 rows given");
    /* With the base decided late, a shape error still names its line. */
    mf_read_opts_init(&o);
    o.cols = 2;
    read_fails(p, &o, MF_ERR_INVALID_DATA, at(p, 2));
    tu_assert_error_has(ctx, "column index 3 is outside the 2 columns given");
    mf_read_opts_init(&o);
    o.flags |= MF_SPARSE_PATTERN;
    m = read_ok(p, &o);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    mf_sparse_destroy(m);
    mf_read_opts_init(&o);
    o.index_base = 2;
    mf_sparse *bad = SENTINEL;
    ck_assert_int_eq(mf_sparse_read(ctx, &bad, p, &o), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "index_base = 2");
    ck_assert_ptr_eq(bad, SENTINEL);
    mf_read_opts_init(&o);
    o.struct_size = 0;
    mf_sparse *s = SENTINEL;
    ck_assert_int_eq(mf_sparse_read(ctx, &s, p, &o), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sparse_read(ctx, &s, NULL, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(s, SENTINEL);
}
END_TEST

START_TEST(triplets_duplicates)
{
    const char *p = tu_write_text(".txt", "1 1 2\n1 1 3\n");
    /* Named where the file repeats it, in the file's own (1-based) numbering. */
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 2));
    tu_assert_error_has(ctx, "duplicate entry: row 1, column 1 repeats line 1");
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.flags = MF_SPARSE_SUM_DUPLICATES;
    mf_sparse *m = read_ok(p, &o);
    tu_expect_shape(m, 1, 1, 1);
    expect_entry(m, 0, 0, 0, 5);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(triplets_malformed)
{
    const char *p = tu_write_text(".txt", "1 1 2\n2 x 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 2));
    tu_assert_error_has(ctx, "column index \"x\" is not an integer");
    p = tu_write_text(".txt", "1 1 2\n2 2\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 2));
    tu_assert_error_has(ctx, "expected 3 fields");
    p = tu_write_text(".txt", "1 1 2\n2 2 inf\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 2));
    p = tu_write_text(".txt", "1 1 2\n-1 2 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "row index -1 is below the index base 0");
    p = tu_write_text(".txt", "1 1 2\n5000000000 2 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "does not fit in int32");
    p = tu_write_text(".txt", "header line\nanother header\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 2));
    p = tu_write_text(".txt", "");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "no entries and gives no shape");
    read_fails("/nonexistent/mfact/file.txt", NULL, MF_ERR_IO, "cannot open");
}
END_TEST

/* Lines that used to be read into something else without a word (issue 44, row 4). */
START_TEST(mixed_lines_are_errors_at_their_line)
{
    /* A pattern line among rated ones, first or later: the file had become a pattern. */
    const char *p = tu_write_text(".txt", "1 1\n2 2 4\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 1));
    tu_assert_error_has(ctx, "found 2");
    p = tu_write_text(".txt", "1 1\n2 2\n3 3 4\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 3));
    tu_assert_error_has(ctx, "a value in a pattern file");
    p = tu_write_text(".txt", "% a comment\n1 2\n2 1 5\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "found 2");
    /* ... unless the caller asked for a pattern: then values are not read at all. */
    mf_read_opts po;
    mf_read_opts_init(&po);
    po.flags = MF_SPARSE_PATTERN;
    mf_sparse *pm = read_ok(tu_write_text(".txt", "1 2\n2 3 7\n3 1\n"), &po);
    ck_assert_int_eq(mf_sparse_has_values(pm), 0);
    mf_sparse_destroy(pm);
    /* A first line that reads as a number is data, not a header to skip. */
    p = tu_write_text(".txt", "1.5 1 5\n2 2 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 1));
    tu_assert_error_has(ctx, "row index \"1.5\" is not an integer");
    p = tu_write_text(".txt", "0x10 1 5\n2 2 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 1));
    p = tu_write_text(".txt", "-3 1 5\n2 2 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 1));
    /* A real header still is one. */
    mf_sparse *m = read_ok(tu_write_text(".csv", "userId,movieId,rating\n1,1,5\n2,3,4\n"), NULL);
    tu_expect_shape(m, 2, 3, 2);
    mf_sparse_destroy(m);
    /* A NUL byte ends no text silently: in triplets, MatrixMarket and pairs. */
    static const char tri[] = "1 1 5\n2 2 3\0003 3 1\n4 4 2\n";
    p = tu_write_file(".txt", tri, sizeof tri - 1);
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 2));
    tu_assert_error_has(ctx, "NUL byte");
    static const char mtx[] =
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 2\0002\n";
    p = tu_write_file(".mtx", mtx, sizeof mtx - 1);
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 4));
    static const char pairs[] = "3 4 3\n0 0\n2 3\0001 1\n";
    p = tu_write_file(".in", pairs, sizeof pairs - 1);
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 3));
}
END_TEST

START_TEST(long_lines_are_read)
{
    /* A comment longer than the reader's block forces it to grow. */
    size_t n = 3u << 20;
    char *text = malloc(n + 64);
    text[0] = '#';
    memset(text + 1, 'x', n - 1);
    strcpy(text + n, "\n4 5 6\n");
    const char *p = tu_write_text(".txt", text);
    free(text);
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 4, 5, 1);
    expect_entry(m, 0, 3, 4, 6);
    mf_sparse_destroy(m);
}
END_TEST

/* ---- pairs ------------------------------------------------------------------------------- */

START_TEST(pairs_with_both_count_lines)
{
    const char *p = tu_write_text(".in", "3 4 3\n0 0\n2 3\n1 1\n");
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 3, 4, 3);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    expect_entry(m, 2, 2, 3, 1);
    mf_sparse_destroy(m);
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.format = MF_FORMAT_PAIRS; /* an SNAP edge list: "nodes edges" */
    p = tu_write_text(".txt", "5 2\n0 4\n4 3\n");
    m = read_ok(p, &o);
    tu_expect_shape(m, 5, 5, 2);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(pairs_repeats_merge)
{
    const char *p = tu_write_text(".in", "2 2 3\n0 1\n1 0\n0 1\n");
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 2, 2, 2);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(pairs_malformed)
{
    const char *p = tu_write_text(".in", "3 4 3\n0 0\n2 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "gives 3 pairs, the file ends after 2");
    p = tu_write_text(".in", "3 4 1\n0 0\n2 3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 3));
    p = tu_write_text(".in", "3 4 2\n0 0\n3 0\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 3));
    tu_assert_error_has(ctx, "outside the 3 rows of the header");
    p = tu_write_text(".in", "3 4 2\n0 0 1\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "expected 2 fields");
    p = tu_write_text(".in", "3\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, at(p, 1));
    p = tu_write_text(".in", "# nothing\n");
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "ends before its count line");
}
END_TEST

/* ---- binary ------------------------------------------------------------------------------ */

static void put_record(unsigned char *dst, int32_t r, int32_t c, float v)
{
    uint32_t words[3];
    words[0] = (uint32_t)r;
    words[1] = (uint32_t)c;
    memcpy(&words[2], &v, 4);
    for (int w = 0; w < 3; w++)
        for (int b = 0; b < 4; b++)
            dst[4 * w + b] = (unsigned char)(words[w] >> (8 * b)); /* little-endian */
}

START_TEST(binary_triplets)
{
    /* More records than one read block, so the block loop is exercised. */
    enum { N = 70000 };
    unsigned char *buf = malloc(12 * N);
    for (int i = 0; i < N; i++)
        put_record(buf + 12 * i, i % 700, i / 700, (float)i * 0.5f);
    const char *p = tu_write_file(".bin", buf, 12 * N);
    mf_sparse *m = read_ok(p, NULL);
    tu_expect_shape(m, 700, 100, N);
    expect_entry(m, 1, 0, 1, 350);
    mf_sparse_destroy(m);

    p = tu_write_file(".bin", buf, 12 * 5 + 7);
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "record 6 is incomplete");
    put_record(buf + 12 * 2, 1, -3, 1);
    p = tu_write_file(".bin", buf, 12 * 4);
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "record 3: column index -3");
    put_record(buf + 12 * 2, 1, 3, NAN);
    p = tu_write_file(".bin", buf, 12 * 4);
    read_fails(p, NULL, MF_ERR_INVALID_DATA, "record 3: value nan is not finite");
    free(buf);
}
END_TEST

/* ---- what a read used, and streams ------------------------------------------------------- */

START_TEST(index_base_of_a_read)
{
    /* A 0-based training set, and a test set of the same numbering that happens to hold no
     * 0 index: read on its own it is taken as 1-based and every entry moves. */
    const char *train_path = tu_write_text(".txt", "0 0 1\n1 2 2\n2 1 3\n3 3 4\n");
    const char *test_path = tu_write_text(".txt", "1 1 5\n3 2 4\n");
    mf_sparse *train = read_ok(train_path, NULL);
    ck_assert_int_eq(mf_sparse_index_base(train), 0);
    mf_sparse *alone = read_ok(test_path, NULL);
    ck_assert_int_eq(mf_sparse_index_base(alone), 1);
    expect_entry(alone, 0, 0, 0, 5);
    mf_sparse_destroy(alone);
    /* Read with the training file's base (and shape), the test entries stay where they are. */
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.index_base = mf_sparse_index_base(train);
    mf_sparse_shape(train, &o.rows, &o.cols, NULL);
    mf_sparse *test = read_ok(test_path, &o);
    tu_expect_shape(test, 4, 4, 2);
    expect_entry(test, 0, 1, 1, 5);
    expect_entry(test, 1, 3, 2, 4);
    ck_assert_int_eq(mf_sparse_index_base(test), 0);
    mf_sparse_destroy(test);
    mf_sparse_destroy(train);

    /* The formats' conventions, a base given, arrays and NULL. */
    mf_sparse *m = read_ok(tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                                                 "2 2 1\n2 2 1\n"),
                           NULL);
    ck_assert_int_eq(mf_sparse_index_base(m), 1);
    mf_sparse_destroy(m);
    m = read_ok(tu_write_text(".in", "2 2 1\n1 1\n"), NULL);
    ck_assert_int_eq(mf_sparse_index_base(m), 0);
    mf_sparse_destroy(m);
    mf_read_opts_init(&o);
    o.index_base = 0;
    m = read_ok(tu_write_text(".txt", "1 1 2\n"), &o);
    ck_assert_int_eq(mf_sparse_index_base(m), 0);
    mf_sparse_destroy(m);
    const int32_t r[1] = {0}, c[1] = {0};
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 1, 1, 1, r, c, NULL, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(mf_sparse_index_base(m), 0);
    mf_sparse_destroy(m);
    ck_assert_int_eq(mf_sparse_index_base(NULL), -1);
}
END_TEST

/* A file's text grown line by line. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void add_line(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_line(text *t, const char *fmt, ...)
{
    if (t->cap - t->len < 128) {
        t->cap = t->cap ? 2 * t->cap : 1 << 16;
        t->s = realloc(t->s, t->cap);
        ck_assert_ptr_nonnull(t->s);
    }
    va_list ap;
    va_start(ap, fmt);
    t->len += (size_t)vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
}

/* Read `size` bytes through a FIFO named `name` (the suffix counts for detection) in a new
 * directory, written by a child process: a path that can be read once, as /dev/stdin, a
 * pipe or a shell's <(...) can. The test keeps a reader of its own open that never reads,
 * so that the writer neither waits for the library nor dies of SIGPIPE if the library
 * closes the FIFO early: a stream read twice then loses entries instead of hanging. Data
 * of more than a pipe's buffer (64 KiB) keeps the writer there until the library reads. */
static mf_status read_fifo(const char *name, const void *data, size_t size, mf_sparse **out)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/mfact-fifo-XXXXXX", tmp);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    int keep = open(path, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(keep, 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        int fd = open(path, O_WRONLY);
        const char *p = data;
        size_t left = size;
        while (fd >= 0 && left > 0) {
            ssize_t w = write(fd, p, left);
            if (w <= 0)
                break;
            p += w;
            left -= (size_t)w;
        }
        _exit(left == 0 ? 0 : 1);
    }
    mf_status st = mf_sparse_read(ctx, out, path, NULL);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    close(keep);
    unlink(path);
    rmdir(dir);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the FIFO's writer failed");
    return st;
}

/* The same file on disk and through a FIFO (format auto): every entry arrives. */
static void expect_fifo_reads_whole(const char *name, const char *suffix, const void *data,
                                    size_t size, int64_t nnz)
{
    mf_sparse *disk = read_ok(tu_write_file(suffix, data, size), NULL), *fifo = NULL;
    mf_status st = read_fifo(name, data, size, &fifo);
    ck_assert_msg(st == MF_OK, "%s: %s", name, mf_ctx_last_error(ctx));
    int32_t rows, cols;
    mf_sparse_shape(disk, &rows, &cols, NULL);
    tu_expect_shape(disk, rows, cols, nnz);
    tu_expect_shape(fifo, rows, cols, nnz);
    ck_assert_int_eq(mf_sparse_has_values(fifo), mf_sparse_has_values(disk));
    ck_assert_int_eq(mf_sparse_index_base(fifo), mf_sparse_index_base(disk));
    int32_t *r[2], *c[2];
    float *v[2];
    for (int k = 0; k < 2; k++) {
        r[k] = malloc((size_t)nnz * sizeof *r[k]);
        c[k] = malloc((size_t)nnz * sizeof *c[k]);
        v[k] = malloc((size_t)nnz * sizeof *v[k]);
        ck_assert_int_eq(mf_sparse_get_coo(k ? fifo : disk, r[k], c[k], v[k], MF_MEMORY_HOST),
                         MF_OK);
    }
    ck_assert_msg(memcmp(r[0], r[1], (size_t)nnz * sizeof *r[0]) == 0 &&
                      memcmp(c[0], c[1], (size_t)nnz * sizeof *c[0]) == 0 &&
                      memcmp(v[0], v[1], (size_t)nnz * sizeof *v[0]) == 0,
                  "%s: the FIFO's entries differ from the file's", name);
    for (int k = 0; k < 2; k++)
        free(r[k]), free(c[k]), free(v[k]);
    mf_sparse_destroy(disk);
    mf_sparse_destroy(fifo);
}

START_TEST(streams_are_read_once)
{
    enum { N = 30000 }; /* about 300 KiB of text: more than a pipe holds */
    text t = {0};
    /* Triplets with a header, 1-based: the base decided from the data. */
    add_line(&t, "user\titem\trating\n");
    for (long k = 0; k < N; k++)
        add_line(&t, "%ld\t%ld\t%ld\n", k % 500 + 1, k / 500 + 1, k % 5 + 1);
    expect_fifo_reads_whole("ratings.tsv", ".tsv", t.s, t.len, N);
    /* MatrixMarket, found by its banner alone (the FIFO's name has no suffix). */
    t.len = 0;
    add_line(&t, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n", 500, N / 500, N);
    for (long k = 0; k < N; k++)
        add_line(&t, "%ld %ld %ld\n", k % 500 + 1, k / 500 + 1, k % 7 - 3);
    expect_fifo_reads_whole("matrix", ".mtx", t.s, t.len, N);
    /* Pairs: its count line first. */
    t.len = 0;
    add_line(&t, "%d %d %d\n", 500, N / 500, N);
    for (long k = 0; k < N; k++)
        add_line(&t, "%ld %ld\n", k % 500, k / 500);
    expect_fifo_reads_whole("graph.in", ".in", t.s, t.len, N);
    /* A repeat through a FIFO: named without a second pass (which would wait for a writer
     * that is gone). */
    t.len = 0;
    for (long k = 0; k < N; k++)
        add_line(&t, "%ld %ld 1\n", k % 500, k / 500);
    add_line(&t, "0 0 2\n");
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(read_fifo("dup.txt", t.s, t.len, &m), MF_ERR_INVALID_DATA);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, "duplicate entry");
    tu_assert_error_has(ctx, "row 0, column 0 as the file numbers them");
    free(t.s);
    /* Binary records, found by the FIFO's suffix. */
    unsigned char *buf = malloc(12 * N);
    for (int i = 0; i < N; i++)
        put_record(buf + 12 * i, i % 500, i / 500, (float)i * 0.25f);
    expect_fifo_reads_whole("ratings.bin", ".bin", buf, 12 * N, N);
    free(buf);
}
END_TEST

/* ---- ids as users have them (mf_read_opts.map_ids, columns by name or position) -------- */

/* A read refused for its options: MF_ERR_INVALID_ARGUMENT, the output untouched. */
static void args_refused(const char *path, const mf_read_opts *opts, const char *needle)
{
    mf_sparse *m = SENTINEL;
    ck_assert_int_eq(mf_sparse_read(ctx, &m, path, opts), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(m, SENTINEL);
    tu_assert_error_has(ctx, needle);
}

/* The map's ids, in index order, joined by spaces. */
static const char *ids_of(const mf_id_map *map)
{
    static char buf[1024];
    size_t n = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < mf_id_map_count(map); i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? " " : "", mf_id_map_id(map, i));
    return buf;
}

/* The value at (row id, column id), or NAN when the matrix has no such entry. */
static float value_at(const mf_sparse *m, const char *row, const char *col)
{
    int32_t r = mf_id_map_index(mf_sparse_row_ids(m), row);
    int32_t c = mf_id_map_index(mf_sparse_col_ids(m), col);
    int64_t nnz;
    mf_sparse_shape(m, NULL, NULL, &nnz);
    int32_t *ri = malloc((size_t)nnz * sizeof *ri), *ci = malloc((size_t)nnz * sizeof *ci);
    float *v = malloc((size_t)nnz * sizeof *v), out = NAN;
    ck_assert_int_eq(mf_sparse_get_coo(m, ri, ci, v, MF_MEMORY_HOST), MF_OK);
    for (int64_t p = 0; p < nnz; p++)
        if (ri[p] == r && ci[p] == c)
            out = v[p];
    free(ri), free(ci), free(v);
    return out;
}

static const char *CSV = "userId,movieId,rating,timestamp\n"
                         "alice,193609,4.5,1\n"
                         "bob,1,3,2\n"
                         "alice,1,5,3\n"
                         "\"carol, jr\",50,2,4\n"
                         "bob,193609,1,5\n";

START_TEST(csv_with_string_ids_and_a_header)
{
    const char *p = tu_write_text(".csv", CSV);
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.row_column = "userId", o.col_column = "movieId", o.value_column = "rating";
    mf_sparse *m = read_ok(p, &o);
    tu_expect_shape(m, 3, 3, 5); /* 3 users, 3 movies: not 193,610 columns */
    ck_assert_str_eq(ids_of(mf_sparse_row_ids(m)), "alice bob carol, jr");
    ck_assert_str_eq(ids_of(mf_sparse_col_ids(m)), "193609 1 50");
    ck_assert_int_eq(mf_sparse_index_base(m), 0);
    ck_assert_float_eq(value_at(m, "alice", "193609"), 4.5f);
    ck_assert_float_eq(value_at(m, "alice", "1"), 5.0f);
    ck_assert_float_eq(value_at(m, "carol, jr", "50"), 2.0f);
    ck_assert_float_eq(value_at(m, "bob", "193609"), 1.0f);
    mf_sparse_destroy(m);
    /* The same by position (1-based), the header told by its value field. */
    mf_read_opts_init(&o);
    o.row_field = 1, o.col_field = 2, o.value_field = 3;
    m = read_ok(p, &o);
    tu_expect_shape(m, 3, 3, 5);
    ck_assert_str_eq(ids_of(mf_sparse_col_ids(m)), "193609 1 50");
    ck_assert_float_eq(value_at(m, "bob", "1"), 3.0f);
    mf_sparse_destroy(m);
    /* map_ids alone: positions 1, 2 and the first other field as the value. */
    mf_read_opts_init(&o);
    o.map_ids = 1;
    m = read_ok(p, &o);
    tu_expect_shape(m, 3, 3, 5);
    ck_assert_float_eq(value_at(m, "alice", "193609"), 4.5f);
    mf_sparse_destroy(m);
    /* A value-less read (bmf's) of the same file: the header is still a header, not a
     * fourth user "userId" with a first item "movieId". */
    mf_read_opts_init(&o);
    o.map_ids = 1, o.flags = MF_SPARSE_PATTERN;
    m = read_ok(p, &o);
    tu_expect_shape(m, 3, 3, 5);
    ck_assert_str_eq(ids_of(mf_sparse_row_ids(m)), "alice bob carol, jr");
    ck_assert_float_eq(value_at(m, "alice", "193609"), 1.0f);
    mf_sparse_destroy(m);
    /* Items as rows: names in another order; the timestamp as the value by name. */
    mf_read_opts_init(&o);
    o.row_column = "movieId", o.col_column = "userId", o.value_column = "timestamp";
    m = read_ok(p, &o);
    tu_expect_shape(m, 3, 3, 5);
    ck_assert_str_eq(ids_of(mf_sparse_row_ids(m)), "193609 1 50");
    ck_assert_float_eq(value_at(m, "1", "alice"), 3.0f);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(separators_quotes_and_patterns)
{
    /* Tabs (a space inside an id is kept), no header. */
    const char *p = tu_write_text(".tsv", "u 1\tThe Matrix\t5\nu 2\tAlien\t3\nu 1\tAlien\t4\n");
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.map_ids = 1;
    mf_sparse *m = read_ok(p, &o);
    tu_expect_shape(m, 2, 2, 3);
    ck_assert_str_eq(ids_of(mf_sparse_col_ids(m)), "The Matrix Alien");
    ck_assert_float_eq(value_at(m, "u 1", "Alien"), 4.0f);
    mf_sparse_destroy(m);
    /* MovieLens "::", and a quoted field with a doubled quote and the separator. */
    p = tu_write_text(".dat", "7::\"a\"\"b::c\"::2.5::99\n8::x::1::98\n");
    m = read_ok(p, &o);
    ck_assert_str_eq(ids_of(mf_sparse_col_ids(m)), "a\"b::c x");
    ck_assert_float_eq(value_at(m, "7", "a\"b::c"), 2.5f);
    mf_sparse_destroy(m);
    /* Two fields: a pattern; spaces as the separator. */
    p = tu_write_text(".txt", "  a   b\nb a\n");
    m = read_ok(p, &o);
    tu_expect_shape(m, 2, 2, 2);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    mf_sparse_destroy(m);
    /* MF_SPARSE_PATTERN drops the values of three fields. */
    p = tu_write_text(".csv", "a,b,5\nb,a,x\n");
    o.flags = MF_SPARSE_PATTERN;
    m = read_ok(p, &o);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    mf_sparse_destroy(m);
}
END_TEST

START_TEST(test_set_takes_the_training_maps)
{
    const char *train_path = tu_write_text(".csv", CSV);
    const char *test_path = tu_write_text(".csv", "userId,movieId,rating\n"
                                                  "bob,50,4\n"
                                                  "dave,1,2\n"      /* unseen user */
                                                  "alice,999,3\n"   /* unseen item */
                                                  "erin,1000,1\n"); /* both */
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.row_column = "userId", o.col_column = "movieId", o.value_column = "rating";
    mf_sparse *train = read_ok(train_path, &o);
    o.row_ids = mf_sparse_row_ids(train), o.col_ids = mf_sparse_col_ids(train);
    mf_sparse *test = read_ok(test_path, &o);
    tu_expect_shape(test, 5, 5, 4);
    ck_assert_str_eq(ids_of(mf_sparse_row_ids(test)), "alice bob carol, jr dave erin");
    ck_assert_str_eq(ids_of(mf_sparse_col_ids(test)), "193609 1 50 999 1000");
    /* Known ids keep the training indices; the unseen lie past the model's. */
    int32_t r[4], c[4];
    ck_assert_int_eq(mf_sparse_get_coo(test, r, c, NULL, MF_MEMORY_HOST), MF_OK);
    const int32_t want_r[4] = {0, 1, 3, 4}, want_c[4] = {3, 2, 1, 4};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(r[i], want_r[i]);
        ck_assert_int_eq(c[i], want_c[i]);
    }
    /* A model of the training set predicts the unseen from the mean and known biases. */
    float U[3] = {0, 0, 0}, V[3] = {0, 0, 0}, bu[3] = {0.5f, -0.5f, 0}, bi[3] = {1, 2, 3};
    mf_model model;
    mf_model_init(&model);
    model.users = 3, model.items = 3, model.k = 1;
    model.U = U, model.ldu = 1, model.V = V, model.ldv = 1;
    model.mean = 3.0f, model.user_bias = bu, model.item_bias = bi;
    float pred[4];
    ck_assert_int_eq(mf_predict(ctx, &model, test, pred), MF_OK);
    ck_assert_float_eq(pred[0], 3.0f + 0.5f);        /* alice, unseen 999: mean + alice's bias */
    ck_assert_float_eq(pred[1], 3.0f - 0.5f + 3.0f); /* bob, 50 */
    ck_assert_float_eq(pred[2], 3.0f + 2.0f);        /* dave unseen, movie 1 */
    ck_assert_float_eq(pred[3], 3.0f);               /* both unseen */
    /* The training maps are untouched; a shape given must hold every id. */
    ck_assert_int_eq(mf_id_map_count(mf_sparse_row_ids(train)), 3);
    o.rows = 4;
    read_fails(test_path, &o, MF_ERR_INVALID_DATA, "5 distinct row ids, more than the 4 rows");
    o.rows = 10;
    mf_sparse *wide = read_ok(test_path, &o);
    tu_expect_shape(wide, 10, 5, 4);
    mf_sparse_destroy(wide);
    mf_sparse_destroy(test);
    mf_sparse_destroy(train);
}
END_TEST

START_TEST(bad_columns_are_errors_at_their_line)
{
    const char *p = tu_write_text(".csv", CSV);
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.row_column = "userId", o.col_column = "movieid"; /* names are exact */
    read_fails(p, &o, MF_ERR_INVALID_DATA,
               "no column \"movieid\" in the header (\"userId\", \"movieId\", \"rating\", "
               "\"timestamp\")");
    tu_assert_error_has(ctx, ":1:");
    const char *dup = tu_write_text(".csv", "user,item,user\na,b,c\n");
    mf_read_opts_init(&o);
    o.row_column = "user", o.col_column = "item";
    read_fails(dup, &o, MF_ERR_INVALID_DATA, "names column \"user\" twice (fields 1 and 3)");
    mf_read_opts_init(&o);
    o.row_column = "userId", o.col_column = "userId";
    read_fails(p, &o, MF_ERR_INVALID_DATA, "the row and column are both field 1");
    mf_read_opts_init(&o);
    o.row_field = 2, o.col_field = 1, o.value_field = 2;
    read_fails(p, &o, MF_ERR_INVALID_DATA, "the row and value are both field 2");
    /* A line lacking a chosen field, a value that is no number, a bad id. */
    const char *short_line = tu_write_text(".csv", "u,i,r\na,b,1\nc,d\n");
    mf_read_opts_init(&o);
    o.map_ids = 1;
    read_fails(short_line, &o, MF_ERR_INVALID_DATA, ":3: 2 fields, but the value is field 3");
    const char *bad_value = tu_write_text(".csv", "a,b,1\nc,d,x\n");
    read_fails(bad_value, &o, MF_ERR_INVALID_DATA, ":2: value \"x\" is not a number");
    const char *empty_id = tu_write_text(".csv", "a,b,1\n,d,2\n");
    read_fails(empty_id, &o, MF_ERR_INVALID_DATA, ":2: the row id \"\" is empty");
    const char *quote = tu_write_text(".csv", "a,b,1\n\"c,d,2\n");
    read_fails(quote, &o, MF_ERR_INVALID_DATA, ":2: a quoted field is not closed");
    const char *repeat = tu_write_text(".csv", "a,b,1\nc,b,2\na,b,3\n");
    read_fails(repeat, &o, MF_ERR_INVALID_DATA,
               ":3: duplicate entry: row a, column b repeats line 1");
    o.flags = MF_SPARSE_KEEP_LAST;
    mf_sparse *m = read_ok(repeat, &o);
    ck_assert_float_eq(value_at(m, "a", "b"), 3.0f);
    mf_sparse_destroy(m);
    /* Options that contradict each other. */
    mf_read_opts_init(&o);
    o.row_column = "userId", o.row_field = 1;
    args_refused(p, &o, "by its name or by its position, not both");
    mf_read_opts_init(&o);
    o.map_ids = 1, o.format = MF_FORMAT_MATRIX_MARKET;
    args_refused(p, &o, "ids are read from delimited text");
    mf_read_opts_init(&o);
    o.col_field = -1;
    args_refused(p, &o, "positions are 1-based");
    mf_read_opts_init(&o);
    o.value_field = 3, o.flags = MF_SPARSE_PATTERN;
    args_refused(p, &o, "a value column with MF_SPARSE_PATTERN");
}
END_TEST

START_TEST(id_maps_of_their_own)
{
    const char *ids[] = {"x", "193609", "a b"};
    mf_id_map *map = NULL;
    ck_assert_int_eq(mf_id_map_create(ctx, &map, 3, ids), MF_OK);
    ck_assert_int_eq(mf_id_map_count(map), 3);
    ck_assert_str_eq(mf_id_map_id(map, 1), "193609");
    ck_assert_ptr_null(mf_id_map_id(map, 3));
    ck_assert_ptr_null(mf_id_map_id(map, -1));
    ck_assert_int_eq(mf_id_map_index(map, "a b"), 2);
    ck_assert_int_eq(mf_id_map_index(map, "a"), -1);
    ck_assert_int_eq(mf_id_map_index(map, NULL), -1);
    mf_id_map_destroy(map);
    /* Many ids: the table grows and every one is found. */
    enum { N = 50000 };
    char **many = malloc(N * sizeof *many);
    for (int i = 0; i < N; i++) {
        many[i] = malloc(16);
        snprintf(many[i], 16, "id%d", i * 7);
    }
    ck_assert_int_eq(mf_id_map_create(ctx, &map, N, (const char *const *)many), MF_OK);
    for (int i = 0; i < N; i += 97)
        ck_assert_int_eq(mf_id_map_index(map, many[i]), i);
    mf_id_map_destroy(map);
    for (int i = 0; i < N; i++)
        free(many[i]);
    free(many);
    /* Errors. */
    mf_id_map *out = (mf_id_map *)(uintptr_t)0x1234;
    const char *repeat[] = {"a", "b", "a"};
    ck_assert_int_eq(mf_id_map_create(ctx, &out, 3, repeat), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "ids[2] = \"a\" repeats ids[0]");
    const char *tab[] = {"a\tb"};
    ck_assert_int_eq(mf_id_map_create(ctx, &out, 1, tab), MF_ERR_INVALID_DATA);
    tu_assert_error_has(ctx, "ids[0] holds a control byte");
    const char *empty[] = {""};
    ck_assert_int_eq(mf_id_map_create(ctx, &out, 1, empty), MF_ERR_INVALID_DATA);
    ck_assert_int_eq(mf_id_map_create(ctx, &out, -1, ids), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_id_map_create(ctx, &out, 2, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_id_map_create(ctx, NULL, 2, ids), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_id_map_create(NULL, &out, 2, ids), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(out, (mf_id_map *)(uintptr_t)0x1234);
    ck_assert_int_eq(mf_id_map_create(ctx, &out, 0, NULL), MF_OK);
    ck_assert_int_eq(mf_id_map_count(out), 0);
    mf_id_map_destroy(out);
    mf_id_map_destroy(NULL);
    ck_assert_int_eq(mf_id_map_count(NULL), 0);
    /* A matrix from arrays, or a file of indices, has no maps. */
    mf_sparse *m = read_ok(tu_write_text(".txt", "1 2 3\n"), NULL);
    ck_assert_ptr_null(mf_sparse_row_ids(m));
    ck_assert_ptr_null(mf_sparse_col_ids(m));
    ck_assert_ptr_null(mf_sparse_row_ids(NULL));
    mf_sparse_destroy(m);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "readers", .setup = setup, .teardown = teardown};
    const TTest *const tests[] = {parts_of_a_file,
                                  parts_follow_file_order,
                                  mm_general_real,
                                  mm_symmetric_is_expanded,
                                  mm_malformed,
                                  triplets_movielens_styles,
                                  triplets_options,
                                  triplets_duplicates,
                                  triplets_malformed,
                                  mixed_lines_are_errors_at_their_line,
                                  long_lines_are_read,
                                  pairs_with_both_count_lines,
                                  pairs_repeats_merge,
                                  pairs_malformed,
                                  binary_triplets,
                                  index_base_of_a_read,
                                  streams_are_read_once,
                                  csv_with_string_ids_and_a_header,
                                  separators_quotes_and_patterns,
                                  test_set_takes_the_training_maps,
                                  bad_columns_are_errors_at_their_line,
                                  id_maps_of_their_own};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
