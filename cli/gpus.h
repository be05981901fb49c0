/* --gpus N: one fit over N GPUs of this host. The tool's context is rank 0; N - 1 more
 * contexts open on the next devices, with the same flags, and join it in a group
 * (mf_ctx_join_local). Each rank gets its own copy of the training and test ratings, and
 * runs the collective call on its own thread. */
#ifndef MFACT_CLI_GPUS_H
#define MFACT_CLI_GPUS_H

#include "cli.h"

#define CLI_MAX_GPUS 64

typedef struct cli_gpus {
    int n;
    mf_ctx *ctx[CLI_MAX_GPUS]; /* ctx[0] is the caller's */
    mf_sparse *train[CLI_MAX_GPUS], *test[CLI_MAX_GPUS];
} cli_gpus;

/* Parse --gpus's value into *n (1..CLI_MAX_GPUS); prints the problem and returns false. */
bool cli_gpus_parse(const char *cmd, const char *val, long long *n);

/* The group of n ranks around ctx (a CUDA context on device c->device: the others take the
 * devices after it) with copies of train and test (NULL: none). Prints the failure and
 * returns -1, leaving nothing open. */
int cli_gpus_open(const char *cmd, const cli_common *c, mf_ctx *ctx, int n, mf_sparse *train,
                  mf_sparse *test, cli_gpus *g);

/* fn(job i) for every rank i at once: rank 0 on this thread, the others on their own; jobs
 * is an array of n job structs of job_size bytes. Returns when all have returned: 0, or -1
 * (nothing ran) when a thread could not be started. */
int cli_gpus_run(const cli_gpus *g, void *(*fn)(void *), void *jobs, size_t job_size);

/* Destroy the copies and the contexts opened (not ctx[0]). */
void cli_gpus_close(cli_gpus *g);

#endif
