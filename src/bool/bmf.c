/* mf_bmf_run: argument checks, defaults, the initial factors' inputs, the weight and
 * temperature schedules, the stopping rules, and the report. The bit work lives in the
 * engines (bmf_cpu.c, bmf.cu), which follow the same rules (bmf_rules.h), so a seed gives
 * the same run on either. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bool/bmf_asso.h"
#include "bool/bmf_internal.h"
#include "bool/bmf_rules.h"
#include "core/clock.h"
#include "core/ctx.h"
#include "core/opts.h"
#include "core/run.h"
#include "cuda/cuda_backend.h"

/* The defaults, whole (MF_OPTS_INITIALIZERS copies what fits the caller's struct). */
static void bmf_opts_defaults(mf_bmf_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->rank = 20;
    opts->instances = 16;
    opts->max_sweeps = 1000;
    opts->patience = 30;
    opts->flip = MF_BMF_FLIP_SINGLE;
    opts->init = MF_BMF_INIT_AUTO;
}

MF_OPTS_INITIALIZERS(mf_bmf_opts, mf_bmf_opts_init, bmf_opts_defaults, temperature_decay)

static mf_status check_opts(mf_ctx *ctx, const mf_bmf_opts *o)
{
    static const char fn[] = "mf_bmf_run";
    MF_REQUIRE(ctx, o->rank >= 1 && o->rank <= 1024, "%s: rank = %d is outside 1..1024", fn,
               o->rank);
    MF_REQUIRE(ctx, o->instances >= 1 && o->instances <= 1024,
               "%s: instances = %d is outside 1..1024", fn, o->instances);
    MF_REQUIRE(ctx, o->max_sweeps >= 1, "%s: max_sweeps = %d must be at least 1", fn,
               o->max_sweeps);
    MF_REQUIRE(ctx, o->patience >= 0, "%s: patience = %d must be >= 0", fn, o->patience);
    MF_REQUIRE(ctx, o->target_error >= 0.0 && o->target_error <= 1.0,
               "%s: target_error = %g is outside [0, 1]", fn, o->target_error);
    MF_REQUIRE(ctx, o->time_limit >= 0.0 && isfinite(o->time_limit),
               "%s: time_limit = %g must be finite and >= 0", fn, o->time_limit);
    MF_REQUIRE(ctx, o->weight >= 0.0f && o->weight <= 1e6f,
               "%s: weight = %g is outside [0, 1e6] (0 = default)", fn, (double)o->weight);
    MF_REQUIRE(ctx, o->weight_decay >= 0.0f && o->weight_decay <= 1.0f,
               "%s: weight_decay = %g is outside [0, 1] (0 = default)", fn,
               (double)o->weight_decay);
    MF_REQUIRE(ctx, o->weight_floor >= 0.0f && o->weight_floor <= 1e6f,
               "%s: weight_floor = %g is outside [0, 1e6] (0 = default)", fn,
               (double)o->weight_floor);
    MF_REQUIRE(ctx, o->flip == MF_BMF_FLIP_SINGLE || o->flip == MF_BMF_FLIP_PER_BIT,
               "%s: flip = %d is not an mf_bmf_flip value", fn, (int)o->flip);
    MF_REQUIRE(ctx, o->flip_probability >= 0.0f && o->flip_probability <= 1.0f,
               "%s: flip_probability = %g is outside [0, 1] (0 = 1 / rank)", fn,
               (double)o->flip_probability);
    MF_REQUIRE(ctx, o->temperature >= 0.0f && isfinite(o->temperature),
               "%s: temperature = %g must be finite and >= 0", fn, (double)o->temperature);
    MF_REQUIRE(ctx, o->temperature_decay >= 0.0f && o->temperature_decay <= 1.0f,
               "%s: temperature_decay = %g is outside [0, 1] (0 = default)", fn,
               (double)o->temperature_decay);
    MF_REQUIRE(ctx,
               o->init == MF_BMF_INIT_SAMPLE || o->init == MF_BMF_INIT_RANDOM ||
                   o->init == MF_BMF_INIT_GIVEN || o->init == MF_BMF_INIT_ASSO ||
                   o->init == MF_BMF_INIT_AUTO,
               "%s: init = %d is not an mf_bmf_init value", fn, (int)o->init);
    return MF_OK;
}

