/* CPU ranks in several processes (mf_ctx_set_mpi_comm), run by ctest under mpiexec with 2
 * and 3 processes, one context each: every op of the MPI exchange against values worked out
 * here (uneven and empty blocks, owner permutations, sums whose bits depend on the order),
 * the collective fits over an MPI group against one context (ALS and implicit ALS bit for
 * bit, ASD within test_ranks's bounds) and against a group of threads of the same size (the
 * same bits: the MPI sums are the in-process stand-in's rank-order sums), SGD's ranks
 * agreeing, one rank's failure failing every rank, the library's messages kept apart from
 * the caller's, and the join's arguments. test_ranks checks mf_ctx_set_mpi_comm where MPI is
 * absent or not initialized.
 * Check runs the tests in this process (no fork: MPI does not survive one). A test makes all
 * its collective calls on every rank and notes what it finds (expect); check_expectations
 * asserts at its end, on every rank when one of them found something, so that a failure on
 * one rank never leaves the others waiting in a collective. */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "als_fixtures.h"
#include "core/ctx.h"
#include "ranks_fixtures.h"
#include "testutil.h"

#define USERS 300
#define ITEMS 120

static int world_rank, world_size;

/* ---- what a test found, asserted at its end on every rank ------------------------------ */
static char notes[2048];
static size_t notes_len;

__attribute__((format(printf, 2, 3))) static void expect(bool ok, const char *fmt, ...)
{
    if (ok || notes_len + 2 >= sizeof notes)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + notes_len, sizeof notes - notes_len, fmt, ap);
    va_end(ap);
    notes_len = strlen(notes);
    snprintf(notes + notes_len, sizeof notes - notes_len, "; ");
    notes_len = strlen(notes);
}

static void check_expectations(void)
{
    int bad = notes_len > 0;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char mine[sizeof notes];
    snprintf(mine, sizeof mine, "%s", notes_len ? notes : "(another rank failed)");
    notes_len = 0;
    notes[0] = '\0';
    ck_assert_msg(!bad, "rank %d of %d: %s", world_rank, world_size, mine);
}

static bool has(const char *message, const char *needle)
{
    return message && strstr(message, needle) != NULL;
}

/* ---- contexts and jobs ------------------------------------------------------------------ */
/* A CPU context with the seed and OpenMP threads (0: the default). */
static mf_ctx *cpu_ctx(uint64_t seed, int threads)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CPU;
    o.seed = seed;
    o.cpu_threads = threads;
    mf_ctx *ctx = NULL;
    ck_assert_msg(mf_ctx_create(&ctx, &o) == MF_OK, "%s", mf_ctx_last_error(NULL));
    return ctx;
}

/* A CPU context made a rank of comm (collective): the rank and size are comm's. A failed
 * join fails on every rank alike, so asserting here leaves no rank waiting. */
static mf_ctx *mpi_ctx(MPI_Comm comm, uint64_t seed, int threads)
{
    mf_ctx *ctx = cpu_ctx(seed, threads);
    ck_assert_msg(mf_ctx_set_mpi_comm(ctx, &comm) == MF_OK, "rank %d: %s", world_rank,
                  mf_ctx_last_error(ctx));
    int rank = -1, size = -1, want_rank, want_size;
    MPI_Comm_rank(comm, &want_rank);
    MPI_Comm_size(comm, &want_size);
    ck_assert_int_eq(mf_ctx_rank(ctx, &rank, &size), MF_OK);
    ck_assert_int_eq(rank, want_rank);
    ck_assert_int_eq(size, want_size);
    return ctx;
}

/* One rank's job on ctx: its own copy of the ratings (planted: the rank-4 planted matrix of
 * test_ranks's SGD case, else its ratings), factors of rank k filled with NaN, default ALS
 * options of rank k. */
static void job_init(rk_job *j, mf_ctx *ctx, int k, int planted)
{
    memset(j, 0, sizeof *j);
    j->ctx = ctx;
    j->R = planted ? ax_planted(ctx, USERS, ITEMS, 4, 0.15, 3)
                   : ax_ratings(ctx, USERS, ITEMS, 0.08, 5, NULL, NULL);
    ck_assert_ptr_nonnull(j->R);
    mf_als_opts_init(&j->o);
    j->o.rank = k;
    j->U = malloc((size_t)USERS * k * sizeof(float));
    j->V = malloc((size_t)ITEMS * k * sizeof(float));
    ck_assert(j->U && j->V);
    for (int64_t p = 0; p < (int64_t)USERS * k; p++)
        j->U[p] = NAN;
    for (int64_t p = 0; p < (int64_t)ITEMS * k; p++)
        j->V[p] = NAN;
}

static void job_free(rk_job *j)
{
    mf_sparse_destroy(j->R);
    free(j->U);
    free(j->V);
}

/* The fit of o on one ungrouped context (the baseline a group's fit is held to). */
static void als_one_context(rk_job *one, const mf_als_opts *o)
{
    job_init(one, cpu_ctx(42, 0), o->rank, 0);
    one->o = *o;
    rk_run_job(one);
    ck_assert_msg(one->st == MF_OK, "%s", one->error);
}

/* The same job over n contexts of this process (mf_ctx_join_local, `threads` OpenMP threads
 * each), one thread a rank: jobs[i] is like *like, on its own context. */
