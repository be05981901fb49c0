/* A --test file whose users or items the training file never saw (a time split: newer
 * movies, new users). The fit measures the entries it knows; the tool adds the others,
 * predicted from what is known (the mean and the known user's or item's bias), counts them
 * and reports the test RMSE over all of them. Never an error. */
#ifndef MFACT_CLI_TEST_SET_H
#define MFACT_CLI_TEST_SET_H

#include "cli.h"
#include "model_file.h"

/* full: the test file read with no shape of its own (the training file's base). Into
 * *seen the entries inside users x items, a matrix of that shape for the fit; the whole
 * file is kept (cli_test_unseen, cli_out_test) when some entries lie outside. Returns
 * MF_OK or the failure (recorded on ctx); full is the caller's. */
mf_status cli_test_split(mf_ctx *ctx, mf_sparse *full, int32_t users, int32_t items,
                         mf_sparse **seen);

/* Test entries of users or items the training file lacks (0: none, or no test file). */
int64_t cli_test_unseen(void);

/* The test lines of the results: with unseen entries, "test RMSE" over every entry (the
 * fitted model's predictions, mf_model_rmse) and the RMSE over the seen ones (`seen_rmse`,
 * the fit's; cli_out_ratings counts the unseen); else "test RMSE" = seen_rmse. Prints a failure;
 * returns 0 or -1. */
int cli_out_test(cli_out *out, const char *cmd, mf_ctx *ctx, const cli_fit *fit, double seen_rmse);

/* Frees what cli_test_split kept. */
void cli_test_release(void);

#endif
