/* libFuzzer harness of mf_sparse_read. One source, one target per format: FUZZ_FORMAT is the
 * mf_format the target reads (tests/fuzz/CMakeLists.txt sets it; fuzz_read_auto reads with
 * MF_FORMAT_AUTO).
 *
 * An input is a file's bytes followed by one option byte: the reader sees all but the last
 * byte, and the last one, XORed with '\n' (so a text file's own final newline means the
 * defaults), picks mf_read_opts:
 *   bits 0-1  index_base: -1, 0, 1, -1
 *   bit 2     flags = MF_SPARSE_SUM_DUPLICATES
 *   bit 3     flags |= MF_SPARSE_PATTERN
 *   bit 4     rows given, bit 5 cols given, each 1, 3, 16 or 1000 by bits 6-7
 *   bits 6-7  fuzz_read_auto only: the file name ends .txt, .mtx, .in or .bin
 * The file is a memfd, read through /proc/self/fd/N (fuzz_read_auto: through a symlink
 * named f.<suffix> in a private directory under $TMPDIR), so nothing touches a disk.
 *
 * Findings abort() after printing the broken rule, the options, the status and the message.
 * Success must give a canonical CSR in bounds with finite values, nnz bounded by the input's
 * size, and a shape bounded by the data: rows, cols <= 2^20 + 16 per entry read unless given
 * in the options (entries read: nnz, or where repeats may have merged, one a byte). Failure
 * must leave the output NULL, return a data, I/O, unsupported or (for inputs of 4 KiB or
 * more) out-of-memory status, and set a fresh, short, printable message. A text file that
 * starts with a UTF-8 byte-order mark must read as the same file without it, or fail.
 * MFACT_FUZZ_VERBOSE=1 prints every input's options and outcome. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mfact/mfact.h>

#include "fuzz_util.h"

#ifndef FUZZ_FORMAT
#error "FUZZ_FORMAT must name the mf_format the target reads"
#endif

#define SMALL_INPUT     4096 /* out of memory below this many bytes is a finding */
#define FREE_EXTENT     (INT64_C(1) << 20)
#define EXTENT_PER_NNZ  16
#define BINARY_RECORD   12
#define MM_BANNER       "%%MatrixMarket"
#define MM_BANNER_BYTES 14
#define BOM             "\xef\xbb\xbf" /* UTF-8 byte-order mark */
#define BOM_BYTES       3

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const suffixes[4] = {".txt", ".mtx", ".in", ".bin"};
static const int32_t given_extents[4] = {1, 3, 16, 1000};

static char link_dir[PATH_MAX];          /* fuzz_read_auto: the symlinks' directory */
static char link_path[4][PATH_MAX + 16]; /* link_dir/f.<suffix> -> fuzz_fd_path */
static char sentinel[256];               /* the message of a call that fails on purpose */

/* The read under test, for the report of a finding. */
static struct {
    mf_read_opts opts;
    const char *path;
    size_t size;    /* bytes the reader sees */
    mf_format kind; /* the format it reads them as */
    mf_status status;
} cur;

typedef struct csr {
    int32_t rows, cols;
    int64_t nnz;
    int has_values;
    int64_t *row_ptr;
    int32_t *col;
    float *val;
} csr;

static void print_case(void)
{
    fprintf(stderr,
            "  format %d, index_base %d, flags %u, rows %d, cols %d, %zu bytes "
            "read as %s\n  status %d (%s)",
            (int)cur.opts.format, cur.opts.index_base, cur.opts.flags, cur.opts.rows, cur.opts.cols,
            cur.size, cur.path, (int)cur.status, mf_status_string(cur.status));
    if (cur.status != MF_OK) {
        fputs(", message \"", stderr);
        fuzz_print_escaped(mf_ctx_last_error(fuzz_ctx));
        fputc('"', stderr);
    }
    fputc('\n', stderr);
}

static void *checked_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "fuzz_read: the harness is out of memory\n");
        abort();
    }
    return p;
}