/* MF_BMF_INIT_AUTO takes Asso's cover when it is estimated to take at most this long: Asso
 * starts beat the sample start on every set measured (bench/README.md), and this keeps the
 * start within the budget for a run on a million ones. */
#define BMF_AUTO_ASSO_SECONDS 2.0

/* The weight schedule: the caller's values, or cuTeBool's defaults. */
typedef struct schedule {
    double w0, decay, floor, t0, tdecay;
} schedule;

static schedule make_schedule(const mf_bmf_opts *o, const mf_sparse *C)
{
    double cells = (double)C->rows * (double)C->cols;
    double density = (double)C->nnz / cells;
    int32_t shorter = C->rows < C->cols ? C->rows : C->cols;
    schedule s;
    /* Asso's cover already holds the ones it can: a high weight would only undo it. */
    double w_default =
        o->init == MF_BMF_INIT_ASSO ? 1.0 : fmax(3.0, fmin((double)C->nnz / shorter, 50.0));
    s.w0 = o->weight > 0.0f ? o->weight : w_default;
    s.decay = o->weight_decay > 0.0f ? o->weight_decay : 0.98;
    if (o->weight_floor > 0.0f)
        s.floor = o->weight_floor;
    else if (cells >= 4294967296.0 && density < 1e-3)
        s.floor = fmax(3.0, fmin(1000.0 * density, 10.0));
    else
        s.floor = 1.0;
    if (s.floor > s.w0)
        s.floor = s.w0;
    s.t0 = o->temperature;
    s.tdecay = o->temperature_decay > 0.0f ? o->temperature_decay : 0.95;
    return s;
}

static double sweep_weight(const schedule *s, int sweep, int *at_floor)
{
    double w = s->w0 * pow(s->decay, sweep);
    *at_floor = w <= s->floor;
    return *at_floor ? s->floor : w;
}

/* INIT_SAMPLE, Asso's candidates drawn at random: factor l starts as the columns that
 * occur in at least a fraction tau of the rows holding a seed column c, where c is the
 * column of a random one of C (popular columns are drawn more often) and tau is drawn from
 * [0.3, 0.8]. Such a factor covers a dense block by construction. The patterns go to the
 * engine as lists: factor l of instance q is cols[ptr[q k + l] .. ptr[q k + l + 1]). */
typedef struct sample_lists {
    int64_t *ptr;
    int32_t *cols;
} sample_lists;

static mf_status draw_samples(mf_ctx *ctx, mf_sparse *C, uint64_t seed, int instances, int k,
                              sample_lists *out)
{
    MF_TRY(mf_sparse_host_transpose(C));
    int64_t cap = 1024, used = 0, total = (int64_t)instances * k;
    int32_t *count = calloc((size_t)C->cols, sizeof *count);
    int32_t *touched = malloc((size_t)C->cols * sizeof *touched);
    out->ptr = malloc((size_t)(total + 1) * sizeof *out->ptr);
    out->cols = malloc((size_t)cap * sizeof *out->cols);
    if (!count || !touched || !out->ptr || !out->cols) {
        free(count);
        free(touched);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
    }
    out->ptr[0] = 0;
    for (int64_t f = 0; f < total; f++) {
        mf_philox_block r = bmf_draw(seed, (int)(f / k), BMF_PURPOSE_SAMPLE, f % k, 0);
        int64_t one = (int64_t)((((uint64_t)r.v[1] << 32) | r.v[0]) % (uint64_t)C->nnz);
        int32_t c = C->col[one], ntouched = 0;
        double tau = 0.3 + 0.5 * bmf_unit24(r.v[2]) / 16777216.0;
        int64_t b = C->transpose.ptr[c], e = C->transpose.ptr[c + 1];
        for (int64_t p = b; p < e; p++) {
            int32_t i = C->transpose.idx[p];
            for (int64_t t = C->row_ptr[i]; t < C->row_ptr[i + 1]; t++)
                if (count[C->col[t]]++ == 0)
                    touched[ntouched++] = C->col[t];
        }
        double need = tau * (double)(e - b);
        for (int32_t t = 0; t < ntouched; t++) {
            int32_t j = touched[t];
            if ((double)count[j] >= need) {
                if (used == cap) {
                    int32_t *grown = realloc(out->cols, (size_t)(cap *= 2) * sizeof *grown);
                    if (!grown) {
                        free(count);
                        free(touched);
                        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
                    }
                    out->cols = grown;
                }
                out->cols[used++] = j;
            }
            count[j] = 0;
        }
        out->ptr[f + 1] = used;
    }
    free(count);
    free(touched);
    return MF_OK;
}

