// For the benchmarks that run cuSPARSE as their peer: a fatal check of its calls, with the
// call and cuSPARSE's message, as CUDA_CHECK does for the runtime.
#ifndef MFACT_BENCH_CUSPARSE_H
#define MFACT_BENCH_CUSPARSE_H

#include <cusparse.h>
#include <stdio.h>
#include <stdlib.h>

#define SP_CHECK(call)                                                                             \
    do {                                                                                           \
        cusparseStatus_t s_ = (call);                                                              \
        if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                          \
                    cusparseGetErrorString(s_));                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
