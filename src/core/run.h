/* The run harness: what every algorithm's run function (mf_als_run, mf_sgd_hogwild_run,
 * mf_bmf_run, and those that follow) does around its own work, written once:
 *
 *     mf_run run;
 *     mf_xxx_opts o;                      defaults: mf_xxx_opts_init(&o)
 *     MF_TRY(mf_run_begin(&run, ctx, &args));   NULLs, context, options, outputs' memory,
 *                                         report size, test set
 *     MF_TRY(check_opts(...));            the algorithm's own option checks
 *     mf_run_start(&run);                 clock and peak-memory window
 *     st = MF_RUN_ENGINE(&run, mf_xxx_cpu_engine, mf_cuda_xxx_engine, &setup, &e);
 *     ... iterate, calling mf_run_cancelled() after each step's progress callback ...
 *     st = mf_run_finish(&run, st, report, &full_report, &full_report.peak_device_bytes);
 *
 * so that an algorithm's <algo>.c holds only what is its own. */
#ifndef MF_CORE_RUN_H
#define MF_CORE_RUN_H

#include <stddef.h>

#include "core/ctx.h"
#include "core/opts.h" /* MF_OPTS_LEGACY_SIZE */
#include "core/sparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What mf_run_begin checks and loads. */
typedef struct mf_run_args {
    const char *fn; /* the public function, for messages: "mf_als_run" */
    const mf_sparse *input;
    const char *input_name; /* "ratings" */
    /* The output arrays (both required) and where they live. */
    const void *out[2];
    const char *out_name[2];
    mf_memory where;
    /* Options: `opts` holds the defaults, opts_size bytes; the caller's (NULL: defaults)
     * are loaded over them by struct_size. */
    const char *opts_type; /* "mf_als_opts" */
    void *opts;
    size_t opts_size, opts_align, opts_legacy_size; /* as mf_opts_load takes them */
    const void *user_opts;
    /* The caller's report (NULL: none wanted), whose struct_size is checked. */
    const char *report_type; /* "mf_als_report" */
    const void *report;
    size_t report_size, report_align;
    /* A test set, when the options can name one: read after they are loaded; NULL or
     * pointing to NULL means none. It must belong to ctx and have the input's shape. */
    const mf_sparse *const *test;
} mf_run_args;

/* mf_run_args in order, from names and types (the names double as the messages' words):
 *     mf_run_begin(&run, ctx, &(mf_run_args){"mf_als_run", MF_RUN_INPUT(ratings),
 *                  MF_RUN_OUTPUTS(U, V), where, MF_RUN_OPTS(mf_als_opts, &o, opts),
 *                  MF_RUN_REPORT(mf_als_report, report), &o.test}) */
#define MF_RUN_INPUT(matrix) (matrix), #matrix
#define MF_RUN_OUTPUTS(a, b)                                                                       \
    {(a), (b)},                                                                                    \
    {                                                                                              \
#a, #b                                                                                     \
    }
#define MF_RUN_OPTS(type, defaults, user)                                                          \
#type, (defaults), sizeof(type), _Alignof(type), MF_OPTS_LEGACY_SIZE(type), (user)
#define MF_RUN_REPORT(type, caller) #type, (caller), sizeof(type), _Alignof(type)

typedef struct mf_run {
    mf_ctx *ctx;
    const char *fn;
    const char *input_name;
    size_t report_bytes; /* of the caller's report to write; 0 when none */
    double start;        /* mf_seconds() at mf_run_start */
    size_t saved_peak;   /* the context's peak before the run's window opened */
} mf_run;

/* ctx non-NULL (else the thread's slot says so); input non-NULL and of ctx; both outputs
 * non-NULL; the options loaded; both outputs in `where` memory; the report's struct_size
 * usable; the test set's context and shape. */
mf_status mf_run_begin(mf_run *run, mf_ctx *ctx, const mf_run_args *args);
/* The same for a run that a context in a group may make: one collective over the group
 * (core/ranks.h), or one that works on its own context alone. mf_run_begin refuses a
 * context in a group of more than one (MF_ERR_UNSUPPORTED), this one takes it. */
mf_status mf_run_begin_collective(mf_run *run, mf_ctx *ctx, const mf_run_args *args);

/* Start the clock and the peak-memory window; mf_run_finish closes them. */
void mf_run_start(mf_run *run);

/* Seconds since mf_run_start. */
double mf_run_seconds(const mf_run *run);

/* The engine for the context's backend: the CUDA one on a CUDA context, else the CPU one.
 * A macro so that each algorithm's own setup and engine types stay checked. */
#define MF_RUN_ENGINE(run, cpu_engine, cuda_engine, setup, engine)                                 \
    ((run)->ctx->backend == MF_BACKEND_CUDA ? cuda_engine((setup), (engine))                       \
                                            : cpu_engine((setup), (engine)))

/* After a progress callback: a nonzero `verdict` cancels the run with MF_ERR_CANCELLED,
 * "<fn>: cancelled by the progress callback after <step> <n>"; else MF_OK. */
mf_status mf_run_cancelled(const mf_run *run, int verdict, const char *step, long long n);

/* Whether a run's status leaves a result to hand over: MF_OK, or MF_ERR_CANCELLED (a
 * cancelled run hands over its last finished step). */
static inline int mf_run_has_result(mf_status st)
{
    return st == MF_OK || st == MF_ERR_CANCELLED;
}

/* The status of a run after a later step (handing over the result): the later one's when
 * it failed, else the run's. */
static inline mf_status mf_run_then(mf_status st, mf_status later)
{
    return later != MF_OK ? later : st;
}

/* Close the run: the peak-memory window ends (the run's peak goes to *peak, 0 on a CPU
 * context) and, when the run produced a result (MF_OK, or MF_ERR_CANCELLED, which keeps
 * the last finished step), `full` (a report of the algorithm's full size, filled but for
 * struct_size and the peak) is copied into the caller's `report` as far as its
 * struct_size allows. Returns st. */
mf_status mf_run_finish(mf_run *run, mf_status st, void *report, void *full, size_t *peak);

#ifdef __cplusplus
}
#endif
#endif
