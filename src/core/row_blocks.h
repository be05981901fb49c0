/* A thread's even block of a matrix's rows inside an OpenMP parallel region (the whole
 * range, thread 0 of 1, in a build without OpenMP): the host passes over a matrix that
 * keep its order hand each thread the rows [r0, r1) of thread t of nt, in thread order. */
#ifndef MF_CORE_ROW_BLOCKS_H
#define MF_CORE_ROW_BLOCKS_H

#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct mf_row_block {
    int t, nt;      /* this thread, of how many */
    int32_t r0, r1; /* its rows */
} mf_row_block;

static inline mf_row_block mf_row_block_of(int32_t rows)
{
#ifdef _OPENMP
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int t = 0, nt = 1;
#endif
    mf_row_block b = {t, nt, (int32_t)((int64_t)rows * t / nt),
                      (int32_t)((int64_t)rows * (t + 1) / nt)};
    return b;
}

#endif
