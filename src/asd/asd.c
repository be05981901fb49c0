/* mf_asd_run: argument checks, the start, the iterations and the stopping rules (Tanner &
 * Wei's: tolerance, stagnation, iteration cap, time), and the report. The arithmetic lives
 * in the engines (asd_cpu.c; the CUDA one).
 *
 * Over a group of contexts (core/ranks.h) Ω is partitioned by rows and by columns (each
 * balanced by entries): each rank's engine gets its rows as a matrix of its own and its
 * columns' entries (it solves whole rows of X and whole columns of Y); the random
 * start is every engine's own draw, as alone, scaled by the p2 summed here; the engines
 * sum over the ranks what spans the shares. The ranks stop together: a rank's reason to
 * stop (a cancel, a failure, the time limit) rides the next iteration's sums
 * (asd_internal.h). X's shares are gathered at the end, so every rank returns the same X
 * and Y.
 *
 * opts.precision (BF16, FP16) starts the run in the reduced phase: the engines' passes read
 * the other side's factor from a 16-bit copy (asd_internal.h). The first time a rule would
 * end the run on its own terms (the tolerance, or stagnation: over a window of 15 where
 * stagnation_window is 0) the run instead leaves that phase: the engine recomputes the
 * residual in float, the stagnation window starts afresh, and the float residual is judged
 * at once against the tolerance. The iteration cap, the time limit, a cancel or a failure
 * end the reduced phase as they end the run; the report's residual is then recomputed in
 * float (not after a failure, which reports nothing). With rank continuation the reduced
 * phase spans the ranks (their engines made in it) until it ends. In a group every rank
 * applies these rules to the same summed residual, so all leave the phase at the same
 * iteration. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asd/asd_internal.h"
#include "core/ctx.h"
#include "core/device_memory.h"
#include "core/opts.h"
#include "core/random.h"
#include "core/ranks.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void asd_opts_defaults(mf_asd_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 10;
    opts->variant = MF_ASD_SCALED;
    opts->tolerance = 1e-5;
    opts->stagnation_window = 15;
    opts->stagnation_rate = 1e-4;
    opts->max_iterations = 1000;
    opts->init = MF_ASD_INIT_RANDOM;
}

/* `rank_continuation`, not `precision`: the exported mf_asd_opts_init fills the struct of the
 * header before the sized initializers, for the binaries built then (docs/abi.md; later
 * fields are read by struct_size, and test_status checks the extent). */
MF_OPTS_INITIALIZERS(mf_asd_opts, mf_asd_opts_init, asd_opts_defaults, rank_continuation)

/* A rank's part of a split input may be empty: the group checks the whole's count. */
static mf_status check_opts(mf_ctx *ctx, const mf_sparse *M, const mf_asd_opts *o)
{
    static const char fn[] = "mf_asd_run";
    int most = M->rows < M->cols ? M->rows : M->cols;
    most = most < 512 ? most : 512;
    MF_REQUIRE(ctx, o->rank >= 1 && o->rank <= most, "%s: rank = %d is outside 1..%d", fn, o->rank,
               most);
    MF_REQUIRE(ctx, o->variant == MF_ASD_PLAIN || o->variant == MF_ASD_SCALED,
               "%s: variant = %d is not an mf_asd_variant value", fn, (int)o->variant);
    MF_REQUIRE(ctx, o->tolerance > 0.0 && isfinite(o->tolerance),
               "%s: tolerance = %g must be finite and > 0", fn, o->tolerance);
    MF_REQUIRE(ctx, o->stagnation_window >= 0, "%s: stagnation_window = %d is negative", fn,
               o->stagnation_window);
    MF_REQUIRE(ctx, o->stagnation_rate > 0.0 && o->stagnation_rate < 1.0,
               "%s: stagnation_rate = %g is outside (0, 1)", fn, o->stagnation_rate);
    MF_REQUIRE(ctx, o->max_iterations >= 1, "%s: max_iterations = %d must be at least 1", fn,
               o->max_iterations);
    MF_REQUIRE(ctx, o->rank_continuation == 0 || o->rank_continuation == 1,
               "%s: rank_continuation = %d must be 0 or 1", fn, o->rank_continuation);
    MF_REQUIRE(ctx, o->time_limit >= 0.0 && isfinite(o->time_limit),
               "%s: time_limit = %g must be finite and >= 0", fn, o->time_limit);
    MF_REQUIRE(ctx,
               o->init == MF_ASD_INIT_RANDOM || o->init == MF_ASD_INIT_GIVEN ||
                   o->init == MF_ASD_INIT_SPECTRAL,
               "%s: init = %d is not an mf_asd_init value", fn, (int)o->init);
    MF_REQUIRE(ctx,
               o->precision == MF_PRECISION_FP32 || o->precision == MF_PRECISION_BF16 ||
                   o->precision == MF_PRECISION_FP16,
               "%s: precision = %d is not MF_PRECISION_FP32, MF_PRECISION_BF16 or "
               "MF_PRECISION_FP16 (ASD has no TF32 phase)",
               fn, (int)o->precision);
    if (M->is_part && mf_ranks(ctx) > 1) {
        if (o->init == MF_ASD_INIT_SPECTRAL)
            return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                           "%s: the spectral start needs the whole matrix on every rank; input "
                           "split over the group (mf_sparse_set_part) takes the random or a "
                           "given start",
                           fn);
        return MF_OK;
    }
    if (M->nnz == 0)
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: the matrix has no observed entries", fn);
    return MF_OK;
}