static void remove_links(void)
{
    for (int i = 0; i < 4; i++)
        unlink(link_path[i]);
    rmdir(link_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_init("fuzz_read", print_case);
    if (FUZZ_FORMAT == MF_FORMAT_AUTO) {
        const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(link_dir, sizeof link_dir, "%s/mfact-fuzz-XXXXXX", tmp);
        if (!mkdtemp(link_dir)) {
            perror("fuzz_read: mkdtemp");
            abort();
        }
        for (int i = 0; i < 4; i++) {
            snprintf(link_path[i], sizeof link_path[i], "%s/f%s", link_dir, suffixes[i]);
            if (symlink(fuzz_fd_path, link_path[i]) != 0) {
                perror("fuzz_read: symlink");
                abort();
            }
        }
        atexit(remove_links);
    }
    /* A call that fails on purpose sets a known message: every read is preceded by one, so
     * a failure that leaves the message alone is seen. */
    if (mf_sparse_read(fuzz_ctx, NULL, fuzz_fd_path, NULL) != MF_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "fuzz_read: mf_sparse_read with out NULL did not fail\n");
        abort();
    }
    snprintf(sentinel, sizeof sentinel, "%s", mf_ctx_last_error(fuzz_ctx));
    return 0;
}

/* Read the memfd as the current case says; a finding when a failure breaks the rules. */
static mf_sparse *read_checked(void)
{
    (void)mf_sparse_read(fuzz_ctx, NULL, cur.path, &cur.opts);
    mf_sparse *m = NULL;
    cur.status = mf_sparse_read(fuzz_ctx, &m, cur.path, &cur.opts);
    if (fuzz_verbose)
        print_case();
    if (cur.status == MF_OK) {
        if (!m)
            fuzz_finding("MF_OK with a NULL matrix");
        return m;
    }
    if (m)
        fuzz_finding("the output is not NULL after a failure");
    switch (cur.status) {
    case MF_ERR_INVALID_DATA:
    case MF_ERR_IO:
    case MF_ERR_UNSUPPORTED: break;
    case MF_ERR_OUT_OF_MEMORY:
        if (cur.size < SMALL_INPUT)
            fuzz_finding("out of memory on a %zu-byte input", cur.size);
        break;
    default: fuzz_finding("unexpected status");
    }
    fuzz_check_message(cur.path, sentinel);
    return NULL;
}

static void check_extent(const char *what, int32_t extent, int32_t given, int64_t entries)
{
    if (extent < 1)
        fuzz_finding("%s = %d", what, extent);
    if (given > 0 && extent != given)
        fuzz_finding("%s = %d, but %d were given", what, extent, given);
    if (given == 0 && extent > FREE_EXTENT + EXTENT_PER_NNZ * entries)
        fuzz_finding("%s = %d for at most %lld entries read", what, extent, (long long)entries);
}

/* Check a matrix read with MF_OK and copy it out (then destroy it). */
static csr take_checked(mf_sparse *m)
{
    csr c;
    memset(&c, 0, sizeof c);
    if (mf_sparse_shape(m, &c.rows, &c.cols, &c.nnz) != MF_OK)
        fuzz_finding("mf_sparse_shape failed");
    /* The shape first: a bad one must be a finding, not an allocation of the harness. */
    size_t per_entry = cur.kind == MF_FORMAT_BINARY_TRIPLETS ? BINARY_RECORD : 1;
    if (c.nnz < 0 || (uint64_t)c.nnz > cur.size / per_entry)
        fuzz_finding("%lld nonzeros from %zu bytes", (long long)c.nnz, cur.size);
    /* The bound counts entries read: where repeats merged, more than nnz, and at most one a
     * byte (a record). */
    bool merged = cur.opts.flags & MF_SPARSE_SUM_DUPLICATES || cur.kind == MF_FORMAT_PAIRS;
    int64_t entries = merged ? (int64_t)(cur.size / per_entry) : c.nnz;
    check_extent("rows", c.rows, cur.opts.rows, entries);
    check_extent("cols", c.cols, cur.opts.cols, entries);
    c.has_values = mf_sparse_has_values(m);
    if (c.has_values != 0 && c.has_values != 1)
        fuzz_finding("mf_sparse_has_values = %d", c.has_values);
    if (c.has_values && ((cur.opts.flags & MF_SPARSE_PATTERN) || cur.kind == MF_FORMAT_PAIRS))
        fuzz_finding("values stored for a pattern");
    c.row_ptr = checked_calloc((size_t)c.rows + 1, sizeof *c.row_ptr);
    c.col = checked_calloc((size_t)c.nnz, sizeof *c.col);
    c.val = c.has_values ? checked_calloc((size_t)c.nnz, sizeof *c.val) : NULL;
    if (mf_sparse_get_csr(m, c.row_ptr, c.col, c.val, MF_MEMORY_HOST) != MF_OK)
        fuzz_finding("mf_sparse_get_csr failed: %s", mf_ctx_last_error(fuzz_ctx));
    mf_sparse_destroy(m);
    if (c.row_ptr[0] != 0 || c.row_ptr[c.rows] != c.nnz)
        fuzz_finding("row_ptr runs from %lld to %lld, nnz %lld", (long long)c.row_ptr[0],
                     (long long)c.row_ptr[c.rows], (long long)c.nnz);
    for (int32_t r = 0; r < c.rows; r++) {
        if (c.row_ptr[r + 1] < c.row_ptr[r])
            fuzz_finding("row_ptr decreases after row %d", r);
        for (int64_t i = c.row_ptr[r]; i < c.row_ptr[r + 1]; i++) {
            if (c.col[i] < 0 || c.col[i] >= c.cols)
                fuzz_finding("row %d: column %d outside [0, %d)", r, c.col[i], c.cols);
            if (i > c.row_ptr[r] && c.col[i] <= c.col[i - 1])
                fuzz_finding("row %d: column %d after %d", r, c.col[i], c.col[i - 1]);
            if (c.val && !isfinite(c.val[i]))
                fuzz_finding("row %d, column %d: value %g", r, c.col[i], (double)c.val[i]);
        }
    }
    return c;
}

