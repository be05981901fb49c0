#include <stdio.h>

#include "cuda/cuda_backend.h"
#include "mfact/mfact.h"

#define MF_STR2(x) #x
#define MF_STR(x)  MF_STR2(x)

unsigned mf_version(void)
{
    return MF_VERSION_NUMBER;
}

const char *mf_version_string(void)
{
    return MF_STR(MF_VERSION_MAJOR) "." MF_STR(MF_VERSION_MINOR) "." MF_STR(MF_VERSION_PATCH);
}

#ifdef _OPENMP
#define MF_OPENMP_INFO "OpenMP " MF_STR(_OPENMP)
#else
#define MF_OPENMP_INFO "no OpenMP"
#endif

const char *mf_build_info(void)
{
    /* The CUDA part comes from the .cu side, which knows the toolkit. One buffer per thread:
     * callers on several threads never write one buffer at once. */
    static _Thread_local char info[256];
    if (!info[0])
        snprintf(info, sizeof info, "mfact %s; %s; %s", mf_version_string(), mf_cuda_build_info(),
                 MF_OPENMP_INFO);
    return info;
}
