/* Groups of contexts on the CPU (mf_ctx_join_local with the in-process exchange): the row
 * shares, a collective mf_als_run over 1 to 4 ranks against one context (the same bits:
 * each row's solve is the same arithmetic wherever it runs), SGD's block rotation, implicit
 * ALS, ASD with Ω by rows (every rank the same bits; one context's result up to the order
 * of the sums), the ranks' agreement on the problem, one rank's failure or cancel failing
 * them all, the runs that are not collective yet, and every bad argument of the group
 * calls. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "als_fixtures.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/ranks.h"
#include "ranks_fixtures.h"
#include "testutil.h"

#define USERS 300
#define ITEMS 120

/* The shares cover [0, rows) in order, and none holds more than its fair part of the work
 * plus one row's. */
static void check_shares(const int64_t *ptr, int32_t rows, int parts, int64_t cost)
{
    int64_t b[17];
    mf_partition_rows(ptr, rows, parts, cost, b);
    ck_assert_int_eq(b[0], 0);
    ck_assert_int_eq(b[parts], rows);
    int64_t total = ptr[rows] - ptr[0] + (int64_t)rows * cost, biggest = 0;
    for (int32_t r = 0; r < rows; r++)
        if (ptr[r + 1] - ptr[r] + cost > biggest)
            biggest = ptr[r + 1] - ptr[r] + cost;
    for (int p = 0; p < parts; p++) {
        ck_assert_int_le(b[p], b[p + 1]);
        int64_t work = ptr[b[p + 1]] - ptr[b[p]] + (b[p + 1] - b[p]) * cost;
        ck_assert_msg(work <= total / parts + biggest + 1,
                      "share %d of %d holds %lld of %lld (row at most %lld)", p, parts,
                      (long long)work, (long long)total, (long long)biggest);
    }
}

START_TEST(shares_balance_work)
{
    /* Power-law rows: a few long ones, many short, some empty. */
    enum { rows = 5000 };
    static int64_t ptr[rows + 1];
    uint64_t rng = 7;
    ptr[0] = 0;
    for (int32_t r = 0; r < rows; r++) {
        double u = tu_unit(&rng);
        int64_t n = u < 0.1 ? 0 : (int64_t)(2.0 / pow(1.0 - u + 1e-4, 1.2));
        ptr[r + 1] = ptr[r] + n;
    }
    for (int parts = 1; parts <= 16; parts++)
        for (int64_t cost = 0; cost <= 66; cost += 33)
            check_shares(ptr, rows, parts, cost);
    /* One row holding nearly everything: the shares around it are small. */
    int64_t giant[5] = {0, 1, 1001, 1002, 1003};
    int64_t b[5];
    mf_partition_rows(giant, 4, 4, 0, b);
    ck_assert_int_eq(b[4], 4);
    for (int p = 0; p < 4; p++)
        ck_assert_int_le(b[p], b[p + 1]);
    /* More ranks than rows, and no rows: empty shares, never out of range. */
    int64_t two[3] = {0, 5, 9};
    int64_t many[9];
    mf_partition_rows(two, 2, 8, 1, many);
    for (int p = 0; p < 8; p++)
        ck_assert(many[p] <= many[p + 1] && many[p + 1] <= 2);
    int64_t none[1] = {0}, nb[4];
    mf_partition_rows(none, 0, 3, 5, nb);
    ck_assert(nb[0] == 0 && nb[1] == 0 && nb[2] == 0 && nb[3] == 0);
}
END_TEST

/* n CPU contexts with the same seed, grouped; each with its own copy of the ratings. */
static void make_group(rk_job *jobs, int n, const mf_als_opts *o, uint64_t data_seed)
{
    mf_ctx *ctxs[8] = {NULL};
    for (int i = 0; i < n; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].ctx = ctxs[i] = tu_cpu_ctx_seeded(42);
        jobs[i].R = ax_ratings(jobs[i].ctx, USERS, ITEMS, 0.08, data_seed, NULL, NULL);
        jobs[i].o = *o;
        jobs[i].U = malloc((size_t)USERS * o->rank * sizeof(float));
        jobs[i].V = malloc((size_t)ITEMS * o->rank * sizeof(float));
        for (int64_t p = 0; p < (int64_t)USERS * o->rank; p++)
            jobs[i].U[p] = NAN;
        for (int64_t p = 0; p < (int64_t)ITEMS * o->rank; p++)
            jobs[i].V[p] = NAN;
    }
    ck_assert_int_eq(mf_ctx_join_local(ctxs, n), MF_OK);
    for (int i = 0; i < n; i++) {
        int rank = -1, size = -1;
        ck_assert_int_eq(mf_ctx_rank(jobs[i].ctx, &rank, &size), MF_OK);
        ck_assert_int_eq(rank, i);
        ck_assert_int_eq(size, n);
    }
}

/* The same fit on one ungrouped context. */
static void single_fit(const mf_als_opts *o, float *U, float *V, mf_als_report *rep)
{
    mf_ctx *ctx = tu_cpu_ctx_seeded(42);
    mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.08, 5, NULL, NULL);
    *rep = (mf_als_report){.struct_size = sizeof *rep};
    ck_assert_int_eq(mf_als_run(ctx, R, o, U, V, MF_MEMORY_HOST, rep), MF_OK);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}

START_TEST(group_fit_equals_one_context)
{
    static const struct {
        int biases, solver;
    } cases[] = {{1, MF_ALS_SOLVER_EXACT}, {0, MF_ALS_SOLVER_EXACT}, {1, MF_ALS_SOLVER_CG}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = 8, o.iterations = 4, o.lambda = 0.5f;
        o.biases = cases[c].biases, o.solver = cases[c].solver;
        float *U1 = malloc((size_t)USERS * o.rank * sizeof *U1);
        float *V1 = malloc((size_t)ITEMS * o.rank * sizeof *V1);
        mf_als_report r1;
        single_fit(&o, U1, V1, &r1);
        ck_assert(r1.group_wait_seconds == 0.0 && r1.group_exchange_seconds == 0.0);
        for (int n = 1; n <= 4; n++) {
            rk_job jobs[4];
            make_group(jobs, n, &o, 5);
            rk_run_als(jobs, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                ck_assert_msg(!memcmp(jobs[i].U, U1, (size_t)USERS * o.rank * sizeof *U1),
                              "case %zu: rank %d of %d: U differs from one context's", c, i, n);
                ck_assert_msg(!memcmp(jobs[i].V, V1, (size_t)ITEMS * o.rank * sizeof *V1),
                              "case %zu: rank %d of %d: V differs from one context's", c, i, n);
                ck_assert_int_eq(jobs[i].rep.iterations, o.iterations);
                /* The ranks' shards add up to it: one context's to rounding, the same bits
                 * on every rank. */
                ck_assert_double_eq_tol(jobs[i].rep.train_rmse, r1.train_rmse,
                                        1e-12 * r1.train_rmse);
                ck_assert(jobs[i].rep.train_rmse == jobs[0].rep.train_rmse);
                ck_assert_int_eq(jobs[i].rep.solver, r1.solver);
                ck_assert_int_eq(jobs[i].rep.layout, MF_ALS_LAYOUT_REPLICATED); /* AUTO's */
            }
            rk_close_group(jobs, n);
        }
        free(U1);
        free(V1);
    }
}
END_TEST

/* Sharded users (MF_ALS_LAYOUT_USERS_SHARDED): each rank holds its users' rows alone and
 * the item systems are summed over the ranks. The factors are one context's to rounding
 * (the sums' order differs), the same bits on every rank; the train and test RMSEs too. */
static void make_split_group(rk_job *jobs, int n, const mf_als_opts *o, int overlap);

/* M's entries p with p % n == i, as rank i's part (mf_sparse_set_part). */
static mf_sparse *part_of(mf_ctx *ctx, const mf_sparse *M, int i, int n)
{
    int64_t nnz = 0;
    ck_assert_int_eq(mf_sparse_shape(M, NULL, NULL, &nnz), MF_OK);
    int32_t *row = malloc((size_t)nnz * sizeof *row), *col = malloc((size_t)nnz * sizeof *col);
    float *val = malloc((size_t)nnz * sizeof *val);
    ck_assert(row && col && val);
    ck_assert_int_eq(mf_sparse_get_coo(M, row, col, val, MF_MEMORY_HOST), MF_OK);
    int64_t kept = 0;
    for (int64_t p = 0; p < nnz; p++)
        if (p % n == i)
            row[kept] = row[p], col[kept] = col[p], val[kept] = val[p], kept++;
    mf_sparse *out = NULL;
    ck_assert_int_eq(
        mf_sparse_from_coo(ctx, &out, USERS, ITEMS, kept, row, col, val, MF_MEMORY_HOST, 0), MF_OK);
    ck_assert_int_eq(mf_sparse_set_part(out, 1), MF_OK);
    free(row), free(col), free(val);
    return out;
}

/* The knobs of one sharded case: the input split over the ranks, a test set (whole on
 * every rank, or split like the input), the biases handed out, the items summed in chunks
 * of chunk_bytes (NULL: the default). */
typedef struct sharded_case {
    int split, test, test_split, bias_out;
    const char *chunk_bytes;
} sharded_case;

