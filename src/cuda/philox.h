/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
 * counter-based generator. Each output block is a pure function of (counter, key), so any
 * element of any stream can be computed on its own, by any thread, on the CPU or the GPU,
 * with the same bits. This header compiles as C11 and as CUDA C++ (host and device). */
#ifndef MF_CUDA_PHILOX_H
#define MF_CUDA_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define MF_HD __host__ __device__ __forceinline__
#include <math.h>
#else
#define MF_HD static inline
#include <math.h>
#endif

typedef struct mf_philox_block {
    uint32_t v[4];
} mf_philox_block;

MF_HD uint32_t mf_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* Ten rounds of Philox4x32 on counter c with key k. */
MF_HD mf_philox_block mf_philox4x32_10(mf_philox_block c, uint32_t k0, uint32_t k1)
{
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mf_philox_mulhilo(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = mf_philox_mulhilo(0xCD9E8D57u, c.v[2], &hi1);
        mf_philox_block n;
        n.v[0] = hi1 ^ c.v[1] ^ k0;
        n.v[1] = lo1;
        n.v[2] = hi0 ^ c.v[3] ^ k1;
        n.v[3] = lo0;
        c = n;
        k0 += 0x9E3779B9u; /* the golden-ratio and sqrt(3)-1 Weyl increments */
        k1 += 0xBB67AE85u;
    }
    return c;
}

/* Block number `block` of stream `stream` under `seed`: 4 words, so element i of a stream
 * is word i % 4 of block i / 4. */
MF_HD mf_philox_block mf_philox_stream_block(uint64_t seed, uint64_t stream, uint64_t block)
{
    mf_philox_block c;
    c.v[0] = (uint32_t)block;
    c.v[1] = (uint32_t)(block >> 32);
    c.v[2] = (uint32_t)stream;
    c.v[3] = (uint32_t)(stream >> 32);
    return mf_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* A word to a float in [0, 1): its top 24 bits, so every value is exact. */
MF_HD float mf_philox_unit_float(uint32_t word)
{
    return (float)(word >> 8) * (1.0f / 16777216.0f);
}

/* lo + (hi - lo) * u with one explicit fused multiply-add, so the CPU and GPU round alike
 * (neither compiler may contract or split it), pulled below hi when rounding reaches it. */
MF_HD float mf_philox_scale(float u, float lo, float hi)
{
    float r = fmaf(u, hi - lo, lo);
    return r < hi ? r : nextafterf(hi, lo);
}

#endif
