/* mfact demo FILE: load a matrix file into the library's canonical form and report what it
 * holds. */
#include <stdio.h>
#include <stdlib.h>

#include "demo.h"

static int report(mf_ctx *ctx, const demo_args *a, const mf_sparse *m, double seconds)
{
    int32_t rows, cols;
    int64_t nnz;
    mf_sparse_shape(m, &rows, &cols, &nnz);
    int64_t *ptr = demo_alloc("the row offsets", (int64_t)rows + 1, sizeof *ptr);
    float *val = demo_alloc("the values", nnz, sizeof *val);
    if (!ptr || !val) {
        free(ptr), free(val);
        return CLI_FAILED;
    }
    if (mf_sparse_get_csr(m, ptr, NULL, val, MF_MEMORY_HOST) != MF_OK) {
        cli_error("demo", "cannot read the matrix back: %s", mf_ctx_last_error(ctx));
        free(ptr), free(val);
        return CLI_FAILED;
    }
    int64_t longest = 0, empty = 0;
    for (int32_t r = 0; r < rows; r++) {
        int64_t len = ptr[r + 1] - ptr[r];
        longest = len > longest ? len : longest;
        empty += len == 0;
    }
    double sum = 0;
    for (int64_t i = 0; i < nnz; i++)
        sum += val[i];
    mf_device_info d = {.struct_size = sizeof d};
    mf_ctx_device_info(ctx, &d);
    cli_out o;
    cli_out_begin(&o, a->common.json);
    cli_out_str(&o, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    if (mf_ctx_backend(ctx) == MF_BACKEND_CPU && cli_cpu_reason()[0])
        cli_out_str(&o, "why not cuda", cli_cpu_reason());
    cli_out_str(&o, "device", d.name);
    cli_out_str(&o, "source", a->file);
    cli_out_int(&o, "rows", rows);
    cli_out_int(&o, "cols", cols);
    cli_out_int(&o, "nnz", nnz);
    cli_out_num(&o, "density", (double)nnz / ((double)rows * (double)cols));
    cli_out_int(&o, "empty rows", empty);
    cli_out_int(&o, "longest row", longest);
    cli_out_str(&o, "values", mf_sparse_has_values(m) ? "stored" : "pattern");
    cli_out_num(&o, "mean value", nnz ? sum / (double)nnz : 0.0);
    cli_out_num(&o, "load seconds", seconds);
    cli_out_end(&o);
    free(ptr), free(val);
    return CLI_OK;
}

int demo_file(mf_ctx *ctx, const demo_args *a)
{
    double t0 = cli_seconds();
    mf_sparse *m = NULL;
    mf_read_opts ro;
    cli_read_opts(&a->common, CLI_DUP_LAST, &ro); /* as the fits read it */
    if (mf_sparse_read(ctx, &m, a->file, &ro) != MF_OK) {
        cli_error("demo", "%s", mf_ctx_last_error(ctx));
        return CLI_FAILED;
    }
    int rc = report(ctx, a, m, cli_seconds() - t0);
    mf_sparse_destroy(m);
    return rc;
}
