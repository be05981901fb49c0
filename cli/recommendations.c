#include "recommendations.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_write_recommendations(const char *cmd, mf_ctx *ctx, const char *path, const mf_model *m,
                              const int32_t *users, int64_t n, const mf_sparse *exclude, int N,
                              const cli_names *names)
{
    if (!users)
        n = m->users;
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        cli_error(cmd, "cannot write %s: %s", path, strerror(errno));
        return CLI_FAILED;
    }
    /* Batches of up to 2^24 list entries: few calls, so that a CUDA context uploads the
     * host factors a few times rather than once per few thousand users. */
    const int64_t most = ((int64_t)1 << 24) / N > 0 ? ((int64_t)1 << 24) / N : 1;
    const int64_t batch = most < n ? most : n > 0 ? n : 1;
    int32_t *ids = malloc((size_t)batch * sizeof *ids);
    int32_t *items = malloc((size_t)batch * N * sizeof *items);
    float *scores = malloc((size_t)batch * N * sizeof *scores);
    int rc = ids && items && scores ? CLI_OK : CLI_FAILED;
    if (rc != CLI_OK)
        cli_error(cmd, "out of host memory for the recommendations");
    for (int64_t u0 = 0; rc == CLI_OK && u0 < n; u0 += batch) {
        const int64_t len = n - u0 < batch ? n - u0 : batch;
        for (int64_t b = 0; b < len; b++)
            ids[b] = users ? users[u0 + b] : (int32_t)(u0 + b);
        if (mf_recommend(ctx, m, len, ids, exclude, N, items, scores) != MF_OK) {
            cli_error(cmd, "%s", mf_ctx_last_error(ctx));
            rc = CLI_FAILED;
            break;
        }
        char ub[24], ib[24];
        for (int64_t b = 0; b < len; b++) {
            const char *user = cli_name(names, 0, ids[b], ub, sizeof ub);
            for (int j = 0; j < N && items[(size_t)b * N + j] >= 0; j++)
                fprintf(f, "%s %s %.6g\n", user,
                        cli_name(names, 1, items[(size_t)b * N + j], ib, sizeof ib),
                        (double)scores[(size_t)b * N + j]);
        }
    }
    const int failed = ferror(f);
    if (path && (fclose(f) != 0 || failed) && rc == CLI_OK) {
        cli_error(cmd, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        rc = CLI_FAILED;
    }
    free(ids);
    free(items);
    free(scores);
    return rc;
}