static void thread_group(rk_job *jobs, int n, const rk_job *like, int k, int planted, int threads)
{
    mf_ctx *ctxs[8];
    ck_assert_int_le(n, 8);
    for (int i = 0; i < n; i++) {
        job_init(&jobs[i], ctxs[i] = cpu_ctx(42, threads), k, planted);
        jobs[i].o = like->o;
        jobs[i].sgd = like->sgd, jobs[i].so = like->so;
        jobs[i].ials = like->ials, jobs[i].io = like->io;
        jobs[i].asd = like->asd, jobs[i].ao = like->ao;
    }
    ck_assert_int_eq(mf_ctx_join_local(ctxs, n), MF_OK);
    rk_run_als(jobs, n);
}

static void thread_group_free(rk_job *jobs, int n)
{
    for (int i = 0; i < n; i++)
        job_free(&jobs[i]);
    for (int i = 0; i < n; i++)
        mf_ctx_destroy(jobs[i].ctx);
}

/* Whether every rank of comm holds rank 0's bytes (collective; every rank gets the answer). */
static bool same_everywhere(MPI_Comm comm, const void *p, size_t bytes)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    char *first = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(first);
    if (rank == 0)
        memcpy(first, p, bytes);
    MPI_Bcast(first, (int)bytes, MPI_BYTE, 0, comm);
    int same = memcmp(first, p, bytes) == 0;
    free(first);
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, comm);
    return same;
}

/* ---- the exchange's ops ------------------------------------------------------------------ */
static unsigned char pattern(int64_t row, size_t byte)
{
    return (unsigned char)((row * 31 + (int64_t)byte * 7) % 200 + 1); /* never 0xEE */
}

/* A value of rank r at i for the sums: magnitudes 1 and 1e15 mixed, so that the rounding
 * of the sum depends on the order its terms are added in. */
static double term(int r, int64_t i)
{
    uint64_t s = (uint64_t)r * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    const uint64_t h = tu_splitmix64(&s);
    return (h & 1 ? 1e15 : 1.0) * ((double)(h >> 11) * 0x1.0p-53 - 0.5);
}

static int64_t max_value(int r, int n, int i)
{
    if (i % 3 == 0)
        return r == n - 1 - i % n ? INT64_MAX - i : INT64_MIN + r;
    return ((int64_t)r * 7919 + (int64_t)i * 104729) % 1001 - 500;
}

static void check_allgatherv(mf_ctx *ctx)
{
    mf_comm *c = ctx->comm;
    const int n = c->size, me = c->rank;
    enum { ROWS = 37 };
    int64_t *b = malloc(((size_t)n + 1) * sizeof *b);
    int *owner = malloc((size_t)n * sizeof *owner);
    ck_assert(b && owner);
    for (int layout = 0; layout < 5; layout++) {
        for (int p = 0; p <= n; p++) {
            switch (layout) {
            case 0: b[p] = (int64_t)ROWS * p / n; break;                    /* even */
            case 1: b[p] = (int64_t)ROWS * p * p / ((int64_t)n * n); break; /* growing */
            case 2: b[p] = p == n ? ROWS : 0; break; /* all in the last block */
            case 3: b[p] = p == 0 ? 0 : (int64_t)ROWS * (p - 1) / (n - 1); break; /* first empty */
            default: b[p] = 0; break;                                             /* no rows */
            }
        }
        for (int own = 0; own < 3; own++) {
            for (int k = 0; k < n; k++)
                owner[k] = own == 1 ? n - 1 - k : (k + 1) % n; /* reversed, rotated */
            for (size_t row_bytes = 3; row_bytes <= 12; row_bytes += 9) {
                unsigned char *buf = malloc(ROWS * row_bytes);
                ck_assert_ptr_nonnull(buf);
                for (int k = 0; k < n; k++) {
                    const int from = own ? owner[k] : k;
                    for (int64_t r = b[k]; r < b[k + 1]; r++)
                        for (size_t j = 0; j < row_bytes; j++)
                            buf[r * row_bytes + j] = from == me ? pattern(r, j) : 0xEE;
                }
                mf_status st = c->ops->allgatherv(c, ctx, buf, b, row_bytes, own ? owner : NULL);
                int wrong = 0;
                for (int64_t r = 0; r < b[n]; r++)
                    for (size_t j = 0; j < row_bytes; j++)
                        wrong += buf[r * row_bytes + j] != pattern(r, j);
                expect(st == MF_OK && wrong == 0,
                       "allgatherv layout %d owners %d rows of %zu: status %d, %d bytes wrong",
                       layout, own, row_bytes, (int)st, wrong);
                free(buf);
            }
        }
    }
    free(b);
    free(owner);
}

static void check_max(mf_ctx *ctx)
{
    mf_comm *c = ctx->comm;
    const int n = c->size, me = c->rank;
    static const int counts[] = {0, 1, 5, MF_COMM_MAX_VALUES};
    for (size_t t = 0; t < sizeof counts / sizeof *counts; t++) {
        int64_t v[MF_COMM_MAX_VALUES + 1], want[MF_COMM_MAX_VALUES];
        for (int i = 0; i < counts[t]; i++) {
            v[i] = max_value(me, n, i);
            want[i] = max_value(0, n, i);
            for (int r = 1; r < n; r++)
                if (max_value(r, n, i) > want[i])
                    want[i] = max_value(r, n, i);
        }
        v[counts[t]] = 12345; /* past the values: untouched */
        mf_status st = c->ops->max_i64(c, ctx, v, counts[t]);
        expect(st == MF_OK && !memcmp(v, want, (size_t)counts[t] * sizeof *v) &&
                   v[counts[t]] == 12345,
               "max_i64 of %d values: status %d or values wrong", counts[t], (int)st);
    }
    int64_t many[MF_COMM_MAX_VALUES + 1] = {0};
    expect(c->ops->max_i64(c, ctx, many, MF_COMM_MAX_VALUES + 1) == MF_ERR_INTERNAL,
           "max_i64 of too many values");
}