static void check_sharded(const mf_als_opts *o, const sharded_case *c)
{
    mf_als_opts one = *o;
    one.layout = MF_ALS_LAYOUT_REPLICATED;
    mf_ctx *ctx = tu_cpu_ctx_seeded(42);
    mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.08, 5, NULL, NULL);
    mf_sparse *T = c->test ? ax_ratings(ctx, USERS, ITEMS, 0.02, 77, NULL, NULL) : NULL;
    one.test = T;
    float *U1 = malloc((size_t)USERS * o->rank * sizeof *U1);
    float *V1 = malloc((size_t)ITEMS * o->rank * sizeof *V1);
    float bu1[USERS], bi1[ITEMS];
    mf_biases b1 = {0.0f, bu1, bi1};
    one.bias_out = c->bias_out ? &b1 : NULL;
    mf_als_report r1 = {.struct_size = sizeof r1};
    ck_assert_int_eq(mf_als_run(ctx, R, &one, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    if (c->chunk_bytes)
        setenv("MFACT_ALS_SUM_BYTES", c->chunk_bytes, 1);
    for (int n = 2; n <= 4; n++) {
        rk_job jobs[4];
        mf_sparse *tests[4] = {NULL};
        static float bu[4][USERS], bi[4][ITEMS];
        mf_biases b[4];
        if (c->split)
            make_split_group(jobs, n, o, 0);
        else
            make_group(jobs, n, o, 5);
        for (int i = 0; i < n; i++) {
            if (c->test) {
                mf_sparse *whole = ax_ratings(jobs[i].ctx, USERS, ITEMS, 0.02, 77, NULL, NULL);
                tests[i] = c->test_split ? part_of(jobs[i].ctx, whole, i, n) : whole;
                if (c->test_split)
                    mf_sparse_destroy(whole);
                jobs[i].o.test = tests[i];
            }
            b[i] = (mf_biases){0.0f, bu[i], bi[i]};
            jobs[i].o.bias_out = c->bias_out ? &b[i] : NULL;
        }
        rk_run_als(jobs, n);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
            ck_assert_int_eq(jobs[i].rep.layout, MF_ALS_LAYOUT_USERS_SHARDED);
            const double du = rk_max_rel_diff(jobs[i].U, U1, (int64_t)USERS * o->rank);
            const double dv = rk_max_rel_diff(jobs[i].V, V1, (int64_t)ITEMS * o->rank);
            ck_assert_msg(du < 1e-3 && dv < 1e-3, "%d ranks (split %d): U off by %g, V by %g", n,
                          c->split, du, dv);
            ck_assert(!memcmp(jobs[i].U, jobs[0].U, (size_t)USERS * o->rank * sizeof *U1));
            ck_assert(!memcmp(jobs[i].V, jobs[0].V, (size_t)ITEMS * o->rank * sizeof *V1));
            ck_assert_double_eq_tol(jobs[i].rep.train_rmse, r1.train_rmse, 5e-5 * r1.train_rmse);
            ck_assert(jobs[i].rep.train_rmse == jobs[0].rep.train_rmse);
            if (c->test) {
                ck_assert_double_eq_tol(jobs[i].rep.test_rmse, r1.test_rmse, 5e-5 * r1.test_rmse);
                ck_assert(jobs[i].rep.test_rmse == jobs[0].rep.test_rmse);
            }
            if (c->bias_out) { /* the user biases gathered like U, the item ones like V */
                ck_assert(rk_max_rel_diff(bu[i], bu1, USERS) < 1e-3);
                ck_assert(rk_max_rel_diff(bi[i], bi1, ITEMS) < 1e-3);
                ck_assert(!memcmp(bu[i], bu[0], sizeof bu[0]) && b[i].mean == b1.mean);
            }
            ck_assert_int_eq(jobs[i].rep.iterations, o->iterations);
        }
        /* the fit differs from the replicated one's bits: it did run sharded */
        ck_assert(memcmp(jobs[0].V, V1, (size_t)ITEMS * o->rank * sizeof *V1) != 0);
        rk_close_group(jobs, n);
        for (int i = 0; i < n; i++)
            mf_sparse_destroy(tests[i]);
    }
    if (c->chunk_bytes)
        unsetenv("MFACT_ALS_SUM_BYTES");
    free(U1), free(V1);
    mf_sparse_destroy(T);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}

START_TEST(sharded_users_fit_one_contexts_problem)
{
    static const struct {
        int biases, solver, weighted;
        sharded_case c;
    } cases[] = {
        {1, MF_ALS_SOLVER_EXACT, 0, {0, 1, 0, 1, NULL}},
        {0, MF_ALS_SOLVER_EXACT, 1, {0, 0, 0, 0, "4000"}}, /* 11 items a chunk */
        {1, MF_ALS_SOLVER_CG, 0, {0, 0, 0, 0, NULL}},
        {1, MF_ALS_SOLVER_EXACT, 1, {1, 1, 1, 1, "4000"}},
        {0, MF_ALS_SOLVER_CG, 0, {1, 0, 0, 0, NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        mf_als_opts o;
        mf_als_opts_init(&o);
        o.rank = 8, o.iterations = 4, o.lambda = cases[c].weighted ? 0.05f : 0.5f;
        o.biases = cases[c].biases, o.solver = cases[c].solver;
        o.weighting = cases[c].weighted ? MF_ALS_WEIGHT_COUNT : MF_ALS_WEIGHT_NONE;
        o.layout = MF_ALS_LAYOUT_USERS_SHARDED;
        check_sharded(&o, &cases[c].c);
    }
}
END_TEST

/* A breakdown on one rank with sharded users: the items' half step (its sums) still runs on
 * every rank, and every rank fails, the first failure's message winning. */
/* A rank that fails before the local problems are cut (a given V that is not finite) must
 * not leave the others in make_local's gather of a split test set: every rank fails. */
START_TEST(sharded_users_early_failure_fails_all)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.iterations = 2, o.lambda = 0.5f, o.init = MF_ALS_INIT_GIVEN;
    o.layout = MF_ALS_LAYOUT_USERS_SHARDED;
    rk_job jobs[2];
    mf_sparse *tests[2];
    make_group(jobs, 2, &o, 5);
    for (int i = 0; i < 2; i++) {
        for (int64_t p = 0; p < (int64_t)ITEMS * o.rank; p++)
            jobs[i].V[p] = i == 1 && p == 5 ? NAN : 0.01f * (float)(p % 7);
        mf_sparse *whole = ax_ratings(jobs[i].ctx, USERS, ITEMS, 0.02, 77, NULL, NULL);
        tests[i] = part_of(jobs[i].ctx, whole, i, 2);
        mf_sparse_destroy(whole);
        jobs[i].o.test = tests[i];
    }
    rk_run_als(jobs, 2);
    ck_assert_int_eq(jobs[1].st, MF_ERR_INVALID_DATA);
    ck_assert_msg(strstr(jobs[1].error, "not finite"), "%s", jobs[1].error);
    ck_assert_int_eq(jobs[0].st, MF_ERR_INVALID_DATA);
    ck_assert_msg(strstr(jobs[0].error, "rank 1 of 2 failed"), "%s", jobs[0].error);
    rk_close_group(jobs, 2);
    mf_sparse_destroy(tests[0]);
    mf_sparse_destroy(tests[1]);
}
END_TEST

START_TEST(sharded_users_first_failure_wins)
{
    mf_ctx *ctxs[2] = {tu_cpu_ctx(), tu_cpu_ctx()};
    rk_job j[2];
    rk_als_breakdown_jobs(j, ctxs);
    for (int i = 0; i < 2; i++)
        j[i].o.layout = MF_ALS_LAYOUT_USERS_SHARDED;
    ck_assert_int_eq(mf_ctx_join_local(ctxs, 2), MF_OK);
    rk_run_als(j, 2);
    rk_als_breakdown_check(j);
    rk_close_group(j, 2);
}
END_TEST

/* Hogwild SGD over a group (block rotation): every rank returns the same factors, the fit
 * is as good as one context's on planted data, and with one worker per rank it repeats
 * itself bit for bit. */
static void sgd_group(int n, const mf_sgd_opts *so, rk_job *jobs)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = so->rank;
    make_group(jobs, n, &o, 11);
    for (int i = 0; i < n; i++) {
        mf_sparse_destroy(jobs[i].R);
        jobs[i].R = ax_planted(jobs[i].ctx, USERS, ITEMS, 4, 0.15, 3);
        jobs[i].sgd = 1, jobs[i].so = *so;
    }
    rk_run_als(jobs, n);
}

/* Input split over the ranks (mf_sparse_set_part): rank i holds the entries whose scrambled
 * position falls to it, not whole rows or columns; `overlap` > 0 also gives rank 1 that many
 * of rank 0's entries. */
