/* mf_ials_run and mf_ials_fold_in: argument checks, the starts, the iteration loop. The
 * arithmetic lives in the engines (ials_cpu.c, ials.cu); this file is the same for both, so
 * that CPU and GPU runs start from the same factors and fail alike. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ctx.h"
#include "core/fit.h"
#include "core/opts.h"
#include "core/random.h"
#include "core/ranks.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"
#include "ials/ials_internal.h"

/* The Philox streams of the initial factors: fixed, so that a seed means one start. */
#define IALS_STREAM_U 0x69414c5355ull
#define IALS_STREAM_V 0x69414c5356ull

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void ials_opts_defaults(mf_ials_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 64;
    opts->lambda = 0.01f;
    opts->alpha = 1.0f;
    opts->confidence = MF_IALS_CONFIDENCE_LINEAR;
    opts->epsilon = 1.0f;
    opts->iterations = 15;
    opts->init = MF_IALS_INIT_RANDOM;
    opts->solver = MF_ALS_SOLVER_AUTO;
    opts->cg_steps = 3;
}

MF_OPTS_INITIALIZERS(mf_ials_opts, mf_ials_opts_init, ials_opts_defaults, fp16)

static mf_status check_opts(mf_ctx *ctx, const mf_ials_opts *o, const char *fn, int run)
{
    MF_REQUIRE(ctx, o->rank >= 1 && o->rank <= 512, "%s: rank = %d is outside 1..512", fn, o->rank);
    MF_REQUIRE(ctx, o->lambda >= 0.0f && isfinite(o->lambda),
               "%s: lambda = %g must be finite and >= 0", fn, (double)o->lambda);
    MF_REQUIRE(ctx, o->alpha >= 0.0f && isfinite(o->alpha),
               "%s: alpha = %g must be finite and >= 0", fn, (double)o->alpha);
    MF_REQUIRE(
        ctx, o->confidence == MF_IALS_CONFIDENCE_LINEAR || o->confidence == MF_IALS_CONFIDENCE_LOG,
        "%s: confidence = %d is not an mf_ials_confidence value", fn, (int)o->confidence);
    MF_REQUIRE(ctx, o->epsilon > 0.0f && isfinite(o->epsilon),
               "%s: epsilon = %g must be finite and > 0", fn, (double)o->epsilon);
    if (!run) /* a fold-in reads no more (the header says so): its solve is exact */
        return MF_OK;
    MF_REQUIRE(ctx, o->fp16 == 0 || o->fp16 == 1, "%s: fp16 = %d is not 0 or 1", fn, o->fp16);
    MF_REQUIRE(ctx, o->iterations >= 1, "%s: iterations = %d must be at least 1", fn,
               o->iterations);
    MF_REQUIRE(ctx, o->init == MF_IALS_INIT_RANDOM || o->init == MF_IALS_INIT_GIVEN,
               "%s: init = %d is not an mf_ials_init value", fn, (int)o->init);
    MF_REQUIRE(ctx,
               o->solver == MF_ALS_SOLVER_AUTO || o->solver == MF_ALS_SOLVER_EXACT ||
                   o->solver == MF_ALS_SOLVER_CG,
               "%s: solver = %d is not an mf_als_solver value", fn, (int)o->solver);
    MF_REQUIRE(ctx, o->cg_steps >= 1 && o->cg_steps <= 64, "%s: cg_steps = %d is outside 1..64", fn,
               o->cg_steps);
    return MF_OK;
}

/* Stored values must be >= 0 (a negative one would make a confidence below 1 or, on the log
 * scale, not a number), and their confidences finite; a pattern's entries are all 1. */