/* sum_buffer (and sum_f64 for the short ones) of `count` values: each rank's term(rank, i),
 * summed in rank order from zero, bit for bit. */
static void check_sum(mf_ctx *ctx, size_t count, int is_double)
{
    mf_comm *c = ctx->comm;
    const int n = c->size, me = c->rank;
    const size_t elem = is_double ? sizeof(double) : sizeof(float);
    void *buf = malloc(count * elem + 1), *want = malloc(count * elem + 1);
    ck_assert(buf && want);
    for (size_t i = 0; i < count; i++) {
        if (is_double) {
            double s = 0.0;
            for (int r = 0; r < n; r++)
                s += term(r, (int64_t)i);
            ((double *)want)[i] = s;
            ((double *)buf)[i] = term(me, (int64_t)i);
        } else {
            float s = 0.0f;
            for (int r = 0; r < n; r++)
                s += (float)term(r, (int64_t)i);
            ((float *)want)[i] = s;
            ((float *)buf)[i] = (float)term(me, (int64_t)i);
        }
    }
    mf_status st = c->ops->sum_buffer(c, ctx, buf, count, is_double);
    expect(st == MF_OK && !memcmp(buf, want, count * elem),
           "sum_buffer of %zu %s: status %d or sums not the rank-order ones", count,
           is_double ? "doubles" : "floats", (int)st);
    if (is_double && count <= MF_COMM_MAX_VALUES) {
        for (size_t i = 0; i < count; i++)
            ((double *)buf)[i] = term(me, (int64_t)i);
        st = c->ops->sum_f64(c, ctx, buf, (int)count);
        expect(st == MF_OK && !memcmp(buf, want, count * elem),
               "sum_f64 of %zu: status %d or sums not the rank-order ones", count, (int)st);
    }
    free(buf);
    free(want);
}

START_TEST(exchange_ops_exact)
{
    mf_ctx *ctx = mpi_ctx(MPI_COMM_WORLD, 1, 1);
    expect(ctx->comm->device_buffers == 0, "the MPI exchange takes host buffers");
    check_allgatherv(ctx);
    check_max(ctx);
    /* past one chunk of the sums (2^18 elements) too */
    static const size_t counts[] = {0, 1, 2, 7, MF_COMM_MAX_VALUES, 1000, 300001};
    for (size_t t = 0; t < sizeof counts / sizeof *counts; t++)
        for (int is_double = 0; is_double < 2; is_double++)
            check_sum(ctx, counts[t], is_double);
    double v[MF_COMM_MAX_VALUES + 1] = {0};
    expect(ctx->comm->ops->sum_f64(ctx->comm, ctx, v, MF_COMM_MAX_VALUES + 1) == MF_ERR_INTERNAL,
           "sum_f64 of too many values");
    mf_ctx_destroy(ctx);
    check_expectations();
}
END_TEST

/* ---- the join ------------------------------------------------------------------------------ */
START_TEST(join_checks_arguments)
{
    const int n = world_size, last = n - 1;
    MPI_Comm world = MPI_COMM_WORLD, none = MPI_COMM_NULL;
    int rank = -1, size = -1;
    mf_ctx *ctx = cpu_ctx(1, 1);
    /* checks of this rank alone: nothing collective is reached */
    expect(mf_ctx_set_mpi_comm(NULL, NULL) == MF_ERR_INVALID_ARGUMENT, "NULL, NULL");
    expect(mf_ctx_set_mpi_comm(ctx, &none) == MF_ERR_INVALID_ARGUMENT &&
               has(mf_ctx_last_error(ctx), "MPI_COMM_NULL"),
           "MPI_COMM_NULL: %s", mf_ctx_last_error(ctx));
    MPI_Comm half, inter;
    MPI_Comm_split(world, world_rank % 2, world_rank, &half);
    MPI_Intercomm_create(half, 0, world, world_rank % 2 ? 0 : 1, 99, &inter);
    expect(mf_ctx_set_mpi_comm(ctx, &inter) == MF_ERR_INVALID_ARGUMENT &&
               has(mf_ctx_last_error(ctx), "intercommunicator"),
           "an intercommunicator: %s", mf_ctx_last_error(ctx));
    MPI_Comm_free(&inter);

    /* rank 1 alone already in a group (of one, in process): every rank fails, none joins */
    if (world_rank == 1)
        ck_assert_int_eq(mf_ctx_join_local(&ctx, 1), MF_OK);
    mf_status st = mf_ctx_set_mpi_comm(ctx, &world);
    expect(st == MF_ERR_INVALID_ARGUMENT &&
               has(mf_ctx_last_error(ctx), world_rank == 1 ? "already in a group" : "rank 1 of ") &&
               (world_rank == 1 || has(mf_ctx_last_error(ctx), "failed")),
           "rank 1 in a group: status %d, %s", (int)st, mf_ctx_last_error(ctx));
    if (world_rank == 1)
        expect(mf_ctx_set_mpi_comm(ctx, NULL) == MF_OK, "leaving the local group");
    expect(mf_ctx_rank(ctx, &rank, &size) == MF_OK && rank == 0 && size == 1,
           "after a failed join: rank %d of %d", rank, size);

    /* a NULL context on the last rank: the message in the thread's slot there */
    st = mf_ctx_set_mpi_comm(world_rank == last ? NULL : ctx, &world);
    const char *why = world_rank == last ? mf_ctx_last_error(NULL) : mf_ctx_last_error(ctx);
    char said[64];
    snprintf(said, sizeof said, "rank %d of %d failed", last, n);
    expect(st == MF_ERR_INVALID_ARGUMENT && has(why, world_rank == last ? "ctx is NULL" : said),
           "NULL ctx on the last rank: status %d, %s", (int)st, why);

    /* a join; a second one fails on every rank with its own message; the group works */
    st = mf_ctx_set_mpi_comm(ctx, &world);
    expect(st == MF_OK, "join: %s", mf_ctx_last_error(ctx));
    expect(mf_ctx_rank(ctx, &rank, &size) == MF_OK && rank == world_rank && size == n,
           "joined: rank %d of %d", rank, size);
    st = mf_ctx_set_mpi_comm(ctx, &world);
    expect(st == MF_ERR_INVALID_ARGUMENT && has(mf_ctx_last_error(ctx), "already in a group"),
           "a second join: %s", mf_ctx_last_error(ctx));
    int64_t top = world_rank;
    expect(ctx->comm->ops->max_i64(ctx->comm, ctx, &top, 1) == MF_OK && top == last,
           "max over the group: %lld", (long long)top);

    /* NULL leaves; a sub-communicator that the caller frees at once: the library keeps its
     * duplicate */
    expect(mf_ctx_set_mpi_comm(ctx, NULL) == MF_OK, "leaving");
    expect(mf_ctx_rank(ctx, &rank, &size) == MF_OK && rank == 0 && size == 1, "left: rank %d",
           rank);
    expect(mf_ctx_set_mpi_comm(ctx, &half) == MF_OK, "join half: %s", mf_ctx_last_error(ctx));
    int half_rank, half_size;
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);
    MPI_Comm_free(&half);
    expect(mf_ctx_rank(ctx, &rank, &size) == MF_OK && rank == half_rank && size == half_size,
           "half: rank %d of %d", rank, size);
    top = world_rank;
    expect(ctx->comm->ops->max_i64(ctx->comm, ctx, &top, 1) == MF_OK &&
               top == world_rank + 2 * (half_size - 1 - half_rank),
           "max over the half: %lld", (long long)top);
    mf_ctx_destroy(ctx);
    check_expectations();
}
END_TEST