static bool csr_equal(const csr *a, const csr *b)
{
    return a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz &&
           a->has_values == b->has_values &&
           memcmp(a->row_ptr, b->row_ptr, ((size_t)a->rows + 1) * sizeof *a->row_ptr) == 0 &&
           memcmp(a->col, b->col, (size_t)a->nnz * sizeof *a->col) == 0 &&
           (!a->val || memcmp(a->val, b->val, (size_t)a->nnz * sizeof *a->val) == 0);
}

static void csr_free(csr *c)
{
    free(c->row_ptr);
    free(c->col);
    free(c->val);
}

static bool starts_with(const uint8_t *data, size_t size, const char *prefix)
{
    size_t n = strlen(prefix);
    return size >= n && memcmp(data, prefix, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned opt = data[size - 1] ^ '\n';
    size--;
    memset(&cur, 0, sizeof cur);
    mf_read_opts_init(&cur.opts);
    cur.opts.format = FUZZ_FORMAT;
    cur.opts.index_base = (int)(opt & 3) == 3 ? -1 : (int)(opt & 3) - 1;
    cur.opts.flags = opt & 4 ? MF_SPARSE_SUM_DUPLICATES : 0;
    cur.opts.flags |= opt & 8 ? MF_SPARSE_PATTERN : 0;
    cur.opts.rows = opt & 16 ? given_extents[opt >> 6] : 0;
    cur.opts.cols = opt & 32 ? given_extents[opt >> 6] : 0;
    cur.size = size;
    cur.path = FUZZ_FORMAT == MF_FORMAT_AUTO ? link_path[opt >> 6] : fuzz_fd_path;
    cur.kind = FUZZ_FORMAT;
    if (FUZZ_FORMAT == MF_FORMAT_AUTO) { /* as docs/formats.md says AUTO detects */
        static const mf_format by_suffix[4] = {MF_FORMAT_TRIPLETS, MF_FORMAT_MATRIX_MARKET,
                                               MF_FORMAT_PAIRS, MF_FORMAT_BINARY_TRIPLETS};
        size_t skip = starts_with(data, size, BOM) ? BOM_BYTES : 0;
        bool banner = starts_with(data + skip, size - skip, MM_BANNER);
        cur.kind = banner ? MF_FORMAT_MATRIX_MARKET : by_suffix[opt >> 6];
    }

    fuzz_write(data, size);
    mf_sparse *m = read_checked();
    if (!m)
        return 0;
    csr first = take_checked(m);
    /* A byte-order mark is no part of a text file's data: with it the file reads as without
     * it, or fails. (One mark: a second one is data, which the file without the first starts
     * with.) */
    if (cur.kind != MF_FORMAT_BINARY_TRIPLETS && starts_with(data, size, BOM) &&
        !starts_with(data + BOM_BYTES, size - BOM_BYTES, BOM)) {
        fuzz_write(data + BOM_BYTES, size - BOM_BYTES);
        cur.size = size - BOM_BYTES;
        m = read_checked();
        if (!m)
            fuzz_finding("the file reads with its UTF-8 byte-order mark, but fails without");
        csr plain = take_checked(m);
        if (!csr_equal(&first, &plain))
            fuzz_finding("a UTF-8 byte-order mark changes the matrix: %d x %d, %lld nonzeros with "
                         "it, %d x %d, %lld without",
                         first.rows, first.cols, (long long)first.nnz, plain.rows, plain.cols,
                         (long long)plain.nnz);
        csr_free(&plain);
    }
    csr_free(&first);
    return 0;
}