/* A caller's factor as the start: copied to the host and checked for non-finite values. */
static mf_status load_given(mf_ctx *ctx, const float *F, int64_t n, mf_memory where, float *F0,
                            const char *name)
{
    if (where == MF_MEMORY_DEVICE)
        MF_TRY(mf_cuda_copy(ctx, F0, F, (size_t)n * sizeof *F0));
    else
        memcpy(F0, F, (size_t)n * sizeof *F0);
    for (int64_t p = 0; p < n; p++)
        if (!isfinite(F0[p]))
            return mf_fail(ctx, MF_ERR_INVALID_DATA,
                           "mf_asd_run: the given %s[%lld] = %g is not finite", name, (long long)p,
                           (double)F0[p]);
    return MF_OK;
}

/* |P(M)|^2 in double, the same bits for any count of threads: blocks of entries, each
 * summed in order by one thread, then added in order (a reduction adds the threads'
 * partials in the order they finish). */
#define ASD_NORM_BLOCK ((int64_t)1 << 16)
static double observed_norm2(const mf_sparse *M, int threads)
{
    if (!M->val)
        return (double)M->nnz;
    const int64_t blocks = (M->nnz + ASD_NORM_BLOCK - 1) / ASD_NORM_BLOCK;
    double *part = malloc(((size_t)blocks + 1) * sizeof *part);
    if (!part) { /* one thread in order: the same bits, slower */
        double s = 0.0;
        for (int64_t p = 0; p < M->nnz; p++)
            s += (double)M->val[p] * M->val[p];
        return s;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < blocks; b++) {
        double s = 0.0;
        const int64_t end = (b + 1) * ASD_NORM_BLOCK < M->nnz ? (b + 1) * ASD_NORM_BLOCK : M->nnz;
        for (int64_t p = b * ASD_NORM_BLOCK; p < end; p++)
            s += (double)M->val[p] * M->val[p];
        part[b] = s;
    }
    double s = 0.0;
    for (int64_t b = 0; b < blocks; b++)
        s += part[b];
    free(part);
    return s;
}

typedef struct run_state {
    mf_run run;
    const mf_asd_opts *o;
    mf_sparse *M; /* what the engine factorizes: the caller's matrix, or the rank's rows */
    mf_asd_engine *e;
    mf_asd_report rep;
    /* In a group: the rank's rows [lo, hi) of the caller's matrix and of the test set, and
     * the rows' shares (bounds[0]). */
    mf_comm *comm;
    mf_shares shares;
    int32_t lo, hi;
    /* The rank's columns [clo, chi) (shares.bounds[1]) and their entries (a matrix of the
     * caller's shape); NULL alone. */
    int32_t clo, chi;
    mf_sparse *cols;
    mf_sparse *test;      /* the test rows of the share; NULL: the caller's (or none) */
    int any_progress;     /* some rank has a progress callback (then all measure the test set) */
    int reduced;          /* in the reduced phase (opts.precision, until it ends) */
    double reduced_level; /* the relative residual that ends the reduced phase */
} run_state;

/* Rows [lo, hi) of A as a matrix of their own (rows renumbered from 0). */
static mf_status rows_of(mf_ctx *ctx, const mf_sparse *A, int32_t lo, int32_t hi, mf_sparse **out)
{
    const int32_t rows = hi - lo;
    const int64_t base = A->row_ptr[lo], nnz = A->row_ptr[hi] - base;
    int64_t *ptr = malloc(((size_t)rows + 1) * sizeof *ptr);
    if (!ptr)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    for (int32_t i = 0; i <= rows; i++)
        ptr[i] = A->row_ptr[lo + i] - base;
    mf_status st = mf_sparse_build_csr(ctx, out, rows, A->cols, nnz, ptr, A->col + base,
                                       A->val ? A->val + base : NULL, 0, "mf_asd_run");
    free(ptr);
    return st;
}

/* A double option as the integer of its bits, for the agreement. */
static int64_t bits_of(double x)
{
    int64_t v;
    memcpy(&v, &x, sizeof v);
    return v;
}

/* RMSE of the factors over the test set: in a group, over every rank's test rows. */
static mf_status test_rmse(run_state *s, double *rmse)
{
    const mf_sparse *T = s->test ? s->test : s->o->test;
    if (!s->comm)
        return s->e->rmse(s->e, T, rmse);
    double v[2] = {0.0, (double)T->nnz};
    mf_status st = MF_OK;
    if (T->nnz > 0) {
        double part = 0.0;
        st = s->e->rmse(s->e, T, &part);
        v[0] = part * part * (double)T->nnz;
    }
    /* every rank measured its rows (or every one fails) before the sum */
    MF_TRY(mf_ranks_agree(s->run.ctx, "mf_asd_run", st, NULL, NULL, 0));
    MF_TRY(s->comm->ops->sum_f64(s->comm, s->run.ctx, v, 2));
    *rmse = v[1] > 0.0 ? sqrt(v[0] / v[1]) : NAN;
    return MF_OK;
}

/* The engine's rank-r factors to the caller's X and Y; in a group, X's rows from every rank
 * (collective). */