static void make_split_group(rk_job *jobs, int n, const mf_als_opts *o, int overlap)
{
    make_group(jobs, n, o, 5);
    for (int i = 0; i < n; i++) {
        int64_t nnz = 0;
        ck_assert_int_eq(mf_sparse_shape(jobs[i].R, NULL, NULL, &nnz), MF_OK);
        int32_t *row = malloc((size_t)nnz * sizeof *row), *col = malloc((size_t)nnz * sizeof *col);
        float *val = malloc((size_t)nnz * sizeof *val);
        ck_assert(row && col && val);
        ck_assert_int_eq(mf_sparse_get_coo(jobs[i].R, row, col, val, MF_MEMORY_HOST), MF_OK);
        int64_t kept = 0, extra = 0;
        for (int64_t p = 0; p < nnz; p++) {
            const int owner = (int)((uint64_t)(p * 2654435761u) % 1000003u % (unsigned)n);
            const int also = i == 1 && owner == 0 && extra < overlap;
            if (owner == i || also) {
                extra += also;
                row[kept] = row[p], col[kept] = col[p], val[kept] = val[p];
                kept++;
            }
        }
        mf_sparse_destroy(jobs[i].R);
        ck_assert_int_eq(mf_sparse_from_coo(jobs[i].ctx, &jobs[i].R, USERS, ITEMS, kept, row, col,
                                            val, MF_MEMORY_HOST, 0),
                         MF_OK);
        ck_assert_int_eq(mf_sparse_set_part(jobs[i].R, 1), MF_OK);
        ck_assert_int_eq(mf_sparse_is_part(jobs[i].R), 1);
        free(row), free(col), free(val);
    }
}

/* jobs[0..n) become implicit ALS at o's rank (ials set; else ALS as they are). */
static void maybe_ials(rk_job *jobs, int n, const mf_als_opts *o, int ials)
{
    for (int i = 0; ials && i < n; i++) {
        jobs[i].ials = 1;
        mf_ials_opts_init(&jobs[i].io);
        jobs[i].io.rank = o->rank;
    }
}

/* Parts that overlap (ALS, SGD with so, or iALS with ials set): every rank fails, and the
 * one that found it names the entry. */
static void overlapping_parts_fail(const mf_als_opts *o, const mf_sgd_opts *so, int ials)
{
    rk_job jobs[3];
    make_split_group(jobs, 3, o, 5);
    for (int i = 0; so && i < 3; i++)
        jobs[i].sgd = 1, jobs[i].so = *so;
    maybe_ials(jobs, 3, o, ials);
    rk_run_als(jobs, 3);
    int named = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_ne(jobs[i].st, MF_OK);
        named += jobs[i].st == MF_ERR_INVALID_DATA && strstr(jobs[i].error, "parts of two ranks");
    }
    ck_assert_int_ge(named, 1);
    rk_close_group(jobs, 3);
}

/* Bad parts (ALS, or iALS with ials set) fail every rank: parts that overlap, a part where
 * the other rank gives the whole matrix, a file's part of 3 fitted by 2 ranks. */
static void bad_parts_fail(const mf_als_opts *o, int ials)
{
    overlapping_parts_fail(o, NULL, ials);
    rk_job jobs[3];
    /* A part where the others give the whole matrix: the ranks disagree. */
    make_group(jobs, 2, o, 5);
    ck_assert_int_eq(mf_sparse_set_part(jobs[1].R, 1), MF_OK);
    maybe_ials(jobs, 2, o, ials);
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(jobs[0].error, "split matrix") || strstr(jobs[1].error, "split matrix"),
                  "%s / %s", jobs[0].error, jobs[1].error);
    rk_close_group(jobs, 2);
    /* A file read in 3 parts fitted by a group of 2: refused on every rank (entries would
     * be missing), naming the parts. */
    const char *path = tu_write_text(".txt", "0 0 5\n1 2 4\n2 1 3\n3 3 2\n0 3 1\n1 1 2\n");
    make_group(jobs, 2, o, 5);
    for (int i = 0; i < 2; i++) {
        mf_sparse_destroy(jobs[i].R);
        mf_read_opts ro;
        mf_read_opts_init(&ro);
        ro.format = MF_FORMAT_TRIPLETS, ro.rows = USERS, ro.cols = ITEMS;
        ro.part_index = i, ro.part_count = 3;
        ck_assert_int_eq(mf_sparse_read(jobs[i].ctx, &jobs[i].R, path, &ro), MF_OK);
    }
    maybe_ials(jobs, 2, o, ials);
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(jobs[0].error, "part 0 of 3") || strstr(jobs[1].error, "part 1 of 3"),
                  "%s / %s", jobs[0].error, jobs[1].error);
    rk_close_group(jobs, 2);
}

START_TEST(split_input_fits_the_whole_matrix)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.iterations = 4, o.lambda = 0.5f;
    for (int init = 0; init < 2; init++) {
        o.init = init ? MF_ALS_INIT_MEAN : MF_ALS_INIT_UNIFORM;
        float *U1 = malloc((size_t)USERS * o.rank * sizeof *U1);
        float *V1 = malloc((size_t)ITEMS * o.rank * sizeof *V1);
        mf_als_report r1;
        single_fit(&o, U1, V1, &r1);
        ck_assert(r1.group_wait_seconds == 0.0 && r1.group_exchange_seconds == 0.0);
        for (int n = 2; n <= 4; n++) {
            rk_job jobs[4];
            make_split_group(jobs, n, &o, 0);
            rk_run_als(jobs, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                /* Integral ratings: the sums over the ranks (the mean, the items' means)
                 * are exact, so the factors are the whole matrix's bit for bit. */
                ck_assert_msg(!memcmp(jobs[i].U, U1, (size_t)USERS * o.rank * sizeof *U1),
                              "init %d: rank %d of %d: U differs from one context's", init, i, n);
                ck_assert_msg(!memcmp(jobs[i].V, V1, (size_t)ITEMS * o.rank * sizeof *V1),
                              "init %d: rank %d of %d: V differs from one context's", init, i, n);
                ck_assert_double_eq_tol(jobs[i].rep.train_rmse, r1.train_rmse,
                                        1e-12 * r1.train_rmse);
            }
            rk_close_group(jobs, n);
        }
        free(U1), free(V1);
    }
    bad_parts_fail(&o, 0);
    /* Bad arguments. */
    ck_assert_int_eq(mf_sparse_set_part(NULL, 1), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_sparse_is_part(NULL), -1);
}
END_TEST

/* Split input large enough that the entries travel in many chunks of threads' work
 * (packed by owner, merged into rows: ranks_exchange.c), replicated and sharded users:
 * the factors are still one context's on the whole matrix bit for bit where the layout
 * promises it. Then an entry near the end given by two ranks: every rank fails, the one
 * that found it naming it. */
#define BIG_USERS 6000
#define BIG_ITEMS 700
START_TEST(split_input_in_many_chunks)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4, o.iterations = 2, o.lambda = 0.5f;
    const size_t ub = (size_t)BIG_USERS * o.rank * sizeof(float),
                 vb = (size_t)BIG_ITEMS * o.rank * sizeof(float);
    float *U1 = malloc(ub), *V1 = malloc(vb);
    mf_ctx *one = tu_cpu_ctx_seeded(42);
    mf_sparse *W = ax_ratings(one, BIG_USERS, BIG_ITEMS, 0.03, 11, NULL, NULL);
    int64_t nnz = 0;
    ck_assert_int_eq(mf_sparse_shape(W, NULL, NULL, &nnz), MF_OK);
    ck_assert_int_gt(nnz, 100000); /* over 4096 entries a chunk, many chunks on any machine */
    ck_assert_int_eq(mf_als_run(one, W, &o, U1, V1, MF_MEMORY_HOST, NULL), MF_OK);
    int32_t *row = malloc((size_t)nnz * sizeof *row), *col = malloc((size_t)nnz * sizeof *col);
    float *val = malloc((size_t)nnz * sizeof *val);
    int32_t *pr = malloc((size_t)nnz * sizeof *pr), *pc = malloc((size_t)nnz * sizeof *pc);
    float *pv = malloc((size_t)nnz * sizeof *pv);
    ck_assert(row && col && val && pr && pc && pv);
    ck_assert_int_eq(mf_sparse_get_coo(W, row, col, val, MF_MEMORY_HOST), MF_OK);
    for (int layout = 0; layout < 3; layout++)
        for (int n = 2; n <= 3; n++) {
            const int overlap = layout == 2; /* the last round: rank 1 repeats one of rank 0's */
            mf_ctx *ctxs[3];
            rk_job jobs[3];
            for (int i = 0; i < n; i++) {
                memset(&jobs[i], 0, sizeof jobs[i]);
                jobs[i].ctx = ctxs[i] = tu_cpu_ctx_seeded(42);
                int64_t kept = 0;
                for (int64_t p = 0; p < nnz; p++) {
                    const int owner = (int)((uint64_t)(p * 2654435761u) % 1000003u % (unsigned)n);
                    if (owner == i || (overlap && i == 1 && p == nnz - 7 && owner == 0))
                        pr[kept] = row[p], pc[kept] = col[p], pv[kept] = val[p], kept++;
                }
                ck_assert_int_eq(mf_sparse_from_coo(ctxs[i], &jobs[i].R, BIG_USERS, BIG_ITEMS, kept,
                                                    pr, pc, pv, MF_MEMORY_HOST, 0),
                                 MF_OK);
                ck_assert_int_eq(mf_sparse_set_part(jobs[i].R, 1), MF_OK);
                jobs[i].o = o;
                jobs[i].o.layout =
                    layout == 1 ? MF_ALS_LAYOUT_USERS_SHARDED : MF_ALS_LAYOUT_REPLICATED;
                jobs[i].U = malloc(ub), jobs[i].V = malloc(vb);
            }
            ck_assert_int_eq(mf_ctx_join_local(ctxs, n), MF_OK);
            rk_run_als(jobs, n);
            int named = 0;
            for (int i = 0; i < n; i++) {
                if (overlap) {
                    ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_DATA);
                    char want[96];
                    snprintf(want, sizeof want, "the entry (%d, %d) is in the parts of two ranks",
                             row[nnz - 7], col[nnz - 7]);
                    named += strstr(jobs[i].error, want) != NULL;
                    continue;
                }
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                if (layout == 0) { /* replicated: integral ratings, exact sums */
                    ck_assert_msg(!memcmp(jobs[i].U, U1, ub) && !memcmp(jobs[i].V, V1, vb),
                                  "rank %d of %d: factors differ from one context's", i, n);
                } else { /* sharded: the item systems summed in another order */
                    ck_assert_double_lt(rk_max_rel_diff(jobs[i].U, U1, ub / sizeof(float)), 1e-3);
                    ck_assert_double_lt(rk_max_rel_diff(jobs[i].V, V1, vb / sizeof(float)), 1e-3);
                    ck_assert(!memcmp(jobs[i].U, jobs[0].U, ub));
                }
            }
            if (overlap)
                ck_assert_int_ge(named, 1);
            rk_close_group(jobs, n);
        }
    free(row), free(col), free(val), free(pr), free(pc), free(pv);
    free(U1), free(V1);
    mf_sparse_destroy(W);
    mf_ctx_destroy(one);
}
END_TEST

