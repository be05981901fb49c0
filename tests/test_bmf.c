/* mf_bmf_run on the CPU backend: planted exact recovery, incremental error bookkeeping
 * against a full recount after every sweep for ranks around word boundaries, tiny shapes,
 * all-zero and all-one matrices, warm starts, determinism over thread counts, the
 * Metropolis rule, cancellation, every bad argument, and the APatio quality bar. */
#include <math.h>
#include <sys/resource.h>

#include "bmf_fixtures.h"
#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"
#include "bool/bmf_rules.h"
#include "testutil.h"

/* A CPU context on one thread: timing that a busy machine slows evenly, and the Asso cover's
 * instances on the calling thread. */
static mf_ctx *one_thread_ctx(void)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    co.cpu_threads = 1;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &co), MF_OK);
    return ctx;
}

static mf_bmf_opts opts(int k)
{
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    o.rank = k;
    return o;
}

START_TEST(planted_rank3_exact)
{
    mf_ctx *ctx = tu_cpu_ctx_seeded(1);
    uint64_t *At = NULL, *Bt = NULL;
    mf_sparse *C = bx_planted(ctx, 60, 40, 3, 0.3, 0.0, 7, &At, &Bt, NULL);
    mf_bmf_opts o = opts(3);
    uint64_t *A = NULL, *B = NULL;
    mf_bmf_report rep = bx_run(ctx, C, &o, &A, &B);
    ck_assert_msg(rep.error == 0, "error %lld after %d sweeps", (long long)rep.error, rep.sweeps);
    ck_assert(rep.f1 == 1.0 && rep.precision == 1.0 && rep.recall == 1.0);
    ck_assert_double_eq(rep.relative_error, 0.0);
    /* A target of 0 stops at the first exact fit, long before max_sweeps. */
    ck_assert_int_lt(rep.sweeps, o.max_sweeps);
    free(A), free(B), free(At), free(Bt);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

/* Every sweep of every instance is recounted from scratch and compared (the debug hook). */
static void check_bookkeeping(mf_ctx *ctx, int32_t rows, int32_t cols, int k, mf_bmf_flip flip,
                              float temperature, mf_bmf_init init)
{
    mf_sparse *C =
        bx_planted(ctx, rows, cols, k < 8 ? k : 8, 0.15, 0.05, 100 + k, NULL, NULL, NULL);
    mf_bmf_opts o = opts(k);
    o.instances = 3;
    o.max_sweeps = 12;
    o.flip = flip;
    o.temperature = temperature;
    o.init = init;
    uint64_t *A = NULL, *B = NULL;
    bx_run_recounted(ctx, C, &o, &A, &B);
    int kw = (k + 63) / 64;
    uint64_t tail = k % 64 ? ~((1ull << (k % 64)) - 1) : 0;
    for (int32_t i = 0; i < rows; i++)
        ck_assert_msg((A[(int64_t)i * kw + kw - 1] & tail) == 0, "A row %d has bits past k", i);
    for (int32_t j = 0; j < cols; j++)
        ck_assert_msg((B[(int64_t)j * kw + kw - 1] & tail) == 0, "B col %d has bits past k", j);
    free(A), free(B);
    mf_sparse_destroy(C);
}

START_TEST(bookkeeping_matches_recount)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int ks[] = {1, 63, 64, 65, 128, 129};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        check_bookkeeping(ctx, 70, 90, ks[t], MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_SAMPLE);
        check_bookkeeping(ctx, 70, 90, ks[t], MF_BMF_FLIP_PER_BIT, 0.5f, MF_BMF_INIT_RANDOM);
    }
    check_bookkeeping(ctx, 40, 50, 1000, MF_BMF_FLIP_SINGLE, 2.0f, MF_BMF_INIT_RANDOM);
    /* The largest rank, from Asso's cover (most of its factors stay empty here). */
    check_bookkeeping(ctx, 40, 50, 1024, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_ASSO);
    check_bookkeeping(ctx, 70, 90, 65, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_ASSO);
    /* Shapes below one word of lines. */
    check_bookkeeping(ctx, 5, 70, 7, MF_BMF_FLIP_SINGLE, 0.0f, MF_BMF_INIT_SAMPLE);
    check_bookkeeping(ctx, 70, 5, 7, MF_BMF_FLIP_SINGLE, 1.0f, MF_BMF_INIT_RANDOM);
    check_bookkeeping(ctx, 1, 1, 2, MF_BMF_FLIP_PER_BIT, 0.0f, MF_BMF_INIT_SAMPLE);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A 20News-like matrix: most rows and columns hold no one. Three planted blocks in the
 * corner and scattered single ones elsewhere. */