static mf_status check_values(mf_ctx *ctx, const mf_sparse *R, const mf_ials_opts *o,
                              const char *fn)
{
    const int log_scale = o->confidence == MF_IALS_CONFIDENCE_LOG;
    if (!R->val) {
        const float c = mf_ials_weight(1.0f, o->alpha, o->epsilon, log_scale);
        if (R->nnz > 0 && !isfinite(c))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "%s: a stored interaction (value 1: a pattern) has the confidence %g "
                           "under alpha = %g and epsilon = %g; confidences must be finite",
                           fn, (double)c, (double)o->alpha, (double)o->epsilon);
        return MF_OK;
    }
    int64_t bad = -1;
    for (int64_t p = 0; p < R->nnz && bad < 0; p++)
        if (R->val[p] < 0.0f ||
            !isfinite(mf_ials_weight(R->val[p], o->alpha, o->epsilon, log_scale)))
            bad = p;
    if (bad < 0)
        return MF_OK;
    int32_t row = 0;
    while (R->row_ptr[row + 1] <= bad)
        row++;
    const float v = R->val[bad];
    if (v < 0.0f || isnan(v))
        return mf_fail(ctx, MF_ERR_INVALID_DATA,
                       "%s: the interaction (%d, %d) has the value %g; confidences need values "
                       ">= 0",
                       fn, row, R->col[bad], (double)v);
    return mf_fail(ctx, MF_ERR_INVALID_DATA,
                   "%s: the interaction (%d, %d) with the value %g has the confidence %g under "
                   "alpha = %g and epsilon = %g; confidences must be finite",
                   fn, row, R->col[bad], (double)v,
                   (double)mf_ials_weight(v, o->alpha, o->epsilon, log_scale), (double)o->alpha,
                   (double)o->epsilon);
}

/* What the engines start from: the options, the solver's steps (0: exact) and the starts. */
static mf_ials_setup setup_of(mf_ctx *ctx, const char *fn, mf_sparse *R, const mf_ials_opts *o,
                              int cg_steps, const float *U0, const float *V0)
{
    mf_ials_setup s = {.ctx = ctx,
                       .fn = fn,
                       .R = R,
                       .k = o->rank,
                       .lambda = o->lambda,
                       .alpha = o->alpha,
                       .epsilon = o->epsilon,
                       .log_confidence = o->confidence == MF_IALS_CONFIDENCE_LOG,
                       .cg_steps = cg_steps,
                       .fp16 = o->fp16,
                       .U0 = U0,
                       .V0 = V0,
                       .lo = {0, 0},
                       .hi = {R->rows, R->cols}};
    return s;
}

static int cg_steps_for(const mf_ials_opts *o)
{
    return o->solver == MF_ALS_SOLVER_EXACT ? 0 : o->cg_steps;
}

/* One context's half step of `side`: the whole Gram here, then the breakdown read back. */
static mf_status half_step(mf_ials_engine *e, mf_ials_side side)
{
    void *parts;
    size_t part_bytes;
    int64_t chunks;
    mf_ials_side broke;
    e->gram_parts(e, side, &parts, &part_bytes, &chunks);
    MF_TRY(e->gram(e, side, 0, chunks));
    MF_TRY(e->solve(e, side));
    return e->check(e, &broke);
}

/* A group's half steps: the rows' shares (sh), and each rank's even share of the chunks of
 * the Gram that each side is solved against (chunk_bounds[side], ranks + 1 bounds). */
typedef struct group_step {
    const mf_shares *sh;
    int64_t *chunk_bounds[2];
} group_step;

static mf_status share_chunks(mf_ctx *ctx, mf_ials_engine *e, group_step *g)
{
    const int n = mf_ranks(ctx);
    for (int w = 0; w < 2; w++) {
        void *parts;
        size_t part_bytes;
        int64_t chunks;
        e->gram_parts(e, (mf_ials_side)w, &parts, &part_bytes, &chunks);
        g->chunk_bounds[w] = malloc(((size_t)n + 1) * sizeof *g->chunk_bounds[w]);
        if (!g->chunk_bounds[w])
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_ials_run: out of host memory");
        for (int r = 0; r <= n; r++) /* the chunks hold equal counts of rows: equal work */
            g->chunk_bounds[w][r] = chunks * r / n;
    }
    return MF_OK;
}

static mf_status first_failure(mf_status st, mf_status later)
{
    return st != MF_OK ? st : later;
}

/* A group's half step of `side` after a half step that ended in st: this rank's chunks of
 * the Gram, every rank's chunks to every rank, G from all of them in chunk order (one
 * context's G bit for bit), the rank's rows solved, and the solved rows to every rank.
 * Every rank makes the same collective calls whatever its status (a failed rank skips its
 * work and sends what its buffers hold), so that none waits alone; the iteration's
 * agreement then fails them all. No host round trip here: the breakdown word and the
 * agreement wait for the iteration's end. */