static mf_status hand_back(run_state *s, int r, float *X, float *Y, mf_memory where)
{
    if (!s->comm)
        return s->e->finish(s->e, X, Y, where);
    mf_ctx *ctx = s->run.ctx;
    mf_comm *c = s->comm;
    const size_t row = (size_t)r * sizeof(float);
    const int32_t m = (int32_t)s->shares.bounds[0][c->size];
    /* X's rows in host memory: the stand-in and MPI gather there, NCCL through a bounded
     * device buffer (mf_ranks_gather_host); the caller's X where it is host memory, else a
     * buffer of ours (a copy of 1.6 GB for 20M rows at r = 20) */
    const int own_buffer = where != MF_MEMORY_HOST;
    float *Xh = own_buffer ? malloc((size_t)m * row + 1) : X;
    mf_status st =
        Xh ? MF_OK : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    if (st == MF_OK)
        st = s->e->finish(s->e, Xh + (size_t)s->lo * r, Y, where);
    if (c->device_buffers) {
        st = mf_ranks_gather_host(ctx, "mf_asd_run", st, s->shares.bounds[0], Xh, row, NULL, 0);
    } else {
        /* every rank holds its rows, or every one fails, before the gather */
        st = mf_ranks_agree(ctx, "mf_asd_run", st, NULL, NULL, 0);
        if (st == MF_OK)
            st = c->ops->allgatherv(c, ctx, Xh, s->shares.bounds[0], row, NULL);
    }
    if (own_buffer) {
        if (st == MF_OK)
            st = mf_cuda_copy(ctx, X, Xh, (size_t)m * row);
        free(Xh);
    }
    return st;
}

/* In a group, once every rank knows which reasons to stop some rank had (how[MF_ASD_WHY_*]
 * nonzero; st: this rank's status): every rank stops with a failure (a cancel and a failure
 * together: the failure, so that no rank hands back a result while another does not) or,
 * when ranks only cancelled, every rank cancelled; *time_up says whether any reached the
 * time limit. Collective when any rank failed or cancelled. */
static mf_status resolve(run_state *s, mf_status st, const int64_t *how, int *time_up)
{
    if (how[MF_ASD_WHY_FAILURE] || (st != MF_OK && st != MF_ERR_CANCELLED)) {
        /* a failure somewhere: a cancelling rank joins it as fine */
        const mf_status agreed = mf_ranks_agree(s->run.ctx, "mf_asd_run",
                                                st == MF_ERR_CANCELLED ? MF_OK : st, NULL, NULL, 0);
        return agreed != MF_OK ? agreed
                               : mf_fail(s->run.ctx, MF_ERR_INTERNAL,
                                         "mf_asd_run: a rank's failure went unseen");
    }
    if (how[MF_ASD_WHY_CANCEL]) /* only cancels: every rank cancelled, naming the one */
        return mf_ranks_agree(s->run.ctx, "mf_asd_run", st, NULL, NULL, 0);
    *time_up = how[MF_ASD_WHY_TIME] != 0;
    return MF_OK;
}

/* This rank's reasons to stop: its status and whether it reached the time limit. */
static void reasons(mf_status st, int time_up, int64_t *how)
{
    how[MF_ASD_WHY_CANCEL] = st == MF_ERR_CANCELLED;
    how[MF_ASD_WHY_FAILURE] = st != MF_OK && st != MF_ERR_CANCELLED;
    how[MF_ASD_WHY_TIME] = time_up;
}

/* In a group, where the ranks stop together by a rule they all apply alike (tolerance,
 * stagnation, the iteration count) while a rank may still have had a reason to stop that
 * the next iteration would have carried (asd_internal.h): one maximum over the ranks, once
 * per call of iterate(), then resolve(). */
static mf_status settle(run_state *s, mf_status st, int mine_time_up, int *time_up)
{
    int64_t how[MF_ASD_WHY_COUNT];
    reasons(st, mine_time_up, how);
    MF_TRY(s->comm->ops->max_i64(s->comm, s->run.ctx, how, MF_ASD_WHY_COUNT));
    return resolve(s, st, how, time_up);
}

/* The stopping rules of one call of iterate(): the caller's, or an intermediate rank's. */
typedef struct rules {
    double tolerance, rate;
    int window;
    int final; /* the caller's rules (the last rank): their stop ends the reduced phase; an
                * intermediate rank's stop ends the rank and the phase goes on with the next */
} rules;

/* The stagnation window of the reduced phase where the caller's is 0 (no test). */
#define ASD_REDUCED_WINDOW 15

/* The reduced phase also ends at a relative residual of 4 units of the format's rounding
 * (2^-6 for bf16, 2^-9 for fp16): its rounding holds the residual near 0.4 of a unit
 * (measured on planted problems), and progress slows well before; ending at the plateau
 * through the stagnation window cost 15 iterations there, more than the phase saved. */
static double reduced_level(mf_precision p)
{
    return p == MF_PRECISION_BF16 ? ldexp(1.0, -6) : p == MF_PRECISION_FP16 ? ldexp(1.0, -9) : 0.0;
}

/* The reduced phase's end (the file's top): the engine's residual in float (in a group,
 * once the ranks agree that every engine made it, summed over them: collective) becomes
 * *res and the report's. */