static mf_sparse *mostly_empty(mf_ctx *ctx, int32_t rows, int32_t cols)
{
    unsigned char *d = calloc((size_t)rows * cols, 1);
    ck_assert(d);
    for (int f = 0; f < 3; f++)
        for (int32_t i = 0; i < 60; i++)
            for (int32_t j = 0; j < 90; j++)
                if ((i * 7 + f) % 3 == 0 && (j * 5 + f) % 4 == 0)
                    d[(int64_t)i * cols + j] = 1;
    uint64_t x = 12345;
    for (int t = 0; t < 60; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        d[(int64_t)(x >> 33) % ((int64_t)rows * cols)] = 1;
    }
    int64_t nnz = 0;
    for (int64_t p = 0; p < (int64_t)rows * cols; p++)
        nnz += d[p];
    int32_t *r = malloc((size_t)nnz * 4), *c = malloc((size_t)nnz * 4);
    ck_assert(r && c);
    nnz = 0;
    for (int64_t p = 0; p < (int64_t)rows * cols; p++)
        if (d[p])
            r[nnz] = (int32_t)(p / cols), c[nnz++] = (int32_t)(p % cols);
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, rows, cols, nnz, r, c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(d), free(r), free(c);
    return m;
}

/* Lines without ones or factors are skipped, and the others count from their ones and their
 * factor set's cached counts: every sweep is still recounted from scratch, and the result
 * counted densely (bx_run_recounted), with and without Metropolis moves, across word
 * boundaries of the rank. */
START_TEST(mostly_empty_lines_bookkeeping)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *C = mostly_empty(ctx, 500, 2000);
    const int ks[] = {3, 20, 70};
    const mf_bmf_init inits[] = {MF_BMF_INIT_ASSO, MF_BMF_INIT_SAMPLE, MF_BMF_INIT_RANDOM};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++)
        for (size_t u = 0; u < sizeof inits / sizeof *inits; u++) {
            mf_bmf_opts o = opts(ks[t]);
            o.instances = 2;
            o.max_sweeps = 6;
            o.init = inits[u];
            o.temperature = u == 2 ? 0.5f : 0.0f;
            uint64_t *A = NULL, *B = NULL;
            mf_bmf_report rep = bx_run_recounted(ctx, C, &o, &A, &B);
            if (inits[u] == MF_BMF_INIT_ASSO) /* the blocks are found */
                ck_assert_msg(rep.fn < 200, "k = %d: %lld false negatives", ks[t],
                              (long long)rep.fn);
            free(A), free(B);
        }
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The default start (MF_BMF_INIT_AUTO) is Asso's cover where that is cheap: the same run as
 * an explicit Asso start on a sparse planted matrix; and the estimate that decides rules it
 * out on a dense matrix (half ones, 3000 x 3000), where the cover's work grows with the
 * square of each row's ones. */