/* INIT_GIVEN: the caller's factors on the host, with no bit set past k. */
static mf_status load_given(mf_ctx *ctx, const mf_sparse *C, int k, const uint64_t *A,
                            const uint64_t *B, mf_memory where, uint64_t *A0, uint64_t *B0)
{
    int kw = mf_bmf_words(k);
    size_t abytes = (size_t)C->rows * kw * 8, bbytes = (size_t)C->cols * kw * 8;
    if (where == MF_MEMORY_DEVICE) {
        MF_TRY(mf_cuda_copy(ctx, A0, A, abytes));
        MF_TRY(mf_cuda_copy(ctx, B0, B, bbytes));
    } else {
        memcpy(A0, A, abytes);
        memcpy(B0, B, bbytes);
    }
    uint64_t tail = k % 64 ? ~(((uint64_t)1 << (k % 64)) - 1) : 0;
    const uint64_t *f[2] = {A0, B0};
    int32_t lines[2] = {C->rows, C->cols};
    for (int side = 0; side < 2; side++)
        for (int32_t i = 0; i < lines[side]; i++)
            if (f[side][(int64_t)i * kw + kw - 1] & tail)
                return mf_fail(ctx, MF_ERR_INVALID_DATA,
                               "mf_bmf_run: the given %s has bits set past rank %d in %s %d",
                               side ? "B" : "A", k, side ? "column" : "row", (int)i);
    return MF_OK;
}

typedef struct run_state {
    mf_run run;
    const mf_bmf_opts *o;
    const mf_sparse *C;
    mf_bmf_engine *e;
    int recount; /* check every sweep's counts from scratch (mf_bmf_run_checked) */
    schedule sch;
    double cells;
    int64_t *best; /* per instance: best fp + fn */
    int64_t best_fp, best_fn;
    int best_q, sweeps;
} run_state;

static void fill_counts(const run_state *s, mf_bmf_report *r)
{
    r->fp = s->best_fp;
    r->fn = s->best_fn;
    r->tp = s->C->nnz - s->best_fn;
    r->error = r->fp + r->fn;
    r->relative_error = (double)r->error / s->cells;
    r->precision = r->tp + r->fp > 0 ? (double)r->tp / (double)(r->tp + r->fp) : 1.0;
    r->recall = s->C->nnz > 0 ? (double)r->tp / (double)s->C->nnz : 1.0;
    r->f1 = r->precision + r->recall > 0.0
                ? 2.0 * r->precision * r->recall / (r->precision + r->recall)
                : 0.0;
}