static mf_status group_half_step(mf_ctx *ctx, mf_ials_engine *e, const group_step *g,
                                 mf_ials_side side, mf_status st)
{
    mf_comm *c = ctx->comm;
    const int64_t *b = g->chunk_bounds[side];
    void *parts, *factors;
    size_t part_bytes, row_bytes;
    int64_t chunks;
    e->gram_parts(e, side, &parts, &part_bytes, &chunks);
    if (st == MF_OK)
        st = e->gram(e, side, b[c->rank], b[c->rank + 1]);
    st = first_failure(st, c->ops->allgatherv(c, ctx, parts, b, part_bytes, NULL));
    if (st == MF_OK)
        st = e->solve(e, side);
    e->shared(e, side, &factors, &row_bytes);
    return first_failure(st, mf_shares_gather(ctx, g->sh, side, NULL, factors, row_bytes, NULL, 0));
}

/* A group's two half steps, and the breakdowns they had. *phase: where the first failure
 * came (0 the users, 1 the items), for the agreement: a later failure on another rank may
 * follow from the garbage a failed rank sent. */
static mf_status group_iteration(mf_ctx *ctx, mf_ials_engine *e, const group_step *g, int *phase)
{
    mf_status st = group_half_step(ctx, e, g, MF_IALS_USERS, MF_OK);
    *phase = st != MF_OK ? 0 : 1;
    st = group_half_step(ctx, e, g, MF_IALS_ITEMS, st);
    if (st == MF_OK) {
        mf_ials_side broke = MF_IALS_USERS;
        st = e->check(e, &broke);
        *phase = (int)broke;
    }
    return st;
}

/* The loss (mfact.h's, per pair) of the current factors. In a group (collective: every rank
 * calls it at the same point, after an agreement) each rank forms its users' terms (it
 * holds only their interactions) and the terms are summed over the ranks: each user's
 * comes from the one rank that has it, the others add zeros, so every rank then adds one
 * context's terms in one context's order (loss_total): one context's loss, bit for bit,
 * on every rank. */
static mf_status loss_of(mf_ctx *ctx, mf_ials_engine *e, const mf_shares *sh, int32_t users,
                         double *out)
{
    static const char fn[] = "mf_ials_run";
    double *row = calloc((size_t)users + 1, sizeof *row), items = 0.0;
    mf_status st = row ? e->loss_terms(e, row + sh->lo[MF_IALS_USERS], &items)
                       : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (mf_ranks(ctx) > 1) {
        st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
        if (st == MF_OK)
            st = mf_ranks_sum_host(ctx, fn, row, (size_t)users, 1);
    }
    if (st == MF_OK)
        *out = e->loss_total(e, row, items);
    free(row);
    return st;
}

/* The iterations. In a group the loss is collective: every rank computes it after each
 * iteration when any rank has a progress callback (*measure, which the caller reads for the
 * final loss). */
static mf_status iterate(mf_run *run, mf_ials_engine *e, const mf_ials_opts *o, const group_step *g,
                         int32_t users, int64_t *measure, mf_ials_report *rep)
{
    mf_ctx *ctx = run->ctx;
    const int group = mf_ranks(ctx) > 1;
    *measure = o->progress != NULL;
    if (group)
        MF_TRY(ctx->comm->ops->max_i64(ctx->comm, ctx, measure, 1));
    mf_status st = MF_OK;
    double iter = 0.0;
    for (int it = 1; it <= o->iterations && st == MF_OK; it++) {
        const double t0 = mf_seconds();
        int phase = 0;
        if (group) {
            st = group_iteration(ctx, e, g, &phase);
            /* One rank's failure stops them all (the earliest in the work wins). */
            st = mf_ranks_agree_first(ctx, "mf_ials_run", st, phase);
        } else {
            st = half_step(e, MF_IALS_USERS);
            if (st == MF_OK)
                st = half_step(e, MF_IALS_ITEMS);
        }
        if (st == MF_OK) {
            iter += mf_seconds() - t0;
            rep->iterations = it;
        }
        if (st == MF_OK && *measure) {
            st = loss_of(ctx, e, g->sh, users, &rep->loss);
            if (st == MF_OK && o->progress) {
                mf_progress p = {it, mf_run_seconds(run), rep->loss, NAN};
                st = mf_run_cancelled(run, o->progress(o->progress_user, &p), "iteration", it);
            }
            /* In a group (whose ranks may have a progress callback or not): one rank's
             * failure or cancel stops them all, each keeping this iteration when it was a
             * cancel. */
            if (group)
                st = mf_ranks_agree(ctx, "mf_ials_run", st, NULL, NULL, 0);
        }
    }
    rep->iteration_seconds = iter;
    return st;
}