static mf_status leave_reduced(run_state *s, double norm, double *res)
{
    double res2 = 0.0;
    mf_status st = s->e->to_float(s->e, &res2);
    s->reduced = 0;
    if (s->comm) {
        st = mf_ranks_agree(s->run.ctx, "mf_asd_run", st, NULL, NULL, 0);
        if (st == MF_OK)
            st = s->comm->ops->sum_f64(s->comm, s->run.ctx, &res2, 1);
    }
    if (st == MF_OK) {
        *res = sqrt(res2) / norm;
        s->rep.relative_residual = *res;
    }
    return st;
}

/* Iterations on s->e until a rule stops them; the count continues s->rep.iterations. */
static mf_status iterate(run_state *s, double norm, const rules *ru)
{
    const mf_asd_opts *o = s->o;
    /* the stagnation window in force: the reduced phase's, then the caller's (0: none) */
    /* A window longer than the run can never close (a phase has at most max_iterations):
     * no test then, and no history sized by a window of up to INT_MAX. */
    const int caller_w = ru->window > o->max_iterations ? 0 : ru->window;
    int w = s->reduced && ru->window == 0 ? ASD_REDUCED_WINDOW : caller_w;
    if (w > o->max_iterations)
        w = 0;
    const int most = w > caller_w ? w : caller_w;
    double *hist = most > 0 ? malloc(((size_t)most + 1) * sizeof *hist) : NULL;
    mf_status st0 = most > 0 && !hist ? mf_fail(s->run.ctx, MF_ERR_OUT_OF_MEMORY,
                                                "mf_asd_run: out of host memory")
                                      : MF_OK;
    st0 = s->comm ? mf_ranks_agree(s->run.ctx, "mf_asd_run", st0, NULL, NULL, 0) : st0;
    if (st0 != MF_OK) {
        free(hist);
        return st0;
    }
    double res = sqrt(s->e->res2) / norm;
    s->rep.relative_residual = res;
    s->rep.stopped = MF_ASD_STOP_MAX_ITERATIONS;
    mf_status st = MF_OK;
    if (s->reduced && (res <= s->reduced_level || (ru->final && res <= ru->tolerance))) {
        /* a start within the tolerance, or already at the level: judged in float */
        st = leave_reduced(s, norm, &res);
        w = caller_w;
    }
    if (w > 0)
        hist[0] = res;
    if (st == MF_OK && res <= ru->tolerance)
        s->rep.stopped = MF_ASD_STOP_TOLERANCE;
    const int first = s->rep.iterations + 1;
    int from = first - 1; /* the iteration the stagnation window counts from */
    /* In a group a rank's reason to stop (its status, the time limit) travels with the
     * next iteration's sums, which then moves nothing (asd_internal.h): `pending` is that
     * status, why_next the reasons; no round trip of its own per iteration. */
    mf_status pending = MF_OK;
    double why_next[MF_ASD_WHY_COUNT] = {0.0};
    int time_up = 0, settled = 0;
    for (int it = first; st == MF_OK && res > ru->tolerance && it <= o->max_iterations; it++) {
        double res2 = 0.0, why[MF_ASD_WHY_COUNT] = {0.0};
        int singular = 0;
        st = s->e->iterate(s->e, why_next, &res2, &singular, why);
        if (s->comm && (st != MF_OK || why[MF_ASD_WHY_CANCEL] > 0.0 ||
                        why[MF_ASD_WHY_FAILURE] > 0.0 || why[MF_ASD_WHY_TIME] > 0.0)) {
            /* some rank stopped after the last iteration: this one moved nothing, and the
             * report stays the last iteration's */
            int64_t how[MF_ASD_WHY_COUNT];
            for (int k = 0; k < MF_ASD_WHY_COUNT; k++)
                how[k] = why[k] > 0.0;
            st = resolve(s, st != MF_OK ? st : pending, how, &time_up);
            settled = 1;
            break;
        }
        const int measure = (o->progress || s->any_progress) && o->test;
        if (s->comm && measure) /* every rank fine before the test set's collective measure */
            st = mf_ranks_agree(s->run.ctx, "mf_asd_run", st, NULL, NULL, 0);
        if (st == MF_OK) {
            res = sqrt(res2) / norm;
            s->rep.iterations = it;
            s->rep.reduced_iterations += s->reduced;
            s->rep.relative_residual = res;
            s->rep.singular_steps += singular;
        }
        if (st == MF_OK && (o->progress || s->any_progress)) {
            double test = NAN;
            if (measure) /* collective in a group: every rank measures when any reports */
                st = test_rmse(s, &test);
            mf_progress p = {it, mf_run_seconds(&s->run), res, test};
            if (st == MF_OK && o->progress)
                st = mf_run_cancelled(&s->run, o->progress(o->progress_user, &p), "iteration", it);
        }
        time_up = o->time_limit > 0.0 && mf_run_seconds(&s->run) >= o->time_limit;
        if (s->comm && (st != MF_OK || time_up)) {
            /* told to the others by the next iteration; until then the rules below, which
             * every rank applies alike, go on */
            int64_t how[MF_ASD_WHY_COUNT];
            reasons(st, time_up, how);
            for (int k = 0; k < MF_ASD_WHY_COUNT; k++)
                why_next[k] = (double)how[k];
            pending = st;
            st = MF_OK;
            time_up = 0;
        }
        if (st != MF_OK)
            break;
        int stop = res <= ru->tolerance ? MF_ASD_STOP_TOLERANCE : -1;
        /* Stagnation (Tanner & Wei): the mean rate of decrease over the last w iterations,
         * (res_k / res_{k-w})^(1/w), has come within stagnation_rate of 1. */
        if (stop < 0 && w > 0) {
            const int k = it - from;              /* iterations in the window's phase */
            const int64_t slots = (int64_t)w + 1; /* w <= max_iterations <= INT_MAX */
            hist[k % slots] = res;
            if (k >= w && pow(res / hist[(k - w) % slots], 1.0 / w) > 1.0 - ru->rate)
                stop = MF_ASD_STOP_STAGNATION;
        }
        /* In the reduced phase its level, or either of the caller's rules, ends the phase
         * instead: float from here, judged at once against the tolerance, with a fresh
         * window (an intermediate rank's rule ends that rank, the phase going on). */
        if (s->reduced && (res <= s->reduced_level || (stop >= 0 && ru->final))) {
            st = leave_reduced(s, norm, &res);
            if (st != MF_OK)
                break;
            from = it;
            w = caller_w;
            if (w > 0)
                hist[0] = res;
            stop = res <= ru->tolerance ? MF_ASD_STOP_TOLERANCE : -1;
        }
        if (stop >= 0) {
            s->rep.stopped = (mf_asd_stop)stop;
            break;
        }
        if (time_up) {
            s->rep.stopped = MF_ASD_STOP_TIME_LIMIT;
            break;
        }
    }
    if (s->comm && !settled) /* a reason to stop that no iteration carried (or the ranks'
                              * agreed failure to leave the reduced phase) */
        st = settle(s, st != MF_OK ? st : pending, why_next[MF_ASD_WHY_TIME] > 0.0, &time_up);
    if (s->comm && st == MF_OK && time_up && s->rep.stopped != MF_ASD_STOP_TOLERANCE &&
        s->rep.stopped != MF_ASD_STOP_STAGNATION)
        s->rep.stopped = MF_ASD_STOP_TIME_LIMIT;
    if (st == MF_ERR_CANCELLED)
        s->rep.stopped = MF_ASD_STOP_CANCELLED;
    /* A run that a limit or a cancel ended in the reduced phase reports its residual in
     * float (every rank of a group is here with the same status and stop); an intermediate
     * rank that its rules ended stays in the phase. */
    const int run_ends = ru->final || st != MF_OK || s->rep.stopped == MF_ASD_STOP_TIME_LIMIT ||
                         s->rep.stopped == MF_ASD_STOP_MAX_ITERATIONS;
    if (s->reduced && mf_run_has_result(st) && run_ends) {
        const mf_status fin = leave_reduced(s, norm, &res);
        st = fin != MF_OK ? fin : st;
    }
    free(hist);
    return st;
}