/* Take one sweep's counts: per-instance bests and the overall best. 1 if it improved. */
static int take_counts(run_state *s, const int64_t *counts)
{
    int improved = 0;
    for (int q = 0; q < s->e->instances; q++) {
        int64_t fp = counts[2 * q], fn = counts[2 * q + 1];
        if (fp + fn < s->best[q]) {
            s->best[q] = fp + fn;
            if (fp + fn < s->best_fp + s->best_fn) {
                s->best_fp = fp;
                s->best_fn = fn;
                s->best_q = q;
                improved = 1;
            }
        }
    }
    return improved;
}

static mf_status check_recount(run_state *s, int sweep, const int64_t *counts)
{
    for (int q = 0; q < s->e->instances; q++) {
        int64_t fp, fn;
        MF_TRY(s->e->recount(s->e, q, &fp, &fn));
        if (fp != counts[2 * q] || fn != counts[2 * q + 1])
            return mf_fail(s->run.ctx, MF_ERR_INTERNAL,
                           "mf_bmf_run: after sweep %d instance %d counts fp %lld fn %lld "
                           "incrementally but %lld and %lld from scratch",
                           sweep + 1, q, (long long)counts[2 * q], (long long)counts[2 * q + 1],
                           (long long)fp, (long long)fn);
    }
    return MF_OK;
}

/* How many sweeps to queue before looking at the counts: one when someone watches each
 * sweep, else 1, 2, 4, ... up to MF_BMF_GROUP_MAX. Sweeps queued past a stop still run and count,
 * so the schedule must not depend on timing: then a seed always gives the same factors. */
static int next_group(const run_state *s, int last_count, int left)
{
    if (s->o->progress || s->recount || last_count == 0)
        return 1;
    int g = 2 * last_count < MF_BMF_GROUP_MAX ? 2 * last_count : MF_BMF_GROUP_MAX;
    return g < left ? g : left;
}