/* SGD from input split over the ranks: each rank gathers its users' ratings from every
 * rank's part, and the fit is the group's over the whole matrix bit for bit (one worker a
 * rank repeats itself; the ratings are integers, so the mean summed over the parts is the
 * whole's), the training RMSE summed over the ranks' users. Parts that overlap fail every
 * rank. */
START_TEST(sgd_split_input_fits_the_whole_matrix)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8;
    mf_sgd_opts so;
    mf_sgd_opts_init(&so);
    so.rank = 8, so.epochs = 4, so.workers = 1;
    for (int n = 2; n <= 3; n++) {
        rk_job whole[3], split[3];
        make_group(whole, n, &o, 5);
        make_split_group(split, n, &o, 0);
        for (int i = 0; i < n; i++) {
            whole[i].sgd = split[i].sgd = 1;
            whole[i].so = split[i].so = so;
        }
        rk_run_als(whole, n);
        rk_run_als(split, n);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(whole[i].st == MF_OK, "rank %d of %d: %s", i, n, whole[i].error);
            ck_assert_msg(split[i].st == MF_OK, "rank %d of %d: %s", i, n, split[i].error);
            ck_assert_msg(!memcmp(split[i].U, whole[i].U, (size_t)USERS * so.rank * sizeof(float)),
                          "rank %d of %d: U differs from the whole input's", i, n);
            ck_assert_msg(!memcmp(split[i].V, whole[i].V, (size_t)ITEMS * so.rank * sizeof(float)),
                          "rank %d of %d: V differs from the whole input's", i, n);
            ck_assert_double_eq_tol(split[i].srep.train_rmse, whole[i].srep.train_rmse,
                                    1e-12 * whole[i].srep.train_rmse);
            ck_assert(split[i].srep.train_rmse == split[0].srep.train_rmse);
            /* the rate counts the whole matrix's ratings, not this rank's part's */
            int64_t all = 0;
            ck_assert_int_eq(mf_sparse_shape(whole[i].R, NULL, NULL, &all), MF_OK);
            const mf_sgd_report *r = &split[i].srep;
            ck_assert_double_eq_tol(r->updates_per_second * r->epoch_seconds / r->epochs,
                                    (double)all, 1e-6 * (double)all);
        }
        rk_close_group(whole, n);
        rk_close_group(split, n);
    }
    overlapping_parts_fail(&o, &so, 0);
}
END_TEST

START_TEST(sgd_group_rotates_item_blocks)
{
    mf_sgd_opts so;
    mf_sgd_opts_init(&so);
    so.rank = 8, so.epochs = 30, so.workers = 1, so.biases = 0;
    /* one context */
    mf_ctx *ctx = tu_cpu_ctx_seeded(42);
    mf_sparse *R = ax_planted(ctx, USERS, ITEMS, 4, 0.15, 3);
    float *U1 = malloc((size_t)USERS * so.rank * sizeof *U1);
    float *V1 = malloc((size_t)ITEMS * so.rank * sizeof *V1);
    mf_sgd_report r1 = {.struct_size = sizeof r1};
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &so, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
    for (int n = 2; n <= 3; n++) {
        rk_job a[3], b[3];
        sgd_group(n, &so, a);
        sgd_group(n, &so, b);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(a[i].st == MF_OK, "rank %d of %d: %s", i, n, a[i].error);
            ck_assert_int_eq(a[i].srep.epochs, so.epochs);
            ck_assert(!memcmp(a[i].U, a[0].U, (size_t)USERS * so.rank * sizeof(float)));
            ck_assert(!memcmp(a[i].V, a[0].V, (size_t)ITEMS * so.rank * sizeof(float)));
            ck_assert(!memcmp(a[i].U, b[i].U, (size_t)USERS * so.rank * sizeof(float)));
            ck_assert_double_eq(a[i].srep.train_rmse, a[0].srep.train_rmse);
        }
        printf("sgd over %d ranks: train RMSE %.5f, one context %.5f\n", n, a[0].srep.train_rmse,
               r1.train_rmse);
        ck_assert_double_le(a[0].srep.train_rmse, r1.train_rmse * 1.10 + 1e-3);
        rk_close_group(a, n);
        rk_close_group(b, n);
    }
    free(U1);
    free(V1);
}
END_TEST

/* One ungrouped CPU context with `threads` OpenMP threads. */
static mf_ctx *cpu_ctx_threads(int threads)
{
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    co.seed = 42;
    co.cpu_threads = threads;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &co), MF_OK);
    return ctx;
}

/* Implicit ALS over a group: the factors of one context, bit for bit. Each rank forms an
 * even share of the chunks of the other side's Gram matrix (64 rows a chunk: 5 of the
 * users', 2 of the items', so that 3 and 4 ranks leave some ranks none), the ranks
 * exchange them and add all of them in chunk order; then each solves its share of the rows.
 * The chunks depend on neither the threads nor the group: one context with 1 thread and
 * with 3 gives the same bits too. */
START_TEST(ials_group_equals_one_context)
{
    static const struct {
        int solver, fp16, log;
    } cases[] = {{MF_ALS_SOLVER_CG, 0, 0}, {MF_ALS_SOLVER_EXACT, 0, 0}, {MF_ALS_SOLVER_CG, 1, 1}};
    for (int c = 0; c < 3; c++) {
        mf_ials_opts io;
        mf_ials_opts_init(&io);
        io.rank = 8, io.iterations = 3, io.solver = cases[c].solver, io.fp16 = cases[c].fp16;
        io.confidence = cases[c].log ? MF_IALS_CONFIDENCE_LOG : MF_IALS_CONFIDENCE_LINEAR;
        const size_t ub = (size_t)USERS * io.rank * sizeof(float),
                     vb = (size_t)ITEMS * io.rank * sizeof(float);
        float *U1 = malloc(ub), *V1 = malloc(vb), *U3 = malloc(ub), *V3 = malloc(vb);
        for (int t = 1; t <= 3; t += 2) {
            mf_ctx *ctx = cpu_ctx_threads(t);
            mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.08, 5, NULL, NULL);
            ck_assert_int_eq(
                mf_ials_run(ctx, R, &io, t == 1 ? U1 : U3, t == 1 ? V1 : V3, MF_MEMORY_HOST, NULL),
                MF_OK);
            mf_sparse_destroy(R);
            mf_ctx_destroy(ctx);
        }
        ck_assert_msg(!memcmp(U1, U3, ub) && !memcmp(V1, V3, vb),
                      "case %d: 1 thread and 3 threads differ", c);
        for (int n = 2; n <= 4; n++) {
            mf_als_opts o;
            mf_als_opts_init(&o);
            o.rank = io.rank;
            rk_job jobs[4];
            make_group(jobs, n, &o, 5);
            for (int i = 0; i < n; i++)
                jobs[i].ials = 1, jobs[i].io = io;
            rk_run_als(jobs, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(jobs[i].st == MF_OK, "rank %d of %d: %s", i, n, jobs[i].error);
                ck_assert_int_eq(jobs[i].irep.iterations, io.iterations);
                ck_assert_msg(!memcmp(jobs[i].U, U1, ub), "case %d: rank %d of %d: U differs", c, i,
                              n);
                ck_assert_msg(!memcmp(jobs[i].V, V1, vb), "case %d: rank %d of %d: V differs", c, i,
                              n);
            }
            rk_close_group(jobs, n);
        }
        free(U1);
        free(V1);
        free(U3);
        free(V3);
    }
}
END_TEST

static int ials_progress_ok(void *user, const mf_progress *p)
{
    (void)user, (void)p;
    return 0;
}

/* Implicit ALS from input split over the ranks: each rank gathers its users' rows and its
 * items' columns from every rank's part, so its engine reads what the whole input's shards
 * give it, and the fit (U, V and the loss) is the whole input's over the same group bit for
 * bit, which is one context's. The loss is collective (each rank its users' terms, summed
 * over the ranks): only rank 0 has a progress callback, and every rank reports the same
 * loss, one context's. A bad part is refused on every rank. */