/* A receive of the caller's posted on the world communicator, matching anything, is still
 * open after collective fits over a group made from it: the library's messages travel on its
 * duplicate. */
START_TEST(library_messages_stay_apart)
{
    int got = -1, done = 1;
    MPI_Request request;
    MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &request);
    mf_ctx *ctx = mpi_ctx(MPI_COMM_WORLD, 42, 1);
    rk_job j;
    job_init(&j, ctx, 4, 0);
    j.o.iterations = 2;
    rk_run_job(&j);
    expect(j.st == MF_OK, "als: %s", j.error);
    j.asd = 1;
    mf_asd_opts_init(&j.ao);
    j.ao.rank = 4, j.ao.max_iterations = 3;
    rk_run_job(&j);
    expect(j.st == MF_OK, "asd: %s", j.error);
    job_free(&j);
    mf_ctx_destroy(ctx);
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    expect(!done, "the caller's receive matched a message of the library");
    MPI_Barrier(MPI_COMM_WORLD); /* every rank has looked before any sends its own */
    const int mine = 1000 + world_rank;
    MPI_Send(&mine, 1, MPI_INT, (world_rank + 1) % world_size, 7, MPI_COMM_WORLD);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    expect(got == 1000 + (world_rank + world_size - 1) % world_size, "received %d", got);
    check_expectations();
}
END_TEST

/* ---- the collective fits ------------------------------------------------------------------- */
/* ALS over the world and over halves of it (2 processes: two groups of one; 3: of two and
 * one): one context's factors and RMSE, bit for bit, as test_ranks asserts for threads. */
START_TEST(als_equals_one_context)
{
    static const struct {
        int biases, solver;
    } cases[] = {{1, MF_ALS_SOLVER_EXACT}, {0, MF_ALS_SOLVER_EXACT}, {1, MF_ALS_SOLVER_CG}};
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < (world_size + 1) / 2, world_rank, &half);
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = 8, o.iterations = 4, o.lambda = 0.5f;
        o.biases = cases[t].biases, o.solver = cases[t].solver;
        rk_job one;
        als_one_context(&one, &o);
        const MPI_Comm comms[2] = {MPI_COMM_WORLD, half};
        for (int w = 0; w < 2; w++) {
            rk_job j;
            job_init(&j, mpi_ctx(comms[w], 42, 0), o.rank, 0);
            j.o = o;
            rk_run_job(&j);
            expect(j.st == MF_OK, "case %zu comm %d: %s", t, w, j.error);
            expect(!memcmp(j.U, one.U, (size_t)USERS * o.rank * sizeof(float)) &&
                       !memcmp(j.V, one.V, (size_t)ITEMS * o.rank * sizeof(float)),
                   "case %zu comm %d: the factors differ from one context's", t, w);
            /* The train RMSE adds the ranks' shards: one context's to rounding. */
            expect(j.rep.iterations == o.iterations &&
                       fabs(j.rep.train_rmse - one.rep.train_rmse) <= 1e-12 * one.rep.train_rmse &&
                       j.rep.solver == one.rep.solver,
                   "case %zu comm %d: the report differs from one context's", t, w);
            job_free(&j);
            mf_ctx_destroy(j.ctx);
        }
        job_free(&one);
        mf_ctx_destroy(one.ctx);
    }
    MPI_Comm_free(&half);
    check_expectations();
}
END_TEST

/* Input split over the processes (mf_sparse_set_part): j's ratings become this process's
 * part, the entries whose scrambled position falls to it, never whole lines. */
static void keep_my_part(rk_job *j)
{
    rk_keep_part(j, world_rank, world_size, USERS, ITEMS);
}

