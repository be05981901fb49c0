/* A program built against an installed mfact: compile-time and run-time versions agree,
 * and a context and a matrix work. */
#include <mfact/mfact.h>
#include <stdio.h>

int main(void)
{
    if (mf_version() != MF_VERSION_NUMBER) {
        printf("header %d, library %u\n", MF_VERSION_NUMBER, mf_version());
        return 1;
    }
    mf_ctx_opts opts;
    mf_ctx_opts_init(&opts);
    opts.backend = MF_BACKEND_CPU;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &opts) != MF_OK) {
        printf("%s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    const int32_t row[] = {1, 0}, col[] = {0, 1};
    mf_sparse *m = NULL;
    mf_status st = mf_sparse_from_coo(ctx, &m, 2, 2, 2, row, col, NULL, MF_MEMORY_HOST, 0);
    int64_t nnz = 0;
    if (st == MF_OK)
        st = mf_sparse_shape(m, NULL, NULL, &nnz);
    printf("mfact %s: %s, nnz %lld\n", mf_version_string(), mf_status_string(st), (long long)nnz);
    mf_sparse_destroy(m);
    mf_ctx_destroy(ctx);
    if (st != MF_OK || nnz != 2)
        return 1;
    printf("consumer ok\n");
    return 0;
}
