/* Problems and references shared by the Boolean factorization suites (CPU and GPU). */
#ifndef MF_BMF_FIXTURES_H
#define MF_BMF_FIXTURES_H

#include <stdint.h>

#include "mfact/mfact.h"

/* A planted Boolean matrix C = A* o B* of rank k (each factor bit 1 with probability p),
 * with each entry then flipped with probability `noise`. A* and B* (mfact's bit order)
 * are returned when the pointers are not NULL (caller frees); *clean, when not NULL,
 * receives the noise-free matrix. */
mf_sparse *bx_planted(mf_ctx *ctx, int32_t rows, int32_t cols, int k, double p, double noise,
                      uint64_t seed, uint64_t **A, uint64_t **B, mf_sparse **clean);

/* fp and fn of A o B against C, counted entry by entry without the library. */
void bx_count(const mf_sparse *C, int k, const uint64_t *A, const uint64_t *B, int64_t *fp,
              int64_t *fn);

/* Run mf_bmf_run with `o` (NULL: defaults at rank k), assert MF_OK, return the report, and
 * check that its counts agree with bx_count on the factors it wrote. A and B are
 * allocated (caller frees) when *A is NULL. */
mf_bmf_report bx_run(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                     uint64_t **B);
/* bx_run with every sweep's counts checked from scratch (mf_bmf_run_checked). */
mf_bmf_report bx_run_recounted(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                               uint64_t **B);

/* bx_run_recounted with the CUDA engine's layout of C forced (an mf_bmf_c_layout). */
mf_bmf_report bx_run_layout(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *o, uint64_t **A,
                            uint64_t **B, int c_layout);

/* A real data set of ../shared/data/bool as a pattern; NULL when absent. */
mf_sparse *bx_dataset(mf_ctx *ctx, const char *name);

/* The published k = 20 results on APatio: from `init`, relative error below CuBin's 7.33e-3;
 * from MF_BMF_INIT_ASSO, at or below Asso's 6.50e-3. Prints the result with `label`, or
 * that the data set is absent. */
void bx_check_apatio(mf_ctx *ctx, const char *label, int instances, mf_bmf_init init);

/* MF_BMF_INIT_ASSO's cover for instance q (bmf_asso.h), computed densely from its
 * definition: A (rows x kw words) and B (cols x kw words). */
void bx_asso_reference(const mf_sparse *C, int k, int q, uint64_t *A, uint64_t *B);

/* A watched Asso cover (an mf_bmf_asso_where) of one instance on ctx: stopped by its callback
 * after 3 rounds, it is the whole cover's first 3 factors (the greedy rounds are sequential)
 * with the callback told 1, 2, 3 of k rounds; past its deadline before it begins, it is
 * empty. C needs at least 4 factors of positive gain. */
void bx_check_asso_watch(mf_ctx *ctx, mf_sparse *C, int k, int where);

#endif
