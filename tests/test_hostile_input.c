#define _POSIX_C_SOURCE 200809L /* mkdtemp, setrlimit, clock_gettime */
/* Inputs from a user who made a mistake or an attacker who means harm: each test holds a
 * reproducer that crashed mfact, corrupted memory, allocated gigabytes or misread a file
 * before the fix it guards (issue "No input can crash mfact"). Every one must end in a
 * clear status and message, quickly, with memory in proportion to the file. */
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static mf_ctx *ctx;
static mf_sparse *const SENTINEL = (mf_sparse *)(uintptr_t)0x4321;

static void setup(void)
{
    ctx = tu_cpu_ctx();
    /* Each test runs in its own process: cap its address space so that a reader that
     * trusts a header allocates its way into a failed test, not into swap. Sanitizers
     * reserve terabytes of shadow memory up front, so they run without the cap. */
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit r = {(rlim_t)4 << 30, (rlim_t)4 << 30};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &r), 0);
#endif
}

static void teardown(void)
{
    mf_ctx_destroy(ctx);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* mf_sparse_read(path, opts) fails with `want`, within a second, leaving the output alone,
 * with `needle` and "path:line:" (line > 0) in the message. */
static void refused(const char *path, const mf_read_opts *opts, mf_status want, int line,
                    const char *needle)
{
    mf_sparse *m = SENTINEL;
    double t0 = now();
    mf_status st = mf_sparse_read(ctx, &m, path, opts);
    ck_assert_msg(st == want, "%s: got %s (%s)", path, mf_status_string(st),
                  mf_ctx_last_error(ctx));
    ck_assert_ptr_eq(m, SENTINEL);
    ck_assert_double_lt(now() - t0, 1.0);
    tu_assert_error_has(ctx, needle);
    if (line > 0) {
        char where[4096];
        snprintf(where, sizeof where, "%s:%d: ", path, line);
        tu_assert_error_has(ctx, where);
    }
}

static mf_sparse *read_as(const char *path, mf_format format)
{
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.format = format;
    mf_sparse *m = NULL;
    mf_status st = mf_sparse_read(ctx, &m, path, &o);
    ck_assert_msg(st == MF_OK, "%s: %s", path, mf_ctx_last_error(ctx));
    return m;
}

/* Row 1: a count that wraps the size computation (heap overflow before the fix). */
START_TEST(header_counts_are_bounded_by_the_file)
{
    const char *p = tu_write_text(".in", "1 1 4611686018427387904\n0 0\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 1, "claims 4611686018427387904 entries");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 4611686018427387904\n1 1 1\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 2, "the file's");
    /* 2 * entries overflowed int64 for a symmetric file. */
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
                              "3 3 4611686018427387905\n1 1 1\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 2, "claims");
    /* Row 4: a header claiming 1e12 entries is a lie, not a shortage of memory. */
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                              "3 3 1000000000000\n1 1 1\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 2, "hold at most");
    /* A claim the file can hold but does not is still the old message. */
    p = tu_write_text(".in", "2 2 3\n0 0\n1 1\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 3, "the file ends after 2");
}
END_TEST

/* Row 4: 25 bytes naming column 2^31 - 2 cost 16.8 GB and 47 s before the fix. */
START_TEST(shapes_from_a_file_are_bounded_by_its_entries)
{
    const char *p = tu_write_text(".txt", "1 2147483646 3\n0 0 1");
    refused(p, NULL, MF_ERR_INVALID_DATA, 1, "column index 2147483646");
    tu_assert_error_has(ctx, "give the shape in mf_read_opts");
    p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate pattern general\n"
                              "2147483647 2147483647 0\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 2, "2147483647 rows");
    p = tu_write_text(".in", "2000000000 3 1\n0 0\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 1, "rows");

    /* Within the bound (2^20 + 16 per entry) a sparse shape is read. */
    p = tu_write_text(".txt", "0 0 1\n1 1048000 2\n");
    mf_sparse *m = read_as(p, MF_FORMAT_AUTO);
    tu_expect_shape(m, 2, 1048001, 2);
    mf_sparse_destroy(m);
    /* The caller who means a huge, nearly empty shape says so, and pays only for rows:
     * the columns are never counted one by one. */
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.rows = 3;
    o.cols = INT32_MAX;
    double t0 = now();
    ck_assert_int_eq(mf_sparse_read(ctx, &m, tu_write_text(".txt", "1 2147483646 3\n0 0 1"), &o),
                     MF_OK);
    ck_assert_double_lt(now() - t0, 1.0);
    tu_expect_shape(m, 3, INT32_MAX, 2);
    int64_t ptr[4];
    int32_t col[2];
    ck_assert_int_eq(mf_sparse_get_csr(m, ptr, col, NULL, MF_MEMORY_HOST), MF_OK);
    ck_assert_int_eq(col[0], 0);
    ck_assert_int_eq(col[1], 2147483646);
    mf_sparse_destroy(m);
}
END_TEST

/* Row 3: a byte-order mark made the first rating a "header", silently dropped. */
START_TEST(a_byte_order_mark_is_skipped)
{
    mf_sparse *m = read_as(tu_write_text(".txt", "\xEF\xBB\xBF"
                                                 "1 1 5\n2 2 3\n"),
                           MF_FORMAT_AUTO);
    tu_expect_shape(m, 2, 2, 2);
    float v[2];
    ck_assert_int_eq(mf_sparse_get_coo(m, NULL, NULL, v, MF_MEMORY_HOST), MF_OK);
    ck_assert_float_eq(v[0], 5.0f);
    mf_sparse_destroy(m);
    /* With a real header after it, the header alone is skipped. */
    m = read_as(tu_write_text(".csv", "\xEF\xBB\xBFuser,item,rating\n1,1,5\n"), MF_FORMAT_AUTO);
    tu_expect_shape(m, 1, 1, 1);
    mf_sparse_destroy(m);
    /* A MatrixMarket banner after a mark is still recognised by its content. */
    m = read_as(tu_write_text(".txt", "\xEF\xBB\xBF%%MatrixMarket matrix coordinate real "
                                      "general\n2 2 1\n2 2 7\n"),
                MF_FORMAT_AUTO);
    tu_expect_shape(m, 2, 2, 1);
    mf_sparse_destroy(m);
}
END_TEST

/* Row 10: a directory named x.mtx read as an "empty file", x.bin as 2^63 bytes. */
START_TEST(a_directory_is_an_io_error)
{
    static const char *const names[] = {"x.mtx", "x.bin", "x.in", "x.txt"};
    char dir[] = "/tmp/mfact-dir-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        refused(path, NULL, MF_ERR_IO, 0, "is a directory");
        rmdir(path);
    }
    rmdir(dir);
}
END_TEST

/* Row 8: SNAP's count line "4039 88234" was read as an entry (a 4040 x 88235 matrix). */
START_TEST(count_lines_are_recognised)
{
    mf_sparse *m = read_as(tu_write_text(".txt", "3 2\n0 1\n1 2\n"), MF_FORMAT_AUTO);
    tu_expect_shape(m, 3, 3, 2);
    ck_assert_int_eq(mf_sparse_has_values(m), 0);
    mf_sparse_destroy(m);
    m = read_as(tu_write_text(".txt", "# rows cols nnz\n3 4 2\n1 1 5\n3 4 1\n"), MF_FORMAT_AUTO);
    tu_expect_shape(m, 3, 4, 2); /* 1-based data within the count line's shape */
    mf_sparse_destroy(m);
    /* A first line whose count does not match is an entry, as before. */
    m = read_as(tu_write_text(".txt", "1 1 5\n2 2 3\n"), MF_FORMAT_AUTO);
    tu_expect_shape(m, 2, 2, 2);
    mf_sparse_destroy(m);
    /* Asked for triplets, the file's first line is an entry whatever it looks like. */
    m = read_as(tu_write_text(".txt", "3 2\n0 1\n1 2\n"), MF_FORMAT_TRIPLETS);
    tu_expect_shape(m, 4, 3, 3);
    mf_sparse_destroy(m);
    /* A held first line still fixes the fields of the lines after it. */
    refused(tu_write_text(".txt", "1 1 2\n2 2\n"), NULL, MF_ERR_INVALID_DATA, 2,
            "expected 3 fields");
    const char *fb = tu_data_path("graphs/facebook_combined.txt");
    if (fb) {
        m = read_as(fb, MF_FORMAT_AUTO);
        tu_expect_shape(m, 4039, 4039, 88234);
        mf_sparse_destroy(m);
    }
}
END_TEST

/* Row 10: raw bytes of a bad token were echoed whole to the terminal. */
START_TEST(messages_quote_a_short_printable_excerpt)
{
    char text[4096] = "1 1 5\n\x01\x1b[31m\xff";
    size_t n = strlen(text);
    memset(text + n, 'A', 3000);
    memcpy(text + n + 3000, " 2 3\n", 6);
    refused(tu_write_text(".txt", text), NULL, MF_ERR_INVALID_DATA, 2, "\"\\x01\\x1b[31m\\xffAAA");
    const char *msg = mf_ctx_last_error(ctx);
    ck_assert_uint_lt(strlen(msg), 400);
    for (const char *c = msg; *c; c++)
        ck_assert_msg((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f, "byte 0x%02x",
                      (unsigned char)*c);
    tu_assert_error_has(ctx, "\"...");
}
END_TEST

/* Row 10: repeats were named 0-based with no line, whatever the file's numbering. */
START_TEST(repeats_are_named_where_the_file_gives_them)
{
    const char *p = tu_write_text(".mtx", "%%MatrixMarket matrix coordinate real general\n"
                                          "% comment\n3 3 3\n1 1 1\n3 2 1\n3 2 4\n");
    refused(p, NULL, MF_ERR_INVALID_DATA, 6, "row 3, column 2 repeats line 5");
    tu_assert_error_has(ctx, "MF_SPARSE_SUM_DUPLICATES");
    unsigned char rec[36] = {0};
    rec[12] = rec[24] = 2; /* records 2 and 3: (2, 0) */
    p = tu_write_file(".bin", rec, sizeof rec);
    refused(p, NULL, MF_ERR_INVALID_DATA, 0,
            "record 3: duplicate entry: row 2, column 0 "
            "repeats record 2");
    /* Summed repeats that overflow name both places too. */
    p = tu_write_text(".txt", "0 0 3e38\n1 1 1\n0 0 3e38\n");
    mf_read_opts o;
    mf_read_opts_init(&o);
    o.flags = MF_SPARSE_SUM_DUPLICATES;
    refused(p, &o, MF_ERR_INVALID_DATA, 3, "(also at line 1) sum to a value that is not finite");
}
END_TEST

/* Row 2: cpu_threads = 100000 crashed inside libgomp. */
START_TEST(thread_counts_are_bounded)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CPU;
    o.cpu_threads = 100000;
    mf_ctx *c = NULL;
    ck_assert_int_eq(mf_ctx_create(&c, &o), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "cpu_threads = 100000 is more than"));
    o.cpu_threads = MF_THREADS_PER_PROCESSOR; /* allowed on any machine */
    ck_assert_int_eq(mf_ctx_create(&c, &o), MF_OK);
    mf_ctx_destroy(c);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "hostile_input", .setup = setup, .teardown = teardown};
    const TTest *const tests[] = {header_counts_are_bounded_by_the_file,
                                  shapes_from_a_file_are_bounded_by_its_entries,
                                  a_byte_order_mark_is_skipped,
                                  a_directory_is_an_io_error,
                                  count_lines_are_recognised,
                                  messages_quote_a_short_printable_excerpt,
                                  repeats_are_named_where_the_file_gives_them,
                                  thread_counts_are_bounded};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