/* The entries travel to their owners over MPI. Integral ratings: the sums over the ranks
 * are exact, the factors one context's bit for bit. */
START_TEST(als_split_input_equals_one_context)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.iterations = 4, o.lambda = 0.5f, o.init = MF_ALS_INIT_MEAN;
    rk_job one;
    als_one_context(&one, &o);
    rk_job j;
    job_init(&j, mpi_ctx(MPI_COMM_WORLD, 42, 0), o.rank, 0);
    j.o = o;
    keep_my_part(&j);
    rk_run_job(&j);
    expect(j.st == MF_OK, "split: %s", j.error);
    expect(!memcmp(j.U, one.U, (size_t)USERS * o.rank * sizeof(float)) &&
               !memcmp(j.V, one.V, (size_t)ITEMS * o.rank * sizeof(float)),
           "split: the factors differ from one context's");
    expect(fabs(j.rep.train_rmse - one.rep.train_rmse) <= 1e-12 * one.rep.train_rmse,
           "split: train RMSE %.17g, one context %.17g", j.rep.train_rmse, one.rep.train_rmse);
    job_free(&j);
    mf_ctx_destroy(j.ctx);
    job_free(&one);
    mf_ctx_destroy(one.ctx);
    check_expectations();
}
END_TEST

/* Sharded users over MPI (MF_ALS_LAYOUT_USERS_SHARDED): the item systems summed through
 * MPI, U gathered at the end. One context's factors to rounding, whole or split input; the
 * same bits on every process (checked through the factors' sums over the processes). */
START_TEST(als_sharded_users_match_one_context)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.iterations = 4, o.lambda = 0.5f;
    rk_job one;
    als_one_context(&one, &o);
    o.layout = MF_ALS_LAYOUT_USERS_SHARDED;
    for (int split = 0; split < 2; split++) {
        rk_job j;
        job_init(&j, mpi_ctx(MPI_COMM_WORLD, 42, 0), o.rank, 0);
        j.o = o;
        if (split)
            keep_my_part(&j);
        rk_run_job(&j);
        expect(j.st == MF_OK, "sharded (split %d): %s", split, j.error);
        const double du = rk_max_rel_diff(j.U, one.U, (int64_t)USERS * o.rank);
        const double dv = rk_max_rel_diff(j.V, one.V, (int64_t)ITEMS * o.rank);
        expect(du < 1e-3 && dv < 1e-3, "sharded (split %d): U off by %g, V by %g", split, du, dv);
        expect(fabs(j.rep.train_rmse - one.rep.train_rmse) <= 5e-5 * one.rep.train_rmse,
               "sharded (split %d): train RMSE %.9g, one context %.9g", split, j.rep.train_rmse,
               one.rep.train_rmse);
        double mine[2] = {0.0, 0.0}, most[2], least[2];
        for (int64_t p = 0; p < (int64_t)USERS * o.rank; p++)
            mine[0] += j.U[p] * (double)(p % 7 + 1);
        for (int64_t p = 0; p < (int64_t)ITEMS * o.rank; p++)
            mine[1] += j.V[p] * (double)(p % 5 + 1);
        MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(mine, least, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        expect(most[0] == least[0] && most[1] == least[1],
               "sharded (split %d): the processes' factors differ", split);
        job_free(&j);
        mf_ctx_destroy(j.ctx);
    }
    job_free(&one);
    mf_ctx_destroy(one.ctx);
    check_expectations();
}
END_TEST

/* SGD over the processes from their parts: each gathers its users' ratings over MPI, and
 * the fit is the same group's over the whole ratings bit for bit (one worker a rank). */
START_TEST(sgd_split_input_equals_whole_input)
{
    rk_job j[2];
    for (int split = 0; split < 2; split++) {
        job_init(&j[split], mpi_ctx(MPI_COMM_WORLD, 42, 0), 8, 0);
        j[split].sgd = 1;
        mf_sgd_opts_init(&j[split].so);
        j[split].so.rank = 8, j[split].so.epochs = 4, j[split].so.workers = 1;
        if (split)
            keep_my_part(&j[split]);
        rk_run_job(&j[split]);
        expect(j[split].st == MF_OK, "split %d: %s", split, j[split].error);
    }
    expect(!memcmp(j[0].U, j[1].U, (size_t)USERS * 8 * sizeof(float)) &&
               !memcmp(j[0].V, j[1].V, (size_t)ITEMS * 8 * sizeof(float)),
           "split: the factors differ from the whole input's");
    expect(fabs(j[1].srep.train_rmse - j[0].srep.train_rmse) <= 1e-12 * j[0].srep.train_rmse,
           "split: train RMSE %.17g, whole input %.17g", j[1].srep.train_rmse,
           j[0].srep.train_rmse);
    for (int split = 0; split < 2; split++) {
        job_free(&j[split]);
        mf_ctx_destroy(j[split].ctx);
    }
    check_expectations();
}
END_TEST

/* ASD over the processes from their parts: each gathers its rows and columns over MPI, and
 * the fit is the same group's over the whole matrix bit for bit. */
START_TEST(asd_split_input_equals_whole_input)
{
    rk_job j[2];
    for (int split = 0; split < 2; split++) {
        job_init(&j[split], mpi_ctx(MPI_COMM_WORLD, 42, 0), 3, 0);
        j[split].asd = 1;
        mf_asd_opts_init(&j[split].ao);
        j[split].ao.rank = 3, j[split].ao.max_iterations = 15, j[split].ao.tolerance = 1e-12;
        if (split)
            keep_my_part(&j[split]);
        rk_run_job(&j[split]);
        expect(j[split].st == MF_OK, "split %d: %s", split, j[split].error);
    }
    expect(!memcmp(j[0].U, j[1].U, (size_t)USERS * 3 * sizeof(float)) &&
               !memcmp(j[0].V, j[1].V, (size_t)ITEMS * 3 * sizeof(float)),
           "split: X and Y differ from the whole input's");
    for (int split = 0; split < 2; split++) {
        job_free(&j[split]);
        mf_ctx_destroy(j[split].ctx);
    }
    check_expectations();
}
END_TEST