START_TEST(default_start_is_asso_where_cheap)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_bmf_opts o = opts(12);
    ck_assert_int_eq(o.init, MF_BMF_INIT_AUTO);
    mf_sparse *C = bx_planted(ctx, 300, 400, 6, 0.1, 0.01, 9, NULL, NULL, NULL);
    double seconds = -1.0;
    ck_assert_int_eq(mf_bmf_asso_estimate(ctx, C, 12, 16, &seconds), MF_OK);
    ck_assert_msg(seconds >= 0.0 && seconds < 0.5, "estimate %g s", seconds);
    o.instances = 4, o.max_sweeps = 5;
    uint64_t *A1 = NULL, *B1 = NULL, *A2 = NULL, *B2 = NULL;
    mf_bmf_report r1 = bx_run(ctx, C, &o, &A1, &B1);
    o.init = MF_BMF_INIT_ASSO;
    mf_bmf_report r2 = bx_run(ctx, C, &o, &A2, &B2);
    ck_assert_int_eq(r1.error, r2.error);
    ck_assert_mem_eq(A1, A2, (size_t)300 * 8);
    ck_assert_mem_eq(B1, B2, (size_t)400 * 8);
    free(A1), free(B1), free(A2), free(B2);
    mf_sparse_destroy(C);

    enum { n = 3000 };
    int64_t nnz = (int64_t)n * n / 2;
    int32_t *r = malloc((size_t)nnz * 4), *c = malloc((size_t)nnz * 4);
    ck_assert(r && c);
    for (int64_t p = 0; p < nnz; p++)
        r[p] = (int32_t)(p / (n / 2)), c[p] = (int32_t)(2 * (p % (n / 2)) + (p / (n / 2)) % 2);
    mf_sparse *D = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &D, n, n, nnz, r, c, NULL, MF_MEMORY_HOST, 0), MF_OK);
    free(r), free(c);
    ck_assert_int_eq(mf_bmf_asso_estimate(ctx, D, 20, 16, &seconds), MF_OK);
    ck_assert_msg(seconds > 2.0, "dense estimate %g s", seconds);
    mf_sparse_destroy(D);
    mf_ctx_destroy(ctx);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
#define BX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BX_ASAN 1
#endif
#endif

/* 200,000 x 100,000 with 3 planted blocks and ~20,000 ones: C in bits would take 5 GB, but
 * with single-bit moves the engine keeps only the ones and the factors, so the run fits an
 * address-space limit of 3 GB (not under AddressSanitizer, which reserves far more) and
 * finds the blocks. */
START_TEST(memory_follows_the_ones)
{
#ifndef BX_ASAN
    struct rlimit lim = {(rlim_t)3 << 30, (rlim_t)3 << 30};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0); /* this test's own process */
#endif
    enum { rows = 200000, cols = 100000 };
    int64_t cap = 40000, nnz = 0;
    int32_t *r = malloc((size_t)cap * 4), *c = malloc((size_t)cap * 4);
    ck_assert(r && c);
    for (int f = 0; f < 3; f++) /* block f: rows 1000f .. +80, columns 5000f .. +60 */
        for (int32_t i = 0; i < 80; i++)
            for (int32_t j = 0; j < 60; j++)
                if ((i + j + f) % 3 != 0 || j < 40)
                    r[nnz] = 1000 * f + i * 37 % 80, c[nnz++] = 5000 * f + j;
    /* Two threads whatever the host: each thread's malloc arena reserves address space (64
     * MiB on glibc), and 64 of them overran the cap on a 64-core host. */
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    co.cpu_threads = 2;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &co), MF_OK);
    mf_sparse *C = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &C, rows, cols, nnz, r, c, NULL, MF_MEMORY_HOST,
                                        MF_SPARSE_SUM_DUPLICATES),
                     MF_OK);
    free(r), free(c);
    mf_bmf_opts o = opts(5);
    o.instances = 2, o.max_sweeps = 10;
    uint64_t *A = calloc(rows, 8), *B = calloc(cols, 8);
    ck_assert(A && B);
    mf_bmf_report rep = {.struct_size = sizeof rep};
    ck_assert_msg(mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep) == MF_OK, "%s",
                  mf_ctx_last_error(ctx));
    ck_assert_msg(rep.recall > 0.9 && rep.precision > 0.8, "precision %g recall %g", rep.precision,
                  rep.recall);
    free(A), free(B);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

static mf_sparse *constant(mf_ctx *ctx, int32_t rows, int32_t cols, int one)
{
    int64_t nnz = one ? (int64_t)rows * cols : 0;
    int32_t *r = malloc((size_t)(nnz + 1) * 4), *c = malloc((size_t)(nnz + 1) * 4);
    for (int64_t p = 0; p < nnz; p++)
        r[p] = (int32_t)(p / cols), c[p] = (int32_t)(p % cols);
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, rows, cols, nnz, r, c, NULL, MF_MEMORY_HOST, 0),
                     MF_OK);
    free(r), free(c);
    return m;
}

