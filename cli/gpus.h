/* --gpus N: one fit over N GPUs of this host. The tool's context is rank 0; N - 1 more
 * contexts open on the next devices, with the same flags, and join it in a group
 * (mf_ctx_join_local). Each rank gets its own copy of the training and test ratings and
 * its own factor buffers, and makes the collective call on its own thread. With N = 1 the
 * same calls run the tool's context alone. */
#ifndef MFACT_CLI_GPUS_H
#define MFACT_CLI_GPUS_H

#include "cli.h"

#define CLI_MAX_GPUS 64

/* What one rank's call works on. Rank 0's are the tool's own (context, ratings, U, V). */
typedef struct cli_rank {
    int rank;
    mf_ctx *ctx;
    mf_sparse *train, *test;
    float *U, *V;
} cli_rank;

typedef struct cli_gpus {
    int n;
    cli_rank ranks[CLI_MAX_GPUS];
} cli_gpus;

/* The n ranks around ctx (with n > 1 a CUDA context on device c->device: the others take
 * the devices after it), each with copies of train and test (test may be NULL) and factor
 * buffers of rank k; rank 0 has ctx, train, test, U and V themselves. Prints the failure
 * and returns -1, leaving nothing open. */
int cli_gpus_open(const char *cmd, const cli_common *c, mf_ctx *ctx, int n, mf_sparse *train,
                  mf_sparse *test, int k, float *U, float *V, cli_gpus *g);

/* fn(rank, user) on every rank at once: rank 0 on this thread, the others on their own.
 * Returns rank 0's status, its failure printed ("could not start a thread per GPU" when
 * not every rank could start, and then none ran). */
mf_status cli_gpus_call(const char *cmd, const cli_gpus *g,
                        mf_status (*fn)(const cli_rank *r, void *user), void *user);

/* Everything cli_gpus_open made (not rank 0's own), and rank 0 leaves the group. */
void cli_gpus_close(cli_gpus *g);

#endif
