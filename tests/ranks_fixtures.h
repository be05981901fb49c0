/* Shared by the suites of grouped contexts (test_ranks: CPU ranks in threads; test_gpu_ranks:
 * NCCL ranks; test_mpi_ranks: CPU ranks in processes): a collective run, one thread per rank
 * (or the calling thread). */
#ifndef MF_RANKS_FIXTURES_H
#define MF_RANKS_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"

/* One rank's call: its context and its own copy of the ratings, the options, the outputs
 * (host, rows x rank and cols x rank), and what came back. sgd set: mf_sgd_hogwild_run with
 * so (and srep); ials set: mf_ials_run with io (and irep); asd set: mf_asd_run with ao (and
 * arep; U and V are X and Y); else mf_als_run with o (and rep). */
typedef struct rk_job {
    mf_ctx *ctx;
    mf_sparse *R;
    mf_als_opts o;
    int sgd, ials, asd;
    mf_sgd_opts so;
    mf_ials_opts io;
    mf_ials_report irep;
    mf_asd_opts ao;
    mf_asd_report arep;
    float *U, *V;
    mf_als_report rep;
    mf_sgd_report srep;
    mf_status st;
    char error[1024]; /* mf_ctx_last_error(ctx) after the call */
} rk_job;

/* One job's call, in this thread (a rank of its own process: tests/test_mpi_ranks.c). */
void rk_run_job(rk_job *j);

/* Every job's call at once, a thread each; returns when all have returned. */
void rk_run_als(rk_job *jobs, int n);
/* A CUDA context on `device` (seed 42), or NULL where there is none (CPU builds too). */
mf_ctx *rk_cuda_ctx(int device);
/* How many devices give a CUDA context (at most 8). */
int rk_device_count(void);
/* Whether a group's join failed for want of NCCL: MF_ERR_UNSUPPORTED, reported as a skip
 * (with the reason) unless MFACT_REQUIRE_NCCL is set. */
int rk_nccl_missing(mf_status st, mf_ctx *ctx);
/* Destroy each job's ratings and outputs, then the contexts (the group with them). */
void rk_close_group(rk_job *jobs, int n);

/* Two ranks' implicit ALS whose first failure comes on rank 0 and a later one on rank 1
 * (ctxs: their contexts, grouped by the caller): 4 users x 2 items, rank 3, lambda 0, the
 * exact solver, given factors whose third column is 0, only user 0 rated (rank 0's share).
 * User 0's system has a zero row (rank 0 breaks down at the users); the gathered U is then
 * user 0's row alone, so item 1's system (rank 1's, at the items) has one too. */
void rk_ials_breakdown_jobs(rk_job j[2], mf_ctx *const ctxs[2]);
/* After rk_run_als over them: both ranks failed, rank 0 naming user 0 and rank 1 rank 0
 * (its own failure came later, from rank 0's). */
void rk_ials_breakdown_check(const rk_job j[2]);
/* ALS over two ranks where user 0's system breaks down (lambda 0, one rating at rank 3):
 * after rk_run_als, both ranks failed with MF_ERR_NUMERIC, rank 0 naming user 0 and rank 1
 * rank 0 (its own items' breakdown came later in the iteration). */
void rk_als_breakdown_jobs(rk_job j[2], mf_ctx *const ctxs[2]);
void rk_als_breakdown_check(const rk_job j[2]);

/* Rank i of n keeps its part of j's ratings (a rows x cols matrix), marked as a part of a
 * split matrix (mf_sparse_set_part): the entries whose scrambled position falls to it, never
 * whole lines. */
void rk_keep_part(rk_job *j, int i, int n, int32_t rows, int32_t cols);

/* The relative difference of two factors of n entries: max |a - b| over max |b|. */
double rk_max_rel_diff(const float *a, const float *b, int64_t n);

#endif