START_TEST(ials_split_input_fits_the_whole_matrix)
{
    static const struct {
        int solver, fp16, log;
    } cases[] = {{MF_ALS_SOLVER_CG, 0, 0}, {MF_ALS_SOLVER_EXACT, 0, 0}, {MF_ALS_SOLVER_CG, 1, 1}};
    mf_als_opts o;
    mf_als_opts_init(&o);
    for (int c = 0; c < 3; c++) {
        mf_ials_opts io;
        mf_ials_opts_init(&io);
        io.rank = 8, io.iterations = 3, io.solver = cases[c].solver, io.fp16 = cases[c].fp16;
        io.confidence = cases[c].log ? MF_IALS_CONFIDENCE_LOG : MF_IALS_CONFIDENCE_LINEAR;
        o.rank = io.rank;
        const size_t ub = (size_t)USERS * io.rank * sizeof(float),
                     vb = (size_t)ITEMS * io.rank * sizeof(float);
        float *U1 = malloc(ub), *V1 = malloc(vb);
        mf_ials_report r1 = {.struct_size = sizeof r1};
        mf_ials_opts one = io;
        one.progress = ials_progress_ok;
        mf_ctx *ctx = tu_cpu_ctx_seeded(42);
        mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.08, 5, NULL, NULL);
        ck_assert_int_eq(mf_ials_run(ctx, R, &one, U1, V1, MF_MEMORY_HOST, &r1), MF_OK);
        ck_assert(isfinite(r1.loss));
        mf_sparse_destroy(R);
        mf_ctx_destroy(ctx);
        for (int n = 2; n <= 3; n++) {
            rk_job whole[3], split[3];
            make_group(whole, n, &o, 5);
            make_split_group(split, n, &o, 0);
            for (int i = 0; i < n; i++) {
                whole[i].ials = split[i].ials = 1;
                whole[i].io = split[i].io = i == 0 ? one : io;
            }
            rk_run_als(whole, n);
            rk_run_als(split, n);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(split[i].st == MF_OK, "rank %d of %d: %s", i, n, split[i].error);
                ck_assert_msg(whole[i].st == MF_OK, "rank %d of %d: %s", i, n, whole[i].error);
                ck_assert_msg(!memcmp(split[i].U, whole[i].U, ub) && !memcmp(split[i].U, U1, ub),
                              "case %d: rank %d of %d: U differs", c, i, n);
                ck_assert_msg(!memcmp(split[i].V, whole[i].V, vb) && !memcmp(split[i].V, V1, vb),
                              "case %d: rank %d of %d: V differs", c, i, n);
                ck_assert_msg(split[i].irep.loss == r1.loss && whole[i].irep.loss == r1.loss,
                              "case %d: rank %d of %d: loss %.17g / %.17g, one context's %.17g", c,
                              i, n, split[i].irep.loss, whole[i].irep.loss, r1.loss);
                ck_assert_int_eq(split[i].irep.iterations, io.iterations);
            }
            rk_close_group(whole, n);
            rk_close_group(split, n);
        }
        free(U1), free(V1);
    }
    bad_parts_fail(&o, 1);
}
END_TEST

/* A breakdown in one rank's share fails every rank, and the rank whose items then broke
 * down from it names the first (rk_ials_breakdown_jobs): the ranks agree once an
 * iteration, after both half steps, and rank 1's own failure came later. */
START_TEST(ials_first_failure_wins)
{
    mf_ctx *ctxs[2] = {tu_cpu_ctx_seeded(1), tu_cpu_ctx_seeded(1)};
    rk_job j[2];
    rk_ials_breakdown_jobs(j, ctxs);
    ck_assert_int_eq(mf_ctx_join_local(ctxs, 2), MF_OK);
    rk_run_als(j, 2);
    rk_ials_breakdown_check(j);
    rk_close_group(j, 2);
}
END_TEST

/* mf_ranks_touch_pages: with keep, every byte of a buffer of 64 MiB and more stays; without,
 * the first byte of every 4,096 becomes 0 and the rest stay; under 64 MiB nothing is
 * written. */
START_TEST(touch_pages_keeps_or_zeroes)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const size_t sizes[] = {((size_t)64 << 20) + 4097, ((size_t)64 << 20) - 1};
    for (int s = 0; s < 2; s++)
        for (int keep = 0; keep < 2; keep++) {
            const size_t n = sizes[s];
            unsigned char *b = malloc(n);
            ck_assert(b);
            for (size_t i = 0; i < n; i++)
                b[i] = (unsigned char)(i % 251 + 1);
            mf_ranks_touch_pages(ctx, b, n, keep);
            size_t wrong = 0;
            for (size_t i = 0; i < n; i++) {
                const unsigned char want =
                    !keep && s == 0 && i % 4096 == 0 ? 0 : (unsigned char)(i % 251 + 1);
                wrong += b[i] != want;
            }
            ck_assert_msg(wrong == 0, "size %zu, keep %d: %zu bytes wrong", n, keep, wrong);
            free(b);
        }
    mf_ctx_destroy(ctx);
}
END_TEST

/* mf_ranks_agree_first over 3 CPU ranks: each thread's status and point, and what it got. */
typedef struct first_job {
    mf_ctx *ctx;
    mf_status st, got;
    int point;
    char error[256];
} first_job;

static void *agree_first(void *arg)
{
    first_job *j = arg;
    if (j->st != MF_OK)
        mf_fail(j->ctx, j->st, "own failure at point %d", j->point);
    j->got = mf_ranks_agree_first(j->ctx, "agree_test", j->st, j->point);
    snprintf(j->error, sizeof j->error, "%s", mf_ctx_last_error(j->ctx));
    return NULL;
}

/* The earliest point's failure wins: rank 2 failed at point 0 (out of memory) and keeps its
 * message; rank 1, which failed later (point 1, with a larger status, which a plain
 * agreement would pick), and rank 0, which did not fail, report rank 2's status and name
 * it. No failure: MF_OK everywhere. */
START_TEST(agree_first_failure_wins)
{
    mf_ctx *ctxs[3];
    first_job j[3];
    for (int i = 0; i < 3; i++)
        ctxs[i] = tu_cpu_ctx();
    ck_assert_int_eq(mf_ctx_join_local(ctxs, 3), MF_OK);
    for (int round = 0; round < 2; round++) {
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            j[i] = (first_job){ctxs[i], MF_OK, MF_OK, 0, ""};
        if (round == 1) {
            j[1].st = MF_ERR_NUMERIC, j[1].point = 1;
            j[2].st = MF_ERR_OUT_OF_MEMORY, j[2].point = 0;
            j[0].point = 2;
        }
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, agree_first, &j[i]), 0);
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        if (round == 0) {
            for (int i = 0; i < 3; i++)
                ck_assert_int_eq(j[i].got, MF_OK);
            continue;
        }
        ck_assert_int_eq(j[2].got, MF_ERR_OUT_OF_MEMORY);
        ck_assert_msg(strstr(j[2].error, "own failure at point 0"), "%s", j[2].error);
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(j[i].got, MF_ERR_OUT_OF_MEMORY);
            ck_assert_msg(strstr(j[i].error, "rank 2 of 3 failed"), "rank %d: %s", i, j[i].error);
        }
    }
    for (int i = 0; i < 3; i++)
        mf_ctx_destroy(ctxs[i]);
}
END_TEST

/* What the review of the groups found: a rank of an SGD group failing in its start (a NaN
 * in its given U) fails every rank instead of leaving them waiting; SGD's schedule, decay
 * and lambda_bias and implicit ALS's init take part in the agreement; a failure message
 * names the rank that had that status. */
START_TEST(review_cases)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4;
    rk_job jobs[3];
    make_group(jobs, 2, &o, 5);
    for (int i = 0; i < 2; i++) {
        jobs[i].sgd = 1;
        mf_sgd_opts_init(&jobs[i].so);
        jobs[i].so.rank = 4, jobs[i].so.epochs = 2, jobs[i].so.init = MF_SGD_INIT_GIVEN;
        for (int64_t p = 0; p < (int64_t)USERS * 4; p++)
            jobs[i].U[p] = 0.05f;
        for (int64_t p = 0; p < (int64_t)ITEMS * 4; p++)
            jobs[i].V[p] = 0.05f;
    }
    jobs[1].U[3] = NAN;
    rk_run_als(jobs, 2);
    ck_assert_int_eq(jobs[1].st, MF_ERR_INVALID_DATA);
    ck_assert_int_eq(jobs[0].st, MF_ERR_INVALID_DATA);
    ck_assert_msg(strstr(jobs[0].error, "rank 1 of 2 failed"), "%s", jobs[0].error);
    rk_close_group(jobs, 2);

    static const char *const what[] = {"schedule", "decay", "lambda_bias"};
    for (int w = 0; w < 3; w++) {
        make_group(jobs, 2, &o, 5);
        for (int i = 0; i < 2; i++) {
            jobs[i].sgd = 1;
            mf_sgd_opts_init(&jobs[i].so);
            jobs[i].so.rank = 4, jobs[i].so.epochs = 2;
        }
        if (w == 0)
            jobs[1].so.schedule = MF_SGD_SCHEDULE_CONSTANT;
        else if (w == 1)
            jobs[1].so.decay = 0.9f;
        else
            jobs[1].so.lambda_bias = 0.5f;
        rk_run_als(jobs, 2);
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
            ck_assert_msg(strstr(jobs[i].error, what[w]), "%s", jobs[i].error);
        }
        rk_close_group(jobs, 2);
    }

    make_group(jobs, 2, &o, 5);
    for (int i = 0; i < 2; i++) {
        jobs[i].ials = 1;
        mf_ials_opts_init(&jobs[i].io);
        jobs[i].io.rank = 4;
    }
    jobs[1].io.init = MF_IALS_INIT_GIVEN;
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "disagree on init"), "%s", jobs[i].error);
    }
    rk_close_group(jobs, 2);

    /* Ranks 0 and 2 fail at the same point with different statuses: rank 1 reports the
     * larger status with the rank that had it. */
    make_group(jobs, 3, &o, 5);
    jobs[0].o.tune = MF_TUNE_LAMBDA; /* UNSUPPORTED (5) over a group */
    jobs[2].o.lambda = -1.0f;        /* INVALID_ARGUMENT (1) */
    rk_run_als(jobs, 3);
    ck_assert_int_eq(jobs[0].st, MF_ERR_UNSUPPORTED);
    ck_assert_int_eq(jobs[2].st, MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(jobs[1].st, MF_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(jobs[1].error, "rank 0 of 3 failed"), "%s", jobs[1].error);
    rk_close_group(jobs, 3);
}
END_TEST