static int ials_progress_ok(void *user, const mf_progress *p)
{
    (void)user, (void)p;
    return 0;
}

/* Implicit ALS over the processes from their parts: each gathers its users' rows and its
 * items' columns over MPI, and the fit is the whole input's, one context's, bit for bit.
 * Only rank 0 has a progress callback: the loss is collective (each rank its users' terms,
 * summed over the ranks) and every rank reports one context's. */
START_TEST(ials_split_input_equals_whole_input)
{
    static const int solvers[] = {MF_ALS_SOLVER_CG, MF_ALS_SOLVER_EXACT};
    for (int t = 0; t < 2; t++) {
        mf_ials_opts io;
        mf_ials_opts_init(&io);
        io.rank = 8, io.iterations = 3, io.solver = solvers[t];
        rk_job one, j[2];
        job_init(&one, cpu_ctx(42, 0), io.rank, 0);
        one.ials = 1, one.io = io;
        one.io.progress = ials_progress_ok;
        rk_run_job(&one);
        ck_assert_msg(one.st == MF_OK && isfinite(one.irep.loss), "%s", one.error);
        for (int split = 0; split < 2; split++) {
            job_init(&j[split], mpi_ctx(MPI_COMM_WORLD, 42, 0), io.rank, 0);
            j[split].ials = 1, j[split].io = io;
            if (world_rank == 0)
                j[split].io.progress = ials_progress_ok;
            if (split)
                keep_my_part(&j[split]);
            rk_run_job(&j[split]);
            expect(j[split].st == MF_OK, "solver %d, split %d: %s", t, split, j[split].error);
            expect(!memcmp(j[split].U, one.U, (size_t)USERS * io.rank * sizeof(float)) &&
                       !memcmp(j[split].V, one.V, (size_t)ITEMS * io.rank * sizeof(float)),
                   "solver %d, split %d: the factors differ from one context's", t, split);
            expect(j[split].irep.loss == one.irep.loss,
                   "solver %d, split %d: loss %.17g, one context's %.17g", t, split,
                   j[split].irep.loss, one.irep.loss);
        }
        for (int split = 0; split < 2; split++) {
            job_free(&j[split]);
            mf_ctx_destroy(j[split].ctx);
        }
        job_free(&one);
        mf_ctx_destroy(one.ctx);
    }
    check_expectations();
}
END_TEST

START_TEST(ials_equals_one_context)
{
    static const int solvers[] = {MF_ALS_SOLVER_CG, MF_ALS_SOLVER_EXACT};
    for (int t = 0; t < 2; t++) {
        mf_ials_opts io;
        mf_ials_opts_init(&io);
        io.rank = 8, io.iterations = 3, io.solver = solvers[t];
        rk_job one, j;
        job_init(&one, cpu_ctx(42, 0), io.rank, 0);
        one.ials = 1, one.io = io;
        rk_run_job(&one);
        ck_assert_msg(one.st == MF_OK, "%s", one.error);
        job_init(&j, mpi_ctx(MPI_COMM_WORLD, 42, 0), io.rank, 0);
        j.ials = 1, j.io = io;
        rk_run_job(&j);
        expect(j.st == MF_OK && j.irep.iterations == io.iterations, "solver %d: %s", t, j.error);
        expect(!memcmp(j.U, one.U, (size_t)USERS * io.rank * sizeof(float)) &&
                   !memcmp(j.V, one.V, (size_t)ITEMS * io.rank * sizeof(float)),
               "solver %d: the factors differ from one context's", t);
        job_free(&j);
        mf_ctx_destroy(j.ctx);
        job_free(&one);
        mf_ctx_destroy(one.ctx);
    }
    check_expectations();
}
END_TEST

/* ASD over the world: every rank the same X, Y and report; one context's result within
 * test_ranks's bounds (the order of the sums differs); and a group of as many threads in
 * this process, bit for bit (the MPI sums are the stand-in's). One OpenMP thread a context,
 * so that each rank's partial sums are the same in both groups. */