/* One engine at rank k from host starts X0, Y0 (all lines x k; NULL: the random start). */
static mf_status open_engine(run_state *s, int k, const float *X0, const float *Y0, double norm2)
{
    mf_asd_setup setup = {s->run.ctx,
                          s->M,
                          k,
                          s->o->variant == MF_ASD_SCALED,
                          X0,
                          Y0,
                          norm2,
                          s->comm ? (int32_t)s->shares.bounds[0][s->comm->size] : s->M->rows,
                          s->lo,
                          s->comm ? s->hi : s->M->rows,
                          s->clo,
                          s->comm ? s->chi : s->M->cols,
                          s->comm ? s->shares.bounds[0] : NULL,
                          s->comm ? s->shares.bounds[1] : NULL,
                          s->cols,
                          s->reduced ? (int)s->o->precision : (int)MF_PRECISION_FP32};
    return MF_RUN_ENGINE(&s->run, mf_asd_cpu_engine, mf_cuda_asd_engine, &setup, &s->e);
}

/* The end of a run: the test RMSE, then the factors to the caller; the engine is freed. */
static mf_status close_engine(run_state *s, mf_status st, float *X, float *Y, mf_memory where)
{
    if (mf_run_has_result(st) && s->o->test)
        st = mf_run_then(st, test_rmse(s, &s->rep.test_rmse));
    if (mf_run_has_result(st) && X)
        st = mf_run_then(st, hand_back(s, s->o->rank, X, Y, where));
    s->e->destroy(s->e);
    s->e = NULL;
    return st;
}

/* The engine at rank k from host starts X0 and Y0 (all rows x k), or with `draw` the random
 * start, the engine's own (X0, Y0 unused). st: this rank's status so far. In a group every
 * rank takes each collective step below: they agree first that each holds its start, then
 * that each made its engine, [scale the random start,] and then sum the engines' shares of
 * |R|^2. On failure no engine is left. */
