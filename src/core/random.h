#ifndef MF_CORE_RANDOM_H
#define MF_CORE_RANDOM_H

#include <stdint.h>

#include "mfact/mfact.h"

/* The host side of mf_random_uniform: out[i] for i in [0, n), OpenMP-parallel. */
void mf_random_uniform_host(float *out, int64_t n, float lo, float hi, uint64_t seed,
                            uint64_t stream, int threads);

#endif