START_TEST(all_zero_and_all_one)
{
    mf_ctx *ctx = tu_cpu_ctx();
    for (int init = 0; init < 2; init++) {
        mf_sparse *Z = constant(ctx, 33, 17, 0), *O = constant(ctx, 33, 17, 1);
        mf_bmf_opts o = opts(4);
        o.init = init ? MF_BMF_INIT_RANDOM : MF_BMF_INIT_SAMPLE;
        uint64_t *A = NULL, *B = NULL;
        mf_bmf_report rep = bx_run(ctx, Z, &o, &A, &B);
        ck_assert_int_eq(rep.error, 0);
        ck_assert(rep.recall == 1.0 && rep.precision == 1.0);
        free(A), free(B), A = B = NULL;
        rep = bx_run(ctx, O, &o, &A, &B);
        ck_assert_msg(rep.error == 0, "all-one: error %lld", (long long)rep.error);
        free(A), free(B);
        mf_sparse_destroy(Z);
        mf_sparse_destroy(O);
    }
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(warm_start_and_determinism)
{
    mf_ctx *ctx = tu_cpu_ctx();
    uint64_t *At = NULL, *Bt = NULL;
    mf_sparse *C = bx_planted(ctx, 80, 70, 10, 0.2, 0.0, 11, &At, &Bt, NULL);
    /* Given the planted factors, the run stops at once with error 0 and returns them. */
    mf_bmf_opts o = opts(10);
    o.init = MF_BMF_INIT_GIVEN;
    uint64_t *A = malloc(80 * 8), *B = malloc(70 * 8);
    memcpy(A, At, 80 * 8), memcpy(B, Bt, 70 * 8);
    mf_bmf_report rep = bx_run(ctx, C, &o, &A, &B);
    ck_assert_int_eq(rep.error, 0);
    ck_assert_int_eq(rep.sweeps, 0);
    ck_assert(memcmp(A, At, 80 * 8) == 0 && memcmp(B, Bt, 70 * 8) == 0);
    /* The same seed gives the same factors with one thread and with several. */
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    co.cpu_threads = 1;
    mf_ctx *one = NULL;
    ck_assert_int_eq(mf_ctx_create(&one, &co), MF_OK);
    mf_sparse *C1 = bx_planted(one, 80, 70, 10, 0.2, 0.05, 11, NULL, NULL, NULL);
    mf_sparse *C2 = bx_planted(ctx, 80, 70, 10, 0.2, 0.05, 11, NULL, NULL, NULL);
    o = opts(10);
    o.max_sweeps = 40;
    o.temperature = 0.5f;
    uint64_t *A1 = NULL, *B1 = NULL, *A2 = NULL, *B2 = NULL;
    mf_bmf_report r1 = bx_run(one, C1, &o, &A1, &B1), r2 = bx_run(ctx, C2, &o, &A2, &B2);
    ck_assert_int_eq(r1.error, r2.error);
    ck_assert_int_eq(r1.best_instance, r2.best_instance);
    ck_assert(memcmp(A1, A2, 80 * 8) == 0 && memcmp(B1, B2, 70 * 8) == 0);
    free(A), free(B), free(At), free(Bt), free(A1), free(B1), free(A2), free(B2);
    mf_sparse_destroy(C);
    mf_sparse_destroy(C1);
    mf_sparse_destroy(C2);
    mf_ctx_destroy(one);
    mf_ctx_destroy(ctx);
}
END_TEST

/* CuBin's Metropolis step took every worsening move; this one takes a move of weighted
 * cost d with probability exp(-d / T), and never at T = 0. */
START_TEST(metropolis_rule)
{
    const int n = 200000;
    for (int t = 0; t < 3; t++) {
        double T = t == 0 ? 1.0 : t == 1 ? 0.5 : 4.0;
        int64_t d = 2 * BMF_WSCALE; /* a move that costs 2 */
        int taken = 0;
        for (int s = 0; s < n; s++) {
            mf_philox_block r = bmf_draw(99, t, 3, s, 0);
            taken += bmf_accept(d, T, r.v[2]);
        }
        double want = exp(-2.0 / T), got = (double)taken / n;
        ck_assert_msg(fabs(got - want) < 5.0 * sqrt(want * (1 - want) / n) + 1e-4,
                      "T %g: took %g of moves costing 2, expected %g", T, got, want);
    }
    for (int s = 0; s < 1000; s++) {
        mf_philox_block r = bmf_draw(99, 0, 4, s, 0);
        ck_assert(!bmf_accept(1, 0.0, r.v[2]));               /* T = 0: no worsening move */
        ck_assert(bmf_accept(-1, 0.0, r.v[2]));               /* an improving one always */
        ck_assert(!bmf_accept(40 * BMF_WSCALE, 1.0, r.v[2])); /* e^-40: never in 1000 */
    }
}
END_TEST

static int stop_at_three(void *user, const mf_bmf_progress *p)
{
    int *calls = user;
    if (p->sweep == 0) /* the default start's rounds (asso_start_progress_and_cancel) */
        return 0;
    ++*calls;
    ck_assert_int_eq(p->sweep, *calls);
    ck_assert(p->error >= 0 && p->relative_error >= 0 && p->weight >= 1.0);
    return p->sweep == 3;
}

START_TEST(cancellation)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *C = bx_planted(ctx, 50, 60, 6, 0.2, 0.1, 3, NULL, NULL, NULL);
    mf_bmf_opts o = opts(6);
    int calls = 0;
    o.progress = stop_at_three;
    o.progress_user = &calls;
    uint64_t *A = calloc(50, 8), *B = calloc(60, 8);
    mf_bmf_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep), MF_ERR_CANCELLED);
    tu_assert_error_has(ctx, "after sweep 3");
    ck_assert_int_eq(calls, 3);
    ck_assert_int_eq(rep.sweeps, 3);
    int64_t fp, fn;
    bx_count(C, 6, A, B, &fp, &fn);
    ck_assert(fp == rep.fp && fn == rep.fn);
    free(A), free(B);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

