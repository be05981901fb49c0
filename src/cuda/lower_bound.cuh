// A device binary search for the CUDA engines, so that none carries its own copy (ALS's
// segment split uses it). CUDA C++, header only.
#ifndef MF_CUDA_LOWER_BOUND_CUH
#define MF_CUDA_LOWER_BOUND_CUH

#include <stdint.h>

// The first index i in [lo, hi) with a[i] >= x (hi when none), a ascending over [lo, hi).
__device__ __forceinline__ int64_t mf_lower_bound(const int64_t *a, int64_t lo, int64_t hi,
                                                  int64_t x)
{
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