START_TEST(asd_matches_one_context_and_threads)
{
    static const struct {
        int variant, init, continuation;
    } cases[] = {{MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 0},
                 {MF_ASD_PLAIN, MF_ASD_INIT_RANDOM, 0},
                 {MF_ASD_SCALED, MF_ASD_INIT_GIVEN, 0},
                 {MF_ASD_SCALED, MF_ASD_INIT_SPECTRAL, 0},
                 {MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 1}};
    const int r = 3, n = world_size;
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        rk_job like;
        memset(&like, 0, sizeof like);
        like.asd = 1;
        mf_asd_opts_init(&like.ao);
        like.ao.rank = r, like.ao.variant = cases[t].variant, like.ao.init = cases[t].init;
        like.ao.max_iterations = 25, like.ao.tolerance = 1e-12, like.ao.stagnation_window = 0;
        like.ao.rank_continuation = cases[t].continuation;
        /* jobs[0..n): the threads; jobs[n]: one context; jobs[n + 1]: this process's rank */
        rk_job jobs[10];
        mf_sparse *T[10];
        ck_assert_int_le(n, 8);
        job_init(&jobs[n], cpu_ctx(42, 1), r, 0);
        job_init(&jobs[n + 1], mpi_ctx(MPI_COMM_WORLD, 42, 1), r, 0);
        mf_ctx *ctxs[8];
        for (int i = 0; i < n; i++)
            job_init(&jobs[i], ctxs[i] = cpu_ctx(42, 1), r, 0);
        for (int i = 0; i < n + 2; i++) {
            jobs[i].asd = 1, jobs[i].ao = like.ao;
            T[i] = ax_ratings(jobs[i].ctx, USERS, ITEMS, 0.03, 9, NULL, NULL);
            jobs[i].ao.test = T[i];
            for (int64_t p = 0; p < (int64_t)USERS * r; p++)
                jobs[i].U[p] = 0.01f * (float)((p * 7) % 11) - 0.05f;
            for (int64_t p = 0; p < (int64_t)ITEMS * r; p++)
                jobs[i].V[p] = 0.02f * (float)((p * 5) % 13) - 0.1f;
        }
        ck_assert_int_eq(mf_ctx_join_local(ctxs, n), MF_OK);
        rk_run_als(jobs, n);
        rk_run_job(&jobs[n]);
        rk_run_job(&jobs[n + 1]);
        const rk_job *one = &jobs[n], *me = &jobs[n + 1];
        ck_assert_msg(one->st == MF_OK && jobs[0].st == MF_OK, "%s / %s", one->error,
                      jobs[0].error);
        expect(me->st == MF_OK, "case %zu: %s", t, me->error);
        const size_t xb = (size_t)USERS * r * sizeof(float), yb = (size_t)ITEMS * r * sizeof(float);
        const double ends[3] = {me->arep.relative_residual, me->arep.test_rmse,
                                me->arep.iterations + 100.0 * me->arep.stopped};
        const bool same = same_everywhere(MPI_COMM_WORLD, me->U, xb) &
                          same_everywhere(MPI_COMM_WORLD, me->V, yb) &
                          same_everywhere(MPI_COMM_WORLD, ends, sizeof ends);
        expect(same, "case %zu: the ranks returned different results", t);
        expect(!memcmp(me->U, jobs[0].U, xb) && !memcmp(me->V, jobs[0].V, yb) &&
                   me->arep.relative_residual == jobs[0].arep.relative_residual &&
                   me->arep.test_rmse == jobs[0].arep.test_rmse &&
                   me->arep.iterations == jobs[0].arep.iterations,
               "case %zu: not the bits of a group of %d threads", t, n);
        if (!cases[t].continuation)
            expect(me->arep.iterations == one->arep.iterations &&
                       me->arep.stopped == one->arep.stopped,
                   "case %zu: %d iterations, one context %d", t, me->arep.iterations,
                   one->arep.iterations);
        const double dx = rk_max_rel_diff(me->U, one->U, (int64_t)USERS * r),
                     dy = rk_max_rel_diff(me->V, one->V, (int64_t)ITEMS * r);
        const double dres = fabs(me->arep.relative_residual - one->arep.relative_residual) /
                            one->arep.relative_residual,
                     dtest = fabs(me->arep.test_rmse - one->arep.test_rmse) / one->arep.test_rmse;
        if (world_rank == 0)
            printf("asd over %d processes, variant %d, init %d, continuation %d: residual %.6g "
                   "(one context %.6g), factors differ by %.2e, %.2e\n",
                   n, cases[t].variant, cases[t].init, cases[t].continuation,
                   me->arep.relative_residual, one->arep.relative_residual, dx, dy);
        expect(dres < 1e-3 && dtest < 1e-3 && dx < 1e-2 && dy < 1e-2,
               "case %zu: residual %g, test %g, X %g, Y %g off one context's", t, dres, dtest, dx,
               dy);
        for (int i = 0; i < n + 2; i++)
            mf_sparse_destroy(T[i]);
        mf_ctx *mine = me->ctx;
        job_free(&jobs[n + 1]);
        mf_ctx_destroy(mine);
        job_free(&jobs[n]);
        mf_ctx_destroy(jobs[n].ctx);
        thread_group_free(jobs, n);
    }
    check_expectations();
}
END_TEST

/* Hogwild SGD over the world, one worker a rank: every rank the same factors and RMSEs, as
 * good a fit as one context's (test_ranks's bar), and a group of as many threads' bits. */
START_TEST(sgd_ranks_agree)
{
    const int n = world_size;
    rk_job like;
    memset(&like, 0, sizeof like);
    like.sgd = 1;
    mf_sgd_opts_init(&like.so);
    like.so.rank = 8, like.so.epochs = 30, like.so.workers = 1, like.so.biases = 0;
    rk_job one, me, threads[8];
    ck_assert_int_le(n, 8);
    job_init(&one, cpu_ctx(42, 0), 8, 1);
    one.sgd = 1, one.so = like.so;
    rk_run_job(&one);
    ck_assert_msg(one.st == MF_OK, "%s", one.error);
    thread_group(threads, n, &like, 8, 1, 0);
    ck_assert_msg(threads[0].st == MF_OK, "%s", threads[0].error);
    job_init(&me, mpi_ctx(MPI_COMM_WORLD, 42, 0), 8, 1);
    me.sgd = 1, me.so = like.so;
    mf_sparse *T = ax_planted(me.ctx, USERS, ITEMS, 4, 0.15, 3);
    me.so.test = T;
    rk_run_job(&me);
    expect(me.st == MF_OK && me.srep.epochs == like.so.epochs, "sgd: %s", me.error);
    const size_t ub = (size_t)USERS * 8 * sizeof(float), vb = (size_t)ITEMS * 8 * sizeof(float);
    const bool same = same_everywhere(MPI_COMM_WORLD, me.U, ub) &
                      same_everywhere(MPI_COMM_WORLD, me.V, vb) &
                      same_everywhere(MPI_COMM_WORLD, &me.srep.train_rmse, sizeof(double)) &
                      same_everywhere(MPI_COMM_WORLD, &me.srep.test_rmse, sizeof(double));
    expect(same, "the ranks returned different factors or RMSEs");
    expect(!memcmp(me.U, threads[0].U, ub) && !memcmp(me.V, threads[0].V, vb),
           "not the bits of a group of %d threads", n);
    expect(isfinite(me.srep.test_rmse), "test RMSE %g", me.srep.test_rmse);
    if (world_rank == 0)
        printf("sgd over %d processes: train RMSE %.5f (test %.5f), one context %.5f\n", n,
               me.srep.train_rmse, me.srep.test_rmse, one.srep.train_rmse);
    expect(me.srep.train_rmse <= one.srep.train_rmse * 1.10 + 1e-3, "train RMSE %g, one %g",
           me.srep.train_rmse, one.srep.train_rmse);
    mf_sparse_destroy(T);
    job_free(&me);
    mf_ctx_destroy(me.ctx);
    thread_group_free(threads, n);
    job_free(&one);
    mf_ctx_destroy(one.ctx);
    check_expectations();
}
END_TEST