static mf_status search(run_state *s)
{
    const mf_bmf_opts *o = s->o;
    int n = s->e->instances;
    int64_t *hist = malloc((size_t)MF_BMF_GROUP_MAX * n * 2 * sizeof *hist);
    mf_bmf_sweep *plan = malloc((size_t)MF_BMF_GROUP_MAX * sizeof *plan);
    int *floor_flags = malloc((size_t)MF_BMF_GROUP_MAX * sizeof *floor_flags);
    mf_status st = MF_OK;
    if (!hist || !plan || !floor_flags)
        st = mf_fail(s->run.ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
    int stale = 0, stop = 0, group = 0;
    while (st == MF_OK && !stop && s->sweeps < o->max_sweeps) {
        group = next_group(s, group, o->max_sweeps - s->sweeps);
        for (int g = 0; g < group; g++) {
            double w = sweep_weight(&s->sch, s->sweeps + g, &floor_flags[g]);
            plan[g].wq = llround(w * BMF_WSCALE);
            plan[g].temperature = s->sch.t0 * pow(s->sch.tdecay, s->sweeps + g);
        }
        double deadline = o->time_limit > 0.0 ? s->run.start + o->time_limit : 0.0;
        int done = 0;
        st = s->e->sweeps(s->e, s->sweeps, group, plan, deadline, hist, &done);
        if (st != MF_OK)
            break;
        if (s->recount)
            st = check_recount(s, s->sweeps, hist);
        /* Every sweep run is taken, even past a stop: the engine kept their bests. */
        for (int g = 0; g < done && st == MF_OK; g++) {
            int sweep = s->sweeps++;
            if (take_counts(s, hist + (size_t)g * n * 2))
                stale = 0;
            else if (floor_flags[g])
                stale++;
            if (o->patience > 0 && stale >= o->patience)
                stop = 1;
            if ((double)(s->best_fp + s->best_fn) / s->cells <= o->target_error)
                stop = 1;
            if (o->progress) {
                mf_bmf_report r;
                fill_counts(s, &r);
                mf_bmf_progress p = {sweep + 1,   mf_run_seconds(&s->run),
                                     r.error,     r.relative_error,
                                     r.precision, r.recall,
                                     r.f1,        (double)plan[g].wq / BMF_WSCALE,
                                     1.0};
                st = mf_run_cancelled(&s->run, o->progress(o->progress_user, &p), "sweep",
                                      sweep + 1);
            }
        }
        if (o->time_limit > 0.0 && mf_run_seconds(&s->run) >= o->time_limit)
            stop = 1;
    }
    free(hist);
    free(plan);
    free(floor_flags);
    return st;
}

/* The Asso start's watch: the run's time limit, and its progress callback after the start's
 * greedy rounds, with sweep 0 and the counts of the empty factorization. */
typedef struct start_watch {
    mf_bmf_asso_watch w;
    const run_state *s;
} start_watch;

static int on_start_round(void *user, int64_t done, int64_t total)
{
    const start_watch *sw = user;
    const run_state *s = sw->s;
    run_state empty = *s;
    empty.best_fp = 0;
    empty.best_fn = s->C->nnz;
    mf_bmf_report r;
    fill_counts(&empty, &r);
    int floor_flag;
    const double w = (double)llround(sweep_weight(&s->sch, 0, &floor_flag) * BMF_WSCALE);
    mf_bmf_progress p = {0,
                         mf_run_seconds(&s->run),
                         r.error,
                         r.relative_error,
                         r.precision,
                         r.recall,
                         r.f1,
                         w / BMF_WSCALE,
                         total > 0 ? (double)done / (double)total : 0.0};
    return s->o->progress(s->o->progress_user, &p);
}

/* Host inputs of the engine's initialization; freed by the caller. */
static mf_status prepare_init(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o,
                              mf_bmf_asso_watch *watch, const uint64_t *A, const uint64_t *B,
                              mf_memory where, mf_bmf_setup *setup, sample_lists *samples,
                              uint64_t **A0, uint64_t **B0)
{
    int k = o->rank, kw = mf_bmf_words(k);
    if (o->init == MF_BMF_INIT_SAMPLE && C->nnz > 0) {
        MF_TRY(draw_samples(ctx, (mf_sparse *)C, ctx->seed, o->instances, k, samples));
        setup->sample_ptr = samples->ptr;
        setup->sample_cols = samples->cols;
    }
    if (o->init == MF_BMF_INIT_RANDOM) {
        double d = (double)C->nnz / ((double)C->rows * (double)C->cols);
        setup->init_p24 = bmf_prob24(sqrt(1.0 - pow(1.0 - d, 1.0 / k)));
    }
    if (o->init == MF_BMF_INIT_GIVEN || o->init == MF_BMF_INIT_ASSO) {
        /* host copies: the caller's factors once, or Asso's cover for every instance */
        int asso = o->init == MF_BMF_INIT_ASSO;
        size_t copies = asso ? (size_t)o->instances : 1;
        *A0 = malloc(copies * C->rows * kw * 8);
        *B0 = malloc(copies * C->cols * kw * 8);
        if (!*A0 || !*B0)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
        if (asso)
            MF_TRY(mf_bmf_asso(ctx, (mf_sparse *)C, k, o->instances, MF_BMF_ASSO_AUTO, watch, *A0,
                               *B0));
        else
            MF_TRY(load_given(ctx, C, k, A, B, where, *A0, *B0));
        setup->A0 = *A0;
        setup->B0 = *B0;
        setup->given_per_instance = asso;
    }
    return MF_OK;
}

mf_status mf_bmf_run_checked(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *opts,
                             uint64_t *A_bits, uint64_t *B_bits, mf_memory where,
                             mf_bmf_report *report, const mf_bmf_debug *debug)
{
    static const char fn[] = "mf_bmf_run";
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    run_state s = {.o = &o, .C = C, .recount = debug && debug->recount};

    MF_TRY(mf_run_begin(&s.run, ctx,
                        &(mf_run_args){fn, MF_RUN_INPUT(C), MF_RUN_OUTPUTS(A_bits, B_bits), where,
                                       MF_RUN_OPTS(mf_bmf_opts, &o, opts),
                                       MF_RUN_REPORT(mf_bmf_report, report), NULL}));
    MF_TRY(check_opts(ctx, &o));
    if (o.init == MF_BMF_INIT_AUTO) {
        /* An estimate that cannot be made (no host memory for its lists) means the sampled
         * start, not a failed run. */
        double seconds = INFINITY;
        if (mf_bmf_asso_estimate(ctx, (mf_sparse *)C, o.rank, o.instances, &seconds) != MF_OK)
            seconds = INFINITY;
        o.init = seconds <= BMF_AUTO_ASSO_SECONDS ? MF_BMF_INIT_ASSO : MF_BMF_INIT_SAMPLE;
    }
    s.cells = (double)C->rows * (double)C->cols;
    s.sch = make_schedule(&o, C);
    mf_run_start(&s.run);

    mf_bmf_setup setup;
    memset(&setup, 0, sizeof setup);
    setup.ctx = ctx;
    setup.C = (mf_sparse *)C;
    setup.k = o.rank;
    setup.instances = o.instances;
    setup.seed = ctx->seed;
    setup.flip = o.flip;
    setup.init = o.init;
    setup.c_layout = debug ? debug->c_layout : MF_BMF_C_AUTO;
    double p = o.flip_probability > 0.0f ? o.flip_probability : 1.0 / o.rank;
    setup.flip_p24 = bmf_prob24(p);
    sample_lists samples = {NULL, NULL};
    uint64_t *A0 = NULL, *B0 = NULL;
    /* Watched when someone looks (a callback, a time limit): the device covers then wait
     * for each round. */
    start_watch sw = {.w = {.deadline = o.time_limit > 0.0 ? s.run.start + o.time_limit : 0.0,
                            .round = o.progress ? on_start_round : NULL},
                      .s = &s};
    sw.w.user = &sw;
    const int watched = o.progress || o.time_limit > 0.0;
    mf_status st = prepare_init(ctx, C, &o, watched ? &sw.w : NULL, A_bits, B_bits, where, &setup,
                                &samples, &A0, &B0);
    if (st == MF_OK)
        st = MF_RUN_ENGINE(&s.run, mf_bmf_cpu_engine, mf_cuda_bmf_engine, &setup, &s.e);
    free(samples.ptr);
    free(samples.cols);
    free(A0);
    free(B0);
    if (st == MF_OK) {
        s.best = malloc((size_t)o.instances * sizeof *s.best);
        if (!s.best)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
    if (st == MF_OK) {
        s.best_fp = INT64_MAX / 4;
        s.best_fn = INT64_MAX / 4;
        for (int q = 0; q < o.instances; q++)
            s.best[q] = INT64_MAX;
        take_counts(&s, s.e->initial);
        if (sw.w.stopped == 1) /* the callback stopped the start: its rounds are the result */
            st = mf_run_cancelled(&s.run, 1, "Asso start round", (long long)sw.w.done);
        else if (!((double)(s.best_fp + s.best_fn) / s.cells <= o.target_error))
            st = search(&s);
        if (mf_run_has_result(st))
            st = mf_run_then(st, s.e->finish(s.e, s.best_q, A_bits, B_bits, where));
    }
    if (s.e)
        s.e->destroy(s.e);
    free(s.best);
    mf_bmf_report r;
    memset(&r, 0, sizeof r);
    if (mf_run_has_result(st)) {
        fill_counts(&s, &r);
        r.sweeps = s.sweeps;
        r.best_instance = s.best_q;
        r.seconds = mf_run_seconds(&s.run);
    }
    return mf_run_finish(&s.run, st, report, &r, &r.peak_device_bytes);
}

mf_status mf_bmf_run(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *opts, uint64_t *A_bits,
                     uint64_t *B_bits, mf_memory where, mf_bmf_report *report)
{
    return mf_bmf_run_checked(ctx, C, opts, A_bits, B_bits, where, report, NULL);
}