START_TEST(ranks_must_agree)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4, o.iterations = 2;
    rk_job jobs[3];
    make_group(jobs, 3, &o, 5);
    jobs[2].o.lambda = 1.0f; /* rank 2 fits another problem */
    rk_run_als(jobs, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "disagree on lambda"), "%s", jobs[i].error);
        ck_assert(isnan(jobs[i].U[0]) && isnan(jobs[i].V[0])); /* untouched */
    }
    rk_close_group(jobs, 3);

    /* Other ratings on one rank (same shape, other entries: another count). */
    make_group(jobs, 2, &o, 5);
    mf_sparse_destroy(jobs[1].R);
    jobs[1].R = ax_ratings(jobs[1].ctx, USERS, ITEMS, 0.05, 5, NULL, NULL);
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "count of entries"), "%s", jobs[i].error);
    }
    rk_close_group(jobs, 2);
}
END_TEST

START_TEST(one_failure_fails_all)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4, o.iterations = 2;
    rk_job jobs[3];
    make_group(jobs, 3, &o, 5);
    jobs[1].o.rank = 0; /* rank 1's own check fails */
    rk_run_als(jobs, 3);
    ck_assert_int_eq(jobs[1].st, MF_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(jobs[1].error, "rank = 0 is outside"), "%s", jobs[1].error);
    for (int i = 0; i < 3; i += 2) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "rank 1 of 3 failed"), "%s", jobs[i].error);
        ck_assert(isnan(jobs[i].U[0]) && isnan(jobs[i].V[0]));
    }
    rk_close_group(jobs, 3);

    /* A numeric breakdown in one rank's share fails every rank with the same status. */
    mf_ctx *ctxs[2] = {tu_cpu_ctx_seeded(1), tu_cpu_ctx_seeded(1)};
    rk_job j2[2];
    rk_als_breakdown_jobs(j2, ctxs);
    ck_assert_int_eq(mf_ctx_join_local(ctxs, 2), MF_OK);
    rk_run_als(j2, 2);
    rk_als_breakdown_check(j2);
    rk_close_group(j2, 2);
}
END_TEST

static int cancel_on_second(void *user, const mf_progress *p)
{
    (void)user;
    return p->iteration >= 2;
}
static int never_cancel(void *user, const mf_progress *p)
{
    (void)user;
    (void)p;
    return 0;
}

/* A callback that takes 0.1 s (a tool plotting from one rank). */
static int slow_progress(void *user, const mf_progress *p)
{
    (void)user;
    (void)p;
    for (const double t0 = mf_seconds(); mf_seconds() - t0 < 0.1;) {
    }
    return 0;
}

START_TEST(one_cancel_stops_all)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4, o.iterations = 6;
    rk_job jobs[3];
    make_group(jobs, 2, &o, 5);
    jobs[0].o.progress = cancel_on_second;
    jobs[1].o.progress = never_cancel;
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_CANCELLED);
        ck_assert_int_eq(jobs[i].rep.iterations, 2); /* each keeps the step it finished */
    }
    ck_assert(!memcmp(jobs[0].U, jobs[1].U, (size_t)USERS * o.rank * sizeof(float)));
    rk_close_group(jobs, 2);

    /* A slow callback on some ranks only (a tool plotting from one rank): the same fit. The
     * agreement after the callbacks waits for the slowest: that is the measurement's cost,
     * which iteration_seconds and group_wait_seconds leave out. */
    make_group(jobs, 3, &o, 5);
    jobs[1].o.progress = slow_progress;
    rk_run_als(jobs, 3);
    for (int i = 0; i < 3; i++) {
        const mf_als_report *r = &jobs[i].rep;
        ck_assert_msg(jobs[i].st == MF_OK, "%s", jobs[i].error);
        ck_assert_int_eq(r->iterations, o.iterations);
        ck_assert(!memcmp(jobs[i].V, jobs[1].V, (size_t)ITEMS * o.rank * sizeof(float)));
        ck_assert_msg(r->seconds >= 0.1 * o.iterations, "rank %d: %g s", i, r->seconds);
        ck_assert_msg(r->group_wait_seconds < 0.05 * o.iterations &&
                          r->iteration_seconds < 0.05 * o.iterations,
                      "rank %d: group wait %g s, iterations %g s of %g s", i, r->group_wait_seconds,
                      r->iteration_seconds, r->seconds);
    }
    rk_close_group(jobs, 3);
}
END_TEST

/* ASD over n ranks: each rank with its own copy of a rank-3 matrix's observed entries. */
static void asd_group(rk_job *jobs, int n, const mf_asd_opts *ao)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = ao->rank;
    make_group(jobs, n, &o, 5);
    for (int i = 0; i < n; i++) {
        jobs[i].asd = 1;
        jobs[i].ao = *ao;
    }
}

START_TEST(asd_group_matches_one_context)
{
    static const struct {
        int ranks, variant, init, continuation;
    } cases[] = {
        {2, MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 0}, {3, MF_ASD_PLAIN, MF_ASD_INIT_RANDOM, 0},
        {4, MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 0}, {1, MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 0},
        {2, MF_ASD_SCALED, MF_ASD_INIT_GIVEN, 0},  {3, MF_ASD_SCALED, MF_ASD_INIT_SPECTRAL, 0},
        {2, MF_ASD_SCALED, MF_ASD_INIT_RANDOM, 1}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        const int n = cases[t].ranks, r = 3;
        mf_asd_opts ao;
        mf_asd_opts_init(&ao);
        ao.rank = r, ao.variant = cases[t].variant, ao.init = cases[t].init;
        ao.max_iterations = 25, ao.tolerance = 1e-12, ao.stagnation_window = 0;
        ao.rank_continuation = cases[t].continuation;
        /* one context */
        mf_ctx *ctx = tu_cpu_ctx_seeded(42);
        mf_sparse *R = ax_ratings(ctx, USERS, ITEMS, 0.08, 5, NULL, NULL);
        mf_sparse *T = ax_ratings(ctx, USERS, ITEMS, 0.03, 9, NULL, NULL);
        float *X = malloc((size_t)USERS * r * sizeof *X),
              *Y = malloc((size_t)ITEMS * r * sizeof *Y);
        for (int64_t p = 0; p < (int64_t)USERS * r; p++)
            X[p] = 0.01f * (float)((p * 7) % 11) - 0.05f;
        for (int64_t p = 0; p < (int64_t)ITEMS * r; p++)
            Y[p] = 0.02f * (float)((p * 5) % 13) - 0.1f;
        float *X0 = malloc((size_t)USERS * r * sizeof *X0),
              *Y0 = malloc((size_t)ITEMS * r * sizeof *Y0);
        memcpy(X0, X, (size_t)USERS * r * sizeof *X0);
        memcpy(Y0, Y, (size_t)ITEMS * r * sizeof *Y0);
        mf_asd_opts one = ao;
        one.test = T;
        mf_asd_report rep1 = {.struct_size = sizeof rep1};
        ck_assert_msg(mf_asd_run(ctx, R, &one, X, Y, MF_MEMORY_HOST, &rep1) == MF_OK, "%s",
                      mf_ctx_last_error(ctx));
        /* the group */
        rk_job jobs[4];
        asd_group(jobs, n, &ao);
        mf_sparse *Ts[4];
        for (int i = 0; i < n; i++) {
            Ts[i] = ax_ratings(jobs[i].ctx, USERS, ITEMS, 0.03, 9, NULL, NULL);
            jobs[i].ao.test = Ts[i];
            memcpy(jobs[i].U, X0, (size_t)USERS * r * sizeof *X0);
            memcpy(jobs[i].V, Y0, (size_t)ITEMS * r * sizeof *Y0);
        }
        rk_run_als(jobs, n);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(jobs[i].st == MF_OK, "rank %d: %s", i, jobs[i].error);
            /* every rank returns the same X, Y and report */
            ck_assert(!memcmp(jobs[i].U, jobs[0].U, (size_t)USERS * r * sizeof(float)));
            ck_assert(!memcmp(jobs[i].V, jobs[0].V, (size_t)ITEMS * r * sizeof(float)));
            ck_assert(jobs[i].arep.relative_residual == jobs[0].arep.relative_residual);
            ck_assert(jobs[i].arep.test_rmse == jobs[0].arep.test_rmse);
            ck_assert_int_eq(jobs[i].arep.iterations, jobs[0].arep.iterations);
            /* continuation's inner ranks stop on stagnation, whose test may fall either way
             * on rounding: its iterations need not be one context's */
            if (!cases[t].continuation) {
                ck_assert_int_eq(jobs[i].arep.iterations, rep1.iterations);
                ck_assert_int_eq(jobs[i].arep.stopped, rep1.stopped);
            }
        }
        /* one context's result, up to the order of the sums */
        const double dx = rk_max_rel_diff(jobs[0].U, X, (int64_t)USERS * r),
                     dy = rk_max_rel_diff(jobs[0].V, Y, (int64_t)ITEMS * r);
        const double dres = fabs(jobs[0].arep.relative_residual - rep1.relative_residual) /
                            rep1.relative_residual,
                     dtest = fabs(jobs[0].arep.test_rmse - rep1.test_rmse) / rep1.test_rmse;
        printf("asd %d ranks, variant %d, init %d, continuation %d: residual %.6g (one context "
               "%.6g), test RMSE %.6g (%.6g); factors differ by %.2e, %.2e\n",
               n, cases[t].variant, cases[t].init, cases[t].continuation,
               jobs[0].arep.relative_residual, rep1.relative_residual, jobs[0].arep.test_rmse,
               rep1.test_rmse, dx, dy);
        ck_assert_msg(dres < 1e-3 && dtest < 1e-3 && dx < 1e-2 && dy < 1e-2,
                      "residual %g, test %g, X %g, Y %g", dres, dtest, dx, dy);
        ck_assert(rep1.relative_residual < 0.5);
        for (int i = 0; i < n; i++)
            mf_sparse_destroy(Ts[i]);
        rk_close_group(jobs, n);
        free(X), free(Y), free(X0), free(Y0);
        mf_sparse_destroy(R);
        mf_sparse_destroy(T);
        mf_ctx_destroy(ctx);
    }
}
END_TEST