/* The Asso start's rounds: a watched cover stops where told and keeps what it built (one
 * thread: the instance runs on the calling thread, where the watch is told), and a run
 * reports the start's rounds as sweep 0 and can be cancelled there. */
typedef struct start_calls {
    int start_calls, sweeps, stop_at_round;
    double last_done;
    int64_t ones;
} start_calls;

static int watch_start(void *user, const mf_bmf_progress *p)
{
    start_calls *c = user;
    if (p->sweep == 0) {
        ck_assert_int_eq(c->sweeps, 0); /* the start comes first */
        ck_assert(p->start_done > c->last_done && p->start_done <= 1.0);
        ck_assert_int_eq(p->error, c->ones); /* the empty factorization's counts */
        ck_assert_double_eq(p->recall, 0.0);
        c->last_done = p->start_done;
        return ++c->start_calls == c->stop_at_round;
    }
    ck_assert_double_eq(p->start_done, 1.0);
    c->sweeps++;
    return 0;
}

START_TEST(asso_start_progress_and_cancel)
{
    mf_ctx *ctx = one_thread_ctx();
    mf_sparse *C = bx_planted(ctx, 200, 150, 8, 0.15, 0.02, 21, NULL, NULL, NULL);
    int64_t ones;
    ck_assert_int_eq(mf_sparse_shape(C, NULL, NULL, &ones), MF_OK);
    bx_check_asso_watch(ctx, C, 10, MF_BMF_ASSO_CPU);

    /* a run that watches: the start's rounds (sweep 0), then the sweeps */
    mf_bmf_opts o = opts(10);
    o.init = MF_BMF_INIT_ASSO;
    o.instances = 2;
    o.max_sweeps = 4;
    start_calls c = {0, 0, -1, 0.0, ones};
    o.progress = watch_start;
    o.progress_user = &c;
    uint64_t *A = calloc(200 * 2, 8), *B = calloc(150 * 2, 8);
    mf_bmf_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_int_ge(c.start_calls, 3); /* rank 8 planted: several rounds take a factor */
    ck_assert_int_eq(c.sweeps, rep.sweeps);

    /* cancelled at the start's second round: the factors of the rounds done, reported */
    c = (start_calls){0, 0, 2, 0.0, ones};
    memset(A, 0xA5, 200 * 8), memset(B, 0xA5, 150 * 8);
    ck_assert_int_eq(mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep), MF_ERR_CANCELLED);
    tu_assert_error_has(ctx, "after Asso start round 2");
    ck_assert_int_eq(c.start_calls, 2);
    ck_assert_int_eq(c.sweeps, 0);
    ck_assert_int_eq(rep.sweeps, 0);
    int64_t fp, fn;
    bx_count(C, 10, A, B, &fp, &fn);
    ck_assert(fp == rep.fp && fn == rep.fn);
    ck_assert_int_lt(rep.error, ones); /* two factors cover something */
    for (int i = 0; i < 200; i++)
        ck_assert((A[i] & ~(uint64_t)3) == 0); /* at most the first two factors */

    /* a time limit already spent when the start begins: the run still ends well, at once,
     * from what the start had built (nothing) */
    o.progress = NULL;
    o.time_limit = 1e-9;
    o.max_sweeps = 1000;
    ck_assert_int_eq(mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep), MF_OK);
    ck_assert_int_lt(rep.sweeps, 1000);
    bx_count(C, 10, A, B, &fp, &fn);
    ck_assert(fp == rep.fp && fn == rep.fn);
    free(A), free(B);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