/* A group's shares of the rows and this rank's shards of the interactions (part[0]: its
 * users' rows, part[1]: its items' columns), so that a rank holds its share of the
 * interactions, not all of them. From split input (collective: every rank calls it with its
 * status so far) the shares come from the whole matrix's lines summed over the ranks, the
 * shards gathered from every rank's part: no rank ever holds the whole matrix, and the
 * shards are those a whole R gives. Outside a group: the whole sides, no shards. */
static mf_status share(mf_ctx *ctx, mf_sparse *R, int64_t row_cost, mf_status st, mf_shares *sh,
                       mf_sparse *part[2])
{
    static const char fn[] = "mf_ials_run";
    const int group = mf_ranks(ctx) > 1;
    if (!group || !R->is_part) {
        if (st == MF_OK)
            st = mf_shares_make(ctx, fn, R, row_cost, sh);
        for (int w = 0; w < 2 && st == MF_OK && group; w++)
            st = mf_sparse_block(ctx, R, w, sh->lo[w], sh->hi[w], fn, &part[w]);
        return st;
    }
    int64_t *whole[2] = {NULL, NULL}, nnz = 0;
    double mean = 0.0;
    st = mf_ranks_split_shares(ctx, fn, R, st, row_cost, whole, NULL, &mean, &nnz, sh);
    free(whole[0]);
    free(whole[1]);
    for (int w = 0; w < 2 && st == MF_OK; w++)
        st = mf_ranks_gather_lines(ctx, fn, R, w, sh->bounds[w], &part[w]);
    return st;
}

/* In a group: every rank's checks passed and they fit the same problem, or all fail. */
static mf_status agree_on_run(mf_ctx *ctx, mf_status st, const mf_sparse *R, const mf_ials_opts *o)
{
    static const char *const names[] = {"rank",    "iterations", "lambda",   "alpha", "confidence",
                                        "epsilon", "solver",     "cg_steps", "fp16",  "init"};
    const int64_t v[] = {o->rank,
                         o->iterations,
                         mf_ranks_bits(o->lambda),
                         mf_ranks_bits(o->alpha),
                         o->confidence,
                         mf_ranks_bits(o->epsilon),
                         o->solver,
                         o->cg_steps,
                         o->fp16,
                         o->init};
    return mf_ranks_agree_fit_parts(ctx, "mf_ials_run", st, R, v, names, 10);
}