static int asd_cancel_third(void *user, const mf_progress *p)
{
    (void)user;
    return p->iteration >= 3;
}

/* ASD's ranks fail, cancel and stop together, and agree on the options. */
/* ASD from input split over the ranks: each rank gathers its rows and its columns from
 * every rank's part, so the fit is the whole input's over the same group bit for bit (with a
 * whole test set on each rank); the spectral start, which needs the whole matrix, is
 * refused on every rank. */
START_TEST(asd_split_input_fits_the_whole_matrix)
{
    mf_asd_opts ao;
    mf_asd_opts_init(&ao);
    ao.rank = 3, ao.max_iterations = 20, ao.tolerance = 1e-12, ao.stagnation_window = 0;
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = ao.rank;
    for (int n = 2; n <= 3; n++) {
        rk_job whole[3], split[3];
        mf_sparse *T[2][3];
        asd_group(whole, n, &ao);
        make_split_group(split, n, &o, 0);
        for (int i = 0; i < n; i++) {
            split[i].asd = 1, split[i].ao = ao;
            T[0][i] = ax_ratings(whole[i].ctx, USERS, ITEMS, 0.03, 9, NULL, NULL);
            T[1][i] = ax_ratings(split[i].ctx, USERS, ITEMS, 0.03, 9, NULL, NULL);
            whole[i].ao.test = T[0][i], split[i].ao.test = T[1][i];
        }
        rk_run_als(whole, n);
        rk_run_als(split, n);
        for (int i = 0; i < n; i++) {
            ck_assert_msg(whole[i].st == MF_OK, "rank %d of %d: %s", i, n, whole[i].error);
            ck_assert_msg(split[i].st == MF_OK, "rank %d of %d: %s", i, n, split[i].error);
            ck_assert_msg(!memcmp(split[i].U, whole[i].U, (size_t)USERS * ao.rank * sizeof(float)),
                          "rank %d of %d: X differs from the whole input's", i, n);
            ck_assert_msg(!memcmp(split[i].V, whole[i].V, (size_t)ITEMS * ao.rank * sizeof(float)),
                          "rank %d of %d: Y differs from the whole input's", i, n);
            /* the scalars too: the engines' sums are blocked, in a fixed order */
            ck_assert(split[i].arep.relative_residual == whole[i].arep.relative_residual);
            ck_assert(split[i].arep.test_rmse == whole[i].arep.test_rmse);
            ck_assert_int_eq(split[i].arep.iterations, whole[i].arep.iterations);
        }
        for (int i = 0; i < n; i++)
            mf_sparse_destroy(T[0][i]), mf_sparse_destroy(T[1][i]);
        rk_close_group(whole, n);
        rk_close_group(split, n);
    }
    rk_job jobs[2];
    make_split_group(jobs, 2, &o, 0);
    for (int i = 0; i < 2; i++) {
        jobs[i].asd = 1, jobs[i].ao = ao;
        jobs[i].ao.init = MF_ASD_INIT_SPECTRAL;
    }
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_int_ne(jobs[i].st, MF_OK);
    ck_assert_msg(strstr(jobs[0].error, "spectral start") ||
                      strstr(jobs[1].error, "spectral start"),
                  "%s / %s", jobs[0].error, jobs[1].error);
    rk_close_group(jobs, 2);
}
END_TEST

START_TEST(asd_group_stops_together)
{
    mf_asd_opts ao;
    mf_asd_opts_init(&ao);
    ao.rank = 3, ao.max_iterations = 10;
    rk_job jobs[3];
    /* a cancel on one rank (the others without a callback) */
    asd_group(jobs, 3, &ao);
    jobs[1].ao.progress = asd_cancel_third;
    rk_run_als(jobs, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_CANCELLED);
        ck_assert_int_eq(jobs[i].arep.iterations, 3);
        ck_assert_int_eq(jobs[i].arep.stopped, MF_ASD_STOP_CANCELLED);
        ck_assert(!memcmp(jobs[i].U, jobs[0].U, (size_t)USERS * 3 * sizeof(float)));
        ck_assert(!isnan(jobs[i].U[0]) && !isnan(jobs[i].U[USERS * 3 - 1]));
    }
    rk_close_group(jobs, 3);
    /* another option on one rank, one rank's bad option */
    asd_group(jobs, 3, &ao);
    jobs[2].ao.tolerance = 1e-3;
    jobs[0].ao.stagnation_rate = 2.0;
    rk_run_als(jobs, 3);
    ck_assert_int_eq(jobs[0].st, MF_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(jobs[0].error, "stagnation_rate"), "%s", jobs[0].error);
    for (int i = 1; i < 3; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "rank 0 of 3 failed"), "%s", jobs[i].error);
        ck_assert(isnan(jobs[i].U[0]) && isnan(jobs[i].V[0]));
    }
    rk_close_group(jobs, 3);
    asd_group(jobs, 2, &ao);
    jobs[1].ao.tolerance = 1e-3;
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "disagree on tolerance"), "%s", jobs[i].error);
    }
    rk_close_group(jobs, 2);
    /* rank continuation must be the same on every rank */
    asd_group(jobs, 2, &ao);
    jobs[1].ao.rank_continuation = 1;
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(jobs[i].st, MF_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(jobs[i].error, "disagree on rank_continuation"), "%s", jobs[i].error);
        ck_assert(isnan(jobs[i].U[0]));
    }
    rk_close_group(jobs, 2);
    /* a time limit stops every rank at the same iteration */
    ao.max_iterations = 100000, ao.tolerance = 1e-15, ao.stagnation_window = 0;
    ao.time_limit = 0.2;
    asd_group(jobs, 2, &ao);
    rk_run_als(jobs, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(jobs[i].st == MF_OK, "%s", jobs[i].error);
        ck_assert_int_eq(jobs[i].arep.stopped, MF_ASD_STOP_TIME_LIMIT);
        ck_assert_int_eq(jobs[i].arep.iterations, jobs[0].arep.iterations);
        ck_assert(!memcmp(jobs[i].V, jobs[0].V, (size_t)ITEMS * 3 * sizeof(float)));
    }
    rk_close_group(jobs, 2);
}
END_TEST

START_TEST(other_runs_refuse_groups)
{
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 4;
    rk_job jobs[2];
    make_group(jobs, 2, &o, 5);
    mf_bmf_opts bo;
    mf_bmf_opts_init(&bo);
    bo.rank = 4;
    uint64_t A[USERS], B[ITEMS];
    A[0] = 7;
    ck_assert_int_eq(mf_bmf_run(jobs[0].ctx, jobs[0].R, &bo, A, B, MF_MEMORY_HOST, NULL),
                     MF_ERR_UNSUPPORTED);
    tu_assert_error_has(jobs[0].ctx, "mf_bmf_run does not run over a group");
    ck_assert(A[0] == 7);
    /* A call that is not a run works on the rank's own context. */
    int32_t rows, cols;
    int64_t nnz;
    ck_assert_int_eq(mf_sparse_shape(jobs[0].R, &rows, &cols, &nnz), MF_OK);
    /* tune is not collective yet either */
    jobs[0].o.tune = MF_TUNE_LAMBDA, jobs[1].o.tune = MF_TUNE_LAMBDA;
    rk_run_als(jobs, 2);
    ck_assert_int_eq(jobs[0].st, MF_ERR_UNSUPPORTED);
    ck_assert_int_eq(jobs[1].st, MF_ERR_UNSUPPORTED);
    rk_close_group(jobs, 2);
}
END_TEST

