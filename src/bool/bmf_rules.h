/* The rules of the Boolean search that the CPU and the CUDA engines must apply alike, so
 * that a seed gives the same factors on both: the random draws, the fixed-point weighted
 * error, and which move a line makes. C11 and CUDA C++ (host and device). */
#ifndef MF_BMF_RULES_H
#define MF_BMF_RULES_H

#include <math.h>
#include <stdint.h>

#include "cuda/philox.h"

/* The false-negative weight in fixed point: a move's change of weight * fn + fp is
 * (BMF_WSCALE * dfp + wq * dfn) / BMF_WSCALE with integer wq, so deltas are exact
 * integers and every engine compares them alike. */
#define BMF_WSCALE 256
/* Philox blocks per line: block 0 is the line's move draw, blocks 1.. its per-bit draws. */
#define BMF_BLOCKS_PER_LINE 512
/* Draw purposes below this are initializations; sweeps use BMF_PURPOSE_SWEEP + 2s + side. */
#define BMF_PURPOSE_INIT_A 0
#define BMF_PURPOSE_INIT_B 1
#define BMF_PURPOSE_SAMPLE 2
#define BMF_PURPOSE_SWEEP  16

/* A line's state for a move: its bit l (0 or 1) and the four counts over the other side's
 * lines that hold factor l: on a 0 bit, how many uncovered zeros (fp if set) and uncovered
 * ones (fn fixed); on a 1 bit, how many ones covered by l alone (fn if cleared) and zeros
 * covered by l alone (fp fixed). */
MF_HD int64_t bmf_delta(int bit, int64_t a, int64_t b, int64_t wq)
{
    /* bit 0: a = new false positives, b = false negatives fixed.
     * bit 1: a = new false negatives,  b = false positives fixed. */
    return bit ? wq * a - (int64_t)BMF_WSCALE * b : (int64_t)BMF_WSCALE * a - wq * b;
}

/* Block `block` of the draws of one line in one purpose of one instance. */
MF_HD mf_philox_block bmf_draw(uint64_t seed, int instance, uint32_t purpose, int64_t line,
                               uint32_t block)
{
    uint64_t stream = ((uint64_t)(uint32_t)instance << 32) | purpose;
    return mf_philox_stream_block(seed, stream, (uint64_t)line * BMF_BLOCKS_PER_LINE + block);
}

MF_HD uint32_t bmf_purpose_sweep(int sweep, int side)
{
    return BMF_PURPOSE_SWEEP + 2u * (uint32_t)sweep + (uint32_t)side;
}

/* A 24-bit uniform in [0, 1) as an integer, compared against a probability scaled to
 * 2^24, so no float rounding differs between engines. */
MF_HD uint32_t bmf_unit24(uint32_t word)
{
    return word >> 8;
}
MF_HD uint32_t bmf_prob24(double p)
{
    double s = p * 16777216.0;
    return s >= 16777216.0 ? 16777216u : (uint32_t)s;
}

/* Word w of a random line whose bits are 1 with probability p24 / 2^24 (bits past k 0). */
MF_HD uint64_t bmf_random_word(uint64_t seed, int instance, uint32_t purpose, int64_t line, int w,
                               int k, uint32_t p24)
{
    uint64_t word = 0;
    for (int b = 0; b < 64 && w * 64 + b < k; b += 4) {
        int l = w * 64 + b;
        mf_philox_block r = bmf_draw(seed, instance, purpose, line, 1u + (uint32_t)l / 4);
        for (int t = 0; t < 4; t++)
            if (l + t < k && bmf_unit24(r.v[t]) < p24)
                word |= (uint64_t)1 << (b + t);
    }
    return word;
}

/* The tie-break order of a line's single-bit move: bits rank by delta, then by their
 * distance from a random start, so equal deltas go to a random bit. */
MF_HD int bmf_rank_start(mf_philox_block r, int k)
{
    return (int)(r.v[0] % (uint32_t)k);
}
MF_HD int bmf_better(int64_t d1, int rot1, int64_t d2, int rot2)
{
    return d1 < d2 || (d1 == d2 && rot1 < rot2);
}

/* Whether two factor lines (kw words each: a row of A, a column of B) share a factor, i.e.
 * whether they cover their cell. */
MF_HD int bmf_share(const uint64_t *a, const uint64_t *b, int kw)
{
    for (int t = 0; t < kw; t++)
        if (a[t] & b[t])
            return 1;
    return 0;
}

/* Whether a move of weighted delta d (fixed point) is taken: always when it lowers the
 * error; when it does not, with probability exp(-d / T) when T > 0 (Metropolis), drawn
 * from the line's word `u`. */
MF_HD int bmf_accept(int64_t d, double temperature, uint32_t u)
{
    if (d < 0)
        return 1;
    if (!(temperature > 0.0))
        return 0;
    double p = exp(-((double)d / BMF_WSCALE) / temperature);
    return (double)bmf_unit24(u) < p * 16777216.0;
}

#endif