static mf_status start_engine(run_state *s, int k, float *X0, float *Y0, int draw, mf_status st,
                              double norm2)
{
    mf_ctx *ctx = s->run.ctx;
    if (s->comm)
        st = mf_ranks_agree(ctx, "mf_asd_run", st, NULL, NULL, 0);
    if (st == MF_OK)
        st = open_engine(s, k, draw ? NULL : X0, draw ? NULL : Y0, norm2);
    if (s->comm)
        st = mf_ranks_agree(ctx, "mf_asd_run", st, NULL, NULL, 0);
    /* A group's random start, drawn by every engine as alone, is scaled by |P(X Y^T)|^2
     * summed over the ranks' rows. */
    if (st == MF_OK && s->comm && s->e->begin) {
        double p2 = s->e->p2;
        st = s->comm->ops->sum_f64(s->comm, ctx, &p2, 1);
        if (st == MF_OK)
            st = s->e->begin(s->e, p2);
        st = mf_ranks_agree(ctx, "mf_asd_run", st, NULL, NULL, 0);
    }
    if (st == MF_OK && s->comm)
        st = s->comm->ops->sum_f64(s->comm, ctx, &s->e->res2, 1);
    if (st != MF_OK && s->e) {
        s->e->destroy(s->e);
        s->e = NULL;
    }
    return st;
}

/* Host factors of rank k (F, lines x k) into rank k + 1 (out, room for lines x (k + 2)):
 * the old columns, then a new one uniform in [-d, d), d a thousandth of the old entries'
 * RMS, so that it starts small. */
static void add_column(mf_ctx *ctx, const float *F, int64_t lines, int k, float *out,
                       uint64_t stream)
{
    double ms = 0.0;
    for (int64_t p = 0; p < lines * k; p++)
        ms += (double)F[p] * F[p];
    const float d = (float)(1e-3 * sqrt(ms / (double)(lines * k > 0 ? lines * k : 1)));
    /* The draw goes past the rows of rank k + 1 (out holds lines x (k + 2)). */
    float *draw = out + lines * (k + 1);
    mf_random_uniform_host(draw, lines, -d, d, ctx->seed, stream, mf_ctx_threads(ctx));
    for (int64_t i = 0; i < lines; i++) {
        memcpy(out + i * (k + 1), F + i * k, (size_t)k * sizeof *out);
        out[i * (k + 1) + k] = draw[i];
    }
}

/* Rank-k factors F (lines x k) to the caller's dst (lines x r, `where` memory) with zeros
 * past column k, through the host scratch `pad` (lines x r). */
static mf_status hand_over(mf_ctx *ctx, const float *F, int64_t lines, int k, int r, float *pad,
                           float *dst, mf_memory where)
{
    const size_t bytes = (size_t)lines * r * sizeof *pad;
    memset(pad, 0, bytes);
    for (int64_t i = 0; i < lines; i++)
        memcpy(pad + i * r, F + i * k, (size_t)k * sizeof *pad);
    if (where == MF_MEMORY_DEVICE)
        return mf_cuda_copy(ctx, dst, pad, bytes);
    memcpy(dst, pad, bytes);
    return MF_OK;
}

/* Rank continuation: ranks 1 .. r-1 until they stagnate (or meet the tolerance), each
 * started from the last; then rank r under the caller's rules. */
static mf_status run_continuation(run_state *s, const mf_sparse *M, float *X, float *Y,
                                  mf_memory where, double norm2)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_asd_opts *o = s->o;
    const int64_t m = M->rows, n = M->cols; /* the caller's matrix: all the rows */
    const int r = o->rank;
    /* Room for rank k + 1 plus the new column's draw, at every k. */
    float *A = malloc(((size_t)m * (r + 1) + 1) * sizeof *A);
    float *B = malloc(((size_t)n * (r + 1) + 1) * sizeof *B);
    float *Ak = malloc(((size_t)m * r + 1) * sizeof *Ak);
    float *Bk = malloc(((size_t)n * r + 1) * sizeof *Bk);
    mf_status st = MF_OK;
    if (!A || !B || !Ak || !Bk)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory for the ranks");
    if (s->comm) /* every rank has its buffers, or none goes on */
        st = mf_ranks_agree(ctx, "mf_asd_run", st, NULL, NULL, 0);
    const rules inner = {o->tolerance, o->stagnation_rate,
                         o->stagnation_window > 0 ? o->stagnation_window : 15, 0};
    const rules outer = {o->tolerance, o->stagnation_rate, o->stagnation_window, 1};
    for (int k = 1; st == MF_OK && k <= r; k++) {
        if (k > 1) {
            add_column(ctx, Ak, m, k - 1, A, MF_ASD_X_STREAM + 2u * (uint64_t)k);
            add_column(ctx, Bk, n, k - 1, B, MF_ASD_Y_STREAM + 2u * (uint64_t)k);
        }
        st = start_engine(s, k, A, B, k == 1, st, norm2);
        if (st != MF_OK)
            break;
        st = iterate(s, sqrt(norm2), k < r ? &inner : &outer);
        const int ended = st != MF_OK || s->rep.stopped == MF_ASD_STOP_TIME_LIMIT ||
                          s->rep.stopped == MF_ASD_STOP_MAX_ITERATIONS;
        if (k == r) {
            st = close_engine(s, st, X, Y, where);
            break;
        }
        if (mf_run_has_result(st))
            st = mf_run_then(st, hand_back(s, k, Ak, Bk, MF_MEMORY_HOST));
        if (!ended) {
            s->e->destroy(s->e);
            s->e = NULL;
            continue;
        }
        /* The result so far: the test RMSE at rank k, and rank-r factors, zero past k. */
        st = close_engine(s, st, NULL, NULL, where);
        if (mf_run_has_result(st))
            st = mf_run_then(st, hand_over(ctx, Ak, m, k, r, A, X, where));
        if (mf_run_has_result(st))
            st = mf_run_then(st, hand_over(ctx, Bk, n, k, r, B, Y, where));
        break;
    }
    free(A), free(B), free(Ak), free(Bk);
    return st;
}