/* mf_ctx_group_stats: zeros outside a group; over a group's ALS fit every rank made the
 * same collective calls, and the gathers brought each rank every row it does not solve
 * (at least k floats a row, both sides, every iteration); a second fit adds as many calls;
 * an older, smaller struct gets its prefix alone; bad arguments fail. */
START_TEST(group_stats_count_exchanges)
{
    enum { N = 3 };
    mf_als_opts o;
    mf_als_opts_init(&o);
    o.rank = 8, o.iterations = 3, o.lambda = 0.5f;
    mf_group_stats g = {.struct_size = sizeof g, .calls = -1};
    mf_ctx *alone = tu_cpu_ctx();
    ck_assert_int_eq(mf_ctx_group_stats(alone, &g), MF_OK);
    ck_assert(g.calls == 0 && g.exchange_bytes == 0 && g.wait_seconds == 0.0 &&
              g.exchange_seconds == 0.0);
    g.struct_size = 0;
    ck_assert_int_eq(mf_ctx_group_stats(alone, &g), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(alone, "struct_size");
    g.struct_size = 12; /* inside wait_seconds: was MF_OK with 4 of its bytes written */
    ck_assert_int_eq(mf_ctx_group_stats(alone, &g), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(alone, "ends inside a field");
    ck_assert_int_eq(mf_ctx_group_stats(alone, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_group_stats(NULL, &g), MF_ERR_INVALID_ARGUMENT);
    mf_ctx_destroy(alone);

    rk_job jobs[N];
    make_group(jobs, N, &o, 5);
    mf_group_stats first[N];
    for (int i = 0; i < N; i++) {
        first[i] = (mf_group_stats){.struct_size = sizeof first[i]};
        ck_assert_int_eq(mf_ctx_group_stats(jobs[i].ctx, &first[i]), MF_OK);
        ck_assert_int_eq(first[i].calls, 0);
    }
    for (int fit = 1; fit <= 2; fit++) {
        rk_run_als(jobs, N);
        int64_t bytes = 0;
        mf_group_stats s[N];
        for (int i = 0; i < N; i++) {
            ck_assert_msg(jobs[i].st == MF_OK, "rank %d: %s", i, jobs[i].error);
            s[i] = (mf_group_stats){.struct_size = sizeof s[i]};
            ck_assert_int_eq(mf_ctx_group_stats(jobs[i].ctx, &s[i]), MF_OK);
            ck_assert_int_gt(s[i].calls, 0);
            ck_assert_int_eq(s[i].calls, s[0].calls);
            ck_assert(s[i].wait_seconds >= 0.0 && s[i].exchange_seconds >= 0.0);
            ck_assert_int_gt(s[i].exchange_bytes, first[i].exchange_bytes);
            bytes += s[i].exchange_bytes - first[i].exchange_bytes;
            /* The report's share: the iterations' alone, within the call's. */
            const mf_als_report *r = &jobs[i].rep;
            ck_assert(r->group_exchange_seconds > 0.0 && r->group_wait_seconds > 0.0);
            ck_assert(r->group_exchange_seconds <=
                      s[i].exchange_seconds - first[i].exchange_seconds + 1e-12);
            ck_assert(r->group_wait_seconds <= s[i].wait_seconds - first[i].wait_seconds + 1e-12);
        }
        const int64_t least =
            (int64_t)o.iterations * (N - 1) * (USERS + ITEMS) * o.rank * (int64_t)sizeof(float);
        ck_assert_msg(bytes >= least, "fit %d: %lld bytes gathered, fewer than %lld", fit,
                      (long long)bytes, (long long)least);
        if (fit == 2)
            ck_assert_int_eq(s[0].calls, 2 * first[0].calls);
        for (int i = 0; i < N; i++)
            first[i] = fit == 1 ? s[i] : first[i];
    }
    /* An older struct: struct_size and the wait alone; the bytes past it stay the caller's. */
    unsigned char old[sizeof(mf_group_stats)];
    memset(old, 0xab, sizeof old);
    const size_t prefix = offsetof(mf_group_stats, exchange_seconds);
    memcpy(old, &prefix, sizeof prefix);
    ck_assert_int_eq(mf_ctx_group_stats(jobs[0].ctx, (mf_group_stats *)(void *)old), MF_OK);
    for (size_t b = prefix; b < sizeof old; b++)
        ck_assert_int_eq(old[b], 0xab);
    double wait;
    memcpy(&wait, old + offsetof(mf_group_stats, wait_seconds), sizeof wait);
    ck_assert(wait > 0.0);
    rk_close_group(jobs, N);
}
END_TEST

START_TEST(group_calls_check_arguments)
{
    mf_ctx *a = tu_cpu_ctx(), *b = tu_cpu_ctx();
    mf_ctx *pair[2] = {a, b}, *same[2] = {a, a}, *hole[2] = {a, NULL};
    ck_assert_int_eq(mf_ctx_join_local(NULL, 2), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_join_local(pair, 0), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "n = 0 is outside"));
    ck_assert_int_eq(mf_ctx_join_local(pair, 1025), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "n = 1025 is outside 1..1024"); /* on ctxs[0], as the header says */
    ck_assert_int_eq(mf_ctx_join_local(hole, 2), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "ctxs[1] is NULL");
    ck_assert_int_eq(mf_ctx_join_local(same, 2), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "are one context");
    int rank = -1, size = -1;
    ck_assert_int_eq(mf_ctx_rank(a, &rank, &size), MF_OK);
    ck_assert(rank == 0 && size == 1); /* the failures left no group */
    ck_assert_int_eq(mf_ctx_rank(a, NULL, &size), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_rank(NULL, &rank, &size), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_join_local(pair, 2), MF_OK);
    ck_assert_int_eq(mf_ctx_join_local(pair, 2), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "already in a group");
    /* NCCL is for CUDA contexts; NULL leaves the group. */
    ck_assert_int_eq(mf_ctx_set_nccl_comm(b, (void *)pair), MF_ERR_UNSUPPORTED);
    ck_assert_int_eq(mf_ctx_set_nccl_comm(NULL, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_set_nccl_comm(b, NULL), MF_OK);
    ck_assert_int_eq(mf_ctx_rank(b, &rank, &size), MF_OK);
    ck_assert(rank == 0 && size == 1);
    ck_assert_int_eq(mf_ctx_rank(a, &rank, &size), MF_OK);
    ck_assert(rank == 0 && size == 2);
    /* MPI (test_mpi_ranks runs the groups under mpiexec): this process never started it, or
     * the build has none; either way MF_ERR_UNSUPPORTED, saying which. The context checks
     * come first; NULL leaves a group of either kind. */
    int not_a_comm = 0;
    ck_assert_int_eq(mf_ctx_set_mpi_comm(b, &not_a_comm), MF_ERR_UNSUPPORTED);
#ifdef MFACT_HAVE_MPI
    tu_assert_error_has(b, "mf_ctx_set_mpi_comm: MPI is not initialized");
#else
    tu_assert_error_has(b, "mf_ctx_set_mpi_comm: this build of mfact has no MPI");
#endif
    ck_assert_int_eq(mf_ctx_set_mpi_comm(NULL, &not_a_comm), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_set_mpi_comm(NULL, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_set_mpi_comm(a, &not_a_comm), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(a, "already in a group");
    ck_assert_int_eq(mf_ctx_set_mpi_comm(a, NULL), MF_OK);
    ck_assert_int_eq(mf_ctx_rank(a, &rank, &size), MF_OK);
    ck_assert(rank == 0 && size == 1);
    mf_ctx_destroy(a);
    mf_ctx_destroy(b);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "ranks", .timeout = 300};
    const TTest *const tests[] = {shares_balance_work,
                                  group_fit_equals_one_context,
                                  sharded_users_fit_one_contexts_problem,
                                  sharded_users_first_failure_wins,
                                  sharded_users_early_failure_fails_all,
                                  split_input_fits_the_whole_matrix,
                                  split_input_in_many_chunks,
                                  sgd_group_rotates_item_blocks,
                                  sgd_split_input_fits_the_whole_matrix,
                                  ials_group_equals_one_context,
                                  ials_first_failure_wins,
                                  ials_split_input_fits_the_whole_matrix,
                                  agree_first_failure_wins,
                                  touch_pages_keeps_or_zeroes,
                                  asd_group_matches_one_context,
                                  asd_group_stops_together,
                                  asd_split_input_fits_the_whole_matrix,
                                  review_cases,
                                  ranks_must_agree,
                                  one_failure_fails_all,
                                  one_cancel_stops_all,
                                  other_runs_refuse_groups,
                                  group_stats_count_exchanges,
                                  group_calls_check_arguments};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
