#define _GNU_SOURCE /* mkstemps */
#include "testutil.h"

#include <math.h>

#include "cuda/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TU_MAX_FILES 256
static char *files[TU_MAX_FILES];
static int nfiles;

mf_ctx *tu_cpu_ctx(void)
{
    return tu_cpu_ctx_seeded(0);
}

static mf_ctx *cpu_ctx(uint64_t seed, int threads)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CPU;
    o.seed = seed;
    o.cpu_threads = threads;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    return ctx;
}

mf_ctx *tu_cpu_ctx_seeded(uint64_t seed)
{
    return cpu_ctx(seed, 0);
}

mf_ctx *tu_cpu_ctx_threads(int threads)
{
    return cpu_ctx(0, threads);
}

const char *tu_write_file(const char *suffix, const void *data, size_t size)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    size_t len = strlen(dir) + strlen(suffix) + sizeof "/mfact-test-XXXXXX";
    char *path = malloc(len);
    ck_assert_ptr_nonnull(path);
    snprintf(path, len, "%s/mfact-test-XXXXXX%s", dir, suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, size), (ssize_t)size);
    close(fd);
    ck_assert_int_lt(nfiles, TU_MAX_FILES);
    files[nfiles++] = path;
    return path;
}

const char *tu_write_text(const char *suffix, const char *text)
{
    return tu_write_file(suffix, text, strlen(text));
}

unsigned char *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    unsigned char *b = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

void tu_cleanup(void)
{
    for (int i = 0; i < nfiles; i++) {
        unlink(files[i]);
        free(files[i]);
    }
    nfiles = 0;
}

mf_memory_stats tu_memory_stats(const mf_ctx *ctx)
{
    mf_memory_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, &st), MF_OK);
    return st;
}

void tu_expect_shape(const mf_sparse *m, int32_t rows, int32_t cols, int64_t nnz)
{
    int32_t r = -1, c = -1;
    int64_t n = -1;
    ck_assert_int_eq(mf_sparse_shape(m, &r, &c, &n), MF_OK);
    ck_assert_int_eq(r, rows);
    ck_assert_int_eq(c, cols);
    ck_assert_int_eq(n, nnz);
}

const char *tu_data_path(const char *relative)
{
    static char path[4096];
    const char *dir = getenv("MFACT_DATA_DIR") ? getenv("MFACT_DATA_DIR") : MFACT_DATA_DIR;
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    return access(path, R_OK) == 0 ? path : NULL;
}

TCase *tu_tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, NULL, tu_cleanup);
    tcase_set_timeout(tc, 120);
    return tc;
}

int tu_run(Suite *suite, bool fork)
{
    SRunner *runner = srunner_create(suite);
    if (!fork)
        srunner_set_fork_status(runner, CK_NOFORK);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    tu_cleanup();
    return failed == 0 ? 0 : 1;
}

/* Whether name is one of the comma-separated names of list. */
static bool tu_listed(const char *list, const char *name)
{
    const size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* Whether every name in a comma-separated list (NULL: none) is one of the suite's tests. */
static bool tu_names_known(const char *suite, const char *var, const char *list,
                           const TTest *const *tests, size_t n)
{
    if (!list)
        return true;
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strlen(tests[i]->name) == len && strncmp(tests[i]->name, p, len) == 0;
        if (!found) {
            printf("%s: %s names '%.*s', which is not one of its tests\n", suite, var, (int)len, p);
            return false;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return true;
}

int tu_main(const tu_suite *suite, const TTest *const *tests, size_t n)
{
    /* Before the skips: a misspelt name fails on machines without a GPU too. */
    const char *only = getenv("MFACT_TESTS");
    const char *skip = getenv("MFACT_TESTS_SKIP");
    if (only && !*only) // set but empty: no filter (an empty list would run nothing, and pass)
        only = NULL;
    if (!tu_names_known(suite->name, "MFACT_TESTS", only, tests, n) ||
        !tu_names_known(suite->name, "MFACT_TESTS_SKIP", skip, tests, n))
        return 1;
    if (suite->gpu && tu_no_gpu())
        return 77;
    if (suite->data && !tu_data_path("README.md")) {
        printf("../shared/data is absent: skipped\n");
        return 77;
    }
    Suite *s = suite_create(suite->name);
    TCase *tc = tu_tcase(suite->name);
    if (suite->timeout > 0)
        tcase_set_timeout(tc, suite->timeout);
    if (suite->setup || suite->teardown)
        tcase_add_checked_fixture(tc, suite->setup, suite->teardown);
    /* MFACT_TESTS (comma-separated names) runs only those tests: a slow sanitizer (racecheck)
     * over the cases a change touched. MFACT_TESTS_SKIP leaves those out: ctest runs a long
     * suite's slowest tests as entries of their own, each under the suite's time limit. A
     * name the suite lacks fails the run (above) rather than passing with nothing run. */
    for (size_t i = 0; i < n; i++)
        if ((!only || tu_listed(only, tests[i]->name)) &&
            !(skip && tu_listed(skip, tests[i]->name)))
            tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tu_run(s, !suite->gpu);
}

int tu_no_gpu(void)
{
    char why[256];
    if (mf_cuda_device_count(why, sizeof why) > 0)
        return 0;
    printf("no usable CUDA device (%s): skipped\n", why);
    return 1;
}

mf_ctx *tu_cuda_ctx(size_t limit)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    o.device_memory_limit = limit;
    mf_ctx *ctx = NULL;
    mf_status st = mf_ctx_create(&ctx, &o);
    ck_assert_msg(st == MF_OK, "%s", mf_ctx_last_error(NULL));
    return ctx;
}

uint64_t tu_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_unit(uint64_t *state)
{
    return (double)(tu_splitmix64(state) >> 11) * 0x1.0p-53;
}

double tu_rel_diff(int64_t n, const float *got, const float *ref)
{
    double num = 0.0, den = 0.0;
    for (int64_t p = 0; p < n; p++) {
        double d = (double)got[p] - ref[p];
        num += d * d;
        den += (double)ref[p] * ref[p];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}