static void expect_bad(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t *A,
                       uint64_t *B, mf_memory where, mf_status want, const char *needle)
{
    uint64_t a0 = A ? A[0] : 0, b0 = B ? B[0] : 0;
    mf_bmf_report rep = {.struct_size = sizeof rep, .error = -7};
    ck_assert_int_eq(mf_bmf_run(ctx, C, o, A, B, where, &rep), want);
    tu_assert_error_has(ctx, needle);
    ck_assert_int_eq(rep.error, -7);
    if (A)
        ck_assert(A[0] == a0);
    if (B)
        ck_assert(B[0] == b0);
}

/* The time limit holds within a sweep: it was checked only after a queue of up to 16
 * sweeps (a 10 s limit ran 38-46 s). The run's own mean sweep time d bounds the overrun:
 * at most 3 d (one sweep, and room for a loaded machine), where a queue of 16 would
 * overrun by up to 16 d. One thread, so that a busy CI machine slows the run evenly. */
START_TEST(time_limit_within_a_sweep)
{
    mf_ctx *ctx = one_thread_ctx();
    mf_sparse *C = bx_planted(ctx, 1200, 1000, 24, 0.06, 0.02, 4, NULL, NULL, NULL);
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    o.rank = 48, o.instances = 4, o.patience = 0;
    o.max_sweeps = 100000, o.time_limit = 1.0;
    uint64_t *A = NULL, *B = NULL;
    mf_bmf_report r = bx_run(ctx, C, &o, &A, &B);
    double d = r.seconds / r.sweeps;
    printf("time limit %.2f s: ran %.3f s, %d sweeps of %.4f s\n", o.time_limit, r.seconds,
           r.sweeps, d);
    ck_assert_int_lt(r.sweeps, o.max_sweeps);
    ck_assert_double_ge(r.seconds, o.time_limit);
    ck_assert_double_lt(r.seconds, o.time_limit + 3 * d);
    free(A);
    free(B);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments)
{
    mf_ctx *ctx = tu_cpu_ctx();
    mf_sparse *C = bx_planted(ctx, 10, 12, 2, 0.3, 0.0, 1, NULL, NULL, NULL);
    uint64_t A[10 * 16], B[12 * 16];
    for (int i = 0; i < 10 * 16; i++)
        A[i] = 0x5555;
    for (int i = 0; i < 12 * 16; i++)
        B[i] = 0xaaaa;
    mf_bmf_opts o = opts(2);
    ck_assert_int_eq(mf_bmf_run(NULL, C, &o, A, B, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    expect_bad(ctx, NULL, &o, A, B, MF_MEMORY_HOST, MF_ERR_INVALID_ARGUMENT, "C is NULL");
    expect_bad(ctx, C, &o, NULL, B, MF_MEMORY_HOST, MF_ERR_INVALID_ARGUMENT, "A_bits is NULL");
    expect_bad(ctx, C, &o, A, NULL, MF_MEMORY_HOST, MF_ERR_INVALID_ARGUMENT, "B_bits is NULL");
    const struct {
        int field;
        double value;
        const char *needle;
    } cases[] = {
        {0, 0, "rank = 0"},          {0, -3, "rank = -3"},      {0, 1025, "rank = 1025"},
        {1, 0, "instances = 0"},     {2, 0, "max_sweeps = 0"},  {3, -1, "patience"},
        {4, -0.5, "target_error"},   {5, -1, "time_limit"},     {6, -2, "weight ="},
        {7, 1.5, "weight_decay"},    {8, -1, "weight_floor"},   {9, 7, "flip = 7"},
        {10, 2, "flip_probability"}, {11, -1, "temperature ="}, {12, 2, "temperature_decay"},
        {13, 9, "init = 9"},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        mf_bmf_opts b = opts(2);
        double v = cases[t].value;
        switch (cases[t].field) {
        case 0: b.rank = (int)v; break;
        case 1: b.instances = (int)v; break;
        case 2: b.max_sweeps = (int)v; break;
        case 3: b.patience = (int)v; break;
        case 4: b.target_error = v; break;
        case 5: b.time_limit = v; break;
        case 6: b.weight = (float)v; break;
        case 7: b.weight_decay = (float)v; break;
        case 8: b.weight_floor = (float)v; break;
        case 9: b.flip = (mf_bmf_flip)v; break;
        case 10: b.flip_probability = (float)v; break;
        case 11: b.temperature = (float)v; break;
        case 12: b.temperature_decay = (float)v; break;
        default: b.init = (mf_bmf_init)v; break;
        }
        expect_bad(ctx, C, &b, A, B, MF_MEMORY_HOST, MF_ERR_INVALID_ARGUMENT, cases[t].needle);
    }
    /* where: not an mf_memory value; device memory on a CPU context. */
    mf_bmf_opts d = opts(2);
    expect_bad(ctx, C, &d, A, B, (mf_memory)5, MF_ERR_INVALID_ARGUMENT, "where = 5");
    expect_bad(ctx, C, &d, A, B, MF_MEMORY_DEVICE, MF_ERR_INVALID_ARGUMENT, "A_bits");
    /* Given factors with a bit past the rank. */
    mf_bmf_opts g = opts(2);
    g.init = MF_BMF_INIT_GIVEN;
    memset(A, 0, sizeof A), memset(B, 0, sizeof B);
    B[7] = 4;
    expect_bad(ctx, C, &g, A, B, MF_MEMORY_HOST, MF_ERR_INVALID_DATA, "column 7");
    /* An unset struct_size. */
    mf_bmf_opts z;
    memset(&z, 0, sizeof z);
    expect_bad(ctx, C, &z, A, B, MF_MEMORY_HOST, MF_ERR_INVALID_ARGUMENT, "struct_size");
    /* A report whose struct_size is unset is refused too. */
    mf_bmf_report rep;
    memset(&rep, 0, sizeof rep);
    ck_assert_int_eq(mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep), MF_ERR_INVALID_ARGUMENT);
    mf_sparse_destroy(C);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(apatio_quality)
{
    mf_ctx *ctx = tu_cpu_ctx();
    bx_check_apatio(ctx, "cpu", 2, MF_BMF_INIT_SAMPLE);
    mf_ctx_destroy(ctx);
}
END_TEST

/* mf_bmf_asso (the sparse, incremental CPU backend) against its dense definition, for
 * three taus, on shapes with empty rows and columns, k past a word, and a tiny matrix. */
START_TEST(asso_matches_reference)
{
    mf_ctx *ctx = tu_cpu_ctx();
    struct {
        int32_t m, n;
        int rank;
        double p, noise;
    } cases[] = {{40, 70, 6, 0.2, 0.05},
                 {33, 300, 4, 0.15, 0.1},
                 {5, 3, 2, 0.5, 0.0},
                 {120, 45, 8, 0.1, 0.02}};
    const int ks[] = {1, 5, 65};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
            int k = ks[t], kw = (k + 63) / 64, inst = 3;
            mf_sparse *C = bx_planted(ctx, cases[c].m, cases[c].n, cases[c].rank, cases[c].p,
                                      cases[c].noise, 100 + c, NULL, NULL, NULL);
            size_t ab = (size_t)cases[c].m * kw, bb = (size_t)cases[c].n * kw;
            uint64_t *A = malloc(inst * ab * 8), *B = malloc(inst * bb * 8);
            uint64_t *Ar = malloc(ab * 8), *Br = malloc(bb * 8);
            ck_assert(A && B && Ar && Br);
            ck_assert_int_eq(mf_bmf_asso(ctx, C, k, inst, MF_BMF_ASSO_AUTO, NULL, A, B), MF_OK);
            for (int q = 0; q < inst; q++) {
                bx_asso_reference(C, k, q, Ar, Br);
                ck_assert_msg(
                    memcmp(A + q * ab, Ar, ab * 8) == 0 && memcmp(B + q * bb, Br, bb * 8) == 0,
                    "case %zu k %d instance %d: the cover differs from the reference", c, k, q);
            }
            free(A), free(B), free(Ar), free(Br);
            mf_sparse_destroy(C);
        }
    mf_ctx_destroy(ctx);
}
END_TEST

/* The search from Asso's cover ends at or below the best instance's cover, and recovers a
 * noise-free planted factorization exactly. */
START_TEST(asso_start_never_worse)
{
    mf_ctx *ctx = tu_cpu_ctx();
    for (int noisy = 0; noisy < 2; noisy++) {
        const int32_t m = 300, n = 200;
        const int k = 8, inst = 4;
        mf_sparse *C = bx_planted(ctx, m, n, k, 0.15, noisy ? 0.05 : 0.0, 9, NULL, NULL, NULL);
        uint64_t *A0 = malloc((size_t)inst * m * 8), *B0 = malloc((size_t)inst * n * 8);
        ck_assert(A0 && B0);
        ck_assert_int_eq(mf_bmf_asso(ctx, C, k, inst, MF_BMF_ASSO_AUTO, NULL, A0, B0), MF_OK);
        int64_t cover = INT64_MAX;
        for (int q = 0; q < inst; q++) {
            int64_t fp, fn;
            bx_count(C, k, A0 + (size_t)q * m, B0 + (size_t)q * n, &fp, &fn);
            cover = fp + fn < cover ? fp + fn : cover;
        }
        mf_bmf_opts o;
        mf_bmf_opts_init(&o);
        o.rank = k;
        o.instances = inst;
        o.init = MF_BMF_INIT_ASSO;
        uint64_t *A = NULL, *B = NULL;
        mf_bmf_report r = bx_run(ctx, C, &o, &A, &B);
        ck_assert_msg(r.error <= cover, "noise %d: error %lld above Asso's %lld", noisy,
                      (long long)r.error, (long long)cover);
        if (!noisy)
            ck_assert_msg(r.error == 0, "noise-free planted: error %lld", (long long)r.error);
        free(A), free(B), free(A0), free(B0);
        mf_sparse_destroy(C);
    }
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(apatio_asso_quality)
{
    mf_ctx *ctx = tu_cpu_ctx();
    bx_check_apatio(ctx, "cpu", 4, MF_BMF_INIT_ASSO);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "bmf", .timeout = 300};
    const TTest *const tests[] = {planted_rank3_exact,
                                  bookkeeping_matches_recount,
                                  mostly_empty_lines_bookkeeping,
                                  all_zero_and_all_one,
                                  warm_start_and_determinism,
                                  metropolis_rule,
                                  cancellation,
                                  asso_start_progress_and_cancel,
                                  time_limit_within_a_sweep,
                                  bad_arguments,
                                  apatio_quality,
                                  asso_matches_reference,
                                  asso_start_never_worse,
                                  apatio_asso_quality,
                                  default_start_is_asso_where_cheap,
                                  memory_follows_the_ones};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
