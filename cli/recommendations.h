/* Top-N lists as text, for mfact recommend (trained in the same run, or from a model file). */
#ifndef MFACT_CLI_RECOMMENDATIONS_H
#define MFACT_CLI_RECOMMENDATIONS_H

#include <stdint.h>

#include "cli.h"

/* The top N items of users[0..n) (users NULL: every user of the model, 0..users-1), the
 * items of their rows of `exclude` left out (NULL: none), as 'user item score' lines, the
 * users and items named as `names` says (the file's ids, or indices + the file's base), to
 * `path` (NULL: standard output). Prints the failure; returns CLI_OK or CLI_FAILED. */
int cli_write_recommendations(const char *cmd, mf_ctx *ctx, const char *path, const mf_model *m,
                              const int32_t *users, int64_t n, const mf_sparse *exclude, int N,
                              const cli_names *names);

#endif
