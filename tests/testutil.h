/* Helpers shared by the Check suites. */
#ifndef MF_TESTUTIL_H
#define MF_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfact/mfact.h"

/* A CPU context (seed 0, or `seed`); the test fails if it cannot be made. */
mf_ctx *tu_cpu_ctx(void);
mf_ctx *tu_cpu_ctx_seeded(uint64_t seed);
/* A CPU context of `threads` OpenMP threads (seed 0). */
mf_ctx *tu_cpu_ctx_threads(int threads);

/* Write `size` bytes (text: size = strlen) to a new temporary file; returns its path, which
 * tu_cleanup() removes. `suffix` (".mtx", ".in", ...) matters for format detection. */
const char *tu_write_file(const char *suffix, const void *data, size_t size);
const char *tu_write_text(const char *suffix, const char *text);
/* The whole file at `path` in a new buffer (one byte more than its *n bytes; free it). */
unsigned char *tu_read_file(const char *path, size_t *n);
void tu_cleanup(void);

/* The context's memory statistics; the test fails if they cannot be read. */
mf_memory_stats tu_memory_stats(const mf_ctx *ctx);

/* Assert a matrix's shape and number of entries. */
void tu_expect_shape(const mf_sparse *m, int32_t rows, int32_t cols, int64_t nnz);

/* Path of a file under ../shared/data (or $MFACT_DATA_DIR), or NULL when absent. */
const char *tu_data_path(const char *relative);

/* A test case whose temporary files are removed after each test (in its own process). */
TCase *tu_tcase(const char *name);

/* A CUDA context with a device-memory limit (0: none); the test fails if it cannot be made. */
mf_ctx *tu_cuda_ctx(size_t limit);

/* For GPU suites: nonzero (after printing why) when no CUDA device is usable, so that
 * main returns 77 (skipped). */
int tu_no_gpu(void);

/* Run a suite; `fork` false keeps every test in this process (needed once CUDA is up).
 * Returns the process exit status: 0 when all passed. */
int tu_run(Suite *suite, bool fork);

/* What a suite is, for tu_main: its name; whether it needs a GPU (without a usable one it
 * is skipped, exit 77; with one its tests run without fork, which CUDA does not survive) or
 * ../shared/data (skipped when absent); the seconds each test may take (0: 120); and a
 * fixture run around each test (NULL: none). */
typedef struct tu_suite {
    const char *name;
    bool gpu, data;
    int timeout;
    SFun setup, teardown;
} tu_suite;

/* A suite's whole main: skip it or build it from `tests` (START_TEST's names) and run it.
 * Returns the process exit status. */
int tu_main(const tu_suite *suite, const TTest *const *tests, size_t n);

/* splitmix64: a small seeded generator for test data; tu_unit is uniform in [0, 1). */
uint64_t tu_splitmix64(uint64_t *state);
double tu_unit(uint64_t *state);

/* ||got - ref|| / ||ref|| in double (||got - ref|| when ref is zero). */
double tu_rel_diff(int64_t n, const float *got, const float *ref);

/* Assert that the message of the last failure contains `needle`. */
#define tu_assert_error_has(ctx, needle)                                                           \
    ck_assert_msg(strstr(mf_ctx_last_error(ctx), (needle)) != NULL, "message \"%s\" lacks \"%s\"", \
                  mf_ctx_last_error(ctx), (needle))

#endif