static mf_status run(run_state *s, const mf_sparse *M, float *X, float *Y, mf_memory where)
{
    mf_ctx *ctx = s->run.ctx;
    const mf_asd_opts *o = s->o;
    const int r = o->rank;
    s->reduced = o->precision != MF_PRECISION_FP32;
    s->reduced_level = reduced_level(o->precision);
    double norm2 = observed_norm2(s->M, mf_ctx_threads(ctx));
    if (s->comm)
        MF_TRY(s->comm->ops->sum_f64(s->comm, ctx, &norm2, 1));
    if (!(norm2 > 0.0))
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "mf_asd_run: every observed value is 0");
    if (o->rank_continuation)
        return run_continuation(s, M, X, Y, where, norm2);
    /* The random start is the engine's own (drawn where the factors live); the others are
     * made on the host. */
    const int host_start = o->init != MF_ASD_INIT_RANDOM;
    float *X0 = host_start ? malloc(((size_t)M->rows * r + 1) * sizeof *X0) : NULL;
    float *Y0 = host_start ? malloc(((size_t)M->cols * r + 1) * sizeof *Y0) : NULL;
    mf_status st = MF_OK;
    if (host_start && (!X0 || !Y0))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory for the start");
    if (st == MF_OK && o->init == MF_ASD_INIT_GIVEN) {
        st = load_given(ctx, X, (int64_t)M->rows * r, where, X0, "X");
        if (st == MF_OK)
            st = load_given(ctx, Y, (int64_t)M->cols * r, where, Y0, "Y");
    } else if (st == MF_OK && o->init == MF_ASD_INIT_SPECTRAL)
        st = mf_asd_spectral_start(ctx, M, r, 4, X0, Y0);
    st = start_engine(s, r, X0, Y0, o->init == MF_ASD_INIT_RANDOM, st, norm2);
    free(X0);
    free(Y0);
    if (st != MF_OK)
        return st;
    const rules ru = {o->tolerance, o->stagnation_rate, o->stagnation_window, 1};
    return close_engine(s, iterate(s, sqrt(norm2), &ru), X, Y, where);
}

/* In a group, the columns' shares, balanced like the rows' (entries, plus one a line), and
 * this rank's columns' entries: the engines solve whole columns of Y, so that each
 * column's gradient and step are summed as alone, and hold all of X and Y. */
static mf_status column_shares(run_state *s, mf_ctx *ctx, const mf_sparse *M)
{
    const int n = s->comm->size;
    int64_t *ptr = calloc((size_t)M->cols + 1, sizeof *ptr);
    s->shares.bounds[1] = malloc(((size_t)n + 1) * sizeof *s->shares.bounds[1]);
    if (!ptr || !s->shares.bounds[1]) {
        free(ptr);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    }
    for (int64_t p = 0; p < M->nnz; p++)
        ptr[M->col[p] + 1]++;
    for (int32_t j = 0; j < M->cols; j++)
        ptr[j + 1] += ptr[j];
    mf_partition_rows(ptr, M->cols, n, 1, s->shares.bounds[1]);
    free(ptr);
    s->clo = (int32_t)s->shares.bounds[1][s->comm->rank];
    s->chi = (int32_t)s->shares.bounds[1][s->comm->rank + 1];
    return mf_sparse_block(ctx, M, 1, s->clo, s->chi, "mf_asd_run", &s->cols);
}

/* Input split over the group (every rank's M its part, mf_sparse_set_part): the shares cut
 * from the whole matrix's lines summed over the ranks, as column_shares and join_group cut
 * them from a whole M, and this rank's rows (renumbered from 0, as rows_of) and columns
 * gathered from every rank's part, in the whole matrix's order: so the engine gets what it
 * gets from a whole M, and no rank holds the whole. A test set given in parts likewise. */