mf_status mf_ials_run(mf_ctx *ctx, const mf_sparse *interactions, const mf_ials_opts *opts,
                      float *U, float *V, mf_memory where, mf_ials_report *report)
{
    static const char fn[] = "mf_ials_run";
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    mf_run run;
    mf_ials_report rep = {.loss = NAN};
    mf_status st =
        mf_run_begin_collective(&run, ctx,
                                &(mf_run_args){fn, MF_RUN_INPUT(interactions), MF_RUN_OUTPUTS(U, V),
                                               where, MF_RUN_OPTS(mf_ials_opts, &o, opts),
                                               MF_RUN_REPORT(mf_ials_report, report), NULL});
    mf_sparse *R = (mf_sparse *)interactions; /* caches only */
    if (st == MF_OK)
        st = check_opts(ctx, &o, fn, 1);
    if (st == MF_OK)
        st = check_values(ctx, R, &o, fn);
    st = agree_on_run(ctx, st, R, &o);
    if (st != MF_OK)
        return st;
    mf_run_start(&run);
    const int k = o.rank;
    const size_t nu = (size_t)R->rows * k, nv = (size_t)R->cols * k;
    float *U0 = malloc((nu + nv + 1) * sizeof *U0);
    float *V0 = U0 ? U0 + nu : NULL;
    if (!U0)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for the initial factors",
                     fn);
    else if (o.init == MF_IALS_INIT_GIVEN) {
        st = mf_fit_load_given(ctx, fn, "U", U, R->rows, k, where, U0);
        if (st == MF_OK)
            st = mf_fit_load_given(ctx, fn, "V", V, R->cols, k, where, V0);
    } else if (U0) {
        const int threads = mf_ctx_threads(ctx);
        mf_random_uniform_host(U0, (int64_t)nu, 0.0f, 0.01f, ctx->seed, IALS_STREAM_U, threads);
        mf_random_uniform_host(V0, (int64_t)nv, 0.0f, 0.01f, ctx->seed, IALS_STREAM_V, threads);
    }
    const int cg = cg_steps_for(&o);
    rep.solver = cg > 0 ? MF_ALS_SOLVER_CG : MF_ALS_SOLVER_EXACT;
    mf_ials_setup setup = setup_of(ctx, fn, R, &o, cg, U0, V0);
    mf_shares sh = {{NULL, NULL}, {0, 0}, {0, 0}};
    mf_sparse *part[2] = {NULL, NULL};
    st = share(ctx, R, mf_shares_solve_cost(k, cg), st, &sh, part);
    for (int w = 0; w < 2; w++)
        setup.lo[w] = sh.lo[w], setup.hi[w] = sh.hi[w], setup.part[w] = part[w];
    mf_ials_engine *e = NULL;
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&run, mf_ials_cpu_engine, mf_cuda_ials_engine, &setup, &e);
    free(U0);
    group_step g = {&sh, {NULL, NULL}};
    if (st == MF_OK && mf_ranks(ctx) > 1)
        st = share_chunks(ctx, e, &g);
    /* In a group, every rank has its engine before the first exchange, or none goes on. */
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    if (st != MF_OK && e) {
        e->destroy(e);
        e = NULL;
    }
    if (st == MF_OK) {
        int64_t measure = 0;
        st = iterate(&run, e, &o, &g, R->rows, &measure, &rep);
        /* In a group every rank comes here alike: the status and the loss so far agreed. */
        if (mf_run_has_result(st) && isnan(rep.loss) && measure)
            st = mf_run_then(st, loss_of(ctx, e, &sh, R->rows, &rep.loss));
        if (mf_run_has_result(st))
            st = mf_run_then(st, e->finish(e, U, V, where));
        e->destroy(e);
    }
    free(g.chunk_bounds[0]);
    free(g.chunk_bounds[1]);
    mf_sparse_destroy(part[0]);
    mf_sparse_destroy(part[1]);
    mf_shares_free(&sh);
    rep.seconds = mf_run_seconds(&run);
    return mf_run_finish(&run, st, report, &rep, &rep.peak_device_bytes);
}

mf_status mf_ials_fold_in(mf_ctx *ctx, const mf_sparse *interactions, const mf_ials_opts *opts,
                          const float *V, float *U, mf_memory where)
{
    static const char fn[] = "mf_ials_fold_in";
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    mf_run run;
    /* Each rank of a group may fold users in on its own: nothing here is collective. */
    MF_TRY(mf_run_begin_collective(
        &run, ctx,
        &(mf_run_args){fn, MF_RUN_INPUT(interactions), MF_RUN_OUTPUTS(V, U), where,
                       MF_RUN_OPTS(mf_ials_opts, &o, opts), NULL, NULL, 0, 0, NULL}));
    MF_TRY(check_opts(ctx, &o, fn, 0));
    o.fp16 = 0; /* not read: the fold-in solves exactly against V as given */
    mf_sparse *R = (mf_sparse *)interactions;
    MF_TRY(check_values(ctx, R, &o, fn));
    const int k = o.rank;
    float *V0 = malloc(((size_t)R->cols * k + 1) * sizeof *V0);
    if (!V0)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    mf_status st = mf_fit_load_given(ctx, fn, "V", V, R->cols, k, where, V0);
    mf_ials_setup setup = setup_of(ctx, fn, R, &o, 0 /* exact */, NULL, V0);
    mf_ials_engine *e = NULL;
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&run, mf_ials_cpu_engine, mf_cuda_ials_engine, &setup, &e);
    if (st == MF_ERR_UNSUPPORTED && ctx->backend == MF_BACKEND_CUDA)
        st = mf_ials_cpu_engine(&setup, &e); /* past the device's exact solver: the CPU's */
    free(V0);
    if (st != MF_OK)
        return st;
    st = half_step(e, MF_IALS_USERS);
    if (st == MF_OK)
        st = e->finish(e, U, NULL, where);
    e->destroy(e);
    return st;
}
