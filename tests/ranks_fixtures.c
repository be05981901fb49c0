#include "ranks_fixtures.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void rk_ials_breakdown_jobs(rk_job j[2], mf_ctx *const ctxs[2])
{
    int32_t r[] = {0, 0}, c[] = {0, 1};
    float v[] = {1, 1};
    for (int i = 0; i < 2; i++) {
        memset(&j[i], 0, sizeof j[i]);
        j[i].ctx = ctxs[i];
        ck_assert_int_eq(mf_sparse_from_coo(j[i].ctx, &j[i].R, 4, 2, 2, r, c, v, MF_MEMORY_HOST, 0),
                         MF_OK);
        j[i].ials = 1;
        mf_ials_opts_init(&j[i].io);
        j[i].io.rank = 3, j[i].io.lambda = 0.0f, j[i].io.solver = MF_ALS_SOLVER_EXACT;
        j[i].io.iterations = 2, j[i].io.init = MF_IALS_INIT_GIVEN;
        j[i].U = calloc(4 * 3, sizeof(float));
        j[i].V = calloc(2 * 3, sizeof(float));
        for (int u = 0; u < 4; u++)
            j[i].U[u * 3] = 0.1f, j[i].U[u * 3 + 1] = 0.2f + 0.1f * u;
        j[i].V[0] = 0.1f, j[i].V[1] = 0.3f, j[i].V[3] = 0.2f, j[i].V[4] = 0.1f;
    }
}

void rk_ials_breakdown_check(const rk_job j[2])
{
    ck_assert_int_eq(j[0].st, MF_ERR_NUMERIC);
    ck_assert_msg(strstr(j[0].error, "user 0"), "%s", j[0].error);
    ck_assert_int_eq(j[1].st, MF_ERR_NUMERIC);
    ck_assert_msg(strstr(j[1].error, "rank 0 of 2 failed"), "%s", j[1].error);
}

void rk_als_breakdown_jobs(rk_job j[2], mf_ctx *const ctxs[2])
{
    /* lambda = 0 and user 0 with one rating at rank 3: its system is singular. */
    int32_t r[] = {0, 1, 1, 1, 1, 2, 2, 2, 2}, c[] = {0, 0, 1, 2, 3, 0, 1, 2, 3};
    float v[] = {5, 1, 2, 3, 4, 4, 3, 2, 1};
    for (int i = 0; i < 2; i++) {
        memset(&j[i], 0, sizeof j[i]);
        j[i].ctx = ctxs[i];
        ck_assert_int_eq(mf_sparse_from_coo(j[i].ctx, &j[i].R, 3, 4, 9, r, c, v, MF_MEMORY_HOST, 0),
                         MF_OK);
        mf_als_opts_init(&j[i].o);
        j[i].o.rank = 3, j[i].o.iterations = 2, j[i].o.lambda = 0.0f, j[i].o.biases = 0;
        j[i].o.solver = MF_ALS_SOLVER_EXACT;
        j[i].U = calloc(3 * 3, sizeof(float));
        j[i].V = calloc(4 * 3, sizeof(float));
    }
}

void rk_als_breakdown_check(const rk_job j[2])
{
    /* User 0 is in rank 0's share; rank 1's items (two ratings each) break down too, later
     * in the iteration, from rank 0's garbage or on their own: rank 0's failure wins. */
    ck_assert_int_eq(j[0].st, MF_ERR_NUMERIC);
    ck_assert_msg(strstr(j[0].error, "user 0"), "%s", j[0].error);
    ck_assert_int_eq(j[1].st, MF_ERR_NUMERIC);
    ck_assert_msg(strstr(j[1].error, "rank 0 of 2 failed"), "%s", j[1].error);
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

void rk_close_group(rk_job *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        mf_sparse_destroy(jobs[i].R);
        free(jobs[i].U);
        free(jobs[i].V);
    }
    for (int i = 0; i < n; i++)
        mf_ctx_destroy(jobs[i].ctx);
}

mf_ctx *rk_cuda_ctx(int device)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA, o.device = device, o.seed = 42;
    mf_ctx *ctx = NULL;
    return mf_ctx_create(&ctx, &o) == MF_OK ? ctx : NULL;
}

int rk_device_count(void)
{
    int n = 0;
    for (mf_ctx *c; n < 8 && (c = rk_cuda_ctx(n)) != NULL; n++)
        mf_ctx_destroy(c);
    return n;
}

int rk_nccl_missing(mf_status st, mf_ctx *ctx)
{
    if (st != MF_ERR_UNSUPPORTED || getenv("MFACT_REQUIRE_NCCL"))
        return 0;
    printf("NCCL not usable, test skipped: %s\n", mf_ctx_last_error(ctx));
    return 1;
}

void rk_keep_part(rk_job *j, int i, int n, int32_t rows, int32_t cols)
{
    int64_t nnz = 0, kept = 0;
    ck_assert_int_eq(mf_sparse_shape(j->R, NULL, NULL, &nnz), MF_OK);
    int32_t *row = malloc((size_t)nnz * sizeof *row), *col = malloc((size_t)nnz * sizeof *col);
    float *val = malloc((size_t)nnz * sizeof *val);
    ck_assert(row && col && val);
    ck_assert_int_eq(mf_sparse_get_coo(j->R, row, col, val, MF_MEMORY_HOST), MF_OK);
    for (int64_t p = 0; p < nnz; p++)
        if ((int)((uint64_t)(p * 2654435761u) % 1000003u % (unsigned)n) == i)
            row[kept] = row[p], col[kept] = col[p], val[kept] = val[p], kept++;
    mf_sparse_destroy(j->R);
    ck_assert_int_eq(
        mf_sparse_from_coo(j->ctx, &j->R, rows, cols, kept, row, col, val, MF_MEMORY_HOST, 0),
        MF_OK);
    ck_assert_int_eq(mf_sparse_set_part(j->R, 1), MF_OK);
    free(row), free(col), free(val);
}
