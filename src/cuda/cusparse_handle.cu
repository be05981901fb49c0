// cuSPARSE for the context: the library loaded on first use (cusparse_api.h says why), and
// the context's handle, made on the first call that needs it (most contexts never do) and
// rebound to the context's current stream on every use.
#include <pthread.h>
#include <stdio.h>

#include "cuda/cuda_internal.h"
#include "cuda/cusparse_api.h"
#include "cuda/dynamic_library.h"

static mf_cusparse_api loaded;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

// Every CUDA 12 and 13 toolkit ships cuSPARSE as libcusparse.so.12; the unversioned name
// is a development symlink, tried last.
static void load(void)
{
    static const char *const names[] = {"libcusparse.so.12", "libcusparse.so"};
    mf_cusparse_api api;
    const mf_dl_symbol table[] = {
        {(void **)&api.create, "cusparseCreate"},
        {(void **)&api.destroy, "cusparseDestroy"},
        {(void **)&api.set_stream, "cusparseSetStream"},
        {(void **)&api.error_string, "cusparseGetErrorString"},
        {(void **)&api.create_csr, "cusparseCreateCsr"},
        {(void **)&api.destroy_sp_mat, "cusparseDestroySpMat"},
        {(void **)&api.create_dn_mat, "cusparseCreateDnMat"},
        {(void **)&api.destroy_dn_mat, "cusparseDestroyDnMat"},
        {(void **)&api.spmm_buffer_size, "cusparseSpMM_bufferSize"},
        {(void **)&api.spmm, "cusparseSpMM"},
    };
    if (mf_dl_load(names, 2, table, (int)(sizeof table / sizeof *table), load_error,
                   sizeof load_error))
        loaded = api; // published by pthread_once's return
}

mf_status mf_cusparse_api_get(mf_ctx *ctx, const mf_cusparse_api **api)
{
    pthread_once(&load_once, load);
    if (!loaded.spmm)
        return mf_device_fail(
            ctx, MF_ERR_UNSUPPORTED,
            "cuSPARSE could not be loaded (%s): mf_spmm on the GPU needs the CUDA "
            "toolkit's libcusparse.so.12 on the library path; nothing else does",
            load_error);
    *api = &loaded;
    return MF_OK;
}

mf_status mf_cuda_cusparse(mf_ctx *ctx, void **handle, const mf_cusparse_api **api)
{
    mf_status st = mf_cusparse_api_get(ctx, api);
    if (st != MF_OK)
        return st;
    mf_cuda *c = mf_cuda_of(ctx);
    if (!c->cusparse) {
        cusparseHandle_t h;
        cusparseStatus_t s = (*api)->create(&h);
        if (s != CUSPARSE_STATUS_SUCCESS)
            return mf_device_fail(
                ctx, s == CUSPARSE_STATUS_ALLOC_FAILED ? MF_ERR_OUT_OF_MEMORY : MF_ERR_CUDA,
                "cusparseCreate failed: %s", (*api)->error_string(s));
        c->cusparse = h;
    }
    cusparseStatus_t s = (*api)->set_stream((cusparseHandle_t)c->cusparse, c->stream);
    if (s != CUSPARSE_STATUS_SUCCESS)
        return mf_device_fail(ctx, MF_ERR_CUDA, "cusparseSetStream failed: %s",
                              (*api)->error_string(s));
    *handle = c->cusparse;
    return MF_OK;
}

void mf_cuda_cusparse_destroy(mf_cuda *c)
{
    // A handle exists only if the library was loaded.
    if (c->cusparse)
        loaded.destroy((cusparseHandle_t)c->cusparse);
    c->cusparse = NULL;
}