static int cancel_on_second(void *user, const mf_progress *p)
{
    (void)user;
    return p->iteration >= 2;
}

/* A bad option on one rank, a disagreement, a cancel on one rank: every rank fails alike,
 * the failed rank with its own message, the others naming it; the outputs untouched. */
START_TEST(one_failure_fails_all)
{
    const int n = world_size;
    mf_ctx *ctx = mpi_ctx(MPI_COMM_WORLD, 42, 1);
    rk_job j;
    char said[64];

    job_init(&j, ctx, 4, 0);
    j.o.iterations = 2;
    if (world_rank == 1)
        j.o.rank = 0;
    rk_run_job(&j);
    snprintf(said, sizeof said, "rank 1 of %d failed", n);
    expect(j.st == MF_ERR_INVALID_ARGUMENT &&
               has(j.error, world_rank == 1 ? "rank = 0 is outside" : said),
           "als, a bad rank on rank 1: status %d, %s", (int)j.st, j.error);
    expect(isnan(j.U[0]) && isnan(j.V[0]), "als: the factors were written");
    job_free(&j);

    job_init(&j, ctx, 3, 0);
    j.asd = 1;
    mf_asd_opts_init(&j.ao);
    j.ao.rank = 3, j.ao.max_iterations = 10;
    if (world_rank == 0)
        j.ao.stagnation_rate = 2.0;
    rk_run_job(&j);
    snprintf(said, sizeof said, "rank 0 of %d failed", n);
    expect(j.st == MF_ERR_INVALID_ARGUMENT &&
               has(j.error, world_rank == 0 ? "stagnation_rate" : said),
           "asd, a bad option on rank 0: status %d, %s", (int)j.st, j.error);
    expect(isnan(j.U[0]) && isnan(j.V[0]), "asd: the factors were written");
    j.ao.stagnation_rate = 1e-4;
    if (world_rank == n - 1)
        j.ao.tolerance = 1e-3;
    rk_run_job(&j);
    expect(j.st == MF_ERR_INVALID_ARGUMENT && has(j.error, "disagree on tolerance"),
           "asd, another tolerance on the last rank: status %d, %s", (int)j.st, j.error);
    job_free(&j);

    job_init(&j, ctx, 4, 0);
    j.o.iterations = 6;
    if (world_rank == 0)
        j.o.progress = cancel_on_second;
    rk_run_job(&j);
    expect(j.st == MF_ERR_CANCELLED && j.rep.iterations == 2,
           "als, a cancel on rank 0: status %d after %d iterations", (int)j.st, j.rep.iterations);
    expect(same_everywhere(MPI_COMM_WORLD, j.U, (size_t)USERS * 4 * sizeof(float)),
           "als, a cancel: the ranks kept different factors");
    job_free(&j);
    mf_ctx_destroy(ctx);
    check_expectations();
}
END_TEST

int main(int argc, char **argv)
{
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size < 2 || world_size > 8) {
        if (world_rank == 0)
            printf("run it under mpiexec with 2 to 8 processes (ctest does): skipped\n");
        MPI_Finalize();
        return 77;
    }
    Suite *s = suite_create("mpi_ranks");
    TCase *tc = tu_tcase("mpi_ranks");
    tcase_add_test(tc, exchange_ops_exact);
    tcase_add_test(tc, join_checks_arguments);
    tcase_add_test(tc, library_messages_stay_apart);
    tcase_add_test(tc, als_equals_one_context);
    tcase_add_test(tc, als_split_input_equals_one_context);
    tcase_add_test(tc, als_sharded_users_match_one_context);
    tcase_add_test(tc, sgd_split_input_equals_whole_input);
    tcase_add_test(tc, asd_split_input_equals_whole_input);
    tcase_add_test(tc, ials_equals_one_context);
    tcase_add_test(tc, ials_split_input_equals_whole_input);
    tcase_add_test(tc, asd_matches_one_context_and_threads);
    tcase_add_test(tc, sgd_ranks_agree);
    tcase_add_test(tc, one_failure_fails_all);
    suite_add_tcase(s, tc);
    SRunner *runner = srunner_create(s);
    srunner_set_fork_status(runner, CK_NOFORK); /* MPI does not survive fork() */
    /* each test's outcome as it ends, each rank's: a rank that stops in a collective still
     * shows what the others found */
    srunner_run_all(runner, CK_VERBOSE);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    tu_cleanup();
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
