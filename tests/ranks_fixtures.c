#include "ranks_fixtures.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "testutil.h"

void rk_run_job(rk_job *j)
{
    j->rep = (mf_als_report){.struct_size = sizeof j->rep};
    j->srep = (mf_sgd_report){.struct_size = sizeof j->srep};
    j->irep = (mf_ials_report){.struct_size = sizeof j->irep};
    j->arep = (mf_asd_report){.struct_size = sizeof j->arep};
    if (j->sgd)
        j->st = mf_sgd_hogwild_run(j->ctx, j->R, &j->so, j->U, j->V, MF_MEMORY_HOST, &j->srep);
    else if (j->asd)
        j->st = mf_asd_run(j->ctx, j->R, &j->ao, j->U, j->V, MF_MEMORY_HOST, &j->arep);
    else if (j->ials)
        j->st = mf_ials_run(j->ctx, j->R, &j->io, j->U, j->V, MF_MEMORY_HOST, &j->irep);
    else
        j->st = mf_als_run(j->ctx, j->R, &j->o, j->U, j->V, MF_MEMORY_HOST, &j->rep);
    snprintf(j->error, sizeof j->error, "%s", mf_ctx_last_error(j->ctx));
}

static void *run_one(void *arg)
{
    rk_run_job(arg);
    return NULL;
}

void rk_run_als(rk_job *jobs, int n)
{
    pthread_t threads[64];
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, run_one, &jobs[i]), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
}

double rk_max_rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0.0, m = 0.0;
    for (int64_t p = 0; p < n; p++) {
        d = fmax(d, fabs((double)a[p] - b[p]));
        m = fmax(m, fabs((double)b[p]));
    }
    return d / (m > 0.0 ? m : 1.0);
}
