#include "core/run.h"

#include <string.h>

#include "core/clock.h"
#include "core/opts.h"
#include "core/ranks.h"

static mf_status check_test(const mf_run *run, const mf_sparse *test, const mf_sparse *input)
{
    if (!test)
        return MF_OK;
    MF_REQUIRE(run->ctx, test->ctx == run->ctx, "%s: the test set belongs to another context",
               run->fn);
    MF_REQUIRE(run->ctx, test->rows == input->rows && test->cols == input->cols,
               "%s: the test set is %d x %d but the %s are %d x %d", run->fn, test->rows,
               test->cols, run->input_name, input->rows, input->cols);
    return MF_OK;
}

static mf_status begin(mf_run *run, mf_ctx *ctx, const mf_run_args *a, int collective)
{
    memset(run, 0, sizeof *run);
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", a->fn);
    run->ctx = ctx;
    run->fn = a->fn;
    run->input_name = a->input_name;
    if (!collective && mf_ranks(ctx) > 1)
        return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                       "%s does not run over a group of contexts yet (this context is one of "
                       "%d ranks): use a context outside the group",
                       a->fn, mf_ranks(ctx));
    MF_REQUIRE(ctx, a->input, "%s: %s is NULL", a->fn, a->input_name);
    MF_REQUIRE(ctx, a->input->ctx == ctx, "%s: %s belongs to another context", a->fn,
               a->input_name);
    for (int i = 0; i < 2; i++)
        MF_REQUIRE(ctx, a->out[i], "%s: %s is NULL", a->fn, a->out_name[i]);
    if (a->user_opts)
        MF_TRY(mf_opts_load(ctx, a->opts_type, a->opts, a->opts_size, a->opts_align,
                            a->opts_legacy_size, a->user_opts));
    for (int i = 0; i < 2; i++)
        MF_TRY(mf_check_memory(ctx, a->out[i], a->where, a->fn, a->out_name[i]));
    if (a->report)
        MF_TRY(mf_opts_out_size(ctx, a->report_type, a->report, a->report_size, a->report_align,
                                &run->report_bytes));
    return a->test ? check_test(run, *a->test, a->input) : MF_OK;
}

mf_status mf_run_begin(mf_run *run, mf_ctx *ctx, const mf_run_args *args)
{
    return begin(run, ctx, args, 0);
}

mf_status mf_run_begin_collective(mf_run *run, mf_ctx *ctx, const mf_run_args *args)
{
    return begin(run, ctx, args, 1);
}

void mf_run_start(mf_run *run)
{
    run->start = mf_seconds();
    run->saved_peak = mf_dmem_peak_begin(&run->ctx->dmem);
}

double mf_run_seconds(const mf_run *run)
{
    return mf_seconds() - run->start;
}

mf_status mf_run_cancelled(const mf_run *run, int verdict, const char *step, long long n)
{
    if (verdict == 0)
        return MF_OK;
    return mf_fail(run->ctx, MF_ERR_CANCELLED,
                   "%s: cancelled by the progress callback after %s %lld", run->fn, step, n);
}

mf_status mf_run_finish(mf_run *run, mf_status st, void *report, void *full, size_t *peak)
{
    size_t run_peak = mf_dmem_peak_end(&run->ctx->dmem, run->saved_peak);
    if (!mf_run_has_result(st))
        return st;
    *peak = run->ctx->backend == MF_BACKEND_CUDA ? run_peak : 0;
    /* Every report starts with size_t struct_size, which says how much was written. */
    if (report && run->report_bytes) {
        memcpy(full, &run->report_bytes, sizeof run->report_bytes);
        memcpy(report, full, run->report_bytes);
    }
    return st;
}