static mf_status split_shares(run_state *s, mf_ctx *ctx, const mf_sparse *M, mf_status st)
{
    static const char fn[] = "mf_asd_run";
    const int n = s->comm->size, me = s->comm->rank;
    int64_t *whole[2] = {NULL, NULL}, nnz = 0;
    double mean = 0.0;
    st = mf_ranks_check_part(ctx, fn, M, st);
    MF_TRY(mf_ranks_whole_lines(ctx, fn, M, st, whole, NULL, &mean, &nnz));
    for (int w = 0; w < 2; w++) {
        s->shares.bounds[w] = malloc(((size_t)n + 1) * sizeof *s->shares.bounds[w]);
        if (!s->shares.bounds[w] && st == MF_OK)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    if (st == MF_OK && nnz == 0) /* the same on every rank */
        st = mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: the matrix has no observed entries", fn);
    if (st == MF_OK) {
        mf_partition_rows(whole[0], M->rows, n, 1, s->shares.bounds[0]);
        mf_partition_rows(whole[1], M->cols, n, 1, s->shares.bounds[1]);
        s->lo = (int32_t)s->shares.bounds[0][me], s->hi = (int32_t)s->shares.bounds[0][me + 1];
        s->clo = (int32_t)s->shares.bounds[1][me], s->chi = (int32_t)s->shares.bounds[1][me + 1];
    }
    free(whole[0]);
    free(whole[1]);
    st = mf_ranks_agree(ctx, fn, st, NULL, NULL, 0);
    mf_sparse *rows = NULL, *test_rows = NULL;
    if (st == MF_OK)
        st = mf_ranks_gather_lines(ctx, fn, M, 0, s->shares.bounds[0], &rows);
    if (st == MF_OK)
        st = mf_ranks_gather_lines(ctx, fn, M, 1, s->shares.bounds[1], &s->cols);
    const mf_sparse *test = s->o->test;
    if (st == MF_OK && test && test->is_part)
        st = mf_ranks_gather_lines(ctx, fn, test, 0, s->shares.bounds[0], &test_rows);
    if (st == MF_OK)
        st = rows_of(ctx, rows, s->lo, s->hi, &s->M);
    if (st == MF_OK && test)
        st = rows_of(ctx, test_rows ? test_rows : test, s->lo, s->hi, &s->test);
    mf_sparse_destroy(rows);
    mf_sparse_destroy(test_rows);
    return st;
}

/* In a group: every rank's checks passed and they solve the same problem (shapes, options,
 * seed), or every rank fails; then each rank's rows of Ω (and of the test set). */
static mf_status join_group(run_state *s, mf_ctx *ctx, mf_status st, const mf_sparse *M)
{
    const mf_asd_opts *o = s->o;
    static const char *const names[] = {"rank",
                                        "variant",
                                        "tolerance",
                                        "stagnation_window",
                                        "stagnation_rate",
                                        "max_iterations",
                                        "time_limit",
                                        "init",
                                        "test",
                                        "rank_continuation",
                                        "precision"};
    const int64_t v[] = {o->rank,
                         o->variant,
                         bits_of(o->tolerance),
                         o->stagnation_window,
                         bits_of(o->stagnation_rate),
                         o->max_iterations,
                         bits_of(o->time_limit),
                         o->init,
                         o->test != NULL,
                         o->rank_continuation,
                         o->precision};
    MF_TRY(mf_ranks_agree_fit_parts(ctx, "mf_asd_run", st, M, v, names, 11));
    s->comm = ctx->comm;
    int64_t any = o->progress != NULL;
    MF_TRY(s->comm->ops->max_i64(s->comm, ctx, &any, 1));
    s->any_progress = any != 0;
    if (M->is_part)
        return mf_ranks_agree(ctx, "mf_asd_run", split_shares(s, ctx, M, MF_OK), NULL, NULL, 0);
    /* The rows' shares (ASD needs no columns' shares, so no host transpose): balanced by
     * entries, plus one for a row's own work. */
    const int n = s->comm->size;
    s->shares.bounds[0] = malloc(((size_t)n + 1) * sizeof *s->shares.bounds[0]);
    if (!s->shares.bounds[0])
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_asd_run: out of host memory");
    if (st == MF_OK) {
        mf_partition_rows(M->row_ptr, M->rows, n, 1, s->shares.bounds[0]);
        s->lo = (int32_t)s->shares.bounds[0][s->comm->rank];
        s->hi = (int32_t)s->shares.bounds[0][s->comm->rank + 1];
        st = rows_of(ctx, M, s->lo, s->hi, &s->M);
    }
    if (st == MF_OK)
        st = column_shares(s, ctx, M);
    if (st == MF_OK && o->test) /* of M's shape (mf_run_begin_collective) */
        st = rows_of(ctx, o->test, s->lo, s->hi, &s->test);
    return mf_ranks_agree(ctx, "mf_asd_run", st, NULL, NULL, 0);
}

mf_status mf_asd_run(mf_ctx *ctx, const mf_sparse *observed, const mf_asd_opts *opts, float *X,
                     float *Y, mf_memory where, mf_asd_report *report)
{
    mf_asd_opts o;
    mf_asd_opts_init(&o);
    run_state s = {.o = &o, .M = (mf_sparse *)observed, .rep.test_rmse = NAN};
    mf_status st = mf_run_begin_collective(
        &s.run, ctx,
        &(mf_run_args){"mf_asd_run", MF_RUN_INPUT(observed), MF_RUN_OUTPUTS(X, Y), where,
                       MF_RUN_OPTS(mf_asd_opts, &o, opts), MF_RUN_REPORT(mf_asd_report, report),
                       &o.test});
    if (st == MF_OK)
        st = check_opts(ctx, observed, &o);
    /* a group's ranks agree even when this one failed, so that none waits for it */
    if (ctx && ctx->comm)
        st = join_group(&s, ctx, st, observed);
    if (st == MF_OK) {
        mf_run_start(&s.run);
        st = run(&s, observed, X, Y, where);
        s.rep.seconds = mf_run_seconds(&s.run);
        st = mf_run_finish(&s.run, st, report, &s.rep, &s.rep.peak_device_bytes);
    }
    if (s.M != observed)
        mf_sparse_destroy(s.M);
    mf_sparse_destroy(s.test);
    mf_sparse_destroy(s.cols);
    mf_shares_free(&s.shares);
    return st;
}
