/* The cuSPARSE functions mfact calls, reached through dlopen() on first use instead of a
 * link-time dependency: libmfact.so then needs only the NVIDIA driver to load and to run
 * everything but mf_spmm on the GPU, which alone needs libcusparse.so.12 at run time.
 * (The toolkit ships no static cuSPARSE here, and the static one would add hundreds of
 * megabytes of kernels that mfact never calls.) CUDA C++ only. */
#ifndef MF_CUDA_CUSPARSE_API_H
#define MF_CUDA_CUSPARSE_API_H

#include <cusparse.h>

#include "mfact/mfact.h"

/* One pointer per function, typed from cuSPARSE's own declarations. */
typedef struct mf_cusparse_api {
    decltype(&cusparseCreate) create;
    decltype(&cusparseDestroy) destroy;
    decltype(&cusparseSetStream) set_stream;
    decltype(&cusparseGetErrorString) error_string;
    decltype(&cusparseCreateCsr) create_csr;
    decltype(&cusparseDestroySpMat) destroy_sp_mat;
    decltype(&cusparseCreateDnMat) create_dn_mat;
    decltype(&cusparseDestroyDnMat) destroy_dn_mat;
    decltype(&cusparseSpMM_bufferSize) spmm_buffer_size;
    decltype(&cusparseSpMM) spmm;
} mf_cusparse_api;

/* The loaded functions (loaded once per process, thread-safely), or MF_ERR_UNSUPPORTED on
 * ctx naming the library that could not be loaded and what needs it. */
mf_status mf_cusparse_api_get(mf_ctx *ctx, const mf_cusparse_api **api);

#endif
